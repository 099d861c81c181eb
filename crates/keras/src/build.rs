//! A [`ModelSpec`] built into a graph: input placeholders named as the model's input layers,
//! each layer call through [`crate::layers::call`], nested models inline under their name,
//! shared layers (and models) sharing their variables, and an `Identity` per output named
//! as the output layer.
use std::collections::HashMap;

use ferroflow_graph::Output;
use ferroflow_ops::RawOps;
use ferroflow_tensor::{DType, Shape};
use serde_json::Value;

use crate::config::{LayerSpec, ModelSpec, TensorRef};
use crate::layers::{self, Mode, Net};
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
pub fn build(
    net: &Net,
    spec: &ModelSpec,
    training: bool,
    phase: Option<Output>,
    placeholders: Option<&[(String, Output)]>,
) -> Result<Built> {
    let s = net.b.scope().clone();
    let inputs: Vec<(String, Output)> = match placeholders {
        Some(p) => p.to_vec(),
        None => spec
            .inputs
            .iter()
            .map(|t| {
                let l = spec.layer(&t.layer).expect("checked by the parser");
                let ph = s.with_exact_name(&l.name).placeholder(dtype_of(l)?, &input_shape(l)?)?;
                Ok((l.name.clone(), ph))
            })
            .collect::<Result<_>>()?,
    };
    let mut calls = Vec::new();
    let xs: Vec<Output> = inputs.iter().map(|(_, o)| *o).collect();
    let outs = run_model(net, spec, &[], &xs, Mode { training, trainable: true, phase }, &mut Some(&mut calls))?;
    let mut outputs = Vec::with_capacity(outs.len());
    for (t, o) in spec.outputs.iter().zip(outs) {
        // Named as the output layer; a layer's second output (an RNN's state) as `<layer>_<i>`.
        let mut key = t.layer.clone();
        if outputs.iter().any(|(k, _)| *k == key) {
            key = format!("{}_{}", t.layer, t.index);
        }
        let name = if placeholders.is_some() { format!("{key}_training") } else { key.clone() };
        let id = s.with_exact_name(&name).identity(o)?;
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

/// Builds `spec`'s layers under `path` on `xs` (its inputs in order); returns its outputs.
fn run_model(
    net: &Net,
    spec: &ModelSpec,
    path: &[String],
    xs: &[Output],
    mode: Mode,
    records: &mut Option<&mut Vec<CallRecord>>,
) -> Result<Vec<Output>> {
    if xs.len() != spec.inputs.len() {
        return Err(KerasError::Config(format!(
            "model '{}' takes {} inputs, called with {}",
            spec.name,
            spec.inputs.len(),
            xs.len()
        )));
    }
    let mode = Mode { trainable: mode.trainable && spec.trainable, ..mode };
    let mut made: HashMap<(&str, usize), Vec<Output>> = HashMap::new();
    for (t, &x) in spec.inputs.iter().zip(xs) {
        made.insert((t.layer.as_str(), 0), vec![x]);
        if let Some(r) = records.as_deref_mut() {
            let l = spec.layer(&t.layer).expect("checked");
            let mut p = path.to_vec();
            p.push(l.name.clone());
            r.push(CallRecord { path: p, class: l.class.clone(), node: 0, outputs: vec![x], connected: vec![] });
        }
    }
    let resolve_at = |made: &HashMap<(&str, usize), Vec<Output>>, t: &TensorRef, io: bool| -> Option<Output> {
        let l = spec.layer(&t.layer)?;
        let offset = if io { l.io_offset } else { l.node_offset };
        let node = t.node.checked_sub(offset).unwrap_or(t.node);
        made.get(&(l.name.as_str(), node)).and_then(|o| o.get(t.index)).copied()
    };
    let resolve = |made: &HashMap<(&str, usize), Vec<Output>>, t: &TensorRef| resolve_at(made, t, false);
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
            let outs = match &l.model {
                Some(inner) => run_model(net, inner, &p, &ins, call_mode, records)?,
                None => layers::call(net, l, &p, &ins, call, call_mode)?,
            };
            if let Some(r) = records.as_deref_mut() {
                let connected = refs.iter().map(|t| format!("{}[{}][{}]", t.layer, t.node, t.index)).collect();
                r.push(CallRecord { path: p, class: l.class.clone(), node: i, outputs: outs.clone(), connected });
            }
            made.insert((l.name.as_str(), i), outs);
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
    spec.outputs
        .iter()
        .map(|t| {
            resolve_at(&made, t, true).ok_or_else(|| {
                KerasError::Config(format!(
                    "model '{}': output {}[{}][{}] is never made",
                    spec.name, t.layer, t.node, t.index
                ))
            })
        })
        .collect()
}
