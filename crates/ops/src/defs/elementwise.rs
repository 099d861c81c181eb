//! Elementwise ops: a scalar function applied to each element (unary) or to each pair of
//! elements under NumPy broadcasting (binary). [`UnaryFn`] and [`BinaryFn`] are the one list
//! of them: the kernels map each variant to its scalar function (an exhaustive `match` in
//! `ferroflow-kernels`' `elementwise.rs`), the elementwise fuser fuses exactly these ops, and
//! the tests check each fused form against its kernel.
use ferroflow_graph::Output;

use crate::facts::{Elementwise, Involution, Neutral, Side};
use crate::gradient::{binary, build, g0, reduce_like, scalar_like, select, GradCtx, GradResult, NO_ATTRS};
use crate::registry::{op, OpDef};
use crate::shape_inference as s;
use crate::{Ops, RawOps};

/// The scalar function of a unary elementwise op (each variant is the op of the same name).
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryFn {
    Abs,
    Neg,
    Square,
    Sqrt,
    Rsqrt,
    Exp,
    Log,
    Tanh,
    Sigmoid,
    Relu,
    Relu6,
    Elu,
    Selu,
    Softplus,
    Softsign,
    Erf,
    Erfc,
    Sign,
    Floor,
    Ceil,
    Round,
    Reciprocal,
    Log1p,
    Expm1,
    Sin,
    Cos,
}

/// The scalar function of a binary elementwise op (each variant is the op of the same name;
/// `AddV2` and TensorFlow 1's `Add` share [`BinaryFn::Add`]).
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryFn {
    Add,
    Sub,
    Mul,
    RealDiv,
    Maximum,
    Minimum,
    SquaredDifference,
    Xlogy,
    Xdivy,
    DivNoNan,
}

fn unary(name: &str, f: UnaryFn) -> crate::registry::OpBuilder {
    op(name).input("x: T").output("y: T").attr("T: type").shape(s::unchanged).elementwise(Elementwise::Unary(f))
}

/// Activations take `features` and give `activations`, as in TensorFlow.
fn activation(name: &str, f: UnaryFn) -> crate::registry::OpBuilder {
    op(name)
        .input("features: T")
        .output("activations: T")
        .attr("T: type")
        .shape(s::unchanged)
        .elementwise(Elementwise::Unary(f))
}

fn binary_op(name: &str, f: BinaryFn) -> crate::registry::OpBuilder {
    op(name)
        .input("x: T")
        .input("y: T")
        .output("z: T")
        .attr("T: type")
        .shape(s::broadcast)
        .elementwise(Elementwise::Binary(f))
}

const PIECEWISE_CONSTANT: &str = "piecewise constant: its gradient is zero almost everywhere (TensorFlow's is None)";

/// The elementwise ops.
pub fn defs() -> Vec<OpDef> {
    use BinaryFn as B;
    use UnaryFn as U;
    vec![
        unary("Abs", U::Abs).gradient(abs_grad).build(),
        unary("Neg", U::Neg).involution(Involution::Exact).gradient(neg_grad).build(),
        unary("Square", U::Square).gradient(square_grad).build(),
        unary("Sqrt", U::Sqrt).gradient(sqrt_grad).build(),
        unary("Rsqrt", U::Rsqrt).gradient(rsqrt_grad).build(),
        unary("Exp", U::Exp).gradient(exp_grad).build(),
        unary("Log", U::Log).gradient(log_grad).build(),
        unary("Tanh", U::Tanh).activation().gradient(tanh_grad).build(),
        unary("Sigmoid", U::Sigmoid).activation().gradient(sigmoid_grad).build(),
        activation("Relu", U::Relu).activation().gradient(relu_grad).build(),
        activation("Relu6", U::Relu6).activation().gradient(relu6_grad).build(),
        activation("Elu", U::Elu).activation().gradient(elu_grad).build(),
        activation("Selu", U::Selu).gradient(selu_grad).build(),
        activation("Softplus", U::Softplus).gradient(softplus_grad).build(),
        activation("Softsign", U::Softsign).gradient(softsign_grad).build(),
        unary("Erf", U::Erf).gradient(erf_grad).build(),
        unary("Erfc", U::Erfc).gradient(erfc_grad).build(),
        unary("Sign", U::Sign).gradient(sign_grad).build(),
        unary("Floor", U::Floor).not_differentiable(PIECEWISE_CONSTANT).build(),
        unary("Ceil", U::Ceil).not_differentiable(PIECEWISE_CONSTANT).build(),
        unary("Round", U::Round).not_differentiable(PIECEWISE_CONSTANT).build(),
        unary("Reciprocal", U::Reciprocal).involution(Involution::Inexact).gradient(reciprocal_grad).build(),
        unary("Log1p", U::Log1p).gradient(log1p_grad).build(),
        unary("Expm1", U::Expm1).gradient(expm1_grad).build(),
        unary("Sin", U::Sin).gradient(sin_grad).build(),
        unary("Cos", U::Cos).gradient(cos_grad).build(),
        binary_op("Add", B::Add).commutative().neutral(Neutral::NegZero, Side::Both).gradient(add_grad).build(),
        binary_op("AddV2", B::Add)
            .node_name("add")
            .commutative()
            .neutral(Neutral::NegZero, Side::Both)
            .gradient(add_grad)
            .build(),
        binary_op("Sub", B::Sub).node_name("sub").neutral(Neutral::PosZero, Side::Right).gradient(sub_grad).build(),
        binary_op("Mul", B::Mul)
            .node_name("mul")
            .commutative()
            .neutral(Neutral::One, Side::Both)
            .gradient(mul_grad)
            .build(),
        binary_op("RealDiv", B::RealDiv)
            .node_name("truediv")
            .neutral(Neutral::One, Side::Right)
            .gradient(real_div_grad)
            .build(),
        binary_op("Maximum", B::Maximum).commutative().gradient(maximum_grad).build(),
        binary_op("Minimum", B::Minimum).commutative().gradient(minimum_grad).build(),
        binary_op("SquaredDifference", B::SquaredDifference).commutative().gradient(squared_difference_grad).build(),
        binary_op("Xlogy", B::Xlogy).gradient(xlogy_grad).build(),
        binary_op("Xdivy", B::Xdivy).gradient(xdivy_grad).build(),
        binary_op("DivNoNan", B::DivNoNan).gradient(div_no_nan_grad).build(),
    ]
}

/// `f(g)` for the first output's gradient, or no gradient.
fn map_g0(
    ctx: &GradCtx,
    gs: &[Option<Output>],
    f: impl FnOnce(&GradCtx, Output) -> Result<Output, crate::BuildError>,
) -> GradResult {
    Ok(vec![g0(gs).map(|g| f(ctx, g)).transpose()?])
}

fn abs_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    map_g0(ctx, gs, |c, g| c.scope.mul(g, c.scope.unary("Sign", c.input(0))?))
}

fn neg_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    map_g0(ctx, gs, |c, g| c.scope.unary("Neg", g))
}

fn square_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    map_g0(ctx, gs, |c, g| {
        let (s, x) = (&c.scope, c.input(0));
        s.mul(g, s.mul(scalar_like(s, x, 2.0)?, x)?)
    })
}

fn sqrt_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    map_g0(ctx, gs, |c, g| {
        let (s, y) = (&c.scope, c.output(0));
        s.real_div(s.mul(g, scalar_like(s, y, 0.5)?)?, y)
    })
}

/// `d/dx x^(-1/2) = -y³ / 2`.
fn rsqrt_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    map_g0(ctx, gs, |c, g| {
        let (s, y) = (&c.scope, c.output(0));
        let cube = s.mul(s.unary("Square", y)?, y)?;
        s.mul(g, s.mul(scalar_like(s, y, -0.5)?, cube)?)
    })
}

fn exp_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    map_g0(ctx, gs, |c, g| c.scope.mul(g, c.output(0)))
}

fn log_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    map_g0(ctx, gs, |c, g| c.scope.real_div(g, c.input(0)))
}

fn tanh_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    map_g0(ctx, gs, |c, g| build(&c.scope, "TanhGrad", &[c.output(0), g], NO_ATTRS))
}

fn sigmoid_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    map_g0(ctx, gs, |c, g| build(&c.scope, "SigmoidGrad", &[c.output(0), g], NO_ATTRS))
}

fn relu_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    map_g0(ctx, gs, |c, g| build(&c.scope, "ReluGrad", &[g, c.output(0)], NO_ATTRS))
}

fn relu6_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    map_g0(ctx, gs, |c, g| build(&c.scope, "Relu6Grad", &[g, c.input(0)], NO_ATTRS))
}

/// `g * (y + 1)` where `y < 0`, else `g` (TensorFlow's `EluGrad`).
fn elu_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    map_g0(ctx, gs, |c, g| {
        let (s, y) = (&c.scope, c.output(0));
        let negative = build(s, "Less", &[y, scalar_like(s, y, 0.0)?], NO_ATTRS)?;
        let slope = s.mul(g, s.add_v2(y, scalar_like(s, y, 1.0)?)?)?;
        select(s, negative, slope, g)
    })
}

/// `g * (y + scale * alpha)` where `y < 0`, else `g * scale` (TensorFlow's `SeluGrad`).
fn selu_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    const SCALE: f64 = 1.050_700_987_355_480_5;
    const ALPHA: f64 = 1.673_263_242_354_377_3;
    map_g0(ctx, gs, |c, g| {
        let (s, y) = (&c.scope, c.output(0));
        let negative = build(s, "Less", &[y, scalar_like(s, y, 0.0)?], NO_ATTRS)?;
        let below = s.mul(g, s.add_v2(y, scalar_like(s, y, SCALE * ALPHA)?)?)?;
        let above = s.mul(g, scalar_like(s, y, SCALE)?)?;
        select(s, negative, below, above)
    })
}

/// `g * sigmoid(x)` (TensorFlow's `SoftplusGrad`).
fn softplus_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    map_g0(ctx, gs, |c, g| c.scope.mul(g, c.scope.unary("Sigmoid", c.input(0))?))
}

/// `g / (1 + |x|)²`: TensorFlow's `SoftsignGrad` op.
fn softsign_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    map_g0(ctx, gs, |c, g| build(&c.scope, "SoftsignGrad", &[g, c.input(0)], NO_ATTRS))
}

/// `g * 2/√π * exp(-x²)`.
fn erf_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    map_g0(ctx, gs, |c, g| {
        let (s, x) = (&c.scope, c.input(0));
        let bell = s.unary("Exp", s.unary("Neg", s.unary("Square", x)?)?)?;
        s.mul(g, s.mul(scalar_like(s, x, std::f64::consts::FRAC_2_SQRT_PI)?, bell)?)
    })
}

/// `-g · 2/√π · exp(-x²)` (TensorFlow's `_ErfcGrad`).
fn erfc_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    map_g0(ctx, gs, |c, g| {
        let (s, x) = (&c.scope, c.input(0));
        let bell = s.unary("Exp", s.unary("Neg", s.unary("Square", x)?)?)?;
        s.mul(g, s.mul(scalar_like(s, x, -std::f64::consts::FRAC_2_SQRT_PI)?, bell)?)
    })
}

/// Zeros shaped like `x`, as TensorFlow's `_SignGrad` returns.
fn sign_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    map_g0(ctx, gs, |c, _| c.scope.unary("ZerosLike", c.input(0)))
}

/// `-g * y²`.
fn reciprocal_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    map_g0(ctx, gs, |c, g| {
        let (s, y) = (&c.scope, c.output(0));
        s.unary("Neg", s.mul(g, s.unary("Square", y)?)?)
    })
}

fn log1p_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    map_g0(ctx, gs, |c, g| {
        let (s, x) = (&c.scope, c.input(0));
        s.real_div(g, s.add_v2(scalar_like(s, x, 1.0)?, x)?)
    })
}

fn expm1_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    map_g0(ctx, gs, |c, g| c.scope.mul(g, c.scope.unary("Exp", c.input(0))?))
}

fn sin_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    map_g0(ctx, gs, |c, g| c.scope.mul(g, c.scope.unary("Cos", c.input(0))?))
}

fn cos_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    map_g0(ctx, gs, |c, g| c.scope.mul(g, c.scope.unary("Neg", c.scope.unary("Sin", c.input(0))?)?))
}

fn add_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    binary(ctx, g, g)
}

fn sub_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let neg = ctx.scope.unary("Neg", g)?;
    binary(ctx, g, neg)
}

fn mul_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let gx = s.mul(g, ctx.input(1))?;
    let gy = s.mul(ctx.input(0), g)?;
    binary(ctx, gx, gy)
}

fn real_div_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let (x, y) = (ctx.input(0), ctx.input(1));
    let gx = s.real_div(g, y)?;
    // -g * x / y / y
    let gy = s.mul(g, s.real_div(s.real_div(s.unary("Neg", x)?, y)?, y)?)?;
    binary(ctx, gx, gy)
}

/// The gradient goes to `x` where `pick(x, y)` holds, else to `y` (TensorFlow's
/// `_MaximumMinimumGrad`: ties go to `x`).
fn select_grad(ctx: &GradCtx, gs: &[Option<Output>], pick: &str) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let (x, y) = (ctx.input(0), ctx.input(1));
    let to_x = build(s, pick, &[x, y], NO_ATTRS)?;
    let zeros = s.unary("ZerosLike", g)?;
    let gx = select(s, to_x, g, zeros)?;
    let gy = select(s, to_x, zeros, g)?;
    binary(ctx, gx, gy)
}

fn maximum_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    select_grad(ctx, gs, "GreaterEqual")
}

fn minimum_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    select_grad(ctx, gs, "LessEqual")
}

/// `2 g (x - y)` to `x` and its negation to `y`.
fn squared_difference_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let (x, y) = (ctx.input(0), ctx.input(1));
    let gx = s.mul(s.mul(scalar_like(s, g, 2.0)?, g)?, s.sub(x, y)?)?;
    let gy = s.unary("Neg", gx)?;
    Ok(vec![Some(reduce_like(ctx, gx, x, y)?), Some(reduce_like(ctx, gy, y, x)?)])
}

/// `x·log(y)` (0 where `x` is 0): `log(y)` to `x` and `x/y` to `y` where `x` is not 0, else 0
/// (TensorFlow's `_XLogyGrad`: `Xlogy(x ≠ 0, y)` and `Xdivy(x, y)`).
fn xlogy_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let (x, y) = (ctx.input(0), ctx.input(1));
    let partial_x = build(s, "Xlogy", &[nonzero(ctx, x)?, y], NO_ATTRS)?;
    let partial_y = build(s, "Xdivy", &[x, y], NO_ATTRS)?;
    binary(ctx, s.mul(partial_x, g)?, s.mul(partial_y, g)?)
}

/// `x/y` (0 where `x` is 0): `1/y` to `x` and `−x/y²` to `y` where `x` is not 0, else 0
/// (TensorFlow's `_XDivyGrad`).
fn xdivy_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let (x, y) = (ctx.input(0), ctx.input(1));
    let partial_x = build(s, "Xdivy", &[nonzero(ctx, x)?, y], NO_ATTRS)?;
    let partial_y = build(s, "Xdivy", &[s.unary("Neg", x)?, s.unary("Square", y)?], NO_ATTRS)?;
    binary(ctx, s.mul(partial_x, g)?, s.mul(partial_y, g)?)
}

/// `x/y` (0 where `y` is 0): `DivNoNan(g, y)` to `x` and `g·DivNoNan(DivNoNan(−x, y), y)` to
/// `y` (TensorFlow's `_DivNoNanGrad`).
fn div_no_nan_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let (x, y) = (ctx.input(0), ctx.input(1));
    let gx = build(s, "DivNoNan", &[g, y], NO_ATTRS)?;
    let over_y = build(s, "DivNoNan", &[s.unary("Neg", x)?, y], NO_ATTRS)?;
    let gy = s.mul(g, build(s, "DivNoNan", &[over_y, y], NO_ATTRS)?)?;
    binary(ctx, gx, gy)
}

/// 1 where `x` is not 0, else 0, in `x`'s dtype.
fn nonzero(ctx: &GradCtx, x: Output) -> Result<Output, crate::BuildError> {
    let s = &ctx.scope;
    let ne = build(s, "NotEqual", &[x, scalar_like(s, x, 0.0)?], NO_ATTRS)?;
    s.cast(ne, s.dtype(x))
}
