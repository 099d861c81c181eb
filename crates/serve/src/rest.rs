//! The REST API: routing TensorFlow Serving's paths, reading bodies within the limit, running
//! predict requests on the blocking pool under the deadline, and the status and metadata JSON.
use std::io::Read as _;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ferroflow::proto::RunOptions;
use ferroflow::runtime::Cancellation;
use ferroflow::tensor::Tensor;
use ferroflow::train::saved_model::TensorSpec;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};

use crate::json;
use crate::manager::{Manager, Servable, Which};
use crate::ApiError;

/// How long a request body may take to arrive (a slow client's connection is dropped after).
const BODY_TIMEOUT: Duration = Duration::from_secs(60);

/// What the handlers share.
pub struct Shared {
    pub manager: Arc<Manager>,
    pub timeout: Option<Duration>,
    pub max_body: usize,
}

/// A parsed `/v1/models/...` path.
#[derive(Debug)]
struct Route {
    model: String,
    which: Which,
    metadata: bool,
    verb: Option<String>,
}

fn malformed(method: &Method, path: &str) -> ApiError {
    ApiError::invalid(format!("Malformed request: {method} {path}"))
}

/// `/v1/models/NAME[/versions/N | /labels/L][/metadata][:verb]`; keywords case-insensitive.
fn route(method: &Method, path: &str) -> Result<Route, ApiError> {
    let lower = path.to_ascii_lowercase();
    if !lower.starts_with("/v1/models/") {
        return Err(malformed(method, path));
    }
    let rest = &path["/v1/models/".len()..];
    let (rest, verb) = match rest.rsplit_once(':') {
        Some((r, v)) if !v.contains('/') => (r, Some(v.to_ascii_lowercase())),
        _ => (rest, None),
    };
    let segs: Vec<&str> = rest.split('/').collect();
    let model = segs[0].to_string();
    if model.is_empty() {
        return Err(malformed(method, path));
    }
    let mut which = Which::Latest;
    let mut metadata = false;
    let mut i = 1;
    let mut chosen = false;
    while i < segs.len() {
        match segs[i].to_ascii_lowercase().as_str() {
            "versions" | "labels" if !chosen && i + 1 < segs.len() && !metadata => {
                let value = segs[i + 1];
                which = if segs[i].eq_ignore_ascii_case("versions") {
                    Which::Version(value.parse().map_err(|_| malformed(method, path))?)
                } else if value.is_empty() {
                    return Err(malformed(method, path));
                } else {
                    Which::Label(value.to_string())
                };
                chosen = true;
                i += 2;
            }
            "metadata" if i + 1 == segs.len() && verb.is_none() => {
                metadata = true;
                i += 1;
            }
            _ => return Err(malformed(method, path)),
        }
    }
    Ok(Route { model, which, metadata, verb })
}

fn respond(status: u16, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("application/json"));
    r
}

fn error(e: ApiError) -> Response<Full<Bytes>> {
    respond(e.status, json!({ "error": e.message }).to_string())
}

/// Answers one request; never fails.
pub async fn handle(
    shared: Arc<Shared>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    if !path.to_ascii_lowercase().starts_with("/v1/") {
        let mut r = Response::new(Full::new(Bytes::new()));
        *r.status_mut() = StatusCode::NOT_FOUND;
        return Ok(r);
    }
    let answer = async {
        let route = route(&method, &path)?;
        match (&method, route.verb.as_deref(), route.metadata) {
            (&Method::GET, None, false) => status(&shared, &route),
            (&Method::GET, None, true) => metadata(&shared, &route),
            (&Method::POST, Some("predict"), false) => {
                let body = read_body(&shared, req).await?;
                predict(&shared, &route, body).await
            }
            (&Method::POST, Some(v @ ("classify" | "regress")), false) => {
                Err(ApiError::new(501, format!("the {v} API is not implemented yet by ferroflow serve (predict is)")))
            }
            _ => Err(malformed(&method, &path)),
        }
    }
    .await;
    Ok(match answer {
        Ok(body) => respond(200, body),
        Err(e) => {
            log::debug!("{method} {path}: {} {}", e.status, e.message);
            error(e)
        }
    })
}

/// The body, gzip-decoded when it says so, at most `max_body` bytes either way (413 past it).
async fn read_body(shared: &Shared, req: Request<Incoming>) -> Result<Bytes, ApiError> {
    let max = shared.max_body;
    let too_large = || ApiError::new(413, format!("the request body is larger than the limit of {max} bytes"));
    let length = req.headers().get(hyper::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if length.is_some_and(|n| n > max as u64) {
        return Err(too_large());
    }
    let gzip = req
        .headers()
        .get(hyper::header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("gzip"));
    let collect = Limited::new(req.into_body(), max).collect();
    let collected = tokio::time::timeout(BODY_TIMEOUT, collect).await.map_err(|_| {
        ApiError::new(408, format!("the request body did not arrive within {} s", BODY_TIMEOUT.as_secs()))
    })?;
    let body = match collected {
        Ok(c) => c.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => return Err(too_large()),
        Err(e) => return Err(ApiError::invalid(format!("reading the request body: {e}"))),
    };
    if !gzip {
        return Ok(body);
    }
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(&body[..])
        .take(max as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| ApiError::invalid(format!("the gzip body does not decode: {e}")))?;
    if out.len() > max {
        return Err(too_large());
    }
    Ok(Bytes::from(out))
}

fn version_json(v: i64) -> Value {
    Value::String(v.to_string())
}

fn status(shared: &Shared, route: &Route) -> Result<String, ApiError> {
    let list = shared.manager.status(&route.model, &route.which)?;
    let statuses: Vec<Value> = list
        .into_iter()
        .map(|(v, state, err)| {
            json!({
                "version": version_json(v),
                "state": state.name(),
                "status": {
                    "error_code": if err.is_some() { "UNKNOWN" } else { "OK" },
                    "error_message": err.unwrap_or_default(),
                }
            })
        })
        .collect();
    Ok(json!({ "model_version_status": statuses }).to_string())
}

fn tensor_info(spec: &TensorSpec) -> Value {
    let (dims, unknown_rank) = match spec.shape.dims() {
        Some(d) => {
            (d.iter().map(|x| json!({"size": x.map_or(-1, |n| n as i64).to_string(), "name": ""})).collect(), false)
        }
        None => (Vec::new(), true),
    };
    json!({
        "dtype": format!("DT_{}", dtype_name(spec.dtype)),
        "tensor_shape": {"dim": dims, "unknown_rank": unknown_rank},
        "name": spec.tensor,
    })
}

fn dtype_name(d: ferroflow::tensor::DType) -> &'static str {
    use ferroflow::tensor::DType::*;
    match d {
        Float => "FLOAT",
        Double => "DOUBLE",
        Int32 => "INT32",
        UInt8 => "UINT8",
        Int16 => "INT16",
        Int8 => "INT8",
        String => "STRING",
        Complex64 => "COMPLEX64",
        Int64 => "INT64",
        Bool => "BOOL",
        BFloat16 => "BFLOAT16",
        UInt16 => "UINT16",
        Complex128 => "COMPLEX128",
        Half => "HALF",
        Resource => "RESOURCE",
        Variant => "VARIANT",
        UInt32 => "UINT32",
        UInt64 => "UINT64",
    }
}

fn metadata(shared: &Shared, route: &Route) -> Result<String, ApiError> {
    let servable = shared.manager.resolve(&route.model, &route.which)?;
    let mut defs = serde_json::Map::new();
    for (name, sig) in servable.model.signatures() {
        let map = |specs: &[TensorSpec]| -> serde_json::Map<std::string::String, Value> {
            specs.iter().map(|s| (s.key.clone(), tensor_info(s))).collect()
        };
        defs.insert(
            name.clone(),
            json!({"inputs": map(&sig.inputs), "outputs": map(&sig.outputs), "method_name": sig.method_name}),
        );
    }
    Ok(json!({
        "model_spec": {"name": route.model, "signature_name": "", "version": version_json(servable.version)},
        "metadata": {"signature_def": {"signature_def": defs}},
    })
    .to_string())
}

async fn predict(shared: &Shared, route: &Route, body: Bytes) -> Result<String, ApiError> {
    let servable = shared.manager.resolve(&route.model, &route.which)?;
    let cancel = Cancellation::new();
    let timeout = shared.timeout;
    // Parsing, converting and running all block: they run on the blocking pool, under the
    // deadline, so the connection threads stay free.
    let task = {
        let cancel = cancel.clone();
        tokio::task::spawn_blocking(move || {
            let request = json::parse_body(&body)?;
            drop(body);
            let signature_name = match request.get("signature_name") {
                None => "serving_default",
                Some(Value::String(s)) => s.as_str(),
                Some(_) => return Err(ApiError::invalid("'signature_name' is not a string")),
            };
            run_predict(&servable, signature_name, &request, timeout, &cancel)
        })
    };
    let joined = match timeout {
        Some(t) => match tokio::time::timeout(t, task).await {
            Ok(j) => j,
            Err(_) => {
                cancel.cancel();
                return Err(ApiError::new(
                    504,
                    "Deadline exceeded: the model run took longer than rest_api_timeout_in_ms",
                ));
            }
        },
        None => task.await,
    };
    joined.map_err(|e| ApiError::internal(format!("the model run failed: {e}")))?
}

/// Converts, runs and writes one predict request (on the blocking pool).
fn run_predict(
    servable: &Servable,
    signature_name: &str,
    request: &Value,
    timeout: Option<Duration>,
    cancel: &Cancellation,
) -> Result<String, ApiError> {
    let model = &servable.model;
    let sig = model.signatures().get(signature_name).ok_or_else(|| {
        ApiError::invalid(format!(
            "Serving signature name: \"{signature_name}\" not found in signature def; it has: {}",
            model.signatures().keys().cloned().collect::<Vec<_>>().join(", ")
        ))
    })?;
    let (values, row) = json::request_inputs(request, &sig.inputs)?;
    let mut feeds: Vec<(&str, Tensor)> = Vec::with_capacity(values.len());
    for (spec, value) in sig.inputs.iter().zip(&values) {
        feeds.push((spec.tensor.as_str(), json::to_tensor(value, spec)?));
    }
    if row {
        let n = feeds.first().map(|(_, t)| t.dims().first().copied().unwrap_or(0));
        if feeds.iter().any(|(_, t)| t.dims().first().copied() != n) {
            return Err(ApiError::invalid("instances: the inputs have different numbers of rows"));
        }
    }
    let fetches: Vec<&str> = sig.outputs.iter().map(|s| s.tensor.as_str()).collect();
    let options = RunOptions {
        timeout_in_ms: timeout.map_or(0, |t| i64::try_from(t.as_millis()).unwrap_or(i64::MAX)),
        ..Default::default()
    };
    let outputs = model
        .session()
        .run_with(&feeds, &fetches, &[], &options, Some(cancel))
        .map_err(|e| {
            if cancel.is_cancelled() {
                ApiError::new(504, "Deadline exceeded")
            } else {
                ApiError::invalid(format!("the model run failed: {e}"))
            }
        })?
        .0;
    drop(feeds);
    let mut out = String::new();
    if row {
        out.push_str("{\"predictions\":");
        let rows = outputs.first().and_then(|t| t.dims().first().copied()).unwrap_or(0);
        for (spec, t) in sig.outputs.iter().zip(&outputs) {
            if t.dims().first().copied() != Some(rows) {
                return Err(ApiError::invalid(format!(
                    "output '{}' of shape {:?} does not have the same first dimension ({rows}) as the other outputs; use the columnar format ('inputs')",
                    spec.key,
                    t.dims()
                )));
            }
        }
        out.push('[');
        for r in 0..rows {
            if r > 0 {
                out.push(',');
            }
            if outputs.len() == 1 {
                json::write_row(&mut out, &outputs[0], r, &sig.outputs[0].key)?;
            } else {
                out.push('{');
                for (k, (spec, t)) in sig.outputs.iter().zip(&outputs).enumerate() {
                    if k > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(spec.key.clone()).to_string());
                    out.push(':');
                    json::write_row(&mut out, t, r, &spec.key)?;
                }
                out.push('}');
            }
        }
        out.push_str("]}");
    } else {
        out.push_str("{\"outputs\":");
        if outputs.len() == 1 {
            json::write_tensor(&mut out, &outputs[0], &sig.outputs[0].key)?;
        } else {
            out.push('{');
            for (k, (spec, t)) in sig.outputs.iter().zip(&outputs).enumerate() {
                if k > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(spec.key.clone()).to_string());
                out.push(':');
                json::write_tensor(&mut out, t, &spec.key)?;
            }
            out.push('}');
        }
        out.push('}');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        let r = route(&Method::POST, "/v1/models/m/versions/3:predict").unwrap();
        assert_eq!(r.model, "m");
        assert!(matches!(r.which, Which::Version(3)));
        assert_eq!(r.verb.as_deref(), Some("predict"));
        let r = route(&Method::GET, "/V1/Models/m/Labels/stable/METADATA").unwrap();
        assert!(matches!(r.which, Which::Label(ref l) if l == "stable"));
        assert!(r.metadata);
        assert!(route(&Method::GET, "/v1/models/m/versions/1/labels/x").is_err());
        assert!(route(&Method::GET, "/v1/models/m/versions/x").is_err());
        assert!(route(&Method::GET, "/v1/models/").is_err());
        assert!(route(&Method::GET, "/v1/other").is_err());
    }
}
