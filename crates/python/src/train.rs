//! What `ferroflow.compat.v1` needs natively: symbolic gradients, savers over a graph's
//! `save/` ops (checkpoints, `.meta` files and the `checkpoint` state file in TensorFlow's
//! formats), and meta graph import. The graph-building parts of `compat.v1` are Python over
//! `raw_ops`.
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use ferroflow::proto::SaverDef;
use ferroflow::train::saver::Saver as RustSaver;
use pyo3::prelude::*;

use crate::errors::{invalid, to_py, NotFoundError};
use crate::graph::Graph;
use crate::session::Session;

/// The gradients of the sum of `ys` with respect to each of `xs` (tensor names; a variable's
/// handle for a resource variable), added to `graph` under `gradients/`: a tensor name per
/// `x`, or `None` where `x` does not reach the `ys`.
#[pyfunction]
#[pyo3(signature = (graph, ys, xs, grad_ys=None))]
pub fn gradients(
    graph: &Graph,
    ys: Vec<String>,
    xs: Vec<String>,
    grad_ys: Option<Vec<String>>,
) -> PyResult<Vec<Option<String>>> {
    graph.with(|scope, _| {
        let find = |names: &[String]| -> PyResult<Vec<ferroflow::graph::Output>> {
            names
                .iter()
                .map(|n| scope.with_graph(|g| g.output_by_name(n)).map_err(|e| NotFoundError::new_err(e.to_string())))
                .collect()
        };
        let (ys, xs) = (find(&ys)?, find(&xs)?);
        let grad_ys = grad_ys.as_deref().map(find).transpose()?;
        let grads = ferroflow::autodiff::gradients(scope, &ys, &xs, grad_ys.as_deref()).map_err(to_py)?;
        Ok(scope.with_graph(|g| grads.iter().map(|o| o.map(|o| g.output_name(o))).collect()))
    })
}

/// A saver over the `save/` ops a graph has (`tf.compat.v1.train.Saver`'s run-time half):
/// `save` runs `SaveV2`, writes `PREFIX.meta` and the directory's `checkpoint` file and keeps
/// `max_to_keep` checkpoints; `restore` runs the restore op, naming what is missing or
/// mismatched.
#[pyclass(frozen, module = "ferroflow._native")]
pub struct Saver {
    inner: Mutex<RustSaver>,
}

#[pymethods]
impl Saver {
    /// A saver for the ops named by TensorFlow's `SaverDef` fields.
    #[new]
    #[pyo3(signature = (filename_tensor_name, save_tensor_name, restore_op_name, max_to_keep=5, keep_checkpoint_every_n_hours=10000.0))]
    fn new(
        filename_tensor_name: String,
        save_tensor_name: String,
        restore_op_name: String,
        max_to_keep: i32,
        keep_checkpoint_every_n_hours: f32,
    ) -> Saver {
        let def = SaverDef {
            filename_tensor_name,
            save_tensor_name,
            restore_op_name,
            max_to_keep,
            sharded: false,
            keep_checkpoint_every_n_hours,
            version: 2,
        };
        Saver { inner: Mutex::new(RustSaver::from_def(def, BTreeMap::new())) }
    }

    /// Saves the session's variables to `PREFIX[-STEP]`; returns that prefix.
    #[pyo3(signature = (session, prefix, global_step=None))]
    fn save(&self, py: Python<'_>, session: &Session, prefix: PathBuf, global_step: Option<i64>) -> PyResult<String> {
        let sess = session.current()?;
        let path = py
            .detach(|| self.inner.lock().unwrap_or_else(|p| p.into_inner()).save(&sess, &prefix, global_step))
            .map_err(to_py)?;
        Ok(path.display().to_string())
    }

    /// Restores the session's variables from checkpoint `prefix`.
    fn restore(&self, py: Python<'_>, session: &Session, prefix: PathBuf) -> PyResult<()> {
        let sess = session.current()?;
        py.detach(|| self.inner.lock().unwrap_or_else(|p| p.into_inner()).restore(&sess, &prefix)).map_err(to_py)?;
        Ok(())
    }
}

/// The newest checkpoint's prefix recorded in `directory`'s `checkpoint` file, or `None`.
#[pyfunction]
pub fn latest_checkpoint(directory: PathBuf) -> PyResult<Option<String>> {
    Ok(ferroflow::train::saver::latest_checkpoint(&directory).map_err(to_py)?.map(|p| p.display().to_string()))
}

/// Imports the meta graph at `path` into `graph` (its nodes under `import_scope` when not
/// empty) and returns the saver its `SaverDef` describes, if it has one.
#[pyfunction]
#[pyo3(signature = (graph, path, import_scope=""))]
pub fn import_meta_graph(graph: &Graph, path: PathBuf, import_scope: &str) -> PyResult<Option<Saver>> {
    if import_scope.contains(':') {
        return Err(invalid("import_scope must be a name scope"));
    }
    let current = graph.snapshot();
    let into = (!current.nodes().is_empty()).then_some(&current);
    let imported = ferroflow::train::meta_graph::import_meta_graph_file(&path, into, import_scope).map_err(to_py)?;
    graph.replace(imported.graph);
    Ok(imported.saver.map(|s| Saver { inner: Mutex::new(s) }))
}
