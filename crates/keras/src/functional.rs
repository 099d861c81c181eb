//! Writing Keras 3 model configs from Rust: [`Functional`] adds layers and their calls as
//! Keras's functional API records them (`inbound_nodes` of `__keras_tensor__` arguments), and
//! [`Functional::config`] gives the model object `config.json` holds. Tensor shapes in the
//! calls, which Keras's loader needs, are filled in by [`crate::KerasModel::complete_shapes`]
//! once ferroflow has built the model.
use serde_json::{json, Map, Value};

/// One output of one layer call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tensor {
    layer: String,
    node: usize,
    index: usize,
}

/// A functional model being written.
#[derive(Clone, Debug, Default)]
pub struct Functional {
    name: String,
    layers: Vec<Value>,
    calls: std::collections::HashMap<String, usize>,
    inputs: Vec<Tensor>,
}

fn tensor_arg(t: &Tensor) -> Value {
    json!({"class_name": "__keras_tensor__", "config": {"shape": null, "dtype": "float32", "keras_history": [t.layer, t.node, t.index]}})
}

/// A Keras 3 layer object of `class` (`keras.layers`) with `config` (its name added).
pub fn layer_object(class: &str, name: &str, mut config: Map<String, Value>) -> Value {
    config.insert("name".into(), Value::from(name));
    config.entry("trainable").or_insert(Value::Bool(true));
    config.entry("dtype").or_insert_with(|| {
        json!({"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null})
    });
    json!({"module": "keras.layers", "class_name": class, "config": config, "registered_name": null, "name": name})
}

/// Keras's serialized initializer `class` with `config`.
pub fn initializer(class: &str, config: Value) -> Value {
    json!({"module": "keras.initializers", "class_name": class, "config": config, "registered_name": null})
}

impl Functional {
    /// A model named `name`.
    pub fn new(name: &str) -> Functional {
        Functional { name: name.to_string(), ..Functional::default() }
    }

    /// An input layer `name` of `shape` (without the batch dimension).
    pub fn input(&mut self, name: &str, shape: &[usize]) -> Tensor {
        let mut batch = vec![Value::Null];
        batch.extend(shape.iter().map(|&d| Value::from(d)));
        let obj = json!({"module": "keras.layers", "class_name": "InputLayer",
            "config": {"batch_shape": batch, "dtype": "float32", "sparse": false, "ragged": false, "name": name, "optional": false},
            "registered_name": null, "name": name, "inbound_nodes": []});
        self.layers.push(obj);
        let t = Tensor { layer: name.to_string(), node: 0, index: 0 };
        self.inputs.push(t.clone());
        t
    }

    fn call_value(&mut self, layer: usize, args: Value, kwargs: Value) -> Tensor {
        let name = self.layers[layer]["name"].as_str().unwrap_or_default().to_string();
        let nodes = self.layers[layer]["inbound_nodes"].as_array_mut().expect("layers get inbound_nodes");
        nodes.push(json!({"args": args, "kwargs": kwargs}));
        let node = nodes.len() - 1;
        self.calls.insert(name.clone(), node + 1);
        Tensor { layer: name, node, index: 0 }
    }

    /// Adds layer `object` (from [`layer_object`] or a nested model's [`Functional::config`])
    /// and calls it on `inputs` (one tensor, or a list for merge layers) with `kwargs`.
    pub fn call(&mut self, mut object: Value, inputs: &[&Tensor], kwargs: Value) -> Tensor {
        object["inbound_nodes"] = Value::Array(Vec::new());
        self.layers.push(object);
        let args = match inputs {
            [one] => json!([tensor_arg(one)]),
            many => json!([Value::Array(many.iter().map(|t| tensor_arg(t)).collect())]),
        };
        self.call_value(self.layers.len() - 1, args, kwargs)
    }

    /// Calls layer `class` named `name` with `config` on `inputs`.
    pub fn layer(&mut self, class: &str, name: &str, config: Value, inputs: &[&Tensor]) -> Tensor {
        let config = config.as_object().cloned().unwrap_or_default();
        self.call(layer_object(class, name, config), inputs, json!({}))
    }

    /// The model object (`{"module", "class_name": "Functional", "config", ...}`) with
    /// `outputs`.
    pub fn config(&self, outputs: &[&Tensor]) -> Value {
        let triple = |t: &Tensor| json!([t.layer, t.node, t.index]);
        // Keras's loader counts a nested Functional's calls from 1 here (its node 0 is its own).
        let out_triple = |t: &Tensor| {
            let nested = self.layers.iter().any(|l| l["name"] == t.layer.as_str() && l["class_name"] == "Functional");
            json!([t.layer, t.node + usize::from(nested), t.index])
        };
        let out = match outputs {
            [one] => out_triple(one),
            many => Value::Array(many.iter().map(|t| out_triple(t)).collect()),
        };
        json!({"module": "keras.src.models.functional", "class_name": "Functional",
            "config": {"name": self.name, "trainable": true, "layers": self.layers,
                "input_layers": self.inputs.iter().map(triple).collect::<Vec<_>>(), "output_layers": out},
            "registered_name": "Functional", "name": self.name})
    }
}
