//! A Keras model config (Keras 3's `config.json`, Keras 2's `model_config` attribute) as a
//! graph of layer calls: [`ModelSpec`] holds the layers in config order, each with its calls
//! (Keras's inbound nodes) and, for a nested model, the inner [`ModelSpec`]. A `Sequential`
//! becomes the same form (an input layer, then one call per layer on the previous output), so
//! building sees one shape of model.
use serde_json::{Map, Value};

use crate::{KerasError, Result};

/// Which writer made a config: the call and tensor forms differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Keras 3 (`.keras`, and Keras 3's legacy `.h5` writer).
    Keras3,
    /// Keras 2 / tf_keras (`model_config` of a legacy `.h5`).
    Keras2,
}

/// One output of one call of a layer: Keras's `keras_history` (`[layer, node, tensor]`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorRef {
    /// The layer's name.
    pub layer: String,
    /// Which call of the layer (0 for its first call in this config).
    pub node: usize,
    /// Which output of that call.
    pub index: usize,
}

/// An argument of a layer call.
#[derive(Clone, Debug)]
pub enum Arg {
    /// A tensor another call made.
    Tensor(TensorRef),
    /// A list (or tuple) of arguments, e.g. `Add()([a, b])`.
    List(Vec<Arg>),
    /// A Python value (number, string, bool, null, dict).
    Value(Value),
}

impl Arg {
    /// The tensors in this argument, depth first.
    pub fn tensors<'a>(&'a self, out: &mut Vec<&'a TensorRef>) {
        match self {
            Arg::Tensor(t) => out.push(t),
            Arg::List(items) => items.iter().for_each(|a| a.tensors(out)),
            Arg::Value(_) => {}
        }
    }
}

/// One call of a layer (a Keras inbound node).
#[derive(Clone, Debug, Default)]
pub struct Call {
    /// Positional arguments.
    pub args: Vec<Arg>,
    /// Keyword arguments (`training`, `mask`, `use_causal_mask`, a second tensor...).
    pub kwargs: Vec<(String, Arg)>,
}

impl Call {
    /// The keyword argument `name`.
    pub fn kwarg(&self, name: &str) -> Option<&Arg> {
        self.kwargs.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    /// Every tensor the call takes, positional first.
    pub fn tensors(&self) -> Vec<&TensorRef> {
        let mut out = Vec::new();
        self.args.iter().for_each(|a| a.tensors(&mut out));
        self.kwargs.iter().for_each(|(_, a)| a.tensors(&mut out));
        out
    }

    /// `training=` given in the call: `Some(false)` for Keras's transfer-learning recipe's
    /// `base(x, training=False)`.
    pub fn training(&self) -> Option<bool> {
        match self.kwarg("training") {
            Some(Arg::Value(Value::Bool(b))) => Some(*b),
            _ => None,
        }
    }
}

/// One layer of a model config.
#[derive(Clone, Debug)]
pub struct LayerSpec {
    /// The layer's name (unique in its model).
    pub name: String,
    /// Keras's class name (`Conv2D`; `Functional`/`Sequential` for a nested model).
    pub class: String,
    /// Keras 3's module (`keras.layers`, `keras.src.ops.numpy`, ...), if given.
    pub module: Option<String>,
    /// Keras 3's registered name (`ff>Scale` for a custom class), if given.
    pub registered_name: Option<String>,
    /// The layer's `config` object.
    pub config: Map<String, Value>,
    /// The layer's own `trainable` flag.
    pub trainable: bool,
    /// The inner model of a nested model.
    pub model: Option<Box<ModelSpec>>,
    /// The calls in this model, in order.
    pub calls: Vec<Call>,
    /// What a call argument's `node` index is offset by: Keras 2 numbers a nested model's
    /// calls from 1 (its node 0 is its own inner one).
    pub node_offset: usize,
    /// What an `input_layers`/`output_layers` entry's `node` index is offset by: the same in
    /// Keras 2; in Keras 3 a nested Functional's calls count from 1 there (Keras's loader
    /// subtracts its built-in node) but from 0 in call arguments.
    pub io_offset: usize,
}

impl LayerSpec {
    /// A value of the layer's config.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.config.get(key).filter(|v| !v.is_null())
    }

    /// Whether the layer is a model.
    pub fn is_model(&self) -> bool {
        self.model.is_some()
    }
}

/// A Functional model (a Sequential is converted to one).
#[derive(Clone, Debug)]
pub struct ModelSpec {
    /// The model's name.
    pub name: String,
    /// `Functional` or `Sequential` (as written).
    pub class: String,
    /// The layers, in config order (input layers included).
    pub layers: Vec<LayerSpec>,
    /// The model's inputs.
    pub inputs: Vec<TensorRef>,
    /// The model's outputs.
    pub outputs: Vec<TensorRef>,
    /// Whether the outputs were written as a list (so results are a list even for one).
    pub outputs_listed: bool,
    /// The model's `trainable` flag.
    pub trainable: bool,
    /// Which writer.
    pub format: Format,
}

impl ModelSpec {
    /// The layer named `name`.
    pub fn layer(&self, name: &str) -> Option<&LayerSpec> {
        self.layers.iter().find(|l| l.name == name)
    }

    /// The input layers' names, in input order.
    pub fn input_names(&self) -> Vec<&str> {
        self.inputs.iter().map(|t| t.layer.as_str()).collect()
    }

    /// The output layers' names, in output order.
    pub fn output_names(&self) -> Vec<&str> {
        self.outputs.iter().map(|t| t.layer.as_str()).collect()
    }
}

/// Nesting deeper than this is refused (a config is untrusted input).
const MAX_DEPTH: usize = 32;

fn bad(what: impl Into<String>) -> KerasError {
    KerasError::Config(what.into())
}

fn str_of<'a>(v: &'a Map<String, Value>, key: &str, what: &str) -> Result<&'a str> {
    v.get(key).and_then(Value::as_str).ok_or_else(|| bad(format!("{what}: '{key}' must be a string")))
}

/// Parses a model object: `{"class_name": ..., "config": ...}` (Keras 2's `model_config`, or
/// Keras 3's `config.json` with `module` and `registered_name`).
pub fn parse_model(v: &Value) -> Result<ModelSpec> {
    let obj = v.as_object().ok_or_else(|| bad("the model config is not a JSON object"))?;
    let format = if obj.contains_key("module") { Format::Keras3 } else { Format::Keras2 };
    parse_model_object(obj, format, 0)
}

fn parse_model_object(obj: &Map<String, Value>, format: Format, depth: usize) -> Result<ModelSpec> {
    if depth > MAX_DEPTH {
        return Err(bad(format!("models nested deeper than {MAX_DEPTH}")));
    }
    let class = str_of(obj, "class_name", "model")?;
    let config = obj
        .get("config")
        .and_then(Value::as_object)
        .ok_or_else(|| bad(format!("model of class '{class}' has no 'config' object")))?;
    let name = config.get("name").and_then(Value::as_str).unwrap_or(class).to_string();
    let trainable = config.get("trainable").and_then(Value::as_bool).unwrap_or(true);
    let layers = config
        .get("layers")
        .and_then(Value::as_array)
        .ok_or_else(|| bad(format!("model '{name}' ({class}) has no 'layers' list")))?;
    match class {
        "Sequential" => parse_sequential(&name, config, layers, trainable, format, depth),
        "Functional" | "Model" => parse_functional(&name, class, config, layers, trainable, format, depth),
        other => Err(bad(format!("model '{name}': class '{other}' is neither Functional nor Sequential"))),
    }
}

fn is_model_class(class: &str) -> bool {
    matches!(class, "Functional" | "Sequential" | "Model")
}

/// One layer object (without its calls).
fn parse_layer(v: &Value, format: Format, depth: usize) -> Result<LayerSpec> {
    let obj = v.as_object().ok_or_else(|| bad("a layer entry is not a JSON object"))?;
    let class = str_of(obj, "class_name", "layer")?.to_string();
    let config = obj.get("config").and_then(Value::as_object).cloned().unwrap_or_default();
    let name = obj
        .get("name")
        .and_then(Value::as_str)
        .or_else(|| config.get("name").and_then(Value::as_str))
        .ok_or_else(|| bad(format!("a layer of class '{class}' has no name")))?
        .to_string();
    let model = if is_model_class(&class) {
        Some(Box::new(parse_model_object(obj, format, depth + 1).map_err(|e| match e {
            KerasError::Config(m) => bad(format!("in nested model '{name}': {m}")),
            e => e,
        })?))
    } else {
        None
    };
    let node_offset = usize::from(format == Format::Keras2 && model.as_ref().is_some_and(|m| has_input_layer(m)));
    let io_offset = match format {
        Format::Keras2 => node_offset,
        Format::Keras3 => usize::from(class == "Functional"),
    };
    Ok(LayerSpec {
        trainable: config.get("trainable").and_then(Value::as_bool).unwrap_or(true),
        module: obj.get("module").and_then(Value::as_str).map(str::to_string),
        registered_name: obj.get("registered_name").and_then(Value::as_str).map(str::to_string),
        name,
        class,
        config,
        model,
        calls: Vec::new(),
        node_offset,
        io_offset,
    })
}

fn has_input_layer(m: &ModelSpec) -> bool {
    m.layers.first().is_some_and(|l| l.class == "InputLayer")
}

/// `[layer, node, tensor]` (Keras 2 inbound entries carry a 4th element, the kwargs).
fn parse_triple(v: &Value, what: &str) -> Result<TensorRef> {
    let a =
        v.as_array().filter(|a| a.len() >= 3).ok_or_else(|| bad(format!("{what}: expected [layer, node, tensor]")))?;
    let layer = a[0].as_str().ok_or_else(|| bad(format!("{what}: the layer name must be a string")))?;
    let idx = |v: &Value| {
        v.as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .filter(|&n| n < 1 << 20)
            .ok_or_else(|| bad(format!("{what}: node and tensor indices must be small non-negative integers")))
    };
    Ok(TensorRef { layer: layer.to_string(), node: idx(&a[1])?, index: idx(&a[2])? })
}

/// `input_layers`/`output_layers`: one triple, or a list of triples. Returns whether a list.
fn parse_refs(v: Option<&Value>, what: &str) -> Result<(Vec<TensorRef>, bool)> {
    let a = v.and_then(Value::as_array).ok_or_else(|| bad(format!("'{what}' must be a list")))?;
    if a.first().is_some_and(Value::is_string) {
        return Ok((vec![parse_triple(&Value::Array(a.clone()), what)?], false));
    }
    Ok((a.iter().map(|t| parse_triple(t, what)).collect::<Result<_>>()?, true))
}

/// A Keras 3 call argument: a `__keras_tensor__`, a list, or a plain value.
fn parse_arg3(v: &Value, depth: usize) -> Result<Arg> {
    if depth > MAX_DEPTH {
        return Err(bad("call arguments nested too deeply"));
    }
    Ok(match v {
        Value::Object(o) if o.get("class_name").and_then(Value::as_str) == Some("__keras_tensor__") => {
            let history = o
                .get("config")
                .and_then(|c| c.get("keras_history"))
                .ok_or_else(|| bad("a __keras_tensor__ without keras_history"))?;
            Arg::Tensor(parse_triple(history, "keras_history")?)
        }
        Value::Array(items) => Arg::List(items.iter().map(|x| parse_arg3(x, depth + 1)).collect::<Result<_>>()?),
        other => Arg::Value(other.clone()),
    })
}

fn parse_calls(layer: &Map<String, Value>, format: Format, name: &str) -> Result<Vec<Call>> {
    let Some(nodes) = layer.get("inbound_nodes").and_then(Value::as_array) else {
        return Ok(Vec::new());
    };
    nodes
        .iter()
        .map(|node| match (format, node) {
            (_, Value::Object(o)) => {
                let args = o
                    .get("args")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().map(|x| parse_arg3(x, 0)).collect::<Result<Vec<_>>>())
                    .transpose()?
                    .unwrap_or_default();
                let kwargs = o
                    .get("kwargs")
                    .and_then(Value::as_object)
                    .map(|m| m.iter().map(|(k, v)| Ok((k.clone(), parse_arg3(v, 0)?))).collect::<Result<Vec<_>>>())
                    .transpose()?
                    .unwrap_or_default();
                Ok(Call { args, kwargs })
            }
            (_, Value::Array(entries)) => {
                // Keras 2: [[layer, node, tensor, {kwargs}], ...]; several entries are a list arg.
                let mut tensors = Vec::with_capacity(entries.len());
                let mut kwargs = Vec::new();
                for e in entries {
                    tensors.push(Arg::Tensor(parse_triple(e, &format!("inbound node of layer '{name}'"))?));
                    if let Some(Value::Object(kw)) = e.as_array().and_then(|a| a.get(3)) {
                        for (k, v) in kw {
                            let arg = match v {
                                Value::Array(t) if t.len() >= 3 && t[0].is_string() => {
                                    Arg::Tensor(parse_triple(v, &format!("kwarg '{k}' of layer '{name}'"))?)
                                }
                                other => parse_arg3(other, 0)?,
                            };
                            kwargs.push((k.clone(), arg));
                        }
                    }
                }
                let args = if tensors.len() == 1 { tensors } else { vec![Arg::List(tensors)] };
                Ok(Call { args, kwargs })
            }
            _ => Err(bad(format!("layer '{name}': an inbound node is neither an object nor a list"))),
        })
        .collect()
}

fn parse_functional(
    name: &str,
    class: &str,
    config: &Map<String, Value>,
    layers: &[Value],
    trainable: bool,
    format: Format,
    depth: usize,
) -> Result<ModelSpec> {
    let mut specs = Vec::with_capacity(layers.len());
    for l in layers {
        let mut spec = parse_layer(l, format, depth)?;
        spec.calls = parse_calls(l.as_object().expect("parse_layer checked"), format, &spec.name)?;
        if specs.iter().any(|s: &LayerSpec| s.name == spec.name) {
            return Err(bad(format!("model '{name}' has two layers named '{}'", spec.name)));
        }
        specs.push(spec);
    }
    let (inputs, _) = parse_refs(config.get("input_layers"), "input_layers")?;
    let (outputs, outputs_listed) = parse_refs(config.get("output_layers"), "output_layers")?;
    let m = ModelSpec {
        name: name.to_string(),
        class: class.to_string(),
        layers: specs,
        inputs,
        outputs,
        outputs_listed,
        trainable,
        format,
    };
    for t in m.inputs.iter().chain(&m.outputs) {
        if m.layer(&t.layer).is_none() {
            return Err(bad(format!("model '{name}' refers to a layer '{}' it does not have", t.layer)));
        }
    }
    for l in &m.layers {
        for c in &l.calls {
            for t in c.tensors() {
                if m.layer(&t.layer).is_none() {
                    return Err(bad(format!(
                        "layer '{}' takes an output of '{}', not a layer of model '{name}'",
                        l.name, t.layer
                    )));
                }
            }
        }
    }
    Ok(m)
}

/// The input shape a Sequential's first layer or `build_input_shape` declares.
fn declared_input(config: &Map<String, Value>, first: Option<&LayerSpec>) -> Option<Value> {
    first
        .and_then(|l| l.config.get("batch_input_shape").or_else(|| l.config.get("batch_shape")))
        .or_else(|| config.get("build_input_shape"))
        .filter(|v| v.is_array())
        .cloned()
}

fn parse_sequential(
    name: &str,
    config: &Map<String, Value>,
    layers: &[Value],
    trainable: bool,
    format: Format,
    depth: usize,
) -> Result<ModelSpec> {
    let mut specs: Vec<LayerSpec> = layers.iter().map(|l| parse_layer(l, format, depth)).collect::<Result<_>>()?;
    if specs.first().is_none_or(|l| l.class != "InputLayer") {
        let shape = declared_input(config, specs.first()).ok_or_else(|| {
            bad(format!("Sequential model '{name}' declares no input shape (no InputLayer, batch_input_shape or build_input_shape)"))
        })?;
        let mut c = Map::new();
        c.insert("batch_shape".into(), shape);
        c.insert("name".into(), Value::String(format!("{name}_input")));
        let dtype = specs.first().and_then(|l| l.config.get("dtype")).cloned().unwrap_or(Value::from("float32"));
        c.insert("dtype".into(), dtype);
        specs.insert(
            0,
            LayerSpec {
                name: format!("{name}_input"),
                class: "InputLayer".into(),
                module: None,
                registered_name: None,
                config: c,
                trainable: true,
                model: None,
                calls: Vec::new(),
                node_offset: 0,
                io_offset: 0,
            },
        );
    }
    for i in 1..specs.len() {
        let prev = specs[i - 1].name.clone();
        if specs[..i].iter().any(|s| s.name == specs[i].name) {
            return Err(bad(format!("model '{name}' has two layers named '{}'", specs[i].name)));
        }
        specs[i].calls =
            vec![Call { args: vec![Arg::Tensor(TensorRef { layer: prev, node: 0, index: 0 })], kwargs: vec![] }];
    }
    let last = specs.last().expect("an input layer at least").name.clone();
    Ok(ModelSpec {
        name: name.to_string(),
        class: "Sequential".into(),
        inputs: vec![TensorRef { layer: specs[0].name.clone(), node: 0, index: 0 }],
        outputs: vec![TensorRef { layer: last, node: 0, index: 0 }],
        outputs_listed: false,
        layers: specs,
        trainable,
        format,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keras2_inbound_nodes_and_keras3_tensors_parse_to_the_same_calls() {
        let k2: Value = serde_json::from_str(
            r#"{"class_name":"Functional","config":{"name":"m","layers":[
            {"class_name":"InputLayer","name":"x","config":{"batch_input_shape":[null,3],"name":"x"},"inbound_nodes":[]},
            {"class_name":"Dense","name":"d","config":{"name":"d","units":2},"inbound_nodes":[[["x",0,0,{}]]]},
            {"class_name":"Add","name":"a","config":{"name":"a"},"inbound_nodes":[[["d",0,0,{}],["x",0,0,{}]]]}],
            "input_layers":[["x",0,0]],"output_layers":[["a",0,0]]}}"#,
        )
        .unwrap();
        let m = parse_model(&k2).unwrap();
        assert_eq!(m.format, Format::Keras2);
        let add = m.layer("a").unwrap();
        assert_eq!(add.calls[0].tensors().iter().map(|t| t.layer.as_str()).collect::<Vec<_>>(), ["d", "x"]);
        let k3: Value = serde_json::from_str(
            r#"{"module":"keras","class_name":"Functional","config":{"name":"m","trainable":true,"layers":[
            {"module":"keras.layers","class_name":"InputLayer","name":"x","config":{"batch_shape":[null,3],"name":"x"},"inbound_nodes":[]},
            {"module":"keras.layers","class_name":"Dense","name":"d","config":{"name":"d","units":2},"inbound_nodes":[
              {"args":[{"class_name":"__keras_tensor__","config":{"shape":[null,3],"dtype":"float32","keras_history":["x",0,0]}}],"kwargs":{"training":false}}]}],
            "input_layers":[["x",0,0]],"output_layers":["d",0,0]}}"#,
        )
        .unwrap();
        let m = parse_model(&k3).unwrap();
        assert_eq!(m.format, Format::Keras3);
        assert_eq!(m.layer("d").unwrap().calls[0].training(), Some(false));
        assert!(!m.outputs_listed);
    }

    #[test]
    fn dangling_references_and_deep_nesting_are_errors() {
        let v: Value = serde_json::from_str(
            r#"{"class_name":"Functional","config":{"name":"m","layers":[
            {"class_name":"Dense","name":"d","config":{},"inbound_nodes":[[["nowhere",0,0,{}]]]}],
            "input_layers":[],"output_layers":[["d",0,0]]}}"#,
        )
        .unwrap();
        let e = parse_model(&v).unwrap_err().to_string();
        assert!(e.contains("'nowhere'"), "{e}");
        let mut deep = String::from(r#"{"class_name":"Sequential","config":{"name":"s","layers":[]}}"#);
        for _ in 0..40 {
            deep = format!(
                r#"{{"class_name":"Sequential","config":{{"name":"s","build_input_shape":[null,1],"layers":[{deep}]}}}}"#
            );
        }
        let e = parse_model(&serde_json::from_str(&deep).unwrap()).unwrap_err().to_string();
        assert!(e.contains("deeper"), "{e}");
    }
}
