//! [`KerasModel`]: a Keras model's config and weights, read from and written to Keras's files,
//! and built into ferroflow graphs.
use std::path::{Path, PathBuf};

use ferroflow_graph::NodeId;
use ferroflow_runtime::{Session, SessionOptions};
use ferroflow_tensor::Tensor;
use ferroflow_train::Builder;
use serde_json::Value;

use crate::build::{self, Built};
use crate::config::{self, ModelSpec};
use crate::layers::{LayerWeights, Net};
use crate::weights::{self, WeightMap};
use crate::{archive, h5, KerasError, Result};

/// A Keras model: its config (as written, for writing back) and its weights by layer path.
#[derive(Clone, Debug)]
pub struct KerasModel {
    /// The parsed config.
    pub spec: ModelSpec,
    config: Value,
    metadata: Value,
    weights: Option<WeightMap>,
    source: String,
}

/// Which file a path is, by its first bytes.
enum Kind {
    Zip,
    Hdf5,
}

fn sniff(bytes: &[u8], path: &Path) -> Result<Kind> {
    if bytes.starts_with(b"PK") {
        Ok(Kind::Zip)
    } else if bytes.starts_with(b"\x89HDF\r\n\x1a\n") {
        Ok(Kind::Hdf5)
    } else {
        Err(KerasError::File {
            path: path.display().to_string(),
            reason: "neither a .keras archive (zip) nor an HDF5 file (.h5)".into(),
        })
    }
}

fn read_file(path: &Path) -> Result<Vec<u8>> {
    let err = |reason: String| KerasError::File { path: path.display().to_string(), reason };
    let meta = std::fs::metadata(path).map_err(|e| err(e.to_string()))?;
    ferroflow_tensor::limit::check(usize::try_from(meta.len()).unwrap_or(usize::MAX), || {
        format!("reading {}", path.display())
    })?;
    std::fs::read(path).map_err(|e| err(e.to_string()))
}

/// Keras 2's `model_config` attribute of a whole-model `.h5`.
fn legacy_config(root: &h5::Group, path: &Path) -> Result<Value> {
    let text = root.attr("model_config").and_then(h5::Attr::text).ok_or_else(|| KerasError::File {
        path: path.display().to_string(),
        reason: "an HDF5 file without a 'model_config' attribute: a weights-only file (load it with load_weights into a model from its config)".into(),
    })?;
    serde_json::from_str(&text).map_err(|e| KerasError::File {
        path: path.display().to_string(),
        reason: format!("'model_config' is not valid JSON: {e}"),
    })
}

impl KerasModel {
    /// Reads a `.keras` file (Keras 3) or a whole-model legacy `.h5` (Keras 2).
    pub fn load(path: impl AsRef<Path>) -> Result<KerasModel> {
        let path = path.as_ref();
        KerasModel::from_bytes(read_file(path)?, path)
    }

    /// [`KerasModel::load`] of a file's bytes (`path` names it in errors).
    pub fn from_bytes(bytes: Vec<u8>, path: &Path) -> Result<KerasModel> {
        let file = path.display().to_string();
        match sniff(&bytes, path)? {
            Kind::Zip => {
                let a = archive::read(&bytes, path)?;
                drop(bytes);
                let spec = config::parse_model(&a.config)?;
                let root = h5::read(&a.weights, &format!("{file}[model.weights.h5]"))?;
                let weights = weights::read_keras3(&root, &spec, &file)?;
                Ok(KerasModel { spec, config: a.config, metadata: a.metadata, weights: Some(weights), source: file })
            }
            Kind::Hdf5 => {
                let root = h5::read(&bytes, &file)?;
                drop(bytes);
                let config = legacy_config(&root, path)?;
                let spec = config::parse_model(&config)?;
                let weights_root = root.group("model_weights").unwrap_or(&root);
                let weights = weights::read_legacy(weights_root, &spec, &file)?;
                Ok(KerasModel {
                    spec,
                    config,
                    metadata: Value::Object(Default::default()),
                    weights: Some(weights),
                    source: file,
                })
            }
        }
    }

    /// [`KerasModel::from_config`] of a config's JSON text (`config.json`'s bytes).
    pub fn from_config_json(json: &[u8]) -> Result<KerasModel> {
        let v = serde_json::from_slice(json).map_err(|e| KerasError::Config(format!("not valid JSON: {e}")))?;
        KerasModel::from_config(v)
    }

    /// A model from a config (Keras 3's `config.json` object, or Keras 2's `model_config`)
    /// without weights: building it initializes them as its layers' initializers say.
    pub fn from_config(config: Value) -> Result<KerasModel> {
        let spec = config::parse_model(&config)?;
        Ok(KerasModel {
            spec,
            config,
            metadata: Value::Object(Default::default()),
            weights: None,
            source: "config".into(),
        })
    }

    /// A model from a config written without weights or tensor shapes (as
    /// [`crate::functional`] writes them): built once with its initializers' values (random
    /// ones reproducible with `seed`), those become its weights, and the shapes its calls
    /// take are filled in, so [`KerasModel::save`] writes a file Keras loads.
    pub fn initialized(config: Value, seed: Option<i64>) -> Result<KerasModel> {
        let mut m = KerasModel::from_config(config)?;
        let b = seed.map_or_else(Builder::new, Builder::with_seed);
        let p = m.predictor_in(b, SessionOptions::default())?;
        m.complete_shapes(&p)?;
        m.weights = Some(p.weights()?);
        m.source = "initializers".into();
        Ok(m)
    }

    /// Reads weights into this model: a `.weights.h5` (Keras 3's layout) or a legacy `.h5`
    /// (whole model or `save_weights`; matched by layer name). Shapes are checked when the
    /// model is built.
    pub fn load_weights(&mut self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let bytes = read_file(path)?;
        let file = path.display().to_string();
        let root = match sniff(&bytes, path)? {
            Kind::Hdf5 => h5::read(&bytes, &file)?,
            Kind::Zip => {
                let a = archive::read(&bytes, path)?;
                h5::read(&a.weights, &format!("{file}[model.weights.h5]"))?
            }
        };
        let map = if root.group("layers").is_some() {
            weights::read_keras3(&root, &self.spec, &file)?
        } else {
            weights::read_legacy(root.group("model_weights").unwrap_or(&root), &self.spec, &file)?
        };
        self.weights = Some(map);
        self.source = file;
        Ok(())
    }

    /// The config as it will be written.
    pub fn config(&self) -> &Value {
        &self.config
    }

    /// Sets a layer's `trainable` flag in the config and the spec (`path`: names from the
    /// outer model in, as `["efficientnetb0", "block7a_project_conv"]`).
    pub fn set_trainable(&mut self, path: &[&str], trainable: bool) -> Result<()> {
        fn in_spec(m: &mut ModelSpec, path: &[&str], t: bool) -> bool {
            let Some(l) = m.layers.iter_mut().find(|l| l.name == path[0]) else { return false };
            if path.len() == 1 {
                l.trainable = t;
                l.config.insert("trainable".into(), Value::Bool(t));
                if let Some(inner) = &mut l.model {
                    inner.trainable = t;
                }
                return true;
            }
            l.model.as_mut().is_some_and(|inner| in_spec(inner, &path[1..], t))
        }
        fn in_json(v: &mut Value, path: &[&str], t: bool) -> bool {
            let Some(layers) = v.get_mut("config").and_then(|c| c.get_mut("layers")).and_then(Value::as_array_mut)
            else {
                return false;
            };
            let Some(l) = layers.iter_mut().find(|l| {
                l.get("name").or_else(|| l.get("config").and_then(|c| c.get("name"))).and_then(Value::as_str)
                    == Some(path[0])
            }) else {
                return false;
            };
            if path.len() == 1 {
                if let Some(c) = l.get_mut("config").and_then(Value::as_object_mut) {
                    c.insert("trainable".into(), Value::Bool(t));
                }
                return true;
            }
            in_json(l, &path[1..], t)
        }
        if path.is_empty() || !in_spec(&mut self.spec, path, trainable) {
            return Err(KerasError::Invalid(format!("the model has no layer '{}'", path.join("/"))));
        }
        in_json(&mut self.config, path, trainable);
        Ok(())
    }

    /// Builds the model in inference mode in a new session, with its weights (or its
    /// initializers' values when it has none).
    pub fn predictor(&self, options: SessionOptions) -> Result<Predictor> {
        self.predictor_in(Builder::new(), options)
    }

    fn predictor_in(&self, b: Builder, options: SessionOptions) -> Result<Predictor> {
        let net = Net::new(b);
        let built = build::build(&net, &self.spec, false, None)?;
        let init = net.b.global_variables_initializer()?;
        let session = Session::new(net.b.graph(), options)?;
        let init_name = session.graph().node(init).name.clone();
        session.run(&[], &[], &[&init_name])?;
        let layers = net.weights.borrow().clone();
        assign(&session, &layers, self.weights.as_ref(), &self.source)?;
        Ok(Predictor { session, built, layers })
    }

    /// Sets every BatchNormalization layer's moving statistics to those of its input on
    /// `inputs` (one batch, or one per model input): one forward pass in which each layer
    /// normalizes with its batch's statistics and keeps them (momentum 0), dropout off.
    /// What a model of random weights lacks and pretrained weights carry: with it, a random
    /// base is a usable (if weak) feature extractor in inference mode.
    pub fn calibrate_batch_norm(&mut self, inputs: &[Tensor]) -> Result<()> {
        let mut net = Net::new(Builder::new());
        net.calibrating = true;
        let built = build::build(&net, &self.spec, true, None)?;
        let init = net.b.global_variables_initializer()?;
        let updates: Vec<NodeId> = net.updates.borrow().clone();
        let g = net.b.graph();
        let session = Session::new(g, SessionOptions::default())?;
        let init_name = session.graph().node(init).name.clone();
        session.run(&[], &[], &[&init_name])?;
        let layers = net.weights.borrow().clone();
        assign(&session, &layers, self.weights.as_ref(), &self.source)?;
        if inputs.len() != built.inputs.len() {
            return Err(KerasError::Invalid(format!(
                "the model takes {} inputs, got {}",
                built.inputs.len(),
                inputs.len()
            )));
        }
        let names: Vec<String> = built.inputs.iter().map(|(_, o)| session.graph().output_name(*o)).collect();
        let feeds: Vec<(&str, Tensor)> = names.iter().map(String::as_str).zip(inputs.iter().cloned()).collect();
        let targets: Vec<String> = updates.iter().map(|&id| session.graph().node(id).name.clone()).collect();
        let targets: Vec<&str> = targets.iter().map(String::as_str).collect();
        session.run(&feeds, &[], &targets)?;
        self.weights = Some(read_weights(&session, &layers)?);
        Ok(())
    }

    /// Writes the model as a `.keras` file (atomically) with `weights` (layer path → values;
    /// this model's own when `None`).
    pub fn save(&self, path: impl AsRef<Path>, weights: Option<&WeightMap>) -> Result<()> {
        let path = path.as_ref();
        let w = weights.or(self.weights.as_ref()).ok_or_else(|| {
            KerasError::Invalid("the model has no weights to save (build it and take its weights first)".into())
        })?;
        let root = weights::write_keras3(&self.spec, w);
        let bytes = h5::write(&root, &path.display().to_string())?;
        let mut metadata = self.metadata.clone();
        if !metadata.is_object() {
            metadata = Value::Object(Default::default());
        }
        let m = metadata.as_object_mut().expect("an object");
        m.entry("keras_version").or_insert_with(|| Value::from("3.15.1"));
        m.insert("date_saved".into(), Value::from(date_saved()));
        let config = if self.spec.format == config::Format::Keras3 {
            self.config.clone()
        } else {
            return Err(KerasError::Invalid(
                "a Keras 2 model (legacy .h5) cannot be saved as .keras: its config is in Keras 2's form".into(),
            ));
        };
        archive::write(path, &config, &metadata, &bytes)
    }

    /// Writes the weights as a Keras 3 `.weights.h5` (atomically).
    pub fn save_weights(&self, path: impl AsRef<Path>, weights: Option<&WeightMap>) -> Result<()> {
        let path = path.as_ref();
        let w = weights
            .or(self.weights.as_ref())
            .ok_or_else(|| KerasError::Invalid("the model has no weights to save".into()))?;
        let root = weights::write_keras3(&self.spec, w);
        let bytes = h5::write(&root, &path.display().to_string())?;
        ferroflow_tensor::fs::write_atomic(path, &bytes)
            .map_err(|e| KerasError::File { path: path.display().to_string(), reason: e.to_string() })
    }

    /// Fills in the shapes and dtypes of the tensors in the config's calls (what Keras's
    /// loader reads and a config written by [`crate::functional`] lacks) from the model as
    /// `p` built it.
    pub fn complete_shapes(&mut self, p: &Predictor) -> Result<()> {
        let g = p.session().graph();
        let shapes = ferroflow_ops::infer_shapes(g).map_err(ferroflow_ops::BuildError::from)?;
        let mut made = std::collections::HashMap::new();
        for c in &p.built().calls {
            let outs: Vec<(Value, String)> = c
                .outputs
                .iter()
                .map(|o| {
                    let shape = shapes
                        .get(o.node)
                        .and_then(|s| s.get(o.index))
                        .cloned()
                        .unwrap_or_else(ferroflow_tensor::Shape::unknown);
                    let dims = shape
                        .dims()
                        .map_or(Value::Null, |d| d.iter().map(|x| x.map_or(Value::Null, Value::from)).collect());
                    (dims, g.output_type(*o).python_name().to_string())
                })
                .collect();
            made.insert((c.path.join("/"), c.node), outs);
        }
        fn fill(v: &mut Value, prefix: &str, made: &std::collections::HashMap<(String, usize), Vec<(Value, String)>>) {
            match v {
                Value::Object(o) if o.get("class_name").and_then(Value::as_str) == Some("__keras_tensor__") => {
                    let Some(cfg) = o.get_mut("config").and_then(Value::as_object_mut) else { return };
                    let h = cfg.get("keras_history").and_then(Value::as_array).cloned().unwrap_or_default();
                    let (Some(l), Some(n), Some(i)) = (
                        h.first().and_then(Value::as_str),
                        h.get(1).and_then(Value::as_u64),
                        h.get(2).and_then(Value::as_u64),
                    ) else {
                        return;
                    };
                    let key = if prefix.is_empty() { l.to_string() } else { format!("{prefix}/{l}") };
                    if let Some((shape, dtype)) = made.get(&(key, n as usize)).and_then(|o| o.get(i as usize)) {
                        cfg.insert("shape".into(), shape.clone());
                        cfg.insert("dtype".into(), Value::from(dtype.as_str()));
                    }
                }
                Value::Object(o) => o.values_mut().for_each(|x| fill(x, prefix, made)),
                Value::Array(a) => a.iter_mut().for_each(|x| fill(x, prefix, made)),
                _ => {}
            }
        }
        fn walk(
            model: &mut Value,
            prefix: &str,
            made: &std::collections::HashMap<(String, usize), Vec<(Value, String)>>,
        ) {
            let Some(layers) = model.get_mut("config").and_then(|c| c.get_mut("layers")).and_then(Value::as_array_mut)
            else {
                return;
            };
            for l in layers {
                if let Some(nodes) = l.get_mut("inbound_nodes") {
                    fill(nodes, prefix, made);
                }
                if matches!(l.get("class_name").and_then(Value::as_str), Some("Functional" | "Sequential")) {
                    let name = l.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
                    let inner = if prefix.is_empty() { name } else { format!("{prefix}/{name}") };
                    walk(l, &inner, made);
                }
            }
        }
        walk(&mut self.config, "", &made);
        Ok(())
    }

    /// The file the weights came from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Replaces the weights.
    pub fn set_weights(&mut self, weights: WeightMap) {
        self.weights = Some(weights);
    }

    /// The weights, if the model has them.
    pub fn weights(&self) -> Option<&WeightMap> {
        self.weights.as_ref()
    }
}

/// `YYYY-MM-DD@HH:MM:SS` (UTC), Keras's `date_saved`.
fn date_saved() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}@{:02}:{:02}:{:02}", rem / 3600, rem / 60 % 60, rem % 60)
}

/// Assigns `weights` (by layer path) to the layers' variables in `session`, checking counts
/// and shapes; layers missing from `weights` keep their initial values only when there are
/// no weights at all.
pub(crate) fn assign(
    session: &Session,
    layers: &[LayerWeights],
    weights: Option<&WeightMap>,
    file: &str,
) -> Result<()> {
    let Some(weights) = weights else { return Ok(()) };
    let mut used = 0usize;
    for lw in layers {
        let key = lw.path.join("/");
        let values = weights.get(&key).ok_or_else(|| KerasError::Weights {
            layer: key.clone(),
            reason: format!("the file has no weights for it ({} expected)", lw.vars.len()),
            path: file.to_string(),
        })?;
        used += 1;
        if values.len() != lw.vars.len() {
            let names: Vec<&str> = lw.vars.iter().map(|(s, _)| s.name.as_str()).collect();
            return Err(KerasError::Weights {
                layer: key,
                reason: format!(
                    "the file has {} weights, the layer has {} ({})",
                    values.len(),
                    lw.vars.len(),
                    names.join(", ")
                ),
                path: file.to_string(),
            });
        }
        for ((spec, var), value) in lw.vars.iter().zip(values) {
            if value.dims() != spec.shape.as_slice() {
                return Err(KerasError::WeightShape {
                    layer: key,
                    weight: spec.name.clone(),
                    model: spec.shape.clone(),
                    file: value.dims().to_vec(),
                    path: file.to_string(),
                });
            }
            let v = session
                .variable(&var.name)
                .ok_or_else(|| KerasError::Invalid(format!("variable '{}' missing", var.name)))?;
            let value = if value.dtype() != v.dtype() {
                cast_to(value, v.dtype(), &key, &spec.name, file)?
            } else {
                value.clone()
            };
            v.assign(value);
        }
    }
    if used < weights.len() {
        let known: std::collections::HashSet<String> = layers.iter().map(|l| l.path.join("/")).collect();
        if let Some(extra) = weights.keys().find(|k| !known.contains(*k)) {
            return Err(KerasError::Weights {
                layer: extra.clone(),
                reason: "the file has weights for it but the layer makes none".into(),
                path: file.to_string(),
            });
        }
    }
    Ok(())
}

/// A counter stored as int64 (Normalization's `count`) read into a float variable, or back.
fn cast_to(t: &Tensor, dtype: ferroflow_tensor::DType, layer: &str, weight: &str, file: &str) -> Result<Tensor> {
    use ferroflow_tensor::DType;
    let vals: Vec<f64> = match t.dtype() {
        DType::Float => t.as_slice::<f32>()?.iter().map(|&x| f64::from(x)).collect(),
        DType::Double => t.as_slice::<f64>()?.to_vec(),
        DType::Int64 => t.as_slice::<i64>()?.iter().map(|&x| x as f64).collect(),
        DType::Int32 => t.as_slice::<i32>()?.iter().map(|&x| f64::from(x)).collect(),
        d => {
            return Err(KerasError::Weights {
                layer: layer.into(),
                reason: format!("weight '{weight}' is {d} in the file"),
                path: file.into(),
            })
        }
    };
    Ok(match dtype {
        DType::Float => Tensor::from_vec(t.dims(), vals.iter().map(|&x| x as f32).collect())?,
        DType::Int64 => Tensor::from_vec(t.dims(), vals.iter().map(|&x| x as i64).collect())?,
        DType::Double => Tensor::from_vec(t.dims(), vals)?,
        d => return Err(KerasError::Invalid(format!("cannot convert weight '{weight}' of '{layer}' to {d}"))),
    })
}

/// A model built in inference mode in a session.
pub struct Predictor {
    session: Session,
    built: Built,
    layers: Vec<LayerWeights>,
}

impl Predictor {
    /// The input names (the model's input layers), in order.
    pub fn input_names(&self) -> Vec<&str> {
        self.built.inputs.iter().map(|(n, _)| n.as_str()).collect()
    }

    /// The output names (the model's output layers), in order.
    pub fn output_names(&self) -> Vec<&str> {
        self.built.outputs.iter().map(|(n, _)| n.as_str()).collect()
    }

    /// Runs the model on `inputs` (one per input, in order); returns the outputs in order.
    pub fn predict(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        if inputs.len() != self.built.inputs.len() {
            return Err(KerasError::Invalid(format!(
                "the model takes {} inputs ({}), got {}",
                self.built.inputs.len(),
                self.input_names().join(", "),
                inputs.len()
            )));
        }
        let g = self.session.graph();
        let names: Vec<String> = self.built.inputs.iter().map(|(_, o)| g.output_name(*o)).collect();
        let feeds: Vec<(&str, Tensor)> = names.iter().map(String::as_str).zip(inputs.iter().cloned()).collect();
        let outs: Vec<String> = self.built.outputs.iter().map(|(_, o)| g.output_name(*o)).collect();
        let fetches: Vec<&str> = outs.iter().map(String::as_str).collect();
        Ok(self.session.run(&feeds, &fetches, &[])?)
    }

    /// The session.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// What building gave (inputs, outputs, every layer call).
    pub fn built(&self) -> &Built {
        &self.built
    }

    /// The layers with weights, in creation order.
    pub fn layers(&self) -> &[LayerWeights] {
        &self.layers
    }

    /// The current weights by layer path (in Keras's order), for writing a file.
    pub fn weights(&self) -> Result<WeightMap> {
        read_weights(&self.session, &self.layers)
    }
}

/// The variables' current values by layer path.
pub(crate) fn read_weights(session: &Session, layers: &[LayerWeights]) -> Result<WeightMap> {
    let mut map = WeightMap::new();
    for lw in layers {
        let mut vals = Vec::with_capacity(lw.vars.len());
        for (spec, var) in &lw.vars {
            let v = session.variable(&var.name).and_then(|v| v.read()).ok_or_else(|| {
                KerasError::Invalid(format!("weight '{}' of layer '{}' has no value", spec.name, lw.path.join("/")))
            })?;
            vals.push(v);
        }
        map.insert(lw.path.join("/"), vals);
    }
    Ok(map)
}

/// `path` with `.keras` checked: Keras 3 refuses to save to any other suffix.
pub fn check_keras_suffix(path: &Path) -> Result<PathBuf> {
    if path.extension().and_then(|e| e.to_str()) != Some("keras") {
        return Err(KerasError::Invalid(format!("{}: a Keras model file must end in .keras", path.display())));
    }
    Ok(path.to_path_buf())
}
