//! A served version and the calls on it that the REST API, the gRPC API and warmup share: predict,
//! classify and regress on tensors (each API converts its own wire format to and from them),
//! and on TensorFlow Serving's request messages. Predict goes through the batcher when batching
//! is on.
use std::sync::Arc;
use std::time::Duration;

use std::collections::BTreeMap;

use ferroflow::proto::convert::{tensor_from_proto, tensor_to_proto};
use ferroflow::proto::serving::model_spec::VersionChoice;
use ferroflow::proto::serving::{
    inference_result, Class, ClassificationResult, Classifications, Input, Int64Value, ModelSpec, PredictResponse,
    Regression, RegressionResult,
};
use ferroflow::proto::RunOptions;
use ferroflow::proto::TensorProto;
use ferroflow::runtime::Cancellation;
use ferroflow::status::Code;
use ferroflow::tensor::{DType, Tensor};
use ferroflow::train::saved_model::{SavedModel, Signature};

use crate::batch::{Batcher, RunFn};
use crate::{examples, ApiError};

/// A loaded version.
pub struct Servable {
    /// The model's name.
    pub name: String,
    /// Its version number.
    pub version: i64,
    /// The SavedModel.
    pub model: SavedModel,
}

/// The method name of classification signatures.
pub const CLASSIFY_METHOD: &str = "tensorflow/serving/classify";
/// The method name of regression signatures.
pub const REGRESS_METHOD: &str = "tensorflow/serving/regress";

/// The signature a request names when it names none.
pub const DEFAULT_SIGNATURE: &str = "serving_default";

/// The signature `name` of a servable, or FAILED_PRECONDITION (as TensorFlow Serving).
pub fn signature_of<'a>(servable: &'a Servable, name: &str) -> Result<&'a Signature, ApiError> {
    let name = if name.is_empty() { DEFAULT_SIGNATURE } else { name };
    servable.model.signatures().get(name).ok_or_else(|| {
        ApiError::precondition(format!(
            "Serving signature name: \"{name}\" not found in signature def; it has: {}",
            servable.model.signatures().keys().cloned().collect::<Vec<_>>().join(", ")
        ))
    })
}

fn set_of<'a>(names: impl Iterator<Item = &'a str>) -> String {
    format!("{{{}}}", names.collect::<Vec<_>>().join(", "))
}

/// Runs the graph: `feeds` by tensor name, the outputs of `fetches` (tensor names).
fn run_session(
    servable: &Servable,
    feeds: &[(&str, Tensor)],
    fetches: &[&str],
    timeout: Option<Duration>,
    cancel: Option<&Cancellation>,
) -> Result<Vec<Tensor>, ApiError> {
    let options = RunOptions {
        timeout_in_ms: timeout.map_or(0, |t| i64::try_from(t.as_millis()).unwrap_or(i64::MAX)),
        ..Default::default()
    };
    match servable.model.session().run_with(feeds, fetches, &[], &options, cancel) {
        Ok((outputs, _)) => Ok(outputs),
        Err(_) if cancel.is_some_and(Cancellation::is_cancelled) => {
            Err(ApiError::coded(Code::DeadlineExceeded, "Deadline exceeded"))
        }
        Err(e) => Err(ApiError::from_error(&e)),
    }
}

/// Runs a predict request: `inputs` by alias (each signature input exactly once), the outputs
/// by alias (all of the signature's, or those of `output_filter`, in its order).
pub fn predict(
    batcher: Option<&Batcher>,
    servable: &Arc<Servable>,
    sig: &Signature,
    inputs: Vec<(String, Tensor)>,
    output_filter: &[String],
    timeout: Option<Duration>,
    cancel: &Cancellation,
) -> Result<Vec<(String, Tensor)>, ApiError> {
    let given = |k: &str| inputs.iter().any(|(a, _)| a == k);
    let expected = |k: &str| sig.inputs.iter().any(|s| s.key == k);
    if inputs.len() != sig.inputs.len() || sig.inputs.iter().any(|s| !given(&s.key)) {
        return Err(ApiError::invalid(format!(
            "input size does not match signature: {}!={} len({}) != len({}). Sent extra: {}. Missing but required: {}.",
            inputs.len(),
            sig.inputs.len(),
            set_of(inputs.iter().map(|(k, _)| k.as_str())),
            set_of(sig.inputs.iter().map(|s| s.key.as_str())),
            set_of(inputs.iter().map(|(k, _)| k.as_str()).filter(|k| !expected(k))),
            set_of(sig.inputs.iter().map(|s| s.key.as_str()).filter(|k| !given(k))),
        )));
    }
    let mut feeds: Vec<(String, Tensor)> = Vec::with_capacity(inputs.len());
    for (i, spec) in sig.inputs.iter().enumerate() {
        let t = inputs.iter().find(|(k, _)| *k == spec.key).map(|(_, t)| t.clone()).expect("checked above");
        if t.dtype() != spec.dtype {
            return Err(ApiError::invalid(format!(
                "Expects arg[{i}] ('{}') to be {} but {} is provided",
                spec.key,
                spec.dtype.python_name(),
                t.dtype().python_name()
            )));
        }
        if let Some(dims) = spec.shape.dims() {
            let fits = dims.len() == t.rank() && dims.iter().zip(t.dims()).all(|(d, n)| d.is_none_or(|d| d == *n));
            if !fits {
                return Err(ApiError::invalid(format!(
                    "input '{}' has shape {:?}, but the signature wants {}",
                    spec.key,
                    t.dims(),
                    spec.shape.spec(spec.dtype)
                )));
            }
        }
        feeds.push((spec.tensor.clone(), t));
    }
    drop(inputs);
    let mut outputs = Vec::new();
    for (k, name) in output_filter.iter().enumerate() {
        if output_filter[..k].contains(name) {
            return Err(ApiError::invalid(format!("duplicate output tensor alias: {name}")));
        }
        let spec = sig.outputs.iter().find(|s| s.key == *name).ok_or_else(|| {
            ApiError::invalid(format!(
                "output tensor alias not found in signature: {name} Outputs expected to be in the set {}.",
                set_of(sig.outputs.iter().map(|s| s.key.as_str()))
            ))
        })?;
        outputs.push(spec);
    }
    if output_filter.is_empty() {
        outputs = sig.outputs.iter().collect();
    }
    let aliases: Vec<String> = outputs.iter().map(|s| s.key.clone()).collect();
    let fetches: Vec<String> = outputs.iter().map(|s| s.tensor.clone()).collect();
    let batchable = feeds.iter().all(|(_, t)| t.rank() > 0);
    let run = {
        let servable = servable.clone();
        move |feeds: Vec<(String, Tensor)>,
              timeout: Option<Duration>,
              cancel: Option<&Cancellation>|
              -> Result<Vec<(String, Tensor)>, ApiError> {
            let feeds: Vec<(&str, Tensor)> = feeds.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
            let fetches: Vec<&str> = fetches.iter().map(String::as_str).collect();
            let out = run_session(&servable, &feeds, &fetches, timeout, cancel)?;
            Ok(aliases.iter().cloned().zip(out).collect())
        }
    };
    match batcher {
        Some(batcher) if batchable => {
            let key = format!(
                "{}\u{0}{}\u{0}{}\u{0}{}\u{0}{}",
                servable.name,
                servable.version,
                sig.name,
                feeds.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(","),
                outputs.iter().map(|s| s.key.as_str()).collect::<Vec<_>>().join(",")
            );
            let run: RunFn = Arc::new(move |feeds| run(feeds, None, None));
            batcher.submit(&key, &run, feeds)
        }
        _ => run(feeds, timeout, Some(cancel)),
    }
}

/// Checks that `sig` is of `method` and has one string input; its tensor name.
fn example_input<'a>(sig: &'a Signature, method: &str, what: &str) -> Result<&'a str, ApiError> {
    if sig.method_name != method {
        return Err(ApiError::invalid(format!(
            "Expected {what} signature method_name to be {method}. Was: {}",
            sig.method_name
        )));
    }
    match sig.inputs.as_slice() {
        [one] if one.dtype == DType::String => Ok(&one.tensor),
        _ => Err(ApiError::invalid(format!(
            "Expected one input Tensor of type string in the {what} signature '{}'",
            sig.name
        ))),
    }
}

fn serialized(examples: Vec<Vec<u8>>) -> Result<Tensor, ApiError> {
    if examples.is_empty() {
        return Err(ApiError::invalid("Input is empty"));
    }
    let n = examples.len();
    Tensor::from_strings(&[n], examples).map_err(|e| ApiError::from_error(&e))
}

/// Runs a classification signature on serialized `tf.Example`s.
pub fn classify(
    servable: &Servable,
    sig: &Signature,
    examples: Vec<Vec<u8>>,
    timeout: Option<Duration>,
    cancel: &Cancellation,
) -> Result<ClassificationResult, ApiError> {
    let input = example_input(sig, CLASSIFY_METHOD, "classification")?;
    let n = examples.len();
    let classes = sig.outputs.iter().find(|s| s.key == "classes");
    let scores = sig.outputs.iter().find(|s| s.key == "scores");
    if classes.is_none() && scores.is_none() {
        return Err(ApiError::invalid(format!(
            "The classification signature '{}' has neither a 'classes' nor a 'scores' output",
            sig.name
        )));
    }
    let fetches: Vec<&str> = classes.iter().chain(scores.iter()).map(|s| s.tensor.as_str()).collect();
    let out = run_session(servable, &[(input, serialized(examples)?)], &fetches, timeout, Some(cancel))?;
    let mut out = out.into_iter();
    let classes = classes.map(|_| out.next().expect("one output per fetch"));
    let scores = scores.map(|_| out.next().expect("one output per fetch"));
    let width = |t: &Tensor, what: &str, dtype: DType| -> Result<usize, ApiError> {
        match t.dims() {
            [rows, k] if *rows == n && t.dtype() == dtype => Ok(*k),
            _ => Err(ApiError::invalid(format!(
                "Expected {what} Tensor of DataType {} and shape [{n}, num_classes] but got {} of shape {:?}",
                dtype.python_name(),
                t.dtype().python_name(),
                t.dims()
            ))),
        }
    };
    let kc = classes.as_ref().map(|t| width(t, "classes", DType::String)).transpose()?;
    let ks = scores.as_ref().map(|t| width(t, "scores", DType::Float)).transpose()?;
    if let (Some(a), Some(b)) = (kc, ks) {
        if a != b {
            return Err(ApiError::invalid(format!("Tensors class and score should match in dim[1]: {a} vs. {b}")));
        }
    }
    let k = kc.or(ks).unwrap_or(0);
    let labels = classes.as_ref().map(|t| t.as_strings()).transpose().map_err(|e| ApiError::from_error(&e))?;
    let values = scores.as_ref().map(|t| t.as_slice::<f32>()).transpose().map_err(|e| ApiError::from_error(&e))?;
    let classifications = (0..n)
        .map(|i| Classifications {
            classes: (0..k)
                .map(|j| Class {
                    label: labels.map(|l| String::from_utf8_lossy(&l[i * k + j]).into_owned()).unwrap_or_default(),
                    score: values.map_or(0.0, |v| v[i * k + j]),
                })
                .collect(),
        })
        .collect();
    Ok(ClassificationResult { classifications })
}

/// Runs a regression signature on serialized `tf.Example`s.
pub fn regress(
    servable: &Servable,
    sig: &Signature,
    examples: Vec<Vec<u8>>,
    timeout: Option<Duration>,
    cancel: &Cancellation,
) -> Result<RegressionResult, ApiError> {
    let input = example_input(sig, REGRESS_METHOD, "regression")?;
    let n = examples.len();
    let output =
        sig.outputs.iter().find(|s| s.key == "outputs").ok_or_else(|| {
            ApiError::invalid(format!("The regression signature '{}' has no 'outputs' output", sig.name))
        })?;
    let out = run_session(servable, &[(input, serialized(examples)?)], &[&output.tensor], timeout, Some(cancel))?;
    let t = &out[0];
    let fits = matches!(t.dims(), [rows] | [rows, 1] if *rows == n) && t.dtype() == DType::Float;
    if !fits {
        return Err(ApiError::invalid(format!(
            "Expected output Tensor of DataType float and shape [{n}] or [{n}, 1] but got {} of shape {:?}",
            t.dtype().python_name(),
            t.dims()
        )));
    }
    let values = t.as_slice::<f32>().map_err(|e| ApiError::from_error(&e))?;
    Ok(RegressionResult { regressions: values.iter().map(|&value| Regression { value }).collect() })
}

/// The spec of what answered: the model, the version and the signature.
pub fn answered(servable: &Servable, signature: &str) -> ModelSpec {
    ModelSpec {
        name: servable.name.clone(),
        version_choice: Some(VersionChoice::Version(Int64Value { value: servable.version })),
        signature_name: signature.to_string(),
    }
}

/// A predict request's inputs as `TensorProto`s: the outputs as `TensorProto`s and the spec of
/// what answered.
pub fn predict_protos(
    batcher: Option<&Batcher>,
    servable: &Arc<Servable>,
    signature: &str,
    inputs: BTreeMap<String, TensorProto>,
    output_filter: &[String],
    timeout: Option<Duration>,
    cancel: &Cancellation,
) -> Result<PredictResponse, ApiError> {
    let sig = signature_of(servable, signature)?;
    let mut tensors: Vec<(String, Tensor)> = Vec::with_capacity(inputs.len());
    for (key, proto) in &inputs {
        let t = tensor_from_proto(proto).map_err(|e| ApiError::invalid(format!("input '{key}': {e}")))?;
        tensors.push((key.clone(), t));
    }
    drop(inputs);
    let outputs = predict(batcher, servable, sig, tensors, output_filter, timeout, cancel)?;
    Ok(PredictResponse {
        outputs: outputs.iter().map(|(k, t)| (k.clone(), tensor_to_proto(t))).collect(),
        model_spec: Some(answered(servable, &sig.name)),
    })
}

/// Classifies or regresses the examples of a request's `Input`: the result and the spec of what
/// answered.
pub fn infer_input(
    servable: &Servable,
    signature: &str,
    input: Option<&Input>,
    classify: bool,
    timeout: Option<Duration>,
    cancel: &Cancellation,
) -> Result<(ModelSpec, inference_result::Result), ApiError> {
    // TensorFlow Serving's classifier and regressor answer an unknown signature with
    // INVALID_ARGUMENT (predict with FAILED_PRECONDITION).
    let sig = signature_of(servable, signature).map_err(|e| ApiError::invalid(e.message))?;
    let examples = examples::from_input(input)?;
    let result = if classify {
        inference_result::Result::ClassificationResult(self::classify(servable, sig, examples, timeout, cancel)?)
    } else {
        inference_result::Result::RegressionResult(regress(servable, sig, examples, timeout, cancel)?)
    };
    Ok((answered(servable, &sig.name), result))
}
