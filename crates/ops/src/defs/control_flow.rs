//! TensorFlow 1 control flow: `Switch`/`Merge` conditionals and `Enter`/`Exit`/
//! `NextIteration`/`LoopCond` loop frames. No kernels: the executors run these ops themselves
//! (`ferroflow-runtime`'s `executor.rs` for conditionals, `dynamic.rs` for loops).
use ferroflow_graph::{Output, ShapeError};
use ferroflow_tensor::Shape;

use crate::facts::ControlFlow;
use crate::gradient::{build, g0, GradCtx, GradResult, NO_ATTRS};
use crate::registry::{op, OpDef};
use crate::shape_inference::{self as s, InferCtx};
use crate::{Ops, RawOps};

const WHILE_CONTEXT: &str =
    "TensorFlow 1 while loops are differentiated through their WhileContext, which ferroflow's autodiff does not build yet";

/// The control-flow ops.
pub fn defs() -> Vec<OpDef> {
    vec![
        op("Switch")
            .input("data: T")
            .input("pred: bool")
            .output("output_false: T")
            .output("output_true: T")
            .attr("T: type")
            .shape(switch)
            .control_flow(ControlFlow::Switch)
            .gradient(switch_grad)
            .build(),
        op("Merge")
            .input("inputs: N * T")
            .output("output: T")
            .output("value_index: int32")
            .attr("T: type")
            .attr("N: int >= 1")
            .shape(merge)
            .control_flow(ControlFlow::Merge)
            .gradient(merge_grad)
            .build(),
        op("Enter")
            .input("data: T")
            .output("output: T")
            .attr("T: type")
            .attr("frame_name: string")
            .attr("is_constant: bool = false")
            .attr("parallel_iterations: int = 10")
            .shape(s::unchanged)
            .control_flow(ControlFlow::Enter)
            .gradient_unavailable(WHILE_CONTEXT)
            .build(),
        op("Exit")
            .input("data: T")
            .output("output: T")
            .attr("T: type")
            .shape(s::unchanged)
            .control_flow(ControlFlow::Exit)
            .gradient_unavailable(WHILE_CONTEXT)
            .build(),
        op("NextIteration")
            .input("data: T")
            .output("output: T")
            .attr("T: type")
            .shape(s::unchanged)
            .control_flow(ControlFlow::NextIteration)
            .gradient_unavailable(WHILE_CONTEXT)
            .build(),
        op("LoopCond")
            .input("input: bool")
            .output("output: bool")
            .shape(s::unchanged)
            .control_flow(ControlFlow::LoopCond)
            .not_differentiable("the loop's predicate (TensorFlow's gradient is None)")
            .build(),
    ]
}

/// `Switch`: both outputs have the data's shape.
fn switch(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    Ok(vec![c.inputs[0].clone(), c.inputs[0].clone()])
}

/// `Merge`: the inputs' shape when they all agree, else unknown (a loop's back edge is not
/// known yet, and loop variables may change shape); and the scalar `value_index`.
fn merge(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let first = &c.inputs[0];
    let rank = first.rank();
    let out = match first.dims() {
        Some(d0) if c.inputs.iter().all(|s| s.rank() == rank) => {
            // Same rank: keep each dimension the inputs agree on.
            let dims = (0..d0.len())
                .map(|i| {
                    let v = d0[i];
                    c.inputs.iter().all(|s| s.dims().is_some_and(|d| d[i] == v)).then_some(v).flatten()
                })
                .collect();
            Shape::new(dims)
        }
        _ => Shape::unknown(),
    };
    Ok(vec![out, Shape::scalar()])
}

/// `Switch`: the gradients of both outputs merged (only the taken branch's is live); an
/// output without a gradient contributes zeros guarded by the same switch output.
fn switch_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let s = &ctx.scope;
    let mut g = [None, None];
    for (i, slot) in g.iter_mut().enumerate() {
        *slot = Some(match gs.get(i).copied().flatten() {
            Some(x) => x,
            None => s.unary("ZerosLike", ctx.output(i))?,
        });
    }
    let merged = s.merge(&[g[0].expect("set"), g[1].expect("set")])?;
    Ok(vec![Some(merged[0]), None])
}

/// `Merge` of two inputs (a `cond`): the gradient goes back to the input that was taken,
/// switched on the merge's `value_index`.
fn merge_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let n = ctx.node.inputs.len();
    let Some(g) = g0(gs) else { return Ok(vec![None; n]) };
    if n != 2 {
        return Err(ctx.unsupported(format!("only two-input Merges (cond) are differentiable, this one has {n}")));
    }
    let s = &ctx.scope;
    let one = s.scalar(1i32)?;
    let taken_second = build(s, "Equal", &[ctx.output(1), one], NO_ATTRS)?;
    let switched = s.switch(g, taken_second)?;
    Ok(vec![Some(switched[0]), Some(switched[1])])
}
