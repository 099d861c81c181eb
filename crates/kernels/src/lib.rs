//! CPU kernels. Each kernel registers against an op (from `ferroflow-ops`) for a set of
//! dtypes; [`KernelRegistry::create`] instantiates one for a node. The same instance API
//! serves the executor, op-by-op (eager) calls through [`run_op`], and constant folding.
#![warn(missing_docs)]

/// Matches a dtype to a Rust type and evaluates `$make` with `$T` bound to it.
macro_rules! dispatch {
    ($d:expr, $name:expr, [$($dt:ident => $t:ty),*], |$T:ident| $make:expr) => {
        match $d {
            $(DType::$dt => { type $T = $t; $make })*
            other => Err(invalid(format!("no kernel for {} with T={other}", $name))),
        }
    };
}

mod array;
mod cast;
mod collective;
mod compare;
mod conv;
mod data;
mod einsum;
mod elementwise;
mod epilogue;
pub mod fused;
mod grad;
pub mod image;
mod indexing;
mod io;
mod isa;
mod list;
mod logging;
mod loss;
mod math;
mod matmul;
mod numeric;
mod optional;
mod packed;
mod parsing;
mod parts;
mod stdheap;
pub use parts::thread_pool;
mod random;
mod reduce;
pub mod resource;
mod select;
pub mod step;
mod training;
mod vmath;

use std::collections::HashMap;
use std::sync::OnceLock;

use ferroflow_graph::{Attrs, NodeTypes};
use ferroflow_ops::{OpDef, OpRegistry};
use ferroflow_proto::attr;
use ferroflow_proto::attr_value::Value;
use ferroflow_tensor::{DType, Tensor, TensorError};

/// A kernel's inputs, owned: a kernel may take them (and reuse an input's buffer for its
/// output when no one else holds it). The executor reuses one buffer across nodes, so
/// passing inputs allocates nothing.
pub type Inputs = Vec<Tensor>;
/// A kernel's outputs: the kernel pushes one tensor per op output, in order.
pub type Outputs = Vec<Tensor>;

/// An error creating or running a kernel. The executor adds the node and op names.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KernelError {
    /// No kernel is registered for this op and dtype.
    #[error("no CPU kernel for op '{op}' with {attr}={dtype} (node '{node}'); registered: {registered}")]
    NoKernel {
        /// The op.
        op: String,
        /// The node.
        node: String,
        /// The constraining attr.
        attr: String,
        /// The dtype asked for.
        dtype: String,
        /// The dtypes that have kernels.
        registered: String,
    },
    /// Bad input values or shapes at run time, or bad attrs at creation.
    #[error("{0}")]
    InvalidArgument(String),
    /// A sequence ended (`IteratorGetNext` past the last element): TensorFlow's
    /// `OutOfRangeError`, which loops that read until the end expect.
    #[error("out of range: {0}")]
    OutOfRange(String),
    /// A tensor operation failed.
    #[error(transparent)]
    Tensor(#[from] TensorError),
    /// A checkpoint could not be read or written.
    #[error(transparent)]
    Checkpoint(#[from] ferroflow_checkpoint::CheckpointError),
    /// An image could not be decoded or encoded.
    #[error(transparent)]
    Codec(#[from] ferroflow_codec::CodecError),
    /// The step was cancelled or ran past its deadline (a loop checks between iterations).
    #[error(transparent)]
    Interrupted(#[from] step::Interrupt),
    /// A step of a function body (a call, a branch, a loop's condition or body) failed; the
    /// runtime's error, kept whole.
    #[error(transparent)]
    Function(Box<dyn std::error::Error + Send + Sync>),
}

/// Shorthand for kernel results.
pub type KResult<T> = Result<T, KernelError>;

/// A raw pointer handed to the threads of one kernel, each of which touches a disjoint part of
/// the buffer behind it (or only reads it).
pub(crate) struct SendPtr<T>(pub(crate) *mut T);
// A pointer copies whatever it points to (derive would ask `T: Copy`).
impl<T> Clone for SendPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SendPtr<T> {}
// SAFETY: only used to give threads disjoint parts of an exclusively borrowed buffer to write,
// or shared read-only access; every user states which at its `unsafe` block.
unsafe impl<T> Send for SendPtr<T> {}
unsafe impl<T> Sync for SendPtr<T> {}
impl<T> SendPtr<T> {
    /// The pointer (a method, so closures capture the whole `SendPtr`, which is `Sync`).
    pub(crate) fn get(self) -> *mut T {
        self.0
    }
}

/// Builds an `InvalidArgument` error.
pub(crate) fn invalid(msg: impl Into<String>) -> KernelError {
    KernelError::InvalidArgument(msg.into())
}

/// Checks that an output of `dtype` and `dims` fits the memory limit in force
/// ([`ferroflow_tensor::limit`]) before a kernel builds it, and returns its element count: the
/// gate for every output whose size comes from input values (a fed `multiples`, `paddings`,
/// `depth`, `size`) or from the product of input sizes (`MatMul`, broadcasting).
pub(crate) fn check_output(dtype: DType, dims: &[usize]) -> KResult<usize> {
    let what = || format!("{dtype} tensor of shape {dims:?}");
    let n = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    let size = dtype.size().unwrap_or(std::mem::size_of::<Vec<u8>>());
    match n.and_then(|n| n.checked_mul(size).map(|b| (n, b))) {
        Some((n, bytes)) => {
            ferroflow_tensor::limit::check(bytes, what)?;
            Ok(n)
        }
        None => Err(TensorError::ResourceExhausted {
            what: what(),
            bytes: usize::MAX,
            limit: ferroflow_tensor::limit::current(),
        }
        .into()),
    }
}

/// What a kernel may use while it runs.
pub struct KernelContext<'a> {
    /// The intra-op thread pool for kernels that split their work; `None` runs on the caller.
    pub intra_op: Option<&'a rayon::ThreadPool>,
    /// The session's variables and random states; `None` for eager calls and constant
    /// folding (kernels that need state then fail with an error naming their node).
    pub resources: Option<&'a resource::ResourceMgr>,
    /// The running step's cancellation and deadline (function calls pass it to their bodies,
    /// loops check it between iterations); `None` outside a step.
    pub step: Option<&'a step::StepControl>,
}

impl KernelContext<'_> {
    /// Whether the running step was cancelled or ran past its deadline: loops over blocks or
    /// rows ask before each one and skip the rest (the executor then fails the node), so a
    /// long kernel stops within one block's time.
    #[inline]
    pub fn stopped(&self) -> bool {
        self.step.is_some_and(|s| s.check().is_err())
    }

    /// Runs `f` on the intra-op pool when there is one (so rayon-parallel code inside uses
    /// it), else on the calling thread.
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match self.intra_op {
            Some(p) => p.install(f),
            None => f(),
        }
    }
    /// Runs `f(0) .. f(parts - 1)` across the intra-op pool, the calling thread taking parts
    /// too (it never sleeps waiting for the pool: see [`parts`](crate::parts)); on the caller
    /// alone without a pool.
    pub fn for_each_part(&self, parts: usize, f: impl Fn(usize) + Sync) {
        match self.intra_op {
            Some(p) => parts::for_each_part(p, parts, &f),
            None => (0..parts).for_each(f),
        }
    }
    /// Runs `f(i, chunk)` for each `chunk`-long piece of `s` (the last may be shorter), in
    /// order of `i`, as [`KernelContext::for_each_part`] splits parts.
    pub(crate) fn for_each_chunk_mut<T: Send>(&self, s: &mut [T], chunk: usize, f: impl Fn(usize, &mut [T]) + Sync) {
        let (n, chunk) = (s.len(), chunk.max(1));
        let p = SendPtr(s.as_mut_ptr());
        self.for_each_part(n.div_ceil(chunk), |i| {
            let lo = i * chunk;
            // SAFETY: the pieces are disjoint ranges of `s`, each given to exactly one call,
            // and `s` stays borrowed until every call has returned.
            f(i, unsafe { std::slice::from_raw_parts_mut(p.get().add(lo), chunk.min(n - lo)) })
        })
    }
    /// The number of threads kernels may use.
    pub fn threads(&self) -> usize {
        self.intra_op.map_or(1, |p| p.current_num_threads())
    }
}

/// An instantiated kernel for one node.
pub trait OpKernel: Send + Sync {
    /// Computes the node's outputs from its inputs.
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()>;
}

/// Everything a kernel factory may read about its node.
pub struct NodeDesc<'a> {
    /// Node name (for errors).
    pub name: &'a str,
    /// The op definition.
    pub def: &'a OpDef,
    /// The node's attrs (defaults come from `def`).
    pub attrs: &'a Attrs,
    /// Resolved input and output dtypes.
    pub types: &'a NodeTypes,
}

impl NodeDesc<'_> {
    fn value(&self, name: &str) -> KResult<&Value> {
        self.def
            .attr(self.attrs, name)
            .and_then(|v| v.value.as_ref())
            .ok_or_else(|| invalid(format!("missing attr '{name}'")))
    }
    /// The attr read by `read` (one of `ferroflow_proto::attr`'s `*_of`), or an error saying it
    /// must be a `kind`.
    fn typed<T>(&self, name: &str, kind: &str, read: impl FnOnce(&Value) -> Option<T>) -> KResult<T> {
        read(self.value(name)?).ok_or_else(|| invalid(format!("attr '{name}' must be {kind}")))
    }
    /// A bool attr.
    pub fn bool(&self, name: &str) -> KResult<bool> {
        self.typed(name, "a bool", attr::bool_of)
    }
    /// An int attr.
    pub fn int(&self, name: &str) -> KResult<i64> {
        self.typed(name, "an int", attr::int_of)
    }
    /// A string attr.
    pub fn string(&self, name: &str) -> KResult<String> {
        self.typed(name, "a string", attr::string_of)
    }
    /// A float attr.
    pub fn float(&self, name: &str) -> KResult<f32> {
        self.typed(name, "a float", attr::float_of)
    }
    /// A type attr.
    pub fn dtype(&self, name: &str) -> KResult<DType> {
        Ok(DType::from_tf(self.typed(name, "a type", attr::dtype_of)?)?)
    }
    /// A list(int) attr (empty if absent).
    pub fn ints(&self, name: &str) -> Vec<i64> {
        self.def
            .attr(self.attrs, name)
            .and_then(|v| v.value.as_ref())
            .and_then(attr::ints_of)
            .map(<[i64]>::to_vec)
            .unwrap_or_default()
    }
    /// A tensor attr.
    pub fn tensor(&self, name: &str) -> KResult<Tensor> {
        match self.value(name)? {
            Value::Tensor(t) => {
                ferroflow_proto::convert::tensor_from_proto(t).map_err(|e| invalid(format!("attr '{name}': {e}")))
            }
            _ => Err(invalid(format!("attr '{name}' must be a tensor"))),
        }
    }
}

/// Creates a kernel for a node.
pub type Factory = fn(&NodeDesc) -> KResult<Box<dyn OpKernel>>;

struct Registration {
    attr: &'static str,
    dtypes: &'static [DType],
    factory: Factory,
}

/// Kernels by op.
pub struct KernelRegistry {
    by_op: HashMap<&'static str, Vec<Registration>>,
}

impl KernelRegistry {
    /// Registers `factory` for `op` when the type attr `attr` is one of `dtypes`. An empty
    /// `attr` registers a kernel for every dtype.
    pub fn register(&mut self, op: &'static str, attr: &'static str, dtypes: &'static [DType], factory: Factory) {
        self.by_op.entry(op).or_default().push(Registration { attr, dtypes, factory });
    }

    /// The process-wide registry of every CPU kernel.
    pub fn global() -> &'static KernelRegistry {
        static REG: OnceLock<KernelRegistry> = OnceLock::new();
        REG.get_or_init(|| {
            let mut r = KernelRegistry { by_op: HashMap::new() };
            array::register(&mut r);
            cast::register(&mut r);
            collective::register(&mut r);
            compare::register(&mut r);
            conv::register(&mut r);
            data::register(&mut r);
            einsum::register(&mut r);
            fused::register(&mut r);
            grad::register(&mut r);
            logging::register(&mut r);
            loss::register(&mut r);
            elementwise::register(&mut r);
            image::register(&mut r);
            indexing::register(&mut r);
            io::register(&mut r);
            list::register(&mut r);
            optional::register(&mut r);
            parsing::register(&mut r);
            math::register(&mut r);
            matmul::register(&mut r);
            select::register(&mut r);
            reduce::register(&mut r);
            random::register(&mut r);
            resource::register(&mut r);
            training::register(&mut r);
            r
        })
    }

    /// Every op with at least one kernel, sorted.
    pub fn ops(&self) -> Vec<&'static str> {
        let mut v: Vec<&'static str> = self.by_op.keys().copied().collect();
        v.sort();
        v
    }

    /// The kernels registered for `op`: each one's constraining type attr (empty for a kernel
    /// that takes every dtype) and the dtypes it runs.
    pub fn registrations(&self, op: &str) -> Vec<(&'static str, &'static [DType])> {
        self.by_op.get(op).into_iter().flatten().map(|r| (r.attr, r.dtypes)).collect()
    }

    /// True if some kernel is registered for `op`.
    pub fn has_op(&self, op: &str) -> bool {
        self.by_op.contains_key(op)
    }

    /// Instantiates the kernel for a node, or says which op/dtype has none.
    pub fn create(&self, desc: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
        let op = desc.def.name.as_str();
        let no_kernel = |attr: &str, dtype: String| {
            let mut registered: Vec<&str> =
                self.by_op.get(op).into_iter().flatten().flat_map(|r| r.dtypes.iter().map(|d| d.name())).collect();
            registered.dedup();
            KernelError::NoKernel {
                op: op.to_string(),
                node: desc.name.to_string(),
                attr: attr.to_string(),
                dtype,
                registered: if registered.is_empty() { "none".into() } else { registered.join(", ") },
            }
        };
        let regs = self.by_op.get(op).ok_or_else(|| no_kernel("T", "any".into()))?;
        let mut first_attr = "T";
        let mut first_dtype = String::from("?");
        for r in regs {
            if r.attr.is_empty() {
                return (r.factory)(desc);
            }
            let d = desc.dtype(r.attr)?;
            if r.dtypes.contains(&d) {
                return (r.factory)(desc);
            }
            first_attr = r.attr;
            first_dtype = d.name().to_string();
        }
        Err(no_kernel(first_attr, first_dtype))
    }
}

/// Runs one op eagerly: resolves its signature, instantiates its kernel and computes.
pub fn run_op(op: &str, attrs: &Attrs, mut inputs: Inputs, ctx: &KernelContext) -> KResult<Outputs> {
    let def = OpRegistry::global().get(op).ok_or_else(|| invalid(format!("unknown op '{op}'")))?;
    let types = def.resolve_types(attrs).map_err(|e| invalid(format!("op '{op}': {e}")))?;
    if types.inputs.len() != inputs.len() {
        return Err(invalid(format!("op '{op}' takes {} inputs, got {}", types.inputs.len(), inputs.len())));
    }
    for (i, (t, want)) in inputs.iter().zip(&types.inputs).enumerate() {
        if t.dtype() != *want {
            return Err(invalid(format!("op '{op}': input {i} is {}, expected {want}", t.dtype())));
        }
    }
    let kernel = KernelRegistry::global().create(&NodeDesc { name: op, def, attrs, types: &types })?;
    let mut outputs = Outputs::with_capacity(types.outputs.len());
    kernel.compute(ctx, &mut inputs, &mut outputs)?;
    Ok(outputs)
}
