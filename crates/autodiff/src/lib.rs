//! Symbolic differentiation: `gradients(ys, xs, grad_ys)` adds the nodes that compute
//! `d(Σ ys·grad_ys)/d xs` to the graph being built, as TensorFlow's `tf.gradients` does: each
//! op's gradient function (declared with the op, in `ferroflow-ops`' registry), gradients of a
//! tensor used several times summed with `AddN`, no gradient through ops declared not
//! differentiable (`StopGradient`, comparisons, shapes, ...), and `None` for an `x` that no
//! `y` depends on. New nodes live under the name scope `gradients/<node>_grad/`.
#![warn(missing_docs)]

mod functional;

use std::collections::{HashMap, HashSet};

use ferroflow_graph::{Graph, NodeId, Output};
use ferroflow_ops::gradient::add_n;
use ferroflow_ops::{infer_shapes, Gradient, OpRegistry, Scope};

use ferroflow_ops::Ops;
pub use ferroflow_ops::{GradCtx, GradError, GradFn};

/// Every op with a gradient function, sorted.
pub fn ops_with_gradients() -> Vec<&'static str> {
    OpRegistry::global()
        .defs()
        .into_iter()
        .filter(|d| matches!(d.facts.gradient, Some(Gradient::Function(_))))
        .map(|d| d.name.as_str())
        .collect()
}

/// Adds the gradient of `Σ ys · grad_ys` (`grad_ys` default to ones) with respect to each of
/// `xs` to the scope's graph. `None` for an x that no y depends on.
pub fn gradients(
    scope: &Scope,
    ys: &[Output],
    xs: &[Output],
    grad_ys: Option<&[Output]>,
) -> Result<Vec<Option<Output>>, GradError> {
    if let Some(g) = grad_ys {
        if g.len() != ys.len() {
            return Err(GradError::BadArgument(format!("{} grad_ys for {} ys", g.len(), ys.len())));
        }
    }
    let graph: Graph = scope.with_graph(Graph::clone);
    let shapes = infer_shapes(&graph)?;
    // Nodes on a path from an x to a y (data edges).
    let n = graph.len();
    let mut consumers: Vec<Vec<NodeId>> = vec![Vec::new(); n];
    for (id, node) in graph.nodes().iter().enumerate() {
        for o in &node.inputs {
            consumers[o.node].push(id);
        }
    }
    let mut from_x = vec![false; n];
    let mut stack: Vec<NodeId> = xs.iter().map(|o| o.node).collect();
    while let Some(id) = stack.pop() {
        if !std::mem::replace(&mut from_x[id], true) {
            stack.extend(&consumers[id]);
        }
    }
    let mut to_y = vec![false; n];
    let mut stack: Vec<NodeId> = ys.iter().map(|o| o.node).collect();
    while let Some(id) = stack.pop() {
        if !std::mem::replace(&mut to_y[id], true) {
            stack.extend(graph.node(id).inputs.iter().map(|o| o.node));
        }
    }
    let between: HashSet<NodeId> = (0..n).filter(|&i| from_x[i] && to_y[i]).collect();

    // Gradients received per forward tensor.
    let mut grads: HashMap<Output, Vec<Output>> = HashMap::new();
    let gscope = scope.name_scope("gradients");
    for (i, &y) in ys.iter().enumerate() {
        let g = match grad_ys {
            Some(g) => g[i],
            None => gscope.with_name(&format!("grad_ys_{i}")).unary("OnesLike", y)?,
        };
        grads.entry(y).or_default().push(g);
    }
    let order = graph.topological_order()?;
    let x_set: HashSet<Output> = xs.iter().copied().collect();
    for &id in order.iter().rev() {
        if !between.contains(&id) {
            continue;
        }
        let node = graph.node(id);
        let out_grads: Vec<Option<Output>> = (0..node.num_outputs())
            .map(|i| aggregate(&gscope, &node.name, grads.get(&Output { node: id, index: i })))
            .collect::<Result<_, _>>()?;
        // Aggregated gradients replace the lists (so xs read the sums).
        for (i, g) in out_grads.iter().enumerate() {
            if let Some(g) = g {
                grads.insert(Output { node: id, index: i }, vec![*g]);
            }
        }
        if out_grads.iter().all(Option::is_none) {
            continue;
        }
        // Inputs that are xs themselves still need their gradient even if the node is an x.
        if node.inputs.iter().all(|o| !between.contains(&o.node) && !x_set.contains(o)) {
            continue;
        }
        let no_gradient = |reason: Option<&str>| GradError::NoGradient {
            op: node.op.clone(),
            node: node.name.clone(),
            reason: reason.map(str::to_string),
        };
        let f = match OpRegistry::global().facts(&node.op).and_then(|f| f.gradient) {
            Some(Gradient::Function(f)) => f,
            Some(Gradient::ThroughFunctions) => {
                let kind = OpRegistry::global()
                    .facts(&node.op)
                    .and_then(|f| f.call())
                    .ok_or_else(|| no_gradient(Some("the op calls no function")))?;
                let in_grads = functional::call_gradient(
                    &gscope.name_scope(&format!("{}_grad", node.name)),
                    &graph,
                    id,
                    kind,
                    &out_grads,
                )?;
                push_grads(&mut grads, node, in_grads, &between, &x_set);
                continue;
            }
            Some(Gradient::NotDifferentiable(_)) => continue,
            Some(Gradient::Unavailable(reason)) => return Err(no_gradient(Some(reason))),
            None => return Err(no_gradient(None)),
        };
        let ctx = GradCtx { scope: gscope.name_scope(&format!("{}_grad", node.name)), node, id, shapes: &shapes };
        let in_grads = f(&ctx, &out_grads)?;
        push_grads(&mut grads, node, in_grads, &between, &x_set);
    }
    xs.iter().map(|x| aggregate(&gscope, &graph.node(x.node).name, grads.get(x))).collect()
}

/// Records the gradients a node's gradient function gave its inputs (those on a path from
/// an x, or xs themselves).
fn push_grads(
    grads: &mut HashMap<Output, Vec<Output>>,
    node: &ferroflow_graph::Node,
    in_grads: Vec<Option<Output>>,
    between: &HashSet<NodeId>,
    x_set: &HashSet<Output>,
) {
    for (o, g) in node.inputs.iter().zip(in_grads) {
        if let Some(g) = g {
            if between.contains(&o.node) || x_set.contains(o) {
                grads.entry(*o).or_default().push(g);
            }
        }
    }
}

/// The sum of the gradients a tensor received (`AddN` for several).
fn aggregate(scope: &Scope, name: &str, gs: Option<&Vec<Output>>) -> Result<Option<Output>, GradError> {
    Ok(match gs.map(Vec::as_slice) {
        None | Some([]) => None,
        Some([g]) => Some(*g),
        Some(many) => Some(add_n(&scope.name_scope(&format!("{name}_grad_sum")), many)?),
    })
}
