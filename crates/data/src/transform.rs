//! Element-wise and sequencing transformations that run on the consumer's thread: map,
//! filter, flat_map, interleave (sequential), zip, concatenate, repeat, take, skip, shard,
//! enumerate, unbatch, ignore_errors.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ferroflow_tensor::Tensor;

use crate::dataset::{in_stage, invalid, iterate_input, Cardinality, Ctx, Element, ElementIter, FnIter, Next, Node};
use crate::structure::Structure;
use crate::tensors::{row, rows};
use crate::{DataError, Dataset, Result};

/// A function from one element's components to another's.
pub(crate) type ElemFn = Arc<dyn Fn(Element) -> Result<Element> + Send + Sync>;

/// The typed function `f` over components.
pub(crate) fn elem_fn<T: Structure, U: Structure>(f: impl Fn(T) -> Result<U> + Send + Sync + 'static) -> ElemFn {
    Arc::new(move |e: Element| Ok(f(T::unflatten(e)?)?.flatten()))
}

/// A name for a user function in fingerprints: its type (a closure's type names where it
/// was written) unless the user named it.
pub(crate) fn fn_name<F>(name: Option<&str>) -> String {
    name.map_or_else(|| std::any::type_name::<F>().to_string(), str::to_string)
}

pub(crate) struct Map {
    pub(crate) input: Arc<dyn Node>,
    pub(crate) f: ElemFn,
    pub(crate) name: String,
}

impl Node for Map {
    fn kind(&self) -> &'static str {
        "Map"
    }
    fn input(&self) -> Option<&Arc<dyn Node>> {
        Some(&self.input)
    }
    fn describe(&self) -> String {
        self.name.clone()
    }
    fn iterate(&self, ctx: &Ctx) -> Result<Box<dyn ElementIter>> {
        let mut input = iterate_input(&self.input, ctx)?;
        let f = self.f.clone();
        let ctx = ctx.clone();
        Ok(Box::new(FnIter(move || Some(input.next()?.and_then(|e| in_stage(f(e), &ctx))))))
    }
}

/// A predicate over one element's components.
type Predicate = Arc<dyn Fn(&Element) -> Result<bool> + Send + Sync>;

struct Filter {
    input: Arc<dyn Node>,
    pred: Predicate,
    name: String,
}

impl Node for Filter {
    fn kind(&self) -> &'static str {
        "Filter"
    }
    fn input(&self) -> Option<&Arc<dyn Node>> {
        Some(&self.input)
    }
    fn describe(&self) -> String {
        self.name.clone()
    }
    fn cardinality(&self) -> Cardinality {
        match self.input.cardinality() {
            Cardinality::Infinite => Cardinality::Infinite,
            _ => Cardinality::Unknown,
        }
    }
    fn iterate(&self, ctx: &Ctx) -> Result<Box<dyn ElementIter>> {
        let mut input = iterate_input(&self.input, ctx)?;
        let pred = self.pred.clone();
        let ctx = ctx.clone();
        Ok(Box::new(FnIter(move || loop {
            match input.next()? {
                Ok(e) => match in_stage(pred(&e), &ctx) {
                    Ok(true) => return Some(Ok(e)),
                    Ok(false) => continue,
                    Err(err) => return Some(Err(err)),
                },
                Err(err) => return Some(Err(err)),
            }
        })))
    }
}

/// A function from an element to a dataset (flat_map, interleave).
pub(crate) type DatasetFn = Arc<dyn Fn(Element) -> Result<Arc<dyn Node>> + Send + Sync>;

pub(crate) struct Interleave {
    pub(crate) input: Arc<dyn Node>,
    pub(crate) f: DatasetFn,
    pub(crate) name: String,
    pub(crate) cycle_length: usize,
    pub(crate) block_length: usize,
}

impl Node for Interleave {
    fn kind(&self) -> &'static str {
        if self.cycle_length == 1 && self.block_length == 1 {
            "FlatMap"
        } else {
            "Interleave"
        }
    }
    fn input(&self) -> Option<&Arc<dyn Node>> {
        Some(&self.input)
    }
    fn describe(&self) -> String {
        format!("{},{},{}", self.name, self.cycle_length, self.block_length)
    }
    fn cardinality(&self) -> Cardinality {
        Cardinality::Unknown
    }
    fn iterate(&self, ctx: &Ctx) -> Result<Box<dyn ElementIter>> {
        self.iterate_with_readers(ctx, 0)
    }
}

impl Interleave {
    /// An iterator whose first `readers` open datasets (at a time) are read ahead by their
    /// own threads.
    pub(crate) fn iterate_with_readers(&self, ctx: &Ctx, readers: usize) -> Result<Box<dyn ElementIter>> {
        let input = iterate_input(&self.input, ctx)?;
        Ok(Box::new(InterleaveIter {
            input: Some(input),
            f: self.f.clone(),
            ctx: ctx.clone(),
            slots: (0..self.cycle_length).map(|_| None).collect(),
            current: 0,
            in_block: 0,
            block_length: self.block_length,
            readers,
            reading: 0,
        }))
    }
}

/// Round-robin over `cycle_length` open sub-iterators, `block_length` elements from each;
/// an exhausted one is replaced by the next input element's dataset.
struct InterleaveIter {
    input: Option<Box<dyn ElementIter>>,
    f: DatasetFn,
    ctx: Ctx,
    /// Open datasets and whether each has a reader thread.
    slots: Vec<Option<(Box<dyn ElementIter>, bool)>>,
    current: usize,
    in_block: usize,
    block_length: usize,
    readers: usize,
    reading: usize,
}

impl InterleaveIter {
    /// Opens the next input element's dataset; `None` when the input is exhausted.
    fn open(&mut self) -> Option<Result<(Box<dyn ElementIter>, bool)>> {
        let e = match self.input.as_mut()?.next() {
            None => {
                self.input = None;
                return None;
            }
            Some(e) => e,
        };
        let it = e.and_then(|e| in_stage((self.f)(e), &self.ctx)).and_then(|node| iterate_input(&node, &self.ctx));
        Some(it.and_then(|it| {
            if self.reading >= self.readers {
                return Ok((it, false));
            }
            let knob = crate::autotune::Knob::new(
                crate::autotune::KnobKind::BufferSize,
                self.block_length,
                self.block_length,
                false,
            );
            let p = crate::parallel::PrefetchIter::start(it, knob, None, &self.ctx.path)?;
            self.reading += 1;
            Ok((Box::new(p) as Box<dyn ElementIter>, true))
        }))
    }
}

impl ElementIter for InterleaveIter {
    fn next(&mut self) -> Next {
        let n = self.slots.len();
        loop {
            if self.slots[self.current].is_none() {
                match self.open() {
                    Some(Ok(it)) => self.slots[self.current] = Some(it),
                    Some(Err(e)) => return Some(Err(e)),
                    None => {
                        if self.slots.iter().all(Option::is_none) {
                            return None;
                        }
                        self.current = (self.current + 1) % n;
                        self.in_block = 0;
                        continue;
                    }
                }
            }
            let (it, _) = self.slots[self.current].as_mut().expect("opened above");
            match it.next() {
                Some(r) => {
                    self.in_block += 1;
                    if self.in_block >= self.block_length {
                        self.in_block = 0;
                        self.current = (self.current + 1) % n;
                    }
                    return Some(r);
                }
                None => {
                    if let Some((_, true)) = self.slots[self.current].take() {
                        self.reading -= 1;
                    }
                    self.in_block = 0;
                    // The slot is refilled from the input on the next visit.
                    if self.input.is_none() {
                        self.current = (self.current + 1) % n;
                    }
                }
            }
        }
    }
}

struct Zip(Vec<Arc<dyn Node>>);

impl Node for Zip {
    fn kind(&self) -> &'static str {
        "Zip"
    }
    fn inputs(&self) -> Vec<Arc<dyn Node>> {
        self.0.clone()
    }
    fn describe(&self) -> String {
        self.0.len().to_string()
    }
    fn cardinality(&self) -> Cardinality {
        let cards: Vec<Cardinality> = self.0.iter().map(|n| n.cardinality()).collect();
        let shortest = cards.iter().filter_map(|c| if let Cardinality::Finite(n) = c { Some(*n) } else { None }).min();
        if cards.contains(&Cardinality::Unknown) {
            Cardinality::Unknown
        } else {
            shortest.map_or(Cardinality::Infinite, Cardinality::Finite)
        }
    }
    fn iterate(&self, ctx: &Ctx) -> Result<Box<dyn ElementIter>> {
        let mut its = self.0.iter().map(|n| iterate_input(n, ctx)).collect::<Result<Vec<_>>>()?;
        Ok(Box::new(FnIter(move || {
            let mut out = Vec::new();
            for it in its.iter_mut() {
                match it.next()? {
                    Ok(e) => out.extend(e),
                    Err(e) => return Some(Err(e)),
                }
            }
            Some(Ok(out))
        })))
    }
}

struct Concatenate(Arc<dyn Node>, Arc<dyn Node>);

impl Node for Concatenate {
    fn kind(&self) -> &'static str {
        "Concatenate"
    }
    fn inputs(&self) -> Vec<Arc<dyn Node>> {
        vec![self.0.clone(), self.1.clone()]
    }
    fn describe(&self) -> String {
        String::new()
    }
    fn cardinality(&self) -> Cardinality {
        match (self.0.cardinality(), self.1.cardinality()) {
            (Cardinality::Finite(a), Cardinality::Finite(b)) => Cardinality::Finite(a + b),
            (Cardinality::Infinite, _) | (_, Cardinality::Infinite) => Cardinality::Infinite,
            _ => Cardinality::Unknown,
        }
    }
    fn iterate(&self, ctx: &Ctx) -> Result<Box<dyn ElementIter>> {
        let mut first = Some(iterate_input(&self.0, ctx)?);
        let second = self.1.clone();
        let ctx = ctx.clone();
        let mut then: Option<Box<dyn ElementIter>> = None;
        Ok(Box::new(FnIter(move || {
            if let Some(it) = first.as_mut() {
                if let Some(r) = it.next() {
                    return Some(r);
                }
                first = None;
                match iterate_input(&second, &ctx) {
                    Ok(it) => then = Some(it),
                    Err(e) => return Some(Err(e)),
                }
            }
            then.as_mut()?.next()
        })))
    }
}

struct Repeat {
    input: Arc<dyn Node>,
    count: Option<u64>,
}

impl Node for Repeat {
    fn kind(&self) -> &'static str {
        "Repeat"
    }
    fn input(&self) -> Option<&Arc<dyn Node>> {
        Some(&self.input)
    }
    fn describe(&self) -> String {
        format!("{:?}", self.count)
    }
    fn cardinality(&self) -> Cardinality {
        match (self.count, self.input.cardinality()) {
            (Some(0), _) | (_, Cardinality::Finite(0)) => Cardinality::Finite(0),
            (None, _) => Cardinality::Infinite,
            (Some(c), card) => card.map(|n| n * c),
        }
    }
    fn iterate(&self, ctx: &Ctx) -> Result<Box<dyn ElementIter>> {
        let input = self.input.clone();
        let ctx = ctx.clone();
        let count = self.count;
        let mut pass = 0u64;
        let mut it: Option<Box<dyn ElementIter>> = None;
        let mut produced_this_pass = false;
        Ok(Box::new(FnIter(move || loop {
            if count.is_some_and(|c| pass >= c) {
                return None;
            }
            if it.is_none() {
                match iterate_input(&input, &ctx) {
                    Ok(i) => it = Some(i),
                    Err(e) => return Some(Err(e)),
                }
                produced_this_pass = false;
            }
            match it.as_mut().expect("made above").next() {
                Some(r) => {
                    produced_this_pass = true;
                    return Some(r);
                }
                None => {
                    it = None;
                    pass += 1;
                    if !produced_this_pass {
                        // An empty input would repeat forever producing nothing.
                        return None;
                    }
                }
            }
        })))
    }
}

struct Take {
    input: Arc<dyn Node>,
    count: Option<u64>,
    skip: bool,
}

impl Node for Take {
    fn kind(&self) -> &'static str {
        if self.skip {
            "Skip"
        } else {
            "Take"
        }
    }
    fn input(&self) -> Option<&Arc<dyn Node>> {
        Some(&self.input)
    }
    fn describe(&self) -> String {
        format!("{:?}", self.count)
    }
    fn cardinality(&self) -> Cardinality {
        let input = self.input.cardinality();
        match (self.skip, self.count) {
            (false, None) => input,
            (false, Some(c)) => match input {
                Cardinality::Finite(n) => Cardinality::Finite(n.min(c)),
                Cardinality::Infinite => Cardinality::Finite(c),
                Cardinality::Unknown => Cardinality::Unknown,
            },
            (true, None) => Cardinality::Finite(0),
            (true, Some(c)) => input.map(|n| n.saturating_sub(c)),
        }
    }
    fn iterate(&self, ctx: &Ctx) -> Result<Box<dyn ElementIter>> {
        let mut input = iterate_input(&self.input, ctx)?;
        let (count, skip) = (self.count, self.skip);
        let mut seen = 0u64;
        Ok(Box::new(FnIter(move || {
            if skip {
                while count.is_none_or(|c| seen < c) {
                    seen += 1;
                    if let Err(e) = input.next()? {
                        return Some(Err(e));
                    }
                }
                return input.next();
            }
            if count.is_some_and(|c| seen >= c) {
                return None;
            }
            seen += 1;
            input.next()
        })))
    }
}

struct Shard {
    input: Arc<dyn Node>,
    num: u64,
    index: u64,
}

impl Node for Shard {
    fn kind(&self) -> &'static str {
        "Shard"
    }
    fn input(&self) -> Option<&Arc<dyn Node>> {
        Some(&self.input)
    }
    fn describe(&self) -> String {
        format!("{}/{}", self.index, self.num)
    }
    fn cardinality(&self) -> Cardinality {
        let (num, index) = (self.num, self.index);
        self.input.cardinality().map(|n| n / num + u64::from(n % num > index))
    }
    fn iterate(&self, ctx: &Ctx) -> Result<Box<dyn ElementIter>> {
        let mut input = iterate_input(&self.input, ctx)?;
        let (num, index) = (self.num, self.index);
        let mut i = 0u64;
        Ok(Box::new(FnIter(move || loop {
            let r = input.next()?;
            i += 1;
            if (i - 1) % num == index {
                return Some(r);
            }
        })))
    }
}

struct Enumerate {
    input: Arc<dyn Node>,
    start: i64,
}

impl Node for Enumerate {
    fn kind(&self) -> &'static str {
        "Enumerate"
    }
    fn input(&self) -> Option<&Arc<dyn Node>> {
        Some(&self.input)
    }
    fn describe(&self) -> String {
        self.start.to_string()
    }
    fn iterate(&self, ctx: &Ctx) -> Result<Box<dyn ElementIter>> {
        let mut input = iterate_input(&self.input, ctx)?;
        let mut i = self.start;
        Ok(Box::new(FnIter(move || {
            let r = input.next()?;
            i += 1;
            Some(r.map(|e| {
                let mut out = vec![Tensor::scalar(i - 1)];
                out.extend(e);
                out
            }))
        })))
    }
}

struct Unbatch(Arc<dyn Node>);

impl Node for Unbatch {
    fn kind(&self) -> &'static str {
        "Unbatch"
    }
    fn inputs(&self) -> Vec<Arc<dyn Node>> {
        vec![self.0.clone()]
    }
    fn describe(&self) -> String {
        String::new()
    }
    fn cardinality(&self) -> Cardinality {
        match self.0.cardinality() {
            Cardinality::Infinite => Cardinality::Infinite,
            _ => Cardinality::Unknown,
        }
    }
    fn iterate(&self, ctx: &Ctx) -> Result<Box<dyn ElementIter>> {
        let mut input = iterate_input(&self.0, ctx)?;
        let mut current: Option<(Element, usize, usize)> = None;
        let ctx = ctx.clone();
        Ok(Box::new(FnIter(move || loop {
            if let Some((e, i, n)) = current.as_mut() {
                if *i < *n {
                    *i += 1;
                    let k = *i - 1;
                    return Some(e.iter().map(|t| row(t, k)).collect());
                }
                current = None;
            }
            let e = match input.next()? {
                Ok(e) => e,
                Err(err) => return Some(Err(err)),
            };
            let mut n = None;
            for (c, t) in e.iter().enumerate() {
                let r = match rows(t, &format!("component {c}")) {
                    Ok(r) => r,
                    Err(err) => return Some(Err(err.in_stage(&ctx.path))),
                };
                if n.is_some_and(|n| n != r) {
                    return Some(Err(DataError::msg(format!(
                        "unbatch: components have different first dimensions ({} and {r})",
                        n.unwrap_or(0)
                    ))
                    .in_stage(&ctx.path)));
                }
                n = Some(r);
            }
            current = Some((e, 0, n.unwrap_or(0)));
        })))
    }
}

struct IgnoreErrors {
    input: Arc<dyn Node>,
    ignored: Arc<AtomicU64>,
    log: bool,
}

impl Node for IgnoreErrors {
    fn kind(&self) -> &'static str {
        "IgnoreErrors"
    }
    fn input(&self) -> Option<&Arc<dyn Node>> {
        Some(&self.input)
    }
    fn describe(&self) -> String {
        String::new()
    }
    fn cardinality(&self) -> Cardinality {
        match self.input.cardinality() {
            Cardinality::Infinite => Cardinality::Infinite,
            _ => Cardinality::Unknown,
        }
    }
    fn iterate(&self, ctx: &Ctx) -> Result<Box<dyn ElementIter>> {
        let mut input = iterate_input(&self.input, ctx)?;
        let ignored = self.ignored.clone();
        let log = self.log;
        let path = ctx.path.clone();
        Ok(Box::new(FnIter(move || loop {
            match input.next()? {
                Ok(e) => return Some(Ok(e)),
                Err(e) if !e.is_skippable() => return Some(Err(e)),
                Err(e) => {
                    let n = ignored.fetch_add(1, Ordering::Relaxed) + 1;
                    if log {
                        log::warn!("{path}: skipped element ({n} so far): {e}");
                    }
                }
            }
        })))
    }
}

/// How a map runs.
///
/// `#[non_exhaustive]`: other crates build a `MapOptions` from `MapOptions::default()` and its
/// `with_*` setters, so fields can be added without breaking them.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct MapOptions {
    /// `None`: on the consumer's thread; `Some(n)`: `n` worker threads; `Some(AUTOTUNE)`:
    /// tuned (see [`crate::autotune`]).
    pub num_parallel_calls: Option<i64>,
    /// Keep input order (default); `false` hands out elements as they finish.
    pub deterministic: bool,
    /// The function's name in fingerprints (default: its Rust type name).
    pub name: Option<String>,
}

impl MapOptions {
    /// Sets [`MapOptions::num_parallel_calls`].
    pub fn with_num_parallel_calls(mut self, num_parallel_calls: Option<i64>) -> Self {
        self.num_parallel_calls = num_parallel_calls;
        self
    }

    /// Sets [`MapOptions::deterministic`].
    pub fn with_deterministic(mut self, deterministic: bool) -> Self {
        self.deterministic = deterministic;
        self
    }

    /// Sets [`MapOptions::name`].
    pub fn with_name(mut self, name: Option<String>) -> Self {
        self.name = name;
        self
    }
}

impl Default for MapOptions {
    fn default() -> Self {
        MapOptions { num_parallel_calls: None, deterministic: true, name: None }
    }
}

impl<T: Structure> Dataset<T> {
    /// `f` applied to every element, on the consumer's thread.
    pub fn map<U: Structure, F>(&self, f: F) -> Dataset<U>
    where
        F: Fn(T) -> Result<U> + Send + Sync + 'static,
    {
        self.map_with(&MapOptions::default(), f)
    }

    /// `f` applied to every element by `num_parallel_calls` worker threads (or
    /// [`crate::AUTOTUNE`]), in input order.
    pub fn map_parallel<U: Structure, F>(&self, num_parallel_calls: i64, f: F) -> Dataset<U>
    where
        F: Fn(T) -> Result<U> + Send + Sync + 'static,
    {
        self.map_with(&MapOptions { num_parallel_calls: Some(num_parallel_calls), ..Default::default() }, f)
    }

    /// `f` applied to every element, run as `options` says.
    pub fn map_with<U: Structure, F>(&self, options: &MapOptions, f: F) -> Dataset<U>
    where
        F: Fn(T) -> Result<U> + Send + Sync + 'static,
    {
        self.map_elements(options, elem_fn(f), fn_name::<F>(options.name.as_deref()))
    }

    /// A `Map` or `ParallelMap` stage of `f` over the elements, as `options` says.
    pub(crate) fn map_elements<U: Structure>(&self, options: &MapOptions, f: ElemFn, name: String) -> Dataset<U> {
        match options.num_parallel_calls {
            None => self.then(Map { input: self.node.clone(), f, name }),
            Some(n) => {
                self.then(crate::parallel::ParallelMap::new(self.node.clone(), f, name, n, options.deterministic))
            }
        }
    }

    /// The elements for which `pred` is true.
    pub fn filter<F>(&self, pred: F) -> Dataset<T>
    where
        F: Fn(&T) -> Result<bool> + Send + Sync + 'static,
        T: Clone,
    {
        let name = fn_name::<F>(None);
        let pred = Arc::new(move |e: &Element| pred(&T::unflatten(e.clone())?));
        self.then(Filter { input: self.node.clone(), pred, name })
    }

    /// Each element mapped to a dataset, all of them one after the other.
    pub fn flat_map<U: Structure, F>(&self, f: F) -> Dataset<U>
    where
        F: Fn(T) -> Result<Dataset<U>> + Send + Sync + 'static,
    {
        self.interleave(1, 1, None, f)
    }

    /// Each element mapped to a dataset; `cycle_length` of them are read round-robin,
    /// `block_length` elements at a time. With `num_parallel_calls` (a number or
    /// [`crate::AUTOTUNE`]) each open dataset is read ahead by its own thread.
    pub fn interleave<U: Structure, F>(
        &self,
        cycle_length: usize,
        block_length: usize,
        num_parallel_calls: Option<i64>,
        f: F,
    ) -> Dataset<U>
    where
        F: Fn(T) -> Result<Dataset<U>> + Send + Sync + 'static,
    {
        let name = fn_name::<F>(None);
        let f: DatasetFn = Arc::new(move |e: Element| Ok(f(T::unflatten(e)?)?.node));
        let (cycle_length, block_length) = (cycle_length.max(1), block_length.max(1));
        match num_parallel_calls {
            None => self.then(Interleave { input: self.node.clone(), f, name, cycle_length, block_length }),
            Some(p) => self.then(crate::parallel::ParallelInterleave::new(
                Interleave { input: self.node.clone(), f, name, cycle_length, block_length },
                p,
            )),
        }
    }

    /// Pairs of this dataset's elements with `other`'s; ends with the shorter.
    pub fn zip<U: Structure>(&self, other: &Dataset<U>) -> Dataset<(T, U)> {
        self.then(Zip(vec![self.node.clone(), other.node.clone()]))
    }

    /// This dataset's elements, then `other`'s.
    pub fn concatenate(&self, other: &Dataset<T>) -> Dataset<T> {
        self.then(Concatenate(self.node.clone(), other.node.clone()))
    }

    /// The elements `count` times over (`None`: forever); each pass is a new iteration of
    /// the input (shuffles reshuffle).
    pub fn repeat(&self, count: Option<u64>) -> Dataset<T> {
        self.then(Repeat { input: self.node.clone(), count })
    }

    /// The first `count` elements.
    pub fn take(&self, count: u64) -> Dataset<T> {
        self.then(Take { input: self.node.clone(), count: Some(count), skip: false })
    }

    /// All but the first `count` elements.
    pub fn skip(&self, count: u64) -> Dataset<T> {
        self.then(Take { input: self.node.clone(), count: Some(count), skip: true })
    }

    /// Every `num_shards`-th element starting at `index`.
    pub fn shard(&self, num_shards: u64, index: u64) -> Result<Dataset<T>> {
        if num_shards == 0 || index >= num_shards {
            return invalid(format!("shard: index {index} must be below num_shards {num_shards} (> 0)"));
        }
        Ok(self.then(Shard { input: self.node.clone(), num: num_shards, index }))
    }

    /// `(i, element)` pairs, `i` an int64 scalar counting from `start`.
    pub fn enumerate(&self, start: i64) -> Dataset<(Tensor, T)> {
        self.then(Enumerate { input: self.node.clone(), start })
    }

    /// Each element split along its first dimension (the inverse of `batch`).
    pub fn unbatch(&self) -> Dataset<T> {
        self.then(Unbatch(self.node.clone()))
    }

    /// Skips elements whose production failed (a corrupt file, a failed map), counting them
    /// in `counter` and, when `log`, printing each on stderr.
    pub fn ignore_errors(&self, counter: Arc<AtomicU64>, log: bool) -> Dataset<T> {
        self.then(IgnoreErrors { input: self.node.clone(), ignored: counter, log })
    }
}
