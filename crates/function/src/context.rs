//! The trace context: the graphs being traced on this thread (a function's, and inside it
//! the branches and loop bodies of its control flow), innermost last, and how a value of one
//! trace is used in another (captures). Functions, control flow and variables all trace
//! through it.
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ferroflow_graph::Output;
use ferroflow_ops::{OpTarget, Scope};
use ferroflow_tensor::Shape;

use crate::error::FunctionError;
use crate::value::Value;

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
    pub(crate) static TRACING: RefCell<Vec<Frame>> = const { RefCell::new(Vec::new()) };
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
pub(crate) fn output_in(scope: &Scope, id: u64, v: &Value, op: &str) -> Result<Output, FunctionError> {
    match v {
        Value::Symbolic(o, _, t) if *t == id => Ok(*o),
        Value::Symbolic(o, d, t) => TRACING.with(|stack| {
            let mut stack = stack.borrow_mut();
            let outer = stack.iter().position(|f| f.id == *t);
            let inner = stack.iter().position(|f| f.id == id);
            let (Some(outer), Some(inner)) = (outer, inner) else {
                return Err(FunctionError::usage(op, "a symbolic value was used outside the trace that made it"));
            };
            if outer >= inner {
                return Err(FunctionError::usage(op, "a value of a branch or loop body was used outside it"));
            }
            if let Some((_, p)) = stack[inner].captures.iter().find(|(c, _)| same(c, v)) {
                return Ok(*p);
            }
            let shape = static_shape_in(&stack[outer].scope, *o);
            let frame = &mut stack[inner];
            let name = format!("arg{}", frame.args + frame.captures.len());
            let p = scope.with_exact_name(&name).placeholder(*d, &shape).map_err(|e| FunctionError::traced(op, e))?;
            frame.captures.push((Value::Symbolic(*o, *d, *t), p));
            Ok(p)
        }),
        Value::Eager(t) => scope.constant(t).map_err(|e| FunctionError::traced(op, e)),
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
