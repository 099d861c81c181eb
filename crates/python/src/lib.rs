//! `ferroflow._native`: the Python extension module under the `ferroflow` package
//! (`python/`, built by maturin). It exposes the op registry (from which `ferroflow.raw_ops`
//! makes its wrappers), graphs built node by node, sessions run with NumPy arrays in and out,
//! and TensorFlow's exception classes. Everything Pythonic (default graphs, fetch structures,
//! `compat.v1`) is Python in `python/ferroflow/`.
//!
//! Threads: a [`Session`] is shared by Python threads and runs its steps with the GIL
//! released; a [`Graph`] is built on the thread that made it (`unsendable`: it wraps a
//! `Scope`). NumPy outputs are views of the tensors' buffers (read-only, kept alive by the
//! array's base), never copies.
#![warn(missing_docs)]
#![allow(clippy::useless_conversion)] // pyo3's macros convert PyResult types

mod convert;
mod data;
mod errors;
mod graph;
mod saved_model;
mod session;
mod train;

use pyo3::prelude::*;

/// The module `ferroflow._native`.
#[pymodule]
mod _native {
    #[pymodule_export]
    use super::data::{image_dataset_from_directory, Dataset, Iterator};
    #[pymodule_export]
    use super::errors::{
        AbortedError, AlreadyExistsError, CancelledError, DataLossError, DeadlineExceededError,
        FailedPreconditionError, InternalError, InvalidArgumentError, NotFoundError, OpError, OutOfRangeError,
        PermissionDeniedError, ResourceExhaustedError, UnauthenticatedError, UnavailableError, UnimplementedError,
        UnknownError,
    };
    #[pymodule_export]
    use super::graph::{op_defs, Graph};
    #[pymodule_export]
    use super::saved_model::SavedModel;
    #[pymodule_export]
    use super::session::{Buffer, Session};
    #[pymodule_export]
    use super::train::{gradients, import_meta_graph, latest_checkpoint, Saver};
    use pyo3::prelude::*;

    #[pymodule_init]
    fn init(m: &Bound<'_, PyModule>) -> PyResult<()> {
        m.add("__version__", env!("CARGO_PKG_VERSION"))
    }
}
