//! Reductions over axes (`Sum`, `Mean`, `Max`, `Min`, `Prod`, `All`, `Any`), `ArgMax`/
//! `ArgMin`, and the softmaxes (reductions over the last axis).
use ferroflow_graph::{Output, ShapeError};
use ferroflow_proto::attr;
use ferroflow_tensor::{DType, Shape};

use crate::gradient::{build, g0, GradCtx, GradError, GradResult};
use crate::registry::{op, OpBuilder, OpDef};
use crate::shape_inference::{self as s, norm_axis, InferCtx};
use crate::{Ops, RawOps};

fn reduction(name: &str) -> OpBuilder {
    op(name)
        .input("input: T")
        .input("reduction_indices: Tidx")
        .output("output: T")
        .attr("keep_dims: bool = false")
        .attr("T: type")
        .attr("Tidx: {int32, int64} = DT_INT32")
        .shape(reduce)
}

fn arg_reduction(name: &str) -> OpBuilder {
    op(name)
        .input("input: T")
        .input("dimension: Tidx")
        .output("output: output_type")
        .attr("T: type")
        .attr("Tidx: {int16, int32, int64} = DT_INT32")
        .attr("output_type: {int16, uint16, int32, int64} = DT_INT64")
        .shape(arg_reduce)
        .not_differentiable("its output is an index (TensorFlow's gradient is None)")
}

fn logical_reduction(name: &str) -> OpBuilder {
    op(name)
        .input("input: bool")
        .input("reduction_indices: Tidx")
        .output("output: bool")
        .attr("keep_dims: bool = false")
        .attr("Tidx: {int32, int64} = DT_INT32")
        .shape(reduce)
        .not_differentiable("its output is boolean")
}

/// The reduction ops.
pub fn defs() -> Vec<OpDef> {
    vec![
        reduction("Sum").gradient(sum_grad).build(),
        reduction("Mean").gradient(mean_grad).build(),
        reduction("Max").gradient(extremum_grad).build(),
        reduction("Min").gradient(extremum_grad).build(),
        reduction("Prod").gradient(prod_grad).build(),
        arg_reduction("ArgMax").build(),
        arg_reduction("ArgMin").build(),
        logical_reduction("All").build(),
        logical_reduction("Any").build(),
        op("Softmax")
            .input("logits: T")
            .output("softmax: T")
            .attr("T: type")
            .shape(s::unchanged)
            .gradient(softmax_grad)
            .build(),
        op("LogSoftmax")
            .input("logits: T")
            .output("logsoftmax: T")
            .attr("T: type")
            .shape(s::unchanged)
            .gradient(log_softmax_grad)
            .build(),
    ]
}

/// Reductions: input 1 holds the axes; `keep_dims`.
fn reduce(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let (Some(dims), Some(axes)) = (c.inputs[0].dims(), c.const_ints(1)) else {
        return Ok(vec![Shape::unknown()]);
    };
    let mut reduced = vec![false; dims.len()];
    for a in axes {
        reduced[norm_axis(a, dims.len())?] = true;
    }
    let keep = c.bool("keep_dims");
    let out =
        dims.iter().zip(&reduced).filter_map(|(d, &r)| if r { keep.then_some(Some(1)) } else { Some(*d) }).collect();
    Ok(vec![Shape::new(out)])
}

/// `ArgMax`/`ArgMin`: removes the axis given by input 1.
fn arg_reduce(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let (Some(dims), Some(axis)) = (c.inputs[0].dims(), c.const_ints(1)) else {
        return Ok(vec![Shape::unknown()]);
    };
    let a = norm_axis(*axis.first().ok_or("dimension must be a scalar")?, dims.len())?;
    Ok(vec![Shape::new(dims.iter().enumerate().filter(|(i, _)| *i != a).map(|(_, d)| *d).collect())])
}

/// `g` (the gradient of a reduction's output) broadcast back to the input's shape.
fn unreduce(ctx: &GradCtx, g: Output) -> Result<Output, GradError> {
    let s = &ctx.scope;
    let x = ctx.input(0);
    let mut g = g;
    if !ctx.attr_bool("keep_dims") {
        let rank = ctx.shape(x).rank().ok_or_else(|| ctx.unsupported("the input's rank must be known"))? as i64;
        let axes = ctx.const_ints(ctx.input(1)).ok_or_else(|| ctx.unsupported("reduction axes must be a constant"))?;
        let mut axes: Vec<i64> = axes.into_iter().map(|a| if a < 0 { a + rank } else { a }).collect();
        if axes.iter().any(|&a| a < 0 || a >= rank) {
            return Err(ctx.unsupported("reduction axis out of range"));
        }
        axes.sort_unstable();
        axes.dedup();
        for a in axes {
            let dim = s.scalar(a as i32)?;
            g = build(s, "ExpandDims", &[g, dim], &[("Tdim", attr::dtype(DType::Int32))])?;
        }
    }
    let shape = s.unary("Shape", x)?;
    Ok(build(s, "BroadcastTo", &[g, shape], &[("Tidx", attr::dtype(DType::Int32))])?)
}

fn sum_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    Ok(vec![Some(unreduce(ctx, g)?), None])
}

fn mean_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let dt = s.dtype(g);
    let (x, y) = (ctx.input(0), ctx.output(0));
    // count = size(x) / size(y)
    let count = s.real_div(s.cast(s.unary("Size", x)?, dt)?, s.cast(s.unary("Size", y)?, dt)?)?;
    Ok(vec![Some(s.real_div(unreduce(ctx, g)?, count)?), None])
}

/// `Max`, `Min` (TensorFlow's): the gradient goes to the extrema, split evenly between ties.
fn extremum_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let x = ctx.input(0);
    let y = unreduce(ctx, ctx.output(0))?;
    let dt = s.dtype(x);
    let hits = s.cast(build(s, "Equal", &[x, y], &[("incompatible_shape_error", attr::boolean(true))])?, dt)?;
    let axes = ctx.input(1);
    let count =
        build(s, "Sum", &[hits, axes], &[("keep_dims", attr::boolean(true)), ("Tidx", attr::dtype(s.dtype(axes)))])?;
    let share = s.real_div(hits, count)?;
    Ok(vec![Some(s.mul(share, unreduce(ctx, g)?)?), None])
}

fn softmax_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None]) };
    let s = &ctx.scope;
    let y = ctx.output(0);
    let dot = s.reduce("Sum", s.mul(g, y)?, &[-1], true)?;
    Ok(vec![Some(s.mul(s.sub(g, dot)?, y)?)])
}

fn log_softmax_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None]) };
    let s = &ctx.scope;
    let y = ctx.output(0);
    let total = s.reduce("Sum", g, &[-1], true)?;
    Ok(vec![Some(s.sub(g, s.mul(s.unary("Exp", y)?, total)?)?)])
}

/// `Prod` (TensorFlow's `_ProdGrad`): each element's gradient is the product of the others in
/// its reduction, from exclusive cumulative products from both ends (so zeros are exact): the
/// reduced axes moved first and flattened, `cumprod(exclusive) * cumprod(exclusive,
/// reverse)`, moved back, times the broadcast gradient. Needs the input's rank and constant
/// axes.
fn prod_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    use crate::RawOps;
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let x = ctx.input(0);
    let rank = ctx.shape(x).rank().ok_or_else(|| ctx.unsupported("the input's rank must be known"))?;
    let axes = ctx.const_ints(ctx.input(1)).ok_or_else(|| ctx.unsupported("the axes must be constant"))?;
    let mut reduced = vec![false; rank];
    for a in axes {
        let a = if a < 0 { a + rank as i64 } else { a };
        if a < 0 || a as usize >= rank {
            return Err(ctx.unsupported(format!("axis {a} is out of range for rank {rank}")));
        }
        reduced[a as usize] = true;
    }
    let i32s = |v: &[i32]| s.constant_from(&[v.len()], v);
    let shape = build(s, "Shape", &[x], &[("out_type", attr::dtype(DType::Int32))])?;
    // The gradient with the reduced axes kept as 1, broadcast to the input's shape.
    let ones = i32s(&vec![1; rank])?;
    let keep: Vec<bool> = reduced.iter().map(|r| !r).collect();
    let kept = s.select_v2(s.constant_from(&[rank], &keep)?, shape, ones)?;
    let g = s.broadcast_to(s.reshape(g, kept)?, shape)?;
    let perm: Vec<i32> = (0..rank as i32)
        .filter(|&a| reduced[a as usize])
        .chain((0..rank as i32).filter(|&a| !reduced[a as usize]))
        .collect();
    let mut inverse = vec![0i32; rank];
    for (i, &p) in perm.iter().enumerate() {
        inverse[p as usize] = i as i32;
    }
    let moved = s.transpose(x, i32s(&perm)?)?;
    let moved_shape = build(s, "Shape", &[moved], &[("out_type", attr::dtype(DType::Int32))])?;
    let n_reduced = reduced.iter().filter(|&&r| r).count() as i32;
    let lead = s.slice(moved_shape, i32s(&[0])?, i32s(&[n_reduced])?)?;
    let zero = s.scalar(0i32)?;
    let lead = s.prod(lead, zero)?;
    let flat = s.reshape(moved, s.pack(&[lead, s.scalar(-1i32)?])?)?;
    let cum = |reverse: bool| {
        build(
            s,
            "Cumprod",
            &[flat, zero],
            &[
                ("exclusive", attr::boolean(true)),
                ("reverse", attr::boolean(reverse)),
                ("Tidx", attr::dtype(DType::Int32)),
            ],
        )
    };
    let others = s.mul(cum(false)?, cum(true)?)?;
    let back = s.transpose(s.reshape(others, moved_shape)?, i32s(&inverse)?)?;
    Ok(vec![Some(s.mul(g, back)?), None])
}
