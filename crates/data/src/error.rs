//! What can go wrong in a pipeline.
//!
//! Errors keep their causes as typed sources (behind `Arc`, so that an error can be handed to
//! every consumer of a shared iterator: [`DataError`] is `Clone`), and print one line that
//! names the stage or the file and what was expected.
use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ferroflow_kernels::KernelError;
use ferroflow_runtime::RuntimeError;
use ferroflow_tensor::TensorError;

/// Any error type, shared.
pub type SharedError = Arc<dyn Error + Send + Sync>;

/// An input-pipeline error. Each names the stage (`Iterator::Root::Batch::Map`) or the file
/// it comes from; element errors can be skipped with `ignore_errors`.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum DataError {
    /// Producing one element failed (a map function, a decode, a read); the pipeline can go
    /// on with the next element.
    #[error("{}{cause}", if stage.is_empty() { String::new() } else { format!("{stage}: ") })]
    Element {
        /// The stage that failed (or the empty string when raised by user code).
        stage: String,
        /// What happened.
        #[source]
        cause: ElementCause,
    },
    /// A bad pipeline or argument.
    #[error("{0}")]
    Invalid(String),
    /// The pipeline could not be set up or kept running (a map graph that does not load, a
    /// worker thread that does not start, a bad file pattern); not an element's fault.
    #[error("{context}: {source}")]
    Pipeline {
        /// What was being set up, and where.
        context: String,
        /// Why it failed.
        source: SharedError,
    },
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What happened (an `std::io::Error`, a checkpoint or record error).
        source: SharedError,
    },
}

/// Why an element failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ElementCause {
    /// A check of the pipeline's own (shapes in a batch, a feature's type), or a message
    /// from user code ([`DataError::msg`]).
    #[error("{0}")]
    Message(String),
    /// A tensor could not be built or viewed.
    #[error(transparent)]
    Tensor(Arc<TensorError>),
    /// A kernel failed (reading a file, decoding or resizing an image).
    #[error("{}{source}", op.as_ref().map_or(String::new(), |op| format!("{op}: ")))]
    Kernel {
        /// The op the kernel runs, when it was run by name.
        op: Option<String>,
        /// The kernel's error.
        source: Arc<KernelError>,
    },
    /// A graph function (`map_graph`) failed while running.
    #[error(transparent)]
    Graph(Arc<RuntimeError>),
    /// Any other error (user code's own error type, a corrupt record), after what it
    /// concerns (a file, a record) when that is known.
    #[error("{}{source}", context.as_ref().map_or(String::new(), |c| format!("{c}: ")))]
    Other {
        /// What the error concerns (`could not parse example 3 as a tf.train.Example`).
        context: Option<String>,
        /// The error.
        source: SharedError,
    },
}

impl DataError {
    /// An element error raised by user code (a map function); the stage is added by the
    /// pipeline.
    pub fn msg(message: impl Into<String>) -> DataError {
        DataError::element(ElementCause::Message(message.into()))
    }

    /// An element error of another error type (user code's own, or that of a library the
    /// pipeline calls); the stage is added by the pipeline.
    pub fn other(source: impl Error + Send + Sync + 'static) -> DataError {
        DataError::element(ElementCause::Other { context: None, source: Arc::new(source) })
    }

    /// An element error caused by `source`, printed after `context` (`context: source`).
    pub fn with_context(context: impl Into<String>, source: impl Error + Send + Sync + 'static) -> DataError {
        DataError::element(ElementCause::Other { context: Some(context.into()), source: Arc::new(source) })
    }

    /// A pipeline that could not be set up: `context` (what, where) failed because of
    /// `source`.
    pub fn pipeline(context: impl Into<String>, source: impl Error + Send + Sync + 'static) -> DataError {
        DataError::Pipeline { context: context.into(), source: Arc::new(source) }
    }

    /// A file error naming `path`.
    pub fn io(path: &Path, source: impl Error + Send + Sync + 'static) -> DataError {
        DataError::Io { path: path.to_path_buf(), source: Arc::new(source) }
    }

    /// The failure of kernel `op`.
    pub(crate) fn kernel(op: &str, source: KernelError) -> DataError {
        DataError::element(ElementCause::Kernel { op: Some(op.to_string()), source: Arc::new(source) })
    }

    fn element(cause: ElementCause) -> DataError {
        DataError::Element { stage: String::new(), cause }
    }

    /// The same error, attributed to `stage` if no stage is named yet.
    pub(crate) fn in_stage(self, stage: &str) -> DataError {
        match self {
            DataError::Element { stage: s, cause } if s.is_empty() => {
                DataError::Element { stage: stage.to_string(), cause }
            }
            e => e,
        }
    }

    /// Whether the error belongs to one element (or one file), so that `ignore_errors` may
    /// skip it; a bad pipeline is not skipped.
    pub(crate) fn is_skippable(&self) -> bool {
        matches!(self, DataError::Element { .. } | DataError::Io { .. })
    }
}

impl From<TensorError> for DataError {
    fn from(e: TensorError) -> Self {
        DataError::element(ElementCause::Tensor(Arc::new(e)))
    }
}

impl From<KernelError> for DataError {
    fn from(e: KernelError) -> Self {
        DataError::element(ElementCause::Kernel { op: None, source: Arc::new(e) })
    }
}

impl From<RuntimeError> for DataError {
    fn from(e: RuntimeError) -> Self {
        DataError::element(ElementCause::Graph(Arc::new(e)))
    }
}

/// Results of the input pipeline.
pub type Result<T, E = DataError> = std::result::Result<T, E>;
