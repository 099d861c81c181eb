//! TensorBoard event files: TFRecord framing with masked CRC32C, `Event` and `Summary`
//! writing (`brain.Event:2` first, `events.out.tfevents.<time>.<host>` names; graph,
//! tagged run metadata and scalar events) and reading (of TensorFlow's files too).
//!
//! Event files are logs that TensorBoard reads while they grow, so they are appended to and
//! flushed after every event, as TensorFlow's writer does (not written through a temp file).
#![warn(missing_docs)]

pub use ferroflow_tensor::crc32c;
mod event;
pub mod histogram;
pub mod record;
mod writer;

pub use event::{read_events, scalar_value, EventReader, EventWriter};
pub use writer::SummaryWriter;

/// An error reading or writing an event file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SummaryError {
    /// The file could not be read or written.
    #[error("{file}: {source}")]
    Io {
        /// The file.
        file: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A record is truncated or fails its CRC, or an event does not parse.
    #[error("{file}: corrupt record at byte {offset}: {reason}")]
    Corrupt {
        /// The file.
        file: String,
        /// Byte offset of the record.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// A summary that cannot be written as asked (names the tag or directory).
    #[error("{0}")]
    Invalid(String),
    /// A histogram of values that are not all finite (TensorFlow rejects NaN and infinities).
    #[error("histogram values must be finite, got {0}")]
    NotFinite(f64),
    /// A summary whose values were refused, with the tag and why.
    #[error("{kind} '{tag}': {source}")]
    Value {
        /// What kind of summary (`histogram`, `image`).
        kind: &'static str,
        /// Its tag.
        tag: String,
        /// Why.
        source: Box<SummaryError>,
    },
    /// An image could not be encoded.
    #[error(transparent)]
    Codec(#[from] ferroflow_codec::CodecError),
    /// A record whose decoded form would not fit the memory limit.
    #[error(transparent)]
    Proto(#[from] ferroflow_proto::ProtoError),
}
