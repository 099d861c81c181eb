//! Tensors for ferroflow: [`DType`] with TensorFlow's enum values, graph-time [`Shape`],
//! [`Tensor`] with a 64-byte-aligned, reference-counted buffer, and `.npy`/`.npz` I/O.
#![warn(missing_docs)]

pub mod buffer;
pub mod crc32c;
mod dtype;
pub mod fs;
pub mod hash;
pub mod limit;
mod list;
pub mod npy;
pub mod rng;
mod shape;
pub mod shown;
mod tensor;

pub use dtype::{DType, Element};
pub use half::{bf16, f16};
pub use list::{merge_shapes, TensorList};
pub use shape::{broadcast_dims, Shape};
pub use tensor::{Dims, Tensor};

/// Errors from building, viewing or reading tensors.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TensorError {
    /// A TensorFlow dtype enum value ferroflow does not support.
    #[error("unsupported dtype enum value {0}")]
    UnsupportedDType(i32),
    /// A typed view of a tensor of another dtype.
    #[error("expected a {expected} tensor, got {got}")]
    WrongDType {
        /// The dtype asked for.
        expected: DType,
        /// The tensor's dtype.
        got: DType,
    },
    /// The dtype has no fixed-size dense representation.
    #[error("{0} tensors have no dense byte buffer")]
    NotDense(DType),
    /// Element count does not match the shape.
    #[error("shape {dims:?} holds {expected} elements, got {got}")]
    ShapeMismatch {
        /// Elements the shape holds.
        expected: usize,
        /// Elements supplied.
        got: usize,
        /// The shape.
        dims: Vec<usize>,
    },
    /// Byte length does not match dtype and shape.
    #[error("{dtype} tensor of shape {dims:?} needs a different byte length than {got}")]
    ByteLength {
        /// The dtype.
        dtype: DType,
        /// The shape.
        dims: Vec<usize>,
        /// Bytes supplied.
        got: usize,
    },
    /// Foreign elements not aligned for their dtype.
    #[error("{dtype} elements at address {address:#x} are not aligned to {align} bytes")]
    Misaligned {
        /// The dtype.
        dtype: DType,
        /// The first element's address.
        address: usize,
        /// The alignment the dtype needs.
        align: usize,
    },
    /// A tensor too large to allocate.
    #[error("tensor too large: {0}")]
    TooLarge(String),
    /// An allocation within the memory limit that the system refused (the address-space
    /// limit, `ulimit -v`, or the machine's memory ran out first).
    #[error("resource exhausted: the system refused {bytes} bytes for a {what} (within the memory limit: the process's address space or the machine's memory ran out)")]
    SystemRefused {
        /// What was being allocated.
        what: String,
        /// Bytes asked for.
        bytes: usize,
    },
    /// An allocation past the memory limit.
    #[error("resource exhausted: allocating a {what} ({bytes} bytes) exceeds the memory limit of {limit} bytes")]
    ResourceExhausted {
        /// What was being allocated.
        what: String,
        /// Bytes asked for.
        bytes: usize,
        /// The limit in force.
        limit: usize,
    },
    /// A malformed or unsupported `.npy`/`.npz` file.
    #[error("{what}: {reason}")]
    Npy {
        /// The file (and archive member).
        what: String,
        /// What was wrong.
        reason: String,
    },
    /// An I/O error on a file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
}
