//! Resource variables: handles, reads, assignments. TensorFlow 1's ref-variable ops are
//! declared here as the ref forms of the ops that run them (see [`crate::ref_vars`]).
use ferroflow_proto::attr_value::Value;
use ferroflow_tensor::Shape;

use crate::registry::{op, OpBuilder, OpDef};
use crate::shape_inference::{self as s, Known};

const NO_OUTPUTS: &str = "it has no outputs: it changes the variable";

fn assignment(name: &str) -> OpBuilder {
    op(name)
        .input("resource: resource")
        .input("value: dtype")
        .attr("dtype: type")
        .stateful()
        .shape(s::no_outputs)
        .not_differentiable(NO_OUTPUTS)
}

/// The variable ops.
pub fn defs() -> Vec<OpDef> {
    vec![
        op("VarHandleOp")
            .output("resource: resource")
            .attr("container: string = ''")
            .attr("shared_name: string = ''")
            .attr("debug_name: string = ''")
            .attr("dtype: type")
            .attr("shape: shape")
            .attr("allowed_devices: list(string) = []")
            .stateful()
            .owns_shared_state()
            .shape(s::scalar)
            .known(|c| match c.def.attr(c.attrs, "shape").and_then(|v| v.value.as_ref()) {
                Some(Value::Shape(p)) => Some(Known::Handle(ferroflow_proto::convert::shape_from_proto(p))),
                _ => None,
            })
            .ref_form("VariableV2", 0)
            .ref_form("Variable", 0)
            .not_differentiable("a variable's handle: it has no inputs (gradients are taken for it)")
            .build(),
        op("ReadVariableOp")
            .input("resource: resource")
            .output("value: dtype")
            .attr("dtype: type")
            .stateful()
            .shape(|c| Ok(vec![c.handle_shape(0).cloned().unwrap_or_else(Shape::unknown)]))
            // The gradient of a read is the gradient of the variable (its handle).
            .gradient(crate::gradient::identity)
            .build(),
        op("VarIsInitializedOp")
            .input("resource: resource")
            .output("is_initialized: bool")
            .stateful()
            .shape(s::scalar)
            .ref_form("IsVariableInitialized", 1)
            .not_differentiable("its output is boolean")
            .build(),
        assignment("AssignVariableOp").attr("validate_shape: bool = false").ref_form("Assign", 1).build(),
        assignment("AssignAddVariableOp").ref_form("AssignAdd", 1).build(),
        assignment("AssignSubVariableOp").ref_form("AssignSub", 1).build(),
    ]
}
