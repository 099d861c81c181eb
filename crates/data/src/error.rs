//! What can go wrong in a pipeline.
use ferroflow_tensor::TensorError;

/// An input-pipeline error. Each names the stage (`Iterator::Root::Batch::Map`) or the file
/// it comes from; element errors can be skipped with `ignore_errors`.
#[derive(Debug, Clone, thiserror::Error)]
pub enum DataError {
    /// Producing one element failed (a map function, a decode, a read); the pipeline can go
    /// on with the next element.
    #[error("{}{message}", if stage.is_empty() { String::new() } else { format!("{stage}: ") })]
    Element {
        /// The stage that failed (or the empty string when raised by user code).
        stage: String,
        /// What happened.
        message: String,
    },
    /// A bad pipeline or argument.
    #[error("{0}")]
    Invalid(String),
    /// A file could not be read or written.
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: String,
        /// What happened.
        message: String,
    },
}

impl DataError {
    /// An element error raised by user code (a map function); the stage is added by the
    /// pipeline.
    pub fn msg(message: impl Into<String>) -> DataError {
        DataError::Element { stage: String::new(), message: message.into() }
    }

    /// The same error, attributed to `stage` if no stage is named yet.
    pub(crate) fn in_stage(self, stage: &str) -> DataError {
        match self {
            DataError::Element { stage: s, message } if s.is_empty() => {
                DataError::Element { stage: stage.to_string(), message }
            }
            e => e,
        }
    }

    /// A file error naming `path`.
    pub fn io(path: &std::path::Path, e: impl std::fmt::Display) -> DataError {
        DataError::Io { path: path.display().to_string(), message: e.to_string() }
    }
}

impl From<TensorError> for DataError {
    fn from(e: TensorError) -> Self {
        DataError::msg(e.to_string())
    }
}

impl From<ferroflow_kernels::KernelError> for DataError {
    fn from(e: ferroflow_kernels::KernelError) -> Self {
        DataError::msg(e.to_string())
    }
}

impl From<std::io::Error> for DataError {
    fn from(e: std::io::Error) -> Self {
        DataError::msg(e.to_string())
    }
}

impl From<String> for DataError {
    fn from(e: String) -> Self {
        DataError::msg(e)
    }
}

impl From<&str> for DataError {
    fn from(e: &str) -> Self {
        DataError::msg(e)
    }
}

/// Results of the input pipeline.
pub type Result<T, E = DataError> = std::result::Result<T, E>;
