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

/// One graph being traced: its scope and id, the outer symbolic values it captured (each
/// with the placeholder standing for it), and how many explicit arguments precede them.
pub(crate) struct Frame {
    pub(crate) scope: Scope,
    pub(crate) id: u64,
    pub(crate) args: usize,
    pub(crate) captures: Vec<(Value, Output)>,
    /// Whether this is a function's own graph (not a branch or loop body): variables are read
    /// and assigned here.
    pub(crate) function: bool,
    /// Variables captured by the function: (resource key, handle placeholder), and the
    /// stateful nodes in program order.
    pub(crate) resources: Vec<(String, Output, Arc<ferroflow_kernels::resource::Variable>)>,
    pub(crate) stateful: Vec<ferroflow_graph::NodeId>,
}

impl Frame {
    pub(crate) fn new(scope: Scope, args: usize) -> Frame {
        Frame {
            scope,
            id: next_id(),
            args,
            captures: Vec::new(),
            function: false,
            resources: Vec::new(),
            stateful: Vec::new(),
        }
    }
}

thread_local! {
    /// The graphs being traced on this thread (innermost last).
    static TRACING: RefCell<Vec<Frame>> = const { RefCell::new(Vec::new()) };
}

/// A new trace id.
fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The innermost trace, if any.
pub(crate) fn current() -> Option<(Scope, u64)> {
    TRACING.with(|t| t.borrow().last().map(|f| (f.scope.clone(), f.id)))
}

/// Runs `f` on the innermost function frame (the concrete function being traced).
pub(crate) fn with_function_frame<R>(f: impl FnOnce(&mut Frame) -> R) -> Option<R> {
    TRACING.with(|t| t.borrow_mut().iter_mut().rev().find(|f| f.function).map(f))
}

/// Runs `f` with `frame` as the innermost trace; gives the frame back (with its captures).
pub(crate) fn tracing<R>(frame: Frame, f: impl FnOnce() -> R) -> (R, Frame) {
    TRACING.with(|t| t.borrow_mut().push(frame));
    let r = f();
    let frame = TRACING.with(|t| t.borrow_mut().pop()).expect("the frame pushed above");
    (r, frame)
}

/// `v` as an output of the trace `(scope, id)`: a constant when concrete; a symbolic value of
/// an enclosing trace is captured (a placeholder of this trace stands for it, and the branch or
/// loop node that calls this trace takes it as an extra input, as TensorFlow 2 captures).
pub(crate) fn output_in(scope: &Scope, id: u64, v: &Value, op: &str) -> Result<Output, EagerError> {
    match v {
        Value::Symbolic(o, _, t) if *t == id => Ok(*o),
        Value::Symbolic(o, d, t) => TRACING.with(|stack| {
            let mut stack = stack.borrow_mut();
            let outer = stack.iter().position(|f| f.id == *t);
            let inner = stack.iter().position(|f| f.id == id);
            let (Some(outer), Some(inner)) = (outer, inner) else {
                return Err(trace_error(op, "a symbolic value was used outside the trace that made it"));
            };
            if outer >= inner {
                return Err(trace_error(op, "a value of a branch or loop body was used outside it"));
            }
            if let Some((_, p)) = stack[inner].captures.iter().find(|(c, _)| same(c, v)) {
                return Ok(*p);
            }
            let shape = static_shape_in(&stack[outer].scope, *o);
            let frame = &mut stack[inner];
            let name = format!("arg{}", frame.args + frame.captures.len());
            let p = scope.with_exact_name(&name).placeholder(*d, &shape).map_err(|e| trace_error(op, e.to_string()))?;
            frame.captures.push((Value::Symbolic(*o, *d, *t), p));
            Ok(p)
        }),
        Value::Eager(t) => scope.constant(t).map_err(|e| trace_error(op, e.to_string())),
    }
}

/// The static shape of `o` in `scope`'s graph (unknown when it cannot be inferred).
pub(crate) fn static_shape_in(scope: &Scope, o: Output) -> Shape {
    scope
        .with_graph(|g| {
            ferroflow_ops::infer_shapes(g).ok().and_then(|s| s.get(o.node).and_then(|s| s.get(o.index)).cloned())
        })
        .unwrap_or_else(Shape::unknown)
}

/// The static shape of a value of an enclosing trace (unknown when that trace is not on this
/// thread's stack).
pub(crate) fn capture_shape(v: &Value) -> Shape {
    match v {
        Value::Eager(t) => Shape::known(t.dims()),
        Value::Symbolic(o, _, t) => TRACING
            .with(|stack| stack.borrow().iter().find(|f| f.id == *t).map(|f| static_shape_in(&f.scope, *o)))
            .unwrap_or_else(Shape::unknown),
    }
}

/// Whether two values are the same symbolic output.
pub(crate) fn same(a: &Value, b: &Value) -> bool {
    matches!((a, b), (Value::Symbolic(o, _, t), Value::Symbolic(p, _, u)) if o == p && t == u)
}

pub(crate) fn trace_error(op: &str, reason: impl Into<String>) -> EagerError {
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

pub(crate) fn apply1(op: &str, inputs: &[&Value], attrs: &[(&str, AttrValue)]) -> Result<Value, EagerError> {
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
    /// The mean over `axes`.
    pub fn reduce_mean(&self, axes: &[i32], keep_dims: bool) -> Result<Value, EagerError> {
        let axes = Value::Eager(Tensor::from_vec(&[axes.len()], axes.to_vec()).expect("a vector of axes"));
        apply1("Mean", &[self, &axes], &[("keep_dims", attr::boolean(keep_dims))])
    }
    /// `x` as `dtype`.
    pub fn cast(&self, dtype: DType) -> Result<Value, EagerError> {
        apply1("Cast", &[self], &[("DstT", attr::dtype(dtype))])
    }
    /// The sum over `axes`.
    pub fn reduce_sum(&self, axes: &[i32], keep_dims: bool) -> Result<Value, EagerError> {
        let axes = Value::Eager(Tensor::from_vec(&[axes.len()], axes.to_vec()).expect("a vector of axes"));
        apply1("Sum", &[self, &axes], &[("keep_dims", attr::boolean(keep_dims))])
    }
}

/// Gradients of `target` with respect to `sources`, all symbolic values of the innermost
/// trace: graph autodiff (the same gradient functions as `autodiff::gradients`) on the graph
/// being traced. `None` where the target does not depend on a source.
pub(crate) fn symbolic_gradients(target: &Value, sources: &[&Value]) -> Result<Vec<Option<Value>>, EagerError> {
    let (scope, id) = current().ok_or_else(|| trace_error("gradients", "no function is being traced"))?;
    let y = output_in(&scope, id, target, "gradients")?;
    let xs: Vec<Output> = sources.iter().map(|v| output_in(&scope, id, v, "gradients")).collect::<Result<_, _>>()?;
    let grads =
        ferroflow_autodiff::gradients(&scope, &[y], &xs, None).map_err(|e| trace_error("gradients", e.to_string()))?;
    Ok(grads.into_iter().map(|g| g.map(|o| Value::Symbolic(o, scope.dtype(o), id))).collect())
}

/// The signature of one call: each argument's dtype and dims (`None`: any size), and the key
/// of its non-tensor arguments.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Signature {
    args: Vec<(DType, Vec<Option<usize>>)>,
    key: u64,
}

/// `float32[2, ?]`.
fn spec_text(dtype: DType, dims: &[Option<usize>]) -> String {
    crate::control::spec(dtype, &Shape::new(dims.to_vec()))
}

/// One traced graph: its session (optimizer run, plan cached) and its feed and fetch names.
pub struct ConcreteFunction {
    name: String,
    session: Session,
    plan: Arc<ExecutionPlan>,
    inputs: Vec<String>,
    outputs: Vec<String>,
    /// The handles of captured variables, fed after the arguments.
    handles: Vec<Tensor>,
    /// The function's argument names, if it was given them.
    arg_names: Vec<String>,
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
    /// The function's argument names (empty when it was not given them; the macro gives
    /// them).
    pub fn arg_names(&self) -> &[String] {
        &self.arg_names
    }
    /// How many variables the function captures (fed as resource handles after the
    /// arguments).
    pub fn captured_variables(&self) -> usize {
        self.handles.len()
    }
    /// The traced graph as a `GraphDef` with its function library (branches and loop bodies),
    /// for TensorFlow (`tf.graph_util.import_graph_def`), `ferroflow run` and `ferroflow
    /// tensorboard`: feed the [`ConcreteFunction::names`] inputs, fetch the outputs.
    pub fn graph_def(&self) -> ferroflow_proto::GraphDef {
        self.session.graph().to_graph_def()
    }

    /// Runs the graph on `args`.
    pub fn call(&self, args: &[Tensor]) -> Result<Vec<Tensor>, EagerError> {
        let run = |feeds: &[Tensor]| {
            self.session.run_plan(&self.plan, feeds).map_err(|e| trace_error(&self.name, e.to_string()))
        };
        if self.handles.is_empty() {
            return run(args);
        }
        let feeds: Vec<Tensor> = args.iter().chain(&self.handles).cloned().collect();
        run(&feeds)
    }

    /// What the optimizer did to the graph for its plan (`None` with optimization off):
    /// `report.table()` per pass, `report.details()` per node, as `ferroflow optimize
    /// --report` prints for a GraphDef.
    pub fn optimizer_report(&self) -> Option<&ferroflow_optimize::Report> {
        self.plan.optimizer_report()
    }

    /// The session that runs the graph (its resources, its options).
    pub fn session(&self) -> &Session {
        &self.session
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
    options: SessionOptions,
    arg_names: Vec<String>,
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
        options: SessionOptions::default(),
        arg_names: Vec::new(),
    }
}

impl<'f> Function<'f> {
    /// Fixes the input signature (`tf.function(input_signature=...)`): dtypes and dims, `None`
    /// for a dimension of any size. Calls must match it, and all share one trace.
    pub fn input_signature(mut self, spec: &[(DType, &[Option<usize>])]) -> Function<'f> {
        self.input_signature = Some(spec.iter().map(|(d, dims)| (*d, dims.to_vec())).collect());
        self
    }

    /// Names the arguments (for retrace explanations: `x: float32[2] → float32[3]`).
    pub fn arg_names(mut self, names: &[&str]) -> Function<'f> {
        self.arg_names = names.iter().map(|n| n.to_string()).collect();
        self
    }

    /// Warns on stderr once the function has been traced more than `n` times (default 5).
    pub fn warn_after_traces(self, n: usize) -> Function<'f> {
        self.warn_after.set(n);
        self
    }

    /// The options of the sessions that run its concrete functions (threads, optimizer,
    /// `max_loop_iterations`: a `while` over tensors that never ends stops there).
    pub fn session_options(mut self, options: SessionOptions) -> Function<'f> {
        self.options = options;
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
        let mut frame = Frame::new(scope.clone(), sig.args.len());
        frame.function = true;
        let id = frame.id;
        let mut params = Vec::with_capacity(sig.args.len());
        for (i, (dtype, dims)) in sig.args.iter().enumerate() {
            let o = scope
                .with_name(&format!("{}_arg{i}", self.name))
                .placeholder(*dtype, &Shape::new(dims.clone()))
                .map_err(|e| trace_error(&self.name, e.to_string()))?;
            params.push(Value::Symbolic(o, *dtype, id));
        }
        let (result, frame) = tracing(frame, || (self.body)(&params));
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
        let mut inputs: Vec<String> = params
            .iter()
            .map(|p| match p {
                Value::Symbolic(o, ..) => graph.output_name(*o),
                Value::Eager(_) => unreachable!("parameters are symbolic"),
            })
            .collect();
        // Captured variables: their handles are fed after the arguments.
        let mut handles = Vec::new();
        for (key, placeholder, _) in &frame.resources {
            inputs.push(graph.output_name(*placeholder));
            handles.push(Tensor::resource_handle(key));
        }
        let outputs: Vec<String> = outputs.iter().map(|o| graph.output_name(*o)).collect();
        // Stateful ops (variable updates) run on every call even when no output needs them.
        let targets: Vec<String> = frame.stateful.iter().map(|n| graph.node(*n).name.clone()).collect();
        let session = Session::new(graph, self.options.clone()).map_err(|e| trace_error(&self.name, e.to_string()))?;
        for (key, _, var) in &frame.resources {
            session.resources().insert_variable(key, var.clone());
        }
        let feeds: Vec<&str> = inputs.iter().map(String::as_str).collect();
        let fetches: Vec<&str> = outputs.iter().map(String::as_str).collect();
        let targets: Vec<&str> = targets.iter().map(String::as_str).collect();
        let plan = session.plan(&feeds, &fetches, &targets).map_err(|e| trace_error(&self.name, e.to_string()))?;
        Ok(ConcreteFunction {
            name: self.name.clone(),
            session,
            plan,
            inputs,
            outputs,
            handles,
            arg_names: self.arg_names.clone(),
        })
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
                    .map(|(i, (a, b))| {
                        let name = self.arg_names.get(i).cloned().unwrap_or_else(|| format!("arg {i}"));
                        format!("{name}: {} → {}", spec_text(a.0, &a.1), spec_text(b.0, &b.1))
                    })
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
