//! Keras layers as ferroflow ops: for each layer class, its weights (names, shapes and order
//! as Keras creates them, which is the order its files store them) and its call, built
//! through the op surface. Computations follow Keras 3's TensorFlow backend (`Dense` is
//! `MatMul` + `BiasAdd`, `BatchNormalization` on 4-D input `FusedBatchNormV3`, ...).
use std::cell::RefCell;
use std::collections::HashMap;

use ferroflow_graph::{NodeId, Output};
use ferroflow_ops::{attrs, Ops, RawOps, Scope, ShapeTracker};
use ferroflow_tensor::{DType, Shape, Tensor};
use ferroflow_train::{Builder, Distribution, FanMode, Initializer, Variable};
use serde_json::Value;

use crate::config::{Arg, Call, LayerSpec};
use crate::{KerasError, Result};

/// A weight a layer creates.
#[derive(Clone, Debug)]
pub struct WeightSpec {
    /// Keras's variable name (`kernel`, `gamma`, `moving_mean`).
    pub name: String,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Whether an optimizer may train it (before freezing).
    pub trainable: bool,
    /// How a new model initializes it.
    pub init: Initializer,
    /// Its element type (float32 but for counters such as Normalization's int64 `count`).
    pub dtype: DType,
}

/// The weights of one layer in a built model.
#[derive(Clone, Debug)]
pub struct LayerWeights {
    /// Names from the outer model in: `["efficientnetb0", "stem_conv"]`.
    pub path: Vec<String>,
    /// Keras's class name.
    pub class: String,
    /// Whether the layer is trainable (its own flag and every enclosing model's).
    pub trainable: bool,
    /// The variables, in Keras's order, with their Keras names.
    pub vars: Vec<(WeightSpec, Variable)>,
}

/// How a call runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mode {
    /// Keras's `training` argument (false: inference mode for certain).
    pub training: bool,
    /// Whether the layer is trainable (a frozen BatchNormalization runs in inference mode).
    pub trainable: bool,
    /// With `training`: a boolean placeholder deciding it at run time (Keras's learning
    /// phase: true in training steps, false when evaluating); `None`: training for certain.
    pub phase: Option<Output>,
}

impl Mode {
    /// Builds `train` or `infer` on `inputs` as the mode says: one of them when it is known
    /// at build time, a `cond` on the learning phase otherwise. Both give as many outputs.
    pub fn switch(
        &self,
        s: &Scope,
        inputs: &[Output],
        train: impl FnOnce(&Scope, &[Output]) -> R<Vec<Output>>,
        infer: impl FnOnce(&Scope, &[Output]) -> R<Vec<Output>>,
    ) -> R<Vec<Output>> {
        match (self.training, self.phase) {
            (false, _) => infer(s, inputs),
            (true, None) => train(s, inputs),
            (true, Some(phase)) => s.cond::<KerasError>(phase, inputs, train, infer),
        }
    }
}

/// A model's graph while it is built: the builder, shapes of what is built, the layers'
/// variables (made at a layer's first call, shared by its later calls), the update ops of
/// batch normalization in training mode.
pub struct Net {
    /// The builder.
    pub b: Builder,
    shapes: RefCell<ShapeTracker>,
    vars: RefCell<HashMap<String, usize>>,
    /// Every layer with weights, in creation order.
    pub weights: RefCell<Vec<LayerWeights>>,
    /// Moving-statistics updates of the training-mode calls.
    pub updates: RefCell<Vec<NodeId>>,
    /// Calibrating BatchNormalization: every one (frozen ones too) normalizes with the
    /// batch's statistics and takes them as its moving ones (momentum 0); dropout is off.
    pub calibrating: bool,
}

type R<T> = Result<T>;

pub(crate) fn layer_err(l: &LayerSpec, reason: impl Into<String>) -> KerasError {
    KerasError::Layer { layer: l.name.clone(), class: l.class.clone(), reason: reason.into() }
}

impl Net {
    /// A net over `b`.
    pub fn new(b: Builder) -> Net {
        Net {
            b,
            shapes: RefCell::default(),
            vars: RefCell::default(),
            weights: RefCell::default(),
            updates: RefCell::default(),
            calibrating: false,
        }
    }

    /// The static shape of `o`.
    pub fn shape(&self, o: Output) -> R<Shape> {
        let s = self.b.scope().with_graph(|g| self.shapes.borrow_mut().shape(g, o));
        s.map_err(|e| KerasError::Build(ferroflow_train::TrainError::from(ferroflow_ops::BuildError::from(e))))
    }

    /// The static dimensions of `o` (`None` for unknown ones); its rank must be known.
    pub fn dims(&self, o: Output, l: &LayerSpec) -> R<Vec<Option<usize>>> {
        let s = self.shape(o)?;
        s.dims().map(<[Option<usize>]>::to_vec).ok_or_else(|| layer_err(l, "the input's rank is unknown"))
    }

    fn last_dim(&self, o: Output, l: &LayerSpec) -> R<usize> {
        self.dims(o, l)?.last().copied().flatten().ok_or_else(|| {
            layer_err(
                l,
                format!(
                    "the input's last dimension must be known, got {}",
                    self.shape(o).unwrap_or_else(|_| Shape::unknown())
                ),
            )
        })
    }

    /// The variables of the layer at `path` (made now at its first call).
    pub(crate) fn weights_of(
        &self,
        l: &LayerSpec,
        path: &[String],
        specs: Vec<WeightSpec>,
        trainable: bool,
    ) -> R<Vec<Output>> {
        let key = path.join("/");
        if let Some(&i) = self.vars.borrow().get(&key) {
            let w = &self.weights.borrow()[i];
            for (spec, (old, _)) in specs.iter().zip(&w.vars) {
                if spec.shape != old.shape {
                    return Err(layer_err(
                        l,
                        format!(
                            "called again on an input that makes '{}' {:?}, not {:?}",
                            spec.name, spec.shape, old.shape
                        ),
                    ));
                }
            }
            return Ok(w.vars.iter().map(|(_, v)| v.value).collect());
        }
        let scope = self.b.scope().reenter(&key);
        let mut vars = Vec::with_capacity(specs.len());
        for spec in specs {
            let v = self.b.variable(
                &scope,
                &spec.name,
                &spec.shape,
                spec.dtype,
                &spec.init,
                spec.trainable && trainable,
            )?;
            vars.push((spec, v));
        }
        let values = vars.iter().map(|(_, v)| v.value).collect();
        if !vars.is_empty() {
            let mut ws = self.weights.borrow_mut();
            self.vars.borrow_mut().insert(key, ws.len());
            ws.push(LayerWeights { path: path.to_vec(), class: l.class.clone(), trainable, vars });
        }
        Ok(values)
    }
}

// ---------------------------------------------------------------------------------------------
// Config values

pub(crate) fn int_list(l: &LayerSpec, key: &str, n: usize, default: Option<usize>) -> R<Vec<usize>> {
    let v = match l.get(key) {
        None => return default.map(|d| vec![d; n]).ok_or_else(|| layer_err(l, format!("config has no '{key}'"))),
        Some(v) => v,
    };
    let one = |v: &Value| {
        v.as_u64()
            .and_then(|x| usize::try_from(x).ok())
            .filter(|&x| x < 1 << 24)
            .ok_or_else(|| layer_err(l, format!("'{key}' must hold non-negative integers, got {v}")))
    };
    match v {
        Value::Array(a) if a.len() == n => a.iter().map(one).collect(),
        Value::Array(a) if a.len() == 1 => Ok(vec![one(&a[0])?; n]),
        Value::Array(a) => Err(layer_err(l, format!("'{key}' must have {n} values, got {}", a.len()))),
        v => Ok(vec![one(v)?; n]),
    }
}

fn float(l: &LayerSpec, key: &str, default: f64) -> R<f64> {
    match l.get(key) {
        None => Ok(default),
        Some(v) => v.as_f64().ok_or_else(|| layer_err(l, format!("'{key}' must be a number, got {v}"))),
    }
}

fn boolean(l: &LayerSpec, key: &str, default: bool) -> bool {
    l.get(key).and_then(Value::as_bool).unwrap_or(default)
}

fn string<'a>(l: &'a LayerSpec, key: &str, default: &'a str) -> &'a str {
    l.get(key).and_then(Value::as_str).unwrap_or(default)
}

fn padding(l: &LayerSpec) -> R<&'static str> {
    match string(l, "padding", "valid").to_ascii_lowercase().as_str() {
        "valid" => Ok("VALID"),
        "same" => Ok("SAME"),
        other => Err(layer_err(l, format!("padding '{other}' is not supported here (valid or same)"))),
    }
}

fn channels_last(l: &LayerSpec) -> R<()> {
    match string(l, "data_format", "channels_last") {
        "channels_last" => Ok(()),
        other => Err(layer_err(l, format!("data_format '{other}' is not supported (channels_last only)"))),
    }
}

/// A Keras initializer from a layer's config (`{"class_name": "GlorotUniform", ...}` or a
/// name); `default` when absent.
fn initializer(l: &LayerSpec, key: &str, default: Initializer) -> R<Initializer> {
    match l.get(key) {
        None => Ok(default),
        Some(v) => initializer_from(v, default).ok_or_else(|| layer_err(l, format!("'{key}' is not an initializer"))),
    }
}

/// A serialized Keras initializer (a class name or `{"class_name", "config"}`); `default` for
/// classes ferroflow has no initializer of (they only matter for a model built without its
/// weights); `None` for a value that is no initializer.
pub(crate) fn initializer_from(v: &Value, default: Initializer) -> Option<Initializer> {
    let (class, cfg) = match v {
        Value::String(s) => (s.as_str(), None),
        Value::Object(o) => (o.get("class_name").and_then(Value::as_str).unwrap_or(""), o.get("config")),
        _ => return None,
    };
    let num = |k: &str, d: f64| cfg.and_then(|c| c.get(k)).and_then(Value::as_f64).unwrap_or(d);
    let seed = cfg.and_then(|c| c.get("seed")).and_then(Value::as_i64);
    let scaling = |scale: f64, mode: FanMode, distribution: Distribution| Initializer::VarianceScaling {
        scale,
        mode,
        distribution,
        seed,
    };
    Some(match class {
        "Zeros" | "zeros" => Initializer::Zeros,
        "Ones" | "ones" => Initializer::Ones,
        "Constant" | "constant" => Initializer::Constant(num("value", 0.0)),
        // Orthogonal (recurrent kernels' default) has no ferroflow initializer: Glorot uniform
        // stands in for it.
        "GlorotUniform" | "glorot_uniform" | "Orthogonal" | "orthogonal" => {
            scaling(1.0, FanMode::FanAvg, Distribution::Uniform)
        }
        "GlorotNormal" | "glorot_normal" => scaling(1.0, FanMode::FanAvg, Distribution::TruncatedNormal),
        "HeUniform" | "he_uniform" => scaling(2.0, FanMode::FanIn, Distribution::Uniform),
        "HeNormal" | "he_normal" => scaling(2.0, FanMode::FanIn, Distribution::TruncatedNormal),
        "LecunUniform" | "lecun_uniform" => scaling(1.0, FanMode::FanIn, Distribution::Uniform),
        "LecunNormal" | "lecun_normal" => scaling(1.0, FanMode::FanIn, Distribution::TruncatedNormal),
        "RandomNormal" | "random_normal" => {
            Initializer::RandomNormal { mean: num("mean", 0.0), stddev: num("stddev", 0.05), seed }
        }
        "TruncatedNormal" | "truncated_normal" => {
            Initializer::TruncatedNormal { mean: num("mean", 0.0), stddev: num("stddev", 0.05), seed }
        }
        "RandomUniform" | "random_uniform" => {
            Initializer::RandomUniform { minval: num("minval", -0.05), maxval: num("maxval", 0.05), seed }
        }
        "VarianceScaling" | "variance_scaling" => {
            let c = cfg.and_then(Value::as_object);
            let s = |k: &str| c.and_then(|c| c.get(k)).and_then(Value::as_str).unwrap_or("");
            let mode = match s("mode") {
                "fan_out" => FanMode::FanOut,
                "fan_avg" => FanMode::FanAvg,
                _ => FanMode::FanIn,
            };
            let distribution = match s("distribution") {
                "uniform" => Distribution::Uniform,
                "untruncated_normal" => Distribution::Normal,
                _ => Distribution::TruncatedNormal,
            };
            scaling(num("scale", 1.0), mode, distribution)
        }
        // Unknown initializers only matter for a model built without its weights.
        _ => default,
    })
}

pub(crate) fn glorot() -> Initializer {
    Initializer::VarianceScaling { scale: 1.0, mode: FanMode::FanAvg, distribution: Distribution::Uniform, seed: None }
}

/// A trainable float weight.
pub(crate) fn weight(name: &str, shape: Vec<usize>, init: Initializer) -> WeightSpec {
    w(name, shape, true, init)
}

fn w(name: &str, shape: Vec<usize>, trainable: bool, init: Initializer) -> WeightSpec {
    WeightSpec { name: name.to_string(), shape, trainable, init, dtype: DType::Float }
}

// ---------------------------------------------------------------------------------------------
// Activations

/// Keras's activation `name` of `x`.
pub fn activation(s: &Scope, x: Output, name: &str) -> std::result::Result<Output, String> {
    let e = |e: ferroflow_ops::BuildError| e.to_string();
    let hard_sigmoid = |x: Output| -> std::result::Result<Output, ferroflow_ops::BuildError> {
        let r = s.relu6(s.add_v2(x, 3.0f32)?)?;
        s.mul(r, 1.0f32 / 6.0)
    };
    Ok(match name {
        "linear" | "identity" => x,
        "relu" => s.relu(x).map_err(e)?,
        "relu6" => s.relu6(x).map_err(e)?,
        "sigmoid" => s.sigmoid(x).map_err(e)?,
        "tanh" => s.tanh(x).map_err(e)?,
        "softmax" => s.softmax(x).map_err(e)?,
        "log_softmax" => s.log_softmax(x).map_err(e)?,
        "swish" | "silu" => s.mul(x, s.sigmoid(x).map_err(e)?).map_err(e)?,
        "gelu" => {
            // Keras 3's default (approximate=False): 0.5·x·(1 + erf(x/√2)).
            let erf = s.erf(s.mul(x, std::f32::consts::FRAC_1_SQRT_2).map_err(e)?).map_err(e)?;
            s.mul(s.mul(x, 0.5f32).map_err(e)?, s.add_v2(erf, 1.0f32).map_err(e)?).map_err(e)?
        }
        "hard_sigmoid" => hard_sigmoid(x).map_err(e)?,
        "hard_swish" | "hard_silu" => s.mul(x, hard_sigmoid(x).map_err(e)?).map_err(e)?,
        "elu" => s.elu(x).map_err(e)?,
        "selu" => s.selu(x).map_err(e)?,
        "softplus" => s.softplus(x).map_err(e)?,
        "softsign" => s.softsign(x).map_err(e)?,
        "exponential" => s.exp(x).map_err(e)?,
        "leaky_relu" => s.leaky_relu_with(x, attrs::LeakyRelu::new().alpha(0.2)).map_err(e)?,
        "mish" => s.mul(x, s.tanh(s.softplus(x).map_err(e)?).map_err(e)?).map_err(e)?,
        other => match crate::more::composite_activation(s, x, other) {
            Some(r) => r.map_err(e)?,
            None => return Err(format!("activation '{other}' is not supported")),
        },
    })
}

/// The activation a layer's config names (`"activation": "relu"` or a serialized function).
fn activation_name(l: &LayerSpec) -> R<String> {
    match l.get("activation") {
        None => Ok("linear".into()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Object(o)) => {
            let c = o.get("config");
            if o.get("class_name").and_then(Value::as_str) == Some("__lambda__") {
                return Err(layer_err(l, "its activation is a Python lambda, which ferroflow cannot run"));
            }
            c.and_then(Value::as_str)
                .or_else(|| c.and_then(|c| c.get("name")).and_then(Value::as_str))
                .or_else(|| o.get("class_name").and_then(Value::as_str))
                .map(str::to_string)
                .ok_or_else(|| layer_err(l, "its activation cannot be read"))
        }
        Some(v) => Err(layer_err(l, format!("activation {v} cannot be read"))),
    }
}

fn activate(l: &LayerSpec, s: &Scope, x: Output) -> R<Output> {
    let name = activation_name(l)?;
    activation(s, x, &name).map_err(|m| layer_err(l, m))
}

// ---------------------------------------------------------------------------------------------
// Calls

/// The values of a call's arguments other than tensors: `x + 3.0` as an op layer.
fn constant_arg(s: &Scope, a: &Arg) -> R<Option<Output>> {
    match a {
        Arg::Value(Value::Number(n)) => Ok(Some(s.scalar(n.as_f64().unwrap_or(0.0) as f32)?)),
        _ => Ok(None),
    }
}

/// Builds one call of layer `l` (at `path`) on `inputs` (the call's tensors, positional
/// first). Returns its outputs.
pub fn call(net: &Net, l: &LayerSpec, path: &[String], inputs: &[Output], call: &Call, mode: Mode) -> R<Vec<Output>> {
    let op_scope = net.b.scope().name_scope(&path.join("/"));
    let s = &op_scope;
    let x = || inputs.first().copied().ok_or_else(|| layer_err(l, "called without an input tensor"));
    let dtype_ok = |o: Output| {
        let d = s.dtype(o);
        if d == DType::Float || matches!(l.class.as_str(), "Embedding" | "InputLayer") {
            Ok(())
        } else {
            Err(layer_err(l, format!("input is {d}; ferroflow runs Keras layers in float32")))
        }
    };
    if let Some(dt) = l.get("dtype") {
        let policy = dt.as_str().or_else(|| dt.get("config").and_then(|c| c.get("name")).and_then(Value::as_str));
        if let Some(p) = policy.filter(|p| *p != "float32") {
            return Err(layer_err(l, format!("dtype policy '{p}' is not supported (float32 only)")));
        }
    }
    if let Some(r) = crate::more::call(net, l, path, s, inputs, call, mode) {
        return r;
    }
    if let Some(r) = crate::sequence::call(net, l, path, s, inputs, call, mode) {
        return r;
    }
    let one = |o: Output| Ok(vec![o]);
    let trainable = mode.trainable;
    match (l.module.as_deref(), l.class.as_str()) {
        (Some(m), op) if m.starts_with("keras.src.ops") => {
            // An operation on Keras tensors in a functional model (`x + 3.0`, `a * b`).
            let mut vals = Vec::new();
            let mut it = inputs.iter();
            for a in &call.args {
                match a {
                    Arg::Tensor(_) => vals.push(*it.next().ok_or_else(|| layer_err(l, "missing a tensor"))?),
                    other => vals.push(constant_arg(s, other)?.ok_or_else(|| {
                        layer_err(l, format!("operation '{op}' takes an argument ferroflow cannot read"))
                    })?),
                }
            }
            if vals.len() != 2 {
                return Err(layer_err(l, format!("operation '{op}' is not supported")));
            }
            let (a, b) = (vals[0], vals[1]);
            one(match op {
                "Add" => s.add_v2(a, b)?,
                "Subtract" => s.sub(a, b)?,
                "Multiply" => s.mul(a, b)?,
                "Divide" | "TrueDivide" => s.real_div(a, b)?,
                "Maximum" => s.maximum(a, b)?,
                "Minimum" => s.minimum(a, b)?,
                _ => return Err(layer_err(l, format!("operation '{op}' is not supported"))),
            })
        }
        (_, "InputLayer") => one(x()?),
        (_, "Dense") => {
            let x = x()?;
            dtype_ok(x)?;
            let units = int_list(l, "units", 1, None)?[0];
            let dims = net.dims(x, l)?;
            let inn = net.last_dim(x, l)?;
            let use_bias = boolean(l, "use_bias", true);
            let mut specs = vec![w("kernel", vec![inn, units], true, initializer(l, "kernel_initializer", glorot())?)];
            if use_bias {
                specs.push(w("bias", vec![units], true, initializer(l, "bias_initializer", Initializer::Zeros)?));
            }
            let vars = net.weights_of(l, path, specs, trainable)?;
            let mut y = if dims.len() == 2 {
                s.matmul(x, vars[0], false, false)?
            } else {
                let lead: Vec<i32> = dims[1..dims.len() - 1]
                    .iter()
                    .map(|d| d.map(|d| d as i32).ok_or_else(|| layer_err(l, "inner dimensions must be known")))
                    .collect::<R<_>>()?;
                let flat = s.reshape(x, &[-1, inn as i32])?;
                let y = s.matmul(flat, vars[0], false, false)?;
                let mut shape = vec![-1];
                shape.extend(lead);
                shape.push(units as i32);
                s.reshape(y, &shape[..])?
            };
            if use_bias {
                y = s.bias_add(y, vars[1])?;
            }
            one(activate(l, s, y)?)
        }
        (_, "Conv2D") => {
            let x = x()?;
            dtype_ok(x)?;
            channels_last(l)?;
            let filters = int_list(l, "filters", 1, None)?[0];
            let k = int_list(l, "kernel_size", 2, None)?;
            let st = int_list(l, "strides", 2, Some(1))?;
            let dil = int_list(l, "dilation_rate", 2, Some(1))?;
            let groups = int_list(l, "groups", 1, Some(1))?[0].max(1);
            let inn = net.last_dim(x, l)?;
            if inn % groups != 0 || filters % groups != 0 {
                return Err(layer_err(
                    l,
                    format!("{inn} input channels and {filters} filters are not divisible into {groups} groups"),
                ));
            }
            let use_bias = boolean(l, "use_bias", true);
            let mut specs = vec![w(
                "kernel",
                vec![k[0], k[1], inn / groups, filters],
                true,
                initializer(l, "kernel_initializer", glorot())?,
            )];
            if use_bias {
                specs.push(w("bias", vec![filters], true, initializer(l, "bias_initializer", Initializer::Zeros)?));
            }
            let vars = net.weights_of(l, path, specs, trainable)?;
            let opts = attrs::Conv2D::new().dilations(&[1, dil[0] as i64, dil[1] as i64, 1]);
            let mut y = s.conv2d_with(x, vars[0], &[1, st[0] as i64, st[1] as i64, 1], padding(l)?, opts)?;
            if use_bias {
                y = s.bias_add(y, vars[1])?;
            }
            one(activate(l, s, y)?)
        }
        (_, "DepthwiseConv2D") | (_, "SeparableConv2D") => {
            let x = x()?;
            dtype_ok(x)?;
            channels_last(l)?;
            let separable = l.class == "SeparableConv2D";
            let k = int_list(l, "kernel_size", 2, None)?;
            let st = int_list(l, "strides", 2, Some(1))?;
            let dil = int_list(l, "dilation_rate", 2, Some(1))?;
            let mult = int_list(l, "depth_multiplier", 1, Some(1))?[0].max(1);
            let inn = net.last_dim(x, l)?;
            let use_bias = boolean(l, "use_bias", true);
            let mut specs = Vec::new();
            let dw_init = initializer(l, "depthwise_initializer", glorot())?;
            let out = if separable {
                let filters = int_list(l, "filters", 1, None)?[0];
                specs.push(w("depthwise_kernel", vec![k[0], k[1], inn, mult], true, dw_init));
                let pw_init = initializer(l, "pointwise_initializer", glorot())?;
                specs.push(w("pointwise_kernel", vec![1, 1, inn * mult, filters], true, pw_init));
                filters
            } else {
                specs.push(w("kernel", vec![k[0], k[1], inn, mult], true, dw_init));
                inn * mult
            };
            if use_bias {
                specs.push(w("bias", vec![out], true, initializer(l, "bias_initializer", Initializer::Zeros)?));
            }
            let vars = net.weights_of(l, path, specs, trainable)?;
            let opts = attrs::DepthwiseConv2dNative::new().dilations(&[1, dil[0] as i64, dil[1] as i64, 1]);
            let pad = padding(l)?;
            let mut y = s.depthwise_conv2d_native_with(x, vars[0], &[1, st[0] as i64, st[1] as i64, 1], pad, opts)?;
            if separable {
                y = s.conv2d(y, vars[1], &[1, 1, 1, 1], "VALID")?;
            }
            if use_bias {
                y = s.bias_add(y, *vars.last().expect("bias"))?;
            }
            one(activate(l, s, y)?)
        }
        (_, "BatchNormalization") => batch_norm(net, l, path, s, x()?, mode),
        (_, "LayerNormalization") => {
            let x = x()?;
            dtype_ok(x)?;
            let rank = net.dims(x, l)?.len();
            let axes = axes(l, "axis", rank, &[-1])?;
            let eps = float(l, "epsilon", 1e-3)?;
            let (center, scale) = (boolean(l, "center", true), boolean(l, "scale", true));
            if boolean(l, "rms_scaling", false) {
                return Err(layer_err(l, "rms_scaling is not supported"));
            }
            let dims = net.dims(x, l)?;
            let pshape: Vec<usize> = axes
                .iter()
                .map(|&a| dims[a].ok_or_else(|| layer_err(l, "normalized dimensions must be known")))
                .collect::<R<_>>()?;
            let mut specs = Vec::new();
            if scale {
                specs.push(w("gamma", pshape.clone(), true, initializer(l, "gamma_initializer", Initializer::Ones)?));
            }
            if center {
                specs.push(w("beta", pshape.clone(), true, initializer(l, "beta_initializer", Initializer::Zeros)?));
            }
            let vars = net.weights_of(l, path, specs, trainable)?;
            let ax: Vec<i32> = axes.iter().map(|&a| a as i32).collect();
            // Keras 3: moments, then x·inv + (β − mean·inv), inv = rsqrt(var + ε)·γ.
            let mean = s.reduce("Mean", x, &ax, true)?;
            let var = s.reduce("Mean", s.squared_difference(x, mean)?, &ax, true)?;
            let mut inv = s.rsqrt(s.add_v2(var, eps as f32)?)?;
            let bshape: Vec<i32> =
                (0..rank).map(|i| if axes.contains(&i) { dims[i].unwrap_or(1) as i32 } else { 1 }).collect();
            let mut next = vars.iter();
            if scale {
                inv = s.mul(inv, s.reshape(*next.next().expect("gamma"), &bshape[..])?)?;
            }
            let shift = s.neg(s.mul(mean, inv)?)?;
            let shift =
                if center { s.add_v2(shift, s.reshape(*next.next().expect("beta"), &bshape[..])?)? } else { shift };
            one(s.add_v2(s.mul(x, inv)?, shift)?)
        }
        (_, "Activation") => one(activate(l, s, x()?)?),
        (_, "ReLU") => {
            let x = x()?;
            let max = l.get("max_value").and_then(Value::as_f64);
            let slope = float(l, "negative_slope", 0.0)?;
            let threshold = float(l, "threshold", 0.0)?;
            if slope != 0.0 || threshold != 0.0 {
                return Err(layer_err(l, "ReLU with a negative slope or threshold is not supported"));
            }
            one(match max {
                Some(6.0) => s.relu6(x)?,
                Some(m) => s.minimum(s.relu(x)?, m as f32)?,
                None => s.relu(x)?,
            })
        }
        (_, "Identity") | (_, "Dropout") | (_, "SpatialDropout2D") | (_, "GaussianNoise") | (_, "GaussianDropout")
            if !mode.training || l.class == "Identity" =>
        {
            one(s.identity(x()?)?)
        }
        (_, "Dropout") => {
            let x = x()?;
            let rate = float(l, "rate", 0.0)?;
            if rate <= 0.0 {
                return one(s.identity(x)?);
            }
            if rate >= 1.0 {
                return Err(layer_err(l, format!("rate must be below 1, got {rate}")));
            }
            let seed = l.get("seed").and_then(Value::as_i64);
            let noise_shape = l.get("noise_shape").and_then(Value::as_array).cloned();
            let drop = |s: &Scope, ins: &[Output]| -> R<Vec<Output>> {
                let x = ins[0];
                let shape = match &noise_shape {
                    Some(ns) => {
                        let full = s.shape(x)?;
                        let parts: Vec<Output> = ns
                            .iter()
                            .enumerate()
                            .map(|(i, d)| match d.as_i64() {
                                Some(d) => Ok(s.constant_from(&[1], &[d as i32])?),
                                None => Ok(s.strided_slice(full, &[i as i32][..], &[i as i32 + 1][..], &[1i32][..])?),
                            })
                            .collect::<R<_>>()?;
                        s.concat_v2(&parts, 0i32)?
                    }
                    None => s.shape(x)?,
                };
                let r = net.b.random(s, "RandomUniform", shape, DType::Float, seed)?;
                let keep = s.cast(s.greater_equal(r, rate as f32)?, DType::Float)?;
                Ok(vec![s.mul(s.mul(x, (1.0 / (1.0 - rate)) as f32)?, keep)?])
            };
            let mode = Mode { training: mode.training && !net.calibrating, ..mode };
            mode.switch(s, &[x], drop, |s, ins| Ok(vec![s.identity(ins[0])?]))
        }
        (_, "Add") | (_, "Multiply") | (_, "Subtract") | (_, "Average") | (_, "Maximum") | (_, "Minimum") => {
            if inputs.len() < 2 {
                return Err(layer_err(l, format!("needs at least 2 inputs, got {}", inputs.len())));
            }
            let mut acc = inputs[0];
            for &o in &inputs[1..] {
                acc = match l.class.as_str() {
                    "Add" | "Average" => s.add_v2(acc, o)?,
                    "Multiply" => s.mul(acc, o)?,
                    "Subtract" => s.sub(acc, o)?,
                    "Maximum" => s.maximum(acc, o)?,
                    _ => s.minimum(acc, o)?,
                };
            }
            if l.class == "Average" {
                acc = s.mul(acc, 1.0f32 / inputs.len() as f32)?;
            }
            one(acc)
        }
        (_, "Concatenate") => {
            let rank = net.dims(x()?, l)?.len() as i64;
            let axis = l.get("axis").and_then(Value::as_i64).unwrap_or(-1);
            let axis = if axis < 0 { axis + rank } else { axis };
            one(s.concat_v2(inputs, axis as i32)?)
        }
        (_, "MaxPooling2D") | (_, "AveragePooling2D") => {
            let x = x()?;
            channels_last(l)?;
            let p = int_list(l, "pool_size", 2, Some(2))?;
            let st = match l.get("strides") {
                Some(_) => int_list(l, "strides", 2, None)?,
                None => p.clone(),
            };
            let k = [1, p[0] as i64, p[1] as i64, 1];
            let st = [1, st[0] as i64, st[1] as i64, 1];
            one(if l.class == "MaxPooling2D" {
                s.max_pool(x, &k, &st, padding(l)?)?
            } else {
                s.avg_pool(x, &k, &st, padding(l)?)?
            })
        }
        (_, "MaxPooling1D") | (_, "AveragePooling1D") => {
            let x = s.expand_dims(x()?, 1i32)?;
            let p = int_list(l, "pool_size", 1, Some(2))?[0];
            let st = match l.get("strides") {
                Some(_) => int_list(l, "strides", 1, None)?[0],
                None => p,
            };
            let k = [1, 1, p as i64, 1];
            let stv = [1, 1, st as i64, 1];
            let y = if l.class == "MaxPooling1D" {
                s.max_pool(x, &k, &stv, padding(l)?)?
            } else {
                s.avg_pool(x, &k, &stv, padding(l)?)?
            };
            one(s.squeeze_with(y, attrs::Squeeze::new().squeeze_dims(&[1]))?)
        }
        (
            _,
            c @ ("GlobalAveragePooling2D" | "GlobalMaxPooling2D" | "GlobalAveragePooling1D" | "GlobalMaxPooling1D"),
        ) => {
            let x = x()?;
            let keep = boolean(l, "keepdims", false);
            let ax: &[i32] = if c.ends_with("2D") { &[1, 2] } else { &[1] };
            one(s.reduce(if c.contains("Average") { "Mean" } else { "Max" }, x, ax, keep)?)
        }
        (_, "ZeroPadding2D") | (_, "Cropping2D") => {
            let x = x()?;
            let key = if l.class == "ZeroPadding2D" { "padding" } else { "cropping" };
            let p = pairs(l, key, 2)?;
            if l.class == "ZeroPadding2D" {
                let pads: [i32; 8] = [0, 0, p[0][0] as i32, p[0][1] as i32, p[1][0] as i32, p[1][1] as i32, 0, 0];
                let pads = s.constant_from(&[4, 2], &pads)?;
                one(s.pad(x, pads)?)
            } else {
                let dims = net.dims(x, l)?;
                let (h, wd) = match (dims.get(1).copied().flatten(), dims.get(2).copied().flatten()) {
                    (Some(h), Some(w)) => (h, w),
                    _ => return Err(layer_err(l, "cropping needs known height and width")),
                };
                if p[0][0] + p[0][1] >= h || p[1][0] + p[1][1] >= wd {
                    return Err(layer_err(l, format!("cropping {p:?} leaves nothing of {h}×{wd}")));
                }
                let begin = [0, p[0][0] as i32, p[1][0] as i32, 0];
                let size = [-1, (h - p[0][0] - p[0][1]) as i32, (wd - p[1][0] - p[1][1]) as i32, -1];
                one(s.slice(x, &begin, &size)?)
            }
        }
        (_, "Reshape") => {
            let target = l
                .get("target_shape")
                .and_then(Value::as_array)
                .ok_or_else(|| layer_err(l, "config has no 'target_shape' list"))?;
            let mut shape = vec![-1i32];
            for d in target {
                shape.push(
                    d.as_i64()
                        .filter(|&d| d >= -1 && d < i32::MAX as i64)
                        .ok_or_else(|| layer_err(l, format!("bad target_shape {target:?}")))?
                        as i32,
                );
            }
            one(s.reshape(x()?, &shape[..])?)
        }
        (_, "Flatten") => {
            let x = x()?;
            let dims = net.dims(x, l)?;
            let n: Option<usize> = dims[1..].iter().try_fold(1usize, |a, d| d.map(|d| a * d));
            let n = n.ok_or_else(|| layer_err(l, "flattened dimensions must be known"))?;
            one(s.reshape(x, &[-1, n as i32])?)
        }
        (_, "Rescaling") => {
            let x = x()?;
            let c = |key: &str, d: f64| -> R<Output> {
                match l.get(key) {
                    None => Ok(s.scalar(d as f32)?),
                    Some(Value::Array(a)) => {
                        let v: Vec<f32> = a.iter().map(|v| v.as_f64().unwrap_or(d) as f32).collect();
                        Ok(s.constant_from(&[v.len()], &v)?)
                    }
                    Some(v) => Ok(
                        s.scalar(v.as_f64().ok_or_else(|| layer_err(l, format!("'{key}' must be a number")))? as f32)?
                    ),
                }
            };
            let x = if s.dtype(x) != DType::Float { s.cast(x, DType::Float)? } else { x };
            one(s.add_v2(s.mul(x, c("scale", 1.0)?)?, c("offset", 0.0)?)?)
        }
        (_, "Normalization") => {
            let x = x()?;
            let rank = net.dims(x, l)?.len();
            let ax = axes(l, "axis", rank, &[-1])?;
            let dims = net.dims(x, l)?;
            let kept: Vec<usize> = ax
                .iter()
                .map(|&a| dims[a].ok_or_else(|| layer_err(l, "normalized dimensions must be known")))
                .collect::<R<_>>()?;
            let bshape: Vec<i32> =
                (0..rank).map(|i| if ax.contains(&i) { dims[i].unwrap_or(1) as i32 } else { 1 }).collect();
            let (mean, var) = match (l.get("mean"), l.get("variance")) {
                (Some(m), Some(v)) => {
                    let n: usize = kept.iter().product();
                    let vals = |v: &Value| -> R<Vec<f32>> {
                        let a: Vec<f32> = match v {
                            Value::Array(a) => a.iter().map(|x| x.as_f64().unwrap_or(0.0) as f32).collect(),
                            v => vec![v.as_f64().unwrap_or(0.0) as f32; n],
                        };
                        if a.len() == n {
                            Ok(a)
                        } else if a.len() == 1 {
                            Ok(vec![a[0]; n])
                        } else {
                            Err(layer_err(l, "mean/variance sizes disagree with the input"))
                        }
                    };
                    (s.constant_from(&kept, &vals(m)?)?, s.constant_from(&kept, &vals(v)?)?)
                }
                _ => {
                    let specs = vec![
                        w("mean", kept.clone(), false, Initializer::Zeros),
                        w("variance", kept.clone(), false, Initializer::Ones),
                        WeightSpec { dtype: DType::Int64, ..w("count", vec![], false, Initializer::Zeros) },
                    ];
                    let vars = net.weights_of(l, path, specs, trainable)?;
                    (vars[0], vars[1])
                }
            };
            let mean = s.reshape(mean, &bshape[..])?;
            let var = s.reshape(var, &bshape[..])?;
            if boolean(l, "invert", false) {
                return one(s.add_v2(s.mul(x, s.sqrt(var)?)?, mean)?);
            }
            // Keras 3: (x − mean) / max(√variance, ε), ε = 1e-7.
            let den = s.maximum(s.sqrt(var)?, 1e-7f32)?;
            one(s.real_div(s.sub(x, mean)?, den)?)
        }
        (_, "LayerScale") => {
            let x = x()?;
            let c = net.last_dim(x, l)?;
            let init = Initializer::Constant(float(l, "init_values", 1e-6)?);
            let vars = net.weights_of(l, path, vec![w("gamma", vec![c], true, init)], trainable)?;
            one(s.mul(x, vars[0])?)
        }
        (_, "CustomScaleLayer") => {
            if inputs.len() != 2 {
                return Err(layer_err(l, format!("takes 2 inputs, got {}", inputs.len())));
            }
            let scale = float(l, "scale", 1.0)?;
            one(s.add_v2(inputs[0], s.mul(inputs[1], scale as f32)?)?)
        }
        (_, "UpSampling2D") => {
            let x = x()?;
            let f = int_list(l, "size", 2, Some(2))?;
            let dims = net.dims(x, l)?;
            let (h, wd) = match (dims.get(1).copied().flatten(), dims.get(2).copied().flatten()) {
                (Some(h), Some(w)) => (h, w),
                _ => return Err(layer_err(l, "upsampling needs known height and width")),
            };
            let size = [(h * f[0]) as i32, (wd * f[1]) as i32];
            let y = match string(l, "interpolation", "nearest") {
                "nearest" => s.resize_nearest_neighbor_with(
                    x,
                    &size,
                    attrs::ResizeNearestNeighbor::new().half_pixel_centers(true),
                )?,
                "bilinear" => {
                    s.resize_bilinear_with(x, &size, attrs::ResizeBilinear::new().half_pixel_centers(true))?
                }
                other => return Err(layer_err(l, format!("interpolation '{other}' is not supported"))),
            };
            one(y)
        }
        (_, "Embedding") => {
            let x = x()?;
            let n = int_list(l, "input_dim", 1, None)?[0];
            let d = int_list(l, "output_dim", 1, None)?[0];
            let init = initializer(
                l,
                "embeddings_initializer",
                Initializer::RandomUniform { minval: -0.05, maxval: 0.05, seed: None },
            )?;
            let vars = net.weights_of(l, path, vec![w("embeddings", vec![n, d], true, init)], trainable)?;
            one(s.gather_v2(vars[0], x, 0i32)?)
        }
        (Some(m), c) if m.starts_with("keras") || l.registered_name.is_none() => {
            Err(KerasError::UnknownLayer { class: c.to_string(), layer: l.name.clone() })
        }
        _ => Err(KerasError::UnknownLayer {
            class: l.registered_name.clone().unwrap_or_else(|| l.class.clone()),
            layer: l.name.clone(),
        }),
    }
}

/// `axis` of a layer as non-negative axes of a rank-`rank` input.
fn axes(l: &LayerSpec, key: &str, rank: usize, default: &[i64]) -> R<Vec<usize>> {
    let raw: Vec<i64> = match l.get(key) {
        None => default.to_vec(),
        Some(Value::Array(a)) => a.iter().map(|v| v.as_i64().unwrap_or(i64::MAX)).collect(),
        Some(v) => vec![v.as_i64().unwrap_or(i64::MAX)],
    };
    raw.iter()
        .map(|&a| {
            let r = rank as i64;
            let a2 = if a < 0 { a + r } else { a };
            if (0..r).contains(&a2) {
                Ok(a2 as usize)
            } else {
                Err(layer_err(l, format!("axis {a} is out of range for rank {rank}")))
            }
        })
        .collect()
}

/// `n` (before, after) pairs from an int, n ints, a pair (1-D), or n pairs.
pub(crate) fn pairs(l: &LayerSpec, key: &str, n: usize) -> R<Vec<[usize; 2]>> {
    let v = l.get(key).ok_or_else(|| layer_err(l, format!("config has no '{key}'")))?;
    let num = |v: &Value| {
        v.as_u64()
            .and_then(|x| usize::try_from(x).ok())
            .filter(|&x| x < 1 << 20)
            .ok_or_else(|| layer_err(l, format!("bad '{key}': {v}")))
    };
    match v {
        Value::Array(a) if n == 1 && a.len() == 2 && a.iter().all(Value::is_number) => {
            Ok(vec![[num(&a[0])?, num(&a[1])?]])
        }
        Value::Array(a) if a.len() == n => a
            .iter()
            .map(|x| match x {
                Value::Array(p) if p.len() == 2 => Ok([num(&p[0])?, num(&p[1])?]),
                x => {
                    let k = num(x)?;
                    Ok([k, k])
                }
            })
            .collect(),
        v => {
            let k = num(v)?;
            Ok(vec![[k, k]; n])
        }
    }
}

/// Keras's `BatchNormalization`: inference mode (moving statistics) unless training and
/// trainable; in training mode the batch's statistics normalize and the moving ones move by
/// `momentum` toward the batch's (biased) variance, as Keras 3 does.
fn batch_norm(net: &Net, l: &LayerSpec, path: &[String], s: &Scope, x: Output, mode: Mode) -> R<Vec<Output>> {
    let dims = net.dims(x, l)?;
    let rank = dims.len();
    let ax = axes(l, "axis", rank, &[-1])?;
    if ax.len() != 1 {
        return Err(layer_err(l, "batch normalization over several axes is not supported"));
    }
    let axis = ax[0];
    let c = dims[axis].ok_or_else(|| layer_err(l, "the normalized dimension must be known"))?;
    let eps = float(l, "epsilon", 1e-3)?;
    let momentum = if net.calibrating { 0.0 } else { float(l, "momentum", 0.99)? };
    let (center, scale) = (boolean(l, "center", true), boolean(l, "scale", true));
    let mut specs = Vec::new();
    if scale {
        specs.push(w("gamma", vec![c], true, initializer(l, "gamma_initializer", Initializer::Ones)?));
    }
    if center {
        specs.push(w("beta", vec![c], true, initializer(l, "beta_initializer", Initializer::Zeros)?));
    }
    specs.push(w("moving_mean", vec![c], false, initializer(l, "moving_mean_initializer", Initializer::Zeros)?));
    specs.push(w("moving_variance", vec![c], false, initializer(l, "moving_variance_initializer", Initializer::Ones)?));
    let vars = net.weights_of(l, path, specs, mode.trainable)?;
    let mut it = vars.iter().copied();
    let gamma = if scale { Some(it.next().expect("gamma")) } else { None };
    let beta = if center { Some(it.next().expect("beta")) } else { None };
    let (mean, var) = (it.next().expect("mean"), it.next().expect("variance"));
    let nhwc = rank == 4 && axis == 3;
    let g = match gamma {
        Some(g) => g,
        None => s.fill(&[c as i32], 1.0f32)?,
    };
    let b = match beta {
        Some(b) => b,
        None => s.fill(&[c as i32], 0.0f32)?,
    };
    let red: Vec<i32> = (0..rank as i32).filter(|&i| i as usize != axis).collect();
    let bshape: Vec<i32> = (0..rank).map(|i| if i == axis { c as i32 } else { 1 }).collect();
    // x·inv + (β − mean·inv), inv = rsqrt(var + ε)·γ: Keras 3's `batch_normalization`.
    let affine = |s: &Scope, x: Output, g: Output, b: Output, m: Output, v: Output| -> R<Output> {
        let inv = s.mul(s.rsqrt(s.add_v2(v, eps as f32)?)?, g)?;
        let shift = s.sub(b, s.mul(m, inv)?)?;
        Ok(s.add_v2(s.mul(x, s.reshape(inv, &bshape[..])?)?, s.reshape(shift, &bshape[..])?)?)
    };
    let blend = |s: &Scope, moving: Output, batch: Output| -> R<Output> {
        Ok(s.add_v2(s.mul(moving, momentum as f32)?, s.mul(batch, (1.0 - momentum) as f32)?)?)
    };
    // Inputs: x, γ, β, moving mean, moving variance. Outputs: y and the moving statistics
    // after the step (moved in training mode, as they were in inference mode).
    let train = |s: &Scope, ins: &[Output]| -> R<Vec<Output>> {
        let (x, g, b, mm, mv) = (ins[0], ins[1], ins[2], ins[3], ins[4]);
        let (y, bm, bv) = if nhwc {
            let opts = attrs::FusedBatchNormV3::new().epsilon(eps as f32).is_training(true).exponential_avg_factor(1.0);
            let outs = s.fused_batch_norm_v3_with(x, g, b, mm, mv, opts)?;
            // TensorFlow's batch variance is Bessel-corrected; Keras 3 moves toward the biased one.
            let n = s.real_div(s.cast(s.size(x)?, DType::Float)?, c as f32)?;
            (outs[0], outs[1], s.mul(outs[2], s.real_div(s.sub(n, 1.0f32)?, n)?)?)
        } else {
            let m = s.reduce("Mean", x, &red, false)?;
            let v = s.reduce("Mean", s.squared_difference(x, s.reshape(m, &bshape[..])?)?, &red, false)?;
            (affine(s, x, g, b, m, v)?, m, v)
        };
        Ok(vec![y, blend(s, mm, bm)?, blend(s, mv, bv)?])
    };
    // Inference mode: a frozen layer inside a model being trained too (Keras 3 keeps it in
    // inference mode). As elementwise ops it fuses into the convolution before it, and its
    // gradient is one multiply by the per-channel factor (no statistics to reduce).
    let infer = |s: &Scope, ins: &[Output]| -> R<Vec<Output>> {
        let (x, g, b, mm, mv) = (ins[0], ins[1], ins[2], ins[3], ins[4]);
        Ok(vec![affine(s, x, g, b, mm, mv)?, s.identity(mm)?, s.identity(mv)?])
    };
    let bn_mode = Mode { training: mode.training && (mode.trainable || net.calibrating), ..mode };
    let outs = bn_mode.switch(s, &[x, g, b, mean, var], train, infer)?;
    if bn_mode.training {
        add_moving_updates(net, l, path, s, outs[1], outs[2])?;
    }
    Ok(vec![outs[0]])
}

/// Assigns the moving mean and variance their values after a training step.
fn add_moving_updates(net: &Net, l: &LayerSpec, path: &[String], s: &Scope, m: Output, v: Output) -> R<()> {
    let key = path.join("/");
    let ws = net.weights.borrow();
    let lw = ws.iter().find(|w| w.path.join("/") == key).ok_or_else(|| layer_err(l, "moving statistics not found"))?;
    let find = |n: &str| lw.vars.iter().find(|(spec, _)| spec.name == n).map(|(_, v)| v.clone());
    let (Some(mean_var), Some(var_var)) = (find("moving_mean"), find("moving_variance")) else {
        return Err(layer_err(l, "moving statistics not found"));
    };
    drop(ws);
    for (var, value, name) in [(mean_var, m, "AssignMovingAvg"), (var_var, v, "AssignMovingAvg_1")] {
        let id = s.with_name(name).assign_variable_op(var.handle, value)?;
        net.updates.borrow_mut().push(id);
        let update = s.with_graph(|g| g.node(id).name.clone());
        net.b.add_to_collection(ferroflow_train::layers::UPDATE_OPS, &update);
    }
    Ok(())
}

/// A tensor of `values` in `shape` (a weight's value), checked against the shape.
pub fn tensor(shape: &[usize], values: Vec<f32>) -> std::result::Result<Tensor, ferroflow_tensor::TensorError> {
    Tensor::from_vec(shape, values)
}
