//! Stateful random ops (Philox, keyed by `seed`/`seed2`).
use crate::registry::{op, OpDef};
use crate::shape_inference as s;

/// The random ops.
pub fn defs() -> Vec<OpDef> {
    ["RandomUniform", "RandomStandardNormal", "TruncatedNormal"]
        .into_iter()
        .map(|name| {
            op(name)
                .input("shape: T")
                .output("output: dtype")
                .attr("seed: int = 0")
                .attr("seed2: int = 0")
                .attr("dtype: {half, bfloat16, float, double}")
                .attr("T: {int32, int64}")
                .stateful()
                .shape(s::shape_of_input0_value)
                .not_differentiable("random values (TensorFlow's gradient is None)")
                .build()
        })
        .collect()
}
