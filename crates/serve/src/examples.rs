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
            other => {
                Err(ApiError::invalid(format!("feature {what}: {other} is not a number, a string or {{\"b64\": ...}}")))
            }
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
    fn bad_json_is_refused() {
        assert!(from_json(&json!({"examples": []})).is_err());
        assert!(from_json(&json!({"examples": [{"a": [1, "x"]}]})).is_err());
        assert!(from_json(&json!({"examples": [{"a": [[1]]}]})).is_err());
        assert!(from_json(&json!({"instances": [1]})).is_err(), "no examples");
        assert!(from_json(&json!([1])).is_err());
    }
}
