//! SavedModels from Python (`ferroflow.saved_model.load`): signatures called with NumPy
//! arrays by key, answering a dict of arrays, as TensorFlow's loaded signatures do.
use std::path::PathBuf;

use ferroflow::runtime::SessionOptions;
use ferroflow::train::saved_model::SavedModel as RustSavedModel;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::convert::{dtype_name, tensor_in_place, tensor_to_numpy};
use crate::errors::{invalid, to_py};

/// A loaded SavedModel: its variables restored, its init op run.
#[pyclass(frozen, module = "ferroflow._native")]
pub struct SavedModel {
    inner: RustSavedModel,
}

#[pymethods]
impl SavedModel {
    /// Loads the meta graph of `tags` (`["serve"]` when empty) from the SavedModel `dir`.
    #[new]
    #[pyo3(signature = (dir, tags=Vec::new()))]
    fn new(py: Python<'_>, dir: PathBuf, tags: Vec<String>) -> PyResult<SavedModel> {
        let tags: Vec<&str> = if tags.is_empty() { vec!["serve"] } else { tags.iter().map(String::as_str).collect() };
        let inner = py.detach(|| RustSavedModel::load(&dir, &tags, SessionOptions::default())).map_err(to_py)?;
        Ok(SavedModel { inner })
    }

    /// Each signature's inputs and outputs: `{name: {"inputs": {key: (dtype, shape)},
    /// "outputs": {...}, "method_name": str}}`.
    fn signature_defs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        for (name, sig) in self.inner.signatures() {
            let specs = |v: &[ferroflow::train::saved_model::TensorSpec]| -> PyResult<Bound<'py, PyDict>> {
                let d = PyDict::new(py);
                for s in v {
                    let shape: Option<Vec<Option<usize>>> = s.shape.dims().map(<[_]>::to_vec);
                    d.set_item(&s.key, (dtype_name(s.dtype), shape))?;
                }
                Ok(d)
            };
            let d = PyDict::new(py);
            d.set_item("inputs", specs(&sig.inputs)?)?;
            d.set_item("outputs", specs(&sig.outputs)?)?;
            d.set_item("method_name", &sig.method_name)?;
            out.set_item(name, d)?;
        }
        Ok(out)
    }

    /// Calls signature `name` with arrays by input key; returns every output by key.
    fn call<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        inputs: Vec<(String, Bound<'py, PyAny>)>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let mut feeds = Vec::with_capacity(inputs.len());
        for (k, v) in &inputs {
            feeds.push((k.as_str(), tensor_in_place(v).map_err(|e| invalid(format!("input '{k}': {e}")))?));
        }
        let outs = py.detach(|| self.inner.call(name, &feeds, &[])).map_err(to_py)?;
        let d = PyDict::new(py);
        for (k, t) in outs {
            d.set_item(k, tensor_to_numpy(py, t)?)?;
        }
        Ok(d)
    }
}
