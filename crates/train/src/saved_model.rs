//! TensorFlow's SavedModel, loaded (issue 18, first part): `saved_model.pb` holds one
//! `MetaGraphDef` per tag set; the chosen one is imported like a `.meta` file (its graph with
//! the function library, `StatefulPartitionedCall` bodies included), its variables are
//! restored from `variables/variables` by the meta graph's own restore op (TensorFlow 2 writes
//! a `saver_def` whose restore function maps the object-based checkpoint keys such as
//! `layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE` onto the graph's variables), the
//! `__saved_model_init_op` runs, and each `SignatureDef` is called by its input and output
//! keys. One `Session` serves every signature: plans are cached per signature and calls may
//! come from many threads at once.
use std::collections::{BTreeMap, BTreeSet};
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
    signature_defs: BTreeMap<String, SignatureDef>,
}

/// `float32[?, 4]`.
fn spec_text(dtype: DType, shape: &Shape) -> String {
    shape.spec(dtype)
}

fn tensor_spec(key: &str, info: &TensorInfo, dir: &Path, sig: &str) -> Result<TensorSpec> {
    let Some(Encoding::Name(tensor)) = &info.encoding else {
        return Err(TrainError::file(
            dir,
            format!(
                "signature '{sig}': '{key}' is not a dense tensor (sparse and composite signatures are not supported)"
            ),
        ));
    };
    let dtype = DType::from_tf(info.dtype)
        .map_err(|e| TrainError::file_caused(dir, format!("signature '{sig}': '{key}': {e}"), e))?;
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

/// The signatures of a meta graph by name (without `__saved_model_init_op`); `dir` names the
/// SavedModel in errors.
pub fn signatures_of(meta: &MetaGraphDef, dir: &Path) -> Result<BTreeMap<String, Signature>> {
    let mut signatures = BTreeMap::new();
    for (name, def) in &meta.signature_def {
        if name != "__saved_model_init_op" {
            signatures.insert(name.clone(), signature(name, def, dir)?);
        }
    }
    Ok(signatures)
}

/// The node of the meta graph's save op (TensorFlow 2's `_traced_save` call), which loading
/// and calling signatures never run.
pub fn save_node(meta: &MetaGraphDef) -> Option<&str> {
    meta.saver_def.as_ref().map(|s| s.save_tensor_name.split(':').next().unwrap_or_default())
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
    Err(TrainError::file(dir, format!("no meta graph with the tags [{}]; it has {}", want.join(", "), seen.join(", "))))
}

impl SavedModel {
    /// Loads the SavedModel in `dir` for the meta graph tagged `tags` (`&["serve"]`): imports
    /// it, restores its variables, runs its init op.
    pub fn load(dir: &Path, tags: &[&str], options: SessionOptions) -> Result<SavedModel> {
        let model = crate::saved_model_show::read_saved_model(dir)?;
        let meta = choose(model.meta_graphs, tags, dir)?;
        let signatures = signatures_of(&meta, dir)?;
        let init =
            meta.signature_def.get("__saved_model_init_op").and_then(|s| s.outputs.values().next()).and_then(|i| {
                match &i.encoding {
                    Some(Encoding::Name(n)) => Some(n.split(':').next().unwrap_or(n).to_string()),
                    _ => None,
                }
            });
        if let Some(graph) = &meta.graph_def {
            // The save function (TensorFlow 2's `_traced_save`) is not needed to load and call.
            let save = save_node(&meta);
            let missing = ferroflow_runtime::support::missing_ops(graph, save.as_slice());
            if !missing.is_empty() {
                let list: Vec<String> = missing.iter().map(ToString::to_string).collect();
                return Err(TrainError::file(
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
                return Err(TrainError::file(
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
            signature_defs: meta.signature_def.clone(),
        })
    }

    /// The meta graph's `SignatureDef`s as stored, `__saved_model_init_op` included (what
    /// TensorFlow Serving's metadata lists).
    pub fn signature_defs(&self) -> &BTreeMap<String, SignatureDef> {
        &self.signature_defs
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

/// A signature to write: its name and its inputs and outputs as (key, graph tensor name).
#[derive(Clone, Debug)]
pub struct SignatureSpec {
    /// `serving_default`.
    pub name: String,
    /// (key, tensor) of each input: `("inputs", "inputs:0")`. Inputs should be placeholders.
    pub inputs: Vec<(String, String)>,
    /// (key, tensor) of each output.
    pub outputs: Vec<(String, String)>,
}

impl SignatureSpec {
    /// A `tensorflow/serving/predict` signature.
    pub fn new(name: &str, inputs: &[(&str, &str)], outputs: &[(&str, &str)]) -> SignatureSpec {
        let own = |v: &[(&str, &str)]| v.iter().map(|(k, t)| (k.to_string(), t.to_string())).collect();
        SignatureSpec { name: name.to_string(), inputs: own(inputs), outputs: own(outputs) }
    }
}

/// Writes a graph as a SavedModel that TensorFlow loads (`tf.saved_model.load(dir)
/// .signatures[...]`, `saved_model_cli`, TensorFlow Serving): TensorFlow 1's layout, as
/// `SavedModelBuilder.add_meta_graph_and_variables` writes it — `saved_model.pb` with one meta
/// graph (graph, saver, collections, signatures, tags) and the variables' tensor bundle in
/// `variables/variables`. The directory appears whole or not at all (written beside it, then
/// renamed).
pub struct SavedModelWriter {
    graph: ferroflow_proto::GraphDef,
    signatures: Vec<SignatureSpec>,
    defaults: Vec<(String, Tensor)>,
    tags: Vec<String>,
}

impl SavedModelWriter {
    /// A writer for `graph` (the session's graph, or a traced function's).
    pub fn new(graph: ferroflow_proto::GraphDef) -> SavedModelWriter {
        SavedModelWriter { graph, signatures: Vec::new(), defaults: Vec::new(), tags: vec!["serve".into()] }
    }

    /// Adds a signature.
    pub fn signature(mut self, spec: SignatureSpec) -> SavedModelWriter {
        self.signatures.push(spec);
        self
    }

    /// Gives placeholder `name` a default value in the written graph (it becomes a
    /// `PlaceholderWithDefault`), so callers of the signatures need not feed it: a model's
    /// `is_training` switch set to false.
    pub fn default_value(mut self, name: &str, value: Tensor) -> SavedModelWriter {
        self.defaults.push((name.to_string(), value));
        self
    }

    /// The meta graph's tags (default `serve`).
    pub fn tags(mut self, tags: &[&str]) -> SavedModelWriter {
        self.tags = tags.iter().map(|t| t.to_string()).collect();
        self
    }

    /// Writes the SavedModel to `dir` (which must not exist, or be empty), with the variables
    /// of `variables` — the session holding their values and the graph's saver — if the
    /// graph has any.
    pub fn save(self, dir: &Path, variables: Option<(&Session, &crate::saver::Saver)>) -> Result<()> {
        if std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some()) {
            return Err(TrainError::file(dir, "the SavedModel directory already exists and is not empty"));
        }
        let mut graph = self.graph;
        for (name, value) in &self.defaults {
            with_default(&mut graph, name, value).map_err(|reason| TrainError::file(dir, reason))?;
        }
        let imported = ferroflow_ops::import_graph_def(&graph).map_err(|e| TrainError::file_error(dir, e))?;
        let shapes = ferroflow_ops::infer_shapes(&imported).map_err(|e| TrainError::file_error(dir, e))?;
        let info = |sig: &str, key: &str, tensor: &str| -> Result<TensorInfo> {
            let (node, index) = match tensor.rsplit_once(':') {
                Some((n, i)) => {
                    (n, i.parse::<usize>().map_err(|_| TrainError::file(dir, format!("bad tensor name '{tensor}'")))?)
                }
                None => (tensor, 0),
            };
            let id = imported.find(node).ok_or_else(|| {
                TrainError::file(
                    dir,
                    format!("signature '{sig}': '{key}' names tensor '{tensor}', which is not in the graph"),
                )
            })?;
            let n = imported.node(id);
            let dtype = *n.types.outputs.get(index).ok_or_else(|| {
                TrainError::file(dir, format!("signature '{sig}': '{key}': node '{node}' has no output {index}"))
            })?;
            Ok(TensorInfo {
                encoding: Some(Encoding::Name(format!("{node}:{index}"))),
                dtype: dtype.to_tf(),
                tensor_shape: Some(ferroflow_proto::convert::shape_to_proto(&shapes[id][index])),
            })
        };
        let mut signature_def = BTreeMap::new();
        for s in &self.signatures {
            let mut def = SignatureDef { method_name: "tensorflow/serving/predict".into(), ..Default::default() };
            for (k, t) in &s.inputs {
                def.inputs.insert(k.clone(), info(&s.name, k, t)?);
            }
            for (k, t) in &s.outputs {
                def.outputs.insert(k.clone(), info(&s.name, k, t)?);
            }
            signature_def.insert(s.name.clone(), def);
        }
        let meta = MetaGraphDef {
            meta_info_def: Some(ferroflow_proto::meta_graph_def::MetaInfoDef {
                meta_graph_version: format!("ferroflow {}", env!("CARGO_PKG_VERSION")),
                tags: self.tags.clone(),
                ..Default::default()
            }),
            graph_def: Some(graph),
            saver_def: variables.map(|(_, s)| s.def().clone()),
            collection_def: variables.map(|(_, s)| s.collections().clone()).unwrap_or_default(),
            signature_def,
            asset_file_def: vec![],
            object_graph_def: None,
        };
        let model = ferroflow_proto::SavedModel { saved_model_schema_version: 1, meta_graphs: vec![meta] };

        let base = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "saved_model".into());
        let tmp = dir.with_file_name(format!(".{base}.tmp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        let io = |e: std::io::Error, what: &Path| TrainError::file_error(what, e);
        std::fs::create_dir_all(tmp.join("variables")).map_err(|e| io(e, &tmp))?;
        let written = (|| -> Result<()> {
            if let Some((session, saver)) = variables {
                saver.save_bundle(session, &tmp.join("variables").join("variables"))?;
            }
            let pb = tmp.join("saved_model.pb");
            std::fs::write(&pb, ferroflow_proto::encode(&model)).map_err(|e| io(e, &pb))?;
            if dir.exists() {
                std::fs::remove_dir(dir).map_err(|e| io(e, dir))?;
            }
            std::fs::rename(&tmp, dir).map_err(|e| io(e, dir))
        })();
        if written.is_err() {
            let _ = std::fs::remove_dir_all(&tmp);
        }
        written
    }
}

/// Turns placeholder `name` of `graph` into a `PlaceholderWithDefault` fed by a new constant.
fn with_default(graph: &mut ferroflow_proto::GraphDef, name: &str, value: &Tensor) -> std::result::Result<(), String> {
    use ferroflow_proto::{attr_value::Value, AttrValue, NodeDef};
    let const_name = format!("{name}/default_value");
    if graph.node.iter().any(|n| n.name == const_name) {
        return Err(format!("the graph already has a node '{const_name}'"));
    }
    let node = graph
        .node
        .iter_mut()
        .find(|n| n.name == name)
        .ok_or_else(|| format!("no placeholder '{name}' to give a default value"))?;
    if node.op != "Placeholder" {
        return Err(format!("'{name}' is a {}, not a Placeholder", node.op));
    }
    node.op = "PlaceholderWithDefault".into();
    node.input = vec![const_name.clone()];
    let shape = node.attr.get("shape").cloned();
    if shape.is_none() {
        node.attr.insert(
            "shape".into(),
            AttrValue {
                value: Some(Value::Shape(Box::new(ferroflow_proto::TensorShapeProto {
                    unknown_rank: true,
                    ..Default::default()
                }))),
            },
        );
    }
    let device = node.device.clone();
    let mut attr = BTreeMap::new();
    attr.insert("dtype".to_string(), AttrValue { value: Some(Value::Type(value.dtype().to_tf())) });
    attr.insert(
        "value".to_string(),
        AttrValue { value: Some(Value::Tensor(Box::new(ferroflow_proto::convert::tensor_to_proto(value)))) },
    );
    graph.node.push(NodeDef { name: const_name, op: "Const".into(), attr, device, ..Default::default() });
    Ok(())
}

impl SavedModel {
    /// Signature `name` frozen into one `GraphDef`, as TensorFlow's
    /// `convert_variables_to_constants_v2` does: function calls inlined, each variable read
    /// replaced by a `Const` holding the variable's loaded value, everything the outputs do
    /// not need pruned. The inputs are `Placeholder`s named by their keys (`keras_tensor`) and
    /// each output an `Identity` named by its key (`output_0`), so `ferroflow run frozen.pb
    /// --feed keras_tensor:0=x.npy --fetch output_0:0` (or TensorFlow) runs it. A variable
    /// used other than by a read (a `While` loop carrying its handle) is an error naming it.
    pub fn freeze(&self, name: &str) -> Result<ferroflow_proto::GraphDef> {
        use ferroflow_proto::{attr_value::Value, AttrValue, NodeDef};
        let sig = self.signature(name)?.clone();
        let invalid = |m: String| TrainError::Invalid(format!("freezing signature '{name}': {m}"));
        let outputs: Vec<String> = sig.outputs.iter().map(|s| node_of(&s.tensor)).collect();
        let full = prune(self.session.graph().to_graph_def(), &outputs);
        let mut def = ferroflow_runtime::support::inline_calls(&full)
            .map_err(|e| TrainError::Freeze { signature: name.to_string(), source: Box::new(e) })?;
        // Variables read through ReadVariableOp (or an Identity of a TF1 variable) become
        // constants; a handle used any other way cannot be frozen.
        let index: BTreeMap<String, usize> = def.node.iter().enumerate().map(|(i, n)| (n.name.clone(), i)).collect();
        let handle_of = |input: &str, def: &ferroflow_proto::GraphDef| -> Option<String> {
            let mut n = &def.node[*index.get(&node_of(input))?];
            while n.op == "Identity" && n.input.first().is_some_and(|i| !i.starts_with('^')) {
                n = &def.node[*index.get(&node_of(&n.input[0]))?];
            }
            (n.op == "VarHandleOp").then(|| n.name.clone())
        };
        let mut values: Vec<(usize, Tensor)> = Vec::new();
        for (i, n) in def.node.iter().enumerate() {
            if n.op != "ReadVariableOp" {
                continue;
            }
            let Some(var) = n.input.first().and_then(|x| handle_of(x, &def)) else { continue };
            let v = self
                .session
                .variable(&var)
                .ok_or_else(|| invalid(format!("variable '{var}' (read by '{}') has no value", n.name)))?;
            let value = v.read().ok_or_else(|| invalid(format!("variable '{var}' is not initialized")))?;
            values.push((i, value));
        }
        for (i, value) in values {
            let n = &mut def.node[i];
            n.op = "Const".into();
            n.input.clear();
            n.attr.clear();
            n.attr.insert("dtype".into(), AttrValue { value: Some(Value::Type(value.dtype().to_tf())) });
            n.attr.insert(
                "value".into(),
                AttrValue { value: Some(Value::Tensor(Box::new(ferroflow_proto::convert::tensor_to_proto(&value)))) },
            );
        }
        // The outputs, as Identities named by their keys; the inputs renamed to their keys.
        let taken: BTreeSet<String> = def.node.iter().map(|n| n.name.clone()).collect();
        let mut renames: BTreeMap<String, String> = BTreeMap::new();
        for s in &sig.inputs {
            let old = node_of(&s.tensor);
            if old != s.key && taken.contains(&s.key) {
                return Err(invalid(format!("input key '{}' is already a node of the graph", s.key)));
            }
            renames.insert(old, s.key.clone());
        }
        for n in &mut def.node {
            if let Some(new) = renames.get(&n.name) {
                n.name = new.clone();
            }
            for x in &mut n.input {
                let (ctl, rest) = match x.strip_prefix('^') {
                    Some(r) => ("^", r),
                    None => ("", x.as_str()),
                };
                let node = node_of(rest);
                if let Some(new) = renames.get(&node) {
                    *x = format!("{ctl}{new}{}", &rest[node.len()..]);
                }
            }
        }
        for s in &sig.outputs {
            if s.tensor == format!("{}:0", s.key) {
                continue; // already named by its key (a TF1 graph's `scores:0`)
            }
            if taken.contains(&s.key) && !renames.values().any(|v| *v == s.key) {
                return Err(invalid(format!("output key '{}' is already a node of the graph", s.key)));
            }
            let mut attr = BTreeMap::new();
            attr.insert("T".to_string(), AttrValue { value: Some(Value::Type(s.dtype.to_tf())) });
            def.node.push(NodeDef {
                name: s.key.clone(),
                op: "Identity".into(),
                input: vec![s.tensor.clone()],
                attr,
                ..Default::default()
            });
        }
        // Keep what the outputs need.
        let keys: Vec<String> = sig.outputs.iter().map(|s| s.key.clone()).collect();
        let mut def = prune(def, &keys);
        let nodes = std::mem::take(&mut def.node);
        if let Some(n) = nodes.iter().find(|n| n.op == "VarHandleOp") {
            let user =
                nodes.iter().find(|m| m.input.iter().any(|x| node_of(x) == n.name)).map_or("?", |m| m.name.as_str());
            return Err(invalid(format!(
                "variable '{}' is used by '{user}' other than through a read (a loop or branch carrying its handle); it cannot be frozen",
                n.name
            )));
        }
        // Keep the library functions the kept nodes still name (loop and branch bodies).
        let mut used: BTreeSet<String> = BTreeSet::new();
        let library = def.library.take().unwrap_or_default();
        let mut queue: Vec<String> = Vec::new();
        let names = |n: &NodeDef, q: &mut Vec<String>| {
            q.extend(ferroflow_runtime::support::function_attrs(n).map(str::to_string));
        };
        for n in &nodes {
            names(n, &mut queue);
        }
        while let Some(f) = queue.pop() {
            if used.insert(f.clone()) {
                if let Some(fd) = library.function.iter().find(|x| x.signature.as_ref().is_some_and(|s| s.name == f)) {
                    for n in &fd.node_def {
                        names(n, &mut queue);
                    }
                }
            }
        }
        let functions = library
            .function
            .into_iter()
            .filter(|f| f.signature.as_ref().is_some_and(|s| used.contains(&s.name)))
            .collect();
        Ok(ferroflow_proto::GraphDef {
            node: nodes,
            library: Some(ferroflow_proto::FunctionDefLibrary { function: functions, ..Default::default() }),
            versions: def.versions,
            ..Default::default()
        })
    }
}

/// The node name of a tensor or control input (`x:1`, `^x` → `x`).
fn node_of(t: &str) -> String {
    let t = t.trim_start_matches('^');
    t.rsplit_once(':').filter(|(_, i)| i.parse::<usize>().is_ok()).map_or(t, |(n, _)| n).to_string()
}

/// `def` with only the nodes `roots` need (data and control inputs, transitively).
fn prune(mut def: ferroflow_proto::GraphDef, roots: &[String]) -> ferroflow_proto::GraphDef {
    let index: BTreeMap<String, usize> = def.node.iter().enumerate().map(|(i, n)| (n.name.clone(), i)).collect();
    let mut keep = vec![false; def.node.len()];
    let mut stack: Vec<usize> = roots.iter().filter_map(|r| index.get(r).copied()).collect();
    while let Some(i) = stack.pop() {
        if std::mem::replace(&mut keep[i], true) {
            continue;
        }
        for x in &def.node[i].input {
            if let Some(&j) = index.get(&node_of(x)) {
                stack.push(j);
            }
        }
    }
    def.node = std::mem::take(&mut def.node).into_iter().zip(keep).filter_map(|(n, k)| k.then_some(n)).collect();
    def
}
