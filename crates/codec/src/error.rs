//! Why a decode or encode failed, by kind; each message says what was found and what was
//! expected, as TensorFlow's kernels word it.
use std::sync::Arc;

/// A codec error.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// An option or argument the codec does not take (channels, ratio, quality, a pixel buffer
    /// of the wrong size).
    #[error("{0}")]
    Argument(String),
    /// The bytes are empty or do not start with the format's signature.
    #[error("{0}")]
    NotFormat(String),
    /// The image is larger than TensorFlow's limits or the caller's byte limit.
    #[error("{0}")]
    TooLarge(String),
    /// The data ends before the image does.
    #[error("{0}")]
    Truncated(String),
    /// The data is invalid (what the decoder found).
    #[error("{0}")]
    Invalid(String),
    /// The encoder failed.
    #[error("{0}")]
    Encode(String),
    /// The caller asked the decode to stop (a step's cancellation or deadline).
    #[error("decoding stopped: cancelled or past its deadline")]
    Stopped,
    /// This build leaves the codec out (the `jpeg` cargo feature is off).
    #[error("{0} is not in this build: ferroflow was built without its `jpeg` feature (on by default; it needs a C compiler)")]
    NotBuilt(&'static str),
    /// The caller's pixel buffer could not be made.
    #[error(transparent)]
    Buffer(Arc<dyn std::error::Error + Send + Sync>),
}

impl CodecError {
    /// The error of a pixel buffer that could not be made.
    pub fn buffer(e: impl std::error::Error + Send + Sync + 'static) -> CodecError {
        CodecError::Buffer(Arc::new(e))
    }
}
