//! Functional control flow: [`cond`] and [`while_loop`] (TensorFlow's `tf.cond` and
//! `tf.while_loop`), and the statement forms AutoGraph's rewrite calls ([`if_stmt`],
//! [`while_stmt`]) with the names of the function, the statement and its variables, so that
//! errors say which variable of which statement went wrong.
//!
//! Run eagerly they are plain `if` and `while`. Traced, each branch or body becomes a function
//! of the graph's library and a `StatelessIf` / `StatelessWhile` node calls it. Symbolic values
//! of an enclosing trace used inside a branch or body are captured (extra inputs of the node),
//! as TensorFlow 2 captures them. A variable that has no value before the statement is a `None`
//! slot: it stays undefined unless the statement gives it one; AutoGraph's generated return
//! slots (names starting `__ag_ret`) are then filled with zeros where a path leaves them unset,
//! as TensorFlow does for its return values.
use std::sync::atomic::{AtomicU64, Ordering};

use ferroflow_graph::{Attrs, Graph, Output};
use ferroflow_ops::Scope;
use ferroflow_proto::attr;
use ferroflow_tensor::{DType, Shape, Tensor};

use ferroflow_ops::{OpTarget, RawOps};

use crate::context::{capture_shape, current, output_in, same, static_shape_in, tracing, Frame};
use crate::eager::Eager;
use crate::error::{FunctionError, OpError};
use crate::value::Value;

/// A value that may be undefined (a variable without a value yet).
pub type Slot = Option<Value>;

/// What errors name: the function, the statement (`while n > 1`), its variables.
struct Names<'a> {
    func: &'a str,
    text: &'a str,
    vars: &'a [&'a str],
}

impl Names<'_> {
    fn var(&self, k: usize) -> String {
        match self.vars.get(k) {
            Some(v) => format!("`{v}`"),
            None => format!("value {k}"),
        }
    }
    fn fillable(&self, k: usize) -> bool {
        self.vars.get(k).is_some_and(|v| v.starts_with("__ag_ret"))
    }
    fn error(&self, reason: impl Into<String>) -> FunctionError {
        FunctionError::statement(self.func, self.text, reason)
    }
}

/// `float32[2, ?]` (`float32[?..]` for an unknown rank).
pub(crate) fn spec(dtype: DType, shape: &Shape) -> String {
    shape.spec(dtype)
}

/// Whether two static shapes can describe the same tensor.
fn compatible(a: &Shape, b: &Shape) -> bool {
    match (a.dims(), b.dims()) {
        (Some(a), Some(b)) => a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.is_none() || y.is_none() || x == y),
        _ => true,
    }
}

/// The static shape of `v` in the trace `(scope, id)` (unknown when it cannot be inferred).
fn static_shape(scope: &Scope, id: u64, v: &Value) -> Shape {
    match v {
        Value::Eager(t) => Shape::known(t.dims()),
        Value::Symbolic(o, _, t) if *t == id => static_shape_in(scope, *o),
        Value::Symbolic(..) => Shape::unknown(),
    }
}

/// Whether a concrete predicate holds (one element: non-zero numbers, `true`).
fn truth(v: &Value, names: &Names) -> Result<bool, FunctionError> {
    let t = v.tensor().ok_or_else(|| FunctionError::usage(names.func, "the predicate is symbolic outside a trace"))?;
    if t.len() != 1 {
        return Err(names.error(format!(
            "the condition `{}` must be a scalar, it is {}",
            names.text,
            spec(t.dtype(), &Shape::known(t.dims()))
        )));
    }
    let as_bool = Tensor::scalar(false);
    let t = if t.dtype() == as_bool.dtype() { t.clone() } else { Eager.cast(t, as_bool.dtype())? };
    Ok(t.as_slice::<bool>().map_err(|e| FunctionError::traced(names.func, e))?[0])
}

/// A branch or body traced into its own graph, not yet a `FunctionDef`.
struct Pending {
    name: String,
    frame: Frame,
    outputs: Vec<Option<Output>>,
}

impl Pending {
    /// Traces `f` on placeholders `arg0..` of `params`, with placeholders for the captures
    /// `seed` (an earlier branch's) already in place.
    fn trace(
        prefix: &str,
        params: &[(DType, Shape)],
        seed: &[Value],
        f: impl FnOnce(&[Value]) -> Result<Vec<Slot>, FunctionError>,
    ) -> Result<Pending, FunctionError> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let name = format!("{prefix}_{}", NEXT.fetch_add(1, Ordering::Relaxed));
        let scope = Scope::new();
        let frame = Frame::new(scope.clone(), params.len());
        let id = frame.id;
        let err = |e: ferroflow_ops::BuildError| FunctionError::traced(&name, e);
        let mut values = Vec::with_capacity(params.len());
        for (i, (d, shape)) in params.iter().enumerate() {
            let o = scope.with_exact_name(&format!("arg{i}")).placeholder(*d, shape).map_err(err)?;
            values.push(Value::Symbolic(o, *d, id));
        }
        let mut pending = Pending { name: name.clone(), frame, outputs: Vec::new() };
        pending.add_captures(seed)?;
        let (outputs, frame) = tracing(pending.frame, || -> Result<Vec<Option<Output>>, FunctionError> {
            f(&values)?.iter().map(|s| s.as_ref().map(|v| output_in(&scope, id, v, &name)).transpose()).collect()
        });
        pending.frame = frame;
        pending.outputs = outputs?;
        Ok(pending)
    }

    fn captured(&self) -> Vec<Value> {
        self.frame.captures.iter().map(|(v, _)| v.clone()).collect()
    }

    /// Adds placeholders for the captures in `all` this trace lacks (so that branches traced
    /// apart take the same arguments).
    fn add_captures(&mut self, all: &[Value]) -> Result<(), FunctionError> {
        for v in all {
            if self.frame.captures.iter().any(|(c, _)| same(c, v)) {
                continue;
            }
            let name = format!("arg{}", self.frame.args + self.frame.captures.len());
            let o = self
                .frame
                .scope
                .with_exact_name(&name)
                .placeholder(v.dtype(), &capture_shape(v))
                .map_err(|e| FunctionError::traced(&self.name, e))?;
            self.frame.captures.push((v.clone(), o));
        }
        Ok(())
    }

    fn output_type(&self, o: Output) -> DType {
        self.frame.scope.with_graph(|g| g.output_type(o))
    }

    fn output_shape(&self, o: Output) -> Shape {
        static_shape_in(&self.frame.scope, o)
    }

    /// A zero of `dtype` in this trace (the value of a return slot on a path that sets none).
    fn zero(&self, dtype: DType) -> Result<Output, FunctionError> {
        let zero = Eager.cast(Tensor::scalar(0i32), dtype)?;
        self.frame.scope.constant(&zero).map_err(|e| FunctionError::traced(&self.name, e))
    }

    /// The `FunctionDef` returning `outputs`, and the functions its graph calls.
    fn finish(self, outputs: &[Output]) -> Result<Traced, FunctionError> {
        let graph = self.frame.scope.graph();
        let args = self.frame.args + self.frame.captures.len();
        let def = function_def(&self.name, &graph, args, outputs).map_err(|e| FunctionError::traced(&self.name, e))?;
        Ok(Traced { def, library: graph.library.function })
    }
}

/// A traced branch or loop body: its `FunctionDef` and the functions it calls.
struct Traced {
    def: ferroflow_proto::FunctionDef,
    library: Vec<ferroflow_proto::FunctionDef>,
}

impl Traced {
    fn name(&self) -> String {
        self.def.signature.as_ref().map(|s| s.name.clone()).unwrap_or_default()
    }
}

/// A graph whose nodes `arg0..argN` are placeholders as a `FunctionDef` returning `outputs`.
fn function_def(
    name: &str,
    g: &Graph,
    args: usize,
    outputs: &[Output],
) -> Result<ferroflow_proto::FunctionDef, OpError> {
    let args = (0..args)
        .map(|i| g.find(&format!("arg{i}")).ok_or_else(|| OpError::Signature("a missing argument".into())))
        .collect::<Result<Vec<_>, _>>()?;
    ferroflow_ops::functions::function_def(name, g, &args, outputs).map_err(|e| OpError::Signature(e.to_string()))
}

/// The defined slots' positions, and a function that spreads values for them back into a
/// full row of slots.
fn defined(state: &[Slot]) -> (Vec<usize>, impl Fn(&[Value]) -> Vec<Slot>) {
    let positions: Vec<usize> = (0..state.len()).filter(|&k| state[k].is_some()).collect();
    let n = state.len();
    let at = positions.clone();
    let expand = move |values: &[Value]| {
        let mut row: Vec<Slot> = vec![None; n];
        for (j, &k) in at.iter().enumerate() {
            row[k] = values.get(j).cloned();
        }
        row
    };
    (positions, expand)
}

/// Adds the library functions and a functional node calling `fns` to the trace `scope`.
fn add_node(
    scope: &Scope,
    op: &str,
    name: &str,
    inputs: &[Output],
    attrs: Attrs,
    fns: Vec<Traced>,
) -> Result<ferroflow_graph::NodeId, FunctionError> {
    for t in fns {
        for f in t.library.into_iter().chain([t.def]) {
            scope.add_function(f);
        }
    }
    scope.add_op(op, name, inputs, &[], attrs).map_err(|e| FunctionError::traced(op, e))
}

/// An `if` over a tensor condition (what AutoGraph writes for `if`/`else`): `then_fn` or
/// `else_fn` maps the statement's variables `state` (named by `vars`; `None`: no value yet)
/// to their values after it, plus any values the `if` yields. `func` and `text` (the function
/// and `if n > 1`) name the statement in errors.
#[allow(clippy::too_many_arguments)]
pub fn if_stmt(
    func: &str,
    text: &str,
    pred: &Value,
    vars: &[&str],
    state: Vec<Slot>,
    then_fn: impl Fn(&[Slot]) -> Result<Vec<Slot>, FunctionError>,
    else_fn: impl Fn(&[Slot]) -> Result<Vec<Slot>, FunctionError>,
) -> Result<Vec<Slot>, FunctionError> {
    let names = Names { func, text, vars };
    let traced = current().filter(|_| matches!(pred, Value::Symbolic(..)));
    let Some((scope, id)) = traced else {
        return if truth(pred, &names)? { then_fn(&state) } else { else_fn(&state) };
    };
    let pred_shape = static_shape(&scope, id, pred);
    if pred_shape.rank().is_some_and(|r| r > 0) {
        return Err(
            names.error(format!("the condition `{text}` must be a scalar, it is {}", spec(pred.dtype(), &pred_shape)))
        );
    }
    let (positions, expand) = defined(&state);
    let params: Vec<(DType, Shape)> = positions
        .iter()
        .map(|&k| state[k].as_ref().map(|v| (v.dtype(), static_shape(&scope, id, v))).expect("defined"))
        .collect();
    let mut then = Pending::trace("cond_then", &params, &[], |v| then_fn(&expand(v)))?;
    let other = Pending::trace("cond_else", &params, &then.captured(), |v| else_fn(&expand(v)))?;
    then.add_captures(&other.captured())?;
    if then.outputs.len() != other.outputs.len() {
        return Err(names.error(format!(
            "the branches give {} and {} values",
            then.outputs.len(),
            other.outputs.len()
        )));
    }
    let (mut then_out, mut else_out, mut out_pos, mut out_types) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for k in 0..then.outputs.len() {
        let (a, b) = match (then.outputs[k], other.outputs[k]) {
            (None, None) => continue,
            (Some(a), Some(b)) => (a, b),
            (Some(a), None) if names.fillable(k) => (a, other.zero(then.output_type(a))?),
            (None, Some(b)) if names.fillable(k) => (then.zero(other.output_type(b))?, b),
            (a, _) => {
                return Err(names.error(format!(
                    "{} has a value after the {} branch only and none before the `if`: give it one before the `if`",
                    names.var(k),
                    if a.is_some() { "then" } else { "else" }
                )))
            }
        };
        let (ta, tb) = (then.output_type(a), other.output_type(b));
        if ta != tb {
            return Err(names.error(format!(
                "{} is {} after the then branch but {} after the else branch",
                names.var(k),
                spec(ta, &then.output_shape(a)),
                spec(tb, &other.output_shape(b))
            )));
        }
        then_out.push(a);
        else_out.push(b);
        out_pos.push(k);
        out_types.push(ta);
    }
    let width = then.outputs.len();
    let captures = then.captured();
    let mut inputs = vec![output_in(&scope, id, pred, func)?];
    for &k in &positions {
        inputs.push(output_in(&scope, id, state[k].as_ref().expect("defined"), func)?);
    }
    for c in &captures {
        inputs.push(output_in(&scope, id, c, func)?);
    }
    let tin: Vec<DType> = scope.with_graph(|g| inputs[1..].iter().map(|o| g.output_type(*o)).collect());
    let (then, other) = (then.finish(&then_out)?, other.finish(&else_out)?);
    let mut attrs = Attrs::new();
    attrs.insert("Tcond".into(), attr::dtype(pred.dtype()));
    attrs.insert("Tin".into(), attr::dtypes(&tin));
    attrs.insert("Tout".into(), attr::dtypes(&out_types));
    attrs.insert("then_branch".into(), attr::func(&then.name()));
    attrs.insert("else_branch".into(), attr::func(&other.name()));
    let node = add_node(&scope, "StatelessIf", "cond", &inputs, attrs, vec![then, other])?;
    let mut result: Vec<Slot> = vec![None; width];
    for (index, (&k, d)) in out_pos.iter().zip(out_types).enumerate() {
        result[k] = Some(Value::Symbolic(Output { node, index }, d, id));
    }
    Ok(result)
}

/// A `while` over a tensor condition (what AutoGraph writes for `while` and `for`): while
/// `cond_fn(state)` holds, `state = body_fn(state)`. A variable must keep its dtype and shape
/// across iterations; one without a value before the loop may not get one inside it (except
/// AutoGraph's return slots, started at zero).
pub fn while_stmt(
    func: &str,
    text: &str,
    vars: &[&str],
    state: Vec<Slot>,
    cond_fn: impl Fn(&[Slot]) -> Result<Value, FunctionError>,
    body_fn: impl Fn(&[Slot]) -> Result<Vec<Slot>, FunctionError>,
) -> Result<Vec<Slot>, FunctionError> {
    let names = Names { func, text, vars };
    let Some((scope, id)) = current() else {
        let mut state = state;
        while truth(&cond_fn(&state)?, &names)? {
            let next = body_fn(&state)?;
            for (k, (a, b)) in state.iter().zip(&next).enumerate() {
                if let (Some(a), Some(b)) = (a, b) {
                    if a.dtype() != b.dtype() {
                        return Err(names.error(format!(
                            "loop variable {} changes dtype across iterations: {} before, {} after an iteration",
                            names.var(k),
                            a.dtype(),
                            b.dtype()
                        )));
                    }
                }
            }
            state = next;
        }
        return Ok(state);
    };
    let mut state = state;
    let mut shapes: Vec<Shape> =
        state.iter().map(|s| s.as_ref().map_or_else(Shape::unknown, |v| static_shape(&scope, id, v))).collect();
    if state.iter().any(Option::is_none) {
        // Which undefined variables does the body set? A probe trace says (then discarded).
        let (positions, expand) = defined(&state);
        let params: Vec<(DType, Shape)> =
            positions.iter().map(|&k| (state[k].as_ref().expect("defined").dtype(), shapes[k].clone())).collect();
        let probe = Pending::trace("while_probe", &params, &[], |v| body_fn(&expand(v)))?;
        for k in 0..state.len() {
            let Some(o) = probe.outputs.get(k).copied().flatten().filter(|_| state[k].is_none()) else {
                continue;
            };
            if !names.fillable(k) {
                return Err(names.error(format!(
                    "{} gets a value inside the loop but has none before it: give it one before the loop",
                    names.var(k)
                )));
            }
            let zero = Eager.cast(Tensor::scalar(0i32), probe.output_type(o))?;
            state[k] = Some(Value::Eager(zero));
            shapes[k] = Shape::unknown();
        }
    }
    let (positions, expand) = defined(&state);
    let params: Vec<(DType, Shape)> =
        positions.iter().map(|&k| (state[k].as_ref().expect("defined").dtype(), shapes[k].clone())).collect();
    let mut c = Pending::trace("while_cond", &params, &[], |v| Ok(vec![Some(cond_fn(&expand(v))?)]))?;
    let b = Pending::trace("while_body", &params, &c.captured(), |v| body_fn(&expand(v)))?;
    c.add_captures(&b.captured())?;
    let pred = c.outputs.first().copied().flatten().ok_or_else(|| names.error("the condition gave no value"))?;
    let pred_shape = c.output_shape(pred);
    if pred_shape.rank().is_some_and(|r| r > 0) {
        return Err(names.error(format!(
            "the condition `{text}` must be a scalar, it is {}",
            spec(c.output_type(pred), &pred_shape)
        )));
    }
    let mut body_out = Vec::with_capacity(positions.len() + b.frame.captures.len());
    for (j, &k) in positions.iter().enumerate() {
        let o = b
            .outputs
            .get(k)
            .copied()
            .flatten()
            .ok_or_else(|| names.error(format!("{} lost its value", names.var(k))))?;
        let (before, after) = ((params[j].0, &params[j].1), (b.output_type(o), b.output_shape(o)));
        if before.0 != after.0 || !compatible(before.1, &after.1) {
            return Err(names.error(format!(
                "loop variable {} changes {} across iterations: {} before the loop, {} after an iteration",
                names.var(k),
                if before.0 != after.0 { "dtype" } else { "shape" },
                spec(before.0, before.1),
                spec(after.0, &after.1)
            )));
        }
        body_out.push(o);
    }
    // Captured values ride along as loop variables that the body passes through.
    body_out.extend(b.frame.captures.iter().map(|(_, p)| *p));
    let captures = b.captured();
    let mut inputs = Vec::with_capacity(body_out.len());
    for &k in &positions {
        inputs.push(output_in(&scope, id, state[k].as_ref().expect("defined"), func)?);
    }
    for v in &captures {
        inputs.push(output_in(&scope, id, v, func)?);
    }
    let types: Vec<DType> = scope.with_graph(|g| inputs.iter().map(|o| g.output_type(*o)).collect());
    let (c, b) = (c.finish(&[pred])?, b.finish(&body_out)?);
    let mut attrs = Attrs::new();
    attrs.insert("T".into(), attr::dtypes(&types));
    attrs.insert("cond".into(), attr::func(&c.name()));
    attrs.insert("body".into(), attr::func(&b.name()));
    let node = add_node(&scope, "StatelessWhile", "while", &inputs, attrs, vec![c, b])?;
    let mut result: Vec<Slot> = vec![None; state.len()];
    for (index, &k) in positions.iter().enumerate() {
        result[k] = Some(Value::Symbolic(Output { node, index }, types[index], id));
    }
    Ok(result)
}

/// TensorFlow's `tf.cond`: `then_fn(inputs)` when `pred` holds, else `else_fn(inputs)`. Run
/// eagerly it is an `if`; traced, both branches become functions of the graph's library and a
/// `StatelessIf` node chooses. Both must return the same number and dtypes of values. Outer
/// symbolic values a branch uses are captured.
pub fn cond(
    pred: &Value,
    inputs: &[Value],
    then_fn: impl Fn(&[Value]) -> Result<Vec<Value>, FunctionError>,
    else_fn: impl Fn(&[Value]) -> Result<Vec<Value>, FunctionError>,
) -> Result<Vec<Value>, FunctionError> {
    let state: Vec<Slot> = inputs.iter().cloned().map(Some).collect();
    let branch = |f: &crate::traced::Body<'_>, s: &[Slot]| {
        let values: Vec<Value> = s.iter().flatten().cloned().collect();
        Ok(f(&values)?.into_iter().map(Some).collect())
    };
    let out = if_stmt("cond", "cond", pred, &[], state, |s| branch(&then_fn, s), |s| branch(&else_fn, s))?;
    Ok(out.into_iter().flatten().collect())
}

/// TensorFlow's `tf.while_loop`: while `cond_fn(vars)` holds, `vars = body_fn(vars)`. Run
/// eagerly it is a `while`; traced, both become library functions and a `StatelessWhile` node
/// loops. The body must keep the loop variables' dtypes and shapes.
pub fn while_loop(
    cond_fn: impl Fn(&[Value]) -> Result<Value, FunctionError>,
    body_fn: impl Fn(&[Value]) -> Result<Vec<Value>, FunctionError>,
    vars: &[Value],
) -> Result<Vec<Value>, FunctionError> {
    let state: Vec<Slot> = vars.iter().cloned().map(Some).collect();
    let values = |s: &[Slot]| -> Vec<Value> { s.iter().flatten().cloned().collect() };
    let out = while_stmt(
        "while_loop",
        "while_loop",
        &[],
        state,
        |s| cond_fn(&values(s)),
        |s| Ok(body_fn(&values(s))?.into_iter().map(Some).collect()),
    )?;
    Ok(out.into_iter().flatten().collect())
}
