//! Stages with their own threads: parallel map, prefetch, parallel interleave. Each iterator
//! owns its threads; dropping it cancels them and waits for any element in progress.
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::autotune::{Knob, KnobKind, AUTOTUNE};
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

/// The knob of a stage given `n` (a positive number, or AUTOTUNE).
fn knob_for(kind: KnobKind, n: i64, max: usize) -> Arc<Knob> {
    if n == AUTOTUNE {
        Knob::new(kind, 1, max, true)
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
    fn inputs(&self) -> Vec<Arc<dyn Node>> {
        vec![self.input.clone()]
    }
    fn describe(&self) -> String {
        // Parallelism does not change the elements; the function does.
        self.name.clone()
    }
    fn cardinality(&self) -> Cardinality {
        self.input.cardinality()
    }
    fn knobs(&self) -> Vec<Arc<Knob>> {
        vec![self.knob.clone()]
    }
    fn iterate(&self, ctx: &Ctx) -> Result<Box<dyn ElementIter>> {
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
        });
        let handles = (0..threads)
            .map(|i| {
                let s = shared.clone();
                std::thread::Builder::new()
                    .name(format!("ff-data-map-{i}"))
                    .spawn(move || s.work())
                    .map_err(|e| DataError::Invalid(format!("{}: cannot start a worker thread: {e}", ctx.path)))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Box::new(ParallelMapIter { shared, handles, deterministic: self.deterministic, last_return: None }))
    }
}

#[derive(Default)]
struct MapState {
    results: BTreeMap<u64, Result<Element>>,
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
}

impl MapShared {
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
                    if st.active < p && st.claimed < 2 * p {
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
                drop(st);
                self.workers.notify_all();
                self.consumer.notify_all();
                return;
            };
            let start = Instant::now();
            let out = item.and_then(|e| in_stage(guarded(|| (self.f)(e)), &self.ctx));
            let bytes = out.as_ref().map_or(0, |e| bytes_of(e));
            self.knob.record_work(start.elapsed(), bytes);
            let mut st = lock(&self.state);
            st.active -= 1;
            st.results.insert(seq, out);
            drop(st);
            self.consumer.notify_all();
        }
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
        let r = loop {
            let got = if self.deterministic {
                let k = st.next_return;
                st.results.remove(&k)
            } else {
                st.results.pop_first().map(|(_, r)| r)
            };
            if let Some(r) = got {
                st.next_return += 1;
                st.claimed -= 1;
                break Some(r);
            }
            let finished = match st.end {
                Some(end) if self.deterministic => st.next_return >= end,
                Some(_) => st.claimed == 0,
                None => false,
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
    fn inputs(&self) -> Vec<Arc<dyn Node>> {
        vec![self.input.clone()]
    }
    fn describe(&self) -> String {
        String::new()
    }
    fn cardinality(&self) -> Cardinality {
        self.input.cardinality()
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
            .map_err(|e| DataError::Invalid(format!("{stage}: cannot start the prefetch thread: {e}")))?;
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
