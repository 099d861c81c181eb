//! Input-pipeline ops: a Session graph pulls batches from a ferroflow `Dataset` through
//! TensorFlow's iterator ops. `IteratorV2` names an iterator resource (`shared_name`) that the
//! program attaches a dataset to (`Dataset::attach_iterator`); each run of `IteratorGetNext`
//! takes the next element, and the end of the data is an out-of-range error ("End of
//! sequence"), as in TensorFlow.
use ferroflow_tensor::Shape;

use crate::registry::{op, OpDef};
use crate::shape_inference as s;

/// The iterator ops.
pub fn defs() -> Vec<OpDef> {
    vec![
        op("IteratorV2")
            .output("handle: resource")
            .attr("shared_name: string")
            .attr("container: string")
            .attr("output_types: list(type) >= 1")
            .attr("output_shapes: list(shape) >= 1")
            .stateful()
            .owns_shared_state()
            .shape(s::scalar)
            .not_differentiable("an iterator's handle")
            .build(),
        op("IteratorToStringHandle")
            .input("resource_handle: resource")
            .output("string_handle: string")
            .shape(s::scalar)
            .not_differentiable("an iterator's name")
            .build(),
        op("IteratorGetNext")
            .input("iterator: resource")
            .output("components: output_types")
            .attr("output_types: list(type) >= 1")
            .attr("output_shapes: list(shape) >= 1")
            .stateful()
            .shape(|c| {
                let shapes = c.shapes("output_shapes");
                Ok((0..c.num_outputs).map(|i| shapes.get(i).cloned().unwrap_or_else(Shape::unknown)).collect())
            })
            .not_differentiable("its values come from the input pipeline")
            .build(),
    ]
}
