//! Layers as graph-building functions with `tf.compat.v1.layers`' names: a dense layer named
//! `layer_0` has variables `layer_0/kernel`, `layer_0/bias` and ops `layer_0/MatMul`,
//! `layer_0/BiasAdd`, `layer_0/Relu`.
use ferroflow_graph::{Attrs, NodeId, Output};
use ferroflow_ops::{infer_shapes, Scope};
use ferroflow_proto::attr;
use ferroflow_tensor::Shape;

use crate::{Builder, Initializer, Result, TrainError};
use ferroflow_ops::{Ops, RawOps};

/// An activation applied after a layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Activation {
    /// None (linear).
    Linear,
    /// `Relu`.
    Relu,
    /// `Softmax` over the last axis.
    Softmax,
    /// `Sigmoid`.
    Sigmoid,
    /// `Tanh`.
    Tanh,
    /// Keras's `swish` (`tf.nn.silu`): `x · sigmoid(x)`, as `Mul(x, Sigmoid(x))`.
    Swish,
}

impl Activation {
    /// The activation of `x`, as nodes in `s`.
    pub fn apply(self, s: &Scope, x: Output) -> Result<Output> {
        Ok(match self {
            Activation::Linear => x,
            Activation::Relu => s.unary("Relu", x)?,
            Activation::Softmax => s.unary("Softmax", x)?,
            Activation::Sigmoid => s.unary("Sigmoid", x)?,
            Activation::Tanh => s.unary("Tanh", x)?,
            Activation::Swish => {
                let s = s.name_scope("swish");
                s.mul(x, s.unary("Sigmoid", x)?)?
            }
        })
    }
}

/// The static shape of `x` in the builder's graph.
pub fn static_shape(b: &Builder, x: Output) -> Result<Shape> {
    let shapes = b.scope().with_graph(infer_shapes).map_err(ferroflow_ops::BuildError::from)?;
    Ok(shapes.get(x.node).and_then(|s| s.get(x.index)).cloned().unwrap_or_else(Shape::unknown))
}

fn last_dim(b: &Builder, x: Output, layer: &str) -> Result<usize> {
    let s = static_shape(b, x)?;
    s.dims().and_then(|d| d.last().copied().flatten()).ok_or_else(|| {
        TrainError::Invalid(format!("layer '{layer}': the input's last dimension must be known, got shape {s}"))
    })
}

/// `tf.layers.dense`: `activation(x · kernel + bias)`, kernel `[in, units]` from
/// `kernel_init`, bias zeros.
pub fn dense(
    b: &Builder,
    x: Output,
    units: usize,
    activation: Activation,
    kernel_init: &Initializer,
    name: &str,
) -> Result<Output> {
    let inputs = last_dim(b, x, name)?;
    let s = b.scope().name_scope(name);
    let dtype = s.dtype(x);
    let kernel = b.variable(&s, "kernel", &[inputs, units], dtype, kernel_init, true)?;
    let bias = b.variable(&s, "bias", &[units], dtype, &Initializer::Zeros, true)?;
    let y = s.matmul(x, kernel.value, false, false)?;
    let y = s.bias_add(y, bias.value)?;
    activation.apply(&s, y)
}

/// `tf.nn.dropout` on the taken branch: keeps each value with probability `1 - rate` and
/// scales kept values by `1 / (1 - rate)`.
pub fn dropout_always(b: &Builder, s: &Scope, x: Output, rate: f64, seed: Option<i64>) -> Result<Output> {
    if !(0.0..1.0).contains(&rate) {
        return Err(TrainError::Invalid(format!("dropout rate must be in [0, 1), got {rate}")));
    }
    let d = s.name_scope("dropout");
    let dtype = d.dtype(x);
    let shape = d.unary("Shape", x)?; // out_type defaults to int32
    let r = b.random(&d.name_scope("random_uniform"), "RandomUniform", shape, dtype, seed)?;
    let rate_c = Builder::scalar(&d.with_name("rate"), dtype, rate)?;
    let mut a = Attrs::new();
    a.insert("T".into(), attr::dtype(dtype));
    let keep = Output { node: d.add_op("GreaterEqual", "GreaterEqual", &[r, rate_c], &[], a)?, index: 0 };
    let scaled = d.mul(x, Builder::scalar(&d.with_name("Const"), dtype, 1.0 / (1.0 - rate))?)?;
    let mask = d.cast(keep, dtype)?;
    Ok(d.with_name("Mul_1").mul(scaled, mask)?)
}

/// `tf.layers.dropout(x, rate, training=training)`: dropout when the boolean `training` is
/// true, identity when false, switched by a `cond` (only the taken branch runs).
pub fn dropout(b: &Builder, x: Output, rate: f64, training: Output, seed: Option<i64>, name: &str) -> Result<Output> {
    let s = b.scope().name_scope(name);
    let out = s.cond::<TrainError>(
        training,
        &[x],
        |t, ins| Ok(vec![dropout_always(b, t, ins[0], rate, seed)?]),
        |f, ins| Ok(vec![f.identity(ins[0])?]),
    )?;
    Ok(out[0])
}

/// `tf.layers.flatten`: `[batch, ...]` to `[batch, prod(...)]`.
pub fn flatten(b: &Builder, x: Output, name: &str) -> Result<Output> {
    let shape = static_shape(b, x)?;
    let dims = shape.dims().ok_or_else(|| TrainError::Invalid(format!("layer '{name}': input rank must be known")))?;
    let mut n = 1usize;
    for (i, d) in dims.iter().enumerate().skip(1) {
        n *= d.ok_or_else(|| {
            TrainError::Invalid(format!("layer '{name}': dimension {i} of the input must be known, got {shape}"))
        })?;
    }
    let s = b.scope().name_scope(name);
    Ok(s.reshape(x, &[-1, n as i32])?)
}

/// Padding of convolutions and pools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Padding {
    /// Output size `ceil(in / stride)`.
    Same,
    /// No padding.
    Valid,
}

impl Padding {
    fn attr(self) -> ferroflow_proto::AttrValue {
        attr::string(if self == Padding::Same { "SAME" } else { "VALID" })
    }
}

/// `tf.layers.conv2d` on NHWC input: kernel `[kh, kw, in, filters]`, bias zeros.
#[allow(clippy::too_many_arguments)]
pub fn conv2d(
    b: &Builder,
    x: Output,
    filters: usize,
    kernel: [usize; 2],
    strides: [usize; 2],
    padding: Padding,
    activation: Activation,
    kernel_init: &Initializer,
    name: &str,
) -> Result<Output> {
    let channels = last_dim(b, x, name)?;
    let s = b.scope().name_scope(name);
    let dtype = s.dtype(x);
    let k = b.variable(&s, "kernel", &[kernel[0], kernel[1], channels, filters], dtype, kernel_init, true)?;
    let bias = b.variable(&s, "bias", &[filters], dtype, &Initializer::Zeros, true)?;
    let y = conv_op(&s, "Conv2D", "Conv2D", x, k.value, strides, padding)?;
    let y = s.bias_add(y, bias.value)?;
    activation.apply(&s, y)
}

/// Convolution `op` (NHWC) of `x` with `kernel`, named `name` in `s`.
fn conv_op(
    s: &Scope,
    op: &str,
    name: &str,
    x: Output,
    kernel: Output,
    strides: [usize; 2],
    padding: Padding,
) -> Result<Output> {
    let mut a = Attrs::new();
    a.insert("T".into(), attr::dtype(s.dtype(x)));
    a.insert("strides".into(), attr::ints(&[1, strides[0] as i64, strides[1] as i64, 1]));
    a.insert("padding".into(), padding.attr());
    Ok(Output { node: s.add_op(op, name, &[x, kernel], &[], a)?, index: 0 })
}

/// `tf.layers.max_pooling2d` on NHWC input.
pub fn max_pool2d(
    b: &Builder,
    x: Output,
    pool: [usize; 2],
    strides: [usize; 2],
    padding: Padding,
    name: &str,
) -> Result<Output> {
    let s = b.scope().name_scope(name);
    let mut a = Attrs::new();
    a.insert("T".into(), attr::dtype(s.dtype(x)));
    a.insert("ksize".into(), attr::ints(&[1, pool[0] as i64, pool[1] as i64, 1]));
    a.insert("strides".into(), attr::ints(&[1, strides[0] as i64, strides[1] as i64, 1]));
    a.insert("padding".into(), padding.attr());
    Ok(Output { node: s.add_op("MaxPool", "MaxPool", &[x], &[], a)?, index: 0 })
}

/// A 2-D convolution without bias (NHWC), kernel `[kh, kw, in, filters]` named `kernel`:
/// the convolutions of EfficientNet, each followed by batch normalization.
#[allow(clippy::too_many_arguments)]
pub fn conv2d_no_bias(
    b: &Builder,
    x: Output,
    filters: usize,
    kernel: [usize; 2],
    strides: [usize; 2],
    padding: Padding,
    kernel_init: &Initializer,
    name: &str,
) -> Result<Output> {
    let channels = last_dim(b, x, name)?;
    let s = b.scope().name_scope(name);
    let dtype = s.dtype(x);
    let k = b.variable(&s, "kernel", &[kernel[0], kernel[1], channels, filters], dtype, kernel_init, true)?;
    conv_op(&s, "Conv2D", "Conv2D", x, k.value, strides, padding)
}

/// Keras's `DepthwiseConv2D` (NHWC, no bias): each input channel convolved with its own
/// `depth_multiplier` filters, kernel `[kh, kw, in, depth_multiplier]` named
/// `depthwise_kernel`, through `DepthwiseConv2dNative`.
#[allow(clippy::too_many_arguments)]
pub fn depthwise_conv2d(
    b: &Builder,
    x: Output,
    kernel: [usize; 2],
    strides: [usize; 2],
    padding: Padding,
    depth_multiplier: usize,
    kernel_init: &Initializer,
    name: &str,
) -> Result<Output> {
    let channels = last_dim(b, x, name)?;
    if depth_multiplier == 0 {
        return Err(TrainError::Invalid(format!("layer '{name}': depth_multiplier must be at least 1")));
    }
    let s = b.scope().name_scope(name);
    let dtype = s.dtype(x);
    let shape = [kernel[0], kernel[1], channels, depth_multiplier];
    let k = b.variable(&s, "depthwise_kernel", &shape, dtype, kernel_init, true)?;
    conv_op(&s, "DepthwiseConv2dNative", "depthwise", x, k.value, strides, padding)
}

/// The collection holding the moving-statistics updates of batch normalization layers
/// (TensorFlow's `tf.GraphKeys.UPDATE_OPS`); a model's train op runs them with each step.
pub const UPDATE_OPS: &str = "update_ops";

/// Keras's `BatchNormalization` over the last axis of an NHWC input, through
/// `FusedBatchNormV3`: `gamma` (ones) and `beta` (zeros) are trained; `moving_mean` (zeros)
/// and `moving_variance` (ones) are not. When the boolean `training` is true the batch's
/// statistics normalize and the op blends them into the moving ones with
/// `exponential_avg_factor = 1 − momentum` (Keras 2's fused path: the variance blended in is
/// Bessel-corrected); two `AssignVariableOp`s, added to [`UPDATE_OPS`], write them back.
/// When false the moving statistics normalize. Keras's defaults are momentum 0.99,
/// epsilon 1e-3.
pub fn batch_normalization(
    b: &Builder,
    x: Output,
    training: Output,
    momentum: f64,
    epsilon: f64,
    name: &str,
) -> Result<Output> {
    let shape = static_shape(b, x)?;
    if shape.rank() != Some(4) {
        return Err(TrainError::Invalid(format!(
            "layer '{name}': batch normalization takes NHWC (4-D) input, got shape {shape}"
        )));
    }
    if !(0.0..=1.0).contains(&momentum) {
        return Err(TrainError::Invalid(format!("layer '{name}': momentum must be in [0, 1], got {momentum}")));
    }
    let channels = last_dim(b, x, name)?;
    let s = b.scope().name_scope(name);
    let dtype = s.dtype(x);
    let gamma = b.variable(&s, "gamma", &[channels], dtype, &Initializer::Ones, true)?;
    let beta = b.variable(&s, "beta", &[channels], dtype, &Initializer::Zeros, true)?;
    let mean = b.variable(&s, "moving_mean", &[channels], dtype, &Initializer::Zeros, false)?;
    let var = b.variable(&s, "moving_variance", &[channels], dtype, &Initializer::Ones, false)?;
    let fused = |s: &Scope, ins: &[Output], is_training: bool| -> Result<NodeId> {
        let mut a = Attrs::new();
        a.insert("T".into(), attr::dtype(dtype));
        a.insert("U".into(), attr::dtype(dtype));
        a.insert("epsilon".into(), attr::float(epsilon as f32));
        a.insert("exponential_avg_factor".into(), attr::float(if is_training { 1.0 - momentum as f32 } else { 1.0 }));
        a.insert("data_format".into(), attr::string("NHWC"));
        a.insert("is_training".into(), attr::boolean(is_training));
        Ok(s.add_op("FusedBatchNormV3", "FusedBatchNormV3", ins, &[], a)?)
    };
    let out = s.cond::<TrainError>(
        training,
        &[x, gamma.value, beta.value, mean.value, var.value],
        |t, ins| {
            let n = fused(t, ins, true)?;
            Ok((0..3).map(|index| Output { node: n, index }).collect())
        },
        |f, ins| {
            let n = fused(f, ins, false)?;
            Ok(vec![Output { node: n, index: 0 }, f.identity(ins[3])?, f.identity(ins[4])?])
        },
    )?;
    for (v, value, op) in [(&mean, out[1], "AssignMovingAvg"), (&var, out[2], "AssignMovingAvg_1")] {
        let mut a = Attrs::new();
        a.insert("dtype".into(), attr::dtype(dtype));
        let id = s.add_op("AssignVariableOp", op, &[v.handle, value], &[], a)?;
        b.add_to_collection(UPDATE_OPS, &s.with_graph(|g| g.node(id).name.clone()));
    }
    Ok(out[0])
}

/// Keras's `GlobalAveragePooling2D`: the mean over height and width of an NHWC input,
/// `[batch, channels]` (`keep_dims` keeps them as 1×1).
pub fn global_average_pooling2d(b: &Builder, x: Output, keep_dims: bool, name: &str) -> Result<Output> {
    let shape = static_shape(b, x)?;
    if shape.rank().is_some_and(|r| r != 4) {
        return Err(TrainError::Invalid(format!("layer '{name}': global pooling takes NHWC (4-D) input, got {shape}")));
    }
    let s = b.scope().name_scope(name);
    Ok(s.reduce("Mean", x, &[1, 2], keep_dims)?)
}

/// Squeeze-and-excitation (as Keras's EfficientNet builds it): the global average of `x`
/// (kept 1×1), a 1×1 convolution to `squeeze_filters` with bias and swish, a 1×1
/// convolution back to `x`'s channels with bias and sigmoid, and `x` scaled by the result
/// per channel. Layers `<name>/squeeze`, `<name>/reduce`, `<name>/expand`, `<name>/excite`.
pub fn squeeze_excitation(
    b: &Builder,
    x: Output,
    squeeze_filters: usize,
    kernel_init: &Initializer,
    name: &str,
) -> Result<Output> {
    let channels = last_dim(b, x, name)?;
    let inner = b.name_scope(name);
    let squeezed = global_average_pooling2d(&inner, x, true, "squeeze")?;
    let one = [1, 1];
    let r =
        conv2d(&inner, squeezed, squeeze_filters, one, one, Padding::Same, Activation::Swish, kernel_init, "reduce")?;
    let e = conv2d(&inner, r, channels, one, one, Padding::Same, Activation::Sigmoid, kernel_init, "expand")?;
    Ok(inner.scope().with_name("excite").mul(x, e)?)
}
