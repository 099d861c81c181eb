//! TensorFlow's ops that gradient graphs use: activation backprops, `BiasAddGrad`,
//! `BroadcastGradientArgs`, `BroadcastTo`, `DynamicStitch`, `UnsortedSegmentSum`.
use ferroflow_graph::{Output, ShapeError};
use ferroflow_proto::attr;
use ferroflow_tensor::{DType, Shape};

use crate::gradient::{build, g0, reduce_like, scalar_like, GradCtx, GradResult, NO_ATTRS};
use crate::registry::{op, OpBuilder, OpDef};
use crate::shape_inference::{self as s, InferCtx};
use crate::{Ops, RawOps};

/// `(gradients, features) -> backprops`, TensorFlow's activation backprop signature.
fn activation_backprop(name: &str) -> OpBuilder {
    op(name)
        .input("gradients: T")
        .input("features: T")
        .output("backprops: T")
        .attr("T: {half, bfloat16, float, double}")
        .shape(s::unchanged)
}

/// `(y, dy) -> z`, the signature of `SigmoidGrad` and `TanhGrad`.
fn output_backprop(name: &str) -> OpBuilder {
    op(name).input("y: T").input("dy: T").output("z: T").attr("T: {half, bfloat16, float, double}").shape(s::unchanged)
}

/// The gradient helper ops.
pub fn defs() -> Vec<OpDef> {
    vec![
        activation_backprop("ReluGrad").gradient(relu_grad_grad).build(),
        activation_backprop("Relu6Grad").gradient(relu6_grad_grad).build(),
        activation_backprop("SoftsignGrad").gradient_unavailable("TensorFlow registers no gradient for it").build(),
        output_backprop("SigmoidGrad").gradient(sigmoid_grad_grad).build(),
        output_backprop("TanhGrad").gradient(tanh_grad_grad).build(),
        op("BiasAddGrad")
            .input("out_backprop: T")
            .output("output: T")
            .attr("T: type")
            .attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
            .shape(bias_add_grad_shape)
            .gradient(bias_add_grad_grad)
            .build(),
        op("BroadcastGradientArgs")
            .input("s0: T")
            .input("s1: T")
            .output("r0: T")
            .output("r1: T")
            .attr("T: {int32, int64} = DT_INT32")
            .shape(|_| Ok(vec![Shape::new(vec![None]), Shape::new(vec![None])]))
            .not_differentiable("its outputs are axes (TensorFlow's gradient is None)")
            .build(),
        op("BroadcastTo")
            .input("input: T")
            .input("shape: Tidx")
            .output("output: T")
            .attr("T: type")
            .attr("Tidx: {int32, int64} = DT_INT32")
            .shape(|c| Ok(vec![c.shape_value(1)]))
            .grows()
            .gradient(broadcast_to_grad)
            .build(),
        op("UnsortedSegmentSum")
            .input("data: T")
            .input("segment_ids: Tindices")
            .input("num_segments: Tnumsegments")
            .output("output: T")
            .attr("T: type")
            .attr("Tindices: {int16, int32, int64}")
            .attr("Tnumsegments: {int32, int64} = DT_INT32")
            .shape(unsorted_segment_sum)
            .gradient(unsorted_segment_sum_grad)
            .build(),
        op("DynamicStitch")
            .input("indices: N * int32")
            .input("data: N * T")
            .output("merged: T")
            .attr("N: int >= 1")
            .attr("T: type")
            .gradient_unavailable("TensorFlow's gradient gathers each data's rows back; not implemented yet")
            .build(),
    ]
}

/// `UnsortedSegmentSum`: `[num_segments]` then the data's dimensions past the ids' rank.
fn unsorted_segment_sum(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let segments = c.const_ints(2).and_then(|v| v.first().copied()).and_then(|n| usize::try_from(n).ok());
    match (c.inputs[0].dims(), c.inputs[1].rank()) {
        (Some(d), Some(r)) if r <= d.len() => {
            let mut out = vec![segments];
            out.extend_from_slice(&d[r..]);
            Ok(vec![Shape::new(out)])
        }
        (Some(d), Some(r)) => Err(format!("segment ids of rank {r} for data of rank {}", d.len()).into()),
        _ => Ok(vec![Shape::unknown()]),
    }
}

/// `BiasAddGrad` (NHWC): a vector over the last axis.
fn bias_add_grad_shape(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let channels = c.inputs[0].dims().and_then(|d| d.last().copied()).flatten();
    Ok(vec![match c.inputs[0].rank() {
        Some(_) if c.string("data_format") != "NCHW" => Shape::new(vec![channels]),
        _ => Shape::new(vec![None]),
    }])
}

/// `ReluGrad`: the incoming gradient through the same mask; none to the features (TensorFlow
/// gives zeros).
fn relu_grad_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    activation_backprop_grad(ctx, gs, "ReluGrad")
}

fn relu6_grad_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    activation_backprop_grad(ctx, gs, "Relu6Grad")
}

fn activation_backprop_grad(ctx: &GradCtx, gs: &[Option<Output>], op: &str) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let features = ctx.input(1);
    Ok(vec![Some(build(s, op, &[g, features], NO_ATTRS)?), Some(s.unary("ZerosLike", features)?)])
}

/// `SigmoidGrad(y, dy) = dy·y·(1−y)`: `(g·dy − 2·g·dy·y, SigmoidGrad(y, g))`.
fn sigmoid_grad_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let (y, dy) = (ctx.input(0), ctx.input(1));
    let gb = s.mul(g, dy)?;
    let ta = s.sub(gb, s.mul(s.mul(scalar_like(s, y, 2.0)?, gb)?, y)?)?;
    Ok(vec![Some(ta), Some(build(s, "SigmoidGrad", &[y, g], NO_ATTRS)?)])
}

/// `TanhGrad(y, dy) = dy·(1−y²)`: `(−2·g·dy·y, TanhGrad(y, g))`.
fn tanh_grad_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let (y, dy) = (ctx.input(0), ctx.input(1));
    let ta = s.mul(s.mul(s.mul(g, scalar_like(s, y, -2.0)?)?, dy)?, y)?;
    Ok(vec![Some(ta), Some(build(s, "TanhGrad", &[y, g], NO_ATTRS)?)])
}

/// `BiasAddGrad` sums over all but the last axis: its gradient is broadcast back (NHWC).
fn bias_add_grad_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None]) };
    let x = ctx.input(0);
    let rank = ctx.shape(x).rank().ok_or_else(|| ctx.unsupported("the input's rank must be known"))?;
    if ctx.attr_string("data_format") == "NCHW" {
        return Err(ctx.unsupported("only NHWC is differentiable"));
    }
    let s = &ctx.scope;
    let mut dims = vec![1i32; rank];
    dims[rank - 1] = -1;
    let row = s.reshape(g, &dims)?;
    let shape = s.unary("Shape", x)?;
    Ok(vec![Some(build(s, "BroadcastTo", &[row, shape], &[("Tidx", attr::dtype(DType::Int32))])?)])
}

/// `BroadcastTo`: the gradient summed back to the input's shape.
fn broadcast_to_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    Ok(vec![Some(reduce_like(ctx, g, ctx.input(0), ctx.output(0))?), None])
}

/// `UnsortedSegmentSum`: each data row gets its segment's gradient row (a gather); rows with
/// a negative segment id were dropped, so theirs is zero (TensorFlow's `_GatherDropNegatives`).
fn unsorted_segment_sum_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None, None]) };
    let s = &ctx.scope;
    let ids = ctx.input(1);
    let int = s.dtype(ids);
    let zero = match int {
        DType::Int64 => s.scalar(0i64)?,
        DType::Int32 => s.scalar(0i32)?,
        other => return Err(ctx.unsupported(format!("segment ids of type {other}"))),
    };
    let clipped = s.maximum(ids, zero)?;
    let axis = s.scalar(0i32)?;
    let gathered = build(
        s,
        "GatherV2",
        &[g, clipped, axis],
        &[("Tparams", attr::dtype(s.dtype(g))), ("Tindices", attr::dtype(int)), ("Taxis", attr::dtype(DType::Int32))],
    )?;
    let kept = build(s, "GreaterEqual", &[ids, zero], NO_ATTRS)?;
    // The mask broadcast over the gathered rows: ids' shape, then ones.
    let (Some(id_dims), Some(rank)) = (ctx.shape(ids).as_known(), ctx.shape(ctx.input(0)).rank()) else {
        return Err(ctx.unsupported("the segment ids' shape and the data's rank must be known"));
    };
    let mut dims: Vec<i32> = id_dims.iter().map(|&d| d as i32).collect();
    dims.resize(rank, 1);
    let kept = s.reshape(kept, &dims)?;
    let zeros = s.unary("ZerosLike", gathered)?;
    Ok(vec![Some(crate::gradient::select(s, kept, gathered, zeros)?), None, None])
}
