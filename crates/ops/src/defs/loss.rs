//! The softmax cross-entropies, with their backprop as a second output.
use ferroflow_graph::{Output, ShapeError};
use ferroflow_proto::attr;
use ferroflow_tensor::{DType, Shape};

use crate::gradient::{build, g0, GradCtx, GradResult};
use crate::registry::{op, OpDef};
use crate::shape_inference::InferCtx;
use crate::{Ops, RawOps};

/// The loss ops.
pub fn defs() -> Vec<OpDef> {
    vec![
        op("SoftmaxCrossEntropyWithLogits")
            .input("features: T")
            .input("labels: T")
            .output("loss: T")
            .output("backprop: T")
            .attr("T: {half, bfloat16, float, double}")
            .shape(cross_entropy)
            .gradient(cross_entropy_grad)
            .build(),
        op("SparseSoftmaxCrossEntropyWithLogits")
            .input("features: T")
            .input("labels: Tlabels")
            .output("loss: T")
            .output("backprop: T")
            .attr("T: {half, bfloat16, float, double}")
            .attr("Tlabels: {int32, int64} = DT_INT64")
            .shape(cross_entropy)
            .gradient(sparse_cross_entropy_grad)
            .build(),
    ]
}

/// Loss `[batch]`, backprop like the logits.
fn cross_entropy(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let f = &c.inputs[0];
    match f.dims() {
        Some([b, _]) => Ok(vec![Shape::new(vec![*b]), f.clone()]),
        Some(d) => Err(format!("logits must be 2-dimensional, got rank {}", d.len()).into()),
        None => Ok(vec![Shape::new(vec![None]), Shape::new(vec![None, None])]),
    }
}

/// The logits' gradient: the backprop output scaled by the loss's gradient per row.
fn logits_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> Result<Option<(Output, Output)>, crate::gradient::GradError> {
    if gs.get(1).copied().flatten().is_some() {
        return Err(ctx.unsupported("gradients through the backprop output are not supported"));
    }
    let Some(g) = g0(gs) else { return Ok(None) };
    let s = &ctx.scope;
    let minus_one = s.scalar(-1i32)?;
    let g = build(s, "ExpandDims", &[g, minus_one], &[("Tdim", attr::dtype(DType::Int32))])?;
    Ok(Some((g, s.mul(g, ctx.output(1))?)))
}

fn cross_entropy_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some((g, features)) = logits_grad(ctx, gs)? else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let labels = s.mul(g, s.unary("Neg", s.unary("LogSoftmax", ctx.input(0))?)?)?;
    Ok(vec![Some(features), Some(labels)])
}

/// No gradient to the integer labels.
fn sparse_cross_entropy_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    Ok(vec![logits_grad(ctx, gs)?.map(|(_, features)| features), None])
}
