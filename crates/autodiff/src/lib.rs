//! Symbolic differentiation: `gradients(ys, xs, grad_ys)` adds the nodes that compute
//! `d(Σ ys·grad_ys)/d xs` to the graph being built, as TensorFlow's `tf.gradients` does: a
//! gradient function per op (`registry`), gradients of a tensor used several times summed with
//! `AddN`, `StopGradient` / `PreventGradient` stopping the flow, and `None` for an `x` that no
//! `y` depends on. New nodes live under the name scope `gradients/<node>_grad/`.
#![warn(missing_docs)]

mod registry;

use std::collections::{HashMap, HashSet};

use ferroflow_graph::{Graph, GraphError, Node, NodeId, Output};
use ferroflow_ops::{infer_shapes, BuildError, Scope};
use ferroflow_tensor::Shape;

pub use registry::{has_gradient, ops_with_gradients};

/// An error building gradients.
#[derive(Debug, thiserror::Error)]
pub enum GradError {
    /// An op on the path from `xs` to `ys` has no gradient function.
    #[error("no gradient is defined for op '{op}' (node '{node}'), which lies between the xs and the ys")]
    NoGradient {
        /// The op.
        op: String,
        /// The node.
        node: String,
    },
    /// A gradient function cannot handle this node (an attr or shape it does not support).
    #[error("gradient of node '{node}' ({op}): {reason}")]
    Unsupported {
        /// The node.
        node: String,
        /// The op.
        op: String,
        /// Why.
        reason: String,
    },
    /// Bad arguments (`grad_ys` of the wrong length, non-float tensors).
    #[error("gradients: {0}")]
    BadArgument(String),
    /// Building a node failed.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// The graph is invalid.
    #[error(transparent)]
    Graph(#[from] GraphError),
}

/// What a gradient function sees: the forward node, its outputs, static shapes, and a scope
/// (`gradients/<node>_grad`) to add nodes in.
pub struct GradCtx<'a> {
    /// The scope new nodes go in.
    pub scope: Scope,
    /// The forward node.
    pub node: &'a Node,
    /// Its id.
    pub id: NodeId,
    /// Static shapes of the forward graph's outputs (by node, then output).
    pub shapes: &'a [Vec<Shape>],
}

impl GradCtx<'_> {
    /// Forward input `i`.
    pub fn input(&self, i: usize) -> Output {
        self.node.inputs[i]
    }
    /// Forward output `i`.
    pub fn output(&self, i: usize) -> Output {
        Output { node: self.id, index: i }
    }
    /// The static shape of a forward tensor.
    pub fn shape(&self, o: Output) -> Shape {
        self.shapes.get(o.node).and_then(|s| s.get(o.index)).cloned().unwrap_or_else(Shape::unknown)
    }
    /// An error about this node.
    pub fn unsupported(&self, reason: impl Into<String>) -> GradError {
        GradError::Unsupported { node: self.node.name.clone(), op: self.node.op.clone(), reason: reason.into() }
    }
}

/// A gradient function: from the gradients of the node's outputs (`None` where no gradient
/// flows) to the gradients of its inputs.
pub type GradFn = fn(&GradCtx, &[Option<Output>]) -> Result<Vec<Option<Output>>, GradError>;

/// Ops through which no gradient flows.
fn stops_gradient(op: &str) -> bool {
    matches!(op, "StopGradient" | "PreventGradient")
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
        if out_grads.iter().all(Option::is_none) || stops_gradient(&node.op) {
            continue;
        }
        // Inputs that are xs themselves still need their gradient even if the node is an x.
        if node.inputs.iter().all(|o| !between.contains(&o.node) && !x_set.contains(o)) {
            continue;
        }
        let f = registry::get(&node.op)
            .ok_or_else(|| GradError::NoGradient { op: node.op.clone(), node: node.name.clone() })?;
        let ctx = GradCtx { scope: gscope.name_scope(&format!("{}_grad", node.name)), node, id, shapes: &shapes };
        let in_grads = f(&ctx, &out_grads)?;
        for (o, g) in node.inputs.iter().zip(in_grads) {
            if let Some(g) = g {
                if between.contains(&o.node) || x_set.contains(o) {
                    grads.entry(*o).or_default().push(g);
                }
            }
        }
    }
    xs.iter().map(|x| aggregate(&gscope, &graph.node(x.node).name, grads.get(x))).collect()
}

/// The sum of the gradients a tensor received (`AddN` for several).
fn aggregate(scope: &Scope, name: &str, gs: Option<&Vec<Output>>) -> Result<Option<Output>, GradError> {
    Ok(match gs.map(Vec::as_slice) {
        None | Some([]) => None,
        Some([g]) => Some(*g),
        Some(many) => Some(registry::add_n(&scope.name_scope(&format!("{name}_grad_sum")), many)?),
    })
}
