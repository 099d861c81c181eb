//! What decoding a binary message will allocate, bounded from its bytes before anything is
//! decoded, so that a small hostile file cannot make the decoder exhaust memory.
//!
//! On disk an empty repeated message costs two bytes (`0a 00`); decoded it is a whole struct
//! in a growing `Vec` — a `NodeDef` is hundreds of bytes — so 20 MB of empty `node` fields
//! become gigabytes. [`decoded_bytes`] walks the wire format with the message's schema (the
//! embedded descriptor set) and adds up what the decoded message holds: each repeated or map
//! element's struct (twice, for a `Vec`'s growth), each string's and bytes field's contents,
//! each packed scalar's element; fields the schema does not know are skipped as the decoder
//! skips them. The walk allocates nothing proportional to the input and stops at the first
//! malformed byte (the decoder then reports the error itself).
use std::collections::HashMap;
use std::sync::OnceLock;

use prost_reflect::{Kind, MessageDescriptor};

/// One field as the walk needs it.
#[derive(Clone, Copy)]
enum Field {
    /// A message (the index of its type), singular or repeated.
    Message { ty: usize, repeated: bool },
    /// A map: each entry a message (the index of the entry type) in a sorted map.
    Map { entry: usize },
    /// A string or bytes field.
    Bytes { repeated: bool },
    /// A number, bool or enum; repeated ones hold `size` bytes per element.
    Scalar { size: usize, repeated: bool },
}

/// A message type: its struct's size (estimated) and its fields by number.
struct Type {
    size: usize,
    fields: HashMap<u32, Field>,
}

/// Every message type of the embedded descriptor set, by index, and the index of each name.
struct Schema {
    types: Vec<Type>,
    index: HashMap<String, usize>,
    /// The most a byte on disk can cost decoded, in any message: an element (struct or map
    /// entry) needs at least two bytes (tag and length) and costs at most twice its size; an
    /// empty repeated string two bytes and two headers; a packed scalar 16 bytes per byte.
    per_byte: usize,
}

/// A `Vec`, `String` or map header.
const HEADER: usize = 24;

/// The estimated size of `m`'s struct: a header per string, bytes, repeated field and map,
/// 8 bytes per scalar, singular messages inline (to `depth` levels; deeper ones as boxes).
fn struct_size(m: &MessageDescriptor, depth: usize) -> usize {
    m.fields()
        .map(|f| {
            if f.is_list() || f.is_map() {
                return HEADER;
            }
            match f.kind() {
                Kind::String | Kind::Bytes => HEADER,
                Kind::Message(child) if depth > 0 => 8 + struct_size(&child, depth - 1),
                _ => 8,
            }
        })
        .sum::<usize>()
        .max(8)
}

fn schema() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let pool = crate::text::pool();
        let messages: Vec<MessageDescriptor> = pool.all_messages().collect();
        let index: HashMap<String, usize> =
            messages.iter().enumerate().map(|(i, m)| (m.full_name().to_string(), i)).collect();
        let types: Vec<Type> = messages
            .iter()
            .map(|m| Type {
                size: struct_size(m, 3),
                fields: m
                    .fields()
                    .map(|f| {
                        let repeated = f.is_list();
                        let field = match f.kind() {
                            Kind::Message(child) => {
                                let ty = index[child.full_name()];
                                if f.is_map() {
                                    Field::Map { entry: ty }
                                } else {
                                    Field::Message { ty, repeated }
                                }
                            }
                            Kind::String | Kind::Bytes => Field::Bytes { repeated },
                            Kind::Double
                            | Kind::Int64
                            | Kind::Uint64
                            | Kind::Sint64
                            | Kind::Fixed64
                            | Kind::Sfixed64 => Field::Scalar { size: 8, repeated },
                            Kind::Bool => Field::Scalar { size: 1, repeated },
                            _ => Field::Scalar { size: 4, repeated },
                        };
                        (f.number(), field)
                    })
                    .collect(),
            })
            .collect();
        let per_byte = types.iter().map(|t| t.size + 4 * 8).max().unwrap_or(0).max(HEADER).max(16);
        Schema { types, index, per_byte }
    })
}

/// Reads a varint at `*at`, advancing past it; `None` at a malformed or truncated one.
fn varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*at)?;
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

/// Protobuf's recursion limit: the decoder refuses deeper messages, so the walk stops there.
const MAX_DEPTH: usize = 100;

/// What the fields in `bytes` of type `ty` add to a decoded message beyond its own struct.
fn fields_cost(schema: &Schema, ty: usize, bytes: &[u8], depth: usize) -> usize {
    let t = &schema.types[ty];
    let mut cost = 0usize;
    let mut at = 0;
    while at < bytes.len() {
        let Some(tag) = varint(bytes, &mut at) else { break };
        let (number, wire) = ((tag >> 3) as u32, tag & 7);
        let body = match wire {
            0 => {
                if varint(bytes, &mut at).is_none() {
                    break;
                }
                None
            }
            1 | 5 => {
                at += if wire == 1 { 8 } else { 4 };
                None
            }
            2 => {
                let Some(len) = varint(bytes, &mut at) else { break };
                let Some(end) = usize::try_from(len).ok().and_then(|l| at.checked_add(l)).filter(|&e| e <= bytes.len())
                else {
                    break;
                };
                let body = &bytes[at..end];
                at = end;
                Some(body)
            }
            // Groups (deprecated) and invalid wire types: the decoder rejects or skips them.
            _ => break,
        };
        let add = match (t.fields.get(&number), body) {
            (None, _) => 0,
            (Some(&Field::Message { ty: child, repeated }), Some(body)) => {
                let own = if repeated { 2 * schema.types[child].size } else { 0 };
                let nested = if depth < MAX_DEPTH { fields_cost(schema, child, body, depth + 1) } else { 0 };
                own.saturating_add(nested)
            }
            (Some(&Field::Map { entry }), Some(body)) => {
                // A tree node per entry: its key and value, and the node's links.
                let own = schema.types[entry].size + 4 * 8;
                let nested = if depth < MAX_DEPTH { fields_cost(schema, entry, body, depth + 1) } else { 0 };
                own.saturating_add(nested)
            }
            (Some(&Field::Bytes { repeated }), Some(body)) => body.len() + if repeated { 2 * HEADER } else { 0 },
            // Packed: at least one byte per element on disk.
            (Some(&Field::Scalar { size, repeated: true }), Some(body)) => 2 * size * body.len(),
            (Some(&Field::Scalar { size, repeated: true }), None) => 2 * size,
            _ => 0,
        };
        cost = cost.saturating_add(add);
    }
    cost
}

/// An upper bound of [`decoded_bytes`] for any message of `len` bytes, without reading them:
/// when it fits the limit, the walk can be skipped (most messages, e.g. each Example record).
pub fn worst_case_bytes(message: &str, len: usize) -> Option<usize> {
    let schema = schema();
    let ty = *schema.index.get(message)?;
    Some(schema.types[ty].size.saturating_add(len.saturating_mul(schema.per_byte)))
}

/// An upper estimate of the bytes a decoded `message` (a full name, `tensorflow.GraphDef`)
/// holds when decoded from `bytes`; `None` for a name outside the embedded descriptor set.
pub fn decoded_bytes(message: &str, bytes: &[u8]) -> Option<usize> {
    let schema = schema();
    let ty = *schema.index.get(message)?;
    Some(schema.types[ty].size.saturating_add(fields_cost(schema, ty, bytes, 0)))
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::decoded_bytes;
    use crate::{AttrValue, GraphDef, NodeDef};

    #[test]
    fn empty_repeated_messages_cost_their_structs() {
        let bytes = b"\x0a\x00".repeat(1000);
        let n = decoded_bytes("tensorflow.GraphDef", &bytes).unwrap();
        let decoded = GraphDef::decode(bytes.as_slice()).unwrap();
        assert_eq!(decoded.node.len(), 1000);
        // At least the structs themselves, far more than the 2,000 bytes on disk.
        assert!(n >= 1000 * std::mem::size_of::<NodeDef>(), "{n}");
        assert!(n <= 1000 * 8 * std::mem::size_of::<NodeDef>(), "{n}");
        assert!(super::worst_case_bytes("tensorflow.GraphDef", bytes.len()).unwrap() >= n);
    }

    #[test]
    fn strings_maps_and_packed_scalars_are_counted() {
        let mut node = NodeDef { name: "x".repeat(10_000), op: "Const".into(), ..Default::default() };
        let list = crate::attr_value::ListValue { i: vec![1; 5_000], ..Default::default() };
        node.attr.insert("a".into(), AttrValue { value: Some(crate::attr_value::Value::List(Box::new(list))) });
        let g = GraphDef { node: vec![node], ..Default::default() };
        let bytes = g.encode_to_vec();
        let n = decoded_bytes("tensorflow.GraphDef", &bytes).unwrap();
        assert!(n >= 10_000 + 5_000 * 8, "{n}");
        assert!(n < 10 * bytes.len(), "{n} for {} bytes", bytes.len());
        assert!(super::worst_case_bytes("tensorflow.GraphDef", bytes.len()).unwrap() >= n);
    }

    #[test]
    fn malformed_and_unknown_input_ends_the_walk() {
        assert!(decoded_bytes("tensorflow.GraphDef", b"\x0a\xff\xff\xff\xff\x0f").is_some());
        assert!(decoded_bytes("tensorflow.GraphDef", b"\xff").is_some());
        assert!(decoded_bytes("no.Such", b"").is_none());
        // Deeply nested input stops at the recursion limit instead of the stack's.
        let mut bytes = Vec::new();
        for _ in 0..2_000 {
            let mut outer = vec![0x0a];
            let mut len = bytes.len();
            while len >= 0x80 {
                outer.push((len as u8) | 0x80);
                len >>= 7;
            }
            outer.push(len as u8);
            outer.extend_from_slice(&bytes);
            bytes = outer;
        }
        assert!(decoded_bytes("tensorflow.GraphDef", &bytes).is_some());
    }
}
