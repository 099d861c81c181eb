//! TensorFlow's `Optional` variant (TF2 `cond` hands its gradient the branch intermediates as
//! Optionals: `OptionalFromValue` in the taken branch, `OptionalNone` in the other).
use ferroflow_graph::{Output, ShapeError};
use ferroflow_proto::{attr, attr_value::ListValue, attr_value::Value, convert};
use ferroflow_tensor::Shape;

use crate::gradient::{build, GradCtx, GradResult};
use crate::registry::{op, OpDef};
use crate::shape_inference::{self as s, InferCtx};
use crate::Ops;

/// The Optional ops.
pub fn defs() -> Vec<OpDef> {
    vec![
        op("OptionalFromValue")
            .input("components: Toutput_types")
            .output("optional: variant")
            .attr("Toutput_types: list(type) >= 1")
            .shape(s::scalar)
            .gradient(from_value_grad)
            .build(),
        op("OptionalNone").output("optional: variant").shape(s::scalar).not_differentiable("it has no inputs").build(),
        op("OptionalGetValue")
            .input("optional: variant")
            .output("components: output_types")
            .attr("output_types: list(type) >= 1")
            .attr("output_shapes: list(shape) >= 1")
            .shape(output_shapes)
            .gradient(get_value_grad)
            .build(),
    ]
}

/// The components' shapes, as `output_shapes` declares them.
fn output_shapes(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let declared: Vec<Shape> = match c.def.attr(c.attrs, "output_shapes").and_then(|v| v.value.as_ref()) {
        Some(Value::List(l)) => l.shape.iter().map(convert::shape_from_proto).collect(),
        _ => vec![],
    };
    if declared.len() == c.num_outputs {
        Ok(declared)
    } else {
        Ok(vec![Shape::unknown(); c.num_outputs])
    }
}

/// The optional's gradient unpacked into its components' gradients.
fn from_value_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let n = ctx.node.inputs.len();
    let Some(g) = gs.first().copied().flatten() else { return Ok(vec![None; n]) };
    let s = &ctx.scope;
    let types: Vec<_> = ctx.node.inputs.iter().map(|&i| s.dtype(i)).collect();
    let shapes = ListValue {
        shape: ctx.node.inputs.iter().map(|&i| convert::shape_to_proto(&ctx.shape(i))).collect(),
        ..Default::default()
    };
    let values = build(
        s,
        "OptionalGetValue",
        &[g],
        &[("output_types", attr::dtypes(&types)), ("output_shapes", attr::list(shapes))],
    )?;
    Ok((0..n).map(|index| Some(Output { node: values.node, index })).collect())
}

/// The components' gradients packed into an optional (zeros for those that got none).
fn get_value_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    if gs.iter().all(Option::is_none) {
        return Ok(vec![None]);
    }
    let s = &ctx.scope;
    let grads = (0..ctx.node.num_outputs())
        .map(|i| match gs.get(i).copied().flatten() {
            Some(g) => Ok(g),
            None => s.unary("ZerosLike", ctx.output(i)),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let types: Vec<_> = grads.iter().map(|&g| s.dtype(g)).collect();
    Ok(vec![Some(build(s, "OptionalFromValue", &grads, &[("Toutput_types", attr::dtypes(&types))])?)])
}
