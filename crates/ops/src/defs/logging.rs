//! `Assert`: fails the step with its data when its condition is false (what `tf.debugging`
//! and `tf.image`'s argument checks add to graphs).
use ferroflow_tensor::Shape;

use crate::registry::{op, OpDef};
use crate::shape_inference as s;

/// The logging ops.
pub fn defs() -> Vec<OpDef> {
    vec![op("Assert")
        .input("condition: bool")
        .input("data: T")
        .attrs(&["T: list(type) >= 1", "summarize: int = 3"])
        .stateful()
        .shape(|c| match c.inputs[0].dims() {
            Some([]) | None => s::no_outputs(c),
            Some(d) => Err(format!("condition must be a scalar, got shape {}", Shape::new(d.to_vec())).into()),
        })
        .not_differentiable("it has no outputs: it checks a condition")
        .build()]
}
