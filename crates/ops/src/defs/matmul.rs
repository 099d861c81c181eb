//! Matrix products: `MatMul` (and TensorFlow's oneDNN rewrite `_MklMatMul`), `BatchMatMulV2`.
use ferroflow_graph::{Output, ShapeError};
use ferroflow_proto::attr;
use ferroflow_tensor::Shape;

use crate::gradient::{build, g0, sum_to_shape, GradCtx, GradResult};
use crate::registry::{op, OpDef};
use crate::shape_inference::InferCtx;
use crate::Ops;

/// The matrix-product ops.
pub fn defs() -> Vec<OpDef> {
    let mut v = Vec::new();
    // TensorFlow's oneDNN build rewrites MatMul into `_MklMatMul` (same signature, plain
    // layout) in the graphs it runs, so its partition graphs hold it.
    for (name, types) in [("MatMul", "T: type"), ("_MklMatMul", "T: {bfloat16, half, float, double}")] {
        let b = op(name)
            .contraction()
            .input("a: T")
            .input("b: T")
            .output("product: T")
            .attr("transpose_a: bool = false")
            .attr("transpose_b: bool = false")
            .attr("grad_a: bool = false")
            .attr("grad_b: bool = false")
            .attr(types)
            .shape(matmul)
            .grows();
        v.push(if name == "MatMul" {
            b.gradient(matmul_grad).build()
        } else {
            b.gradient_unavailable("TensorFlow's oneDNN rewrite of MatMul appears only in optimized graphs (TensorFlow registers no gradient): differentiate MatMul").build()
        });
    }
    v.push(
        op("BatchMatMulV2")
            .contraction()
            .input("x: T")
            .input("y: T")
            .output("output: T")
            .attr("T: type")
            .attr("adj_x: bool = false")
            .attr("adj_y: bool = false")
            .attr("grad_x: bool = false")
            .attr("grad_y: bool = false")
            .shape(batch_matmul)
            .grows()
            .gradient(batch_matmul_grad)
            .build(),
    );
    v
}

/// `MatMul`: [m, k] x [k, n] -> [m, n], honouring `transpose_a/b`.
pub(crate) fn matmul(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let (a, b) = (&c.inputs[0], &c.inputs[1]);
    for (s, n) in [(a, "a"), (b, "b")] {
        if s.rank().is_some_and(|r| r != 2) {
            return Err(format!("input '{n}' must be a matrix, got shape {s}").into());
        }
    }
    let dim = |s: &Shape, i: usize| s.dims().and_then(|d| d[i]);
    let (ta, tb) = (c.bool("transpose_a"), c.bool("transpose_b"));
    let (m, ka) = if ta { (dim(a, 1), dim(a, 0)) } else { (dim(a, 0), dim(a, 1)) };
    let (kb, n) = if tb { (dim(b, 1), dim(b, 0)) } else { (dim(b, 0), dim(b, 1)) };
    if let (Some(x), Some(y)) = (ka, kb) {
        if x != y {
            return Err(format!("inner dimensions differ: {a} x {b} (transpose_a={ta}, transpose_b={tb})").into());
        }
    }
    Ok(vec![Shape::new(vec![m, n])])
}

/// `BatchMatMulV2`: the broadcast of the batch dimensions, then `[m, n]`.
fn batch_matmul(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let (Some(x), Some(y)) = (c.inputs[0].dims(), c.inputs[1].dims()) else { return Ok(vec![Shape::unknown()]) };
    if x.len() < 2 || y.len() < 2 {
        return Err(format!("inputs must have rank >= 2, got {} and {}", c.inputs[0], c.inputs[1]).into());
    }
    let (bx, by) = (Shape::new(x[..x.len() - 2].to_vec()), Shape::new(y[..y.len() - 2].to_vec()));
    let batch = bx.broadcast(&by).ok_or_else(|| format!("batch dimensions {bx} and {by} do not broadcast"))?;
    let (ax, ay) = (c.bool("adj_x"), c.bool("adj_y"));
    let (m, kx) = if ax { (x[x.len() - 1], x[x.len() - 2]) } else { (x[x.len() - 2], x[x.len() - 1]) };
    let (ky, n) = if ay { (y[y.len() - 1], y[y.len() - 2]) } else { (y[y.len() - 2], y[y.len() - 1]) };
    if let (Some(a), Some(b)) = (kx, ky) {
        if a != b {
            return Err(format!("inner dimensions differ: {} x {}", c.inputs[0], c.inputs[1]).into());
        }
    }
    let mut out = batch.dims().map(<[_]>::to_vec).unwrap_or_default();
    out.extend([m, n]);
    Ok(vec![Shape::new(out)])
}

/// The gradients of a product `x·y` (each operand possibly transposed) by TensorFlow's four
/// cases; `mm(p, q, tp, tq)` builds one product.
fn product_grads<F>(
    g: Output,
    x: Output,
    y: Output,
    tx: bool,
    ty: bool,
    mm: F,
) -> Result<(Output, Output), crate::BuildError>
where
    F: Fn(Output, Output, bool, bool) -> Result<Output, crate::BuildError>,
{
    Ok(match (tx, ty) {
        (false, false) => (mm(g, y, false, true)?, mm(x, g, true, false)?),
        (false, true) => (mm(g, y, false, false)?, mm(g, x, true, false)?),
        (true, false) => (mm(y, g, false, true)?, mm(x, g, false, false)?),
        (true, true) => (mm(y, g, true, true)?, mm(g, x, true, true)?),
    })
}

fn matmul_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let (ta, tb) = (ctx.attr_bool("transpose_a"), ctx.attr_bool("transpose_b"));
    let (ga, gb) = product_grads(g, ctx.input(0), ctx.input(1), ta, tb, |p, q, tp, tq| s.matmul(p, q, tp, tq))?;
    Ok(vec![Some(ga), Some(gb)])
}

/// `BatchMatMulV2`: the products of the gradient with the operands, summed over the batch
/// dimensions an operand was broadcast along (TensorFlow's `_BatchMatMulV2`), which is read
/// at run time unless both operands' batch dimensions are statically known and equal.
fn batch_matmul_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let (x, y) = (ctx.input(0), ctx.input(1));
    let batch = |o: Output| {
        let d = ctx.shape(o).as_known()?;
        Some(d[..d.len().checked_sub(2)?].to_vec())
    };
    let same = matches!((batch(x), batch(y)), (Some(bx), Some(by)) if bx == by);
    let s = &ctx.scope;
    let mm = |p, q, tp: bool, tq: bool| {
        build(s, "BatchMatMulV2", &[p, q], &[("adj_x", attr::boolean(tp)), ("adj_y", attr::boolean(tq))])
    };
    let (gx, gy) = product_grads(g, x, y, ctx.attr_bool("adj_x"), ctx.attr_bool("adj_y"), mm)?;
    if same {
        return Ok(vec![Some(gx), Some(gy)]);
    }
    let (sx, sy) = (s.unary("Shape", x)?, s.unary("Shape", y)?);
    let begin = s.constant_from(&[1], &[0i32])?;
    let end = s.constant_from(&[1], &[-2i32])?;
    let step = s.constant_from(&[1], &[1i32])?;
    let batch_dims = |shape| {
        build(
            s,
            "StridedSlice",
            &[shape, begin, end, step],
            &[("Index", attr::dtype(ferroflow_tensor::DType::Int32)), ("begin_mask", attr::int(1))],
        )
    };
    let args =
        s.add_op("BroadcastGradientArgs", "BroadcastGradientArgs", &[batch_dims(sx)?, batch_dims(sy)?], &[], {
            let mut a = ferroflow_graph::Attrs::new();
            a.insert("T".into(), attr::dtype(ferroflow_tensor::DType::Int32));
            a
        })?;
    let gx = sum_to_shape(s, gx, Output { node: args, index: 0 }, sx)?;
    let gy = sum_to_shape(s, gy, Output { node: args, index: 1 }, sy)?;
    Ok(vec![Some(gx), Some(gy)])
}
