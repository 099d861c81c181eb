//! Keras layers beyond the applications' set: 1-D and 3-D convolutions, pooling, padding and
//! cropping, transposed convolutions, resizing and cropping layers, unit and group
//! normalization, numpy-style indexing (`x[:, 0]`), comparisons, and the activations that are
//! compositions of ops (`celu`, `glu`, `sparsemax`, ...).
use ferroflow_graph::Output;
use ferroflow_ops::{attrs, Ops, RawOps, Scope};
use ferroflow_tensor::DType;
use ferroflow_train::Initializer;
use serde_json::Value;

use crate::config::{Arg, Call, LayerSpec};
use crate::layers::{self, int_list as ints, layer_err as err, pairs, Mode, Net};
use crate::Result;

type R<T> = Result<T>;

/// Activations Keras composes from ops; `None` for names it does not know.
pub fn composite_activation(
    s: &Scope,
    x: Output,
    name: &str,
) -> Option<std::result::Result<Output, ferroflow_ops::BuildError>> {
    let f = || -> std::result::Result<Output, ferroflow_ops::BuildError> {
        Ok(match name {
            "celu" => {
                // max(x, 0) + α·expm1(min(x, 0)/α), α = 1
                s.add_v2(s.maximum(x, 0.0f32)?, s.expm1(s.minimum(x, 0.0f32)?)?)?
            }
            "glu" => {
                let parts = s.split(-1i32, x, 2)?;
                s.mul(parts[0], s.sigmoid(parts[1])?)?
            }
            "hard_shrink" => s.select_v2(s.greater(s.abs(x)?, 0.5f32)?, x, s.zeros_like(x)?)?,
            "hard_tanh" => s.maximum(s.minimum(x, 1.0f32)?, -1.0f32)?,
            "log_sigmoid" => s.neg(s.softplus(s.neg(x)?)?)?,
            "soft_shrink" => {
                let zero = s.zeros_like(x)?;
                let lo = s.select_v2(s.less(x, -0.5f32)?, s.add_v2(x, 0.5f32)?, zero)?;
                s.select_v2(s.greater(x, 0.5f32)?, s.sub(x, 0.5f32)?, lo)?
            }
            "sparse_plus" => {
                let mid = s.mul(s.square(s.add_v2(x, 1.0f32)?)?, 0.25f32)?;
                let hi = s.select_v2(s.greater_equal(x, 1.0f32)?, x, mid)?;
                s.select_v2(s.less_equal(x, -1.0f32)?, s.zeros_like(x)?, hi)?
            }
            "sparse_sigmoid" => {
                let mid = s.mul(s.add_v2(x, 1.0f32)?, 0.5f32)?;
                let hi = s.select_v2(s.greater_equal(x, 1.0f32)?, s.add_v2(s.zeros_like(x)?, 1.0f32)?, mid)?;
                s.select_v2(s.less_equal(x, -1.0f32)?, s.zeros_like(x)?, hi)?
            }
            "squareplus" => s.mul(s.add_v2(x, s.sqrt(s.add_v2(s.square(x)?, 4.0f32)?)?)?, 0.5f32)?,
            "tanh_shrink" => s.sub(x, s.tanh(x)?)?,
            "sparsemax" => {
                // Keras 3's TensorFlow backend over the last axis, as it computes it:
                // sorted = sort(z) descending, cumsum, r = 1..n, support = sorted − (cumsum − 1)/r
                // > 0, k = Σ support, τ = (Σ cumsum·support − 1)/k, out = max(z − τ, 0).
                let n = s.strided_slice_with(
                    s.shape(x)?,
                    &[-1i32][..],
                    &[0i32][..],
                    &[1i32][..],
                    attrs::StridedSlice::new().end_mask(1).shrink_axis_mask(1),
                )?;
                let sorted = s.top_kv2(x, n)?[0];
                let cum = s.cumsum(sorted, -1i32)?;
                let r = s.cast(s.range(1i32, s.add_v2(n, 1i32)?, 1i32)?, DType::Float)?;
                let support = s.greater(s.sub(sorted, s.real_div(s.sub(cum, 1.0f32)?, r)?)?, 0.0f32)?;
                let k = s.reduce("Sum", s.cast(support, DType::Float)?, &[-1], true)?;
                let safe = s.select_v2(support, cum, s.zeros_like(cum)?)?;
                let tau = s.real_div(s.sub(s.reduce("Sum", safe, &[-1], true)?, 1.0f32)?, k)?;
                s.maximum(s.sub(x, tau)?, 0.0f32)?
            }
            _ => x, // not reached: the names are matched below
        })
    };
    match name {
        "celu" | "glu" | "hard_shrink" | "hard_tanh" | "log_sigmoid" | "soft_shrink" | "sparse_plus"
        | "sparse_sigmoid" | "sparsemax" | "squareplus" | "tanh_shrink" => Some(f()),
        _ => None,
    }
}

/// One index of numpy-style indexing.
enum Index {
    Slice(Option<i64>, Option<i64>, Option<i64>),
    At(i64),
    Ellipsis,
    NewAxis,
}

fn index_of(l: &LayerSpec, v: &Arg) -> R<Index> {
    let opt = |v: Option<&Value>| v.and_then(Value::as_i64);
    match v {
        Arg::Value(Value::Null) => Ok(Index::NewAxis),
        Arg::Value(Value::Number(n)) => n.as_i64().map(Index::At).ok_or_else(|| err(l, "an index must be an integer")),
        Arg::Value(Value::Object(o)) => match o.get("class_name").and_then(Value::as_str) {
            Some("__ellipsis__") => Ok(Index::Ellipsis),
            Some("__slice__") => {
                let c = o.get("config");
                Ok(Index::Slice(
                    opt(c.and_then(|c| c.get("start"))),
                    opt(c.and_then(|c| c.get("stop"))),
                    opt(c.and_then(|c| c.get("step"))),
                ))
            }
            _ => Err(err(l, "an index ferroflow cannot read")),
        },
        _ => Err(err(l, "indexing with a tensor is not supported")),
    }
}

/// `x[key]` as `StridedSlice` with TensorFlow's masks (what `tf.Tensor.__getitem__` builds).
fn get_item(s: &Scope, l: &LayerSpec, x: Output, key: &Arg) -> R<Output> {
    let items: Vec<Index> = match key {
        Arg::List(items) => items.iter().map(|a| index_of(l, a)).collect::<R<_>>()?,
        one => vec![index_of(l, one)?],
    };
    if items.len() > 32 {
        return Err(err(l, "more than 32 indices"));
    }
    let (mut begin, mut end, mut strides) = (Vec::new(), Vec::new(), Vec::new());
    let (mut bm, mut em, mut ell, mut newm, mut shrink) = (0i64, 0i64, 0i64, 0i64, 0i64);
    for (i, it) in items.iter().enumerate() {
        let bit = 1i64 << i;
        match *it {
            Index::Slice(a, b, c) => {
                begin.push(a.unwrap_or(0) as i32);
                end.push(b.unwrap_or(0) as i32);
                strides.push(c.unwrap_or(1) as i32);
                if a.is_none() {
                    bm |= bit;
                }
                if b.is_none() {
                    em |= bit;
                }
                if c == Some(0) {
                    return Err(err(l, "a slice step of 0"));
                }
            }
            Index::At(k) => {
                begin.push(k as i32);
                end.push(if k == -1 { 0 } else { k as i32 + 1 });
                strides.push(1);
                shrink |= bit;
                if k == -1 {
                    em |= bit;
                }
            }
            Index::Ellipsis => {
                begin.push(0);
                end.push(0);
                strides.push(1);
                ell |= bit;
            }
            Index::NewAxis => {
                begin.push(0);
                end.push(0);
                strides.push(1);
                newm |= bit;
            }
        }
    }
    let opts = attrs::StridedSlice::new()
        .begin_mask(bm)
        .end_mask(em)
        .ellipsis_mask(ell)
        .new_axis_mask(newm)
        .shrink_axis_mask(shrink);
    Ok(s.strided_slice_with(x, &begin[..], &end[..], &strides[..], opts)?)
}

fn pad_mode(l: &LayerSpec) -> R<&'static str> {
    match l.get("padding").and_then(Value::as_str).unwrap_or("valid") {
        "valid" => Ok("VALID"),
        "same" => Ok("SAME"),
        "causal" => Ok("CAUSAL"),
        p => Err(err(l, format!("padding '{p}' is not supported"))),
    }
}

fn bias_act(net: &Net, l: &LayerSpec, s: &Scope, y: Output, bias: Option<Output>) -> R<Output> {
    let _ = net;
    let y = match bias {
        Some(b) => s.bias_add(y, b)?,
        None => y,
    };
    let name = match l.get("activation") {
        None => "linear".to_string(),
        Some(Value::String(a)) => a.clone(),
        Some(_) => return Err(err(l, "only activations given by name are supported here")),
    };
    layers::activation(s, y, &name).map_err(|m| err(l, m))
}

/// The layers this module builds; `None` for other classes.
pub fn call(
    net: &Net,
    l: &LayerSpec,
    path: &[String],
    s: &Scope,
    inputs: &[Output],
    call: &Call,
    mode: Mode,
) -> Option<R<Vec<Output>>> {
    let x = inputs.first().copied();
    let f = || -> R<Vec<Output>> {
        let x = x.ok_or_else(|| err(l, "called without an input tensor"))?;
        let trainable = mode.trainable;
        let glorot = Initializer::VarianceScaling {
            scale: 1.0,
            mode: ferroflow_train::FanMode::FanAvg,
            distribution: ferroflow_train::Distribution::Uniform,
            seed: None,
        };
        let one = |o: Output| Ok(vec![o]);
        match (l.module.as_deref().unwrap_or(""), l.class.as_str()) {
            (m, "GetItem") if m.starts_with("keras.src.ops") => {
                let key = call.args.get(1).ok_or_else(|| err(l, "indexing without a key"))?;
                one(get_item(s, l, x, key)?)
            }
            (m, op @ ("NotEqual" | "Equal" | "Greater" | "GreaterEqual" | "Less" | "LessEqual"))
                if m.starts_with("keras.src.ops") =>
            {
                let y = match call.args.get(1) {
                    Some(Arg::Tensor(_)) => *inputs.get(1).ok_or_else(|| err(l, "missing a tensor"))?,
                    Some(Arg::Value(Value::Number(n))) => {
                        let d = s.dtype(x);
                        match d {
                            DType::Float => s.scalar(n.as_f64().unwrap_or(0.0) as f32)?,
                            DType::Int32 => s.scalar(n.as_i64().unwrap_or(0) as i32)?,
                            DType::Int64 => s.scalar(n.as_i64().unwrap_or(0))?,
                            d => return Err(err(l, format!("cannot compare {d}"))),
                        }
                    }
                    _ => return Err(err(l, "a comparison needs two operands")),
                };
                one(match op {
                    "NotEqual" => s.not_equal(x, y)?,
                    "Equal" => s.equal(x, y)?,
                    "Greater" => s.greater(x, y)?,
                    "GreaterEqual" => s.greater_equal(x, y)?,
                    "Less" => s.less(x, y)?,
                    _ => s.less_equal(x, y)?,
                })
            }
            (_, "Conv1D" | "SeparableConv1D") => {
                let separable = l.class == "SeparableConv1D";
                let k = ints(l, "kernel_size", 1, None)?[0];
                let st = ints(l, "strides", 1, Some(1))?[0];
                let dil = ints(l, "dilation_rate", 1, Some(1))?[0];
                let filters = ints(l, "filters", 1, None)?[0];
                let groups = ints(l, "groups", 1, Some(1))?[0].max(1);
                let inn = net.dims(x, l)?.last().copied().flatten().ok_or_else(|| err(l, "unknown input channels"))?;
                let use_bias = l.get("use_bias").and_then(Value::as_bool).unwrap_or(true);
                let mut padding = pad_mode(l)?;
                let mut x = x;
                if padding == "CAUSAL" {
                    let left = ((k - 1) * dil) as i32;
                    x = s.pad(x, s.constant_from(&[3, 2], &[0i32, 0, left, 0, 0, 0])?)?;
                    padding = "VALID";
                }
                let mut specs = Vec::new();
                let mult = ints(l, "depth_multiplier", 1, Some(1))?[0].max(1);
                if separable {
                    specs.push(layers::weight("depthwise_kernel", vec![k, inn, mult], glorot.clone()));
                    specs.push(layers::weight("pointwise_kernel", vec![1, inn * mult, filters], glorot.clone()));
                } else {
                    specs.push(layers::weight("kernel", vec![k, inn / groups, filters], glorot.clone()));
                }
                if use_bias {
                    specs.push(layers::weight("bias", vec![filters], Initializer::Zeros));
                }
                let vars = net.weights_of(l, path, specs, trainable)?;
                let x4 = s.expand_dims(x, 1i32)?;
                let y = if separable {
                    let dk = s.expand_dims(vars[0], 0i32)?;
                    let pk = s.expand_dims(vars[1], 0i32)?;
                    let opts = attrs::DepthwiseConv2dNative::new().dilations(&[1, 1, dil as i64, 1]);
                    let d = s.depthwise_conv2d_native_with(x4, dk, &[1, 1, st as i64, 1], padding, opts)?;
                    s.conv2d(d, pk, &[1, 1, 1, 1], "VALID")?
                } else {
                    let kk = s.expand_dims(vars[0], 0i32)?;
                    let opts = attrs::Conv2D::new().dilations(&[1, 1, dil as i64, 1]);
                    s.conv2d_with(x4, kk, &[1, 1, st as i64, 1], padding, opts)?
                };
                let y = s.squeeze_with(y, attrs::Squeeze::new().squeeze_dims(&[1]))?;
                one(bias_act(net, l, s, y, use_bias.then(|| *vars.last().expect("bias")))?)
            }
            (_, "Conv3D") => {
                let k = ints(l, "kernel_size", 3, None)?;
                let st = ints(l, "strides", 3, Some(1))?;
                let dil = ints(l, "dilation_rate", 3, Some(1))?;
                let filters = ints(l, "filters", 1, None)?[0];
                let inn = net.dims(x, l)?.last().copied().flatten().ok_or_else(|| err(l, "unknown input channels"))?;
                let use_bias = l.get("use_bias").and_then(Value::as_bool).unwrap_or(true);
                let mut specs = vec![layers::weight("kernel", vec![k[0], k[1], k[2], inn, filters], glorot.clone())];
                if use_bias {
                    specs.push(layers::weight("bias", vec![filters], Initializer::Zeros));
                }
                let vars = net.weights_of(l, path, specs, trainable)?;
                let opts = attrs::Conv3D::new().dilations(&[1, dil[0] as i64, dil[1] as i64, dil[2] as i64, 1]);
                let y =
                    s.conv3d_with(x, vars[0], &[1, st[0] as i64, st[1] as i64, st[2] as i64, 1], pad_mode(l)?, opts)?;
                one(bias_act(net, l, s, y, use_bias.then(|| vars[1]))?)
            }
            (_, c @ ("Conv2DTranspose" | "Conv3DTranspose")) => {
                let n = if c == "Conv2DTranspose" { 2 } else { 3 };
                let k = ints(l, "kernel_size", n, None)?;
                let st = ints(l, "strides", n, Some(1))?;
                let dil = ints(l, "dilation_rate", n, Some(1))?;
                if dil.iter().any(|&d| d != 1) || l.get("output_padding").is_some() {
                    return Err(err(l, "dilation and output_padding are not supported"));
                }
                let filters = ints(l, "filters", 1, None)?[0];
                let dims = net.dims(x, l)?;
                let inn = dims.last().copied().flatten().ok_or_else(|| err(l, "unknown input channels"))?;
                let use_bias = l.get("use_bias").and_then(Value::as_bool).unwrap_or(true);
                let mut kshape = k.clone();
                kshape.extend([filters, inn]);
                let mut specs = vec![layers::weight("kernel", kshape, glorot.clone())];
                if use_bias {
                    specs.push(layers::weight("bias", vec![filters], Initializer::Zeros));
                }
                let vars = net.weights_of(l, path, specs, trainable)?;
                let padding = pad_mode(l)?;
                let mut out: Vec<i32> = Vec::with_capacity(n);
                for i in 0..n {
                    let d = dims[1 + i].ok_or_else(|| err(l, "spatial dimensions must be known"))?;
                    out.push(if padding == "SAME" { d * st[i] } else { d * st[i] + k[i].saturating_sub(st[i]) } as i32);
                }
                let batch = s.strided_slice_with(
                    s.shape(x)?,
                    &[0i32][..],
                    &[1i32][..],
                    &[1i32][..],
                    attrs::StridedSlice::new(),
                )?;
                let mut rest = out.clone();
                rest.push(filters as i32);
                let sizes = s.concat_v2(&[batch, s.constant_from(&[rest.len()], &rest)?], 0i32)?;
                let mut strides = vec![1i64];
                strides.extend(st.iter().map(|&v| v as i64));
                strides.push(1);
                let y = if n == 2 {
                    s.conv2d_backprop_input(sizes, vars[0], x, &strides, padding)?
                } else {
                    s.conv3d_backprop_input_v2(sizes, vars[0], x, &strides, padding)?
                };
                one(bias_act(net, l, s, y, use_bias.then(|| vars[1]))?)
            }
            (_, c @ ("ZeroPadding1D" | "ZeroPadding3D" | "Cropping1D" | "Cropping3D")) => {
                let n = if c.ends_with("1D") { 1 } else { 3 };
                let pad = c.starts_with("Zero");
                let p = pairs(l, if pad { "padding" } else { "cropping" }, n)?;
                if pad {
                    let mut v = vec![0i32, 0];
                    for q in &p {
                        v.extend([q[0] as i32, q[1] as i32]);
                    }
                    v.extend([0, 0]);
                    return one(s.pad(x, s.constant_from(&[n + 2, 2], &v)?)?);
                }
                let dims = net.dims(x, l)?;
                let mut begin = vec![0i32];
                let mut size = vec![-1i32];
                for (i, q) in p.iter().enumerate() {
                    let d = dims[1 + i].ok_or_else(|| err(l, "cropped dimensions must be known"))?;
                    if q[0] + q[1] >= d {
                        return Err(err(l, format!("cropping {q:?} leaves nothing of {d}")));
                    }
                    begin.push(q[0] as i32);
                    size.push((d - q[0] - q[1]) as i32);
                }
                begin.push(0);
                size.push(-1);
                one(s.slice(x, &begin[..], &size[..])?)
            }
            (_, c @ ("MaxPooling3D" | "AveragePooling3D")) => {
                let p = ints(l, "pool_size", 3, Some(2))?;
                let st = if l.get("strides").is_some() { ints(l, "strides", 3, None)? } else { p.clone() };
                let k = [1, p[0] as i64, p[1] as i64, p[2] as i64, 1];
                let stv = [1, st[0] as i64, st[1] as i64, st[2] as i64, 1];
                let pad = pad_mode(l)?;
                one(if c == "MaxPooling3D" { s.max_pool3d(x, &k, &stv, pad)? } else { s.avg_pool3d(x, &k, &stv, pad)? })
            }
            (_, c @ ("GlobalMaxPooling3D" | "GlobalAveragePooling3D")) => {
                let keep = l.get("keepdims").and_then(Value::as_bool).unwrap_or(false);
                one(s.reduce(if c.contains("Max") { "Max" } else { "Mean" }, x, &[1, 2, 3], keep)?)
            }
            (_, "UnitNormalization") => {
                let rank = net.dims(x, l)?.len() as i64;
                let axes: Vec<i32> = match l.get("axis") {
                    Some(Value::Array(a)) => a.iter().map(|v| v.as_i64().unwrap_or(-1)).collect::<Vec<_>>(),
                    Some(v) => vec![v.as_i64().unwrap_or(-1)],
                    None => vec![-1],
                }
                .into_iter()
                .map(|a| (if a < 0 { a + rank } else { a }) as i32)
                .collect();
                let norm = s.sqrt(s.reduce("Sum", s.square(x)?, &axes, true)?)?;
                one(s.real_div(x, s.maximum(norm, 1e-7f32)?)?)
            }
            (_, "GroupNormalization") => {
                let dims = net.dims(x, l)?;
                let rank = dims.len();
                if l.get("axis").and_then(Value::as_i64).is_some_and(|a| a != -1 && a != rank as i64 - 1) {
                    return Err(err(l, "group normalization over another axis than the last is not supported"));
                }
                let c = dims[rank - 1].ok_or_else(|| err(l, "unknown channels"))?;
                let groups = ints(l, "groups", 1, Some(32))?[0].max(1);
                if c % groups != 0 {
                    return Err(err(l, format!("{c} channels do not split into {groups} groups")));
                }
                let eps = l.get("epsilon").and_then(Value::as_f64).unwrap_or(1e-3);
                let (center, scale) = (
                    l.get("center").and_then(Value::as_bool).unwrap_or(true),
                    l.get("scale").and_then(Value::as_bool).unwrap_or(true),
                );
                let mut specs = Vec::new();
                if scale {
                    specs.push(layers::weight("gamma", vec![c], Initializer::Ones));
                }
                if center {
                    specs.push(layers::weight("beta", vec![c], Initializer::Zeros));
                }
                let vars = net.weights_of(l, path, specs, trainable)?;
                let mut shape: Vec<i32> = vec![-1];
                for d in &dims[1..rank - 1] {
                    shape.push(d.ok_or_else(|| err(l, "spatial dimensions must be known"))? as i32);
                }
                shape.extend([groups as i32, (c / groups) as i32]);
                let r = s.reshape(x, &shape[..])?;
                let red: Vec<i32> = (1..shape.len() as i32).filter(|&a| a != shape.len() as i32 - 2).collect();
                let mean = s.reduce("Mean", r, &red, true)?;
                let var = s.reduce("Mean", s.squared_difference(r, mean)?, &red, true)?;
                let mut inv = s.rsqrt(s.add_v2(var, eps as f32)?)?;
                let gshape = [groups as i32, (c / groups) as i32];
                let mut it = vars.iter();
                if scale {
                    inv = s.mul(inv, s.reshape(*it.next().expect("gamma"), &gshape[..])?)?;
                }
                let mut res = s.neg(s.mul(mean, inv)?)?;
                if center {
                    res = s.add_v2(res, s.reshape(*it.next().expect("beta"), &gshape[..])?)?;
                }
                let y = s.add_v2(s.mul(r, inv)?, res)?;
                let mut back: Vec<i32> = vec![-1];
                back.extend(shape[1..shape.len() - 2].iter());
                back.push(c as i32);
                one(s.reshape(y, &back[..])?)
            }
            (_, "CenterCrop" | "Resizing") => {
                let dims = net.dims(x, l)?;
                let (h, w) = match (dims.get(1).copied().flatten(), dims.get(2).copied().flatten()) {
                    (Some(h), Some(w)) if dims.len() == 4 => (h, w),
                    _ => return Err(err(l, "needs NHWC input of known height and width")),
                };
                let th = ints(l, "height", 1, None)?[0];
                let tw = ints(l, "width", 1, None)?[0];
                let x = if s.dtype(x) == DType::Float { x } else { s.cast(x, DType::Float)? };
                if l.class == "CenterCrop" {
                    if th > h || tw > w {
                        return Err(err(l, "center-cropping to a larger size is not supported"));
                    }
                    let (top, left) = ((h - th) / 2, (w - tw) / 2);
                    return one(s.slice(
                        x,
                        &[0, top as i32, left as i32, 0][..],
                        &[-1, th as i32, tw as i32, -1][..],
                    )?);
                }
                let mut x = x;
                if l.get("crop_to_aspect_ratio").and_then(Value::as_bool).unwrap_or(false) {
                    let ch = ((w * th) as f64 / tw as f64) as usize;
                    let ch = ch.min(h).max(1);
                    let cw = ((h * tw) as f64 / th as f64) as usize;
                    let cw = cw.min(w).max(1);
                    let (top, left) = ((h - ch) / 2, (w - cw) / 2);
                    x = s.slice(x, &[0, top as i32, left as i32, 0][..], &[-1, ch as i32, cw as i32, -1][..])?;
                }
                let (ih, iw) = {
                    let d = net.dims(x, l)?;
                    (d[1].unwrap_or(h), d[2].unwrap_or(w))
                };
                let size = [th as i32, tw as i32];
                let y = match l.get("interpolation").and_then(Value::as_str).unwrap_or("bilinear") {
                    "bilinear" => {
                        s.resize_bilinear_with(x, &size, attrs::ResizeBilinear::new().half_pixel_centers(true))?
                    }
                    "nearest" => s.resize_nearest_neighbor_with(
                        x,
                        &size,
                        attrs::ResizeNearestNeighbor::new().half_pixel_centers(true),
                    )?,
                    "bicubic" => {
                        s.resize_bicubic_with(x, &size, attrs::ResizeBicubic::new().half_pixel_centers(true))?
                    }
                    "area" => s.resize_area(x, &size)?,
                    k @ ("lanczos3" | "lanczos5" | "gaussian" | "mitchellcubic") => {
                        let scale = [th as f32 / ih as f32, tw as f32 / iw as f32];
                        let opts = attrs::ScaleAndTranslate::new().kernel_type(k).antialias(false);
                        s.scale_and_translate_with(x, &size, &scale, &[0.0f32, 0.0], opts)?
                    }
                    other => return Err(err(l, format!("interpolation '{other}' is not supported"))),
                };
                one(y)
            }
            (_, "Softmax") => {
                let rank = net.dims(x, l)?.len() as i64;
                match l.get("axis").and_then(Value::as_i64) {
                    None | Some(-1) => one(s.softmax(x)?),
                    Some(a) if a == rank - 1 => one(s.softmax(x)?),
                    Some(a) => Err(err(l, format!("softmax over axis {a} is not supported"))),
                }
            }
            _ => Err(err(l, "unreachable")),
        }
    };
    let known = matches!(
        l.class.as_str(),
        "Conv1D"
            | "SeparableConv1D"
            | "Conv3D"
            | "Conv2DTranspose"
            | "Conv3DTranspose"
            | "ZeroPadding1D"
            | "ZeroPadding3D"
            | "Cropping1D"
            | "Cropping3D"
            | "MaxPooling3D"
            | "AveragePooling3D"
            | "GlobalMaxPooling3D"
            | "GlobalAveragePooling3D"
            | "UnitNormalization"
            | "GroupNormalization"
            | "CenterCrop"
            | "Resizing"
            | "Softmax"
    ) || (l.module.as_deref().is_some_and(|m| m.starts_with("keras.src.ops"))
        && matches!(
            l.class.as_str(),
            "GetItem" | "NotEqual" | "Equal" | "Greater" | "GreaterEqual" | "Less" | "LessEqual"
        ));
    known.then(f)
}
