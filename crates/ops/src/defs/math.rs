//! Elementwise math that is not a plain scalar function: `Pow`, `FloorDiv` and `FloorMod`
//! (integer kernels check their right operand), and `LeakyRelu` (an attr).
use ferroflow_graph::Output;
use ferroflow_proto::attr::AttrMap;
use ferroflow_proto::attr_value::Value;

use crate::gradient::{binary, build, g0, scalar_like, select, GradCtx, GradResult, NO_ATTRS};
use crate::registry::{op, OpDef};
use crate::shape_inference as s;
use crate::{Ops, RawOps};

fn binary_op(name: &str) -> crate::registry::OpBuilder {
    op(name).input("x: T").input("y: T").output("z: T").attr("T: type").shape(s::broadcast)
}

/// The math ops.
pub fn defs() -> Vec<OpDef> {
    vec![
        binary_op("Pow").gradient(pow_grad).build(),
        binary_op("FloorDiv").not_differentiable("piecewise constant (TensorFlow's gradient is None)").build(),
        binary_op("FloorMod").gradient(floor_mod_grad).build(),
        op("LeakyRelu")
            .input("features: T")
            .output("activations: T")
            .attr("alpha: float = 0.2")
            .attr("T: {half, bfloat16, float, double} = DT_FLOAT")
            .shape(s::unchanged)
            .activation()
            .gradient(leaky_relu_grad)
            .build(),
    ]
}

/// `d x^y / dx = y·x^(y−1)`; `d x^y / dy = x^y·log x` where `x > 0`, else 0 (TensorFlow's).
fn pow_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let (x, y, z) = (ctx.input(0), ctx.input(1), ctx.output(0));
    let y_minus_one = s.sub(y, scalar_like(s, y, 1.0)?)?;
    let gx = s.mul(s.mul(g, y)?, build(s, "Pow", &[x, y_minus_one], NO_ATTRS)?)?;
    let positive = build(s, "Greater", &[x, scalar_like(s, x, 0.0)?], NO_ATTRS)?;
    let safe_x = select(s, positive, x, s.unary("OnesLike", x)?)?;
    let log_x = select(s, positive, s.unary("Log", safe_x)?, s.unary("ZerosLike", x)?)?;
    let gy = s.mul(s.mul(g, z)?, log_x)?;
    binary(ctx, gx, gy)
}

/// `x mod y = x − floor(x / y)·y`: `g` to `x`, `−g·floor(x / y)` to `y`.
fn floor_mod_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let quotient = build(s, "FloorDiv", &[ctx.input(0), ctx.input(1)], NO_ATTRS)?;
    let gy = s.mul(s.unary("Neg", g)?, quotient)?;
    binary(ctx, g, gy)
}

/// `g` where `x > 0`, else `alpha·g` (TensorFlow's `LeakyReluGrad`).
fn leaky_relu_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None]) };
    let alpha = match ctx.node.attrs.attr_value("alpha") {
        Some(Value::F(a)) => *a as f64,
        _ => 0.2,
    };
    let s = &ctx.scope;
    let x = ctx.input(0);
    let positive = build(s, "Greater", &[x, scalar_like(s, x, 0.0)?], NO_ATTRS)?;
    let scaled = s.mul(g, scalar_like(s, g, alpha)?)?;
    Ok(vec![Some(select(s, positive, g, scaled)?)])
}
