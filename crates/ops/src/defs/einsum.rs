//! `Einsum`.
use crate::registry::{op, OpDef};

/// The einsum op.
pub fn defs() -> Vec<OpDef> {
    vec![op("Einsum")
        .input("inputs: N * T")
        .output("output: T")
        .attr("equation: string")
        .attr("N: int >= 1")
        .attr("T: type")
        .grows()
        .gradient_unavailable("TensorFlow differentiates it with einsums of the gradient; not implemented yet")
        .build()]
}
