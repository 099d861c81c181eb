//! `ferroflow.data.Dataset` over the Rust input pipeline: elements are lists of tensors,
//! handed to Python as NumPy arrays. The pipeline's workers never hold the GIL except inside
//! a Python `map` function; iteration releases it while waiting for an element.
use std::path::PathBuf;
use std::sync::Mutex;

use ferroflow::data::{self as fdata, DataError, Dataset as RustDataset, DatasetIter, MapOptions};
use ferroflow::tensor::{DType, Tensor};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use crate::convert::{tensor_from_numpy, tensor_to_numpy};
use crate::errors::{invalid, to_py};

type Elem = Vec<Tensor>;

/// A dataset whose elements are lists of tensors (the Python side keeps their structure).
#[pyclass(frozen, module = "ferroflow._native")]
pub struct Dataset {
    inner: RustDataset<Elem>,
}

fn wrap(d: RustDataset<Elem>) -> Dataset {
    Dataset { inner: d }
}

fn num_parallel(n: Option<i64>) -> MapOptions {
    MapOptions::default().with_num_parallel_calls(n)
}

#[pymethods]
impl Dataset {
    /// Slices of the arrays along their first axis (all of one length).
    #[staticmethod]
    fn from_tensor_slices(arrays: Vec<Bound<'_, PyAny>>) -> PyResult<Dataset> {
        let tensors = arrays.iter().map(tensor_from_numpy).collect::<PyResult<Vec<_>>>()?;
        Ok(wrap(RustDataset::from_tensor_slices(tensors).map_err(to_py)?))
    }

    /// The files matching a glob `pattern` (sorted, or shuffled with `seed`).
    #[staticmethod]
    #[pyo3(signature = (pattern, shuffle=true, seed=None))]
    fn list_files(pattern: &str, shuffle: bool, seed: Option<u64>) -> PyResult<Dataset> {
        let d = RustDataset::<Tensor>::list_files(pattern, shuffle, seed).map_err(to_py)?;
        Ok(wrap(d.map(|t| Ok(vec![t]))))
    }

    /// Component `index` (a file path) read, decoded (JPEG, PNG, BMP, GIF) to `channels`
    /// and, when `size` is given, resized bilinearly to float32 `[h, w, c]` — in Rust on
    /// `num_parallel_calls` workers (`-1`: AUTOTUNE), no GIL.
    #[pyo3(signature = (index, channels=3, size=None, num_parallel_calls=None))]
    fn map_load_image(
        &self,
        index: usize,
        channels: u8,
        size: Option<(usize, usize)>,
        num_parallel_calls: Option<i64>,
    ) -> Dataset {
        let f = move |mut e: Elem| -> fdata::Result<Elem> {
            let slot =
                e.get_mut(index).ok_or_else(|| DataError::msg(format!("the element has no component {index}")))?;
            let bytes = fdata::image::read_file(slot)?;
            let mut img = fdata::image::decode_image(&bytes, channels, DType::UInt8)?;
            if let Some((h, w)) = size {
                img = fdata::image::resize(&img, [h, w])?;
            }
            *slot = img;
            Ok(e)
        };
        wrap(self.inner.map_with(&num_parallel(num_parallel_calls), f))
    }

    /// Each element through the Python callable `f` (called with the components as NumPy
    /// arrays, returning an array or a tuple of them), holding the GIL only while it runs.
    #[pyo3(signature = (f, num_parallel_calls=None))]
    fn map_py(&self, f: Py<PyAny>, num_parallel_calls: Option<i64>) -> Dataset {
        let call = move |e: Elem| -> fdata::Result<Elem> {
            Python::attach(|py| -> PyResult<Elem> {
                let args = e.into_iter().map(|t| tensor_to_numpy(py, t)).collect::<PyResult<Vec<_>>>()?;
                let out = f.bind(py).call1(PyTuple::new(py, args)?)?;
                let np = py.import("numpy")?;
                let items: Vec<Bound<'_, PyAny>> = if out.is_instance_of::<PyTuple>() || out.is_instance_of::<PyList>()
                {
                    out.try_iter()?.collect::<PyResult<_>>()?
                } else {
                    vec![out]
                };
                items.iter().map(|v| tensor_from_numpy(&np.call_method1("asarray", (v,))?)).collect()
            })
            .map_err(|e| DataError::msg(format!("the map function raised {e}")))
        };
        wrap(self.inner.map_with(&num_parallel(num_parallel_calls), call))
    }

    #[pyo3(signature = (buffer_size, seed=None, reshuffle_each_iteration=true))]
    fn shuffle(&self, buffer_size: usize, seed: Option<u64>, reshuffle_each_iteration: bool) -> PyResult<Dataset> {
        Ok(wrap(self.inner.shuffle(buffer_size, seed, reshuffle_each_iteration).map_err(to_py)?))
    }

    #[pyo3(signature = (batch_size, drop_remainder=false))]
    fn batch(&self, batch_size: usize, drop_remainder: bool) -> PyResult<Dataset> {
        Ok(wrap(self.inner.batch(batch_size, drop_remainder).map_err(to_py)?))
    }

    fn prefetch(&self, buffer_size: i64) -> Dataset {
        wrap(self.inner.prefetch(buffer_size))
    }

    #[pyo3(signature = (filename=None))]
    fn cache(&self, filename: Option<PathBuf>) -> Dataset {
        wrap(self.inner.cache(filename.as_deref()))
    }

    #[pyo3(signature = (count=None))]
    fn repeat(&self, count: Option<u64>) -> Dataset {
        wrap(self.inner.repeat(count))
    }

    fn take(&self, count: u64) -> Dataset {
        wrap(self.inner.take(count))
    }

    fn iterate(&self) -> PyResult<Iterator> {
        Ok(Iterator { inner: Mutex::new(self.inner.iter().map_err(to_py)?) })
    }
}

/// An iteration over a [`Dataset`]: `next()` is its next element as NumPy arrays.
#[pyclass(module = "ferroflow._native")]
pub struct Iterator {
    inner: Mutex<DatasetIter<Elem>>,
}

#[pymethods]
impl Iterator {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Vec<Bound<'py, PyAny>>>> {
        let next = py.detach(|| self.inner.lock().unwrap_or_else(|p| p.into_inner()).next());
        match next {
            None => Ok(None),
            Some(Err(e)) => Err(to_py(e)),
            Some(Ok(e)) => Ok(Some(e.into_iter().map(|t| tensor_to_numpy(py, t)).collect::<PyResult<_>>()?)),
        }
    }
}

/// Keras's `image_dataset_from_directory`: batches of `(images, labels)` and the class
/// names, from class folders under `directory`.
#[pyfunction]
#[pyo3(signature = (directory, image_size=(256, 256), batch_size=32, shuffle=true, seed=None, validation_split=None, subset=None, label_mode="int"))]
#[allow(clippy::too_many_arguments)]
pub fn image_dataset_from_directory(
    directory: PathBuf,
    image_size: (usize, usize),
    batch_size: usize,
    shuffle: bool,
    seed: Option<u64>,
    validation_split: Option<f32>,
    subset: Option<&str>,
    label_mode: &str,
) -> PyResult<(Dataset, Vec<String>)> {
    let label_mode = match label_mode {
        "int" => fdata::image::LabelMode::Int,
        "categorical" => fdata::image::LabelMode::Categorical,
        m => return Err(invalid(format!("label_mode must be 'int' or 'categorical', got '{m}'"))),
    };
    let subset = match subset {
        None => fdata::image::Subset::All,
        Some("training") => fdata::image::Subset::Training,
        Some("validation") => fdata::image::Subset::Validation,
        Some(s) => return Err(invalid(format!("subset must be 'training' or 'validation', got '{s}'"))),
    };
    let options = fdata::image::DirectoryOptions::default()
        .with_image_size([image_size.0, image_size.1])
        .with_batch_size(batch_size)
        .with_shuffle(shuffle)
        .with_seed(seed)
        .with_validation_split(validation_split)
        .with_label_mode(label_mode);
    let dir = fdata::image::image_dataset_from_directory(&directory, &options, subset).map_err(to_py)?;
    Ok((wrap(dir.dataset.map(|(x, y)| Ok(vec![x, y]))), dir.class_names))
}
