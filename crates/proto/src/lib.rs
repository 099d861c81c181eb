//! TensorFlow-compatible protobuf messages and their two encodings.
//!
//! The messages are generated at build time from `protos/` by protox + prost (no `protoc`).
//! Binary encoding is prost's; text format is parsed by prost-reflect (which agrees with
//! TensorFlow's own parser) and printed by [`text::print`] in TensorFlow's layout, so files
//! diff cleanly against the ones TensorFlow writes.
#![warn(missing_docs)]

pub mod attr;
pub mod convert;
pub mod text;

#[allow(missing_docs, clippy::all)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/tensorflow.rs"));
}

pub use generated::*;
pub use prost::Message;

/// The compiled descriptor set of every message in this crate (used by the text format).
pub(crate) static DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/descriptor.bin"));

/// An error reading or writing a protobuf message.
#[derive(Debug, thiserror::Error)]
pub enum ProtoError {
    /// Bytes that are not a valid binary encoding of the message.
    #[error("{what}: not a valid binary {message}: {source}")]
    Decode {
        /// What was being read (a file name or a description).
        what: String,
        /// The message type expected.
        message: String,
        /// The decoder's reason.
        source: prost::DecodeError,
    },
    /// Text that is not a valid text-format encoding of the message.
    #[error("{what}: not a valid text-format {message}: {reason}")]
    Text {
        /// What was being read (a file name or a description).
        what: String,
        /// The message type expected.
        message: String,
        /// The parser's reason, with line and column.
        reason: String,
    },
}

/// A generated message that knows its protobuf full name (e.g. `tensorflow.GraphDef`).
pub trait NamedMessage: prost::Message + prost::Name + Default + Sized {}
impl<T: prost::Message + prost::Name + Default> NamedMessage for T {}

/// Decodes a binary message; `what` names the source in the error.
pub fn decode<M: NamedMessage>(bytes: &[u8], what: &str) -> Result<M, ProtoError> {
    M::decode(bytes).map_err(|source| ProtoError::Decode { what: what.to_string(), message: M::full_name(), source })
}

/// Encodes a message to its binary form (deterministic: maps are sorted).
pub fn encode<M: NamedMessage>(msg: &M) -> Vec<u8> {
    msg.encode_to_vec()
}

/// Parses a text-format message (as written by TensorFlow's `repr()` / `text_format`).
pub fn parse_text<M: NamedMessage>(text: &str, what: &str) -> Result<M, ProtoError> {
    text::parse(text, what)
}

/// Prints a message in TensorFlow's text-format layout.
pub fn print_text<M: NamedMessage>(msg: &M) -> String {
    text::print(msg)
}
