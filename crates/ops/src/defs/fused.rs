//! Ops the optimizer's fusion passes create: TensorFlow's `_FusedMatMul` and `_FusedConv2D`
//! (same signatures, so TensorFlow's own optimized graphs import), and ferroflow's
//! `_FusedElementwise` (a program of elementwise ops over N inputs) and
//! `_FusedDepthwiseConv2dElementwise` and `_FusedConv2DElementwise` (a convolution with such a
//! program applied to its output while it is in cache).
use crate::registry::{op, OpDef};
use crate::shape_inference as s;

const AFTER_GRADIENTS: &str =
    "made by the optimizer after gradients are built (TensorFlow registers no gradient either): differentiate the unfused ops";

/// The fused ops.
pub fn defs() -> Vec<OpDef> {
    vec![
        op("_FusedMatMul")
            .contraction()
            .input("a: T")
            .input("b: T")
            .input("args: num_args * T")
            .output("product: T")
            .attr("transpose_a: bool = false")
            .attr("transpose_b: bool = false")
            .attr("T: {bfloat16, half, float, double}")
            .attr("num_args: int >= 0")
            .attr("fused_ops: list(string) = []")
            .attr("epsilon: float = 0.0001")
            .attr("leakyrelu_alpha: float = 0.2")
            .shape(super::matmul::matmul)
            .gradient_unavailable(AFTER_GRADIENTS)
            .build(),
        op("_FusedConv2D")
            .contraction()
            .input("input: T")
            .input("filter: T")
            .input("args: TArgs")
            .input("host_args: num_host_args * float")
            .output("output: T")
            .attr("T: {half, float, double, int8}")
            .attr("TArgs: list(type) >= 1")
            .attr("num_args: int >= 0")
            .attr("num_host_args: int >= 0 = 0")
            .attr("strides: list(int)")
            .attr("padding: {'SAME', 'VALID', 'EXPLICIT'}")
            .attr("explicit_paddings: list(int) = []")
            .attr("data_format: {'NHWC', 'NCHW', 'NCHW_VECT_C'} = 'NHWC'")
            .attr("filter_format: {'HWIO', 'OIHW', 'OIHW_VECT_I'} = 'HWIO'")
            .attr("dilations: list(int) = [1, 1, 1, 1]")
            .attr("use_cudnn_on_gpu: bool = true")
            .attr("fused_ops: list(string) = []")
            .attr("epsilon: float = 0.0001")
            .attr("leakyrelu_alpha: float = 0.2")
            .shape(super::conv::conv2d)
            .gradient_unavailable(AFTER_GRADIENTS)
            .build(),
        op("_FusedElementwise")
            .input("args: N * T")
            .output("y: T")
            .attr("T: {float, double}")
            .attr("N: int >= 1")
            .attr("program: list(string)")
            .shape(s::broadcast_all)
            .gradient_unavailable(AFTER_GRADIENTS)
            .build(),
        // ferroflow's: a depthwise convolution whose output rows go through an elementwise
        // program while they are in cache (`a0` = the convolution's output, `aK` = args[K-1],
        // each a per-channel vector or a scalar) — a frozen BatchNormalization and its
        // activation after MobileNet's depthwise convolutions.
        op("_FusedDepthwiseConv2dElementwise")
            .contraction()
            .input("input: T")
            .input("filter: T")
            .input("args: N * T")
            .output("output: T")
            .attr("T: {float, double}")
            .attr("N: int >= 0")
            .attr("program: list(string)")
            .attrs(super::conv::DEPTHWISE_ATTRS)
            .shape(super::conv::depthwise_conv2d_elementwise)
            .gradient_unavailable(AFTER_GRADIENTS)
            .build(),
        // ferroflow's: a convolution whose output goes through an elementwise program block by
        // block while it is in cache (`a0` = the convolution's output, `aK` = args[K-1]: a
        // per-channel vector, a scalar or a tensor of the output's shape, anything else
        // broadcast after the convolution) — frozen BatchNormalization, the activation and
        // ResNet's residual join — then, with `max_pool = [ph, pw]`, a `MaxPool` of ph×pw
        // windows at strides of the window (VALID): the output is the pooled one. An empty
        // program is none. A `prologue` program runs on the input first (`a0` = the input,
        // `aK` = the K-th of the last `prologue_args` args, each a per-channel vector of the
        // input or a scalar) — a pre-activation BatchNormalization + ReLU before a pointwise
        // convolution, applied to each block of input rows in cache.
        op("_FusedConv2DElementwise")
            .contraction()
            .input("input: T")
            .input("filter: T")
            .input("args: N * T")
            .output("output: T")
            .attr("T: {float, double}")
            .attr("N: int >= 0")
            .attr("program: list(string)")
            .attr("max_pool: list(int) = []")
            .attr("prologue: list(string) = []")
            .attr("prologue_args: int = 0")
            .attrs(super::conv::DEPTHWISE_ATTRS)
            .shape(super::conv::conv2d_elementwise)
            .gradient_unavailable(AFTER_GRADIENTS)
            .build(),
    ]
}
