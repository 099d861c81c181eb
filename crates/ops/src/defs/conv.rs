//! Convolutions (2-D and 3-D), pools, their backprops, and `FusedBatchNormV3` with its
//! gradient (NHWC, NDHWC).
use ferroflow_graph::{Output, ShapeError};
use ferroflow_tensor::Shape;

use crate::gradient::{build, g0, GradCtx, GradResult};
use crate::registry::{op, OpDef};
use crate::shape_inference::{self as s, InferCtx};
use crate::Ops;

/// The attrs `Conv2D` and its backprop ops share.
const CONV2D_ATTRS: &[&str] = &[
    "strides: list(int)",
    "use_cudnn_on_gpu: bool = true",
    "padding: {'SAME', 'VALID', 'EXPLICIT'}",
    "explicit_paddings: list(int) = []",
    "data_format: {'NHWC', 'NCHW'} = 'NHWC'",
    "dilations: list(int) = [1, 1, 1, 1]",
];

const CONV_ATTRS: &[&str] =
    &["T", "strides", "padding", "explicit_paddings", "data_format", "dilations", "use_cudnn_on_gpu"];

/// The attrs `DepthwiseConv2dNative` and its backprop ops share.
pub(crate) const DEPTHWISE_ATTRS: &[&str] = &[
    "strides: list(int)",
    "padding: {'SAME', 'VALID', 'EXPLICIT'}",
    "explicit_paddings: list(int) = []",
    "data_format: {'NHWC', 'NCHW'} = 'NHWC'",
    "dilations: list(int) = [1, 1, 1, 1]",
];

/// The attrs `Conv3D` and its backprop ops share.
const CONV3D_ATTRS: &[&str] = &[
    "T: {half, bfloat16, float, double}",
    "strides: list(int) >= 5",
    "padding: {'SAME', 'VALID'}",
    "data_format: {'NDHWC', 'NCDHW'} = 'NDHWC'",
    "dilations: list(int) = [1, 1, 1, 1, 1]",
];

const CONV3D_ATTR_NAMES: &[&str] = &["T", "strides", "padding", "data_format", "dilations"];

/// The attrs the 3-D pools and their gradients share (after `T`).
const POOL3D_ATTRS: &[&str] = &[
    "ksize: list(int) >= 5",
    "strides: list(int) >= 5",
    "padding: {'SAME', 'VALID'}",
    "data_format: {'NDHWC', 'NCDHW'} = 'NDHWC'",
];

const POOL3D_ATTR_NAMES: &[&str] = &["T", "ksize", "strides", "padding", "data_format"];

const DEPTHWISE_ATTR_NAMES: &[&str] = &["T", "strides", "padding", "explicit_paddings", "data_format", "dilations"];

/// The convolution, pooling and batch-normalization ops.
pub fn defs() -> Vec<OpDef> {
    let mut v = vec![
        op("Conv2D")
            .contraction()
            .input("input: T")
            .input("filter: T")
            .output("output: T")
            .attr("T: type")
            .attrs(CONV2D_ATTRS)
            .shape(conv2d)
            .grows()
            .gradient(conv2d_grad)
            .build(),
        op("DepthwiseConv2dNative")
            .contraction()
            .input("input: T")
            .input("filter: T")
            .output("output: T")
            .attr("T: type")
            .attrs(DEPTHWISE_ATTRS)
            .shape(depthwise_conv2d)
            .gradient(depthwise_conv2d_grad)
            .build(),
        op("DepthwiseConv2dNativeBackpropInput")
            .contraction()
            .input("input_sizes: int32")
            .input("filter: T")
            .input("out_backprop: T")
            .output("output: T")
            .attr("T: {half, bfloat16, float, double}")
            .attrs(DEPTHWISE_ATTRS)
            .shape(s::shape_of_input0_value)
            .gradient(depthwise_backprop_input_grad)
            .build(),
        op("DepthwiseConv2dNativeBackpropFilter")
            .contraction()
            .input("input: T")
            .input("filter_sizes: int32")
            .input("out_backprop: T")
            .output("output: T")
            .attr("T: {half, bfloat16, float, double}")
            .attrs(DEPTHWISE_ATTRS)
            .shape(|c| Ok(vec![c.shape_value(1)]))
            .gradient(depthwise_backprop_filter_grad)
            .build(),
    ];
    // TensorFlow's two pools differ: MaxPool has explicit paddings and a float default for
    // `T`; AvgPool neither.
    v.push(
        op("MaxPool")
            .input("input: T")
            .output("output: T")
            .attr("T: type = DT_FLOAT")
            .attr("ksize: list(int) >= 4")
            .attr("strides: list(int) >= 4")
            .attr("padding: {'SAME', 'VALID', 'EXPLICIT'}")
            .attr("explicit_paddings: list(int) = []")
            .attr("data_format: {'NHWC', 'NCHW', 'NCHW_VECT_C'} = 'NHWC'")
            .shape(pool)
            .gradient(max_pool_grad)
            .build(),
    );
    v.push(
        op("AvgPool")
            .input("value: T")
            .output("output: T")
            .attr("T: {half, bfloat16, float, double}")
            .attr("ksize: list(int) >= 4")
            .attr("strides: list(int) >= 4")
            .attr("padding: {'SAME', 'VALID'}")
            .attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
            .shape(pool)
            .gradient(avg_pool_grad)
            .build(),
    );
    v.push(
        op("Conv2DBackpropInput")
            .contraction()
            .input("input_sizes: int32")
            .input("filter: T")
            .input("out_backprop: T")
            .output("output: T")
            .attr("T: {half, bfloat16, float, double, int32}")
            .attrs(CONV2D_ATTRS)
            .shape(s::shape_of_input0_value)
            .gradient(conv2d_backprop_input_grad)
            .build(),
    );
    v.push(
        op("Conv2DBackpropFilter")
            .contraction()
            .input("input: T")
            .input("filter_sizes: int32")
            .input("out_backprop: T")
            .output("output: T")
            .attr("T: {half, bfloat16, float, double, int32}")
            .attrs(CONV2D_ATTRS)
            .shape(|c| Ok(vec![c.shape_value(1)]))
            .gradient(conv2d_backprop_filter_grad)
            .build(),
    );
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
            .gradient_unavailable(
                "TensorFlow differentiates it with MaxPoolGradGrad, which ferroflow does not have yet",
            )
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
            .shape(s::shape_of_input0_value)
            .gradient(avg_pool_grad_grad)
            .build(),
    );
    v.extend(defs_3d());
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
            .shape(fused_batch_norm)
            .gradient(fused_batch_norm_grad)
            .build(),
    );
    // TensorFlow declares `scale: float`; its `U` is always float, so every TensorFlow graph
    // validates against `scale: U` too, which also lets the float64 kernel (ferroflow's, for
    // finite-difference checks) take a float64 scale.
    v.push(
        op("FusedBatchNormGradV3")
            .input("y_backprop: T")
            .input("x: T")
            .input("scale: U")
            .input("reserve_space_1: U")
            .input("reserve_space_2: U")
            .input("reserve_space_3: U")
            .output("x_backprop: T")
            .output("scale_backprop: U")
            .output("offset_backprop: U")
            .output("reserve_space_4: U")
            .output("reserve_space_5: U")
            .attr("T: type")
            .attr("U: type")
            .attr("epsilon: float = 0.0001")
            .attr("data_format: {'NHWC', 'NCHW', 'NDHWC', 'NCDHW'} = 'NHWC'")
            .attr("is_training: bool = true")
            .shape(fused_batch_norm_grad_shape)
            .gradient_unavailable(
                "TensorFlow differentiates it with its second-order formula (_BatchNormGrad), which ferroflow does not have yet",
            )
            .build(),
    );
    v
}

/// `Conv3D`, `MaxPool3D`, `AvgPool3D` (NDHWC) and their gradients.
fn defs_3d() -> Vec<OpDef> {
    vec![
        op("Conv3D")
            .contraction()
            .input("input: T")
            .input("filter: T")
            .output("output: T")
            .attrs(CONV3D_ATTRS)
            .shape(conv3d)
            .grows()
            .gradient(conv3d_grad)
            .build(),
        op("Conv3DBackpropInputV2")
            .contraction()
            .input("input_sizes: Tshape")
            .input("filter: T")
            .input("out_backprop: T")
            .output("output: T")
            .attrs(CONV3D_ATTRS)
            .attr("Tshape: {int32, int64} = DT_INT32")
            .shape(s::shape_of_input0_value)
            .grows()
            .gradient(conv3d_backprop_input_grad)
            .build(),
        op("Conv3DBackpropFilterV2")
            .contraction()
            .input("input: T")
            .input("filter_sizes: int32")
            .input("out_backprop: T")
            .output("output: T")
            .attrs(CONV3D_ATTRS)
            .shape(|c| Ok(vec![c.shape_value(1)]))
            .gradient(conv3d_backprop_filter_grad)
            .build(),
        op("MaxPool3D")
            .input("input: T")
            .output("output: T")
            .attrs(POOL3D_ATTRS)
            // TensorFlow's `T` has no double; ferroflow's kernel does (for finite-difference
            // checks), and every TensorFlow graph validates against the wider list.
            .attr("T: {half, bfloat16, float, double}")
            .shape(pool3d)
            .gradient(max_pool3d_grad)
            .build(),
        op("AvgPool3D")
            .input("input: T")
            .output("output: T")
            .attrs(POOL3D_ATTRS)
            .attr("T: {half, bfloat16, float, double}")
            .shape(pool3d)
            .gradient(avg_pool3d_grad)
            .build(),
        op("MaxPool3DGrad")
            .input("orig_input: TInput")
            .input("orig_output: TInput")
            .input("grad: T")
            .output("output: T")
            .attrs(POOL3D_ATTRS)
            .attr("T: {half, bfloat16, float, double} = DT_FLOAT")
            .attr("TInput: {half, bfloat16, float, double} = DT_FLOAT")
            .shape(s::unchanged)
            .gradient_unavailable(
                "TensorFlow differentiates it with MaxPool3DGradGrad, which ferroflow does not have yet",
            )
            .build(),
        op("AvgPool3DGrad")
            .input("orig_input_shape: int32")
            .input("grad: T")
            .output("output: T")
            .attrs(POOL3D_ATTRS)
            .attr("T: {half, bfloat16, float, double}")
            .shape(s::shape_of_input0_value)
            .gradient(avg_pool3d_grad_grad)
            .build(),
    ]
}

/// The output of a 3-D window op on NDHWC `x` with window `k` (`[kd, kh, kw]`), `channels`
/// out.
fn spatial3d(
    c: &InferCtx,
    k: [Option<usize>; 3],
    channels: Option<usize>,
    dilated: bool,
) -> Result<Vec<Shape>, ShapeError> {
    let Some(x) = c.inputs[0].dims() else { return Ok(vec![Shape::unknown()]) };
    if x.len() != 5 {
        return Err(format!("input must be 5-dimensional, got shape {}", c.inputs[0]).into());
    }
    if c.string("data_format") == "NCDHW" {
        return Ok(vec![Shape::new(vec![None; 5])]);
    }
    let strides = c.ints("strides");
    if strides.len() != 5 {
        return Err(format!("strides must have 5 elements, got {strides:?}").into());
    }
    let dil = if dilated { c.ints("dilations") } else { vec![] };
    let padding = c.string("padding");
    let mut out = vec![x[0], None, None, None, channels];
    for i in 0..3 {
        let (Some(inp), Some(k)) = (x[1 + i], k[i]) else { continue };
        let d = dil.get(1 + i).copied().unwrap_or(1).max(1) as usize;
        out[1 + i] = Some(conv_output_size(inp, k, strides[1 + i].max(0) as usize, d, &padding, (0, 0))?);
    }
    Ok(vec![Shape::new(out)])
}

/// `Conv3D` (NDHWC): output channels are the filter's last dimension.
fn conv3d(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    match c.inputs[1].dims() {
        Some(f) if f.len() == 5 => spatial3d(c, [f[0], f[1], f[2]], f[4], true),
        Some(f) => Err(format!("filter must be 5-dimensional, got {}", Shape::new(f.to_vec())).into()),
        None => spatial3d(c, [None; 3], None, true),
    }
}

/// `MaxPool3D`, `AvgPool3D` (NDHWC).
fn pool3d(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let k = c.ints("ksize");
    if k.len() != 5 {
        return Err(format!("ksize must have 5 elements, got {k:?}").into());
    }
    let ch = c.inputs[0].dims().and_then(|d| d.get(4).copied().flatten());
    let w = |i: usize| Some(k[i].max(0) as usize);
    spatial3d(c, [w(1), w(2), w(3)], ch, false)
}

/// `Conv3D`: TensorFlow's `Conv3DBackpropInputV2` and `Conv3DBackpropFilterV2`.
fn conv3d_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let (x, f) = (ctx.input(0), ctx.input(1));
    let a = ctx.attrs_of(CONV3D_ATTR_NAMES);
    let dx = build(s, "Conv3DBackpropInputV2", &[s.unary("Shape", x)?, f, g], &a)?;
    let df = build(s, "Conv3DBackpropFilterV2", &[x, s.unary("Shape", f)?, g], &a)?;
    Ok(vec![Some(dx), Some(df)])
}

/// `Conv3DBackpropInputV2(sizes, f, dy)` is linear in `f` and `dy`:
/// `Conv3DBackpropFilterV2(g, shape(f), dy)` and `Conv3D(g, f)`.
fn conv3d_backprop_input_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None, None]) };
    let s = &ctx.scope;
    let (f, dy) = (ctx.input(1), ctx.input(2));
    let a = ctx.attrs_of(CONV3D_ATTR_NAMES);
    let df = build(s, "Conv3DBackpropFilterV2", &[g, s.unary("Shape", f)?, dy], &a)?;
    let ddy = build(s, "Conv3D", &[g, f], &a)?;
    Ok(vec![None, Some(df), Some(ddy)])
}

/// `Conv3DBackpropFilterV2(x, sizes, dy)`: `Conv3DBackpropInputV2(shape(x), g, dy)` and
/// `Conv3D(x, g)`.
fn conv3d_backprop_filter_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None, None]) };
    let s = &ctx.scope;
    let (x, dy) = (ctx.input(0), ctx.input(2));
    let a = ctx.attrs_of(CONV3D_ATTR_NAMES);
    let dx = build(s, "Conv3DBackpropInputV2", &[s.unary("Shape", x)?, g, dy], &a)?;
    let ddy = build(s, "Conv3D", &[x, g], &a)?;
    Ok(vec![Some(dx), None, Some(ddy)])
}

/// `MaxPool3D`: `MaxPool3DGrad`.
fn max_pool3d_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None]) };
    let mut a = ctx.attrs_of(POOL3D_ATTR_NAMES);
    a.extend(ctx.attrs_of(&["T"]).into_iter().map(|(_, v)| ("TInput".to_string(), v)));
    Ok(vec![Some(build(&ctx.scope, "MaxPool3DGrad", &[ctx.input(0), ctx.output(0), g], &a)?)])
}

/// `AvgPool3D`: `AvgPool3DGrad`.
fn avg_pool3d_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None]) };
    let s = &ctx.scope;
    let a = ctx.attrs_of(POOL3D_ATTR_NAMES);
    Ok(vec![Some(build(s, "AvgPool3DGrad", &[s.unary("Shape", ctx.input(0))?, g], &a)?)])
}

/// `AvgPool3DGrad` is linear in its gradient input: the average pool of `g`.
fn avg_pool3d_grad_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let a = ctx.attrs_of(POOL3D_ATTR_NAMES);
    Ok(vec![None, Some(build(&ctx.scope, "AvgPool3D", &[g], &a)?)])
}

/// Output size of one spatial dimension of a convolution or pool, TensorFlow's rule.
pub fn conv_output_size(
    input: usize,
    k: usize,
    stride: usize,
    dilation: usize,
    padding: &str,
    pads: (usize, usize),
) -> Result<usize, String> {
    if stride == 0 || dilation == 0 || k == 0 {
        return Err("strides, dilations and window sizes must be positive".into());
    }
    let eff = (k - 1) * dilation + 1;
    Ok(match padding {
        "VALID" => {
            if input < eff {
                return Err(format!(
                    "window of effective size {eff} does not fit input size {input} with VALID padding"
                ));
            }
            (input - eff) / stride + 1
        }
        "SAME" => input.div_ceil(stride),
        "EXPLICIT" => {
            let padded = input + pads.0 + pads.1;
            if padded < eff {
                return Err(format!("window of effective size {eff} does not fit padded input size {padded}"));
            }
            (padded - eff) / stride + 1
        }
        p => return Err(format!("unknown padding '{p}'")),
    })
}

fn spatial(c: &InferCtx, window: [Option<usize>; 2], channels: Option<usize>) -> Result<Vec<Shape>, ShapeError> {
    let Some(x) = c.inputs[0].dims() else { return Ok(vec![Shape::unknown()]) };
    if x.len() != 4 {
        return Err(format!("input must be 4-dimensional, got shape {}", c.inputs[0]).into());
    }
    if c.string("data_format") == "NCHW" {
        return Ok(vec![Shape::new(vec![None; 4])]);
    }
    let strides = c.ints("strides");
    let dil = c.ints("dilations");
    if strides.len() != 4 {
        return Err(format!("strides must have 4 elements, got {strides:?}").into());
    }
    let pads = c.ints("explicit_paddings");
    let padding = c.string("padding");
    let mut out = vec![x[0], None, None, channels];
    for i in 0..2 {
        let (Some(inp), Some(k)) = (x[1 + i], window[i]) else { continue };
        let d = dil.get(1 + i).copied().unwrap_or(1).max(0) as usize;
        let p = (
            pads.get(2 + 2 * i).copied().unwrap_or(0).max(0) as usize,
            pads.get(3 + 2 * i).copied().unwrap_or(0).max(0) as usize,
        );
        out[1 + i] = Some(conv_output_size(inp, k, strides[1 + i].max(0) as usize, d.max(1), &padding, p)?);
    }
    Ok(vec![Shape::new(out)])
}

/// The filter's dims, checked to be 4-D.
fn filter_dims(c: &InferCtx) -> Result<Option<Vec<Option<usize>>>, String> {
    match c.inputs[1].dims() {
        Some(f) if f.len() == 4 => Ok(Some(f.to_vec())),
        Some(f) => Err(format!("filter must be 4-dimensional, got {}", Shape::new(f.to_vec()))),
        None => Ok(None),
    }
}

/// `Conv2D` (NHWC): output channels are the filter's last dimension.
pub fn conv2d(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    match filter_dims(c)? {
        Some(f) => spatial(c, [f[0], f[1]], f[3]),
        None => spatial(c, [None, None], None),
    }
}

/// The output of a convolution with an elementwise epilogue (`_FusedConv2DElementwise`,
/// `_FusedDepthwiseConv2dElementwise`): the convolution's shape `conv` broadcast with every
/// epilogue operand after `input` and `filter` (an operand may be larger than the convolution's output,
/// as a squeeze-and-excite multiply whose convolution is the 1x1 side), then its `max_pool`
/// (`[ph, pw]`: VALID windows at strides of the window), if any.
pub fn with_epilogue(c: &InferCtx, conv: Vec<Shape>) -> Result<Vec<Shape>, ShapeError> {
    let mut out = conv[0].clone();
    // A prologue's operands (the last `prologue_args`) apply to the input, not the output.
    let prologue = usize::try_from(c.int("prologue_args").unwrap_or(0)).unwrap_or(0);
    let epilogue_end = c.inputs.len().saturating_sub(prologue).max(2);
    for (k, a) in c.inputs.iter().enumerate().take(epilogue_end).skip(2) {
        out = out.broadcast(a).ok_or_else(|| {
            format!("epilogue operand {} of shape {a} does not broadcast with the convolution's output {out}", k - 2)
        })?;
    }
    let p = c.ints("max_pool");
    if p.is_empty() {
        return Ok(vec![out]);
    }
    if p.len() != 2 || p.iter().any(|&v| v < 1) {
        return Err(format!("max_pool must be 2 positive window sizes, got {p:?}").into());
    }
    if let Some(d) = out.dims() {
        let mut d = d.to_vec();
        if d.len() == 4 {
            d[1] = d[1].map(|v| v / p[0] as usize);
            d[2] = d[2].map(|v| v / p[1] as usize);
            out = Shape::new(d);
        }
    }
    Ok(vec![out])
}

/// `_FusedConv2DElementwise`: [`conv2d`] and its epilogue ([`with_epilogue`]).
pub fn conv2d_elementwise(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    with_epilogue(c, conv2d(c)?)
}

/// `_FusedDepthwiseConv2dElementwise`: [`depthwise_conv2d`] and its epilogue.
pub fn depthwise_conv2d_elementwise(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    with_epilogue(c, depthwise_conv2d(c)?)
}

/// `DepthwiseConv2dNative` (NHWC): input channels times the channel multiplier.
pub fn depthwise_conv2d(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    match filter_dims(c)? {
        Some(f) => spatial(c, [f[0], f[1]], f[2].zip(f[3]).map(|(a, b)| a * b)),
        None => spatial(c, [None, None], None),
    }
}

/// `MaxPool`, `AvgPool` (NHWC).
fn pool(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let k = c.ints("ksize");
    if k.len() != 4 {
        return Err(format!("ksize must have 4 elements, got {k:?}").into());
    }
    let ch = c.inputs[0].dims().and_then(|d| d.get(3).copied().flatten());
    let mut r = spatial(c, [Some(k[1].max(0) as usize), Some(k[2].max(0) as usize)], ch)?;
    if let (Some(d), Some(x)) = (r[0].dims().map(|d| d.to_vec()), c.inputs[0].dims()) {
        if x.len() == 4 {
            r[0] = Shape::new(vec![d[0], d[1], d[2], x[3]]);
        }
    }
    Ok(r)
}

/// `FusedBatchNormV3`: y has x's shape; the statistics are vectors over channels.
fn fused_batch_norm(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let ch = c.inputs[1].dims().and_then(|d| d.first().copied().flatten());
    let v = Shape::new(vec![ch]);
    Ok(vec![c.inputs[0].clone(), v.clone(), v.clone(), v.clone(), v, Shape::scalar()])
}

/// `FusedBatchNormGradV3`: x_backprop has x's shape, the scale and offset gradients scale's;
/// the two reserve spaces are empty.
fn fused_batch_norm_grad_shape(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let ch = c.inputs[2].dims().and_then(|d| d.first().copied().flatten());
    let v = Shape::new(vec![ch]);
    let empty = Shape::known(&[0]);
    Ok(vec![c.inputs[1].clone(), v.clone(), v, empty.clone(), empty])
}

/// `FusedBatchNormV3`: TensorFlow's `FusedBatchNormGradV3`. Training mode reads the batch
/// statistics the forward op saved (`reserve_space_1/2`); inference mode the population
/// statistics it was given. Gradients reach x, scale and offset only (the statistics
/// outputs pass none back, as in TensorFlow).
fn fused_batch_norm_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None; 5]) };
    let s = &ctx.scope;
    let (x, scale) = (ctx.input(0), ctx.input(1));
    let training = ctx.attr_bool("is_training") || !ctx.node.attrs.contains_key("is_training");
    // Inference mode reads the statistics it was given, and nothing the forward op saved: the
    // forward op's only used output stays `y`, so the optimizer can rewrite it (a frozen
    // BatchNormalization in a fine-tuned model becomes a per-channel affine that fuses).
    let (r1, r2, r3) = if training {
        (ctx.output(3), ctx.output(4), ctx.output(5))
    } else {
        let zero = match s.dtype(ctx.input(3)) {
            ferroflow_tensor::DType::Double => s.with_name("reserve_space_3").scalar(0f64)?,
            _ => s.with_name("reserve_space_3").scalar(0f32)?,
        };
        (ctx.input(3), ctx.input(4), zero)
    };
    let a = ctx.attrs_of(&["T", "U", "epsilon", "data_format", "is_training"]);
    let mut at = ferroflow_graph::Attrs::new();
    for (k, v) in a {
        at.insert(k, v);
    }
    let id = s.add_op("FusedBatchNormGradV3", "FusedBatchNormGradV3", &[g, x, scale, r1, r2, r3], &[], at)?;
    let out = |index| Some(Output { node: id, index });
    Ok(vec![out(0), out(1), out(2), None, None])
}

/// `DepthwiseConv2dNative`: TensorFlow's `DepthwiseConv2dNativeBackpropInput` and
/// `DepthwiseConv2dNativeBackpropFilter`.
fn depthwise_conv2d_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let (x, f) = (ctx.input(0), ctx.input(1));
    let a = ctx.attrs_of(DEPTHWISE_ATTR_NAMES);
    let dx = build(s, "DepthwiseConv2dNativeBackpropInput", &[s.unary("Shape", x)?, f, g], &a)?;
    let df = build(s, "DepthwiseConv2dNativeBackpropFilter", &[x, s.unary("Shape", f)?, g], &a)?;
    Ok(vec![Some(dx), Some(df)])
}

/// `DepthwiseConv2dNativeBackpropInput(sizes, f, dy)` is linear in `f` and `dy`:
/// TensorFlow's `DepthwiseConv2dNativeBackpropFilter(g, shape(f), dy)` and
/// `DepthwiseConv2dNative(g, f)`.
fn depthwise_backprop_input_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None, None]) };
    let s = &ctx.scope;
    let (f, dy) = (ctx.input(1), ctx.input(2));
    let a = ctx.attrs_of(DEPTHWISE_ATTR_NAMES);
    let df = build(s, "DepthwiseConv2dNativeBackpropFilter", &[g, s.unary("Shape", f)?, dy], &a)?;
    let ddy = build(s, "DepthwiseConv2dNative", &[g, f], &a)?;
    Ok(vec![None, Some(df), Some(ddy)])
}

/// `DepthwiseConv2dNativeBackpropFilter(x, sizes, dy)`: TensorFlow's
/// `DepthwiseConv2dNativeBackpropInput(shape(x), g, dy)` and `DepthwiseConv2dNative(x, g)`.
fn depthwise_backprop_filter_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None, None]) };
    let s = &ctx.scope;
    let (x, dy) = (ctx.input(0), ctx.input(2));
    let a = ctx.attrs_of(DEPTHWISE_ATTR_NAMES);
    let dx = build(s, "DepthwiseConv2dNativeBackpropInput", &[s.unary("Shape", x)?, g, dy], &a)?;
    let ddy = build(s, "DepthwiseConv2dNative", &[x, g], &a)?;
    Ok(vec![Some(dx), None, Some(ddy)])
}

/// `Conv2D`: TensorFlow's `Conv2DBackpropInput` and `Conv2DBackpropFilter`.
fn conv2d_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let (x, f) = (ctx.input(0), ctx.input(1));
    let a =
        ctx.attrs_of(&["T", "strides", "padding", "explicit_paddings", "data_format", "dilations", "use_cudnn_on_gpu"]);
    let dx = build(s, "Conv2DBackpropInput", &[s.unary("Shape", x)?, f, g], &a)?;
    let df = build(s, "Conv2DBackpropFilter", &[x, s.unary("Shape", f)?, g], &a)?;
    Ok(vec![Some(dx), Some(df)])
}

/// `MaxPool`: `MaxPoolGrad` (to the first maximum of each window).
fn max_pool_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None]) };
    let a = ctx.attrs_of(&["T", "ksize", "strides", "padding", "explicit_paddings", "data_format"]);
    Ok(vec![Some(build(&ctx.scope, "MaxPoolGrad", &[ctx.input(0), ctx.output(0), g], &a)?)])
}

/// `AvgPool`: `AvgPoolGrad`.
fn avg_pool_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None]) };
    let s = &ctx.scope;
    let a = ctx.attrs_of(&["T", "ksize", "strides", "padding", "data_format"]);
    Ok(vec![Some(build(s, "AvgPoolGrad", &[s.unary("Shape", ctx.input(0))?, g], &a)?)])
}

/// `Conv2DBackpropInput(sizes, f, dy)` is linear in `f` and `dy`: TensorFlow's
/// `Conv2DBackpropFilter(g, shape(f), dy)` and `Conv2D(g, f)`.
fn conv2d_backprop_input_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None, None]) };
    let s = &ctx.scope;
    let (f, dy) = (ctx.input(1), ctx.input(2));
    let a = ctx.attrs_of(CONV_ATTRS);
    let df = build(s, "Conv2DBackpropFilter", &[g, s.unary("Shape", f)?, dy], &a)?;
    let ddy = build(s, "Conv2D", &[g, f], &a)?;
    Ok(vec![None, Some(df), Some(ddy)])
}

/// `Conv2DBackpropFilter(x, sizes, dy)`: TensorFlow's `Conv2DBackpropInput(shape(x), g, dy)`
/// and `Conv2D(x, g)`.
fn conv2d_backprop_filter_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None, None]) };
    let s = &ctx.scope;
    let (x, dy) = (ctx.input(0), ctx.input(2));
    let a = ctx.attrs_of(CONV_ATTRS);
    let dx = build(s, "Conv2DBackpropInput", &[s.unary("Shape", x)?, g, dy], &a)?;
    let ddy = build(s, "Conv2D", &[x, g], &a)?;
    Ok(vec![Some(dx), None, Some(ddy)])
}

/// `AvgPoolGrad` is linear in its gradient input: the average pool of `g` (TensorFlow's).
fn avg_pool_grad_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let a = ctx.attrs_of(&["T", "ksize", "strides", "padding", "data_format"]);
    Ok(vec![None, Some(build(&ctx.scope, "AvgPool", &[g], &a)?)])
}
