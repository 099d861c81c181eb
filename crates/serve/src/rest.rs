//! The REST API: routing TensorFlow Serving's paths, reading bodies within the limit, the
//! JSON of predict, classify and regress requests (run by [`crate::service`]), and the status
//! and metadata JSON.
use std::io::Read as _;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ferroflow::tensor::Tensor;
use ferroflow::train::saved_model::Signature;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};

use crate::manager::Which;
use crate::service::{self, Servable};
use crate::shared::{blocking, Shared};
use crate::{examples, json, ApiError};

/// How long a request body may take to arrive (a slow client's connection is dropped after).
const BODY_TIMEOUT: Duration = Duration::from_secs(60);

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
                let classify = v == "classify";
                let body = read_body(&shared, req).await?;
                infer(&shared, &route, body, classify).await
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

/// The body, at most `max_body` bytes (413 past it).
async fn read_body(shared: &Shared, req: Request<Incoming>) -> Result<Body, ApiError> {
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
    Ok(Body { bytes: body, gzip, max })
}

/// A request body as it arrived; gzip is decoded by [`Body::decoded`] in the request's work, so
/// a large (or hostile) compressed body does not hold up the connection threads.
struct Body {
    bytes: Bytes,
    gzip: bool,
    max: usize,
}

impl Body {
    /// The body, gzip-decoded when it says so, at most `max` bytes (413 past it).
    fn decoded(self) -> Result<Bytes, ApiError> {
        if !self.gzip {
            return Ok(self.bytes);
        }
        let max = self.max;
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&self.bytes[..])
            .take(max as u64 + 1)
            .read_to_end(&mut out)
            .map_err(|e| ApiError::invalid(format!("the gzip body does not decode: {e}")))?;
        if out.len() > max {
            return Err(ApiError::new(413, format!("the request body is larger than the limit of {max} bytes")));
        }
        Ok(Bytes::from(out))
    }
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
                    "error_code": err.as_ref().map_or("OK", |(code, _)| code.name()),
                    "error_message": err.map(|(_, m)| m).unwrap_or_default(),
                }
            })
        })
        .collect();
    Ok(json!({ "model_version_status": statuses }).to_string())
}

/// A `TensorInfo` in TensorFlow Serving's JSON (proto field names, int64s as strings).
fn tensor_info(info: &ferroflow::proto::TensorInfo) -> Value {
    use ferroflow::proto::tensor_info::Encoding;
    let shape = info.tensor_shape.clone().unwrap_or_default();
    let dims: Vec<Value> = shape.dim.iter().map(|d| json!({"size": d.size.to_string(), "name": d.name})).collect();
    let dtype = ferroflow::tensor::DType::from_tf(info.dtype)
        .map_or("DT_INVALID".to_string(), |d| format!("DT_{}", dtype_name(d)));
    let mut out = json!({"dtype": dtype, "tensor_shape": {"dim": dims, "unknown_rank": shape.unknown_rank}});
    match &info.encoding {
        Some(Encoding::Name(n)) => out["name"] = json!(n),
        Some(Encoding::CooSparse(c)) => {
            out["coo_sparse"] = json!({
                "values_tensor_name": c.values_tensor_name,
                "indices_tensor_name": c.indices_tensor_name,
                "dense_shape_tensor_name": c.dense_shape_tensor_name,
            })
        }
        None => {}
    }
    out
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
    for (name, def) in servable.model.signature_defs() {
        let map =
            |m: &std::collections::BTreeMap<String, ferroflow::proto::TensorInfo>| -> serde_json::Map<String, Value> {
                m.iter().map(|(k, i)| (k.clone(), tensor_info(i))).collect()
            };
        defs.insert(
            name.clone(),
            json!({"inputs": map(&def.inputs), "outputs": map(&def.outputs), "method_name": def.method_name}),
        );
    }
    Ok(json!({
        "model_spec": {"name": route.model, "signature_name": "", "version": version_json(servable.version)},
        "metadata": {"signature_def": {"signature_def": defs}},
    })
    .to_string())
}

/// The request's `signature_name` (`serving_default` when absent).
fn signature_name(request: &Value) -> Result<&str, ApiError> {
    match request.get("signature_name") {
        None => Ok(service::DEFAULT_SIGNATURE),
        Some(Value::String(s)) => Ok(s.as_str()),
        Some(_) => Err(ApiError::invalid("'signature_name' is not a string")),
    }
}

async fn predict(shared: &Arc<Shared>, route: &Route, body: Body) -> Result<String, ApiError> {
    let servable = shared.manager.resolve(&route.model, &route.which)?;
    blocking(shared, None, move |shared, cancel, timeout| {
        let body = body.decoded()?;
        let (inputs, row, sig) = match predict_inputs_fast(&servable, &body) {
            Some(fast) => fast,
            None => predict_inputs(&servable, &body)?,
        };
        drop(body);
        let outputs = service::predict(shared.batcher.as_ref(), &servable, sig, inputs, &[], timeout, cancel)?;
        write_predict(&outputs, row)
    })
    .await
}

type PredictInputs<'a> = (Vec<(String, Tensor)>, bool, &'a Signature);

/// The inputs of a body [`json::parse_fast`] reads, for a signature of one float input.
fn predict_inputs_fast<'a>(servable: &'a Servable, body: &[u8]) -> Option<PredictInputs<'a>> {
    let fast = json::parse_fast(body)?;
    let name = fast.signature_name.as_deref().unwrap_or(service::DEFAULT_SIGNATURE);
    let sig = service::signature_of(servable, name).ok()?;
    let [spec] = sig.inputs.as_slice() else { return None };
    let t = json::fast_tensor(&fast, spec)?;
    Some((vec![(spec.key.clone(), t)], fast.row, sig))
}

/// The inputs of any predict body, through a JSON tree.
fn predict_inputs<'a>(servable: &'a Servable, body: &[u8]) -> Result<PredictInputs<'a>, ApiError> {
    let request = json::parse_body(body)?;
    let sig = service::signature_of(servable, signature_name(&request)?)?;
    let (values, row) = json::request_inputs(request, &sig.inputs)?;
    let mut inputs: Vec<(String, Tensor)> = Vec::with_capacity(values.len());
    for (spec, value) in sig.inputs.iter().zip(&values) {
        inputs.push((spec.key.clone(), json::to_tensor(value, spec)?));
    }
    if row {
        let n = inputs.first().map(|(_, t)| t.dims().first().copied().unwrap_or(0));
        if inputs.iter().any(|(_, t)| t.dims().first().copied() != n) {
            return Err(ApiError::invalid("instances: the inputs have different numbers of rows"));
        }
    }
    Ok((inputs, row, sig))
}

/// `{"predictions": [row, ...]}` (a row is an object by alias with several outputs) or
/// `{"outputs": value}` (an object by alias with several outputs).
fn write_predict(outputs: &[(String, Tensor)], row: bool) -> Result<String, ApiError> {
    // One output is written bare; several as an object keyed by alias, in signature order.
    fn write_all(
        out: &mut String,
        outputs: &[(String, Tensor)],
        write: impl Fn(&mut String, &Tensor, &str) -> Result<(), ApiError>,
    ) -> Result<(), ApiError> {
        if let [(alias, t)] = outputs {
            return write(out, t, alias);
        }
        out.push('{');
        for (k, (alias, t)) in outputs.iter().enumerate() {
            if k > 0 {
                out.push(',');
            }
            out.push_str(&Value::String(alias.clone()).to_string());
            out.push(':');
            write(out, t, alias)?;
        }
        out.push('}');
        Ok(())
    }
    let mut out = String::new();
    if !row {
        out.push_str("{\"outputs\":");
        write_all(&mut out, outputs, json::write_tensor)?;
        out.push('}');
        return Ok(out);
    }
    let rows = outputs.first().and_then(|(_, t)| t.dims().first().copied()).unwrap_or(0);
    for (alias, t) in outputs {
        if t.dims().first().copied() != Some(rows) {
            return Err(ApiError::invalid(format!(
                "output '{alias}' of shape {:?} does not have the same first dimension ({rows}) as the other outputs; use the columnar format ('inputs')",
                t.dims()
            )));
        }
    }
    out.push_str("{\"predictions\":[");
    for r in 0..rows {
        if r > 0 {
            out.push(',');
        }
        write_all(&mut out, outputs, |out, t, alias| json::write_row(out, t, r, alias))?;
    }
    out.push_str("]}");
    Ok(out)
}

/// A classify or regress request: `{"results": [[[label, score], ...], ...]}` or
/// `{"results": [value, ...]}`.
async fn infer(shared: &Arc<Shared>, route: &Route, body: Body, classify: bool) -> Result<String, ApiError> {
    let servable = shared.manager.resolve(&route.model, &route.which)?;
    blocking(shared, None, move |_, cancel, timeout| {
        let body = body.decoded()?;
        let request = json::parse_body(&body)?;
        drop(body);
        let sig =
            service::signature_of(&servable, signature_name(&request)?).map_err(|e| ApiError::invalid(e.message))?;
        let examples = examples::from_json(&request)?;
        drop(request);
        let float = |x: f32| json::format_float(f64::from(x), true);
        let results: Vec<String> = if classify {
            let result = service::classify(&servable, sig, examples, timeout, cancel)?;
            result
                .classifications
                .iter()
                .map(|c| {
                    let pairs: Vec<String> = c
                        .classes
                        .iter()
                        .map(|k| format!("[{},{}]", Value::String(k.label.clone()), float(k.score)))
                        .collect();
                    format!("[{}]", pairs.join(","))
                })
                .collect()
        } else {
            let result = service::regress(&servable, sig, examples, timeout, cancel)?;
            result.regressions.iter().map(|r| float(r.value)).collect()
        };
        Ok(format!("{{\"results\":[{}]}}", results.join(",")))
    })
    .await
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
