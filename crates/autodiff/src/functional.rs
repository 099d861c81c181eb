//! Gradients of the function-calling ops (`PartitionedCall`, `If`, `While` and their
//! stateful/stateless forms), as TensorFlow 2 builds them (`while_v2`, `cond_v2`): the
//! gradient of a called function is itself a library function.
//!
//! * A function `f(x) -> y` gets `f_grad(x, dy) -> dx`: `f`'s body, with `gradients` of its
//!   results added (it recomputes the forward pass from `x`, so nothing is saved between the
//!   two calls). A call's gradient calls `f_grad`; an `If`'s is an `If` of the branches'
//!   gradients on the same predicate.
//! * A `While` is rewritten to also push, every iteration, the loop variables it changes onto
//!   a `TensorList` accumulator each, and to count its iterations; its consumers move to the
//!   rewritten loop. The gradient is a second `While` running as many iterations backwards:
//!   it pops the variables of iteration `k` and calls the body's gradient function on them
//!   and the incoming gradients. Loop variables the body passes through unchanged (weights,
//!   the input sequence's list) are not accumulated: the backward loop carries their one
//!   value, and their gradients sum over the iterations.
use ferroflow_graph::{Attrs, Graph, Node, NodeId, Output};
use ferroflow_ops::functions::{function_def, function_graph};
use ferroflow_ops::gradient::build;
use ferroflow_ops::{CallKind, GradError, Ops, RawOps, Scope};
use ferroflow_proto::{attr, attr_value::Value, AttrValue};
use ferroflow_tensor::{DType, Shape};

/// Whether gradients flow through a value of this dtype (floats, complex, and `TensorList`s
/// of them).
fn differentiable(d: DType) -> bool {
    matches!(
        d,
        DType::Float
            | DType::Double
            | DType::Half
            | DType::BFloat16
            | DType::Complex64
            | DType::Complex128
            | DType::Variant
    )
}

fn bad(node: &Node, reason: impl Into<String>) -> GradError {
    GradError::Unsupported { node: node.name.clone(), op: node.op.clone(), reason: reason.into() }
}

/// The function (name, call attrs) that attr `a` of `node` names.
fn func(node: &Node, a: &str) -> Result<(String, Attrs), GradError> {
    match node.attrs.get(a).and_then(|v| v.value.as_ref()) {
        Some(Value::Func(f)) => Ok((f.name.clone(), f.attr.clone())),
        _ => Err(bad(node, format!("attr '{a}' does not name a function"))),
    }
}

fn func_attr(name: &str) -> AttrValue {
    attr::func(name)
}

fn types_attr(ts: &[DType]) -> AttrValue {
    attr::dtypes(ts)
}

/// A library function name not yet taken, from `base` (made a valid function name).
fn fresh_name(scope: &Scope, base: &str) -> String {
    let clean: String = base
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' { c.to_ascii_lowercase() } else { '_' })
        .collect();
    let taken = scope.function_names();
    (0..).map(|i| format!("{clean}_{i}")).find(|n| !taken.contains(n)).expect("unbounded")
}

/// Copies into `to`'s library the functions `from`'s has and `to`'s does not (gradients of
/// nested calls, built while differentiating a body).
fn copy_new_functions(from: &Scope, to: &Scope) {
    let have = to.function_names();
    let lib = from.with_graph(|g| g.library.function.clone());
    for f in lib {
        if f.signature.as_ref().is_some_and(|s| !have.contains(&s.name)) {
            to.add_function(f);
        }
    }
}

/// A function's body as a scope over its graph, with its arguments (placeholder nodes) and
/// results.
struct Body {
    scope: Scope,
    args: Vec<NodeId>,
    results: Vec<Output>,
}

fn body(graph: &Graph, node: &Node, name: &str, call: &Attrs) -> Result<Body, GradError> {
    let fg = function_graph(&graph.library, name, call).map_err(|e| bad(node, format!("function '{name}': {e}")))?;
    let find = |t: &String| fg.graph.output_by_name(t).map_err(GradError::from);
    let args = fg.feeds.iter().map(|t| find(t).map(|o| o.node)).collect::<Result<_, _>>()?;
    let results = fg.fetches.iter().map(find).collect::<Result<_, _>>()?;
    Ok(Body { scope: Scope::from_graph(fg.graph), args, results })
}

/// Adds to `scope`'s library the gradient of function `name` (with call attrs `call`):
/// arguments `x..., dy...` (one `dy` per result in `dys`), results the gradients of the
/// arguments in `dxs` (zeros where none flows). Returns its name.
fn gradient_function(
    scope: &Scope,
    graph: &Graph,
    node: &Node,
    name: &str,
    call: &Attrs,
    dxs: &[usize],
    dys: &[usize],
) -> Result<String, GradError> {
    let b = body(graph, node, name, call)?;
    let dy_types: Vec<DType> = dys.iter().map(|&i| b.scope.dtype(b.results[i])).collect();
    rewrite_function(scope, node, name, b, "grad", &dy_types, false, |b, grad_ys| {
        let s = &b.scope;
        let ys: Vec<Output> = dys.iter().map(|&i| b.results[i]).collect();
        let xs: Vec<Output> = dxs.iter().map(|&i| Output { node: b.args[i], index: 0 }).collect();
        let gs = crate::gradients(s, &ys, &xs, Some(grad_ys))?;
        xs.iter()
            .zip(gs)
            .map(|(x, g)| match g {
                Some(g) => Ok(g),
                None => Ok(s.unary("ZerosLike", *x)?),
            })
            .collect()
    })
}

/// The incoming gradient of each output in `which`, zeros where none flows.
fn incoming(
    scope: &Scope,
    outs: &[Option<Output>],
    forward: NodeId,
    which: &[usize],
) -> Result<Vec<Output>, GradError> {
    which
        .iter()
        .map(|&i| match outs.get(i).copied().flatten() {
            Some(g) => Ok(g),
            None => Ok(scope.unary("ZerosLike", Output { node: forward, index: i })?),
        })
        .collect()
}

/// Adds a function-calling node of op `op` and returns its outputs.
fn call_node(
    scope: &Scope,
    op: &str,
    inputs: &[Output],
    attrs: Attrs,
    outputs: usize,
) -> Result<Vec<Output>, GradError> {
    let id = scope.add_op(op, op, inputs, &[], attrs)?;
    Ok((0..outputs).map(|index| Output { node: id, index }).collect())
}

/// The gradients of a function-calling node's inputs (`None` where none flows).
pub(crate) fn call_gradient(
    scope: &Scope,
    graph: &Graph,
    id: NodeId,
    kind: CallKind,
    outs: &[Option<Output>],
) -> Result<Vec<Option<Output>>, GradError> {
    let node = graph.node(id);
    let in_types = node.types.inputs.clone();
    let out_types = node.types.outputs.clone();
    let dys: Vec<usize> = (0..out_types.len()).filter(|&i| differentiable(out_types[i])).collect();
    match kind {
        CallKind::Call => {
            if !node.op.ends_with("PartitionedCall") {
                return Err(bad(
                    node,
                    "a direct call of a library function has no gradient here; call it through PartitionedCall",
                ));
            }
            let (name, call) = func(node, "f")?;
            let dxs: Vec<usize> = (0..in_types.len()).filter(|&i| differentiable(in_types[i])).collect();
            let grad = gradient_function(scope, graph, node, &name, &call, &dxs, &dys)?;
            let mut inputs = node.inputs.clone();
            inputs.extend(incoming(scope, outs, id, &dys)?);
            let mut a = Attrs::new();
            a.insert("Tin".into(), types_attr(&inputs.iter().map(|o| scope.dtype(*o)).collect::<Vec<_>>()));
            a.insert("Tout".into(), types_attr(&dxs.iter().map(|&i| in_types[i]).collect::<Vec<_>>()));
            a.insert("f".into(), func_attr(&grad));
            let op = if node.op == "StatefulPartitionedCall" { "StatefulPartitionedCall" } else { "PartitionedCall" };
            let gs = call_node(scope, op, &inputs, a, dxs.len())?;
            Ok(spread(in_types.len(), &dxs, gs))
        }
        CallKind::If => {
            // Input 0 is the predicate.
            let dxs: Vec<usize> = (0..in_types.len() - 1).filter(|&i| differentiable(in_types[i + 1])).collect();
            let (then_name, then_call) = func(node, "then_branch")?;
            let (else_name, else_call) = func(node, "else_branch")?;
            let then_grad = gradient_function(scope, graph, node, &then_name, &then_call, &dxs, &dys)?;
            let else_grad = gradient_function(scope, graph, node, &else_name, &else_call, &dxs, &dys)?;
            let mut inputs = node.inputs[1..].to_vec();
            inputs.extend(incoming(scope, outs, id, &dys)?);
            let mut a = Attrs::new();
            a.insert("Tcond".into(), attr::dtype(in_types[0]));
            a.insert("Tin".into(), types_attr(&inputs.iter().map(|o| scope.dtype(*o)).collect::<Vec<_>>()));
            a.insert("Tout".into(), types_attr(&dxs.iter().map(|&i| in_types[i + 1]).collect::<Vec<_>>()));
            a.insert("then_branch".into(), func_attr(&then_grad));
            a.insert("else_branch".into(), func_attr(&else_grad));
            let op = if node.op == "StatelessIf" { "StatelessIf" } else { "If" };
            let mut all = vec![node.inputs[0]];
            all.extend(inputs);
            let gs = call_node(scope, op, &all, a, dxs.len())?;
            let shifted: Vec<usize> = dxs.iter().map(|&i| i + 1).collect();
            Ok(spread(in_types.len(), &shifted, gs))
        }
        CallKind::While => while_gradient(scope, graph, id, outs),
    }
}

/// `n` gradients: `gs[k]` at position `at[k]`, `None` elsewhere.
fn spread(n: usize, at: &[usize], gs: Vec<Output>) -> Vec<Option<Output>> {
    let mut v = vec![None; n];
    for (&i, g) in at.iter().zip(gs) {
        v[i] = Some(g);
    }
    v
}

/// Follows `Identity` nodes back from `o`.
fn through_identities(g: &Graph, mut o: Output) -> Output {
    while g.node(o.node).op == "Identity" {
        o = g.node(o.node).inputs[0];
    }
    o
}

fn list_attrs(dtype: DType) -> Vec<(&'static str, AttrValue)> {
    vec![("element_dtype", attr::dtype(dtype)), ("shape_type", attr::dtype(DType::Int32))]
}

/// Adds to `scope`'s library the body `b` of function `name` rewritten with more arguments of
/// the types `extra` (placeholders passed to `extend`, which returns the results to add),
/// keeping its own results or not, named `<name>_<suffix>_<n>`; returns that name. Functions
/// the rewrite added to the body's library (gradients of nested calls) go along.
#[allow(clippy::too_many_arguments)]
fn rewrite_function(
    scope: &Scope,
    node: &Node,
    name: &str,
    b: Body,
    suffix: &str,
    extra: &[DType],
    keep: bool,
    extend: impl FnOnce(&Body, &[Output]) -> Result<Vec<Output>, GradError>,
) -> Result<String, GradError> {
    let s = &b.scope;
    let mut args = b.args.clone();
    let mut added = Vec::new();
    for (k, &d) in extra.iter().enumerate() {
        let p = s.with_exact_name(&format!("{suffix}_arg_{k}")).placeholder(d, &Shape::unknown())?;
        args.push(p.node);
        added.push(p);
    }
    let mut results = if keep { b.results.clone() } else { Vec::new() };
    results.extend(extend(&b, &added)?);
    let fname = fresh_name(scope, &format!("{name}_{suffix}"));
    let def = s
        .with_graph(|g| function_def(&fname, g, &args, &results))
        .map_err(|e| bad(node, format!("rewriting function '{name}': {e}")))?;
    copy_new_functions(s, scope);
    scope.add_function(def);
    Ok(fname)
}

fn while_gradient(
    scope: &Scope,
    graph: &Graph,
    id: NodeId,
    outs: &[Option<Output>],
) -> Result<Vec<Option<Output>>, GradError> {
    let node = graph.node(id);
    let types = node.types.inputs.clone();
    let n = types.len();
    let (body_name, body_call) = func(node, "body")?;
    let (cond_name, cond_call) = func(node, "cond")?;

    // Which loop variables the body passes through unchanged.
    let b = body(graph, node, &body_name, &body_call)?;
    if b.results.len() != n || b.args.len() != n {
        return Err(bad(
            node,
            format!("the body has {} arguments and {} results for {n} loop variables", b.args.len(), b.results.len()),
        ));
    }
    let invariant: Vec<bool> = b.scope.with_graph(|g| {
        (0..n).map(|j| through_identities(g, b.results[j]) == Output { node: b.args[j], index: 0 }).collect()
    });
    let acc: Vec<usize> = (0..n).filter(|&j| !invariant[j]).collect();
    let inv: Vec<usize> = (0..n).filter(|&j| invariant[j]).collect();
    let diff: Vec<usize> = (0..n).filter(|&j| differentiable(types[j])).collect();

    // The forward loop, counting its iterations and accumulating what it changes.
    let mut extra = vec![DType::Int32];
    extra.extend(acc.iter().map(|_| DType::Variant));
    let fwd_body = rewrite_function(scope, node, &body_name, b, "acc", &extra, true, |b, added| {
        let s = &b.scope;
        let one = s.scalar(1i32)?;
        let mut r = vec![s.add_v2(added[0], one)?];
        for (k, &j) in acc.iter().enumerate() {
            let v = Output { node: b.args[j], index: 0 };
            r.push(build(s, "TensorListPushBack", &[added[k + 1], v], &[("element_dtype", attr::dtype(types[j]))])?);
        }
        Ok(r)
    })?;
    let cond = body(graph, node, &cond_name, &cond_call)?;
    let fwd_cond = rewrite_function(scope, node, &cond_name, cond, "acc", &extra, true, |_, _| Ok(vec![]))?;
    let s = scope;
    let mut inputs = node.inputs.clone();
    inputs.push(s.scalar(0i32)?);
    let unknown = s.constant_from(&[], &[-1i32])?;
    for &j in &acc {
        inputs.push(build(s, "EmptyTensorList", &[unknown, unknown], &list_attrs(types[j]))?);
    }
    let mut all_types = types.clone();
    all_types.extend(&extra);
    let mut a = node.attrs.clone();
    a.insert("T".into(), types_attr(&all_types));
    a.insert("body".into(), func_attr(&fwd_body));
    a.insert("cond".into(), func_attr(&fwd_cond));
    if node.attrs.contains_key("output_shapes") {
        a.insert("output_shapes".into(), attr::shapes(&vec![Shape::unknown(); all_types.len()]));
    }
    let fwd = call_node(s, &node.op, &inputs, a, all_types.len())?;
    s.reroute(id, fwd[0].node, n);
    let count = fwd[n];
    let accumulators = &fwd[n + 1..];

    // The backward loop: [count, dv (diff), accumulators (acc), values (inv)].
    let grad_fn = gradient_function(s, graph, node, &body_name, &body_call, &diff, &diff)?;
    let mut bwd_types = vec![DType::Int32];
    bwd_types.extend(diff.iter().map(|&j| types[j]));
    bwd_types.extend(acc.iter().map(|_| DType::Variant));
    bwd_types.extend(inv.iter().map(|&j| types[j]));
    let bwd_scope = Scope::new();
    let place = |k: usize, d: DType| bwd_scope.with_exact_name(&format!("arg{k}")).placeholder(d, &Shape::unknown());
    let bargs: Vec<Output> = bwd_types.iter().enumerate().map(|(k, &d)| place(k, d)).collect::<Result<_, _>>()?;
    let bs = &bwd_scope;
    let (c, grads) = (bargs[0], &bargs[1..1 + diff.len()]);
    let (accs, values) = (&bargs[1 + diff.len()..1 + diff.len() + acc.len()], &bargs[1 + diff.len() + acc.len()..]);
    let one = bs.scalar(1i32)?;
    let mut results = vec![bs.sub(c, one)?];
    let mut vars: Vec<Option<Output>> = vec![None; n];
    let mut popped_lists = Vec::new();
    let unknown_b = bs.constant_from(&[], &[-1i32])?;
    for (k, &j) in acc.iter().enumerate() {
        let p = build(bs, "TensorListPopBack", &[accs[k], unknown_b], &[("element_dtype", attr::dtype(types[j]))])?;
        popped_lists.push(p);
        vars[j] = Some(Output { node: p.node, index: 1 });
    }
    for (k, &j) in inv.iter().enumerate() {
        vars[j] = Some(values[k]);
    }
    let mut call_in: Vec<Output> = vars.into_iter().map(|v| v.expect("every variable")).collect();
    call_in.extend(grads);
    let mut ca = Attrs::new();
    ca.insert("Tin".into(), types_attr(&call_in.iter().map(|o| bs.dtype(*o)).collect::<Vec<_>>()));
    ca.insert("Tout".into(), types_attr(&diff.iter().map(|&j| types[j]).collect::<Vec<_>>()));
    ca.insert("f".into(), func_attr(&grad_fn));
    results.extend(call_node(bs, "PartitionedCall", &call_in, ca, diff.len())?);
    results.extend(popped_lists);
    results.extend(values);
    let bwd_args: Vec<NodeId> = bargs.iter().map(|o| o.node).collect();
    let bwd_body_name = fresh_name(s, &format!("{body_name}_bwd"));
    let def = bs
        .with_graph(|g| function_def(&bwd_body_name, g, &bwd_args, &results))
        .map_err(|e| bad(node, format!("the backward loop's body: {e}")))?;
    s.add_function(def);

    let cond_scope = Scope::new();
    let cargs: Vec<Output> = bwd_types
        .iter()
        .enumerate()
        .map(|(k, &d)| cond_scope.with_exact_name(&format!("arg{k}")).placeholder(d, &Shape::unknown()))
        .collect::<Result<_, _>>()?;
    let zero = cond_scope.scalar(0i32)?;
    let more = cond_scope.greater(cargs[0], zero)?;
    let bwd_cond_name = fresh_name(s, &format!("{body_name}_bwd_cond"));
    let cdef = cond_scope
        .with_graph(|g| function_def(&bwd_cond_name, g, &cargs.iter().map(|o| o.node).collect::<Vec<_>>(), &[more]))
        .map_err(|e| bad(node, format!("the backward loop's condition: {e}")))?;
    s.add_function(cdef);

    let mut bwd_inputs = vec![count];
    bwd_inputs.extend(incoming(s, outs, fwd[0].node, &diff)?);
    bwd_inputs.extend(accumulators);
    bwd_inputs.extend(inv.iter().map(|&j| node.inputs[j]));
    let mut ba = Attrs::new();
    ba.insert("T".into(), types_attr(&bwd_types));
    ba.insert("body".into(), func_attr(&bwd_body_name));
    ba.insert("cond".into(), func_attr(&bwd_cond_name));
    if let Some(p) = node.attrs.get("parallel_iterations") {
        ba.insert("parallel_iterations".into(), p.clone());
    }
    let op = if node.op == "StatelessWhile" { "StatelessWhile" } else { "While" };
    let bwd = call_node(s, op, &bwd_inputs, ba, bwd_types.len())?;
    Ok(spread(n, &diff, bwd[1..1 + diff.len()].to_vec()))
}
