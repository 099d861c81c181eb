//! `Cast`.
use ferroflow_graph::Output;

use crate::gradient::{g0, GradCtx, GradResult};
use crate::registry::{op, OpDef};
use crate::shape_inference as s;
use crate::RawOps;

/// The cast op.
pub fn defs() -> Vec<OpDef> {
    vec![op("Cast")
        .input("x: SrcT")
        .output("y: DstT")
        .attr("SrcT: type")
        .attr("DstT: type")
        .attr("Truncate: bool = false")
        .shape(s::unchanged)
        .gradient(cast_grad)
        .build()]
}

/// The gradient cast back to the input's type; none for non-float inputs.
fn cast_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None]) };
    let src = ctx.scope.dtype(ctx.input(0));
    if !src.is_float() {
        return Ok(vec![None]);
    }
    Ok(vec![Some(ctx.scope.cast(g, src)?)])
}
