//! TensorFlow's SavedModel, loaded (issue 18, first part): `saved_model.pb` holds one
//! `MetaGraphDef` per tag set; the chosen one is imported like a `.meta` file (its graph with
//! the function library, `StatefulPartitionedCall` bodies included), its variables are
//! restored from `variables/variables` by the meta graph's own restore op (TensorFlow 2 writes
//! a `saver_def` whose restore function maps the object-based checkpoint keys such as
//! `layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE` onto the graph's variables), the
//! `__saved_model_init_op` runs, and each `SignatureDef` is called by its input and output
//! keys. One `Session` serves every signature: plans are cached per signature and calls may
//! come from many threads at once.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ferroflow_proto::{tensor_info::Encoding, MetaGraphDef, SignatureDef, TensorInfo};
use ferroflow_runtime::{Session, SessionOptions};
use ferroflow_tensor::{DType, Shape, Tensor};

use crate::meta_graph::import_meta_graph;
use crate::{Result, TrainError};

/// One input or output of a signature: its key, the graph tensor, its dtype and shape
/// (`None` dims: any size, such as the batch).
#[derive(Debug, Clone)]
pub struct TensorSpec {
    /// The signature's key (`keras_tensor`, `output_0`).
    pub key: String,
    /// The graph tensor (`serving_default_keras_tensor:0`).
    pub tensor: String,
    /// Its dtype.
    pub dtype: DType,
    /// Its shape.
    pub shape: Shape,
}

/// A signature (`serving_default`): its inputs and outputs by key, sorted.
#[derive(Debug, Clone)]
pub struct Signature {
    /// The signature's name.
    pub name: String,
    /// Inputs by key.
    pub inputs: Vec<TensorSpec>,
    /// Outputs by key.
    pub outputs: Vec<TensorSpec>,
    /// `tensorflow/serving/predict` and the like.
    pub method_name: String,
}

/// A loaded SavedModel.
pub struct SavedModel {
    dir: PathBuf,
    tags: Vec<String>,
    session: Session,
    signatures: BTreeMap<String, Signature>,
}

fn data(dir: &Path, reason: impl Into<String>) -> TrainError {
    TrainError::Data { path: dir.display().to_string(), reason: reason.into() }
}

/// `float32[?, 4]`.
fn spec_text(dtype: DType, shape: &Shape) -> String {
    let name = match dtype {
        DType::Float => "float32",
        DType::Double => "float64",
        d => d.name(),
    };
    match shape.dims() {
        None => format!("{name}[?..]"),
        Some(d) => {
            let d: Vec<String> = d.iter().map(|d| d.map_or("?".into(), |d| d.to_string())).collect();
            format!("{name}[{}]", d.join(", "))
        }
    }
}

fn tensor_spec(key: &str, info: &TensorInfo, dir: &Path, sig: &str) -> Result<TensorSpec> {
    let Some(Encoding::Name(tensor)) = &info.encoding else {
        return Err(data(
            dir,
            format!(
                "signature '{sig}': '{key}' is not a dense tensor (sparse and composite signatures are not supported)"
            ),
        ));
    };
    let dtype = DType::from_tf(info.dtype).map_err(|e| data(dir, format!("signature '{sig}': '{key}': {e}")))?;
    let shape = info.tensor_shape.as_ref().map_or_else(Shape::unknown, ferroflow_proto::convert::shape_from_proto);
    Ok(TensorSpec { key: key.to_string(), tensor: tensor.clone(), dtype, shape })
}

fn signature(name: &str, def: &SignatureDef, dir: &Path) -> Result<Signature> {
    let specs = |m: &BTreeMap<String, TensorInfo>| -> Result<Vec<TensorSpec>> {
        let mut v: Vec<TensorSpec> = m.iter().map(|(k, i)| tensor_spec(k, i, dir, name)).collect::<Result<_>>()?;
        v.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(v)
    };
    Ok(Signature {
        name: name.to_string(),
        inputs: specs(&def.inputs)?,
        outputs: specs(&def.outputs)?,
        method_name: def.method_name.clone(),
    })
}

/// The tag sets of `saved_model.pb`'s meta graphs, and the one matching `tags`.
fn choose(metas: Vec<MetaGraphDef>, tags: &[&str], dir: &Path) -> Result<MetaGraphDef> {
    let mut want: Vec<&str> = tags.to_vec();
    want.sort_unstable();
    let mut seen = Vec::new();
    for m in metas {
        let mut have: Vec<String> = m.meta_info_def.as_ref().map(|i| i.tags.clone()).unwrap_or_default();
        have.sort();
        if have.iter().map(String::as_str).eq(want.iter().copied()) {
            return Ok(m);
        }
        seen.push(format!("[{}]", have.join(", ")));
    }
    Err(data(dir, format!("no meta graph with the tags [{}]; it has {}", want.join(", "), seen.join(", "))))
}

impl SavedModel {
    /// Loads the SavedModel in `dir` for the meta graph tagged `tags` (`&["serve"]`): imports
    /// it, restores its variables, runs its init op.
    pub fn load(dir: &Path, tags: &[&str], options: SessionOptions) -> Result<SavedModel> {
        let model = crate::saved_model_show::read_saved_model(dir)?;
        let meta = choose(model.meta_graphs, tags, dir)?;
        let mut signatures = BTreeMap::new();
        for (name, def) in &meta.signature_def {
            if name != "__saved_model_init_op" {
                signatures.insert(name.clone(), signature(name, def, dir)?);
            }
        }
        let init =
            meta.signature_def.get("__saved_model_init_op").and_then(|s| s.outputs.values().next()).and_then(|i| {
                match &i.encoding {
                    Some(Encoding::Name(n)) => Some(n.split(':').next().unwrap_or(n).to_string()),
                    _ => None,
                }
            });
        if let Some(graph) = &meta.graph_def {
            // The save function (TensorFlow 2's `_traced_save`) is not needed to load and call.
            let save = meta.saver_def.as_ref().map(|s| s.save_tensor_name.split(':').next().unwrap_or_default());
            let missing = ferroflow_runtime::support::missing_ops(graph, save.as_slice());
            if !missing.is_empty() {
                let list: Vec<String> = missing.iter().map(ToString::to_string).collect();
                return Err(data(
                    dir,
                    format!(
                        "the SavedModel uses {} op{} ferroflow cannot run: {}",
                        missing.len(),
                        if missing.len() == 1 { "" } else { "s" },
                        list.join("; ")
                    ),
                ));
            }
        }
        let imported = import_meta_graph(&meta, None, "")?;
        let session = Session::new(imported.graph, options)?;
        if let Some(saver) = &imported.saver {
            let variables = dir.join("variables");
            if !variables.join("variables.index").exists() {
                return Err(data(
                    dir,
                    "the meta graph has variables but there is no variables/variables.index (copy the whole SavedModel directory)",
                ));
            }
            saver.restore(&session, variables.join("variables"))?;
        }
        if let Some(init) = init.filter(|n| session.graph().find(n).is_some()) {
            session.run(&[], &[], &[init.as_str()])?;
        }
        Ok(SavedModel {
            dir: dir.to_path_buf(),
            tags: tags.iter().map(|t| t.to_string()).collect(),
            session,
            signatures,
        })
    }

    /// The directory it was loaded from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The tags of the loaded meta graph.
    pub fn tags(&self) -> &[String] {
        &self.tags
    }

    /// The signatures by name.
    pub fn signatures(&self) -> &BTreeMap<String, Signature> {
        &self.signatures
    }

    /// The session that runs the signatures.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The signature `name`; an error lists the ones there are.
    pub fn signature(&self, name: &str) -> Result<&Signature> {
        self.signatures.get(name).ok_or_else(|| {
            let names: Vec<&str> = self.signatures.keys().map(String::as_str).collect();
            TrainError::Invalid(format!(
                "no signature '{name}' in {}; it has: {}",
                self.dir.display(),
                names.join(", ")
            ))
        })
    }

    /// Calls signature `name` with `inputs` by key; returns the outputs named in `outputs` (all
    /// when empty) by key. Every input key must be given; dtypes and shapes must fit the
    /// signature (unknown dims take any size).
    pub fn call(&self, name: &str, inputs: &[(&str, Tensor)], outputs: &[&str]) -> Result<BTreeMap<String, Tensor>> {
        let sig = self.signature(name)?;
        let keys = |specs: &[TensorSpec]| specs.iter().map(|s| s.key.as_str()).collect::<Vec<_>>().join(", ");
        for (k, _) in inputs {
            if !sig.inputs.iter().any(|s| s.key == *k) {
                return Err(TrainError::Invalid(format!(
                    "signature '{name}' has no input '{k}'; its inputs: {}",
                    keys(&sig.inputs)
                )));
            }
        }
        let mut feeds = Vec::with_capacity(sig.inputs.len());
        for spec in &sig.inputs {
            let Some((_, t)) = inputs.iter().find(|(k, _)| *k == spec.key) else {
                return Err(TrainError::Invalid(format!(
                    "signature '{name}': input '{}' ({}) is not given",
                    spec.key,
                    spec_text(spec.dtype, &spec.shape)
                )));
            };
            if t.dtype() != spec.dtype || !spec.shape.is_compatible_with(t.dims()) {
                return Err(TrainError::Invalid(format!(
                    "signature '{name}': input '{}' is {}, the signature wants {}",
                    spec.key,
                    spec_text(t.dtype(), &Shape::known(t.dims())),
                    spec_text(spec.dtype, &spec.shape)
                )));
            }
            feeds.push((spec.tensor.as_str(), t.clone()));
        }
        let wanted: Vec<&TensorSpec> = if outputs.is_empty() {
            sig.outputs.iter().collect()
        } else {
            outputs
                .iter()
                .map(|k| {
                    sig.outputs.iter().find(|s| s.key == *k).ok_or_else(|| {
                        TrainError::Invalid(format!(
                            "signature '{name}' has no output '{k}'; its outputs: {}",
                            keys(&sig.outputs)
                        ))
                    })
                })
                .collect::<Result<_>>()?
        };
        let fetches: Vec<&str> = wanted.iter().map(|s| s.tensor.as_str()).collect();
        let values = self.session.run(&feeds, &fetches, &[])?;
        Ok(wanted.iter().map(|s| s.key.clone()).zip(values).collect())
    }
}
