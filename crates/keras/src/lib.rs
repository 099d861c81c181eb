//! Keras model files in and out of ferroflow.
//!
//! [`KerasModel::load`] reads Keras 3's `.keras` (a zip of `config.json`, `metadata.json` and
//! `model.weights.h5`) and Keras 2's whole-model `.h5`; [`KerasModel::load_weights`] reads
//! `.weights.h5` (Keras 3's layout) and legacy weights-only `.h5` into a model built from its
//! config. The config becomes a [`ModelSpec`] (Functional and Sequential models, nested models,
//! shared layers) whose layers are ferroflow ops ([`layers`]); the weights come from HDF5
//! ([`h5`], a reader and writer of the HDF5 Keras uses). [`KerasModel::save`] writes a
//! `.keras` that Keras 3 loads, atomically.
//!
//! [`KerasModel::predictor`] builds the model in inference mode in a session;
//! [`KerasModel::summary`] is `model.summary()`; `fit` trains it as Keras's transfer-learning
//! recipe does.
#![warn(missing_docs)]

pub mod applications;
pub mod archive;
pub mod build;
pub mod config;
pub mod fit;
pub mod functional;
pub mod h5;
pub mod layers;
pub mod model;
mod more;
mod sequence;
pub mod summary;
pub mod weights;

pub use config::{Format, LayerSpec, ModelSpec};
pub use fit::{Freeze, TrainOptions, Trainer};
pub use model::{KerasModel, Predictor};
pub use summary::Summary;

/// What can go wrong reading, building or writing a Keras model.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KerasError {
    /// A file that cannot be read or is not what it claims to be.
    #[error("{path}: {reason}")]
    File {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// An HDF5 structure that cannot be read.
    #[error("{path}: HDF5: {reason}")]
    Hdf5 {
        /// The file.
        path: String,
        /// What is wrong, and where in the file.
        reason: String,
    },
    /// A model config that cannot be understood.
    #[error("model config: {0}")]
    Config(String),
    /// A layer class ferroflow does not implement.
    #[error("layer '{layer}': unknown layer class '{class}' (ferroflow has no implementation of it)")]
    UnknownLayer {
        /// Keras's class (the registered name for a custom class).
        class: String,
        /// The layer's name.
        layer: String,
    },
    /// A layer whose config or inputs ferroflow cannot build.
    #[error("layer '{layer}' ({class}): {reason}")]
    Layer {
        /// The layer's name.
        layer: String,
        /// Its class.
        class: String,
        /// What is wrong.
        reason: String,
    },
    /// A weights file whose weights do not fit the model.
    #[error("layer '{layer}': weight '{weight}' has shape {model:?} in the model but {file:?} in {path}")]
    WeightShape {
        /// The layer (its path in nested models).
        layer: String,
        /// The weight's name.
        weight: String,
        /// The model's shape.
        model: Vec<usize>,
        /// The file's shape.
        file: Vec<usize>,
        /// The file.
        path: String,
    },
    /// Weights missing or extra for a layer.
    #[error("layer '{layer}': {reason} ({path})")]
    Weights {
        /// The layer (its path in nested models).
        layer: String,
        /// What disagrees.
        reason: String,
        /// The file.
        path: String,
    },
    /// Building the graph failed.
    #[error(transparent)]
    Build(#[from] ferroflow_train::TrainError),
    /// Running the model failed.
    #[error(transparent)]
    Run(#[from] ferroflow_runtime::RuntimeError),
    /// A tensor could not be made.
    #[error(transparent)]
    Tensor(#[from] ferroflow_tensor::TensorError),
    /// An invalid argument from the caller.
    #[error("{0}")]
    Invalid(String),
}

impl From<ferroflow_ops::BuildError> for KerasError {
    fn from(e: ferroflow_ops::BuildError) -> Self {
        KerasError::Build(e.into())
    }
}

/// Results of this crate.
pub type Result<T, E = KerasError> = std::result::Result<T, E>;
