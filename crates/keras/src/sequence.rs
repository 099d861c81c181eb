//! Keras's sequence layers: recurrent (`SimpleRNN`, `LSTM`, `GRU`, `Bidirectional`, with
//! masks) and attention (`MultiHeadAttention`).
//!
//! The recurrent layers are unrolled over the time steps (the time dimension must be known
//! when the model is built): each step is the cell of Keras 3 (`LSTMCell`, `GRUCell`,
//! `SimpleRNNCell`) in its default implementation, and a mask works as Keras's backend
//! `rnn` does it: a masked step keeps the previous states and outputs the previous output
//! (zeros with `zero_output_for_mask`). Weights are Keras 3's, in its order: an RNN's
//! `cell` (kernel, recurrent kernel, bias), a `Bidirectional`'s forward then backward layer,
//! a `MultiHeadAttention`'s query, key, value and output projections (see
//! [`crate::weights::sub_groups`] for where the files keep them).
use ferroflow_graph::Output;
use ferroflow_ops::{attrs, Ops, RawOps, Scope};
use ferroflow_tensor::DType;
use ferroflow_train::{Distribution, FanMode, Initializer};
use serde_json::{Map, Value};

use crate::config::{Arg, Call, LayerSpec};
use crate::layers::{self, Mode, Net, WeightSpec};
use crate::{KerasError, Result};

type R<T> = Result<T>;

fn err(l: &LayerSpec, reason: impl Into<String>) -> KerasError {
    KerasError::Layer { layer: l.name.clone(), class: l.class.clone(), reason: reason.into() }
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
) -> Option<Result<Vec<Output>>> {
    if l.module.as_deref().is_some_and(|m| m.starts_with("keras.src.ops")) {
        return None;
    }
    Some(match l.class.as_str() {
        "LSTM" | "GRU" | "SimpleRNN" => rnn_layer(net, l, path, s, inputs, call, mode),
        "Bidirectional" => bidirectional(net, l, path, s, inputs, call, mode),
        "MultiHeadAttention" => attention(net, l, path, s, inputs, call, mode),
        _ => return None,
    })
}

// ---------------------------------------------------------------------------------------------
// Call arguments

/// A call's arguments with their tensors: positional ones named by the layer's signature.
struct Bound<'a> {
    items: Vec<(Option<&'a str>, &'a Arg, Vec<Output>)>,
}

fn count(a: &Arg) -> usize {
    let mut v = Vec::new();
    a.tensors(&mut v);
    v.len()
}

/// Binds `inputs` (the call's tensors, positional first, depth first) to the arguments of
/// `call`, positional ones named after `signature`.
fn bind<'a>(l: &LayerSpec, call: &'a Call, inputs: &[Output], signature: &[&'a str]) -> R<Bound<'a>> {
    let mut it = inputs.iter().copied();
    let mut items = Vec::new();
    let positional = call.args.iter().enumerate().map(|(i, a)| (signature.get(i).copied(), a));
    let named = call.kwargs.iter().map(|(k, a)| (Some(k.as_str()), a));
    for (name, a) in positional.chain(named) {
        let n = count(a);
        let ts: Vec<Output> = it.by_ref().take(n).collect();
        if ts.len() != n {
            return Err(err(l, "the call has fewer tensors than its arguments name"));
        }
        items.push((name, a, ts));
    }
    Ok(Bound { items })
}

impl Bound<'_> {
    /// The tensors of argument `name` (`None` when it has none).
    fn tensors(&self, name: &str) -> Option<&[Output]> {
        self.items.iter().find(|(n, _, ts)| *n == Some(name) && !ts.is_empty()).map(|(_, _, ts)| ts.as_slice())
    }

    /// The first tensor of argument `name`.
    fn tensor(&self, name: &str) -> Option<Output> {
        self.tensors(name).map(|t| t[0])
    }

    /// The boolean value of argument `name`.
    fn flag(&self, name: &str) -> Option<bool> {
        self.items.iter().find(|(n, _, _)| *n == Some(name)).and_then(|(_, a, _)| match a {
            Arg::Value(Value::Bool(b)) => Some(*b),
            _ => None,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Config values

fn flag(c: &Map<String, Value>, key: &str, default: bool) -> bool {
    c.get(key).and_then(Value::as_bool).unwrap_or(default)
}

fn number(l: &LayerSpec, c: &Map<String, Value>, key: &str, default: f64) -> R<f64> {
    match c.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v.as_f64().ok_or_else(|| err(l, format!("'{key}' must be a number, got {v}"))),
    }
}

fn count_of(l: &LayerSpec, c: &Map<String, Value>, key: &str) -> R<usize> {
    let v = c.get(key).ok_or_else(|| err(l, format!("config has no '{key}'")))?;
    v.as_u64()
        .and_then(|x| usize::try_from(x).ok())
        .filter(|&x| (1..1 << 24).contains(&x))
        .ok_or_else(|| err(l, format!("'{key}' must be a positive integer, got {v}")))
}

/// An activation's name from a config value (`"tanh"`, or a serialized function).
fn activation_name(l: &LayerSpec, c: &Map<String, Value>, key: &str, default: &str) -> R<String> {
    match c.get(key) {
        None | Some(Value::Null) => Ok(default.into()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Object(o)) => {
            if o.get("class_name").and_then(Value::as_str) == Some("__lambda__") {
                return Err(err(l, format!("its {key} is a Python lambda, which ferroflow cannot run")));
            }
            let cfg = o.get("config");
            cfg.and_then(Value::as_str)
                .or_else(|| cfg.and_then(|c| c.get("name")).and_then(Value::as_str))
                .or_else(|| o.get("class_name").and_then(Value::as_str))
                .map(str::to_string)
                .ok_or_else(|| err(l, format!("its {key} cannot be read")))
        }
        Some(v) => Err(err(l, format!("{key} {v} cannot be read"))),
    }
}

fn activate(l: &LayerSpec, s: &Scope, x: Output, name: &str) -> R<Output> {
    layers::activation(s, x, name).map_err(|m| err(l, m))
}

/// A Keras initializer from config value `key` (`default` when absent or unknown: they only
/// matter for a model built without its weights).
fn initializer(c: &Map<String, Value>, key: &str, default: Initializer) -> Initializer {
    let Some(v) = c.get(key) else { return default };
    let (class, cfg) = match v {
        Value::String(s) => (s.as_str(), None),
        Value::Object(o) => (o.get("class_name").and_then(Value::as_str).unwrap_or(""), o.get("config")),
        _ => return default,
    };
    let num = |k: &str, d: f64| cfg.and_then(|c| c.get(k)).and_then(Value::as_f64).unwrap_or(d);
    let seed = cfg.and_then(|c| c.get("seed")).and_then(Value::as_i64);
    let scaling = |scale: f64, mode: FanMode, distribution: Distribution| Initializer::VarianceScaling {
        scale,
        mode,
        distribution,
        seed,
    };
    match class {
        "Zeros" | "zeros" => Initializer::Zeros,
        "Ones" | "ones" => Initializer::Ones,
        "Constant" | "constant" => Initializer::Constant(num("value", 0.0)),
        // Orthogonal (the recurrent kernels' default) has no ferroflow initializer: Glorot
        // uniform stands in for it, which only matters for a model built without weights.
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
        _ => default,
    }
}

fn glorot() -> Initializer {
    Initializer::VarianceScaling { scale: 1.0, mode: FanMode::FanAvg, distribution: Distribution::Uniform, seed: None }
}

// ---------------------------------------------------------------------------------------------
// Recurrent layers

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Lstm,
    Gru,
    Simple,
}

/// One recurrent layer's config (a layer's own, or a `Bidirectional`'s forward or backward).
struct Rnn {
    kind: Kind,
    /// The layer's name (`forward_lstm` inside a `Bidirectional`).
    name: String,
    units: usize,
    activation: String,
    recurrent_activation: String,
    use_bias: bool,
    reset_after: bool,
    return_sequences: bool,
    return_state: bool,
    go_backwards: bool,
    zero_output_for_mask: bool,
    kernel_init: Initializer,
    recurrent_init: Initializer,
    bias_init: Initializer,
}

impl Rnn {
    /// Gates per unit.
    fn gates(&self) -> usize {
        match self.kind {
            Kind::Lstm => 4,
            Kind::Gru => 3,
            Kind::Simple => 1,
        }
    }

    /// Keras's cell name (`lstm_cell`), which names its weights in legacy files.
    fn cell_name(&self) -> &'static str {
        match self.kind {
            Kind::Lstm => "lstm_cell",
            Kind::Gru => "gru_cell",
            Kind::Simple => "simple_rnn_cell",
        }
    }

    /// How many states the cell carries.
    fn states(&self) -> usize {
        if self.kind == Kind::Lstm {
            2
        } else {
            1
        }
    }

    /// The cell's weights for `input` features, in Keras's order, their names prefixed by
    /// `prefix` (`forward_lstm/` in a `Bidirectional`).
    fn specs(&self, input: usize, prefix: &str) -> Vec<WeightSpec> {
        let (u, g) = (self.units, self.gates());
        let name = |w: &str| format!("{prefix}{}/{w}", self.cell_name());
        let mut specs = vec![
            layers::weight(&name("kernel"), vec![input, g * u], self.kernel_init.clone()),
            layers::weight(&name("recurrent_kernel"), vec![u, g * u], self.recurrent_init.clone()),
        ];
        if self.use_bias {
            // LSTM's unit_forget_bias starts the forget gate's bias at one; ferroflow's
            // initializers cannot set a slice, so a new model starts it at the bias
            // initializer's value (zeros by default) instead.
            let shape = if self.kind == Kind::Gru && self.reset_after { vec![2, g * u] } else { vec![g * u] };
            specs.push(layers::weight(&name("bias"), shape, self.bias_init.clone()));
        }
        specs
    }
}

fn rnn_config(l: &LayerSpec, class: &str, c: &Map<String, Value>, mode: Mode) -> R<Rnn> {
    let kind = match class {
        "LSTM" => Kind::Lstm,
        "GRU" => Kind::Gru,
        "SimpleRNN" => Kind::Simple,
        other => return Err(err(l, format!("a recurrent layer of class '{other}' is not supported"))),
    };
    if flag(c, "stateful", false) {
        return Err(err(l, "stateful recurrent layers are not supported"));
    }
    if flag(c, "time_major", false) {
        return Err(err(l, "time_major recurrent layers are not supported"));
    }
    let dropout = number(l, c, "dropout", 0.0)?;
    let recurrent_dropout = number(l, c, "recurrent_dropout", 0.0)?;
    if mode.training && (dropout > 0.0 || recurrent_dropout > 0.0) {
        return Err(err(l, "dropout and recurrent_dropout in training mode are not supported"));
    }
    Ok(Rnn {
        kind,
        name: c.get("name").and_then(Value::as_str).unwrap_or(&l.name).to_string(),
        units: count_of(l, c, "units")?,
        activation: activation_name(l, c, "activation", "tanh")?,
        recurrent_activation: if kind == Kind::Simple {
            String::new()
        } else {
            activation_name(l, c, "recurrent_activation", "sigmoid")?
        },
        use_bias: flag(c, "use_bias", true),
        reset_after: flag(c, "reset_after", true),
        return_sequences: flag(c, "return_sequences", false),
        return_state: flag(c, "return_state", false),
        go_backwards: flag(c, "go_backwards", false),
        zero_output_for_mask: flag(c, "zero_output_for_mask", false),
        kernel_init: initializer(c, "kernel_initializer", glorot()),
        recurrent_init: initializer(c, "recurrent_initializer", glorot()),
        bias_init: initializer(c, "bias_initializer", Initializer::Zeros),
    })
}

/// A sequence input's (time steps, features), both of which must be known.
fn sequence_dims(net: &Net, l: &LayerSpec, x: Output) -> R<(usize, usize)> {
    let dims = net.dims(x, l)?;
    if dims.len() != 3 {
        return Err(err(l, format!("takes (batch, time, features) sequences, got rank {}", dims.len())));
    }
    let t = dims[1].ok_or_else(|| {
        err(l, "the number of time steps is not known; ferroflow unrolls recurrent layers and needs it")
    })?;
    if t == 0 {
        return Err(err(l, "a sequence of no time steps"));
    }
    let f = dims[2].ok_or_else(|| err(l, "the number of features is not known"))?;
    Ok((t, f))
}

/// Zeros of shape `[batch of x, n]`.
fn batch_zeros(s: &Scope, x: Output, n: usize) -> R<Output> {
    let b = s.strided_slice(s.shape(x)?, &[0i32][..], &[1i32][..], &[1i32][..])?;
    let dims = s.concat_v2(&[b, s.constant_from(&[1], &[n as i32])?], 0i32)?;
    Ok(s.fill(dims, 0.0f32)?)
}

/// A mask as booleans of shape `[batch, time]`.
fn bool_mask(l: &LayerSpec, net: &Net, s: &Scope, m: Output) -> R<Output> {
    let rank = net.dims(m, l)?.len();
    if rank != 2 {
        return Err(err(l, format!("a mask must be (batch, time), got rank {rank}")));
    }
    Ok(match s.dtype(m) {
        DType::Bool => m,
        DType::Float => s.greater(m, 0.5f32)?,
        DType::Int32 => s.not_equal(m, 0i32)?,
        DType::Int64 => s.not_equal(m, 0i64)?,
        d => return Err(err(l, format!("a mask of {d} is not supported"))),
    })
}

/// Runs one recurrent layer over `x` (`[batch, time, features]`) with its weights `w`, an
/// optional mask and initial states. Returns the output (the last one, or the sequence in
/// processing order) followed by the final states when the layer returns them.
#[allow(clippy::too_many_arguments)]
fn run_rnn(
    net: &Net,
    l: &LayerSpec,
    s: &Scope,
    rc: &Rnn,
    w: &[Output],
    x: Output,
    mask: Option<Output>,
    initial: Option<&[Output]>,
) -> R<Vec<Output>> {
    let (t, f) = sequence_dims(net, l, x)?;
    let (u, g) = (rc.units, rc.gates());
    let (kernel, rec) = (w[0], w[1]);
    // GRU's reset_after bias is (input row, recurrent row).
    let (in_bias, rec_bias) = match (rc.use_bias, rc.kind == Kind::Gru && rc.reset_after) {
        (false, _) => (None, None),
        (true, false) => (Some(w[2]), None),
        (true, true) => {
            let rows = s.unpack(w[2], 2)?;
            (Some(rows[0]), Some(rows[1]))
        }
    };
    // Every step's input projection at once (LSTM adds its bias after the recurrent term,
    // as Keras's cell does; GRU and SimpleRNN add it to the input projection).
    let mut xk = s.matmul(s.reshape(x, &[-1, f as i32])?, kernel, false, false)?;
    if rc.kind != Kind::Lstm {
        if let Some(b) = in_bias {
            xk = s.bias_add(xk, b)?;
        }
    }
    let xk = s.reshape(xk, &[-1, t as i32, (g * u) as i32])?;
    let mut steps = s.unpack_with(xk, t as i64, attrs::Unpack::new().axis(1))?;
    let mut masks = match mask {
        Some(m) => {
            let m = bool_mask(l, net, s, m)?;
            s.unpack_with(m, t as i64, attrs::Unpack::new().axis(1))?
                .into_iter()
                .map(|m| s.expand_dims(m, -1i32))
                .collect::<std::result::Result<Vec<_>, _>>()?
                .into_iter()
                .map(Some)
                .collect()
        }
        None => vec![None; t],
    };
    if rc.go_backwards {
        steps.reverse();
        masks.reverse();
    }
    let mut states: Vec<Output> = match initial {
        Some(init) => {
            if init.len() != rc.states() {
                return Err(err(l, format!("takes {} initial states, got {}", rc.states(), init.len())));
            }
            init.to_vec()
        }
        None => {
            let z = batch_zeros(s, x, u)?;
            vec![z; rc.states()]
        }
    };
    // GRU with the reset gate before the recurrent product splits its recurrent kernel.
    let (rec_zr, rec_h) = if rc.kind == Kind::Gru && !rc.reset_after {
        (
            Some(s.slice(rec, &[0i32, 0][..], &[-1i32, (2 * u) as i32][..])?),
            Some(s.slice(rec, &[0i32, (2 * u) as i32][..], &[-1i32, u as i32][..])?),
        )
    } else {
        (None, None)
    };
    let act = |o: Output| activate(l, s, o, &rc.activation);
    let ract = |o: Output| activate(l, s, o, &rc.recurrent_activation);
    let zeros = batch_zeros(s, x, u)?;
    let mut prev_out = zeros;
    let mut outs = Vec::with_capacity(t);
    for (xt, mt) in steps.into_iter().zip(masks) {
        let (out, new_states) = match rc.kind {
            Kind::Lstm => {
                let (h, c) = (states[0], states[1]);
                let mut z = s.add_v2(xt, s.matmul(h, rec, false, false)?)?;
                if let Some(b) = in_bias {
                    z = s.add_v2(z, b)?;
                }
                let z = s.split(1i32, z, 4)?;
                let i = ract(z[0])?;
                let fg = ract(z[1])?;
                let c = s.add_v2(s.mul(fg, c)?, s.mul(i, act(z[2])?)?)?;
                let o = ract(z[3])?;
                let h = s.mul(o, act(c)?)?;
                (h, vec![h, c])
            }
            Kind::Gru => {
                let h = states[0];
                let x3 = s.split(1i32, xt, 3)?;
                let (rz, rr, rh) = if rc.reset_after {
                    let mut inner = s.matmul(h, rec, false, false)?;
                    if let Some(b) = rec_bias {
                        inner = s.add_v2(inner, b)?;
                    }
                    let r3 = s.split(1i32, inner, 3)?;
                    (r3[0], r3[1], Some(r3[2]))
                } else {
                    let inner = s.matmul(h, rec_zr.expect("split above"), false, false)?;
                    let r2 = s.split(1i32, inner, 2)?;
                    (r2[0], r2[1], None)
                };
                let z = ract(s.add_v2(x3[0], rz)?)?;
                let r = ract(s.add_v2(x3[1], rr)?)?;
                let recurrent_h = match rh {
                    Some(rh) => s.mul(r, rh)?,
                    None => s.matmul(s.mul(r, h)?, rec_h.expect("split above"), false, false)?,
                };
                let hh = act(s.add_v2(x3[2], recurrent_h)?)?;
                // h = z·h + (1 − z)·hh
                let h = s.add_v2(s.mul(z, h)?, s.mul(s.sub(1.0f32, z)?, hh)?)?;
                (h, vec![h])
            }
            Kind::Simple => {
                let h = act(s.add_v2(xt, s.matmul(states[0], rec, false, false)?)?)?;
                (h, vec![h])
            }
        };
        match mt {
            None => {
                states = new_states;
                prev_out = out;
            }
            Some(m) => {
                let keep = if rc.zero_output_for_mask { zeros } else { prev_out };
                prev_out = s.select_v2(m, out, keep)?;
                states = new_states
                    .into_iter()
                    .zip(&states)
                    .map(|(n, &o)| s.select_v2(m, n, o))
                    .collect::<std::result::Result<_, _>>()?;
            }
        }
        outs.push(prev_out);
    }
    let output = if rc.return_sequences {
        s.pack_with(&outs, attrs::Pack::new().axis(1))?
    } else {
        *outs.last().expect("at least one step")
    };
    let mut result = vec![output];
    if rc.return_state {
        result.extend(states);
    }
    Ok(result)
}

const RNN_SIGNATURE: &[&str] = &["sequences", "initial_state", "mask", "training"];

fn rnn_layer(
    net: &Net,
    l: &LayerSpec,
    path: &[String],
    s: &Scope,
    inputs: &[Output],
    call: &Call,
    mode: Mode,
) -> R<Vec<Output>> {
    let b = bind(l, call, inputs, RNN_SIGNATURE)?;
    let x = b.tensor("sequences").or(inputs.first().copied()).ok_or_else(|| err(l, "called without a sequence"))?;
    if s.dtype(x) != DType::Float {
        return Err(err(l, format!("input is {}; ferroflow runs Keras layers in float32", s.dtype(x))));
    }
    let rc = rnn_config(l, &l.class, &l.config, mode)?;
    let (_, f) = sequence_dims(net, l, x)?;
    let w = net.weights_of(l, path, rc.specs(f, ""), mode.trainable)?;
    run_rnn(net, l, s, &rc, &w, x, b.tensor("mask"), b.tensors("initial_state"))
}

fn bidirectional(
    net: &Net,
    l: &LayerSpec,
    path: &[String],
    s: &Scope,
    inputs: &[Output],
    call: &Call,
    mode: Mode,
) -> R<Vec<Output>> {
    let b = bind(l, call, inputs, RNN_SIGNATURE)?;
    let x = b.tensor("sequences").or(inputs.first().copied()).ok_or_else(|| err(l, "called without a sequence"))?;
    if s.dtype(x) != DType::Float {
        return Err(err(l, format!("input is {}; ferroflow runs Keras layers in float32", s.dtype(x))));
    }
    let inner = |key: &str| -> R<Option<Rnn>> {
        let Some(v) = l.get(key) else { return Ok(None) };
        let o = v.as_object().ok_or_else(|| err(l, format!("'{key}' is not a layer")))?;
        let class =
            o.get("class_name").and_then(Value::as_str).ok_or_else(|| err(l, format!("'{key}' has no class")))?;
        let empty = Map::new();
        let c = o.get("config").and_then(Value::as_object).unwrap_or(&empty);
        rnn_config(l, class, c, mode).map(Some)
    };
    let fwd = inner("layer")?.ok_or_else(|| err(l, "config has no 'layer'"))?;
    let bwd = match inner("backward_layer")? {
        Some(r) => r,
        None => {
            // Keras makes the backward layer from the forward one's config, going backwards.
            let mut r = inner("layer")?.expect("read above");
            r.go_backwards = !r.go_backwards;
            r.name = format!("backward_{}", r.name.trim_start_matches("forward_"));
            r
        }
    };
    if fwd.return_sequences != bwd.return_sequences || fwd.return_state != bwd.return_state {
        return Err(err(l, "the forward and backward layers must agree on return_sequences and return_state"));
    }
    let (_, f) = sequence_dims(net, l, x)?;
    let mut specs = fwd.specs(f, &format!("{}/", fwd.name));
    let nf = specs.len();
    specs.extend(bwd.specs(f, &format!("{}/", bwd.name)));
    let w = net.weights_of(l, path, specs, mode.trainable)?;
    let mask = b.tensor("mask");
    let (fi, bi) = match b.tensors("initial_state") {
        None => (None, None),
        Some(st) => {
            let half = st.len() / 2;
            (Some(&st[..half]), Some(&st[half..]))
        }
    };
    let y = run_rnn(net, l, s, &fwd, &w[..nf], x, mask, fi)?;
    let y_rev = run_rnn(net, l, s, &bwd, &w[nf..], x, mask, bi)?;
    let (mut y, mut y_rev) = (y.into_iter(), y_rev.into_iter());
    let (out, out_rev) = (y.next().expect("an output"), y_rev.next().expect("an output"));
    let out_rev = if fwd.return_sequences { s.reverse_v2(out_rev, &[1i32][..])? } else { out_rev };
    let mut result = match l.get("merge_mode") {
        None => vec![out, out_rev],
        Some(Value::String(m)) => vec![match m.as_str() {
            "concat" => s.concat_v2(&[out, out_rev], -1i32)?,
            "sum" => s.add_v2(out, out_rev)?,
            "ave" => s.mul(s.add_v2(out, out_rev)?, 0.5f32)?,
            "mul" => s.mul(out, out_rev)?,
            other => return Err(err(l, format!("merge_mode '{other}' is not supported"))),
        }],
        Some(v) => return Err(err(l, format!("merge_mode {v} cannot be read"))),
    };
    result.extend(y);
    result.extend(y_rev);
    Ok(result)
}

// ---------------------------------------------------------------------------------------------
// Attention

const MHA_SIGNATURE: &[&str] = &[
    "query",
    "value",
    "key",
    "query_mask",
    "value_mask",
    "key_mask",
    "attention_mask",
    "return_attention_scores",
    "training",
    "use_causal_mask",
];

/// `x` reshaped to `x`'s leading dimensions then `tail` (static where `lead` is known, the
/// batch always dynamic).
fn reshape_lead(s: &Scope, like: Output, lead: &[Option<usize>], tail: &[usize]) -> R<Output> {
    if lead[1..].iter().all(Option::is_some) {
        let mut shape = vec![-1i32];
        shape.extend(lead[1..].iter().map(|d| d.expect("checked") as i32));
        shape.extend(tail.iter().map(|&d| d as i32));
        return Ok(s.constant_from(&[shape.len()], &shape)?);
    }
    let n = lead.len() as i32;
    let head = s.strided_slice(s.shape(like)?, &[0i32][..], &[n][..], &[1i32][..])?;
    let tail: Vec<i32> = tail.iter().map(|&d| d as i32).collect();
    Ok(s.concat_v2(&[head, s.constant_from(&[tail.len()], &tail)?], 0i32)?)
}

fn attention(
    net: &Net,
    l: &LayerSpec,
    path: &[String],
    s: &Scope,
    inputs: &[Output],
    call: &Call,
    mode: Mode,
) -> R<Vec<Output>> {
    let c = &l.config;
    let b = bind(l, call, inputs, MHA_SIGNATURE)?;
    let query = b.tensor("query").ok_or_else(|| err(l, "called without a query"))?;
    let value = b.tensor("value").ok_or_else(|| err(l, "called without a value"))?;
    let key = b.tensor("key").unwrap_or(value);
    for t in [query, value, key] {
        if s.dtype(t) != DType::Float {
            return Err(err(l, format!("input is {}; ferroflow runs Keras layers in float32", s.dtype(t))));
        }
    }
    let heads = count_of(l, c, "num_heads")?;
    let key_dim = count_of(l, c, "key_dim")?;
    let value_dim = match c.get("value_dim") {
        None | Some(Value::Null) => key_dim,
        Some(_) => count_of(l, c, "value_dim")?,
    };
    let use_bias = flag(c, "use_bias", true);
    if flag(c, "use_gate", false) {
        return Err(err(l, "use_gate is not supported"));
    }
    if c.get("sliding_window").is_some_and(|v| !v.is_null()) {
        return Err(err(l, "sliding_window is not supported"));
    }
    let dropout = number(l, c, "dropout", 0.0)?;
    if mode.training && dropout > 0.0 {
        return Err(err(l, "attention dropout in training mode is not supported"));
    }
    let (qd, vd, kd) = (net.dims(query, l)?, net.dims(value, l)?, net.dims(key, l)?);
    if qd.len() != 3 || vd.len() != 3 || kd.len() != 3 {
        return Err(err(l, "only (batch, sequence, features) inputs are supported"));
    }
    match c.get("attention_axes") {
        None | Some(Value::Null) => {}
        Some(Value::Array(a)) if a.len() == 1 && matches!(a[0].as_i64(), Some(1) | Some(-2)) => {}
        Some(Value::Number(n)) if matches!(n.as_i64(), Some(1) | Some(-2)) => {}
        Some(v) => return Err(err(l, format!("attention_axes {v} is not supported"))),
    }
    let last = |d: &[Option<usize>]| d[2].ok_or_else(|| err(l, "the inputs' feature dimensions must be known"));
    let (dq, dv, dk) = (last(&qd)?, last(&vd)?, last(&kd)?);
    let out_dim = match c.get("output_shape") {
        None | Some(Value::Null) => dq,
        Some(v) => match v {
            Value::Array(a) if a.len() == 1 => a[0].as_u64(),
            v => v.as_u64(),
        }
        .and_then(|d| usize::try_from(d).ok())
        .filter(|&d| (1..1 << 24).contains(&d))
        .ok_or_else(|| err(l, format!("output_shape {v} is not supported")))?,
    };
    let k_init = initializer(c, "kernel_initializer", glorot());
    let b_init = initializer(c, "bias_initializer", Initializer::Zeros);
    let mut specs = Vec::new();
    for (name, d, per) in [("query", dq, key_dim), ("key", dk, key_dim), ("value", dv, value_dim)] {
        specs.push(layers::weight(&format!("{name}/kernel"), vec![d, heads, per], k_init.clone()));
        if use_bias {
            specs.push(layers::weight(&format!("{name}/bias"), vec![heads, per], b_init.clone()));
        }
    }
    specs.push(layers::weight("attention_output/kernel", vec![heads, value_dim, out_dim], k_init));
    if use_bias {
        specs.push(layers::weight("attention_output/bias", vec![out_dim], b_init));
    }
    let w = net.weights_of(l, path, specs, mode.trainable)?;
    let per = if use_bias { 2 } else { 1 };
    // x·kernel (+ bias) as [batch, seq, heads, dim], transposed to [batch, heads, seq, dim].
    let project = |x: Output, dims: &[Option<usize>], d: usize, i: usize, n: usize| -> R<Output> {
        let k = s.reshape(w[i * per], &[d as i32, (heads * n) as i32])?;
        let mut y = s.matmul(s.reshape(x, &[-1, d as i32])?, k, false, false)?;
        if use_bias {
            y = s.bias_add(y, s.reshape(w[i * per + 1], &[(heads * n) as i32])?)?;
        }
        let y = s.reshape(y, reshape_lead(s, x, &dims[..2], &[heads, n])?)?;
        Ok(s.transpose(y, &[0i32, 2, 1, 3][..])?)
    };
    let q = project(query, &qd, dq, 0, key_dim)?;
    let k = project(key, &kd, dk, 1, key_dim)?;
    let v = project(value, &vd, dv, 2, value_dim)?;
    // Keras scales the query by 1/√key_dim before the product.
    let q = s.mul(q, (1.0 / (key_dim as f64).sqrt()) as f32)?;
    let logits = s.batch_mat_mul_v2_with(q, k, attrs::BatchMatMulV2::new().adj_y(true))?; // [B, H, T, S]
                                                                                          // The mask: value and key masks ([B, S] → [B, 1, S]), the attention mask ([B, T, S]) and
                                                                                          // the causal one ([T, S]), and-ed; it applies to every head.
    let mut mask: Option<Output> = None;
    let mut and = |m: Output| -> R<()> {
        mask = Some(match mask {
            None => m,
            Some(p) => s.logical_and(p, m)?,
        });
        Ok(())
    };
    for name in ["value_mask", "key_mask"] {
        if let Some(m) = b.tensor(name) {
            if name == "key_mask" && b.tensor("key").is_none() {
                continue;
            }
            let m = bool_mask(l, net, s, m)?;
            and(s.expand_dims(m, 1i32)?)?;
        }
    }
    if let Some(m) = b.tensor("attention_mask") {
        let m = if s.dtype(m) == DType::Bool { m } else { s.cast(m, DType::Bool)? };
        and(m)?;
    }
    if b.flag("use_causal_mask") == Some(true) {
        let t = s.strided_slice(s.shape(query)?, &[1i32][..], &[2i32][..], &[1i32][..])?;
        let sl = s.strided_slice(s.shape(value)?, &[1i32][..], &[2i32][..], &[1i32][..])?;
        let ones = s.fill(s.concat_v2(&[t, sl], 0i32)?, 1.0f32)?;
        let lower = s.matrix_band_part(ones, -1i64, 0i64)?;
        and(s.expand_dims(s.greater(lower, 0.5f32)?, 0i32)?)?; // [1, T, S]
    }
    let scores_out = b.flag("return_attention_scores") == Some(true);
    let probs = match mask {
        None => s.softmax(logits)?,
        Some(m) => {
            let m = s.expand_dims(m, 1i32)?; // [B|1, 1, T, S]
            let masked = s.select_v2(m, logits, -1e9f32)?;
            let p = s.softmax(masked)?;
            if scores_out || dropout > 0.0 {
                // Keras's explicit path (its Softmax layer) zeroes the masked scores.
                s.select_v2(m, p, 0.0f32)?
            } else {
                p
            }
        }
    };
    let ctx = s.batch_mat_mul_v2(probs, v)?; // [B, H, T, V]
    let ctx = s.transpose(ctx, &[0i32, 2, 1, 3][..])?; // [B, T, H, V]
    let wo = s.reshape(w[3 * per], &[(heads * value_dim) as i32, out_dim as i32])?;
    let mut y = s.matmul(s.reshape(ctx, &[-1, (heads * value_dim) as i32])?, wo, false, false)?;
    if use_bias {
        y = s.bias_add(y, w[3 * per + 1])?;
    }
    let y = s.reshape(y, reshape_lead(s, query, &qd[..2], &[out_dim])?)?;
    Ok(if scores_out { vec![y, probs] } else { vec![y] })
}
