//! Stages with their own threads: parallel map, prefetch, parallel interleave. Each iterator
//! owns its threads; dropping it cancels them and waits for any element in progress.
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::autotune::{Knob, KnobKind, AUTOTUNE};
use crate::batch::{BatchBuilder, Rows};
use crate::dataset::{in_stage, iterate_input, Cardinality, Ctx, Element, ElementIter, Next, Node};
use crate::tensors::bytes_of;
use crate::transform::{ElemFn, Interleave};
use crate::{DataError, Result};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs `f`, turning a panic into an element error.
fn guarded(f: impl FnOnce() -> Result<Element>) -> Result<Element> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let what = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".into());
        Err(DataError::msg(format!("the function panicked: {what}")))
    })
}

/// The knob of a stage given `n` (a positive number, or AUTOTUNE). A tuned parallelism
/// starts at the CPU budget (as tf.data's does) and comes down when the consumer cannot use
/// it; a tuned buffer starts at one element and grows while the consumer waits.
fn knob_for(kind: KnobKind, n: i64, max: usize) -> Arc<Knob> {
    if n == AUTOTUNE {
        let start = if kind == KnobKind::Parallelism { max } else { 1 };
        Knob::new(kind, start, max, true)
    } else {
        Knob::new(kind, n.max(1) as usize, n.max(1) as usize, false)
    }
}

pub(crate) struct ParallelMap {
    input: Arc<dyn Node>,
    f: ElemFn,
    name: String,
    requested: i64,
    deterministic: bool,
    knob: Arc<Knob>,
}

impl ParallelMap {
    pub(crate) fn new(input: Arc<dyn Node>, f: ElemFn, name: String, n: i64, deterministic: bool) -> ParallelMap {
        let knob = knob_for(KnobKind::Parallelism, n, usize::MAX);
        ParallelMap { input, f, name, requested: n, deterministic, knob }
    }
}

impl Node for ParallelMap {
    fn kind(&self) -> &'static str {
        "ParallelMap"
    }
    fn input(&self) -> Option<&Arc<dyn Node>> {
        Some(&self.input)
    }
    fn describe(&self) -> String {
        // Parallelism does not change the elements; the function does.
        self.name.clone()
    }
    fn knobs(&self) -> Vec<Arc<Knob>> {
        vec![self.knob.clone()]
    }
    fn iterate(&self, ctx: &Ctx) -> Result<Box<dyn ElementIter>> {
        self.start(ctx, None)
    }
    fn iterate_batched(
        &self,
        ctx: &Ctx,
        size: usize,
        drop_remainder: bool,
        batch_path: &str,
    ) -> Option<Result<Box<dyn ElementIter>>> {
        Some(self.start(ctx, Some(BatchSpec { size, drop_remainder, path: batch_path.to_string() })))
    }
}

impl ParallelMap {
    fn start(&self, ctx: &Ctx, batch: Option<BatchSpec>) -> Result<Box<dyn ElementIter>> {
        if self.requested != AUTOTUNE && self.requested <= 0 {
            return Err(DataError::Invalid(format!(
                "{}: num_parallel_calls must be positive or AUTOTUNE (-1), got {}",
                ctx.path, self.requested
            )));
        }
        self.knob.attach(&ctx.path, &ctx.budget);
        let threads = if self.requested == AUTOTUNE { ctx.budget.cpu.max(1) } else { self.requested as usize };
        let input = iterate_input(&self.input, ctx)?;
        let shared = Arc::new(MapShared {
            state: Mutex::new(MapState::default()),
            workers: Condvar::new(),
            consumer: Condvar::new(),
            input: Mutex::new(MapInput { it: input, next_seq: 0, exhausted: false }),
            f: self.f.clone(),
            knob: self.knob.clone(),
            ctx: ctx.clone(),
            batch,
        });
        let handles = (0..threads)
            .map(|i| {
                let s = shared.clone();
                std::thread::Builder::new()
                    .name(format!("ff-data-map-{i}"))
                    .spawn(move || s.work())
                    .map_err(|e| DataError::pipeline(format!("{}: cannot start a worker thread", ctx.path), e))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Box::new(ParallelMapIter { shared, handles, deterministic: self.deterministic, last_return: None }))
    }
}

/// `batch` fused into a parallel map (tf.data's map_and_batch fusion): each worker copies
/// the element it made straight into its row of the batch while the element is still in its
/// cache, and the worker that completes a batch hands it over, so no other thread stacks
/// batches. Batches come out in order; an element's error makes its batch that error.
#[derive(Clone)]
struct BatchSpec {
    size: usize,
    drop_remainder: bool,
    /// The batch stage's path (for shape-mismatch errors).
    path: String,
}

/// A batch being filled, with its first error and how many of its elements are done.
struct Filling {
    assembly: Option<BatchBuilder>,
    error: Option<DataError>,
    done: usize,
}

#[derive(Default)]
struct MapState {
    /// Finished elements (or batches, when fused), by sequence number, with how many input
    /// elements each one accounts for.
    results: BTreeMap<u64, (Result<Element>, usize)>,
    /// Batches being filled (fused mode).
    filling: BTreeMap<u64, Filling>,
    next_return: u64,
    /// Elements taken from the input and not yet returned (in flight or ready).
    claimed: usize,
    active: usize,
    end: Option<u64>,
    cancelled: bool,
    workers_alive: usize,
}

struct MapInput {
    it: Box<dyn ElementIter>,
    next_seq: u64,
    exhausted: bool,
}

struct MapShared {
    state: Mutex<MapState>,
    workers: Condvar,
    consumer: Condvar,
    input: Mutex<MapInput>,
    f: ElemFn,
    knob: Arc<Knob>,
    ctx: Ctx,
    batch: Option<BatchSpec>,
}

impl MapShared {
    /// Elements that may be claimed and not yet returned: two batches when fused (one filling,
    /// one waiting), else twice the parallelism.
    fn claim_limit(&self, parallelism: usize) -> usize {
        match &self.batch {
            Some(b) => (2 * b.size).max(2 * parallelism),
            None => 2 * parallelism,
        }
    }

    fn work(&self) {
        lock(&self.state).workers_alive += 1;
        self.work_loop();
        let mut st = lock(&self.state);
        st.workers_alive -= 1;
        drop(st);
        self.consumer.notify_all();
    }

    fn work_loop(&self) {
        loop {
            {
                let mut st = lock(&self.state);
                loop {
                    if st.cancelled || st.end.is_some() {
                        return;
                    }
                    let p = self.knob.get();
                    if st.active < p && st.claimed < self.claim_limit(p) {
                        break;
                    }
                    st = self.workers.wait(st).unwrap_or_else(|p| p.into_inner());
                }
                st.active += 1;
                st.claimed += 1;
            }
            let (seq, item) = {
                let mut inp = lock(&self.input);
                let seq = inp.next_seq;
                inp.next_seq += 1;
                let item = if inp.exhausted { None } else { inp.it.next() };
                if item.is_none() {
                    inp.exhausted = true;
                }
                (seq, item)
            };
            let Some(item) = item else {
                let mut st = lock(&self.state);
                st.active -= 1;
                st.claimed -= 1;
                st.end = Some(st.end.map_or(seq, |e| e.min(seq)));
                if let Some(spec) = &self.batch {
                    // The last, short batch may be complete already.
                    let end = st.end.unwrap_or(seq);
                    let last = end / spec.size as u64;
                    self.finish_if_complete(&mut st, spec, last);
                }
                drop(st);
                self.workers.notify_all();
                self.consumer.notify_all();
                return;
            };
            let start = Instant::now();
            static PRODUCE: ferroflow_profiler::LazyName = ferroflow_profiler::LazyName::new();
            let span = ferroflow_profiler::enabled()
                .then(|| PRODUCE.get(|| "ParallelMapProduce".into()))
                .and_then(|id| ferroflow_profiler::Span::with_id(id, ferroflow_profiler::Kind::Region, 0));
            let out = item.and_then(|e| in_stage(guarded(|| (self.f)(e)), &self.ctx));
            drop(span);
            let bytes = out.as_ref().map_or(0, |e| bytes_of(e));
            if let Some(spec) = &self.batch {
                self.deliver_to_batch(spec, seq, out);
                self.knob.record_work(start.elapsed(), bytes);
                continue;
            }
            self.knob.record_work(start.elapsed(), bytes);
            let mut st = lock(&self.state);
            st.active -= 1;
            st.results.insert(seq, (out, 1));
            drop(st);
            self.consumer.notify_all();
        }
    }

    /// Fused mode: puts element `seq` into its batch (copying its bytes into the batch's row
    /// outside the lock) and hands the batch over when it is complete.
    fn deliver_to_batch(&self, spec: &BatchSpec, seq: u64, out: Result<Element>) {
        let size = spec.size as u64;
        let (b, row) = (seq / size, (seq % size) as usize);
        let mut copy: Option<(Rows, Element)> = None;
        {
            let mut st = lock(&self.state);
            st.active -= 1;
            let f = st.filling.entry(b).or_insert(Filling { assembly: None, error: None, done: 0 });
            match out {
                Err(e) => {
                    f.error.get_or_insert(e);
                }
                Ok(_) if f.error.is_some() => {}
                Ok(e) => {
                    let placed = BatchBuilder::add(&mut f.assembly, seq, b * size, spec.size, e);
                    match placed {
                        Ok(p) => copy = p,
                        Err(err) => f.error = Some(err.in_stage(&spec.path)),
                    }
                }
            }
        }
        if let Some((rows, e)) = copy {
            // SAFETY: the rows come from `place` on this batch, which stays alive until this
            // element is counted done (below); row `row` is this element's alone.
            unsafe { BatchBuilder::write_row(&rows, row, &e) };
        }
        let mut st = lock(&self.state);
        if let Some(f) = st.filling.get_mut(&b) {
            f.done += 1;
        }
        self.finish_if_complete(&mut st, spec, b);
    }

    /// Hands batch `b` over if all its elements are done (its size known from the end of the
    /// input for the last one); a short last batch is dropped under `drop_remainder`.
    fn finish_if_complete(&self, st: &mut MapState, spec: &BatchSpec, b: u64) {
        let size = spec.size as u64;
        let expected = match st.end {
            Some(end) => end.saturating_sub(b * size).min(size) as usize,
            None => spec.size,
        };
        let Some(f) = st.filling.get(&b) else { return };
        if expected == 0 || f.done < expected {
            return;
        }
        let Some(f) = st.filling.remove(&b) else { return };
        if expected < spec.size && spec.drop_remainder {
            st.claimed -= f.done;
            return;
        }
        let result = match (f.error, f.assembly) {
            (Some(e), _) => Err(e),
            // SAFETY: all `expected` rows are done: each was written (or the batch has an
            // error), and their writers have finished (counted under this lock).
            (None, Some(a)) => unsafe { a.finish(expected) }.map_err(|e| e.in_stage(&spec.path)),
            (None, None) => Err(DataError::msg("a batch finished without elements")),
        };
        st.results.insert(b, (result, f.done));
        self.consumer.notify_all();
    }
}

struct ParallelMapIter {
    shared: Arc<MapShared>,
    handles: Vec<JoinHandle<()>>,
    deterministic: bool,
    last_return: Option<Instant>,
}

impl ElementIter for ParallelMapIter {
    fn next(&mut self) -> Next {
        let demand = self.last_return.map_or(Duration::ZERO, |t| t.elapsed());
        let start = Instant::now();
        let s = &self.shared;
        let mut st = lock(&s.state);
        let batch = s.batch.as_ref().map(|b| (b.size as u64, b.drop_remainder));
        let r = loop {
            let got = if self.deterministic || batch.is_some() {
                let k = st.next_return;
                st.results.remove(&k)
            } else {
                st.results.pop_first().map(|(_, r)| r)
            };
            if let Some((r, count)) = got {
                st.next_return += 1;
                st.claimed -= count;
                break Some(r);
            }
            let finished = match (st.end, batch) {
                (Some(end), Some((size, drop))) => st.next_return >= if drop { end / size } else { end.div_ceil(size) },
                (Some(end), None) if self.deterministic => st.next_return >= end,
                (Some(_), None) => st.claimed == 0,
                (None, _) => false,
            };
            if finished || (st.workers_alive == 0 && st.claimed == 0 && st.end.is_some()) {
                break None;
            }
            st = s.consumer.wait(st).unwrap_or_else(|p| p.into_inner());
        };
        drop(st);
        s.workers.notify_all();
        s.knob.record_request(demand, start.elapsed());
        self.last_return = Some(Instant::now());
        r
    }
}

impl Drop for ParallelMapIter {
    fn drop(&mut self) {
        lock(&self.shared.state).cancelled = true;
        self.shared.workers.notify_all();
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

pub(crate) struct Prefetch {
    input: Arc<dyn Node>,
    requested: i64,
    knob: Arc<Knob>,
}

impl Prefetch {
    pub(crate) fn new(input: Arc<dyn Node>, n: i64) -> Prefetch {
        Prefetch { input, requested: n, knob: knob_for(KnobKind::BufferSize, n, usize::MAX) }
    }
}

impl Node for Prefetch {
    fn kind(&self) -> &'static str {
        "Prefetch"
    }
    fn input(&self) -> Option<&Arc<dyn Node>> {
        Some(&self.input)
    }
    fn describe(&self) -> String {
        String::new()
    }
    fn knobs(&self) -> Vec<Arc<Knob>> {
        vec![self.knob.clone()]
    }
    fn iterate(&self, ctx: &Ctx) -> Result<Box<dyn ElementIter>> {
        if self.requested != AUTOTUNE && self.requested < 0 {
            return Err(DataError::Invalid(format!(
                "{}: buffer_size must be positive or AUTOTUNE (-1), got {}",
                ctx.path, self.requested
            )));
        }
        self.knob.attach(&ctx.path, &ctx.budget);
        let input = iterate_input(&self.input, ctx)?;
        let ram = (self.requested == AUTOTUNE).then_some(ctx.budget.ram_bytes);
        PrefetchIter::start(input, self.knob.clone(), ram, &ctx.path).map(|p| Box::new(p) as Box<dyn ElementIter>)
    }
}

#[derive(Default)]
struct PrefetchState {
    buffer: VecDeque<Result<Element>>,
    done: bool,
    cancelled: bool,
}

struct PrefetchShared {
    state: Mutex<PrefetchState>,
    producer: Condvar,
    consumer: Condvar,
    knob: Arc<Knob>,
    /// The RAM budget an AUTOTUNE buffer stays within.
    ram: Option<u64>,
}

/// A bounded buffer filled ahead of the consumer by one thread.
pub(crate) struct PrefetchIter {
    shared: Arc<PrefetchShared>,
    handle: Option<JoinHandle<()>>,
    last_return: Option<Instant>,
}

impl PrefetchIter {
    pub(crate) fn start(
        mut input: Box<dyn ElementIter>,
        knob: Arc<Knob>,
        ram: Option<u64>,
        stage: &str,
    ) -> Result<PrefetchIter> {
        let shared = Arc::new(PrefetchShared {
            state: Mutex::new(PrefetchState::default()),
            producer: Condvar::new(),
            consumer: Condvar::new(),
            knob,
            ram,
        });
        let s = shared.clone();
        let handle = std::thread::Builder::new()
            .name("ff-data-prefetch".into())
            .spawn(move || loop {
                {
                    let mut st = lock(&s.state);
                    while !st.cancelled && st.buffer.len() >= s.capacity() {
                        st = s.producer.wait(st).unwrap_or_else(|p| p.into_inner());
                    }
                    if st.cancelled {
                        return;
                    }
                }
                let start = Instant::now();
                let item = guarded_next(&mut *input);
                let bytes = match &item {
                    Some(Ok(e)) => bytes_of(e),
                    _ => 0,
                };
                s.knob.record_work(start.elapsed(), bytes);
                let mut st = lock(&s.state);
                match item {
                    Some(r) => st.buffer.push_back(r),
                    None => st.done = true,
                }
                let done = st.done;
                drop(st);
                s.consumer.notify_all();
                if done {
                    return;
                }
            })
            .map_err(|e| DataError::pipeline(format!("{stage}: cannot start the prefetch thread"), e))?;
        Ok(PrefetchIter { shared, handle: Some(handle), last_return: None })
    }
}

/// The input's next element; a panic in it becomes an element error.
fn guarded_next(input: &mut dyn ElementIter) -> Next {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| input.next())) {
        Ok(n) => n,
        Err(_) => Some(Err(DataError::msg("the input panicked"))),
    }
}

impl PrefetchShared {
    /// Elements the buffer may hold now: the knob's value, within the RAM budget.
    fn capacity(&self) -> usize {
        let n = self.knob.get();
        match self.ram {
            Some(ram) => {
                let each = self.knob.element_bytes().max(1);
                let fit = (ram / each).max(1) as usize;
                self.knob.set_max(fit);
                n.min(fit)
            }
            None => n,
        }
    }
}

impl ElementIter for PrefetchIter {
    fn next(&mut self) -> Next {
        let demand = self.last_return.map_or(Duration::ZERO, |t| t.elapsed());
        let start = Instant::now();
        let s = &self.shared;
        let mut st = lock(&s.state);
        let r = loop {
            if let Some(r) = st.buffer.pop_front() {
                break Some(r);
            }
            if st.done {
                break None;
            }
            st = s.consumer.wait(st).unwrap_or_else(|p| p.into_inner());
        };
        drop(st);
        s.producer.notify_all();
        s.knob.record_request(demand, start.elapsed());
        self.last_return = Some(Instant::now());
        r
    }
}

impl Drop for PrefetchIter {
    fn drop(&mut self) {
        lock(&self.shared.state).cancelled = true;
        self.shared.producer.notify_all();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Interleave whose open datasets are read ahead by their own threads (at most
/// `num_parallel_calls` of them, or the CPU budget for AUTOTUNE).
pub(crate) struct ParallelInterleave {
    inner: Interleave,
    requested: i64,
}

impl ParallelInterleave {
    pub(crate) fn new(inner: Interleave, requested: i64) -> ParallelInterleave {
        ParallelInterleave { inner, requested }
    }
}

impl Node for ParallelInterleave {
    fn kind(&self) -> &'static str {
        "ParallelInterleave"
    }
    fn inputs(&self) -> Vec<Arc<dyn Node>> {
        self.inner.inputs()
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn cardinality(&self) -> Cardinality {
        Cardinality::Unknown
    }
    fn iterate(&self, ctx: &Ctx) -> Result<Box<dyn ElementIter>> {
        if self.requested != AUTOTUNE && self.requested <= 0 {
            return Err(DataError::Invalid(format!(
                "{}: num_parallel_calls must be positive or AUTOTUNE (-1), got {}",
                ctx.path, self.requested
            )));
        }
        let threads = if self.requested == AUTOTUNE { ctx.budget.cpu.max(1) } else { self.requested as usize };
        self.inner.iterate_with_readers(ctx, threads)
    }
}
