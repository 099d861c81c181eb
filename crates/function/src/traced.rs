//! Graph functions (TensorFlow 2's `tf.function`): [`function`] wraps a Rust closure over
//! [`Value`]s; a call traces the closure with symbolic values into a graph — one concrete
//! function per input signature (dtypes and shapes, plus a hashable key standing for
//! non-tensor arguments, as Python values key `tf.function`'s cache) — and runs that graph
//! through a `Session`: the optimizer once, then a cached execution plan. The same closure
//! still runs eagerly ([`Function::call_eagerly`], `python_function`'s equivalent).
//!
//! Retracing is visible: [`Function::trace_count`], a warning on stderr past a configurable
//! number of traces, and [`Function::explain_last_trace`] naming the argument whose signature
//! changed (`x: float[2] → float[3]`).
use std::cell::{Cell, RefCell};
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ferroflow_graph::{Attrs, Graph, Output};
use ferroflow_ops::{OpRegistry, Scope};
use ferroflow_proto::{attr, AttrValue};
use ferroflow_runtime::{ExecutionPlan, Session, SessionOptions};
use ferroflow_tensor::{DType, Shape, Tensor};

use crate::eager::{self, infer_type_attrs, ArgDTypes, EagerError};

/// A tensor in a function's body: concrete when the body runs eagerly, a graph output while
/// it is traced.
#[derive(Clone, Debug)]
pub enum Value {
    /// A concrete tensor.
    Eager(Tensor),
    /// An output of a graph being traced, with its dtype and the trace's id.
    Symbolic(Output, DType, u64),
}

impl From<Tensor> for Value {
    fn from(t: Tensor) -> Value {
        Value::Eager(t)
    }
}

thread_local! {
    /// The graphs being traced on this thread with their ids (innermost trace last).
    static TRACING: RefCell<Vec<(Scope, u64)>> = const { RefCell::new(Vec::new()) };
}

/// A new trace id.
fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The innermost trace, if any.
fn current() -> Option<(Scope, u64)> {
    TRACING.with(|t| t.borrow().last().cloned())
}

/// Runs `f` with `scope` (id `id`) as the innermost trace.
fn tracing<R>(scope: &Scope, id: u64, f: impl FnOnce() -> R) -> R {
    TRACING.with(|t| t.borrow_mut().push((scope.clone(), id)));
    let r = f();
    TRACING.with(|t| t.borrow_mut().pop());
    r
}

/// `v` as an output of the trace `(scope, id)`: a constant when concrete; an error for a
/// symbolic value of another trace (a branch or loop body must get outer values through its
/// inputs).
fn output_in(scope: &Scope, id: u64, v: &Value, op: &str) -> Result<Output, EagerError> {
    match v {
        Value::Symbolic(o, _, t) if *t == id => Ok(*o),
        Value::Symbolic(..) => Err(trace_error(
            op,
            "a symbolic value of another trace was used here: pass outer values to a branch or loop body through its inputs",
        )),
        Value::Eager(t) => scope.constant(t).map_err(|e| trace_error(op, e.to_string())),
    }
}

fn trace_error(op: &str, reason: impl Into<String>) -> EagerError {
    EagerError { op: op.to_string(), inputs: "(traced)".into(), reason: reason.into() }
}

/// Applies `op` to `inputs` (each one tensor; lists with [`apply_lists`]): eagerly when all
/// are concrete and nothing is being traced, otherwise as a node of the traced graph (concrete
/// inputs become constants of it).
pub fn apply(op: &str, inputs: &[&Value], attrs: &[(&str, AttrValue)]) -> Result<Vec<Value>, EagerError> {
    if TRACING.with(|t| t.borrow().is_empty()) {
        // Eager: straight to the eager call, borrowing the tensors.
        let mut call = eager::op(op);
        for v in inputs {
            match v {
                Value::Eager(t) => call = call.input(t),
                Value::Symbolic(..) => {
                    return Err(trace_error(op, "a symbolic value was used outside the trace that made it"))
                }
            }
        }
        for (k, v) in attrs {
            call = call.attr(k, v.clone());
        }
        return Ok(call.run()?.into_iter().map(Value::Eager).collect());
    }
    let args: Vec<Vec<&Value>> = inputs.iter().map(|v| vec![*v]).collect();
    apply_args(op, &args, &vec![false; inputs.len()], attrs)
}

/// [`apply`] where `lists[i]` says that argument `i` is a list (`ConcatV2`'s values).
pub fn apply_lists(
    op: &str,
    args: &[Vec<&Value>],
    lists: &[bool],
    attrs: &[(&str, AttrValue)],
) -> Result<Vec<Value>, EagerError> {
    apply_args(op, args, lists, attrs)
}

fn apply_args(
    op: &str,
    args: &[Vec<&Value>],
    lists: &[bool],
    attrs: &[(&str, AttrValue)],
) -> Result<Vec<Value>, EagerError> {
    let scope = current();
    let all_eager = args.iter().flatten().all(|v| matches!(v, Value::Eager(_)));
    let Some((scope, id)) = scope else {
        if !all_eager {
            return Err(trace_error(op, "a symbolic value was used outside the trace that made it"));
        }
        let tensors: Vec<Vec<Tensor>> = args
            .iter()
            .map(|a| a.iter().map(|v| if let Value::Eager(t) = v { t.clone() } else { unreachable!() }).collect())
            .collect();
        let mut call = eager::op(op);
        for (a, &list) in tensors.iter().zip(lists) {
            call = if list { call.inputs(a) } else { call.input(&a[0]) };
        }
        for (k, v) in attrs {
            call = call.attr(k, v.clone());
        }
        return Ok(call.run()?.into_iter().map(Value::Eager).collect());
    };
    let def = OpRegistry::global().get(op).ok_or_else(|| trace_error(op, "no such op in the registry"))?;
    let mut flat = Vec::new();
    let mut dtypes = Vec::with_capacity(args.len());
    for (a, &list) in args.iter().zip(lists) {
        let mut ds = Vec::with_capacity(a.len());
        for v in a {
            let o = output_in(&scope, id, v, op)?;
            ds.push(scope.dtype(o));
            flat.push(o);
        }
        dtypes.push(if list { ArgDTypes::List(ds) } else { ArgDTypes::One(ds[0]) });
    }
    let mut full: Attrs = attrs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    infer_type_attrs(def, &dtypes, &mut full).map_err(|e| trace_error(op, e))?;
    let node = scope.add_op(op, op, &flat, &[], full).map_err(|e| trace_error(op, e.to_string()))?;
    let outputs = scope.with_graph(|g| g.node(node).types.outputs.clone());
    Ok(outputs.into_iter().enumerate().map(|(index, d)| Value::Symbolic(Output { node, index }, d, id)).collect())
}

fn apply1(op: &str, inputs: &[&Value], attrs: &[(&str, AttrValue)]) -> Result<Value, EagerError> {
    let mut out = apply(op, inputs, attrs)?;
    if out.len() != 1 {
        return Err(trace_error(op, format!("has {} outputs", out.len())));
    }
    Ok(out.remove(0))
}

impl Value {
    /// A scalar constant.
    pub fn scalar<T: ferroflow_tensor::Element>(v: T) -> Value {
        Value::Eager(Tensor::scalar(v))
    }
    /// The dtype.
    pub fn dtype(&self) -> DType {
        match self {
            Value::Eager(t) => t.dtype(),
            Value::Symbolic(_, d, _) => *d,
        }
    }
    /// The concrete tensor, when eager.
    pub fn tensor(&self) -> Option<&Tensor> {
        match self {
            Value::Eager(t) => Some(t),
            Value::Symbolic(..) => None,
        }
    }
    /// `x + y`.
    pub fn add(&self, y: &Value) -> Result<Value, EagerError> {
        apply1("AddV2", &[self, y], &[])
    }
    /// `x - y`.
    pub fn sub(&self, y: &Value) -> Result<Value, EagerError> {
        apply1("Sub", &[self, y], &[])
    }
    /// `x * y`.
    pub fn mul(&self, y: &Value) -> Result<Value, EagerError> {
        apply1("Mul", &[self, y], &[])
    }
    /// `x // y`.
    pub fn floor_div(&self, y: &Value) -> Result<Value, EagerError> {
        apply1("FloorDiv", &[self, y], &[])
    }
    /// `x % y` (`FloorMod`).
    pub fn floor_mod(&self, y: &Value) -> Result<Value, EagerError> {
        apply1("FloorMod", &[self, y], &[])
    }
    /// `x ** y`.
    pub fn pow(&self, y: &Value) -> Result<Value, EagerError> {
        apply1("Pow", &[self, y], &[])
    }
    /// The matrix product.
    pub fn matmul(&self, y: &Value) -> Result<Value, EagerError> {
        apply1("MatMul", &[self, y], &[])
    }
    /// A unary op by name (`Relu`, `Square`, ...).
    pub fn unary(&self, op: &str) -> Result<Value, EagerError> {
        apply1(op, &[self], &[])
    }
    /// `x > y`.
    pub fn greater(&self, y: &Value) -> Result<Value, EagerError> {
        apply1("Greater", &[self, y], &[])
    }
    /// `x < y`.
    pub fn less(&self, y: &Value) -> Result<Value, EagerError> {
        apply1("Less", &[self, y], &[])
    }
    /// `x == y`.
    pub fn equal(&self, y: &Value) -> Result<Value, EagerError> {
        apply1("Equal", &[self, y], &[])
    }
    /// `x and y` (booleans).
    pub fn logical_and(&self, y: &Value) -> Result<Value, EagerError> {
        apply1("LogicalAnd", &[self, y], &[])
    }
    /// `not x` (booleans).
    pub fn logical_not(&self) -> Result<Value, EagerError> {
        apply1("LogicalNot", &[self], &[])
    }
    /// Element `i` of a vector (`GatherV2` on axis 0).
    pub fn at(&self, i: &Value) -> Result<Value, EagerError> {
        apply1("GatherV2", &[self, i, &Value::scalar(0i32)], &[])
    }
    /// The length of a vector (`Size`, int32).
    pub fn size(&self) -> Result<Value, EagerError> {
        apply1("Size", &[self], &[])
    }
    /// The sum over `axes`.
    pub fn reduce_sum(&self, axes: &[i32], keep_dims: bool) -> Result<Value, EagerError> {
        let axes = Value::Eager(Tensor::from_vec(&[axes.len()], axes.to_vec()).expect("a vector of axes"));
        apply1("Sum", &[self, &axes], &[("keep_dims", attr::boolean(keep_dims))])
    }
}

/// The signature of one call: each argument's dtype and dims (`None`: any size), and the key
/// of its non-tensor arguments.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Signature {
    args: Vec<(DType, Vec<Option<usize>>)>,
    key: u64,
}

/// `float[2, ?]`.
fn spec_text(dtype: DType, dims: &[Option<usize>]) -> String {
    let dims: Vec<String> = dims.iter().map(|d| d.map_or("?".to_string(), |d| d.to_string())).collect();
    format!("{dtype}[{}]", dims.join(", "))
}

/// One traced graph: its session (optimizer run, plan cached) and its feed and fetch names.
pub struct ConcreteFunction {
    session: Session,
    plan: Arc<ExecutionPlan>,
    inputs: Vec<String>,
    outputs: Vec<String>,
}

impl ConcreteFunction {
    /// The traced graph (before the optimizer).
    pub fn graph(&self) -> &Graph {
        self.session.graph()
    }
    /// The input (placeholder) and output tensor names.
    pub fn names(&self) -> (&[String], &[String]) {
        (&self.inputs, &self.outputs)
    }
    /// The traced graph as a `GraphDef` with its function library (branches and loop bodies),
    /// for TensorFlow (`tf.graph_util.import_graph_def`), `ferroflow run` and `ferroflow
    /// tensorboard`: feed the [`ConcreteFunction::names`] inputs, fetch the outputs.
    pub fn graph_def(&self) -> ferroflow_proto::GraphDef {
        self.session.graph().to_graph_def()
    }

    /// Runs the graph on `args`.
    pub fn call(&self, args: &[Tensor]) -> Result<Vec<Tensor>, EagerError> {
        self.session.run_plan(&self.plan, args).map_err(|e| trace_error("function call", e.to_string()))
    }
}

/// The body of a graph function.
pub type Body<'f> = dyn Fn(&[Value]) -> Result<Vec<Value>, EagerError> + 'f;

/// A function traced into graphs on demand (see the module docs).
pub struct Function<'f> {
    name: String,
    body: Box<Body<'f>>,
    input_signature: Option<Vec<(DType, Vec<Option<usize>>)>>,
    concrete: RefCell<HashMap<Signature, Rc<ConcreteFunction>>>,
    traced: RefCell<Vec<Signature>>,
    warn_after: Cell<usize>,
    explanation: RefCell<Option<String>>,
}

/// Wraps `body` as a graph function named `name`.
pub fn function<'f>(name: &str, body: impl Fn(&[Value]) -> Result<Vec<Value>, EagerError> + 'f) -> Function<'f> {
    Function {
        name: name.to_string(),
        body: Box::new(body),
        input_signature: None,
        concrete: RefCell::new(HashMap::new()),
        traced: RefCell::new(Vec::new()),
        warn_after: Cell::new(5),
        explanation: RefCell::new(None),
    }
}

impl<'f> Function<'f> {
    /// Fixes the input signature (`tf.function(input_signature=...)`): dtypes and dims, `None`
    /// for a dimension of any size. Calls must match it, and all share one trace.
    pub fn input_signature(mut self, spec: &[(DType, &[Option<usize>])]) -> Function<'f> {
        self.input_signature = Some(spec.iter().map(|(d, dims)| (*d, dims.to_vec())).collect());
        self
    }

    /// Warns on stderr once the function has been traced more than `n` times (default 5).
    pub fn warn_after_traces(self, n: usize) -> Function<'f> {
        self.warn_after.set(n);
        self
    }

    /// Runs the body eagerly on concrete tensors (`tf.function`'s `python_function`).
    pub fn call_eagerly(&self, args: &[Tensor]) -> Result<Vec<Tensor>, EagerError> {
        let values: Vec<Value> = args.iter().cloned().map(Value::Eager).collect();
        (self.body)(&values)?
            .into_iter()
            .map(|v| {
                v.tensor().cloned().ok_or_else(|| trace_error(&self.name, "the eager body returned a symbolic value"))
            })
            .collect()
    }

    /// Calls the function: traces it for this signature if it is new, then runs the graph.
    pub fn call(&self, args: &[Tensor]) -> Result<Vec<Tensor>, EagerError> {
        self.call_keyed(&(), args)
    }

    /// [`Function::call`] with non-tensor arguments: `key` (any hashable value) is part of the
    /// signature, so a new value traces anew, as a new Python value does.
    pub fn call_keyed(&self, key: &impl Hash, args: &[Tensor]) -> Result<Vec<Tensor>, EagerError> {
        self.concrete_function_keyed(key, args)?.call(args)
    }

    /// The concrete function for `args` (traced now if new).
    pub fn concrete_function_keyed(
        &self,
        key: &impl Hash,
        args: &[Tensor],
    ) -> Result<Rc<ConcreteFunction>, EagerError> {
        let mut h = DefaultHasher::new();
        key.hash(&mut h);
        let sig = self.signature(args, h.finish())?;
        if let Some(c) = self.concrete.borrow().get(&sig) {
            return Ok(c.clone());
        }
        let c = Rc::new(self.trace(&sig)?);
        self.note_trace(&sig);
        self.concrete.borrow_mut().insert(sig, c.clone());
        Ok(c)
    }

    fn signature(&self, args: &[Tensor], key: u64) -> Result<Signature, EagerError> {
        let Some(spec) = &self.input_signature else {
            let args = args.iter().map(|t| (t.dtype(), t.dims().iter().map(|&d| Some(d)).collect())).collect();
            return Ok(Signature { args, key });
        };
        let matches = spec.len() == args.len()
            && spec.iter().zip(args).all(|((d, dims), t)| {
                *d == t.dtype()
                    && dims.len() == t.dims().len()
                    && dims.iter().zip(t.dims()).all(|(want, got)| want.is_none_or(|w| w == *got))
            });
        if !matches {
            let want: Vec<String> = spec.iter().map(|(d, dims)| spec_text(*d, dims)).collect();
            let got: Vec<String> = args
                .iter()
                .map(|t| spec_text(t.dtype(), &t.dims().iter().map(|&d| Some(d)).collect::<Vec<_>>()))
                .collect();
            return Err(trace_error(
                &self.name,
                format!("arguments ({}) do not match the input signature ({})", got.join(", "), want.join(", ")),
            ));
        }
        Ok(Signature { args: spec.clone(), key })
    }

    fn trace(&self, sig: &Signature) -> Result<ConcreteFunction, EagerError> {
        let scope = Scope::new();
        let id = next_id();
        let mut params = Vec::with_capacity(sig.args.len());
        for (i, (dtype, dims)) in sig.args.iter().enumerate() {
            let o = scope
                .with_name(&format!("{}_arg{i}", self.name))
                .placeholder(*dtype, &Shape::new(dims.clone()))
                .map_err(|e| trace_error(&self.name, e.to_string()))?;
            params.push(Value::Symbolic(o, *dtype, id));
        }
        let result = tracing(&scope, id, || (self.body)(&params));
        let mut outputs = Vec::new();
        for v in result? {
            let o = output_in(&scope, id, &v, &self.name)?;
            // Outputs are named `<name>_out<i>`, one Identity each.
            let id = scope
                .with_name(&format!("{}_out{}", self.name, outputs.len()))
                .identity(o)
                .map_err(|e| trace_error(&self.name, e.to_string()))?;
            outputs.push(id);
        }
        let graph = scope.graph();
        let inputs: Vec<String> = params
            .iter()
            .map(|p| match p {
                Value::Symbolic(o, ..) => graph.output_name(*o),
                Value::Eager(_) => unreachable!("parameters are symbolic"),
            })
            .collect();
        let outputs: Vec<String> = outputs.iter().map(|o| graph.output_name(*o)).collect();
        let session =
            Session::new(graph, SessionOptions::default()).map_err(|e| trace_error(&self.name, e.to_string()))?;
        let feeds: Vec<&str> = inputs.iter().map(String::as_str).collect();
        let fetches: Vec<&str> = outputs.iter().map(String::as_str).collect();
        let plan = session.plan(&feeds, &fetches, &[]).map_err(|e| trace_error(&self.name, e.to_string()))?;
        Ok(ConcreteFunction { session, plan, inputs, outputs })
    }

    /// Counts the trace, explains it against the closest earlier one, warns past the limit.
    fn note_trace(&self, sig: &Signature) {
        let mut traced = self.traced.borrow_mut();
        let explanation = traced
            .iter()
            .filter(|s| s.args.len() == sig.args.len())
            .map(|s| {
                let mut changes: Vec<String> = s
                    .args
                    .iter()
                    .zip(&sig.args)
                    .enumerate()
                    .filter(|(_, (a, b))| a != b)
                    .map(|(i, (a, b))| format!("arg {i}: {} → {}", spec_text(a.0, &a.1), spec_text(b.0, &b.1)))
                    .collect();
                if s.key != sig.key {
                    changes.push("the non-tensor arguments (key) changed".into());
                }
                changes
            })
            .min_by_key(Vec::len)
            .map(|changes| format!("retraced '{}' because {}", self.name, changes.join(", ")));
        traced.push(sig.clone());
        if traced.len() > self.warn_after.get() {
            eprintln!(
                "warning: function '{}' has been traced {} times ({}); pass an input signature with unknown dimensions, \
                 or keep argument shapes and non-tensor arguments stable",
                self.name,
                traced.len(),
                explanation.as_deref().unwrap_or("new signature")
            );
        }
        *self.explanation.borrow_mut() = explanation;
    }

    /// How many times the function was traced.
    pub fn trace_count(&self) -> usize {
        self.traced.borrow().len()
    }

    /// How many concrete functions it holds (one per signature).
    pub fn concrete_functions(&self) -> usize {
        self.concrete.borrow().len()
    }

    /// Why the last trace happened: the arguments whose signature changed against the
    /// closest earlier trace (`None` after the first trace).
    pub fn explain_last_trace(&self) -> Option<String> {
        self.explanation.borrow().clone()
    }
}

/// Whether a concrete scalar predicate holds (non-zero numbers, `true`).
fn truth(v: &Value, op: &str) -> Result<bool, EagerError> {
    let t = v.tensor().ok_or_else(|| trace_error(op, "the predicate is symbolic outside a trace"))?;
    if t.len() != 1 {
        return Err(trace_error(op, format!("the predicate must have one element, it has {}", t.len())));
    }
    let as_bool = Tensor::scalar(false);
    let t = if t.dtype() == as_bool.dtype() { t.clone() } else { crate::eager::Eager::cast(t, as_bool.dtype())? };
    Ok(t.as_slice::<bool>().map_err(|e| trace_error(op, e.to_string()))?[0])
}

/// A traced branch or loop body: its `FunctionDef`, output dtypes, and the functions it calls.
struct Traced {
    def: ferroflow_proto::FunctionDef,
    outputs: Vec<DType>,
    library: Vec<ferroflow_proto::FunctionDef>,
}

/// Traces `f` on parameters of `dtypes` into a function named `<prefix>_<n>`.
fn trace_function(prefix: &str, dtypes: &[DType], f: &Body<'_>) -> Result<Traced, EagerError> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = format!("{prefix}_{}", NEXT.fetch_add(1, Ordering::Relaxed));
    let sub = Scope::new();
    let id = next_id();
    let mut params = Vec::with_capacity(dtypes.len());
    for (i, d) in dtypes.iter().enumerate() {
        let o = sub
            .with_exact_name(&format!("arg{i}"))
            .placeholder(*d, &Shape::unknown())
            .map_err(|e| trace_error(&name, e.to_string()))?;
        params.push(Value::Symbolic(o, *d, id));
    }
    let result = tracing(&sub, id, || f(&params))?;
    let outputs: Vec<Output> = result.iter().map(|v| output_in(&sub, id, v, &name)).collect::<Result<_, _>>()?;
    let graph = sub.graph();
    let def = function_def(&name, &graph, params.len(), &outputs).map_err(|e| trace_error(&name, e))?;
    Ok(Traced {
        def,
        outputs: outputs.iter().map(|o| graph.output_type(*o)).collect(),
        library: graph.library.function,
    })
}

/// A graph whose nodes `arg0..argN` are placeholders as a `FunctionDef` returning `outputs`:
/// body references in TensorFlow's `node:output_arg:index` form.
fn function_def(
    name: &str,
    g: &Graph,
    args: usize,
    outputs: &[Output],
) -> Result<ferroflow_proto::FunctionDef, String> {
    use ferroflow_proto::{op_def::ArgDef, FunctionDef, NodeDef, OpDef};
    let arg_index = |n: &ferroflow_graph::Node| {
        n.name.strip_prefix("arg").and_then(|i| i.parse::<usize>().ok()).filter(|&i| i < args && n.op == "Placeholder")
    };
    let reference = |o: Output| -> Result<String, String> {
        let n = g.node(o.node);
        if let Some(i) = arg_index(n) {
            return Ok(format!("arg{i}"));
        }
        let def = OpRegistry::global().get(&n.op).ok_or_else(|| format!("op '{}' is not in the registry", n.op))?;
        let ranges = def.output_ranges(&n.attrs)?;
        let (arg, r) = ranges.iter().find(|(_, r)| r.contains(&o.index)).ok_or("an output out of range")?;
        Ok(format!("{}:{arg}:{}", n.name, o.index - r.start))
    };
    let mut nodes = Vec::new();
    for n in g.nodes().iter().filter(|n| arg_index(n).is_none()) {
        let mut input: Vec<String> = n.inputs.iter().map(|o| reference(*o)).collect::<Result<_, _>>()?;
        input.extend(n.control_inputs.iter().map(|c| format!("^{}", g.node(*c).name)));
        nodes.push(NodeDef {
            name: n.name.clone(),
            op: n.op.clone(),
            input,
            attr: n.attrs.clone(),
            ..Default::default()
        });
    }
    let arg_def = |name: String, d: DType| ArgDef { name, r#type: d.to_tf(), ..Default::default() };
    let input_arg = (0..args)
        .map(|i| {
            let n = g.find(&format!("arg{i}")).ok_or("a missing argument")?;
            Ok(arg_def(format!("arg{i}"), g.node(n).types.outputs[0]))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let output_arg = outputs.iter().enumerate().map(|(i, o)| arg_def(format!("out{i}"), g.output_type(*o))).collect();
    let ret = outputs
        .iter()
        .enumerate()
        .map(|(i, o)| Ok((format!("out{i}"), reference(*o)?)))
        .collect::<Result<_, String>>()?;
    Ok(FunctionDef {
        signature: Some(OpDef { name: name.to_string(), input_arg, output_arg, ..Default::default() }),
        node_def: nodes,
        ret,
        ..Default::default()
    })
}

/// TensorFlow's `tf.cond`: `then_fn(inputs)` when `pred` holds, else `else_fn(inputs)`. Run
/// eagerly it is an `if`; traced, both branches become functions of the graph's library and a
/// `StatelessIf` node chooses. Both must return the same number and dtypes of values.
pub fn cond(
    pred: &Value,
    inputs: &[Value],
    then_fn: impl Fn(&[Value]) -> Result<Vec<Value>, EagerError>,
    else_fn: impl Fn(&[Value]) -> Result<Vec<Value>, EagerError>,
) -> Result<Vec<Value>, EagerError> {
    let Some((scope, id)) = current() else {
        return if truth(pred, "cond")? { then_fn(inputs) } else { else_fn(inputs) };
    };
    let dtypes: Vec<DType> = inputs.iter().map(Value::dtype).collect();
    let then = trace_function("cond_then", &dtypes, &then_fn)?;
    let other = trace_function("cond_else", &dtypes, &else_fn)?;
    if then.outputs != other.outputs {
        return Err(trace_error(
            "cond",
            format!("the branches return different dtypes: then {:?}, else {:?}", then.outputs, other.outputs),
        ));
    }
    let mut flat = vec![output_in(&scope, id, pred, "cond")?];
    for v in inputs {
        flat.push(output_in(&scope, id, v, "cond")?);
    }
    let mut attrs = Attrs::new();
    attrs.insert("Tcond".into(), attr::dtype(pred.dtype()));
    attrs.insert("Tin".into(), attr::dtypes(&dtypes));
    attrs.insert("Tout".into(), attr::dtypes(&then.outputs));
    attrs.insert("then_branch".into(), attr::func(&then.def.signature.as_ref().expect("named").name));
    attrs.insert("else_branch".into(), attr::func(&other.def.signature.as_ref().expect("named").name));
    let outs = then.outputs.clone();
    for f in then.library.into_iter().chain(other.library).chain([then.def, other.def]) {
        scope.add_function(f);
    }
    let node =
        scope.add_op("StatelessIf", "cond", &flat, &[], attrs).map_err(|e| trace_error("cond", e.to_string()))?;
    Ok(outs.into_iter().enumerate().map(|(index, d)| Value::Symbolic(Output { node, index }, d, id)).collect())
}

/// TensorFlow's `tf.while_loop`: while `cond_fn(vars)` holds, `vars = body_fn(vars)`. Run
/// eagerly it is a `while`; traced, both become library functions and a `StatelessWhile` node
/// loops. The body must return values of the loop variables' dtypes.
pub fn while_loop(
    cond_fn: impl Fn(&[Value]) -> Result<Value, EagerError>,
    body_fn: impl Fn(&[Value]) -> Result<Vec<Value>, EagerError>,
    vars: &[Value],
) -> Result<Vec<Value>, EagerError> {
    let dtypes: Vec<DType> = vars.iter().map(Value::dtype).collect();
    let Some((scope, id)) = current() else {
        let mut vars = vars.to_vec();
        while truth(&cond_fn(&vars)?, "while_loop")? {
            let next = body_fn(&vars)?;
            let next_dtypes: Vec<DType> = next.iter().map(Value::dtype).collect();
            if next_dtypes != dtypes {
                return Err(trace_error(
                    "while_loop",
                    format!("the body returns {next_dtypes:?} for loop variables of {dtypes:?}"),
                ));
            }
            vars = next;
        }
        return Ok(vars);
    };
    let c = trace_function("while_cond", &dtypes, &|v: &[Value]| Ok(vec![cond_fn(v)?]))?;
    let b = trace_function("while_body", &dtypes, &body_fn)?;
    if b.outputs != dtypes {
        return Err(trace_error(
            "while_loop",
            format!("the body returns {:?} for loop variables of {dtypes:?}", b.outputs),
        ));
    }
    let flat: Vec<Output> = vars.iter().map(|v| output_in(&scope, id, v, "while_loop")).collect::<Result<_, _>>()?;
    let mut attrs = Attrs::new();
    attrs.insert("T".into(), attr::dtypes(&dtypes));
    attrs.insert("cond".into(), attr::func(&c.def.signature.as_ref().expect("named").name));
    attrs.insert("body".into(), attr::func(&b.def.signature.as_ref().expect("named").name));
    for f in c.library.into_iter().chain(b.library).chain([c.def, b.def]) {
        scope.add_function(f);
    }
    let node = scope
        .add_op("StatelessWhile", "while", &flat, &[], attrs)
        .map_err(|e| trace_error("while_loop", e.to_string()))?;
    Ok(dtypes.into_iter().enumerate().map(|(index, d)| Value::Symbolic(Output { node, index }, d, id)).collect())
}
