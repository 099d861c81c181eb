//! Comparisons and logical ops: elementwise with broadcasting, giving bools.
use crate::facts::Involution;
use crate::registry::{op, OpBuilder, OpDef};
use crate::shape_inference as s;

const BOOLEAN: &str = "its output is boolean";

fn compare(name: &str) -> OpBuilder {
    op(name)
        .input("x: T")
        .input("y: T")
        .output("z: bool")
        .attr("T: type")
        .shape(s::broadcast)
        .not_differentiable(BOOLEAN)
}

/// `LogicalAnd`, `LogicalOr`.
fn logical(name: &str) -> OpDef {
    op(name)
        .input("x: bool")
        .input("y: bool")
        .output("z: bool")
        .shape(s::broadcast)
        .commutative()
        .not_differentiable(BOOLEAN)
        .build()
}

/// The comparison and logical ops.
pub fn defs() -> Vec<OpDef> {
    vec![
        compare("Equal").attr("incompatible_shape_error: bool = true").commutative().build(),
        compare("NotEqual").attr("incompatible_shape_error: bool = true").commutative().build(),
        compare("Greater").build(),
        compare("GreaterEqual").build(),
        compare("Less").build(),
        compare("LessEqual").build(),
        logical("LogicalAnd"),
        logical("LogicalOr"),
        op("LogicalNot")
            .input("x: bool")
            .output("y: bool")
            .shape(s::unchanged)
            .involution(Involution::Exact)
            .not_differentiable(BOOLEAN)
            .build(),
    ]
}
