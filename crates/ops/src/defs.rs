//! Definitions of every op ferroflow knows, with TensorFlow's names, argument names and attrs.
use crate::registry::{op, OpDef};
use crate::shape_inference as s;

const UNARY: &[&str] = &[
    "Abs",
    "Neg",
    "Square",
    "Sqrt",
    "Rsqrt",
    "Exp",
    "Log",
    "Tanh",
    "Sigmoid",
    "Relu",
    "Softmax",
    "LogSoftmax",
    "Relu6",
    "Elu",
    "Selu",
    "Softplus",
    "Erf",
    "Sign",
    "Floor",
    "Ceil",
    "Round",
    "Reciprocal",
    "Log1p",
    "Expm1",
    "Sin",
    "Cos",
];
const BINARY: &[&str] = &[
    "Add",
    "AddV2",
    "Sub",
    "Mul",
    "RealDiv",
    "Maximum",
    "Minimum",
    "Pow",
    "FloorMod",
    "FloorDiv",
    "SquaredDifference",
];
const COMPARE: &[&str] = &["Greater", "GreaterEqual", "Less", "LessEqual"];
const REDUCE: &[&str] = &["Sum", "Mean", "Max", "Min", "Prod"];

/// The attrs `Conv2D` and its backprop ops share.
const CONV2D_ATTRS: &[&str] = &[
    "strides: list(int)",
    "use_cudnn_on_gpu: bool = true",
    "padding: {'SAME', 'VALID', 'EXPLICIT'}",
    "explicit_paddings: list(int) = []",
    "data_format: {'NHWC', 'NCHW'} = 'NHWC'",
    "dilations: list(int) = [1, 1, 1, 1]",
];

/// All op definitions.
pub fn all() -> Vec<OpDef> {
    let mut v = vec![
        op("Const").output("output: dtype").attr("value: tensor").attr("dtype: type").shape(s::const_shape).build(),
        op("Placeholder")
            .output("output: dtype")
            .attr("dtype: type")
            .attr("shape: shape = ?")
            .shape(s::shape_attr)
            .build(),
        op("PlaceholderWithDefault")
            .input("input: dtype")
            .output("output: dtype")
            .attr("dtype: type")
            .attr("shape: shape")
            .shape(s::shape_attr)
            .build(),
        op("Identity").input("input: T").output("output: T").attr("T: type").shape(s::unchanged).build(),
        op("IdentityN").input("input: T").output("output: T").attr("T: list(type) >= 1").shape(s::pass_through).build(),
        op("NoOp").shape(s::no_outputs).build(),
        op("BiasAdd")
            .input("value: T")
            .input("bias: T")
            .output("output: T")
            .attr("T: type")
            .attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
            .shape(s::unchanged)
            .build(),
        op("ArgMax")
            .input("input: T")
            .input("dimension: Tidx")
            .output("output: output_type")
            .attr("T: type")
            .attr("Tidx: {int16, int32, int64} = DT_INT32")
            .attr("output_type: {int16, uint16, int32, int64} = DT_INT64")
            .shape(s::arg_reduce)
            .build(),
        op("Equal")
            .input("x: T")
            .input("y: T")
            .output("z: bool")
            .attr("T: type")
            .attr("incompatible_shape_error: bool = true")
            .shape(s::broadcast)
            .build(),
        op("NotEqual")
            .input("x: T")
            .input("y: T")
            .output("z: bool")
            .attr("T: type")
            .attr("incompatible_shape_error: bool = true")
            .shape(s::broadcast)
            .build(),
        op("LogicalAnd").input("x: bool").input("y: bool").output("z: bool").shape(s::broadcast).build(),
        op("LogicalOr").input("x: bool").input("y: bool").output("z: bool").shape(s::broadcast).build(),
        op("LogicalNot").input("x: bool").output("y: bool").shape(s::unchanged).build(),
        op("LeakyRelu")
            .input("features: T")
            .output("activations: T")
            .attr("alpha: float = 0.2")
            .attr("T: type")
            .shape(s::unchanged)
            .build(),
        op("Select")
            .input("condition: bool")
            .input("t: T")
            .input("e: T")
            .output("output: T")
            .attr("T: type")
            .shape(s::select)
            .build(),
        op("SelectV2")
            .input("condition: bool")
            .input("t: T")
            .input("e: T")
            .output("output: T")
            .attr("T: type")
            .shape(s::select_v2)
            .build(),
        op("AddN")
            .input("inputs: N * T")
            .output("sum: T")
            .attr("N: int >= 1")
            .attr("T: type")
            .shape(s::unchanged)
            .build(),
        op("PreventGradient")
            .input("input: T")
            .output("output: T")
            .attr("T: type")
            .attr("message: string = ''")
            .shape(s::unchanged)
            .build(),
        op("StopGradient").input("input: T").output("output: T").attr("T: type").shape(s::unchanged).build(),
        op("Snapshot").input("input: T").output("output: T").attr("T: type").shape(s::unchanged).build(),
        op("Rank").input("input: T").output("output: int32").attr("T: type").shape(s::scalar).build(),
        op("Size")
            .input("input: T")
            .output("output: out_type")
            .attr("T: type")
            .attr("out_type: {int32, int64} = DT_INT32")
            .shape(s::scalar)
            .build(),
        op("ArgMin")
            .input("input: T")
            .input("dimension: Tidx")
            .output("output: output_type")
            .attr("T: type")
            .attr("Tidx: {int16, int32, int64} = DT_INT32")
            .attr("output_type: {int16, uint16, int32, int64} = DT_INT64")
            .shape(s::arg_reduce)
            .build(),
        op("Cast")
            .input("x: SrcT")
            .output("y: DstT")
            .attr("SrcT: type")
            .attr("DstT: type")
            .attr("Truncate: bool = false")
            .shape(s::unchanged)
            .build(),
        op("Reshape")
            .input("tensor: T")
            .input("shape: Tshape")
            .output("output: T")
            .attr("T: type")
            .attr("Tshape: {int32, int64} = DT_INT32")
            .shape(s::reshape)
            .build(),
        op("Shape")
            .input("input: T")
            .output("output: out_type")
            .attr("T: type")
            .attr("out_type: {int32, int64} = DT_INT32")
            .shape(s::shape_of)
            .build(),
        op("ExpandDims")
            .input("input: T")
            .input("dim: Tdim")
            .output("output: T")
            .attr("T: type")
            .attr("Tdim: {int32, int64} = DT_INT32")
            .shape(s::expand_dims)
            .build(),
        op("Squeeze")
            .input("input: T")
            .output("output: T")
            .attr("T: type")
            .attr("squeeze_dims: list(int) >= 0 = []")
            .shape(s::squeeze)
            .build(),
        op("Fill")
            .input("dims: index_type")
            .input("value: T")
            .output("output: T")
            .attr("T: type")
            .attr("index_type: {int32, int64} = DT_INT32")
            .shape(s::fill)
            .build(),
        op("ZerosLike").input("x: T").output("y: T").attr("T: type").shape(s::unchanged).build(),
        op("OnesLike").input("x: T").output("y: T").attr("T: type").shape(s::unchanged).build(),
        op("Pack")
            .input("values: N * T")
            .output("output: T")
            .attr("N: int >= 1")
            .attr("T: type")
            .attr("axis: int = 0")
            .shape(s::pack)
            .build(),
        op("ConcatV2")
            .input("values: N * T")
            .input("axis: Tidx")
            .output("output: T")
            .attr("N: int >= 2")
            .attr("T: type")
            .attr("Tidx: {int32, int64} = DT_INT32")
            .shape(s::concat)
            .build(),
    ];
    for name in UNARY {
        let input = if name.ends_with("Softmax") { "logits: T" } else { "x: T" };
        let output = if name.ends_with("Softmax") { "softmax: T" } else { "y: T" };
        let (input, output) = match *name {
            "Relu" | "Relu6" | "Elu" | "Selu" | "Softplus" => ("features: T", "activations: T"),
            "LogSoftmax" => (input, "logsoftmax: T"),
            _ => (input, output),
        };
        v.push(op(name).input(input).output(output).attr("T: type").shape(s::unchanged).build());
    }
    v.push(
        op("Conv2D")
            .input("input: T")
            .input("filter: T")
            .output("output: T")
            .attr("T: type")
            .attrs(CONV2D_ATTRS)
            .shape(s::conv2d)
            .build(),
    );
    v.push(
        op("DepthwiseConv2dNative")
            .input("input: T")
            .input("filter: T")
            .output("output: T")
            .attr("T: type")
            .attr("strides: list(int)")
            .attr("padding: {'SAME', 'VALID', 'EXPLICIT'}")
            .attr("explicit_paddings: list(int) = []")
            .attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
            .attr("dilations: list(int) = [1, 1, 1, 1]")
            .shape(s::conv2d)
            .build(),
    );
    for name in ["MaxPool", "AvgPool"] {
        v.push(
            op(name)
                .input(if name == "MaxPool" { "input: T" } else { "value: T" })
                .output("output: T")
                .attr("T: type")
                .attr("ksize: list(int) >= 4")
                .attr("strides: list(int) >= 4")
                .attr("padding: {'SAME', 'VALID', 'EXPLICIT'}")
                .attr("explicit_paddings: list(int) = []")
                .attr("data_format: {'NHWC', 'NCHW', 'NCHW_VECT_C'} = 'NHWC'")
                .shape(s::pool)
                .build(),
        );
    }
    for (name, a, b) in [
        ("Conv2DBackpropInput", "input_sizes: int32", "filter: T"),
        ("Conv2DBackpropFilter", "input: T", "filter_sizes: int32"),
    ] {
        v.push(
            op(name)
                .input(a)
                .input(b)
                .input("out_backprop: T")
                .output("output: T")
                .attr("T: {half, bfloat16, float, double, int32}")
                .attrs(CONV2D_ATTRS)
                .shape(s::shape_from_input0_or_1)
                .build(),
        );
    }
    v.push(
        op("MaxPoolGrad")
            .input("orig_input: T")
            .input("orig_output: T")
            .input("grad: T")
            .output("output: T")
            .attr("ksize: list(int) >= 4")
            .attr("strides: list(int) >= 4")
            .attr("padding: {'SAME', 'VALID', 'EXPLICIT'}")
            .attr("explicit_paddings: list(int) = []")
            .attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
            .attr("T: {half, bfloat16, float, double, int32, int64} = DT_FLOAT")
            .shape(s::unchanged)
            .build(),
    );
    v.push(
        op("AvgPoolGrad")
            .input("orig_input_shape: int32")
            .input("grad: T")
            .output("output: T")
            .attr("ksize: list(int) >= 4")
            .attr("strides: list(int) >= 4")
            .attr("padding: {'SAME', 'VALID'}")
            .attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
            .attr("T: {half, bfloat16, float, double}")
            .shape(s::shape_from_input0)
            .build(),
    );
    v.push(
        op("FusedBatchNormV3")
            .input("x: T")
            .input("scale: U")
            .input("offset: U")
            .input("mean: U")
            .input("variance: U")
            .output("y: T")
            .output("batch_mean: U")
            .output("batch_variance: U")
            .output("reserve_space_1: U")
            .output("reserve_space_2: U")
            .output("reserve_space_3: U")
            .attr("T: type")
            .attr("U: type")
            .attr("epsilon: float = 0.0001")
            .attr("exponential_avg_factor: float = 1.0")
            .attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
            .attr("is_training: bool = true")
            .shape(s::fused_batch_norm)
            .build(),
    );
    let index = |name: &str| format!("{name}: {{int32, int64}} = DT_INT32");
    v.push(
        op("Transpose")
            .input("x: T")
            .input("perm: Tperm")
            .output("y: T")
            .attr("T: type")
            .attr(&index("Tperm"))
            .shape(s::transpose)
            .build(),
    );
    v.push(
        op("Slice")
            .input("input: T")
            .input("begin: Index")
            .input("size: Index")
            .output("output: T")
            .attr("T: type")
            .attr("Index: {int32, int64}")
            .shape(s::slice)
            .build(),
    );
    v.push(
        op("StridedSlice")
            .input("input: T")
            .input("begin: Index")
            .input("end: Index")
            .input("strides: Index")
            .output("output: T")
            .attr("T: type")
            .attr("Index: {int16, int32, int64}")
            .attr("begin_mask: int = 0")
            .attr("end_mask: int = 0")
            .attr("ellipsis_mask: int = 0")
            .attr("new_axis_mask: int = 0")
            .attr("shrink_axis_mask: int = 0")
            .build(),
    );
    v.push(
        op("Tile")
            .input("input: T")
            .input("multiples: Tmultiples")
            .output("output: T")
            .attr("T: type")
            .attr(&index("Tmultiples"))
            .build(),
    );
    v.push(
        op("Pad")
            .input("input: T")
            .input("paddings: Tpaddings")
            .output("output: T")
            .attr("T: type")
            .attr(&index("Tpaddings"))
            .build(),
    );
    v.push(
        op("PadV2")
            .input("input: T")
            .input("paddings: Tpaddings")
            .input("constant_values: T")
            .output("output: T")
            .attr("T: type")
            .attr(&index("Tpaddings"))
            .build(),
    );
    v.push(
        op("MirrorPad")
            .input("input: T")
            .input("paddings: Tpaddings")
            .output("output: T")
            .attr("T: type")
            .attr(&index("Tpaddings"))
            .attr("mode: {'REFLECT', 'SYMMETRIC'}")
            .build(),
    );
    v.push(
        op("Range")
            .input("start: Tidx")
            .input("limit: Tidx")
            .input("delta: Tidx")
            .output("output: Tidx")
            .attr("Tidx: {bfloat16, half, float, double, int8, int16, int32, int64, uint16, uint32} = DT_INT32")
            .build(),
    );
    v.push(
        op("Unpack")
            .input("value: T")
            .output("output: num * T")
            .attr("num: int >= 0")
            .attr("T: type")
            .attr("axis: int = 0")
            .build(),
    );
    v.push(
        op("Split")
            .input("axis: int32")
            .input("value: T")
            .output("output: num_split * T")
            .attr("num_split: int >= 1")
            .attr("T: type")
            .build(),
    );
    v.push(
        op("SplitV")
            .input("value: T")
            .input("size_splits: Tlen")
            .input("axis: int32")
            .output("output: num_split * T")
            .attr("num_split: int >= 1")
            .attr("T: type")
            .attr("Tlen: {int8, int32, int64} = DT_INT64")
            .build(),
    );
    v.push(
        op("GatherV2")
            .input("params: Tparams")
            .input("indices: Tindices")
            .input("axis: Taxis")
            .output("output: Tparams")
            .attr("batch_dims: int = 0")
            .attr("Tparams: type")
            .attr("Tindices: {int16, int32, int64}")
            .attr("Taxis: {int32, int64}")
            .shape(s::gather_v2)
            .build(),
    );
    v.push(
        op("GatherNd")
            .input("params: Tparams")
            .input("indices: Tindices")
            .output("output: Tparams")
            .attr("Tparams: type")
            .attr("Tindices: {int16, int32, int64}")
            .attr("bad_indices_policy: string = ''")
            .build(),
    );
    v.push(
        op("OneHot")
            .input("indices: TI")
            .input("depth: int32")
            .input("on_value: T")
            .input("off_value: T")
            .output("output: T")
            .attr("axis: int = -1")
            .attr("T: type")
            .attr("TI: {uint8, int8, int32, int64} = DT_INT64")
            .build(),
    );
    v.push(
        op("Cumsum")
            .input("x: T")
            .input("axis: Tidx")
            .output("out: T")
            .attr("exclusive: bool = false")
            .attr("reverse: bool = false")
            .attr("T: type")
            .attr(&index("Tidx"))
            .shape(s::unchanged)
            .build(),
    );
    v.push(op("Where").input("input: T").output("index: int64").attr("T: type = DT_BOOL").build());
    v.push(
        op("TopKV2")
            .input("input: T")
            .input("k: Tk")
            .output("values: T")
            .output("indices: index_type")
            .attr("sorted: bool = true")
            .attr("T: type")
            .attr(&index("Tk"))
            .attr("index_type: {int16, int32, int64} = DT_INT32")
            .build(),
    );
    v.push(
        op("BatchMatMulV2")
            .input("x: T")
            .input("y: T")
            .output("output: T")
            .attr("T: type")
            .attr("adj_x: bool = false")
            .attr("adj_y: bool = false")
            .attr("grad_x: bool = false")
            .attr("grad_y: bool = false")
            .build(),
    );
    for name in ["ResizeBilinear", "ResizeNearestNeighbor"] {
        let out = if name == "ResizeBilinear" { "resized_images: float" } else { "resized_images: T" };
        v.push(
            op(name)
                .input("images: T")
                .input("size: int32")
                .output(out)
                .attr("T: type")
                .attr("align_corners: bool = false")
                .attr("half_pixel_centers: bool = false")
                .build(),
        );
    }
    v.push(
        op("Einsum")
            .input("inputs: N * T")
            .output("output: T")
            .attr("equation: string")
            .attr("N: int >= 1")
            .attr("T: type")
            .build(),
    );
    v.push(
        op("Switch")
            .input("data: T")
            .input("pred: bool")
            .output("output_false: T")
            .output("output_true: T")
            .attr("T: type")
            .shape(s::switch)
            .build(),
    );
    v.push(
        op("Merge")
            .input("inputs: N * T")
            .output("output: T")
            .output("value_index: int32")
            .attr("T: type")
            .attr("N: int >= 1")
            .shape(s::merge)
            .build(),
    );
    v.push(
        op("Enter")
            .input("data: T")
            .output("output: T")
            .attr("T: type")
            .attr("frame_name: string")
            .attr("is_constant: bool = false")
            .attr("parallel_iterations: int = 10")
            .shape(s::unchanged)
            .build(),
    );
    v.push(op("Exit").input("data: T").output("output: T").attr("T: type").shape(s::unchanged).build());
    v.push(op("NextIteration").input("data: T").output("output: T").attr("T: type").shape(s::unchanged).build());
    v.push(op("LoopCond").input("input: bool").output("output: bool").shape(s::unchanged).build());
    for name in ["If", "StatelessIf"] {
        v.push(
            op(name)
                .input("cond: Tcond")
                .input("input: Tin")
                .output("output: Tout")
                .attr("Tcond: type")
                .attr("Tin: list(type) >= 0")
                .attr("Tout: list(type) >= 0")
                .attr("then_branch: func")
                .attr("else_branch: func")
                .attr("output_shapes: list(shape) = []")
                .build(),
        );
    }
    for name in ["While", "StatelessWhile"] {
        v.push(
            op(name)
                .input("input: T")
                .output("output: T")
                .attr("T: list(type) >= 0")
                .attr("cond: func")
                .attr("body: func")
                .attr("output_shapes: list(shape) = []")
                .attr("parallel_iterations: int = 10")
                .build(),
        );
    }
    for name in ["PartitionedCall", "StatefulPartitionedCall"] {
        v.push(
            op(name)
                .input("args: Tin")
                .output("output: Tout")
                .attr("Tin: list(type) >= 0")
                .attr("Tout: list(type) >= 0")
                .attr("f: func")
                .attr("config: string = ''")
                .attr("config_proto: string = ''")
                .attr("executor_type: string = ''")
                .build(),
        );
    }
    for name in COMPARE {
        v.push(op(name).input("x: T").input("y: T").output("z: bool").attr("T: type").shape(s::broadcast).build());
    }
    for name in ["All", "Any"] {
        v.push(
            op(name)
                .input("input: bool")
                .input("reduction_indices: Tidx")
                .output("output: bool")
                .attr("keep_dims: bool = false")
                .attr("Tidx: {int32, int64} = DT_INT32")
                .shape(s::reduce)
                .build(),
        );
    }
    for name in BINARY {
        v.push(op(name).input("x: T").input("y: T").output("z: T").attr("T: type").shape(s::broadcast).build());
    }
    for name in REDUCE {
        v.push(
            op(name)
                .input("input: T")
                .input("reduction_indices: Tidx")
                .output("output: T")
                .attr("keep_dims: bool = false")
                .attr("T: type")
                .attr("Tidx: {int32, int64} = DT_INT32")
                .shape(s::reduce)
                .build(),
        );
    }
    // TensorFlow's oneDNN build rewrites MatMul into `_MklMatMul` (same signature, plain
    // layout) in the graphs it runs, so its partition graphs hold it.
    for (name, types) in [("MatMul", "T: type"), ("_MklMatMul", "T: {bfloat16, half, float, double}")] {
        v.push(
            op(name)
                .input("a: T")
                .input("b: T")
                .output("product: T")
                .attr("transpose_a: bool = false")
                .attr("transpose_b: bool = false")
                .attr("grad_a: bool = false")
                .attr("grad_b: bool = false")
                .attr(types)
                .shape(s::matmul)
                .build(),
        );
    }
    // Cross-device transfer (the partitioner's); `_Recv`'s value comes from the `_Send` with
    // the same `tensor_name` through the executor's rendezvous.
    let transfer = |b: crate::registry::OpBuilder| {
        b.attr("tensor_name: string")
            .attr("send_device: string")
            .attr("send_device_incarnation: int")
            .attr("recv_device: string")
            .attr("client_terminated: bool = false")
            .stateful()
    };
    v.push(transfer(op("_Send").input("tensor: T").attr("T: type")).shape(s::no_outputs).build());
    v.push(transfer(op("_Recv").output("tensor: tensor_type").attr("tensor_type: type")).build());
    v.extend(gradient_helpers());
    v.extend(fused());
    v.extend(state_ops());
    v.extend(io_ops());
    v.extend(optional_ops());
    v
}

/// TensorFlow's `Optional` variant (TF2 `cond` hands its gradient the branch intermediates
/// as Optionals: `OptionalFromValue` in the taken branch, `OptionalNone` in the other).
fn optional_ops() -> Vec<OpDef> {
    vec![
        op("OptionalFromValue")
            .input("components: Toutput_types")
            .output("optional: variant")
            .attr("Toutput_types: list(type) >= 1")
            .shape(s::scalar)
            .build(),
        op("OptionalNone").output("optional: variant").shape(s::scalar).build(),
        op("OptionalGetValue")
            .input("optional: variant")
            .output("components: output_types")
            .attr("output_types: list(type) >= 1")
            .attr("output_shapes: list(shape) >= 1")
            .build(),
    ]
}

/// Checkpoint I/O: TensorFlow's V2 saver ops (a tensor bundle at `prefix`).
fn io_ops() -> Vec<OpDef> {
    vec![
        op("SaveV2")
            .input("prefix: string")
            .input("tensor_names: string")
            .input("shape_and_slices: string")
            .input("tensors: dtypes")
            .attr("dtypes: list(type) >= 1")
            .stateful()
            .shape(s::no_outputs)
            .build(),
        op("RestoreV2")
            .input("prefix: string")
            .input("tensor_names: string")
            .input("shape_and_slices: string")
            .output("tensors: dtypes")
            .attr("dtypes: list(type) >= 1")
            .stateful()
            .build(),
    ]
}

/// Resource variables, stateful random ops and optimizer updates (all stateful: never
/// folded, merged or pruned away while fetched or targeted).
fn state_ops() -> Vec<OpDef> {
    let mut v = vec![
        op("VarHandleOp")
            .output("resource: resource")
            .attr("container: string = ''")
            .attr("shared_name: string = ''")
            .attr("debug_name: string = ''")
            .attr("dtype: type")
            .attr("shape: shape")
            .attr("allowed_devices: list(string) = []")
            .stateful()
            .shape(s::scalar)
            .build(),
        op("ReadVariableOp").input("resource: resource").output("value: dtype").attr("dtype: type").stateful().build(),
        op("VarIsInitializedOp")
            .input("resource: resource")
            .output("is_initialized: bool")
            .stateful()
            .shape(s::scalar)
            .build(),
        op("AssignVariableOp")
            .input("resource: resource")
            .input("value: dtype")
            .attr("dtype: type")
            .attr("validate_shape: bool = false")
            .stateful()
            .shape(s::no_outputs)
            .build(),
    ];
    for name in ["AssignAddVariableOp", "AssignSubVariableOp"] {
        v.push(
            op(name)
                .input("resource: resource")
                .input("value: dtype")
                .attr("dtype: type")
                .stateful()
                .shape(s::no_outputs)
                .build(),
        );
    }
    for name in ["RandomUniform", "RandomStandardNormal", "TruncatedNormal"] {
        v.push(
            op(name)
                .input("shape: T")
                .output("output: dtype")
                .attr("seed: int = 0")
                .attr("seed2: int = 0")
                .attr("dtype: {half, bfloat16, float, double}")
                .attr("T: {int32, int64}")
                .stateful()
                .shape(s::shape_from_input0)
                .build(),
        );
    }
    let apply = |name: &str, vars: &[&str], args: &[&str], extra: &[&str]| {
        let mut b = op(name);
        for a in vars {
            b = b.input(&format!("{a}: resource"));
        }
        for a in args {
            b = b.input(&format!("{a}: T"));
        }
        b = b.attr("T: {half, bfloat16, float, double}").attr("use_locking: bool = false");
        for e in extra {
            b = b.attr(e);
        }
        b.stateful().shape(s::no_outputs).build()
    };
    v.push(apply("ResourceApplyGradientDescent", &["var"], &["alpha", "delta"], &[]));
    v.push(apply(
        "ResourceApplyMomentum",
        &["var", "accum"],
        &["lr", "grad", "momentum"],
        &["use_nesterov: bool = false"],
    ));
    v.push(apply(
        "ResourceApplyAdam",
        &["var", "m", "v"],
        &["beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon", "grad"],
        &["use_nesterov: bool = false"],
    ));
    v.push(apply("ResourceApplyRMSProp", &["var", "ms", "mom"], &["lr", "rho", "momentum", "epsilon", "grad"], &[]));
    v.push(apply("ResourceApplyAdagrad", &["var", "accum"], &["lr", "grad"], &["update_slots: bool = true"]));
    v.push(apply(
        "ResourceApplyAdagradV2",
        &["var", "accum"],
        &["lr", "epsilon", "grad"],
        &["update_slots: bool = true"],
    ));
    v
}

/// TensorFlow's ops that gradient graphs use.
fn gradient_helpers() -> Vec<OpDef> {
    let mut v: Vec<OpDef> = ["ReluGrad", "Relu6Grad", "SigmoidGrad", "TanhGrad"]
        .iter()
        .map(|name| {
            let (a, b) = if name.starts_with("Relu") { ("gradients: T", "features: T") } else { ("y: T", "dy: T") };
            op(name)
                .input(a)
                .input(b)
                .output("backprops: T")
                .attr("T: {half, bfloat16, float, double}")
                .shape(s::unchanged)
                .build()
        })
        .collect();
    v.push(
        op("SoftmaxCrossEntropyWithLogits")
            .input("features: T")
            .input("labels: T")
            .output("loss: T")
            .output("backprop: T")
            .attr("T: {half, bfloat16, float, double}")
            .shape(s::cross_entropy)
            .build(),
    );
    v.push(
        op("SparseSoftmaxCrossEntropyWithLogits")
            .input("features: T")
            .input("labels: Tlabels")
            .output("loss: T")
            .output("backprop: T")
            .attr("T: {half, bfloat16, float, double}")
            .attr("Tlabels: {int32, int64} = DT_INT64")
            .shape(s::cross_entropy)
            .build(),
    );
    v.push(
        op("UnsortedSegmentSum")
            .input("data: T")
            .input("segment_ids: Tindices")
            .input("num_segments: Tnumsegments")
            .output("output: T")
            .attr("T: type")
            .attr("Tindices: {int16, int32, int64}")
            .attr("Tnumsegments: {int32, int64} = DT_INT32")
            .build(),
    );
    v.push(
        op("DynamicStitch")
            .input("indices: N * int32")
            .input("data: N * T")
            .output("merged: T")
            .attr("N: int >= 1")
            .attr("T: type")
            .build(),
    );
    v.push(
        op("BiasAddGrad")
            .input("out_backprop: T")
            .output("output: T")
            .attr("T: type")
            .attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
            .build(),
    );
    v.push(
        op("BroadcastGradientArgs")
            .input("s0: T")
            .input("s1: T")
            .output("r0: T")
            .output("r1: T")
            .attr("T: {int32, int64} = DT_INT32")
            .build(),
    );
    v.push(
        op("BroadcastTo")
            .input("input: T")
            .input("shape: Tidx")
            .output("output: T")
            .attr("T: type")
            .attr("Tidx: {int32, int64} = DT_INT32")
            .shape(s::fill_like_shape)
            .build(),
    );
    v
}

/// Ops the optimizer's remapper creates: TensorFlow's `_FusedMatMul` and `_FusedConv2D`
/// (same signatures, so TensorFlow's own optimized graphs import), and ferroflow's
/// `_FusedElementwise` (a program of elementwise ops over N inputs).
fn fused() -> Vec<OpDef> {
    vec![
        op("_FusedMatMul")
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
            .shape(s::matmul)
            .build(),
        op("_FusedConv2D")
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
            .shape(s::conv2d)
            .build(),
        op("_FusedElementwise")
            .input("args: N * T")
            .output("y: T")
            .attr("T: {float, double}")
            .attr("N: int >= 1")
            .attr("program: list(string)")
            .shape(s::broadcast_all)
            .build(),
    ]
}
