//! Eager execution: an op runs on concrete tensors when it is called, through the same
//! definitions graphs use — the op registry's signature (type attrs are taken from the inputs,
//! as TensorFlow's eager `op_def` matching does), its shape function (a bad call is refused
//! before the kernel runs, with the op and the input shapes named) and the CPU kernel, on the
//! process's intra-op pool.
//!
//! ```
//! use ferroflow_function::eager::{self, Eager};
//! use ferroflow_ops::{Ops, RawOps};
//! use ferroflow_tensor::Tensor;
//! let x = Tensor::from_vec(&[1, 2], vec![1.0f32, -2.0]).unwrap();
//! let w = Tensor::from_vec(&[2, 1], vec![3.0f32, 4.0]).unwrap();
//! let y = Eager.relu(Eager.add_v2(Eager.mat_mul(&x, &w).unwrap(), 10.0f32).unwrap()).unwrap();
//! assert_eq!(y.as_slice::<f32>().unwrap(), &[5.0]);
//! let z = eager::op("ConcatV2").inputs(&[x.clone(), x]).input(&Tensor::scalar(1i32)).run1().unwrap();
//! assert_eq!(z.dims(), &[1, 4]);
//! ```
//!
//! TensorFlow's dtype rules hold: no implicit conversion (`int32 + float32` is an error that
//! says to cast), broadcasting by the kernels' NumPy rules. Kernels are instantiated once per
//! (op, attrs) on each thread and reused, so a call costs the type and shape checks plus the
//! kernel itself.
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::OnceLock;

use ferroflow_graph::Attrs;
use ferroflow_kernels::{KernelContext, KernelRegistry, NodeDesc, OpKernel};
use ferroflow_ops::{Applied, Arg as OpArg, ArgDTypes, Input, Known, OpCall, OpDef, OpRegistry, OpTarget};
use ferroflow_proto::AttrValue;
use ferroflow_tensor::{Shape, Tensor};

use crate::error::{FunctionError, OpError};
use prost::Message;
use smallvec::SmallVec;

/// Inputs whose values the shape function sees (`Reshape`'s shape, `Sum`'s axes): integer
/// tensors up to this many elements.
const KNOWN_VALUES: usize = 64;

/// Kernels kept per thread before the cache starts over (distinct (op, attrs) pairs).
const CACHE_ENTRIES: usize = 4096;

/// One argument of a call: a tensor, or a list for an `N * T` / `list(type)` input.
enum Arg<'a> {
    One(&'a Tensor),
    List(&'a [Tensor]),
}

/// An eager call being built: [`op`], then its inputs in signature order, its attrs, and
/// [`Call::run`].
pub struct Call<'a> {
    op: &'a str,
    args: SmallVec<[Arg<'a>; 3]>,
    attrs: SmallVec<[(&'a str, AttrValue); 2]>,
}

/// Starts an eager call of `op` (any registered op with a CPU kernel).
pub fn op(op: &str) -> Call<'_> {
    Call { op, args: SmallVec::new(), attrs: SmallVec::new() }
}

impl<'a> Call<'a> {
    /// The next input.
    pub fn input(mut self, t: &'a Tensor) -> Self {
        self.args.push(Arg::One(t));
        self
    }

    /// The next input as a list (`values: N * T` of `ConcatV2`, `AddN`, `Pack`).
    pub fn inputs(mut self, ts: &'a [Tensor]) -> Self {
        self.args.push(Arg::List(ts));
        self
    }

    /// Sets an attr (`attr::boolean(true)`, `attr::int(1)`, ...); type attrs are inferred
    /// from the inputs unless set here.
    pub fn attr(mut self, name: &'a str, value: AttrValue) -> Self {
        self.attrs.push((name, value));
        self
    }

    fn flat(&self) -> SmallVec<[&'a Tensor; 4]> {
        let mut v = SmallVec::new();
        for a in &self.args {
            match a {
                Arg::One(t) => v.push(*t),
                Arg::List(ts) => v.extend(ts.iter()),
            }
        }
        v
    }

    fn error(&self, source: OpError) -> FunctionError {
        failure(self.op, &self.flat(), source)
    }

    /// Runs the op; returns its outputs. A call like an earlier one on this thread (same op,
    /// input dtypes and list lengths, attrs) reuses its checked signature and kernel, and its
    /// shape check when the input shapes are the same too.
    pub fn run(self) -> Result<Vec<Tensor>, FunctionError> {
        let inputs = self.flat();
        prepared(|key| self.key(key), || self.prepare())?.run(self.op, &inputs)
    }

    /// Runs an op with one output.
    pub fn run1(self) -> Result<Tensor, FunctionError> {
        let op = self.op.to_string();
        let mut out = self.run()?;
        match out.len() {
            1 => Ok(out.pop().expect("one output")),
            n => Err(Eager.output_count_error(&op, n)),
        }
    }

    /// The cache key: the op, each argument's dtype (or a list's length and dtypes), and the
    /// attrs given, encoded.
    fn key(&self, key: &mut Vec<u8>) -> Result<(), FunctionError> {
        key.clear();
        key.extend_from_slice(self.op.as_bytes());
        for a in &self.args {
            match a {
                Arg::One(t) => key.extend_from_slice(&[0, t.dtype().to_tf() as u8]),
                Arg::List(ts) => {
                    key.push(1);
                    key.extend_from_slice(&(ts.len() as u32).to_le_bytes());
                    key.extend(ts.iter().map(|t| t.dtype().to_tf() as u8));
                }
            }
        }
        for (name, value) in &self.attrs {
            key.push(2);
            key.extend_from_slice(name.as_bytes());
            key.push(0);
            value.encode(key).expect("a Vec grows to hold what is encoded");
        }
        Ok(())
    }

    /// The slow path of a first call: the attrs completed from the inputs, the signature's
    /// dtypes checked, the kernel made.
    fn prepare(&self) -> Result<Prepared, FunctionError> {
        let def = OpRegistry::global().get(self.op).ok_or_else(|| self.error(OpError::UnknownOp))?;
        let mut attrs: Attrs = self.attrs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        self.infer_type_attrs(def, &mut attrs)?;
        Prepared::new(self.op, def, attrs, &self.flat())
    }

    /// Sets the type and count attrs the caller left out from the inputs.
    fn infer_type_attrs(&self, def: &OpDef, attrs: &mut Attrs) -> Result<(), FunctionError> {
        let dtypes: SmallVec<[ArgDTypes; 3]> = self
            .args
            .iter()
            .map(|a| match a {
                Arg::One(t) => ArgDTypes::One(t.dtype()),
                Arg::List(ts) => ArgDTypes::List(ts.iter().map(Tensor::dtype).collect()),
            })
            .collect();
        def.infer_type_attrs(&dtypes, attrs).map_err(|e| self.error(e.into()))
    }
}

/// An op with complete attrs whose input dtypes were checked against its signature: its
/// kernel, and the last input shapes (and small integer values) its shape function accepted
/// (a memo: the shape function is a pure function of those and the attrs). Lives in one
/// thread's cache.
struct Prepared {
    def: &'static OpDef,
    attrs: Attrs,
    outputs: usize,
    kernel: Box<dyn OpKernel>,
    accepted: RefCell<(Vec<usize>, Vec<u8>)>,
}

impl Prepared {
    fn new(op: &str, def: &'static OpDef, attrs: Attrs, inputs: &[&Tensor]) -> Result<Prepared, FunctionError> {
        let fail = |source: OpError| failure(op, inputs, source);
        let signature = |reason: String| fail(OpError::Signature(reason));
        let types = def.resolve_types(&attrs).map_err(|e| fail(e.into()))?;
        if types.inputs.len() != inputs.len() {
            return Err(signature(format!("takes {} inputs, got {}", types.inputs.len(), inputs.len())));
        }
        for (i, (t, want)) in inputs.iter().zip(&types.inputs).enumerate() {
            if t.dtype() != *want {
                return Err(signature(format!(
                    "input {i} is {}, expected {want} (ops do not convert dtypes: Cast first)",
                    t.dtype()
                )));
            }
        }
        let kernel = KernelRegistry::global()
            .create(&NodeDesc { name: op, def, attrs: &attrs, types: &types })
            .map_err(|e| fail(e.into()))?;
        Ok(Prepared { def, attrs, outputs: types.outputs.len(), kernel, accepted: RefCell::new(Default::default()) })
    }

    /// The inputs' shapes and small integer values, as the shape check's memo compares them.
    fn signature(inputs: &[&Tensor], dims: &mut Vec<usize>, values: &mut Vec<u8>) {
        for t in inputs {
            dims.push(t.dims().len());
            dims.extend_from_slice(t.dims());
            if let Some(bytes) = known_value(t).and_then(|t| t.as_bytes().ok()) {
                values.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
                values.extend_from_slice(bytes);
            }
        }
    }

    /// Checks the shapes (unless these were accepted last time) and runs the kernel.
    fn run(&self, op: &str, inputs: &[&Tensor]) -> Result<Vec<Tensor>, FunctionError> {
        let fail = |source: OpError| failure(op, inputs, source);
        let same = {
            let last = self.accepted.borrow();
            let (mut at, mut vat) = (0, 0);
            !last.0.is_empty()
                && inputs.iter().all(|t| {
                    let d = t.dims();
                    let ok = last.0.get(at) == Some(&d.len()) && last.0.get(at + 1..at + 1 + d.len()) == Some(d);
                    at += 1 + d.len();
                    match known_value(t).and_then(|t| t.as_bytes().ok()) {
                        Some(b) => {
                            let n =
                                last.1.get(vat..vat + 4).map(|l| u32::from_le_bytes(l.try_into().expect("4 bytes")));
                            let same = n == Some(b.len() as u32) && last.1.get(vat + 4..vat + 4 + b.len()) == Some(b);
                            vat += 4 + b.len();
                            ok && same
                        }
                        None => ok,
                    }
                })
                && at == last.0.len()
        };
        if !same {
            let shapes: Vec<Shape> = inputs.iter().map(|t| Shape::known(t.dims())).collect();
            let known: Vec<Option<Known>> =
                inputs.iter().map(|t| known_value(t).map(|v| Known::Value(v.clone()))).collect();
            ferroflow_ops::infer_node(self.def, &self.attrs, &shapes, &known).map_err(|e| fail(OpError::Shape(e)))?;
            let (mut dims, mut values) = (Vec::new(), Vec::new());
            Self::signature(inputs, &mut dims, &mut values);
            *self.accepted.borrow_mut() = (dims, values);
        }
        let mut owned: Vec<Tensor> = inputs.iter().map(|t| (*t).clone()).collect();
        let mut outputs = Vec::with_capacity(self.outputs);
        let ctx = KernelContext { intra_op: Some(intra_op_pool()), resources: None, step: None };
        self.kernel.compute(&ctx, &mut owned, &mut outputs).map_err(|e| fail(e.into()))?;
        crate::tape::record(op, &self.attrs, inputs, &mut outputs);
        Ok(outputs)
    }
}

/// An input whose value the shape function sees (`Reshape`'s shape, `Sum`'s axes).
fn known_value(t: &Tensor) -> Option<&Tensor> {
    (t.dtype().is_integer() && t.len() <= KNOWN_VALUES).then_some(t)
}

/// Runs `op` with complete attrs (type and count attrs included, as a graph node has them) on
/// `inputs` in flat signature order — how a graph's node runs eagerly (prepared once per
/// op, attrs and input dtypes on each thread, like [`Call::run`]).
pub fn execute(op: &str, attrs: &Attrs, inputs: &[&Tensor]) -> Result<Vec<Tensor>, FunctionError> {
    let key = |key: &mut Vec<u8>| {
        key.clear();
        key.push(3);
        key.extend_from_slice(op.as_bytes());
        key.extend(inputs.iter().map(|t| t.dtype().to_tf() as u8));
        for (name, value) in attrs {
            key.push(0);
            key.extend_from_slice(name.as_bytes());
            key.push(0);
            value.encode(key).expect("a Vec grows to hold what is encoded");
        }
        Ok(())
    };
    let prepare = || {
        let def = OpRegistry::global().get(op).ok_or_else(|| failure(op, inputs, OpError::UnknownOp))?;
        Prepared::new(op, def, attrs.clone(), inputs)
    };
    prepared(key, prepare)?.run(op, inputs)
}

/// This thread's prepared op for the key `key` writes, made by `prepare` on a miss.
fn prepared(
    key: impl FnOnce(&mut Vec<u8>) -> Result<(), FunctionError>,
    prepare: impl FnOnce() -> Result<Prepared, FunctionError>,
) -> Result<Rc<Prepared>, FunctionError> {
    KERNELS.with(|cell| {
        let (cache, k) = &mut *cell.borrow_mut();
        key(k)?;
        if let Some(e) = cache.get(k.as_slice()) {
            return Ok(e.clone());
        }
        let made = Rc::new(prepare()?);
        if cache.len() >= CACHE_ENTRIES {
            cache.clear();
        }
        cache.insert(k.clone(), made.clone());
        Ok(made)
    })
}

fn failure(op: &str, inputs: &[&Tensor], source: OpError) -> FunctionError {
    let described: Vec<String> = inputs.iter().map(|t| describe(t)).collect();
    FunctionError::Op { op: op.to_string(), inputs: described.join(", "), source }
}

/// `float[2, 3]`.
fn describe(t: &Tensor) -> String {
    let dims: Vec<String> = t.dims().iter().map(usize::to_string).collect();
    format!("{}[{}]", t.dtype(), dims.join(", "))
}

/// Prepared ops by their call's key (see `Call::key`).
type KernelCache = HashMap<Vec<u8>, Rc<Prepared>>;

thread_local! {
    /// This thread's prepared ops, and the key being built (reused: a hit allocates nothing).
    static KERNELS: RefCell<(KernelCache, Vec<u8>)> = RefCell::new((HashMap::new(), Vec::new()));
}

/// The intra-op pool eager kernels split their work on: one thread per core, made on first
/// use.
pub fn intra_op_pool() -> &'static rayon::ThreadPool {
    static POOL: OnceLock<rayon::ThreadPool> = OnceLock::new();
    POOL.get_or_init(|| {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        ferroflow_kernels::thread_pool(n, "eager", 0).expect("the eager intra-op pool starts")
    })
}

/// The op target of eager execution: every op of the one surface
/// ([`RawOps`](ferroflow_ops::RawOps)) runs at once on concrete tensors
/// (`Eager.mat_mul(&x, &w)`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Eager;

impl OpTarget for Eager {
    type Tensor = Tensor;
    type Node = ();
    type Error = FunctionError;

    fn apply(&self, call: OpCall<'_, Tensor>) -> Result<Applied<Tensor, ()>, FunctionError> {
        let OpCall { op, inputs, attrs, .. } = call;
        Ok(Applied { outputs: run_args(op, &inputs, attrs)?, node: () })
    }

    fn constant(&self, value: &Tensor) -> Result<Tensor, FunctionError> {
        Ok(value.clone())
    }

    fn output_count_error(&self, op: &str, got: usize) -> FunctionError {
        FunctionError::Op {
            op: op.to_string(),
            inputs: String::new(),
            source: OpError::Usage(format!("has {got} outputs; use run()")),
        }
    }
}

/// Runs `op` on the arguments of an [`OpCall`]: a [`Call`] built in place (a builder chain
/// would move it once per input and attr).
fn run_args<'a>(
    op: &'a str,
    inputs: &'a [OpArg<Tensor>],
    attrs: SmallVec<[(&'static str, AttrValue); 4]>,
) -> Result<Vec<Tensor>, FunctionError> {
    let c = Call {
        op,
        args: inputs
            .iter()
            .map(|a| match a {
                OpArg::One(t) => Arg::One(t),
                OpArg::List(ts) => Arg::List(ts),
            })
            .collect(),
        attrs: attrs.into_iter().map(|(name, value)| (name as &str, value)).collect(),
    };
    c.run()
}

impl Input<Eager> for Tensor {
    fn into_input(self, _: &Eager) -> Result<Tensor, FunctionError> {
        Ok(self)
    }
}

impl Input<Eager> for &Tensor {
    fn into_input(self, _: &Eager) -> Result<Tensor, FunctionError> {
        Ok(self.clone())
    }
}
