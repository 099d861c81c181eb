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
use std::sync::Arc;

use ferroflow_graph::{Graph, Output};
use ferroflow_ops::{RawOps, Scope};
use ferroflow_runtime::{ExecutionPlan, Session, SessionOptions};
use ferroflow_tensor::{DType, Shape, Tensor};

use crate::context::{current, output_in, tracing, Frame};
use crate::error::FunctionError;
use crate::value::Value;

/// Gradients of `target` with respect to `sources`, all symbolic values of the innermost
/// trace: graph autodiff (the same gradient functions as `autodiff::gradients`) on the graph
/// being traced. `None` where the target does not depend on a source.
pub(crate) fn symbolic_gradients(target: &Value, sources: &[&Value]) -> Result<Vec<Option<Value>>, FunctionError> {
    let (scope, id) = current().ok_or_else(|| FunctionError::usage("gradients", "no function is being traced"))?;
    let y = output_in(&scope, id, target, "gradients")?;
    let xs: Vec<Output> = sources.iter().map(|v| output_in(&scope, id, v, "gradients")).collect::<Result<_, _>>()?;
    let grads =
        ferroflow_autodiff::gradients(&scope, &[y], &xs, None).map_err(|e| FunctionError::traced("gradients", e))?;
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
    pub fn call(&self, args: &[Tensor]) -> Result<Vec<Tensor>, FunctionError> {
        let run = |feeds: &[Tensor]| {
            self.session.run_plan(&self.plan, feeds).map_err(|e| FunctionError::runtime(&self.name, e))
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
pub type Body<'f> = dyn Fn(&[Value]) -> Result<Vec<Value>, FunctionError> + 'f;

/// A function traced into graphs on demand (see the module docs).
///
/// `!Send` by design: it holds its body (any closure, which may capture thread-bound state)
/// and traces on the calling thread, whose eager context and tapes are thread-local. Its
/// [`ConcreteFunction`]s' graphs can be run by a `Session` shared between threads.
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
pub fn function<'f>(name: &str, body: impl Fn(&[Value]) -> Result<Vec<Value>, FunctionError> + 'f) -> Function<'f> {
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
    pub fn call_eagerly(&self, args: &[Tensor]) -> Result<Vec<Tensor>, FunctionError> {
        let values: Vec<Value> = args.iter().cloned().map(Value::Eager).collect();
        (self.body)(&values)?
            .into_iter()
            .map(|v| {
                v.tensor()
                    .cloned()
                    .ok_or_else(|| FunctionError::usage(&self.name, "the eager body returned a symbolic value"))
            })
            .collect()
    }

    /// Calls the function: traces it for this signature if it is new, then runs the graph.
    pub fn call(&self, args: &[Tensor]) -> Result<Vec<Tensor>, FunctionError> {
        self.call_keyed(&(), args)
    }

    /// [`Function::call`] with non-tensor arguments: `key` (any hashable value) is part of the
    /// signature, so a new value traces anew, as a new Python value does.
    pub fn call_keyed(&self, key: &impl Hash, args: &[Tensor]) -> Result<Vec<Tensor>, FunctionError> {
        self.concrete_function_keyed(key, args)?.call(args)
    }

    /// The concrete function for `args` (traced now if new).
    pub fn concrete_function_keyed(
        &self,
        key: &impl Hash,
        args: &[Tensor],
    ) -> Result<Rc<ConcreteFunction>, FunctionError> {
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

    fn signature(&self, args: &[Tensor], key: u64) -> Result<Signature, FunctionError> {
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
            return Err(FunctionError::usage(
                &self.name,
                format!("arguments ({}) do not match the input signature ({})", got.join(", "), want.join(", ")),
            ));
        }
        Ok(Signature { args: spec.clone(), key })
    }

    fn trace(&self, sig: &Signature) -> Result<ConcreteFunction, FunctionError> {
        let scope = Scope::new();
        let mut frame = Frame::new(scope.clone(), sig.args.len());
        frame.function = true;
        let id = frame.id;
        let mut params = Vec::with_capacity(sig.args.len());
        for (i, (dtype, dims)) in sig.args.iter().enumerate() {
            let o = scope
                .with_name(&format!("{}_arg{i}", self.name))
                .placeholder(*dtype, &Shape::new(dims.clone()))
                .map_err(|e| FunctionError::traced(&self.name, e))?;
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
                .map_err(|e| FunctionError::traced(&self.name, e))?;
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
        let session = Session::new(graph, self.options.clone()).map_err(|e| FunctionError::runtime(&self.name, e))?;
        for (key, _, var) in &frame.resources {
            session.resources().insert_variable(key, var.clone());
        }
        let feeds: Vec<&str> = inputs.iter().map(String::as_str).collect();
        let fetches: Vec<&str> = outputs.iter().map(String::as_str).collect();
        let targets: Vec<&str> = targets.iter().map(String::as_str).collect();
        let plan = session.plan(&feeds, &fetches, &targets).map_err(|e| FunctionError::runtime(&self.name, e))?;
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
            log::warn!(
                "function '{}' has been traced {} times ({}); pass an input signature with unknown dimensions, \
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
