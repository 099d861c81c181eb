//! The dataset graph: each transformation is a [`Node`] holding its inputs; iterating makes
//! a tree of [`ElementIter`]s, one per node, named by their path from the root as tf.data
//! names them (`Iterator::Root::Prefetch::Batch::ParallelMap::TensorSlice`).
use std::hash::Hasher;

use ferroflow_tensor::hash::Fnv1a;
use std::marker::PhantomData;
use std::sync::Arc;

use ferroflow_tensor::Tensor;

use crate::autotune::{Budget, Knob, TunedStage};
use crate::structure::Structure;
use crate::{DataError, Result};

/// One element: its components.
pub type Element = Vec<Tensor>;

/// What an iterator yields next: an element, an error for this element, or the end.
pub type Next = Option<Result<Element>>;

/// A running iterator of one stage.
pub trait ElementIter: Send {
    /// The next element.
    fn next(&mut self) -> Next;
}

/// How many elements a dataset has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cardinality {
    /// Exactly this many.
    Finite(u64),
    /// It never ends (`repeat()`).
    Infinite,
    /// Not known without iterating (`filter`, files).
    Unknown,
}

impl Cardinality {
    pub(crate) fn map(self, f: impl FnOnce(u64) -> u64) -> Cardinality {
        match self {
            Cardinality::Finite(n) => Cardinality::Finite(f(n)),
            c => c,
        }
    }
}

/// What every iterator gets when it is made.
#[derive(Clone)]
pub(crate) struct Ctx {
    /// This stage's name path (`Iterator::Root::Batch`).
    pub(crate) path: String,
    pub(crate) budget: Arc<Budget>,
}

impl Ctx {
    pub(crate) fn child(&self, kind: &str) -> Ctx {
        Ctx { path: format!("{}::{kind}", self.path), budget: self.budget.clone() }
    }
}

/// A stage of the pipeline.
pub(crate) trait Node: Send + Sync + 'static {
    /// tf.data's name for the stage (`Map`, `ParallelMap`, `Batch`, `Prefetch`, ...).
    fn kind(&self) -> &'static str;
    /// The one stage it reads from, for the stages that have exactly one (most do).
    fn input(&self) -> Option<&Arc<dyn Node>> {
        None
    }
    /// The stages it reads from (by default its one input, or none).
    fn inputs(&self) -> Vec<Arc<dyn Node>> {
        self.input().into_iter().cloned().collect()
    }
    /// Its parameters, for the pipeline's fingerprint (what a cache file is keyed by).
    fn describe(&self) -> String;
    /// How many elements it yields (by default as many as its one input).
    fn cardinality(&self) -> Cardinality {
        self.input().map_or(Cardinality::Unknown, |i| i.cardinality())
    }
    /// Its tunable knobs.
    fn knobs(&self) -> Vec<Arc<Knob>> {
        Vec::new()
    }
    /// A fresh iterator; `ctx.path` already names this stage.
    fn iterate(&self, ctx: &Ctx) -> Result<Box<dyn ElementIter>>;
    /// An iterator of this stage's elements already batched `size` at a time, for a `batch`
    /// stage (named `batch_path`) directly above it, when this stage can do that better than
    /// stacking afterwards (a parallel map writes into the batch from its workers); `None`
    /// otherwise.
    fn iterate_batched(
        &self,
        _ctx: &Ctx,
        _size: usize,
        _drop_remainder: bool,
        _batch_path: &str,
    ) -> Option<Result<Box<dyn ElementIter>>> {
        None
    }
}

/// Makes an iterator of `node` as an input of the stage at `ctx`.
pub(crate) fn iterate_input(node: &Arc<dyn Node>, ctx: &Ctx) -> Result<Box<dyn ElementIter>> {
    let ctx = ctx.child(node.kind());
    Ok(traced(node.iterate(&ctx)?, ctx.path))
}

/// `inner` with each `next` recorded as an event named by the stage's path while a profile
/// runs (tf.data's `Iterator::Root::Prefetch::...` events); one load per element otherwise.
pub(crate) fn traced(inner: Box<dyn ElementIter>, path: String) -> Box<dyn ElementIter> {
    Box::new(Traced { inner, path, name: ferroflow_profiler::LazyName::new() })
}

struct Traced {
    inner: Box<dyn ElementIter>,
    path: String,
    name: ferroflow_profiler::LazyName,
}

impl ElementIter for Traced {
    fn next(&mut self) -> Next {
        if !ferroflow_profiler::enabled() {
            return self.inner.next();
        }
        let id = self.name.get(|| self.path.clone());
        let _span = ferroflow_profiler::Span::with_id(id, ferroflow_profiler::Kind::Stage, 0);
        self.inner.next()
    }
}

/// A fingerprint of the pipeline up to `node`: its stages, their parameters and (for
/// sources) their data, so a cache file written by another pipeline is never replayed.
pub(crate) fn fingerprint(node: &Arc<dyn Node>) -> u64 {
    fn walk(n: &Arc<dyn Node>, h: &mut Fnv1a) {
        h.write(n.kind().as_bytes());
        h.write(b"(");
        h.write(n.describe().as_bytes());
        for i in n.inputs() {
            walk(&i, h);
        }
        h.write(b")");
    }
    let mut h = Fnv1a::default();
    walk(node, &mut h);
    h.finish()
}

/// A lazy dataset of `T` (a tensor, a tuple of tensors, or a [`Structure`]). Transformations
/// return new datasets; nothing runs until it is iterated. Cloning is cheap (shared stages).
pub struct Dataset<T> {
    pub(crate) node: Arc<dyn Node>,
    pub(crate) budget: Arc<Budget>,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for Dataset<T> {
    fn clone(&self) -> Self {
        Dataset { node: self.node.clone(), budget: self.budget.clone(), _t: PhantomData }
    }
}

impl<T: Structure> Dataset<T> {
    pub(crate) fn from_node(node: Arc<dyn Node>) -> Dataset<T> {
        Dataset { node, budget: Arc::new(Budget::default()), _t: PhantomData }
    }

    /// A dataset of another element type on `node`, keeping this one's budget.
    pub(crate) fn then<U: Structure>(&self, node: impl Node) -> Dataset<U> {
        Dataset { node: Arc::new(node), budget: self.budget.clone(), _t: PhantomData }
    }

    /// The same dataset with another element type whose components are the same.
    pub fn cast<U: Structure>(self) -> Dataset<U> {
        Dataset { node: self.node, budget: self.budget, _t: PhantomData }
    }

    /// The same pipeline under `budget` (CPU threads and RAM for AUTOTUNE, logging).
    pub fn with_budget(mut self, budget: Budget) -> Self {
        self.budget = Arc::new(budget);
        self
    }

    /// A fresh iterator (a new epoch: shuffles reshuffle unless told otherwise).
    pub fn iter(&self) -> Result<DatasetIter<T>> {
        let ctx = Ctx { path: "Iterator::Root".into(), budget: self.budget.clone() };
        let inner = iterate_input(&self.node, &ctx)?;
        Ok(DatasetIter { inner, _t: PhantomData })
    }

    /// The number of elements, when known.
    pub fn cardinality(&self) -> Cardinality {
        self.node.cardinality()
    }

    /// What AUTOTUNE chose for each tuned stage, and why.
    pub fn autotune_report(&self) -> Vec<TunedStage> {
        let mut out = Vec::new();
        let mut stack = vec![self.node.clone()];
        while let Some(n) = stack.pop() {
            out.extend(n.knobs().iter().map(|k| k.report()));
            stack.extend(n.inputs());
        }
        out
    }

    /// The stages from the root down, as tf.data names iterators (`Root::Prefetch::Batch`).
    pub fn describe(&self) -> String {
        let mut parts = vec!["Root".to_string()];
        let mut n = self.node.clone();
        loop {
            parts.push(n.kind().to_string());
            let inputs = n.inputs();
            match inputs.first() {
                Some(i) => n = i.clone(),
                None => break,
            }
        }
        parts.join("::")
    }

    /// The pipeline's fingerprint (stages, parameters, source data).
    pub fn fingerprint(&self) -> u64 {
        fingerprint(&self.node)
    }
}

/// A running iteration of a dataset: a Rust iterator of `Result<T>`. Dropping it stops its
/// worker threads.
pub struct DatasetIter<T> {
    inner: Box<dyn ElementIter>,
    _t: PhantomData<fn() -> T>,
}

impl<T: Structure> Iterator for DatasetIter<T> {
    type Item = Result<T>;
    fn next(&mut self) -> Option<Result<T>> {
        Some(self.inner.next()?.and_then(T::unflatten))
    }
}

impl<T: Structure> DatasetIter<T> {
    pub(crate) fn into_inner(self) -> Box<dyn ElementIter> {
        self.inner
    }

    /// The next element's components, untyped.
    pub fn next_components(&mut self) -> Next {
        self.inner.next()
    }
}

/// A boxed iterator from a closure (for stages whose iterator is a few lines).
pub(crate) struct FnIter<F>(pub(crate) F);

impl<F: FnMut() -> Next + Send> ElementIter for FnIter<F> {
    fn next(&mut self) -> Next {
        (self.0)()
    }
}

/// Errors a user's function returned, attributed to the stage that ran it.
pub(crate) fn in_stage<T>(r: Result<T>, ctx: &Ctx) -> Result<T> {
    r.map_err(|e| e.in_stage(&ctx.path))
}

/// `DataError::Invalid` helper.
pub(crate) fn invalid<T>(msg: impl Into<String>) -> Result<T> {
    Err(DataError::Invalid(msg.into()))
}
