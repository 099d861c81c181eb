//! TensorFlow 1's `Saver`: graph ops that save and restore variables as a V2 tensor bundle
//! (`SaveV2`/`RestoreV2` under `save/`, described by a `SaverDef`), the `PREFIX-STEP.meta`
//! meta graph, the text `checkpoint` state file, `max_to_keep` and
//! `keep_checkpoint_every_n_hours`.
//!
//! Crash safety: every file is written under a temporary name, synced and renamed; the
//! bundle's data file before its index, then the `.meta`, then the `checkpoint` state file,
//! and only then are checkpoints beyond `max_to_keep` deleted (after they left the state
//! file). A process killed at any moment leaves the state file naming complete checkpoints.
use ferroflow_proto::attr::AttrMap;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use ferroflow_checkpoint::{data_path, entry_signature, index_path, BundleReader};
use ferroflow_graph::{Attrs, Graph, NodeId, Output};
use ferroflow_proto::{
    attr, attr_value::Value, saver_def::CheckpointFormatVersion, CheckpointState, CollectionDef, SaverDef,
};
use ferroflow_runtime::Session;
use ferroflow_tensor::{DType, Shape, Tensor};

use crate::meta_graph::{export_meta_graph, write_meta_graph};
use crate::{Builder, Result, TrainError, Variable};
use ferroflow_ops::{OpTarget, RawOps};

/// How a [`Saver`] keeps checkpoints.
///
/// `#[non_exhaustive]`: other crates build a `SaverOptions` from `SaverOptions::default()` and its
/// `with_*` setters, so fields can be added without breaking them.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct SaverOptions {
    /// How many recent checkpoints to keep (0 keeps all); older ones are deleted after a
    /// newer one is complete.
    pub max_to_keep: usize,
    /// Also keep one checkpoint per this many hours of training, however many are newer.
    pub keep_checkpoint_every_n_hours: f32,
}

impl SaverOptions {
    /// Sets [`SaverOptions::max_to_keep`].
    pub fn with_max_to_keep(mut self, max_to_keep: usize) -> Self {
        self.max_to_keep = max_to_keep;
        self
    }

    /// Sets [`SaverOptions::keep_checkpoint_every_n_hours`].
    pub fn with_keep_checkpoint_every_n_hours(mut self, keep_checkpoint_every_n_hours: f32) -> Self {
        self.keep_checkpoint_every_n_hours = keep_checkpoint_every_n_hours;
        self
    }
}

impl Default for SaverOptions {
    /// TensorFlow's defaults: 5 checkpoints, one kept per 10,000 hours.
    fn default() -> Self {
        SaverOptions { max_to_keep: 5, keep_checkpoint_every_n_hours: 10000.0 }
    }
}

/// How [`Saver::restore_with`] treats a checkpoint that does not match the graph.
///
/// `#[non_exhaustive]`: other crates build a `RestoreOptions` from `RestoreOptions::default()` and its
/// `with_*` setters, so fields can be added without breaking them.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct RestoreOptions {
    /// Restore the variables the checkpoint has and leave the others as they are (instead
    /// of failing when any is missing).
    pub allow_partial: bool,
}

impl RestoreOptions {
    /// Sets [`RestoreOptions::allow_partial`].
    pub fn with_allow_partial(mut self, allow_partial: bool) -> Self {
        self.allow_partial = allow_partial;
        self
    }
}

/// What a restore did: keys are checkpoint tensor names (variable names).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RestoreReport {
    /// Variables given the checkpoint's values.
    pub restored: Vec<String>,
    /// Variables the saver restores that the checkpoint lacks (left unchanged).
    pub missing: Vec<String>,
    /// Checkpoint tensors no variable of the saver takes.
    pub unexpected: Vec<String>,
}

/// One variable as the saver's restore subgraph sees it.
struct RestoreEntry {
    key: String,
    dtype: DType,
    shape: Option<Vec<i64>>,
    /// The tensor the restored value flows through (`save/Identity_N:0`), fed for partial
    /// restores.
    value: String,
    /// The node that assigns it (`save/AssignVariableOp_N`).
    assign: String,
}

/// Saves and restores a graph's variables (TensorFlow's `tf.compat.v1.train.Saver`).
pub struct Saver {
    def: SaverDef,
    collections: BTreeMap<String, CollectionDef>,
    last: Vec<(PathBuf, f64)>,
    state_dir: Option<PathBuf>,
    next_keep_time: f64,
    write_meta_graph: bool,
}

fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

fn strings(dims: &[usize], v: &[String]) -> Result<Tensor> {
    Ok(Tensor::from_strings(dims, v.iter().map(|s| s.as_bytes().to_vec()).collect())?)
}

impl Saver {
    /// Adds the save and restore ops for `var_list` (all of `b`'s variables when `None`) to
    /// `b`'s graph under `save/` (`save_1/`, ... if taken), with TensorFlow's node names:
    /// `save/Const` (the filename, fed at run time), `save/SaveV2`,
    /// `save/control_dependency`, `save/RestoreV2`, `save/AssignVariableOp_N`,
    /// `save/restore_all`. Checkpoint keys are variable names, saved in sorted order. The
    /// meta graphs it writes carry `b`'s collections as they are now.
    pub fn new(b: &Builder, var_list: Option<&[Variable]>, options: SaverOptions) -> Result<Saver> {
        let mut vars: Vec<Variable> = var_list.map(<[Variable]>::to_vec).unwrap_or_else(|| b.variables());
        if vars.is_empty() {
            return Err(TrainError::Invalid("no variables to save".into()));
        }
        vars.sort_by(|a, b| a.name.cmp(&b.name));
        if let Some(w) = vars.windows(2).find(|w| w[0].name == w[1].name) {
            return Err(TrainError::Invalid(format!("variable '{}' is listed twice", w[0].name)));
        }
        let root = b.scope().name_scope("save");
        let prefix = root.prefix().trim_end_matches('/').to_string();
        let string_attrs = || {
            let mut a = Attrs::new();
            a.insert("dtype".into(), attr::dtype(DType::String));
            a
        };
        let input = root
            .reenter(&format!("{prefix}/filename"))
            .with_name("input")
            .constant(&strings(&[], &["model".into()])?)?;
        let mut a = string_attrs();
        a.insert("shape".into(), attr::shape(&Shape::scalar()));
        let filename =
            root.with_name("filename").add_op("PlaceholderWithDefault", "filename", &[input], &[], a.clone())?;
        let filename = Output { node: filename, index: 0 };
        let file = Output {
            node: root.with_name("Const").add_op("PlaceholderWithDefault", "Const", &[filename], &[], a)?,
            index: 0,
        };
        let keys: Vec<String> = vars.iter().map(|v| v.name.clone()).collect();
        let blanks = vec![String::new(); keys.len()];
        let dtypes = || attr::dtypes(&vars.iter().map(|v| v.dtype).collect::<Vec<_>>());
        let save_scope = root.reenter(&format!("{prefix}/SaveV2"));
        let names = save_scope.with_name("tensor_names").constant(&strings(&[keys.len()], &keys)?)?;
        let slices = save_scope.with_name("shape_and_slices").constant(&strings(&[keys.len()], &blanks)?)?;
        let mut inputs = vec![file, names, slices];
        inputs.extend(vars.iter().map(|v| v.value));
        let mut a = Attrs::new();
        a.insert("dtypes".into(), dtypes());
        let save = root.with_name("SaveV2").add_op("SaveV2", "SaveV2", &inputs, &[], a)?;
        let mut a = Attrs::new();
        a.insert("T".into(), attr::dtype(DType::String));
        a.insert("_class".into(), attr::strings(&[format!("loc:@{prefix}/Const")]));
        let save_tensor = root.with_name("control_dependency").add_op("Identity", "Identity", &[file], &[save], a)?;
        let restore_scope = root.reenter(&format!("{prefix}/RestoreV2"));
        let names = restore_scope.with_name("tensor_names").constant(&strings(&[keys.len()], &keys)?)?;
        let slices = restore_scope.with_name("shape_and_slices").constant(&strings(&[keys.len()], &blanks)?)?;
        let mut a = Attrs::new();
        a.insert("dtypes".into(), dtypes());
        let restore = root.with_name("RestoreV2").add_op("RestoreV2", "RestoreV2", &[file, names, slices], &[], a)?;
        let mut assigns: Vec<NodeId> = Vec::new();
        for (i, v) in vars.iter().enumerate() {
            let value = root.with_name("Identity").identity(Output { node: restore, index: i })?;
            let mut a = Attrs::new();
            a.insert("dtype".into(), attr::dtype(v.dtype));
            a.insert("validate_shape".into(), attr::boolean(false));
            assigns.push(root.with_name("AssignVariableOp").add_op(
                "AssignVariableOp",
                "AssignVariableOp",
                &[v.handle, value],
                &[],
                a,
            )?);
        }
        let restore_all = root.with_name("restore_all").group(&assigns)?;
        let (filename_tensor_name, save_tensor_name, restore_op_name) = b.scope().with_graph(|g| {
            (g.output_name(file), format!("{}:0", g.node(save_tensor).name), g.node(restore_all).name.clone())
        });
        let def = SaverDef {
            filename_tensor_name,
            save_tensor_name,
            restore_op_name,
            max_to_keep: options.max_to_keep.min(i32::MAX as usize) as i32,
            sharded: false,
            keep_checkpoint_every_n_hours: options.keep_checkpoint_every_n_hours,
            version: CheckpointFormatVersion::V2 as i32,
        };
        Ok(Saver::from_def(def, crate::meta_graph::collections(b)))
    }

    /// A saver for a graph that already has its save/restore ops (e.g. one imported from a
    /// meta graph), described by `def`; `collections` go into the meta graphs it writes.
    pub fn from_def(def: SaverDef, collections: BTreeMap<String, CollectionDef>) -> Saver {
        let hours = def.keep_checkpoint_every_n_hours as f64;
        Saver {
            def,
            collections,
            last: Vec::new(),
            state_dir: None,
            next_keep_time: now() + hours * 3600.0,
            write_meta_graph: true,
        }
    }

    /// The `SaverDef` (names of the filename tensor, save tensor and restore op).
    pub fn def(&self) -> &SaverDef {
        &self.def
    }

    /// The collections its meta graphs carry (`variables`, `trainable_variables`, ...).
    pub fn collections(&self) -> &BTreeMap<String, CollectionDef> {
        &self.collections
    }

    /// Runs the save op alone: the variables' tensor bundle at `prefix` (`prefix.index`,
    /// `prefix.data-00000-of-00001`), without a `.meta`, a `checkpoint` state file or
    /// `max_to_keep` bookkeeping (a SavedModel's `variables/variables`).
    pub fn save_bundle(&self, sess: &Session, prefix: &Path) -> Result<()> {
        let name = prefix.to_str().ok_or_else(|| TrainError::Invalid(format!("{}: not UTF-8", prefix.display())))?;
        sess.run(
            &[(&self.def.filename_tensor_name, strings(&[], &[name.to_string()])?)],
            &[&self.def.save_tensor_name],
            &[],
        )?;
        Ok(())
    }

    /// Whether [`Saver::save`] writes `PREFIX.meta` next to each checkpoint (default true).
    pub fn set_write_meta_graph(&mut self, on: bool) {
        self.write_meta_graph = on;
    }

    /// The checkpoints this saver keeps, oldest first.
    pub fn last_checkpoints(&self) -> Vec<PathBuf> {
        self.last.iter().map(|(p, _)| p.clone()).collect()
    }

    /// Saves the variables of `sess` to `prefix` (`prefix-STEP` with a global step): runs the
    /// graph's `SaveV2`, writes `PREFIX.meta`, records the checkpoint in the directory's
    /// `checkpoint` file and deletes checkpoints beyond `max_to_keep`. Returns the
    /// checkpoint's prefix. A saver that has not saved into this directory yet takes over the
    /// list in an existing `checkpoint` file, so `max_to_keep` holds across restarts.
    pub fn save(&mut self, sess: &Session, prefix: impl AsRef<Path>, global_step: Option<i64>) -> Result<PathBuf> {
        let _traced = ferroflow_profiler::span("Saver::save");
        let prefix = prefix.as_ref();
        let path = match global_step {
            Some(s) => PathBuf::from(format!("{}-{s}", prefix.display())),
            None => prefix.to_path_buf(),
        };
        let name = path.to_str().ok_or_else(|| TrainError::Invalid(format!("{}: not UTF-8", path.display())))?;
        sess.run(
            &[(&self.def.filename_tensor_name, strings(&[], &[name.to_string()])?)],
            &[&self.def.save_tensor_name],
            &[],
        )?;
        if self.write_meta_graph {
            let meta = export_meta_graph(sess.graph(), Some(&self.def), &self.collections);
            write_meta_graph(&meta_path(&path), &meta)?;
        }
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf();
        if self.state_dir.as_deref() != Some(dir.as_path()) {
            let base = prefix.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            remove_stale_temp_files(&dir, &base);
            self.last = match read_checkpoint_state(&dir) {
                Ok(Some(st)) => {
                    let times = &st.all_model_checkpoint_timestamps;
                    let t0 = now();
                    st.all_model_checkpoint_paths
                        .iter()
                        .enumerate()
                        .map(|(i, p)| (resolve(&dir, p), times.get(i).copied().unwrap_or(t0)))
                        .filter(|(p, _)| index_path(p).exists())
                        .collect()
                }
                _ => Vec::new(),
            };
            self.state_dir = Some(dir.clone());
        }
        self.last.retain(|(p, _)| *p != path);
        self.last.push((path.clone(), now()));
        let mut doomed = Vec::new();
        let keep = self.def.max_to_keep;
        while keep > 0 && self.last.len() > keep as usize {
            let (p, t) = self.last.remove(0);
            if t > self.next_keep_time {
                self.next_keep_time += self.def.keep_checkpoint_every_n_hours as f64 * 3600.0;
            } else {
                doomed.push(p);
            }
        }
        write_checkpoint_state(&dir, &path, &self.last)?;
        for p in doomed {
            for f in [index_path(&p), data_path(&p, 0, 1), meta_path(&p)] {
                let _ = std::fs::remove_file(f);
            }
        }
        Ok(path)
    }

    /// Restores every variable of the saver from checkpoint `prefix`; fails, naming them,
    /// if the checkpoint lacks any, or has one with another dtype or shape. The report also
    /// lists the checkpoint's tensors no variable takes.
    pub fn restore(&self, sess: &Session, prefix: impl AsRef<Path>) -> Result<RestoreReport> {
        let _traced = ferroflow_profiler::span("Saver::restore");
        self.restore_with(sess, prefix, &RestoreOptions::default())
    }

    /// [`Saver::restore`] with options (partial restore).
    pub fn restore_with(
        &self,
        sess: &Session,
        prefix: impl AsRef<Path>,
        opts: &RestoreOptions,
    ) -> Result<RestoreReport> {
        let prefix = prefix.as_ref();
        let reader = BundleReader::open(prefix)?;
        let entries = restore_entries(sess.graph(), &self.def)?;
        let mut report = RestoreReport::default();
        let mut mismatched = Vec::new();
        for e in &entries {
            let Some(have) = reader.entries().get(&e.key) else {
                report.missing.push(e.key.clone());
                continue;
            };
            let (dtype, dims) = entry_signature(have);
            if DType::from_tf(have.dtype).ok() != Some(e.dtype) || e.shape.as_ref().is_some_and(|s| *s != dims) {
                mismatched.push(format!(
                    "'{}': checkpoint has {dtype}{dims:?}, the graph wants {}{}",
                    e.key,
                    e.dtype,
                    e.shape.as_ref().map(|s| format!("{s:?}")).unwrap_or_else(|| "[?]".into())
                ));
            } else {
                report.restored.push(e.key.clone());
            }
        }
        let wanted: BTreeSet<&str> = entries.iter().map(|e| e.key.as_str()).collect();
        report.unexpected = reader.entries().keys().filter(|k| !wanted.contains(k.as_str())).cloned().collect();
        let at = index_path(prefix).display().to_string();
        if !mismatched.is_empty() {
            return Err(TrainError::file(&at, format!("tensors do not match the graph: {}", mismatched.join("; "))));
        }
        if !report.missing.is_empty() && !opts.allow_partial {
            let mut reason = format!("the checkpoint lacks variables {:?}", report.missing);
            if !report.unexpected.is_empty() {
                reason += &format!(" and has tensors no variable takes {:?} (renamed variables?)", report.unexpected);
            }
            reason += "; restore with allow_partial to restore the rest";
            return Err(TrainError::file(&at, reason));
        }
        let name = prefix.to_str().ok_or_else(|| TrainError::Invalid(format!("{}: not UTF-8", prefix.display())))?;
        if report.missing.is_empty() {
            sess.run(
                &[(&self.def.filename_tensor_name, strings(&[], &[name.to_string()])?)],
                &[],
                &[&self.def.restore_op_name],
            )?;
        } else {
            // Feed the values read here past RestoreV2 and run only their assignments.
            let mut feeds = Vec::new();
            let mut targets = Vec::new();
            for e in entries.iter().filter(|e| report.restored.contains(&e.key)) {
                feeds.push((e.value.as_str(), reader.read(&e.key)?));
                targets.push(e.assign.as_str());
            }
            sess.run(&feeds, &[], &targets)?;
        }
        Ok(report)
    }
}

/// Deletes temporary files that processes killed while saving left in `dir`
/// (`.BASE….tmpPID-N` and `.checkpoint.tmpPID-N`, whose process is gone). Linux only (it
/// asks `/proc` whether the process lives); elsewhere nothing is deleted.
fn remove_stale_temp_files(dir: &Path, base: &str) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let ours = (!base.is_empty() && name.starts_with(&format!(".{base}"))) || name.starts_with(".checkpoint.tmp");
        let Some((_, tail)) = name.rsplit_once(".tmp") else { continue };
        let Some(pid) = tail.split('-').next().and_then(|p| p.parse::<u32>().ok()) else { continue };
        if ours && pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// `PREFIX.meta`.
pub fn meta_path(prefix: &Path) -> PathBuf {
    PathBuf::from(format!("{}.meta", prefix.display()))
}

/// Finds the variables a saver's restore op assigns: `restore_all`'s control inputs are the
/// assignments; each takes `Identity(RestoreV2:i)` (or `RestoreV2:i`) and a variable handle.
fn restore_entries(graph: &Graph, def: &SaverDef) -> Result<Vec<RestoreEntry>> {
    let bad = |why: String| TrainError::Invalid(format!("saver '{}': {why}", def.restore_op_name));
    let restore_all =
        graph.find(&def.restore_op_name).ok_or_else(|| bad("no such node in the session's graph".into()))?;
    let mut out = Vec::new();
    let mut names_cache: BTreeMap<NodeId, Vec<String>> = BTreeMap::new();
    for &a in &graph.node(restore_all).control_inputs {
        let assign = graph.node(a);
        let (Some(&handle), Some(&value)) = (assign.inputs.first(), assign.inputs.get(1)) else {
            return Err(bad(format!("'{}' is not a variable assignment", assign.name)));
        };
        let mut src = value;
        if graph.node(src.node).op == "Identity" {
            src = graph.node(src.node).inputs[0];
        }
        let restore = graph.node(src.node);
        if restore.op != "RestoreV2" {
            return Err(bad(format!("'{}' does not take a RestoreV2 output", assign.name)));
        }
        let names = match names_cache.get(&src.node) {
            Some(n) => n.clone(),
            None => {
                let n = const_strings(graph, restore.inputs[1])
                    .ok_or_else(|| bad(format!("the tensor names of '{}' are not a constant", restore.name)))?;
                names_cache.insert(src.node, n.clone());
                n
            }
        };
        let key = names.get(src.index).cloned().ok_or_else(|| bad(format!("'{}' has too few names", restore.name)))?;
        let h = graph.node(handle.node);
        let shape = match h.attrs.attr_value("shape") {
            Some(Value::Shape(s)) if !s.unknown_rank && s.dim.iter().all(|d| d.size >= 0) => {
                Some(s.dim.iter().map(|d| d.size).collect())
            }
            _ => None,
        };
        out.push(RestoreEntry {
            key,
            dtype: graph.output_type(src),
            shape,
            value: if value == src { graph.output_name(src) } else { graph.output_name(value) },
            assign: assign.name.clone(),
        });
    }
    Ok(out)
}

fn const_strings(graph: &Graph, o: Output) -> Option<Vec<String>> {
    let n = graph.node(o.node);
    if n.op != "Const" {
        return None;
    }
    let Some(Value::Tensor(t)) = n.attrs.attr_value("value") else { return None };
    let t = ferroflow_proto::convert::tensor_from_proto(t).ok()?;
    t.as_strings().ok().map(|v| v.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect())
}

fn resolve(dir: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        dir.join(p)
    }
}

/// Reads `DIR/checkpoint` (text `CheckpointState`); `Ok(None)` when there is none.
pub fn read_checkpoint_state(dir: &Path) -> Result<Option<CheckpointState>> {
    let path = dir.join("checkpoint");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(TrainError::file_error(&path, e)),
    };
    let what = path.display().to_string();
    let st: CheckpointState =
        ferroflow_proto::parse_text(&text, &what).map_err(|e| TrainError::file_error(&path, e))?;
    if st.model_checkpoint_path.is_empty() {
        return Err(TrainError::file(&path, "model_checkpoint_path is empty"));
    }
    Ok(Some(st))
}

/// Writes `DIR/checkpoint` atomically: the newest checkpoint and the kept ones (oldest
/// first) with their timestamps. Paths under `dir` are written relative to it (TensorFlow
/// reads relative paths against the file's directory), others as they are.
fn write_checkpoint_state(dir: &Path, latest: &Path, kept: &[(PathBuf, f64)]) -> Result<()> {
    let rel = |p: &Path| -> String {
        if p.is_relative() {
            if let Ok(r) = p.strip_prefix(dir) {
                return r.display().to_string();
            }
        }
        p.display().to_string()
    };
    let st = CheckpointState {
        model_checkpoint_path: rel(latest),
        all_model_checkpoint_paths: kept.iter().map(|(p, _)| rel(p)).collect(),
        all_model_checkpoint_timestamps: kept.iter().map(|(_, t)| *t).collect(),
        last_preserved_timestamp: 0.0,
    };
    ferroflow_tensor::fs::write_atomic(&dir.join("checkpoint"), ferroflow_proto::print_text(&st).as_bytes())?;
    Ok(())
}

/// TensorFlow's `latest_checkpoint(dir)`: the newest checkpoint prefix named by
/// `DIR/checkpoint`, if its `.index` exists.
pub fn latest_checkpoint(dir: impl AsRef<Path>) -> Result<Option<PathBuf>> {
    let dir = dir.as_ref();
    Ok(read_checkpoint_state(dir)?.map(|st| resolve(dir, &st.model_checkpoint_path)).filter(|p| index_path(p).exists()))
}
