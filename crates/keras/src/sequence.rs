//! Keras's sequence layers: recurrent (`SimpleRNN`, `LSTM`, `GRU`, `Bidirectional`, with
//! masks) and attention (`MultiHeadAttention`), and what masks need: `Masking`, the masked
//! `GlobalAveragePooling1D`, Keras 3's masked `Multiply`/`Maximum`/`Minimum`, and the
//! operations Keras 3 writes into a config to compute the masks it passes (`Any`,
//! `LogicalOr`, ...). A call reads the masks it is given (`mask`, `value_mask`, ...) and,
//! through [`call_masked`], the implicit ones Keras propagates beside the tensors
//! (`_keras_mask`; see [`crate::build`]).
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
use ferroflow_train::Initializer;
use serde_json::{Map, Value};

use crate::config::{Arg, Call, LayerSpec};
use crate::layers::{self, layer_err as err, Mode, Net, WeightSpec};
use crate::Result;

type R<T> = Result<T>;

/// The masks Keras propagates implicitly (`_keras_mask` on tensors, which Keras 2 never and
/// Keras 3 only partly writes into the config) of one call's tensors.
#[derive(Clone, Copy, Debug, Default)]
pub struct Implicit<'a> {
    /// The mask of each of the call's tensors (positional first, as `inputs`); empty: none.
    pub masks: &'a [Option<Output>],
    /// Whether the model is Keras 3's (its rules for filling a call's mask arguments differ).
    pub keras3: bool,
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
    call_with(net, l, path, s, inputs, call, mode, Implicit::default())
}

/// Whether `l` is one of the Keras 3 operations computing masks that [`call_masked`] builds
/// (their `dtype` is their result's, which [`crate::layers::call`] would take for a policy).
pub fn is_mask_op(l: &LayerSpec) -> bool {
    l.module.as_deref().is_some_and(|m| m.starts_with("keras.src.ops"))
        && matches!(
            l.class.as_str(),
            "Any"
                | "All"
                | "LogicalOr"
                | "LogicalAnd"
                | "LogicalNot"
                | "ExpandDims"
                | "Squeeze"
                | "ZerosLike"
                | "OnesLike"
                | "Concatenate"
        )
}

/// Whether [`call_masked`] builds layer `l` (a layer that reads masks Keras passes it).
pub fn takes_masks(l: &LayerSpec, keras3: bool) -> bool {
    if l.module.as_deref().is_some_and(|m| m.starts_with("keras.src.ops")) {
        return false;
    }
    match l.class.as_str() {
        "LSTM" | "GRU" | "SimpleRNN" | "Bidirectional" | "MultiHeadAttention" => true,
        "GlobalAveragePooling1D" => channels_last(l),
        // Keras 3's Multiply, Maximum and Minimum use their inputs' masks in their values.
        "Multiply" | "Maximum" | "Minimum" => keras3,
        _ => false,
    }
}

/// One call of a layer [`takes_masks`] names, with the masks of its tensors (Keras's
/// implicit masks): they fill the mask arguments the call does not give, as Keras does; or
/// of an operation [`is_mask_op`] names.
pub fn call_masked(
    net: &Net,
    l: &LayerSpec,
    path: &[String],
    inputs: &[Output],
    call: &Call,
    mode: Mode,
    implicit: Implicit,
) -> Option<Result<Vec<Output>>> {
    let policy = l
        .get("dtype")
        .filter(|_| !is_mask_op(l))
        .and_then(|dt| dt.as_str().or_else(|| dt.get("config").and_then(|c| c.get("name")).and_then(Value::as_str)));
    if let Some(p) = policy {
        if p != "float32" {
            return Some(Err(err(l, format!("dtype policy '{p}' is not supported (float32 only)"))));
        }
    }
    let s = net.b.scope().name_scope(&path.join("/"));
    call_with(net, l, path, &s, inputs, call, mode, implicit)
}

#[allow(clippy::too_many_arguments)]
fn call_with(
    net: &Net,
    l: &LayerSpec,
    path: &[String],
    s: &Scope,
    inputs: &[Output],
    call: &Call,
    mode: Mode,
    implicit: Implicit,
) -> Option<Result<Vec<Output>>> {
    if l.module.as_deref().is_some_and(|m| m.starts_with("keras.src.ops")) {
        return mask_op(net, l, s, inputs, call);
    }
    Some(match l.class.as_str() {
        "LSTM" | "GRU" | "SimpleRNN" => rnn_layer(net, l, path, s, inputs, call, mode, implicit),
        "Bidirectional" => bidirectional(net, l, path, s, inputs, call, mode, implicit),
        "MultiHeadAttention" => attention(net, l, path, s, inputs, call, mode, implicit),
        "Masking" => masking(net, l, s, inputs),
        "GlobalAveragePooling1D" => return masked_average(net, l, s, inputs, call, implicit),
        "Multiply" | "Maximum" | "Minimum" if implicit.keras3 && implicit.masks.iter().any(Option::is_some) => {
            masked_merge(net, l, s, inputs, implicit)
        }
        _ => return None,
    })
}

// ---------------------------------------------------------------------------------------------
// Call arguments

/// A call's arguments with their tensors: positional ones named by the layer's signature,
/// each with the index of its first tensor in the call's tensors.
struct Bound<'a> {
    items: Vec<(Option<&'a str>, &'a Arg, Vec<Output>, usize)>,
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
    let mut start = 0;
    for (name, a) in positional.chain(named) {
        let n = count(a);
        let ts: Vec<Output> = it.by_ref().take(n).collect();
        if ts.len() != n {
            return Err(err(l, "the call has fewer tensors than its arguments name"));
        }
        items.push((name, a, ts, start));
        start += n;
    }
    Ok(Bound { items })
}

impl Bound<'_> {
    /// The tensors of argument `name` (`None` when it has none).
    fn tensors(&self, name: &str) -> Option<&[Output]> {
        self.items.iter().find(|(n, _, ts, _)| *n == Some(name) && !ts.is_empty()).map(|(_, _, ts, _)| ts.as_slice())
    }

    /// The implicit mask of argument `name`'s (first) tensor.
    fn implicit(&self, name: &str, implicit: Implicit) -> Option<Output> {
        let (_, _, _, start) = self.items.iter().find(|(n, _, ts, _)| *n == Some(name) && !ts.is_empty())?;
        implicit.masks.get(*start).copied().flatten()
    }

    /// How many arguments hold tensors (Keras 3 fills `mask` only for a call of one).
    fn tensor_arguments(&self) -> usize {
        self.items.iter().filter(|(_, _, ts, _)| !ts.is_empty()).count()
    }

    /// The first tensor of argument `name`.
    fn tensor(&self, name: &str) -> Option<Output> {
        self.tensors(name).map(|t| t[0])
    }

    /// The boolean value of argument `name`.
    fn flag(&self, name: &str) -> Option<bool> {
        self.items.iter().find(|(n, _, _, _)| *n == Some(name)).and_then(|(_, a, _, _)| match a {
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

/// A Keras initializer from config value `key` (`default` when absent or unreadable).
fn initializer(c: &Map<String, Value>, key: &str, default: Initializer) -> Initializer {
    c.get(key).and_then(|v| layers::initializer_from(v, default.clone())).unwrap_or(default)
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
        kernel_init: initializer(c, "kernel_initializer", layers::glorot()),
        recurrent_init: initializer(c, "recurrent_initializer", layers::glorot()),
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

/// A recurrent call's mask: its `mask` argument, else the sequence's implicit mask (Keras 2
/// passes it always; Keras 3 only to a call whose one tensor argument is the sequence).
fn rnn_mask(b: &Bound, implicit: Implicit) -> Option<Output> {
    b.tensor("mask").or_else(|| {
        if implicit.keras3 && b.tensor_arguments() != 1 {
            return None;
        }
        b.implicit("sequences", implicit)
    })
}

#[allow(clippy::too_many_arguments)]
fn rnn_layer(
    net: &Net,
    l: &LayerSpec,
    path: &[String],
    s: &Scope,
    inputs: &[Output],
    call: &Call,
    mode: Mode,
    implicit: Implicit,
) -> R<Vec<Output>> {
    let b = bind(l, call, inputs, RNN_SIGNATURE)?;
    let x = b.tensor("sequences").or(inputs.first().copied()).ok_or_else(|| err(l, "called without a sequence"))?;
    if s.dtype(x) != DType::Float {
        return Err(err(l, format!("input is {}; ferroflow runs Keras layers in float32", s.dtype(x))));
    }
    let rc = rnn_config(l, &l.class, &l.config, mode)?;
    let (_, f) = sequence_dims(net, l, x)?;
    let w = net.weights_of(l, path, rc.specs(f, ""), mode.trainable)?;
    run_rnn(net, l, s, &rc, &w, x, rnn_mask(&b, implicit), b.tensors("initial_state"))
}

#[allow(clippy::too_many_arguments)]
fn bidirectional(
    net: &Net,
    l: &LayerSpec,
    path: &[String],
    s: &Scope,
    inputs: &[Output],
    call: &Call,
    mode: Mode,
    implicit: Implicit,
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
    let mut fwd = inner("layer")?.ok_or_else(|| err(l, "config has no 'layer'"))?;
    let mut bwd = match inner("backward_layer")? {
        Some(r) => r,
        None => {
            // Keras makes the backward layer from the forward one's config, going backwards.
            let mut r = inner("layer")?.expect("read above");
            r.go_backwards = !r.go_backwards;
            r.name = format!("backward_{}", r.name.trim_start_matches("forward_"));
            r
        }
    };
    // Keras (2 and 3) forces both layers' zero_output_for_mask to their return_sequences:
    // masked steps of a returned sequence are zeros, not the previous output.
    fwd.zero_output_for_mask = fwd.return_sequences;
    bwd.zero_output_for_mask = bwd.return_sequences;
    if fwd.return_sequences != bwd.return_sequences || fwd.return_state != bwd.return_state {
        return Err(err(l, "the forward and backward layers must agree on return_sequences and return_state"));
    }
    let (_, f) = sequence_dims(net, l, x)?;
    let mut specs = fwd.specs(f, &format!("{}/", fwd.name));
    let nf = specs.len();
    specs.extend(bwd.specs(f, &format!("{}/", bwd.name)));
    let w = net.weights_of(l, path, specs, mode.trainable)?;
    let mask = rnn_mask(&b, implicit);
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

#[allow(clippy::too_many_arguments)]
fn attention(
    net: &Net,
    l: &LayerSpec,
    path: &[String],
    s: &Scope,
    inputs: &[Output],
    call: &Call,
    mode: Mode,
    implicit: Implicit,
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
    let k_init = initializer(c, "kernel_initializer", layers::glorot());
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

    // The mask: the query's implicit mask ([B, T] → [B, T, 1]; Keras reads it from the
    // query tensor, ignoring a `query_mask` argument), value and key masks ([B, S] →
    // [B, 1, S]; given, else the tensors' implicit ones), the attention mask ([B, T, S]) and
    // the causal one ([T, S]), and-ed; it applies to every head.
    let mut mask: Option<Output> = None;
    let mut and = |m: Output| -> R<()> {
        mask = Some(match mask {
            None => m,
            Some(p) => s.logical_and(p, m)?,
        });
        Ok(())
    };
    if let Some(m) = b.implicit("query", implicit) {
        let m = bool_mask(l, net, s, m)?;
        and(s.expand_dims(m, -1i32)?)?;
    }
    for (name, tensor) in [("value_mask", "value"), ("key_mask", "key")] {
        if let Some(m) = b.tensor(name).or_else(|| b.implicit(tensor, implicit)) {
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

// ---------------------------------------------------------------------------------------------
// Masks

fn channels_last(l: &LayerSpec) -> bool {
    l.get("data_format").and_then(Value::as_str).is_none_or(|f| f == "channels_last")
}

/// `mask` as booleans (Keras casts a mask to bool: nonzero is kept).
pub(crate) fn as_bool(s: &Scope, m: Output) -> R<Output> {
    Ok(match s.dtype(m) {
        DType::Bool => m,
        DType::Float => s.not_equal(m, 0.0f32)?,
        DType::Int64 => s.not_equal(m, 0i64)?,
        _ => s.not_equal(s.cast(m, DType::Int32)?, 0i32)?,
    })
}

/// `Masking`'s mask of `x`: the steps with any feature other than `mask_value`.
pub fn masking_mask(l: &LayerSpec, s: &Scope, x: Output, keep_dims: bool) -> R<Output> {
    let v = number(l, &l.config, "mask_value", 0.0)? as f32;
    let differs = s.not_equal(x, v)?;
    Ok(s.reduce("Any", differs, &[-1], keep_dims)?)
}

/// Keras's `Masking`: the masked steps zeroed (the mask itself is the caller's, from
/// [`masking_mask`]).
fn masking(net: &Net, l: &LayerSpec, s: &Scope, inputs: &[Output]) -> R<Vec<Output>> {
    let x = *inputs.first().ok_or_else(|| err(l, "called without an input tensor"))?;
    if s.dtype(x) != DType::Float {
        return Err(err(l, format!("input is {}; ferroflow runs Keras layers in float32", s.dtype(x))));
    }
    if net.dims(x, l)?.len() < 2 {
        return Err(err(l, "takes (batch, time, ...) inputs"));
    }
    let keep = masking_mask(l, s, x, true)?;
    Ok(vec![s.select_v2(keep, x, 0.0f32)?])
}

/// `GlobalAveragePooling1D` with a mask (its `mask` argument, else the implicit one): the
/// mean over the unmasked steps. `None` without a mask (the plain layer builds it).
fn masked_average(
    net: &Net,
    l: &LayerSpec,
    s: &Scope,
    inputs: &[Output],
    call: &Call,
    implicit: Implicit,
) -> Option<R<Vec<Output>>> {
    if !channels_last(l) {
        return None;
    }
    let b = match bind(l, call, inputs, &["inputs", "mask"]) {
        Ok(b) => b,
        Err(e) => return Some(Err(e)),
    };
    let mask = b.tensor("mask").or_else(|| b.implicit("inputs", implicit))?;
    let f = || -> R<Vec<Output>> {
        let x = b.tensor("inputs").ok_or_else(|| err(l, "called without an input tensor"))?;
        if net.dims(x, l)?.len() != 3 {
            return Err(err(l, "a masked average takes (batch, time, features) inputs"));
        }
        let keep = flag(&l.config, "keepdims", false);
        let m = s.expand_dims(bool_mask(l, net, s, mask)?, -1i32)?; // [B, T, 1]
        let total = s.reduce("Sum", s.select_v2(m, x, 0.0f32)?, &[1], keep)?;
        let n = s.reduce("Sum", s.cast(m, DType::Float)?, &[1], keep)?;
        Ok(vec![s.real_div(total, n)?])
    };
    Some(f())
}

/// Keras 3's `Multiply`, `Maximum` and `Minimum` on masked inputs: a masked step of one
/// input takes the other's value (Multiply: 1, and the product's fully masked steps 0).
fn masked_merge(net: &Net, l: &LayerSpec, s: &Scope, inputs: &[Output], implicit: Implicit) -> R<Vec<Output>> {
    if inputs.len() < 2 {
        return Err(err(l, format!("needs at least 2 inputs, got {}", inputs.len())));
    }
    // A [B, T] mask as [B, T, 1], broadcast against its input.
    let wide = |i: usize| -> R<Option<Output>> {
        match implicit.masks.get(i).copied().flatten() {
            None => Ok(None),
            Some(m) => {
                let m = as_bool(s, m)?;
                let (rm, rx) = (net.dims(m, l)?.len(), net.dims(inputs[i], l)?.len());
                Ok(Some(if rm < rx { s.expand_dims(m, -1i32)? } else { m }))
            }
        }
    };
    if l.class == "Multiply" {
        let all = (0..inputs.len()).all(|i| implicit.masks.get(i).copied().flatten().is_some());
        let mut out: Option<Output> = None;
        let mut out_mask: Option<Output> = None;
        for (i, &x) in inputs.iter().enumerate() {
            let mut x = x;
            if let Some(m) = wide(i)? {
                x = s.select_v2(m, x, 1.0f32)?;
                if all {
                    out_mask = Some(match out_mask {
                        None => m,
                        Some(o) => s.logical_or(o, m)?,
                    });
                }
            }
            out = Some(match out {
                None => x,
                Some(o) => s.mul(o, x)?,
            });
        }
        let mut out = out.expect("two inputs at least");
        if let Some(m) = out_mask {
            out = s.select_v2(m, out, 0.0f32)?;
        }
        return Ok(vec![out]);
    }
    let mut out = inputs[0];
    let mut out_mask = wide(0)?;
    for (i, &x) in inputs.iter().enumerate().skip(1) {
        let mask = wide(i)?;
        let x = match mask {
            Some(m) => s.select_v2(m, x, out)?,
            None => x,
        };
        if let Some(om) = out_mask {
            out = s.select_v2(om, out, x)?;
        }
        out_mask = match (mask, out_mask) {
            (Some(m), Some(om)) => Some(s.logical_or(om, m)?),
            _ => None,
        };
        out = if l.class == "Maximum" { s.maximum(out, x)? } else { s.minimum(out, x)? };
    }
    Ok(vec![out])
}

/// The Keras 3 operations a model's config holds to compute the masks it passes to layers
/// (`Any`, `LogicalOr`, `ExpandDims`, `ZerosLike`, `Concatenate`, ...). `None` for others.
fn mask_op(net: &Net, l: &LayerSpec, s: &Scope, inputs: &[Output], call: &Call) -> Option<R<Vec<Output>>> {
    let op = l.class.as_str();
    if !is_mask_op(l) {
        return None;
    }
    let f = || -> R<Vec<Output>> {
        let x = *inputs.first().ok_or_else(|| err(l, "called without an input tensor"))?;
        let rank = net.dims(x, l)?.len() as i64;
        let axes = |default: Option<Vec<i64>>| -> R<Option<Vec<i32>>> {
            let raw: Option<Vec<i64>> = match l.get("axis") {
                None => default,
                Some(Value::Array(a)) => Some(a.iter().map(|v| v.as_i64().unwrap_or(i64::MAX)).collect()),
                Some(v) => Some(vec![v.as_i64().unwrap_or(i64::MAX)]),
            };
            raw.map(|r| {
                r.iter()
                    .map(|&a| {
                        let n = if matches!(op, "ExpandDims") { rank + 1 } else { rank };
                        let a2 = if a < 0 { a + n } else { a };
                        if (0..n.max(1)).contains(&a2) {
                            Ok(a2 as i32)
                        } else {
                            Err(err(l, format!("axis {a} is out of range for rank {rank}")))
                        }
                    })
                    .collect()
            })
            .transpose()
        };
        let second = || -> R<Output> {
            match call.args.get(1) {
                Some(Arg::Tensor(_)) => inputs.get(1).copied().ok_or_else(|| err(l, "missing a tensor")),
                Some(Arg::Value(Value::Bool(v))) => Ok(s.scalar(*v)?),
                _ => Err(err(l, format!("operation '{op}' takes two tensors"))),
            }
        };
        let one = |o: Output| Ok(vec![o]);
        match op {
            "Any" | "All" => {
                let all: Vec<i64> = (0..rank).collect();
                let ax = axes(Some(all))?.expect("a default");
                one(s.reduce(op, as_bool(s, x)?, &ax, flag(&l.config, "keepdims", false))?)
            }
            "LogicalOr" => one(s.logical_or(as_bool(s, x)?, as_bool(s, second()?)?)?),
            "LogicalAnd" => one(s.logical_and(as_bool(s, x)?, as_bool(s, second()?)?)?),
            "LogicalNot" => one(s.logical_not(as_bool(s, x)?)?),
            "ExpandDims" => {
                let ax = axes(None)?.ok_or_else(|| err(l, "config has no 'axis'"))?;
                let mut y = x;
                let mut ax = ax;
                ax.sort_unstable();
                for a in ax {
                    y = s.expand_dims(y, a)?;
                }
                one(y)
            }
            "Squeeze" => {
                let ax: Vec<i64> = axes(None)?.unwrap_or_default().into_iter().map(i64::from).collect();
                one(s.squeeze_with(x, attrs::Squeeze::new().squeeze_dims(&ax))?)
            }
            "ZerosLike" | "OnesLike" => {
                let dtype = match l.get("dtype").and_then(Value::as_str) {
                    None => s.dtype(x),
                    Some("bool") => DType::Bool,
                    Some("float32") => DType::Float,
                    Some("int32") => DType::Int32,
                    Some("int64") => DType::Int64,
                    Some(d) => return Err(err(l, format!("dtype '{d}' is not supported"))),
                };
                let ones = op == "OnesLike";
                let value = match dtype {
                    DType::Bool => s.scalar(ones)?,
                    DType::Float => s.scalar(if ones { 1.0f32 } else { 0.0 })?,
                    DType::Int32 => s.scalar(i32::from(ones))?,
                    DType::Int64 => s.scalar(i64::from(ones))?,
                    d => return Err(err(l, format!("dtype {d} is not supported"))),
                };
                one(s.fill(s.shape(x)?, value)?)
            }
            _ => {
                // Concatenate: a list of tensors along `axis`.
                let ax = axes(Some(vec![0]))?.expect("a default");
                one(s.concat_v2(inputs, ax[0])?)
            }
        }
    };
    Some(f())
}
