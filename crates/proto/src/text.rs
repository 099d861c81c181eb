//! Protobuf text format in TensorFlow's layout.
//!
//! Parsing goes text → `DynamicMessage` (prost-reflect, whose parser agrees with TensorFlow's
//! on every probe we ran) → bytes → generated struct. Printing walks the `DynamicMessage` and
//! writes what Python's `text_format.MessageToString` writes: fields in number order, one
//! block per repeated element, map entries sorted by key, C-style octal escapes.
use std::fmt::Write;
use std::sync::OnceLock;

use prost_reflect::{DescriptorPool, DynamicMessage, FieldDescriptor, Kind, MapKey, MessageDescriptor, Value};

use crate::{NamedMessage, ProtoError};

pub(crate) fn pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| DescriptorPool::decode(crate::DESCRIPTOR_SET).expect("embedded descriptor set is valid"))
}

fn descriptor<M: NamedMessage>() -> MessageDescriptor {
    pool().get_message_by_name(&M::full_name()).expect("every generated message is in the embedded descriptor set")
}

/// The deepest message nesting text may have: protobuf's own recursion limit (binary
/// decoding stops at the same depth), far beyond any real GraphDef or MetaGraphDef.
pub const MAX_DEPTH: usize = 100;

/// What a pass over text-format `text` finds before it is parsed.
struct Scan {
    /// The line of the first point nesting messages deeper than the limit, if any.
    too_deep: Option<usize>,
    /// Messages opened (`{`/`<` outside string literals and comments).
    messages: usize,
    /// Field values (`:` outside string literals and comments).
    fields: usize,
}

/// Scans `text` for its nesting (stopping at the first point deeper than `limit`) and counts
/// its messages and field values.
fn scan(text: &str, limit: usize) -> Scan {
    let (mut depth, mut line) = (0usize, 1usize);
    let mut found = Scan { too_deep: None, messages: 0, fields: 0 };
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\n' => line += 1,
            '#' => {
                // A comment runs to the end of the line.
                for c in chars.by_ref() {
                    if c == '\n' {
                        line += 1;
                        break;
                    }
                }
            }
            '"' | '\'' => {
                let mut escaped = false;
                for d in chars.by_ref() {
                    match d {
                        '\n' => {
                            line += 1;
                            break;
                        }
                        '\\' if !escaped => escaped = true,
                        _ if d == c && !escaped => break,
                        _ => escaped = false,
                    }
                }
            }
            '{' | '<' => {
                depth += 1;
                found.messages += 1;
                if depth > limit {
                    found.too_deep = Some(line);
                    return found;
                }
            }
            '}' | '>' => depth = depth.saturating_sub(1),
            ':' => found.fields += 1,
            _ => {}
        }
    }
    found
}

/// The line of the first point where `text` nests messages deeper than `limit` (`{`/`<`
/// outside string literals and comments), if it does.
#[cfg(test)]
fn too_deep(text: &str, limit: usize) -> Option<usize> {
    scan(text, limit).too_deep
}

/// Bytes the parser may hold per message of text (a dynamic message, its place in a list,
/// then the generated struct), measured at about 400 for `node {}` lines.
const TEXT_MESSAGE_BYTES: usize = 1024;
/// Bytes the parser may hold per field value beyond its text.
const TEXT_FIELD_BYTES: usize = 64;

/// Parses text format into `M`; `what` names the source in errors. Messages nested deeper
/// than [`MAX_DEPTH`] are an error (the parser recurses per level).
pub fn parse<M: NamedMessage>(text: &str, what: &str) -> Result<M, ProtoError> {
    let err = |reason: String| ProtoError::Text {
        what: what.to_string(),
        message: M::full_name(),
        reason: crate::one_line(&reason, crate::MAX_REASON_CHARS),
    };
    let found = scan(text, MAX_DEPTH);
    if let Some(line) = found.too_deep {
        return Err(err(format!("messages nested more than {MAX_DEPTH} levels deep (line {line})")));
    }
    // A few bytes of text can stand for a whole message: bounded before the parser allocates.
    let need = (found.messages.saturating_mul(TEXT_MESSAGE_BYTES))
        .saturating_add(found.fields.saturating_mul(TEXT_FIELD_BYTES))
        .saturating_add(text.len().saturating_mul(2));
    ferroflow_tensor::limit::check(need, || format!("parsed text-format {}", M::full_name())).map_err(|source| {
        ProtoError::TooLarge {
            what: what.to_string(),
            message: M::full_name(),
            len: text.len(),
            source: Box::new(source),
        }
    })?;
    let dynamic = DynamicMessage::parse_text_format(descriptor::<M>(), text).map_err(|e| err(e.to_string()))?;
    let bytes = prost::Message::encode_to_vec(&dynamic);
    M::decode(bytes.as_slice()).map_err(|e| err(crate::decode_reason(&e)))
}

/// Prints `msg` in TensorFlow's text-format layout.
pub fn print<M: NamedMessage>(msg: &M) -> String {
    let bytes = msg.encode_to_vec();
    let dynamic = DynamicMessage::decode(descriptor::<M>(), bytes.as_slice())
        .expect("a message re-decodes with its own descriptor");
    let mut out = String::new();
    print_message(&dynamic, 0, &mut out);
    out
}

fn print_message(msg: &DynamicMessage, indent: usize, out: &mut String) {
    let mut fields: Vec<(FieldDescriptor, &Value)> = msg.fields().collect();
    fields.sort_by_key(|(f, _)| f.number());
    for (field, value) in fields {
        match value {
            Value::List(items) => {
                for item in items {
                    print_field(&field, item, indent, out);
                }
            }
            Value::Map(map) => {
                let Kind::Message(entry) = field.kind() else { unreachable!("map fields are messages") };
                let value_field = entry.map_entry_value_field();
                let mut entries: Vec<(&MapKey, &Value)> = map.iter().collect();
                entries.sort_by(|a, b| map_key_order(a.0, b.0));
                for (key, val) in entries {
                    push_indent(indent, out);
                    out.push_str(field.name());
                    out.push_str(" {\n");
                    push_indent(indent + 2, out);
                    out.push_str("key: ");
                    print_map_key(key, out);
                    out.push('\n');
                    print_field(&value_field, val, indent + 2, out);
                    push_indent(indent, out);
                    out.push_str("}\n");
                }
            }
            _ => print_field(&field, value, indent, out),
        }
    }
}

fn map_key_order(a: &MapKey, b: &MapKey) -> std::cmp::Ordering {
    match (a, b) {
        (MapKey::String(x), MapKey::String(y)) => x.cmp(y),
        (MapKey::I32(x), MapKey::I32(y)) => x.cmp(y),
        (MapKey::I64(x), MapKey::I64(y)) => x.cmp(y),
        (MapKey::U32(x), MapKey::U32(y)) => x.cmp(y),
        (MapKey::U64(x), MapKey::U64(y)) => x.cmp(y),
        (MapKey::Bool(x), MapKey::Bool(y)) => x.cmp(y),
        _ => std::cmp::Ordering::Equal,
    }
}

fn print_map_key(key: &MapKey, out: &mut String) {
    match key {
        MapKey::String(s) => escape_into(s.as_bytes(), out),
        MapKey::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        MapKey::I32(v) => write!(out, "{v}").unwrap(),
        MapKey::I64(v) => write!(out, "{v}").unwrap(),
        MapKey::U32(v) => write!(out, "{v}").unwrap(),
        MapKey::U64(v) => write!(out, "{v}").unwrap(),
    }
}

fn print_field(field: &FieldDescriptor, value: &Value, indent: usize, out: &mut String) {
    push_indent(indent, out);
    out.push_str(field.name());
    if let Value::Message(m) = value {
        out.push_str(" {\n");
        print_message(m, indent + 2, out);
        push_indent(indent, out);
        out.push_str("}\n");
        return;
    }
    out.push_str(": ");
    match value {
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::I32(v) => write!(out, "{v}").unwrap(),
        Value::I64(v) => write!(out, "{v}").unwrap(),
        Value::U32(v) => write!(out, "{v}").unwrap(),
        Value::U64(v) => write!(out, "{v}").unwrap(),
        Value::F32(v) => write_float(*v as f64, format!("{v:?}"), out),
        Value::F64(v) => write_float(*v, format!("{v:?}"), out),
        Value::String(s) => escape_into(s.as_bytes(), out),
        Value::Bytes(b) => escape_into(b, out),
        Value::EnumNumber(n) => match field.kind() {
            Kind::Enum(e) => match e.get_value(*n) {
                Some(v) => out.push_str(v.name()),
                None => write!(out, "{n}").unwrap(),
            },
            _ => write!(out, "{n}").unwrap(),
        },
        Value::Message(_) | Value::List(_) | Value::Map(_) => unreachable!("handled by the caller"),
    }
    out.push('\n');
}

/// Floats print as the shortest decimal that reads back to the same value (Python prints the
/// same digits); non-finite values use the spellings TensorFlow's parser accepts.
fn write_float(v: f64, shortest: String, out: &mut String) {
    if v.is_nan() {
        out.push_str("nan");
    } else if v.is_infinite() {
        out.push_str(if v > 0.0 { "inf" } else { "-inf" });
    } else {
        out.push_str(&shortest);
    }
}

fn escape_into(bytes: &[u8], out: &mut String) {
    out.push('"');
    for &b in bytes {
        match b {
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            b'"' => out.push_str("\\\""),
            b'\'' => out.push_str("\\'"),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(b as char),
            _ => write!(out, "\\{b:03o}").unwrap(),
        }
    }
    out.push('"');
}

fn push_indent(n: usize, out: &mut String) {
    for _ in 0..n {
        out.push(' ');
    }
}

#[cfg(test)]
mod tests {
    use super::{parse, too_deep};
    use crate::*;

    /// A partition graph of `what_runs`, exactly as TensorFlow's `repr()` printed it.
    const WHAT_RUNS_PARTITION: &str = r#"node {
  name: "Mul"
  op: "Const"
  device: "/job:localhost/replica:0/task:0/device:CPU:0"
  attr {
    key: "dtype"
    value {
      type: DT_FLOAT
    }
  }
  attr {
    key: "value"
    value {
      tensor {
        dtype: DT_FLOAT
        tensor_shape {
        }
        tensor_content: "\000\000\020A"
      }
    }
  }
  experimental_debug_info {
    original_node_names: "Mul"
  }
}
library {
}
versions {
  producer: 55
}
"#;

    #[test]
    fn deeply_nested_text_is_an_error_not_a_stack_overflow() {
        // ~140 KB of `attr { value { func { ... } } }` overflowed the stack.
        let depth = 5000;
        let mut text = String::from("node { name: \"n\" op: \"NoOp\" ");
        for _ in 0..depth {
            text.push_str("attr { key: \"a\" value { func { name: \"f\" ");
        }
        for _ in 0..depth {
            text.push_str("} } } ");
        }
        text.push('}');
        let e = parse::<crate::GraphDef>(&text, "deep.pbtxt").unwrap_err().to_string();
        assert!(e.contains("deep.pbtxt") && e.contains("nested more than 100 levels"), "{e}");
        // Braces inside strings and comments do not count.
        let ok = "node { name: \"{{{{\" op: '<<<<' } # {{{{{{\n";
        assert_eq!(too_deep(ok, 2), None);
        assert_eq!(too_deep("a { b { c { } } }", 2), Some(1));
    }

    #[test]
    fn what_runs_partition_parses_and_prints_identically() {
        let g: GraphDef = parse_text(WHAT_RUNS_PARTITION, "seed").unwrap();
        let node = &g.node[0];
        let Some(attr_value::Value::Tensor(t)) = &node.attr["value"].value else { panic!() };
        assert_eq!(t.tensor_content, 9.0f32.to_le_bytes());
        assert_eq!(print_text(&g), WHAT_RUNS_PARTITION);
    }

    #[test]
    fn zero_valued_oneof_member_is_kept() {
        let text = "attr {\n  key: \"index\"\n  value {\n    i: 0\n  }\n}\n";
        let n: NodeDef = parse_text(text, "t").unwrap();
        assert_eq!(n.attr["index"].value, Some(attr_value::Value::I(0)));
        assert_eq!(print_text(&n), text);
    }

    #[test]
    fn floats_and_specials_round_trip() {
        let t = TensorProto {
            float_val: vec![1.0, 0.1, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::MAX, 1e-40],
            ..Default::default()
        };
        let text = print_text(&t);
        let back: TensorProto = parse_text(&text, "t").unwrap();
        assert_eq!(back.float_val.len(), 7);
        for (a, b) in t.float_val.iter().zip(&back.float_val) {
            assert_eq!(a.to_bits(), b.to_bits(), "{text}");
        }
        let nan = TensorProto { float_val: vec![f32::NAN], ..Default::default() };
        let back: TensorProto = parse_text(&print_text(&nan), "t").unwrap();
        assert!(back.float_val[0].is_nan());
    }

    #[test]
    fn malformed_text_is_an_error_naming_the_source() {
        let e = parse_text::<GraphDef>("node { name: \"a\" ", "bad.pbtxt").unwrap_err();
        assert!(e.to_string().contains("bad.pbtxt"), "{e}");
        let e = parse_text::<GraphDef>("nodes {}", "bad.pbtxt").unwrap_err();
        assert!(e.to_string().contains("nodes"), "{e}");
    }

    #[test]
    fn truncated_binary_is_an_error() {
        let g: GraphDef = parse_text(WHAT_RUNS_PARTITION, "seed").unwrap();
        let bytes = encode(&g);
        let e = decode::<GraphDef>(&bytes[..bytes.len() - 7], "cut.pb").unwrap_err();
        assert!(e.to_string().contains("cut.pb"), "{e}");
    }
}
