//! Checkpoint I/O: TensorFlow's V2 saver ops (a tensor bundle at `prefix`).
use crate::registry::{op, OpDef};
use crate::shape_inference as s;

/// The checkpoint ops.
pub fn defs() -> Vec<OpDef> {
    vec![
        op("SaveV2")
            .input("prefix: string")
            .input("tensor_names: string")
            .input("shape_and_slices: string")
            .input("tensors: dtypes")
            .attr("dtypes: list(type) >= 1")
            .stateful()
            .shape(s::no_outputs)
            .not_differentiable("it has no outputs: it writes a checkpoint")
            .build(),
        op("RestoreV2")
            .input("prefix: string")
            .input("tensor_names: string")
            .input("shape_and_slices: string")
            .output("tensors: dtypes")
            .attr("dtypes: list(type) >= 1")
            .stateful()
            .not_differentiable("its values come from a file")
            .build(),
    ]
}
