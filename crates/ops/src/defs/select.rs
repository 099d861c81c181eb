//! `Select` (TensorFlow 1), `SelectV2` (broadcasting), `AddN`.
use ferroflow_graph::{Output, ShapeError};
use ferroflow_proto::attr;
use ferroflow_tensor::Shape;

use crate::gradient::{build, g0, reduce_like, GradCtx, GradResult};
use crate::registry::{op, OpBuilder, OpDef};
use crate::shape_inference::InferCtx;
use crate::Ops;

fn select_op(name: &str) -> OpBuilder {
    op(name).input("condition: bool").input("t: T").input("e: T").output("output: T").attr("T: type")
}

/// The selection ops and `AddN`.
pub fn defs() -> Vec<OpDef> {
    vec![
        select_op("Select").shape(select).gradient(select_grad).build(),
        select_op("SelectV2").shape(select_v2).gradient(select_v2_grad).build(),
        op("AddN")
            .input("inputs: N * T")
            .output("sum: T")
            .attr("N: int >= 1")
            .attr("T: type")
            .shape(crate::shape_inference::unchanged)
            .commutative()
            .forwards_single_input()
            .gradient(add_n_grad)
            .build(),
    ]
}

/// `SelectV2`: the broadcast of condition, then and else.
fn select_v2(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let te = c.inputs[1]
        .broadcast(&c.inputs[2])
        .ok_or_else(|| format!("shapes {} and {} are incompatible for broadcasting", c.inputs[1], c.inputs[2]))?;
    let all = c.inputs[0]
        .broadcast(&te)
        .ok_or_else(|| format!("condition shape {} does not broadcast with {te}", c.inputs[0]))?;
    Ok(vec![all])
}

/// `Select` (v1): `t` and `e` have one shape; the condition matches it or is a vector over
/// its first dimension.
fn select(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let (cond, t, e) = (&c.inputs[0], &c.inputs[1], &c.inputs[2]);
    if let (Some(td), Some(ed)) = (t.dims(), e.dims()) {
        let same = td.len() == ed.len() && td.iter().zip(ed).all(|(a, b)| a.is_none() || b.is_none() || a == b);
        if !same {
            return Err(format!("'then' and 'else' must have the same shape, got {t} and {e}").into());
        }
    }
    if let (Some(cd), Some(td)) = (cond.dims(), t.dims()) {
        let row_vector = cd.len() == 1 && !td.is_empty();
        if cd.len() != td.len() && !row_vector {
            return Err(format!("condition shape {cond} must equal {t} or be a vector over its first dimension").into());
        }
    }
    Ok(vec![if t.rank().is_some() { t.clone() } else { e.clone() }])
}

/// The gradient split by the same condition: to `t` where it holds, to `e` elsewhere.
fn split_by_condition(ctx: &GradCtx, g: Output) -> Result<(Output, Output), crate::BuildError> {
    let s = &ctx.scope;
    let c = ctx.input(0);
    let zeros = s.unary("ZerosLike", g)?;
    let t = attr::dtype(s.dtype(g));
    let pick = |a: Output, b: Output| build(s, &ctx.node.op, &[c, a, b], &[("T", t.clone())]);
    Ok((pick(g, zeros)?, pick(zeros, g)?))
}

fn select_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None, None]) };
    let (gt, ge) = split_by_condition(ctx, g)?;
    Ok(vec![None, Some(gt), Some(ge)])
}

/// As `Select`, each part summed back to its operand's shape (undoing broadcasting).
fn select_v2_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None, None]) };
    let (gt, ge) = split_by_condition(ctx, g)?;
    let (t, e) = (ctx.input(1), ctx.input(2));
    Ok(vec![None, Some(reduce_like(ctx, gt, t, ctx.output(0))?), Some(reduce_like(ctx, ge, e, ctx.output(0))?)])
}

fn add_n_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    Ok(vec![g0(gs); ctx.node.inputs.len()])
}
