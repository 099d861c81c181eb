//! What a gradient function sees and may use. Each differentiable op declares its gradient
//! function with its definition (in [`crate::defs`]); `ferroflow-autodiff` walks the graph
//! and calls them.
use ferroflow_graph::{Attrs, GraphError, Node, NodeId, Output};
use ferroflow_proto::attr::AttrMap;
use ferroflow_proto::{attr, attr_value::Value, AttrValue};
use ferroflow_tensor::{DType, Shape};

use crate::shape_inference::int_values;
use crate::Ops;
use crate::{BuildError, OpRegistry, Scope};

/// An error building gradients.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GradError {
    /// An op on the path from `xs` to `ys` has no gradient function.
    #[error("no gradient is defined for op '{op}' (node '{node}'), which lies between the xs and the ys{}", reason_suffix(.reason))]
    NoGradient {
        /// The op.
        op: String,
        /// The node.
        node: String,
        /// What is missing, when the op declares it.
        reason: Option<String>,
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

fn reason_suffix(r: &Option<String>) -> String {
    r.as_ref().map(|r| format!(": {r}")).unwrap_or_default()
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

/// A gradient function: from the gradients of the node's outputs (`None` where no gradient
/// flows) to the gradients of its inputs.
pub type GradFn = fn(&GradCtx, &[Option<Output>]) -> GradResult;

/// The gradients of a node's inputs (`None` where none flows).
pub type GradResult = Result<Vec<Option<Output>>, GradError>;

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
    /// A bool attr of the forward node (false when absent).
    pub fn attr_bool(&self, name: &str) -> bool {
        self.node.attrs.bool_attr(name).unwrap_or(false)
    }
    /// A string attr of the forward node (empty when absent).
    pub fn attr_string(&self, name: &str) -> String {
        self.node.attrs.string_attr(name).unwrap_or_default()
    }
    /// An int attr of the forward node.
    pub fn attr_int(&self, name: &str) -> Option<i64> {
        self.node.attrs.int_attr(name)
    }
    /// The forward node's attrs named in `keep` (those it has), for its gradient op.
    pub fn attrs_of(&self, keep: &[&str]) -> Vec<(String, AttrValue)> {
        keep.iter().filter_map(|k| self.node.attrs.get(*k).map(|v| (k.to_string(), v.clone()))).collect()
    }
    /// The value of a `Const` forward tensor as integers.
    pub fn const_ints(&self, o: Output) -> Option<Vec<i64>> {
        let t = self.scope.with_graph(|g| {
            let n = g.node(o.node);
            match (n.op.as_str(), n.attrs.attr_value("value")) {
                ("Const", Some(Value::Tensor(t))) => ferroflow_proto::convert::tensor_from_proto(t).ok(),
                _ => None,
            }
        })?;
        int_values(&t)
    }
}

/// The first output's gradient.
pub fn g0(gs: &[Option<Output>]) -> Option<Output> {
    gs.first().copied().flatten()
}

/// Adds `op(inputs)` with `attrs`; `T` is filled from the first input when the op has it.
pub fn build<K: AsRef<str>>(
    s: &Scope,
    op: &str,
    inputs: &[Output],
    attrs: &[(K, AttrValue)],
) -> Result<Output, BuildError> {
    let mut at = Attrs::new();
    for (k, v) in attrs {
        at.insert(k.as_ref().to_string(), v.clone());
    }
    if let (Some(def), Some(first)) = (OpRegistry::global().get(op), inputs.first()) {
        if def.attr_def("T").is_some() && !at.contains_key("T") {
            at.insert("T".into(), attr::dtype(s.dtype(*first)));
        }
    }
    Ok(Output { node: s.add_op(op, op, inputs, &[], at)?, index: 0 })
}

/// No attrs besides the inferred `T`.
pub const NO_ATTRS: &[(&str, AttrValue)] = &[];

/// A scalar constant of `x`'s dtype.
pub fn scalar_like(s: &Scope, x: Output, v: f64) -> Result<Output, BuildError> {
    match s.dtype(x) {
        DType::Double => s.scalar(v),
        _ => s.scalar(v as f32),
    }
}

/// The sum of several gradients (`AddN`).
pub fn add_n(s: &Scope, xs: &[Output]) -> Result<Output, BuildError> {
    build(s, "AddN", xs, &[("N", attr::int(xs.len() as i64))])
}

/// `SelectV2(cond, t, e)` (its `T` is the values' dtype, not the condition's).
pub fn select(s: &Scope, cond: Output, t: Output, e: Output) -> Result<Output, BuildError> {
    build(s, "SelectV2", &[cond, t, e], &[("T", attr::dtype(s.dtype(t)))])
}

/// `Shape(t)` with the given index type.
pub fn shape_of(s: &Scope, t: Output, out_type: DType) -> Result<Output, BuildError> {
    build(s, "Shape", &[t], &[("out_type", attr::dtype(out_type))])
}

/// `g` summed down to `x`'s shape (undoing broadcasting against `other`).
pub fn reduce_like(ctx: &GradCtx, g: Output, x: Output, other: Output) -> Result<Output, GradError> {
    let (sx, so) = (ctx.shape(x), ctx.shape(other));
    if sx.as_known().is_some() && sx.as_known() == so.as_known() {
        return Ok(g);
    }
    let s = &ctx.scope;
    let shape_x = s.unary("Shape", x)?;
    let shape_o = s.unary("Shape", other)?;
    let args = s.add_op("BroadcastGradientArgs", "BroadcastGradientArgs", &[shape_x, shape_o], &[], {
        let mut a = Attrs::new();
        a.insert("T".into(), attr::dtype(DType::Int32));
        a
    })?;
    Ok(sum_to_shape(s, g, Output { node: args, index: 0 }, shape_x)?)
}

/// `g` summed over `axes` (int32) and reshaped to `shape` (int32): a broadcast undone.
pub fn sum_to_shape(s: &Scope, g: Output, axes: Output, shape: Output) -> Result<Output, BuildError> {
    let summed =
        build(s, "Sum", &[g, axes], &[("keep_dims", attr::boolean(false)), ("Tidx", attr::dtype(DType::Int32))])?;
    build(s, "Reshape", &[summed, shape], &[("Tshape", attr::dtype(DType::Int32))])
}

/// The gradients of a broadcasting binary op's inputs, given those of its (broadcast) output.
pub fn binary(ctx: &GradCtx, gx: Output, gy: Output) -> GradResult {
    let (x, y) = (ctx.input(0), ctx.input(1));
    Ok(vec![Some(reduce_like(ctx, gx, x, y)?), Some(reduce_like(ctx, gy, y, x)?)])
}

/// Gradient of ops whose output is their input: the gradient passes through unchanged.
pub fn identity(_: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    Ok(vec![g0(gs)])
}

/// Gradient of ops whose output `i` is input `i`: each gradient passes through.
pub fn pass_through(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    Ok((0..ctx.node.inputs.len()).map(|i| gs.get(i).copied().flatten()).collect())
}
