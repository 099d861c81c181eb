//! TensorFlow-compatible protobuf messages and their two encodings.
//!
//! The messages are generated at build time from `protos/` by protox + prost (no `protoc`).
//! Binary encoding is prost's; text format is parsed by prost-reflect (which agrees with
//! TensorFlow's own parser) and printed by [`text::print`] in TensorFlow's layout, so files
//! diff cleanly against the ones TensorFlow writes.
#![warn(missing_docs)]

pub mod attr;
pub mod bound;
pub mod convert;
pub mod text;

#[allow(missing_docs, clippy::all)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/tensorflow.rs"));
    /// The profiler's messages (`tensorflow.profiler`): XSpace and its planes, lines and events.
    pub mod profiler {
        include!(concat!(env!("OUT_DIR"), "/tensorflow.profiler.rs"));
    }
    /// TensorFlow Serving's API messages (`tensorflow.serving`): predict, classify, regress,
    /// model metadata and status.
    pub mod serving {
        include!(concat!(env!("OUT_DIR"), "/tensorflow.serving.rs"));
    }
}

pub use generated::*;
pub use prost::Message;

/// The compiled descriptor set of every message in this crate (used by the text format).
pub(crate) static DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/descriptor.bin"));

/// An error reading or writing a protobuf message.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProtoError {
    /// Bytes that are not a valid binary encoding of the message.
    #[error("{what}: not a valid binary {message}: {reason}")]
    Decode {
        /// What was being read (a file name or a description).
        what: String,
        /// The message type expected.
        message: String,
        /// The decoder's reason and the field where it failed, on one short line
        /// ([`decode_reason`]).
        reason: String,
    },
    /// A message whose decoded form would not fit the memory limit
    /// ([`ferroflow_tensor::limit`]): a few bytes on disk can stand for large structs.
    #[error("{what}: decoding this {len}-byte {message}: {source}")]
    TooLarge {
        /// What was being read (a file name or a description).
        what: String,
        /// The message type expected.
        message: String,
        /// Its size on disk.
        len: usize,
        /// The limit's refusal (bytes asked for and the limit).
        source: Box<ferroflow_tensor::TensorError>,
    },
    /// Text that is not a valid text-format encoding of the message.
    #[error("{what}: not a valid text-format {message}: {reason}")]
    Text {
        /// What was being read (a file name or a description).
        what: String,
        /// The message type expected.
        message: String,
        /// The parser's reason, with line and column, on one short line ([`one_line`]).
        reason: String,
    },
}

/// A generated message that knows its protobuf full name (e.g. `tensorflow.GraphDef`).
pub trait NamedMessage: prost::Message + prost::Name + Default + Sized {}
impl<T: prost::Message + prost::Name + Default> NamedMessage for T {}

/// Checks that decoding `bytes` as an `M` fits the memory limit ([`bound::decoded_bytes`]
/// against [`ferroflow_tensor::limit`]), before a decoder allocates anything; `what` names
/// the source in the error. [`decode`] does this; callers decoding with prost themselves
/// call it first.
pub fn check_decoded_size<M: NamedMessage>(bytes: &[u8], what: &str) -> Result<(), ProtoError> {
    let message = M::full_name();
    // Most messages are small enough that even their worst case fits: no walk needed.
    let limit = ferroflow_tensor::limit::current();
    if bound::worst_case_bytes(&message, bytes.len()).is_none_or(|w| w <= limit) {
        return Ok(());
    }
    let Some(need) = bound::decoded_bytes(&message, bytes) else { return Ok(()) };
    ferroflow_tensor::limit::check(need, || format!("decoded {message}")).map_err(|source| ProtoError::TooLarge {
        what: what.to_string(),
        message,
        len: bytes.len(),
        source: Box::new(source),
    })
}

/// Decodes a binary message; `what` names the source in the error. Its decoded size is
/// checked against the memory limit first ([`check_decoded_size`]).
pub fn decode<M: NamedMessage>(bytes: &[u8], what: &str) -> Result<M, ProtoError> {
    check_decoded_size::<M>(bytes, what)?;
    M::decode(bytes).map_err(|e| ProtoError::Decode {
        what: what.to_string(),
        message: M::full_name(),
        reason: decode_reason(&e),
    })
}

/// The most characters a reason in an error message keeps ([`one_line`]): with the file name
/// and message type around it, an error stays one readable line.
pub const MAX_REASON_CHARS: usize = 200;

/// Deeper field paths than this are shown by their outermost and innermost fields only.
const MAX_PATH_SHOWN: usize = 6;

/// `text` as one line of at most `max` characters: line breaks and other control characters
/// become spaces, and a longer text is cut (on a character boundary) and ends in `…`.
pub fn one_line(text: &str, max: usize) -> String {
    let long = text.chars().nth(max).is_some();
    let keep = if long { max.saturating_sub(1) } else { max };
    let mut out: String = text.chars().take(keep).map(|c| if c.is_control() { ' ' } else { c }).collect();
    if long {
        out.push('…');
    }
    out
}

/// True for one element of prost's field path (`NodeDef.attr`).
fn is_path_element(s: &str) -> bool {
    s.contains('.') && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

/// A binary decoding error as one short line: the cause, then the field where decoding
/// failed as a path from the outermost message in (`buffer underflow at GraphDef.node >
/// NodeDef.attr > AttrValue.s`). prost's own text lists every level innermost first, which
/// for a message nested 100 deep is a line of kilobytes; a path deeper than a few levels
/// keeps its outermost and innermost fields and says how many it leaves out.
pub fn decode_reason(e: &prost::DecodeError) -> String {
    let text = e.to_string();
    let mut rest = text.strip_prefix("failed to decode Protobuf message: ").unwrap_or(&text);
    let mut path = Vec::new();
    while let Some((head, tail)) = rest.split_once(": ") {
        if !is_path_element(head) {
            break;
        }
        path.push(head);
        rest = tail;
    }
    path.reverse();
    let reason = match path.len() {
        0 => rest.to_string(),
        n if n <= MAX_PATH_SHOWN => format!("{rest} at {}", path.join(" > ")),
        n => {
            let (head, tail) = (&path[..3], &path[n - 2..]);
            format!("{rest} at {} > … {} levels … > {} ({n} levels deep)", head.join(" > "), n - 5, tail.join(" > "))
        }
    };
    one_line(&reason, MAX_REASON_CHARS)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A node whose attr holds a function whose attr holds a function ... `depth` times.
    fn nested_graph(depth: usize) -> GraphDef {
        let mut value = AttrValue::default();
        for _ in 0..depth {
            let func = NameAttrList { name: "x".into(), attr: [("f".to_string(), value)].into_iter().collect() };
            value = AttrValue { value: Some(attr_value::Value::Func(Box::new(func))) };
        }
        let node = NodeDef {
            name: "n".into(),
            op: "NoOp".into(),
            attr: [("f".to_string(), value)].into_iter().collect(),
            ..Default::default()
        };
        GraphDef { node: vec![node], ..Default::default() }
    }

    #[test]
    fn a_deeply_nested_decode_error_is_one_short_line_naming_file_and_field() {
        // Past the decoder's recursion limit: prost's own text lists all 100 levels (1.4 KB).
        let bytes = encode(&nested_graph(60));
        let e = decode::<GraphDef>(&bytes, "deep.pb").unwrap_err().to_string();
        assert!(e.len() < 300 && !e.contains('\n'), "{} chars: {e}", e.len());
        assert!(e.starts_with("deep.pb: not a valid binary tensorflow.GraphDef: "), "{e}");
        assert!(e.contains("recursion limit") && e.contains("at GraphDef.node > NodeDef.attr > "), "{e}");
        assert!(e.contains("levels deep"), "{e}");
        // A shallow error keeps its whole path.
        let mut bytes = encode(&nested_graph(1));
        let n = bytes.len();
        bytes[n - 1] = 0xff;
        let e = decode::<GraphDef>(&bytes, "cut.pb").unwrap_err().to_string();
        assert!(e.contains("cut.pb") && e.contains("GraphDef.node") && e.len() < 300, "{e}");
    }

    #[test]
    fn one_line_cuts_on_a_character_boundary() {
        assert_eq!(one_line("a\nb\tc", 10), "a b c");
        assert_eq!(one_line("ééééé", 3), "éé…");
        assert_eq!(one_line("abc", 3), "abc");
        assert_eq!(one_line(&"x".repeat(1000), MAX_REASON_CHARS).chars().count(), MAX_REASON_CHARS);
    }
}
