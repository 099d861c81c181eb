//! The server's readers of untrusted bytes as functions of arbitrary bytes: the entry points of
//! the libFuzzer targets `fuzz/fuzz_targets/serve_*.rs` (one line each) and of the test that
//! replays every input they found (`tests/fuzz_regressions.rs`, over
//! `fuzz/regressions/serve_*/*`), as [`ferroflow::fuzzing`] does for the facade's readers.
//!
//! Predict bodies go through both of the REST API's readers (the direct one and the JSON
//! tree) against a few fixed signatures, which must agree wherever both accept a body;
//! classify and regress bodies become `tf.Example`s; the batching parameters and the model
//! config are parsed as the command line reads them; a warmup file's records are read and
//! decoded, and their requests' tensors and examples built, without a model. Any input must
//! end in `Ok` or an error: a panic, a hang or an allocation that escapes [`MEMORY_LIMIT`] is
//! a bug. Errors are checked to be at most [`MAX_ERROR_BYTES`] long, plus the longest name the
//! input itself gives where an error quotes one (a JSON key).
use std::fmt::Display;

use ferroflow::proto::serving::prediction_log::LogType;
use ferroflow::tensor::{limit, DType, Shape, Tensor};
use ferroflow::train::saved_model::TensorSpec;
use serde_json::Value;

use crate::{batch, config, examples, json, manager, ApiError};

/// The memory limit the readers run under: the facade's ([`ferroflow::fuzzing::MEMORY_LIMIT`]).
pub const MEMORY_LIMIT: usize = ferroflow::fuzzing::MEMORY_LIMIT;

/// The longest error message a reader may give, besides the names it quotes from its input.
pub const MAX_ERROR_BYTES: usize = ferroflow::fuzzing::MAX_ERROR_BYTES;

/// A fuzz target: its name (the directory of its corpus and regressions) and its function.
pub type Target = (&'static str, fn(&[u8]));

/// Every target, by name.
pub const TARGETS: &[Target] = &[
    ("serve_predict_json", serve_predict_json),
    ("serve_examples_json", serve_examples_json),
    ("serve_batching_parameters", serve_batching_parameters),
    ("serve_model_config", serve_model_config),
    ("serve_warmup_records", serve_warmup_records),
];

/// The target named `name`.
pub fn target(name: &str) -> Option<fn(&[u8])> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|&(_, f)| f)
}

/// Panics unless `e` is at most [`MAX_ERROR_BYTES`] plus `quoted` bytes long.
fn check_error(e: &impl Display, quoted: usize) {
    let text = e.to_string();
    assert!(
        text.len() <= MAX_ERROR_BYTES + quoted,
        "an error message of {} bytes (at most {MAX_ERROR_BYTES} + {quoted} quoted): {}",
        text.len(),
        text.chars().take(2000).collect::<String>()
    );
}

/// The longest key of any object in `v` (the names an error may quote).
fn longest_key(v: &Value) -> usize {
    match v {
        Value::Array(a) => a.iter().map(longest_key).max().unwrap_or(0),
        Value::Object(m) => m.iter().map(|(k, v)| k.len().max(longest_key(v))).max().unwrap_or(0),
        _ => 0,
    }
}

fn spec(key: &str, dtype: DType, shape: Shape) -> TensorSpec {
    TensorSpec { key: key.into(), tensor: format!("{key}:0"), dtype, shape }
}

/// The inputs of the signatures predict bodies are read against: one float input of shape
/// `[-1, 2, 3]`, one double of unknown shape, one string, and an int64 and a double of unknown
/// shapes.
fn signatures() -> Vec<Vec<TensorSpec>> {
    vec![
        vec![spec("x", DType::Float, Shape::new(vec![None, Some(2), Some(3)]))],
        vec![spec("x", DType::Double, Shape::unknown())],
        vec![spec("text", DType::String, Shape::new(vec![None]))],
        vec![spec("ids", DType::Int64, Shape::unknown()), spec("weights", DType::Double, Shape::unknown())],
    ]
}

/// The general reader's tensors for `inputs` (as the REST API's `predict_inputs`, after the
/// signature is found), and whether they came as rows.
fn general_inputs(request: Value, inputs: &[TensorSpec]) -> Result<(Vec<Tensor>, bool), ApiError> {
    let (values, row) = json::request_inputs(request, inputs)?;
    let tensors =
        inputs.iter().zip(&values).map(|(spec, v)| json::to_tensor(v, spec)).collect::<Result<Vec<_>, _>>()?;
    if row {
        let n = tensors.first().map(|t| t.dims().first().copied());
        if tensors.iter().any(|t| Some(t.dims().first().copied()) != n) {
            return Err(ApiError::invalid("instances: the inputs have different numbers of rows"));
        }
    }
    Ok((tensors, row))
}

/// Panics unless the direct reader's tensor `fast` equals the general reader's `general`
/// (dims, dtype and every value, bit for bit).
fn check_same(fast: &Tensor, general: &Tensor, data: &[u8]) {
    let body = || String::from_utf8_lossy(&data[..data.len().min(2000)]).into_owned();
    assert_eq!(fast.dims(), general.dims(), "the two readers' dims differ for {}", body());
    assert_eq!(fast.dtype(), general.dtype());
    let differ = match fast.dtype() {
        DType::Float => {
            let (a, b) = (fast.as_slice::<f32>().unwrap(), general.as_slice::<f32>().unwrap());
            a.iter().zip(b).position(|(x, y)| x.to_bits() != y.to_bits()).map(|i| format!("{} vs {}", a[i], b[i]))
        }
        DType::Double => {
            let (a, b) = (fast.as_slice::<f64>().unwrap(), general.as_slice::<f64>().unwrap());
            a.iter().zip(b).position(|(x, y)| x.to_bits() != y.to_bits()).map(|i| format!("{:e} vs {:e}", a[i], b[i]))
        }
        other => unreachable!("the direct reader gives floats and doubles only, not {other:?}"),
    };
    if let Some(d) = differ {
        panic!("the direct reader and the JSON tree read different values ({d}) from {}", body());
    }
}

/// A predict body (`POST .../models/NAME:predict`): read by the direct reader
/// ([`json::parse_fast`], [`json::fast_tensor`]) and by the general one ([`json::parse_body`],
/// [`json::request_inputs`], [`json::to_tensor`]) for each of a few fixed signatures' inputs.
/// Where both read a body, their tensors, row flag and signature name must be the same.
pub fn serve_predict_json(data: &[u8]) {
    let _limit = limit::scoped(MEMORY_LIMIT);
    let fast = json::parse_fast(data);
    let tree = json::parse_body(data);
    let quoted = match &tree {
        Ok(v) => longest_key(v),
        Err(e) => {
            check_error(&e.message, 0);
            0
        }
    };
    if let (Some(fast), Ok(tree)) = (&fast, &tree) {
        let name = tree.get("signature_name").and_then(Value::as_str);
        assert_eq!(fast.signature_name.as_deref(), name, "the readers' signature names differ");
    }
    for inputs in signatures() {
        let fast_tensor = match (&fast, inputs.as_slice()) {
            (Some(f), [spec]) => json::fast_tensor(f, spec),
            _ => None,
        };
        let Ok(tree) = &tree else { continue };
        match general_inputs(tree.clone(), &inputs) {
            Ok((tensors, row)) => {
                if let (Some(f), Some(t)) = (&fast_tensor, tensors.first()) {
                    assert_eq!(fast.as_ref().map(|f| f.row), Some(row), "the readers' row flags differ");
                    check_same(f, t, data);
                }
            }
            Err(e) => check_error(&e.message, quoted),
        }
    }
}

/// A classify or regress body: read as JSON and turned into serialized `tf.Example`s (the
/// context merged into each), each of which must decode.
pub fn serve_examples_json(data: &[u8]) {
    let _limit = limit::scoped(MEMORY_LIMIT);
    let body = match json::parse_body(data) {
        Ok(v) => v,
        Err(e) => return check_error(&e.message, 0),
    };
    match examples::from_json(&body) {
        Ok(list) => {
            for bytes in list {
                if let Err(e) = ferroflow::proto::decode::<ferroflow::proto::Example>(&bytes, "example") {
                    panic!("an example built from JSON does not decode: {e}");
                }
            }
        }
        Err(e) => check_error(&e.message, longest_key(&body)),
    }
}

/// A `--batching_parameters_file` (text-format `BatchingParameters`). Its errors quote the
/// file's tokens; they are checked not to quote more than the file.
pub fn serve_batching_parameters(data: &[u8]) {
    let _limit = limit::scoped(MEMORY_LIMIT);
    let Ok(text) = std::str::from_utf8(data) else { return };
    match batch::parse_batching_parameters(text) {
        Ok(params) => {
            let _ = format!("{params:?}");
        }
        Err(e) => check_error(&e, data.len()),
    }
}

/// A `--model_config_file` (text-format `ModelServerConfig`). Its errors quote the file's
/// tokens; they are checked not to quote more than the file.
pub fn serve_model_config(data: &[u8]) {
    let _limit = limit::scoped(MEMORY_LIMIT);
    let Ok(text) = std::str::from_utf8(data) else { return };
    match config::parse_model_config(text) {
        Ok(models) => {
            let _ = format!("{models:?}");
        }
        Err(e) => check_error(&e, data.len()),
    }
}

/// A version's `assets.extra/tf_serving_warmup_requests`: its records read and decoded as
/// `PredictionLog`s, as a file (size known) and as a stream, and each request's input tensors
/// or examples built as the replay builds them (without a model to run them). The bytes are
/// also framed as one record with valid CRCs, so that mutations reach the decoder.
pub fn serve_warmup_records(data: &[u8]) {
    let _limit = limit::scoped(MEMORY_LIMIT);
    for len in [Some(data.len() as u64), None] {
        read_warmup(data, len);
    }
    let mut framed = Vec::with_capacity(data.len() + 16);
    if ferroflow::summary::record::write_record(&mut framed, data).is_ok() {
        read_warmup(&framed, Some(framed.len() as u64));
    }
}

fn read_warmup(data: &[u8], len: Option<u64>) {
    match manager::read_warmup_records(data, "fuzz", len, |log| {
        build_request(log);
        Ok(())
    }) {
        Ok(n) => assert!(n <= manager::MAX_WARMUP_RECORDS, "{n} warmup records read"),
        Err(e) => check_error(&e.message, 0),
    }
}

/// Builds what a warmup record's request feeds the model: its tensors or its examples.
fn build_request(log: LogType) {
    let examples = |input: Option<&ferroflow::proto::serving::Input>| {
        if let Err(e) = examples::from_input(input) {
            check_error(&e.message, 0);
        }
    };
    match log {
        LogType::PredictLog(l) => {
            for (key, proto) in l.request.unwrap_or_default().inputs {
                if let Err(e) = ferroflow::proto::convert::tensor_from_proto(&proto) {
                    check_error(&format!("input '{key}': {e}"), key.len());
                }
            }
        }
        LogType::ClassifyLog(l) => examples(l.request.unwrap_or_default().input.as_ref()),
        LogType::RegressLog(l) => examples(l.request.unwrap_or_default().input.as_ref()),
        LogType::MultiInferenceLog(l) => examples(l.request.unwrap_or_default().input.as_ref()),
    }
}
