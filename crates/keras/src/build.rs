//! A [`ModelSpec`] built into a graph: input placeholders named as the model's input layers,
//! each layer call through [`crate::layers::call`], nested models inline under their name,
//! shared layers (and models) sharing their variables, and an `Identity` per output named
//! as the output layer.
//!
//! Masks travel as Keras's `_keras_mask` does: beside the tensors, not in the config (Keras 2
//! writes none; Keras 3 writes the `mask` argument of layers that take one, but not what
//! `MultiHeadAttention` or the merges read). `Embedding(mask_zero=True)` and `Masking` make
//! one, layers that support masking pass their first input's on, merges combine them (Keras
//! 3: or, and only when every input has one; Keras 2: and of those given), recurrent layers
//! return it with sequences, and a call that reads masks gets its tensors' where it gives
//! none itself (`sequence::call_masked`). Keras 3's `MultiHeadAttention` deletes the masks of
//! the tensors it is called on, so calls Keras runs after it see none there: Keras's
//! execution order decides (`keras_order`).
use std::collections::{HashMap, HashSet};

use ferroflow_graph::Output;
use ferroflow_ops::{Ops, RawOps};
use ferroflow_tensor::{DType, Shape};
use serde_json::Value;

use crate::config::{Arg, Call, Format, LayerSpec, ModelSpec, TensorRef};
use crate::layers::{self, Mode, Net};
use crate::sequence::{self, Implicit};
use crate::{KerasError, Result};

/// One call of one layer as built: what `model.summary()` lists.
#[derive(Clone, Debug)]
pub struct CallRecord {
    /// Names from the outermost model in (`["efficientnetb0", "stem_conv"]`).
    pub path: Vec<String>,
    /// Keras's class.
    pub class: String,
    /// Which call of the layer (its node in the config, from 0).
    pub node: usize,
    /// The call's outputs.
    pub outputs: Vec<Output>,
    /// The layers whose outputs it takes (`name[node][tensor]`, as Keras's summary prints).
    pub connected: Vec<String>,
}

/// What building a model gave.
pub struct Built {
    /// The inputs: input layer name and its placeholder.
    pub inputs: Vec<(String, Output)>,
    /// The outputs: output layer name and the tensor.
    pub outputs: Vec<(String, Output)>,
    /// Every layer call, nested models' included (their paths are longer), in build order.
    pub calls: Vec<CallRecord>,
}

fn dtype_of(l: &LayerSpec) -> Result<DType> {
    let name = l
        .get("dtype")
        .and_then(|d| d.as_str().or_else(|| d.get("config").and_then(|c| c.get("name")).and_then(Value::as_str)));
    Ok(match name.unwrap_or("float32") {
        "float32" => DType::Float,
        "int32" => DType::Int32,
        "int64" => DType::Int64,
        "float64" => DType::Double,
        "bool" => DType::Bool,
        other => {
            return Err(KerasError::Layer {
                layer: l.name.clone(),
                class: l.class.clone(),
                reason: format!("input dtype '{other}' is not supported"),
            })
        }
    })
}

/// The batch shape an input layer declares.
pub fn input_shape(l: &LayerSpec) -> Result<Shape> {
    let v = l.get("batch_shape").or_else(|| l.get("batch_input_shape")).and_then(Value::as_array).ok_or_else(|| {
        KerasError::Layer { layer: l.name.clone(), class: l.class.clone(), reason: "declares no batch_shape".into() }
    })?;
    let dims = v
        .iter()
        .map(|d| match d {
            Value::Null => Ok(None),
            d => d.as_u64().and_then(|x| usize::try_from(x).ok()).filter(|&x| x < 1 << 31).map(Some).ok_or_else(|| {
                KerasError::Layer {
                    layer: l.name.clone(),
                    class: l.class.clone(),
                    reason: format!("bad batch_shape {v:?}"),
                }
            }),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Shape::new(dims))
}

/// Builds the top-level model: placeholders, the layers, output identities. `training`
/// is Keras's `training` argument for the whole model (calls that pass their own keep it).
pub fn build(net: &Net, spec: &ModelSpec, training: bool, phase: Option<Output>) -> Result<Built> {
    let s = net.b.scope().clone();
    let inputs: Vec<(String, Output)> = spec
        .inputs
        .iter()
        .map(|t| {
            let l = spec.layer(&t.layer).expect("checked by the parser");
            let ph = s.with_exact_name(&l.name).placeholder(dtype_of(l)?, &input_shape(l)?)?;
            Ok((l.name.clone(), ph))
        })
        .collect::<Result<_>>()?;
    let mut calls = Vec::new();
    let xs: Vec<Output> = inputs.iter().map(|(_, o)| *o).collect();
    let mode = Mode { training, trainable: true, phase };
    let (outs, _) = run_model(net, spec, &[], &xs, &[], mode, &mut Some(&mut calls))?;
    let mut outputs = Vec::with_capacity(outs.len());
    for (t, o) in spec.outputs.iter().zip(outs) {
        // Named as the output layer; a layer's second output (an RNN's state) as `<layer>_<i>`.
        let mut key = t.layer.clone();
        if outputs.iter().any(|(k, _)| *k == key) {
            key = format!("{}_{}", t.layer, t.index);
        }
        let id = s.with_exact_name(&key).identity(o)?;
        outputs.push((key, id));
    }
    Ok(Built { inputs, outputs, calls })
}

/// The `training` a call runs with. Keras 3 passes the model's own `training` down to every
/// call, overriding a `training=False` written into the call (`base(x, training=False)`
/// trains the base's dropout in `fit`; only frozen BatchNormalization still infers); Keras 2
/// keeps the call's own.
fn call_training(spec: &ModelSpec, call: &crate::config::Call, outer: bool) -> bool {
    match spec.format {
        crate::config::Format::Keras3 => outer,
        crate::config::Format::Keras2 => call.training().unwrap_or(outer),
    }
}

/// A built call's outputs and their masks.
type Made = (Vec<Output>, Vec<Option<Output>>);

/// Builds `spec`'s layers under `path` on `xs` (its inputs in order, with their masks
/// `in_masks`, empty for none); returns its outputs and their masks.
fn run_model(
    net: &Net,
    spec: &ModelSpec,
    path: &[String],
    xs: &[Output],
    in_masks: &[Option<Output>],
    mode: Mode,
    records: &mut Option<&mut Vec<CallRecord>>,
) -> Result<Made> {
    if xs.len() != spec.inputs.len() {
        return Err(KerasError::Config(format!(
            "model '{}' takes {} inputs, called with {}",
            spec.name,
            spec.inputs.len(),
            xs.len()
        )));
    }
    let mode = Mode { trainable: mode.trainable && spec.trainable, ..mode };
    let mut made: HashMap<(&str, usize), Made> = HashMap::new();
    for (i, (t, &x)) in spec.inputs.iter().zip(xs).enumerate() {
        made.insert((t.layer.as_str(), 0), (vec![x], vec![in_masks.get(i).copied().flatten()]));
        if let Some(r) = records.as_deref_mut() {
            let l = spec.layer(&t.layer).expect("checked");
            let mut p = path.to_vec();
            p.push(l.name.clone());
            r.push(CallRecord { path: p, class: l.class.clone(), node: 0, outputs: vec![x], connected: vec![] });
        }
    }
    let resolve_at = |made: &HashMap<(&str, usize), Made>, t: &TensorRef, io: bool| -> Option<Output> {
        made.get(&node_key(spec, t, io)?).and_then(|o| o.0.get(t.index)).copied()
    };
    let resolve = |made: &HashMap<(&str, usize), Made>, t: &TensorRef| resolve_at(made, t, false);
    let masks = Masks::new(spec, mode);
    // The mask of `t` as a call at Keras's execution position `at` sees it.
    let mask_at = |made: &HashMap<(&str, usize), Made>, t: &TensorRef, io: bool, at: usize| -> Option<Output> {
        let key = node_key(spec, t, io)?;
        let m = made.get(&key).and_then(|o| o.1.get(t.index)).copied().flatten()?;
        masks.visible(spec, key, t.index, at).then_some(m)
    };
    let mut pending: Vec<(&LayerSpec, usize)> = spec
        .layers
        .iter()
        .filter(|l| !spec.inputs.iter().any(|t| t.layer == l.name))
        .flat_map(|l| (0..l.calls.len()).map(move |i| (l, i)))
        .collect();
    while !pending.is_empty() {
        let before = pending.len();
        let mut rest = Vec::with_capacity(pending.len());
        for (l, i) in pending {
            let call = &l.calls[i];
            let refs = call.tensors();
            let ins: Option<Vec<Output>> = refs.iter().map(|t| resolve(&made, t)).collect();
            let Some(ins) = ins else {
                rest.push((l, i));
                continue;
            };
            let mut p = path.to_vec();
            p.push(l.name.clone());
            let call_mode = Mode {
                training: call_training(spec, call, mode.training),
                trainable: mode.trainable && l.trainable,
                ..mode
            };
            let at = masks.position(l.name.as_str(), i);
            let in_masks: Vec<Option<Output>> = refs.iter().map(|t| mask_at(&made, t, false, at)).collect();
            let (outs, out_masks) = match &l.model {
                Some(inner) => {
                    let (xs, masks) = model_inputs(call, &ins, &in_masks);
                    run_model(net, inner, &p, &xs, &masks, call_mode, records)?
                }
                None => {
                    let keras3 = spec.format == Format::Keras3;
                    let implicit = Implicit { masks: &in_masks, keras3 };
                    let masked = in_masks.iter().any(Option::is_some) && sequence::takes_masks(l, keras3);
                    let direct = masked || sequence::is_mask_op(l);
                    let outs = match direct.then(|| sequence::call_masked(net, l, &p, &ins, call, call_mode, implicit))
                    {
                        Some(Some(r)) => r?,
                        _ => layers::call(net, l, &p, &ins, call, call_mode)?,
                    };
                    let out_masks = output_masks(net, spec.format, l, &p, call, &ins, &in_masks, &outs)?;
                    (outs, out_masks)
                }
            };
            if let Some(r) = records.as_deref_mut() {
                let connected = refs.iter().map(|t| format!("{}[{}][{}]", t.layer, t.node, t.index)).collect();
                r.push(CallRecord { path: p, class: l.class.clone(), node: i, outputs: outs.clone(), connected });
            }
            made.insert((l.name.as_str(), i), (outs, out_masks));
        }
        if rest.len() == before {
            let (l, i) = rest[0];
            let missing: Vec<String> = l.calls[i]
                .tensors()
                .into_iter()
                .filter(|t| resolve(&made, t).is_none())
                .map(|t| format!("{}[{}][{}]", t.layer, t.node, t.index))
                .collect();
            return Err(KerasError::Config(format!(
                "model '{}': layer '{}' takes {} which no layer call makes (a cycle or a missing call)",
                spec.name,
                l.name,
                missing.join(", ")
            )));
        }
        pending = rest;
    }
    let outs = spec
        .outputs
        .iter()
        .map(|t| {
            resolve_at(&made, t, true).ok_or_else(|| {
                KerasError::Config(format!(
                    "model '{}': output {}[{}][{}] is never made",
                    spec.name, t.layer, t.node, t.index
                ))
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let out_masks = spec.outputs.iter().map(|t| mask_at(&made, t, true, usize::MAX)).collect();
    Ok((outs, out_masks))
}

/// A nested model's call: the tensors its inputs take (every argument but `mask`) and their
/// masks: the `mask` argument's (Keras 3 writes its inputs' masks there), else their own.
fn model_inputs(call: &Call, ins: &[Output], in_masks: &[Option<Output>]) -> (Vec<Output>, Vec<Option<Output>>) {
    fn flat(a: &Arg, out: &mut Vec<bool>) {
        match a {
            Arg::Tensor(_) => out.push(true),
            Arg::List(items) => items.iter().for_each(|a| flat(a, out)),
            Arg::Value(_) => out.push(false),
        }
    }
    let (mut xs, mut masks, mut given) = (Vec::new(), Vec::new(), Vec::new());
    let mut next = 0;
    let named = call.kwargs.iter().map(|(k, a)| (Some(k.as_str()), a));
    for (name, a) in call.args.iter().map(|a| (None, a)).chain(named) {
        let mut slots = Vec::new();
        flat(a, &mut slots);
        for is_tensor in slots {
            let t = is_tensor.then_some(next).filter(|&i| i < ins.len());
            next += usize::from(is_tensor);
            match (name == Some("mask"), t) {
                (true, t) => given.push(t.map(|i| ins[i])),
                (false, Some(i)) => {
                    xs.push(ins[i]);
                    masks.push(in_masks.get(i).copied().flatten());
                }
                (false, None) => {}
            }
        }
    }
    for (m, g) in masks.iter_mut().zip(given) {
        if g.is_some() {
            *m = g;
        }
    }
    (xs, masks)
}

/// The call of `spec` that makes tensor `t` (`io`: an `input_layers`/`output_layers` entry).
fn node_key<'a>(spec: &'a ModelSpec, t: &TensorRef, io: bool) -> Option<(&'a str, usize)> {
    let l = spec.layer(&t.layer)?;
    let offset = if io { l.io_offset } else { l.node_offset };
    Some((l.name.as_str(), t.node.checked_sub(offset).unwrap_or(t.node)))
}

// ---------------------------------------------------------------------------------------------
// Masks

/// Keras 3 signature of `MultiHeadAttention.call`'s tensors whose masks it deletes.
const MHA_TENSORS: &[&str] = &["query", "value", "key"];

/// Layers whose output mask is their input's (`supports_masking` with Keras's default
/// `compute_mask`, in Keras 3 or Keras 2).
const PASS_MASK: &[&str] = &[
    "Activation",
    "ELU",
    "LeakyReLU",
    "PReLU",
    "ReLU",
    "Softmax",
    "ThresholdedReLU",
    "Dense",
    "Identity",
    "BatchNormalization",
    "GroupNormalization",
    "LayerNormalization",
    "UnitNormalization",
    "Normalization",
    "Rescaling",
    "ActivityRegularization",
    "AlphaDropout",
    "Dropout",
    "SpatialDropout1D",
    "SpatialDropout2D",
    "SpatialDropout3D",
    "GaussianDropout",
    "GaussianNoise",
    "TimeDistributed",
];

/// Where Keras 3's `MultiHeadAttention` deletes masks: for each tensor object (a layer
/// that returns its input unchanged, as `Dropout` in inference, passes the same object on)
/// the first position in Keras's execution order of a call that deletes its mask.
struct Masks<'a> {
    /// Each call's position in Keras's execution order (Keras 3 models with attention).
    order: HashMap<(&'a str, usize), usize>,
    /// Tensor object (its first producer's output) → the position deleting its mask.
    deleted: HashMap<((&'a str, usize), usize), usize>,
    mode: Mode,
}

impl<'a> Masks<'a> {
    fn new(spec: &'a ModelSpec, mode: Mode) -> Masks<'a> {
        let mut m = Masks { order: HashMap::new(), deleted: HashMap::new(), mode };
        let attention = |l: &LayerSpec| {
            l.class == "MultiHeadAttention" && !l.module.as_deref().is_some_and(|m| m.starts_with("keras.src.ops"))
        };
        if spec.format != Format::Keras3 || !spec.layers.iter().any(attention) {
            return m;
        }
        m.order = keras_order(spec);
        for l in spec.layers.iter().filter(|l| attention(l)) {
            for (i, call) in l.calls.iter().enumerate() {
                let Some(&at) = m.order.get(&(l.name.as_str(), i)) else { continue };
                for t in MHA_TENSORS.iter().filter_map(|name| named_tensor(call, MHA_TENSORS, name)) {
                    if let Some(obj) = node_key(spec, t, false).and_then(|k| m.object(spec, (k, t.index))) {
                        let e = m.deleted.entry(obj).or_insert(at);
                        *e = (*e).min(at);
                    }
                }
            }
        }
        m
    }

    /// The position of call `i` of layer `name` in Keras's execution order.
    fn position(&self, name: &str, i: usize) -> usize {
        self.order.get(&(name, i)).copied().unwrap_or(usize::MAX)
    }

    /// The tensor object output `key.1` of call `key.0` is: the output of the first call up
    /// the chain of layers that return their input unchanged.
    fn object(&self, spec: &'a ModelSpec, key: ((&'a str, usize), usize)) -> Option<((&'a str, usize), usize)> {
        let mut key = key;
        for _ in 0..=spec.layers.len() {
            let l = spec.layer(key.0 .0)?;
            let up = l
                .calls
                .get(key.0 .1)
                .filter(|_| key.1 == 0 && returns_input(l, self.mode))
                .and_then(|c| c.tensors().first().copied());
            match up {
                Some(t) => key = (node_key(spec, t, false)?, t.index),
                None => return Some(key),
            }
        }
        None
    }

    /// Whether output `index` of call `key` still has its mask at position `at`.
    fn visible(&self, spec: &'a ModelSpec, key: (&'a str, usize), index: usize, at: usize) -> bool {
        if self.deleted.is_empty() {
            return true;
        }
        match self.object(spec, (key, index)).and_then(|o| self.deleted.get(&o)) {
            Some(&d) => at <= d,
            None => true,
        }
    }
}

/// Whether Keras 3's layer `l` returns its input tensor object itself (in this mode).
fn returns_input(l: &LayerSpec, mode: Mode) -> bool {
    let rate = l.get("rate").and_then(Value::as_f64).unwrap_or(0.0);
    match l.class.as_str() {
        "Identity" | "ActivityRegularization" => true,
        "Dropout" | "SpatialDropout1D" | "SpatialDropout2D" | "SpatialDropout3D" | "AlphaDropout"
        | "GaussianDropout" => !mode.training || rate <= 0.0,
        "GaussianNoise" => !mode.training || l.get("stddev").and_then(Value::as_f64).unwrap_or(0.0) <= 0.0,
        "Activation" => l.get("activation").and_then(Value::as_str).is_some_and(|a| a == "linear"),
        _ => false,
    }
}

/// The tensor of argument `name` of `call` (positional ones named by `signature`).
fn named_tensor<'c>(call: &'c Call, signature: &[&str], name: &str) -> Option<&'c TensorRef> {
    let arg = match signature.iter().position(|n| *n == name).and_then(|i| call.args.get(i)) {
        Some(a) => Some(a),
        None => call.kwarg(name),
    }?;
    let mut ts = Vec::new();
    arg.tensors(&mut ts);
    ts.first().copied()
}

/// Keras 3's execution order of `spec`'s calls (`Functional._run_through_graph`): a
/// depth-first walk from the outputs orders the calls from the inputs; each call's depth is
/// one more than the deepest of the calls that take its outputs (a shared layer's calls at
/// least its deepest); deeper calls run first, equal ones in the order they got a depth.
fn keras_order(spec: &ModelSpec) -> HashMap<(&str, usize), usize> {
    type Key<'a> = (&'a str, usize);
    let parents = |k: Key| -> Vec<Key> {
        let Some(call) = spec.layer(k.0).and_then(|l| l.calls.get(k.1)) else { return Vec::new() };
        let mut refs = Vec::new();
        call.args.iter().for_each(|a| a.tensors(&mut refs));
        let mut kwargs: Vec<&(String, Arg)> = call.kwargs.iter().collect();
        kwargs.sort_by(|a, b| a.0.cmp(&b.0)); // Keras flattens its kwargs dict by sorted keys
        kwargs.iter().for_each(|(_, a)| a.tensors(&mut refs));
        refs.into_iter().filter_map(|t| node_key(spec, t, false)).collect()
    };
    // The walk (iterative: a config is untrusted input and may be deep).
    let mut finished: HashSet<Key> = HashSet::new();
    let mut walking: HashSet<Key> = HashSet::new();
    let mut from_inputs: Vec<Key> = Vec::new();
    for root in spec.outputs.iter().filter_map(|t| node_key(spec, t, true)) {
        if finished.contains(&root) {
            continue;
        }
        walking.insert(root);
        let mut stack = vec![(root, parents(root), 0usize)];
        while let Some(top) = stack.last_mut() {
            if let Some(&p) = top.1.get(top.2) {
                top.2 += 1;
                if !finished.contains(&p) && !walking.contains(&p) {
                    walking.insert(p);
                    stack.push((p, parents(p), 0));
                }
            } else {
                let (k, _, _) = stack.pop().expect("not empty");
                walking.remove(&k);
                finished.insert(k);
                from_inputs.push(k);
            }
        }
    }
    // Depths, in the order nodes get them (Python's dict order).
    let mut seen: Vec<Key> = Vec::new();
    let mut depth: HashMap<Key, usize> = HashMap::new();
    let mut layer_depth: HashMap<&str, usize> = HashMap::new();
    for &k in from_inputs.iter().rev() {
        let d = *depth.entry(k).or_insert_with(|| {
            seen.push(k);
            0
        });
        let d = d.max(layer_depth.get(k.0).copied().unwrap_or(0));
        layer_depth.insert(k.0, d);
        depth.insert(k, d);
        for p in parents(k).into_iter().filter(|p| finished.contains(p)) {
            let e = depth.entry(p).or_insert_with(|| {
                seen.push(p);
                0
            });
            *e = (*e).max(d + 1);
        }
    }
    let mut ordered: Vec<(usize, Key)> = seen.iter().enumerate().map(|(i, k)| (i, *k)).collect();
    ordered.sort_by_key(|&(i, k)| (std::cmp::Reverse(depth[&k]), i));
    ordered.into_iter().enumerate().map(|(pos, (_, k))| (k, pos)).collect()
}

/// The masks of a layer call's outputs, as Keras computes them (`compute_mask`).
#[allow(clippy::too_many_arguments)]
fn output_masks(
    net: &Net,
    format: Format,
    l: &LayerSpec,
    path: &[String],
    call: &Call,
    ins: &[Output],
    in_masks: &[Option<Output>],
    outs: &[Output],
) -> Result<Vec<Option<Output>>> {
    let none = vec![None; outs.len()];
    if l.module.as_deref().is_some_and(|m| m.starts_with("keras.src.ops")) {
        return Ok(none);
    }
    let scope = || net.b.scope().name_scope(&format!("{}/compute_mask", path.join("/")));
    // The first argument's masks (one per tensor in it), and the mask the call passes on:
    // its `mask` argument, else its first argument's.
    let first_len = call.args.first().map_or(0, |a| {
        let mut v = Vec::new();
        a.tensors(&mut v);
        v.len()
    });
    let first: Vec<Option<Output>> = in_masks.iter().take(first_len).copied().collect();
    let explicit = {
        let mut before = first_len;
        let mut found = None;
        for a in call.args.iter().skip(1) {
            let mut v = Vec::new();
            a.tensors(&mut v);
            before += v.len();
        }
        for (k, a) in &call.kwargs {
            let mut v = Vec::new();
            a.tensors(&mut v);
            if k == "mask" && v.len() == 1 {
                found = ins.get(before).copied();
            }
            before += v.len();
        }
        found
    };
    let previous = explicit.or_else(|| first.first().copied().flatten());
    let with_first = |m: Option<Output>| {
        let mut v = none.clone();
        if let Some(o) = v.first_mut() {
            *o = m;
        }
        v
    };
    let keras3 = format == Format::Keras3;
    Ok(match l.class.as_str() {
        "Embedding" => {
            if !l.get("mask_zero").and_then(Value::as_bool).unwrap_or(false) {
                return Ok(none);
            }
            let x = *ins.first().ok_or_else(|| KerasError::Config(format!("'{}' has no input", l.name)))?;
            let s = scope();
            with_first(Some(match s.dtype(x) {
                DType::Int64 => s.not_equal(x, 0i64)?,
                DType::Int32 => s.not_equal(x, 0i32)?,
                _ => s.not_equal(s.cast(x, DType::Float)?, 0.0f32)?,
            }))
        }
        "Masking" => {
            let x = *ins.first().ok_or_else(|| KerasError::Config(format!("'{}' has no input", l.name)))?;
            with_first(Some(sequence::masking_mask(l, &scope(), x, false)?))
        }
        "MultiHeadAttention" => {
            // The query's own mask (Keras 3 sets it; Keras 2's default passes the first input's).
            with_first(first.first().copied().flatten())
        }
        "LSTM" | "GRU" | "SimpleRNN" => {
            let seq = l.get("return_sequences").and_then(Value::as_bool).unwrap_or(false);
            with_first(previous.filter(|_| seq))
        }
        "Bidirectional" => {
            let inner =
                |k: &str| l.get("layer").and_then(|v| v.get("config")).and_then(|c| c.get(k)).and_then(Value::as_bool);
            if inner("return_sequences").unwrap_or(false) {
                let both = l.get("merge_mode").is_none();
                let mut v = with_first(previous);
                if both && v.len() > 1 {
                    v[1] = previous;
                }
                v
            } else {
                none
            }
        }
        "Add" | "Subtract" | "Multiply" | "Average" | "Maximum" | "Minimum" => {
            let given: Vec<Output> = first.iter().flatten().copied().collect();
            if given.is_empty() || (keras3 && given.len() < first.len()) {
                return Ok(none);
            }
            let s = scope();
            let mut acc = sequence::as_bool(&s, given[0])?;
            for &m in &given[1..] {
                let m = sequence::as_bool(&s, m)?;
                acc = if keras3 { s.logical_or(acc, m)? } else { s.logical_and(acc, m)? };
            }
            with_first(Some(acc))
        }
        "Concatenate" => {
            if first.iter().all(Option::is_none) || ins.len() < first.len() {
                return Ok(none);
            }
            let s = scope();
            let rank = net.shape(ins[0])?.rank().unwrap_or(0) as i64;
            let axis = l.get("axis").and_then(Value::as_i64).unwrap_or(-1);
            let axis = if axis < 0 { axis + rank } else { axis };
            let mut parts = Vec::with_capacity(first.len());
            for (&x, m) in ins.iter().zip(&first) {
                parts.push(match m {
                    None => s.fill(s.shape(x)?, true)?,
                    Some(m) => {
                        let m = sequence::as_bool(&s, *m)?;
                        if (net.shape(m)?.rank().unwrap_or(0) as i64) < rank {
                            s.logical_or(s.expand_dims(m, -1i32)?, s.fill(s.shape(x)?, false)?)?
                        } else {
                            m
                        }
                    }
                });
            }
            let joined = s.concat_v2(&parts, axis as i32)?;
            with_first(Some(s.reduce(if keras3 { "Any" } else { "All" }, joined, &[-1], false)?))
        }
        c if PASS_MASK.contains(&c) => with_first(previous),
        _ => none,
    })
}
