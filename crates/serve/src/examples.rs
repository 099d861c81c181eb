//! The `tf.Example`s of classify and regress requests, serialized as the signatures take them:
//! from the REST API's JSON (`context` and `examples`) or the gRPC `Input`. A context is merged
//! into each example by concatenating the serialized messages (protobuf's merge: the example's
//! own features win), as TensorFlow Serving does.
use ferroflow::proto::serving::{input, Input};
use ferroflow::proto::{feature, BytesList, Example, Feature, Features, FloatList, Int64List, Message};
use serde_json::Value;

use crate::json::b64_of;
use crate::ApiError;

/// The examples of a gRPC `Input`, each serialized with the context (if any) merged in.
pub fn from_input(input: Option<&Input>) -> Result<Vec<Vec<u8>>, ApiError> {
    let (examples, context) = match input.and_then(|i| i.kind.as_ref()) {
        Some(input::Kind::ExampleList(l)) => (&l.examples, None),
        Some(input::Kind::ExampleListWithContext(l)) => (&l.examples, l.context.as_ref()),
        None => return Err(ApiError::invalid("Input is empty")),
    };
    if examples.is_empty() {
        return Err(ApiError::invalid("Input is empty"));
    }
    let context = context.map(Message::encode_to_vec).unwrap_or_default();
    check_copies(context.len(), examples.len())?;
    Ok(examples
        .iter()
        .map(|e| {
            let mut bytes = context.clone();
            e.encode(&mut bytes).expect("a Vec grows as needed");
            bytes
        })
        .collect())
}

/// The examples of a REST classify or regress body:
/// `{"context": {feature: value}, "examples": [{feature: value}, ...]}`.
pub fn from_json(body: &Value) -> Result<Vec<Vec<u8>>, ApiError> {
    let Value::Object(map) = body else {
        return Err(ApiError::invalid("the request body is not a JSON object"));
    };
    let context = match map.get("context") {
        None => Vec::new(),
        Some(c) => example_of(c, "context")?.encode_to_vec(),
    };
    let examples = match map.get("examples") {
        Some(Value::Array(list)) if !list.is_empty() => list,
        Some(Value::Array(_)) => return Err(ApiError::invalid("'examples' is an empty list")),
        Some(_) => return Err(ApiError::invalid("'examples' is not a list")),
        None => return Err(ApiError::invalid("Missing 'examples' key")),
    };
    check_copies(context.len(), examples.len())?;
    examples
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let mut bytes = context.clone();
            example_of(e, &format!("examples[{i}]"))?.encode(&mut bytes).expect("a Vec grows as needed");
            Ok(bytes)
        })
        .collect()
}

/// Checks that `n` copies of a serialized context of `len` bytes (one merged into each example)
/// fit the memory limit: a context of a megabyte and a million empty examples, a few megabytes
/// of request, would otherwise ask for a terabyte.
fn check_copies(len: usize, n: usize) -> Result<(), ApiError> {
    ferroflow::tensor::limit::check(len.saturating_mul(n), || {
        format!("{n} copies of a {len}-byte context, one for each example")
    })
    .map_err(|e| ApiError::from_error(&e))
}

/// `v` as JSON, cut to about 60 characters (an error quotes a value, not a whole request).
fn shown(v: &Value) -> String {
    let text = v.to_string();
    match text.char_indices().nth(60) {
        Some((cut, _)) if text.len() > 64 => format!("{}...", &text[..cut]),
        _ => text,
    }
}

/// One example: an object of features, each a value or a list of values of one kind.
fn example_of(v: &Value, what: &str) -> Result<Example, ApiError> {
    let Value::Object(map) = v else {
        return Err(ApiError::invalid(format!("{what} is not a JSON object of features")));
    };
    let mut features = Features::default();
    for (name, value) in map {
        let values: &[Value] = match value {
            Value::Array(list) => list,
            one => std::slice::from_ref(one),
        };
        features.feature.insert(name.clone(), feature_of(values, &format!("{what}.{name}"))?);
    }
    Ok(Example { features: Some(features) })
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Int,
    Float,
    Bytes,
}

fn feature_of(values: &[Value], what: &str) -> Result<Feature, ApiError> {
    let kind_of = |v: &Value| -> Result<Kind, ApiError> {
        match v {
            Value::Number(n) if n.is_i64() || n.is_u64() => Ok(Kind::Int),
            Value::Number(_) => Ok(Kind::Float),
            Value::Bool(_) => Ok(Kind::Int),
            Value::String(_) => Ok(Kind::Bytes),
            Value::Object(_) if b64_of(v).is_some() => Ok(Kind::Bytes),
            other => Err(ApiError::invalid(format!(
                "feature {what}: {} is not a number, a string or {{\"b64\": ...}}",
                shown(other)
            ))),
        }
    };
    let Some(first) = values.first() else {
        return Ok(Feature::default());
    };
    // Integers in a list of decimals are decimals; strings mix with nothing.
    let mut kind = kind_of(first)?;
    for v in values {
        kind = match (kind, kind_of(v)?) {
            (a, b) if a == b => a,
            (Kind::Int, Kind::Float) | (Kind::Float, Kind::Int) => Kind::Float,
            _ => return Err(ApiError::invalid(format!("feature {what}: the list mixes value types"))),
        };
    }
    let kind = match kind {
        Kind::Int => feature::Kind::Int64List(Int64List {
            value: values
                .iter()
                .map(|v| match v {
                    Value::Bool(b) => Ok(i64::from(*b)),
                    v => v
                        .as_i64()
                        .ok_or_else(|| ApiError::invalid(format!("feature {what}: {v} is out of int64 range"))),
                })
                .collect::<Result<_, _>>()?,
        }),
        Kind::Float => feature::Kind::FloatList(FloatList {
            value: values.iter().map(|v| v.as_f64().unwrap_or(0.0) as f32).collect(),
        }),
        Kind::Bytes => feature::Kind::BytesList(BytesList {
            value: values
                .iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s.as_bytes().to_vec()),
                    v => b64_of(v)
                        .expect("checked as b64")
                        .map_err(|e| ApiError::invalid(format!("feature {what}: {e}"))),
                })
                .collect::<Result<_, _>>()?,
        }),
    };
    Ok(Feature { kind: Some(kind) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_examples_take_the_context() {
        let body = json!({"context": {"c": "x"}, "examples": [{"a": 1, "b": [1.5, 2]}, {"a": [true, 3]}]});
        let out = from_json(&body).unwrap();
        assert_eq!(out.len(), 2);
        let e = Example::decode(&out[0][..]).unwrap();
        let f = &e.features.unwrap().feature;
        assert!(matches!(&f["a"].kind, Some(feature::Kind::Int64List(l)) if l.value == vec![1]));
        assert!(matches!(&f["b"].kind, Some(feature::Kind::FloatList(l)) if l.value == vec![1.5, 2.0]));
        assert!(matches!(&f["c"].kind, Some(feature::Kind::BytesList(l)) if l.value == vec![b"x".to_vec()]));
        let e = Example::decode(&out[1][..]).unwrap();
        assert!(
            matches!(&e.features.unwrap().feature["a"].kind, Some(feature::Kind::Int64List(l)) if l.value == vec![1, 3])
        );
    }

    #[test]
    fn a_context_copied_past_the_memory_limit_is_refused() {
        let _limit = ferroflow::tensor::limit::scoped(64 << 20);
        let examples = vec![json!({}); 10_000];
        let body = json!({"context": {"c": "x".repeat(10_000)}, "examples": examples});
        let e = from_json(&body).unwrap_err();
        assert_eq!(e.code, crate::Code::ResourceExhausted, "{}", e.message);
        assert!(from_json(&json!({"context": {"c": "x".repeat(10_000)}, "examples": [{}, {}]})).is_ok());
    }

    #[test]
    fn errors_quote_a_value_not_the_request() {
        let long = vec![1; 10_000];
        let e = from_json(&json!({"examples": [{"a": [long]}]})).unwrap_err();
        assert!(e.message.len() < 200, "{}", e.message);
    }

    #[test]
    fn bad_json_is_refused() {
        assert!(from_json(&json!({"examples": []})).is_err());
        assert!(from_json(&json!({"examples": [{"a": [1, "x"]}]})).is_err());
        assert!(from_json(&json!({"examples": [{"a": [[1]]}]})).is_err());
        assert!(from_json(&json!({"instances": [1]})).is_err(), "no examples");
        assert!(from_json(&json!([1])).is_err());
    }
}
