//! Collective ops (TensorFlow's V2 forms, the ones `tf.distribute` and
//! `CollectiveOpsV2` build): every rank of the process group runs the same op, and the
//! kernel (`ferroflow-kernels`' `collective.rs`) combines the ranks' tensors through
//! `ferroflow-collective`'s world (MPI under `mpirun`, one rank otherwise). The group is the
//! whole world: `group_size` must equal its size. Stateful (they communicate), so never
//! folded, merged or pruned as duplicates.
use ferroflow_graph::ShapeError;
use ferroflow_tensor::Shape;

use crate::registry::{op, OpBuilder, OpDef};
use crate::shape_inference::{self as s, int_values, InferCtx, Known};

const NO_GRADIENT: &str = "TensorFlow registers no gradient for collectives: reduce the gradients instead";

fn group(b: OpBuilder) -> OpBuilder {
    b.input("group_size: int32")
        .input("group_key: int32")
        .input("instance_key: int32")
        .attr("communication_hint: string = 'auto'")
        .attr("timeout_seconds: float = 0")
        .stateful()
        .gradient_unavailable(NO_GRADIENT)
}

/// `CollectiveGatherV2`: the ranks' inputs concatenated along dimension 0 (so dimension 0
/// is `group_size` times the input's when the group size is a known constant).
fn gather_shape(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let Some(dims) = c.inputs[0].dims() else { return Ok(vec![Shape::unknown()]) };
    if dims.is_empty() {
        return Err("CollectiveGatherV2 needs an input of rank 1 or more (it concatenates along dimension 0)".into());
    }
    let size = match c.known.get(1) {
        Some(Some(Known::Value(t))) => int_values(t).and_then(|v| v.first().copied()),
        _ => None,
    };
    let mut out = dims.to_vec();
    out[0] = match (out[0], size) {
        (Some(d), Some(g)) if g > 0 => Some(d * g as usize),
        _ => None,
    };
    Ok(vec![Shape::new(out)])
}

/// The collective ops.
pub fn defs() -> Vec<OpDef> {
    vec![
        group(
            op("CollectiveReduceV2")
                .input("input: T")
                .output("data: T")
                .attr("T: {bfloat16, float, half, double, int32, int64}")
                .attr("merge_op: {'Min', 'Max', 'Mul', 'Add'}")
                .attr("final_op: {'Id', 'Div'}")
                .attr("Nordering_token: int >= 0 = 0")
                .attr("max_subdivs_per_device: int = -1")
                .attr("is_stateless: bool = false"),
        )
        .input("ordering_token: Nordering_token * resource")
        .shape(s::unchanged)
        .build(),
        group(
            op("CollectiveGatherV2")
                .input("input: T")
                .output("data: T")
                .attr("T: {float, half, double, int32, int64}")
                .attr("Nordering_token: int >= 0 = 0")
                .attr("is_stateless: bool = false"),
        )
        .input("ordering_token: Nordering_token * resource")
        .shape(gather_shape)
        .build(),
        group(
            op("CollectiveBcastSendV2")
                .input("input: T")
                .output("data: T")
                .attr("T: {bool, float, half, double, int32, int64}"),
        )
        .shape(s::unchanged)
        .build(),
        group(
            op("CollectiveBcastRecvV2")
                .output("data: T")
                .attr("T: {bool, float, half, double, int32, int64}")
                .attr("Tshape: {int32, int64} = DT_INT32"),
        )
        .input("shape: Tshape")
        .shape(|c| Ok(vec![c.shape_value(3)]))
        .build(),
    ]
}
