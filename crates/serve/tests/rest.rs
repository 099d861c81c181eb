//! The REST API end to end: SavedModels written by ferroflow's own writer, a server on an
//! ephemeral port in-process, raw HTTP/1.1 over TcpStream.
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use ferroflow::tensor::Tensor;
use ferroflow::train::saved_model::SavedModel;
use ferroflow_serve::{parse_model_config, ModelConfig, ServeOptions, Server, ServerHandle, VersionPolicy};
use serde_json::{json, Value};

mod common;
use common::{copy_dir, scores, write_model};

struct Reply {
    status: u16,
    body: String,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

fn raw(addr: SocketAddr, request: &[u8]) -> Reply {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let _ = s.write_all(request);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Reply { status, body }
}

fn request(addr: SocketAddr, method: &str, path: &str, body: &str) -> Reply {
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    raw(addr, req.as_bytes())
}

fn post(addr: SocketAddr, path: &str, body: &str) -> Reply {
    request(addr, "POST", path, body)
}

fn get(addr: SocketAddr, path: &str) -> Reply {
    request(addr, "GET", path, "")
}

fn start(base: &Path, options: ServeOptions) -> ServerHandle {
    let options = options.with_model(ModelConfig::new("m", base)).with_rest_port(0).with_poll_wait_seconds(0);
    Server::start(options.with_load_retries(0, Duration::ZERO)).unwrap()
}

fn one_version() -> (tempfile::TempDir, ServerHandle) {
    let dir = tempfile::tempdir().unwrap();
    write_model(&dir.path().join("1"), 1.0);
    let server = start(dir.path(), ServeOptions::new());
    (dir, server)
}

#[test]
fn predict_row_and_columnar_match_the_signature_run_directly() {
    let (dir, server) = one_version();
    let addr = server.rest_addr().unwrap();
    let x = [[1.0f32, 2.0, 3.0], [0.5, -1.0, 0.25]];
    let model = SavedModel::load(&dir.path().join("1"), &["serve"], Default::default()).unwrap();
    let flat: Vec<f32> = x.iter().flatten().copied().collect();
    let direct = model.call("serving_default", &[("x", Tensor::from_vec(&[2, 3], flat).unwrap())], &[]).unwrap();
    let want: Vec<f32> = direct["scores"].as_slice::<f32>().unwrap().to_vec();
    assert_eq!(want, scores(&x, 1.0).concat());

    let row = post(addr, "/v1/models/m:predict", &json!({"instances": x}).to_string());
    assert_eq!(row.status, 200, "{}", row.body);
    assert_eq!(row.body, r#"{"predictions":[[5.0,5.0],[1.75,-0.75]]}"#);
    let col = post(addr, "/v1/models/m/versions/1:predict", &json!({"inputs": {"x": x}}).to_string());
    assert_eq!(col.status, 200, "{}", col.body);
    assert_eq!(col.body, r#"{"outputs":[[5.0,5.0],[1.75,-0.75]]}"#);
    let bare = post(addr, "/v1/models/m:predict", &json!({"inputs": x}).to_string());
    assert_eq!(bare.body, col.body);
    let named_rows = post(addr, "/v1/models/m:predict", &json!({"instances": [{"x": x[0]}, {"x": x[1]}]}).to_string());
    assert_eq!(named_rows.body, row.body);

    // Several inputs and outputs: rows as objects; columnar as an object of outputs.
    let two = post(
        addr,
        "/v1/models/m:predict",
        r#"{"signature_name": "two", "instances": [{"a": [1, 2, 3.5], "n": 4}, {"a": [0, 0, NaN], "n": -1}]}"#,
    );
    assert_eq!(two.status, 200, "{}", two.body);
    assert_eq!(two.body, r#"{"predictions":[{"n2":8,"sum":[2.0,4.0,7.0]},{"n2":-2,"sum":[0.0,0.0,NaN]}]}"#);
    let two = post(
        addr,
        "/v1/models/m:predict",
        r#"{"signature_name": "two", "inputs": {"a": [[Infinity, 0.1, 1e-7]], "n": [1, 2, 3]}}"#,
    );
    assert_eq!(two.status, 200, "{}", two.body);
    assert_eq!(two.body, r#"{"outputs":{"n2":[2,4,6],"sum":[[Infinity,0.2,2e-07]]}}"#);

    // Strings: raw, or base64 for aliases ending _bytes; {"b64": ...} accepted on input.
    let text =
        post(addr, "/v1/models/m:predict", r#"{"signature_name": "text", "instances": ["hi", {"b64": "AP8="}]}"#);
    assert_eq!(text.status, 200, "{}", text.body);
    assert_eq!(
        text.json(),
        json!({"predictions": [{"s_bytes": {"b64": "aGk="}, "s_text": "hi"}, {"s_bytes": {"b64": "AP8="}, "s_text": "\u{0}\u{fffd}"}]})
    );
    drop(server);
}

#[test]
fn status_and_metadata_are_tensorflow_servings_json() {
    let (_dir, server) = one_version();
    let addr = server.rest_addr().unwrap();
    let status = get(addr, "/v1/models/m");
    assert_eq!(status.status, 200);
    assert_eq!(
        status.json(),
        json!({"model_version_status": [{"version": "1", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}]})
    );
    assert_eq!(get(addr, "/v1/models/m/versions/1").json(), status.json());
    let meta = get(addr, "/v1/models/m/metadata");
    assert_eq!(meta.status, 200, "{}", meta.body);
    let meta = meta.json();
    assert_eq!(meta["model_spec"], json!({"name": "m", "signature_name": "", "version": "1"}));
    let sig = &meta["metadata"]["signature_def"]["signature_def"]["serving_default"];
    assert_eq!(sig["method_name"], "tensorflow/serving/predict");
    assert_eq!(
        sig["inputs"]["x"],
        json!({"dtype": "DT_FLOAT", "tensor_shape": {"dim": [{"size": "-1", "name": ""}, {"size": "3", "name": ""}], "unknown_rank": false}, "name": "x:0"})
    );
    assert_eq!(sig["outputs"]["scores"]["dtype"], "DT_FLOAT");
    let defs = meta["metadata"]["signature_def"]["signature_def"].as_object().unwrap();
    assert_eq!(defs.keys().collect::<Vec<_>>(), ["fail", "serving_default", "text", "two"]);
    assert_eq!(get(addr, "/v1/models/m/versions/1/metadata").json(), meta);
}

#[test]
fn hostile_requests_get_errors_and_the_server_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    write_model(&dir.path().join("1"), 1.0);
    let server = start(dir.path(), ServeOptions::new().with_max_body_bytes(4096));
    let addr = server.rest_addr().unwrap();
    let good = || {
        let r = post(addr, "/v1/models/m:predict", r#"{"instances": [[1, 2, 3]]}"#);
        assert_eq!((r.status, r.body.as_str()), (200, r#"{"predictions":[[5.0,5.0]]}"#));
    };
    let huge = format!(r#"{{"instances": [[{}]]}}"#, vec!["1.0"; 4000].join(","));
    let cases: Vec<(&str, &str, String, u16)> = vec![
        ("POST", "/v1/models/m:predict", "{not json".into(), 400),
        ("POST", "/v1/models/m:predict", "[1, 2]".into(), 400),
        ("POST", "/v1/models/m:predict", r#"{"instances": []}"#.into(), 400),
        ("POST", "/v1/models/m:predict", r#"{"foo": 1}"#.into(), 400),
        ("POST", "/v1/models/m:predict", r#"{"instances": [[1, 2, 3]], "inputs": [[1, 2, 3]]}"#.into(), 400),
        ("POST", "/v1/models/m:predict", r#"{"instances": [[1, 2]]}"#.into(), 400),
        ("POST", "/v1/models/m:predict", r#"{"instances": [[1, 2, 3], [1, 2]]}"#.into(), 400),
        ("POST", "/v1/models/m:predict", r#"{"instances": [1, 2, 3]}"#.into(), 400),
        ("POST", "/v1/models/m:predict", r#"{"instances": [["a", "b", "c"]]}"#.into(), 400),
        ("POST", "/v1/models/m:predict", r#"{"instances": [[[1], [2], [3]]]}"#.into(), 400),
        (
            "POST",
            "/v1/models/m:predict",
            r#"{"signature_name": "two", "inputs": {"a": [[1, 2, 3]], "n": [1.5]}}"#.into(),
            400,
        ),
        (
            "POST",
            "/v1/models/m:predict",
            r#"{"signature_name": "two", "inputs": {"a": [[1, 2, 3]], "n": [9999999999]}}"#.into(),
            400,
        ),
        ("POST", "/v1/models/m:predict", r#"{"signature_name": "two", "inputs": {"a": [[1, 2, 3]]}}"#.into(), 400),
        (
            "POST",
            "/v1/models/m:predict",
            r#"{"signature_name": "two", "instances": [{"a": [1, 2, 3], "n": 1}, {"a": [1, 2, 3]}]}"#.into(),
            400,
        ),
        ("POST", "/v1/models/m:predict", r#"{"signature_name": "nope", "instances": [[1, 2, 3]]}"#.into(), 400),
        ("POST", "/v1/models/m:predict", r#"{"signature_name": 7, "instances": [[1, 2, 3]]}"#.into(), 400),
        ("POST", "/v1/models/m:predict", r#"{"signature_name": "text", "instances": [{"b64": "!!"}]}"#.into(), 400),
        ("POST", "/v1/models/m:predict", r#"{"signature_name": "fail", "instances": [0, 7]}"#.into(), 400),
        ("POST", "/v1/models/nope:predict", r#"{"instances": [[1, 2, 3]]}"#.into(), 404),
        ("POST", "/v1/models/m/versions/9:predict", r#"{"instances": [[1, 2, 3]]}"#.into(), 404),
        ("POST", "/v1/models/m/labels/none:predict", r#"{"instances": [[1, 2, 3]]}"#.into(), 400),
        ("POST", "/v1/models/m:classify", r#"{"examples": []}"#.into(), 400),
        ("POST", "/v1/models/m:regress", r#"{"examples": [{"a": 1}]}"#.into(), 400),
        ("POST", "/v1/models/m:explode", "{}".into(), 400),
        ("GET", "/v1/models/m/versions/x", String::new(), 400),
        ("GET", "/v1/models/nope", String::new(), 404),
        ("GET", "/v1/models/m/versions/5", String::new(), 404),
        ("GET", "/v1/elsewhere", String::new(), 400),
        ("POST", "/v1/models/m:predict", huge, 413),
    ];
    for (method, path, body, status) in &cases {
        let r = request(addr, method, path, body);
        assert_eq!(r.status, *status, "{method} {path} {}: {}", &body[..body.len().min(80)], r.body);
        let e = r.json();
        assert!(e["error"].as_str().is_some_and(|m| !m.is_empty()), "{path}: {}", r.body);
        good();
    }
    assert_eq!(get(addr, "/elsewhere").status, 404);
    assert_eq!(
        post(addr, "/v1/models/m:predict", r#"{"signature_name": "nope", "instances": [[1, 2, 3]]}"#).json()["error"]
            .as_str()
            .map(|m| m.contains("nope")),
        Some(true)
    );
    assert_eq!(get(addr, "/v1/models/nope").json(), json!({"error": "Servable not found for request: Latest(nope)"}));
    assert_eq!(
        post(addr, "/v1/models/nope:predict", "{}").json(),
        json!({"error": "Servable not found for request: Latest(nope)"})
    );
    // Declared-too-long bodies, garbage, a truncated body with the client gone, a bare close.
    let r = raw(
        addr,
        b"POST /v1/models/m:predict HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.status, 413, "{}", r.body);
    good();
    let _ = raw(addr, b"\x00\x01garbage\r\n\r\n");
    good();
    {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"POST /v1/models/m:predict HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"inst").unwrap();
    }
    good();
    drop(TcpStream::connect(addr).unwrap());
    good();
    // gzip bodies are accepted.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(br#"{"instances": [[1, 2, 3]]}"#).unwrap();
    let gz = gz.finish().unwrap();
    let mut req = format!(
        "POST /v1/models/m:predict HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Encoding: gzip\r\nContent-Length: {}\r\n\r\n",
        gz.len()
    )
    .into_bytes();
    req.extend_from_slice(&gz);
    let r = raw(addr, &req);
    assert_eq!((r.status, r.body.as_str()), (200, r#"{"predictions":[[5.0,5.0]]}"#));
    server.shutdown();
}

#[test]
fn versions_swap_by_polling_and_labels_pick_versions() {
    let dir = tempfile::tempdir().unwrap();
    let staging = tempfile::tempdir().unwrap();
    write_model(&dir.path().join("1"), 1.0);
    write_model(&staging.path().join("2"), 2.0);
    let server = start(dir.path(), ServeOptions::new());
    let addr = server.rest_addr().unwrap();
    let predict = |path: &str| post(addr, path, r#"{"instances": [[0, 0, 0]]}"#).body;
    assert_eq!(predict("/v1/models/m:predict"), r#"{"predictions":[[1.0,0.0]]}"#);
    // Version 2 arrives (renamed in whole, as a deployment drops it in).
    std::fs::rename(staging.path().join("2"), dir.path().join("2")).unwrap();
    server.poll_now();
    assert_eq!(predict("/v1/models/m:predict"), r#"{"predictions":[[2.0,0.0]]}"#);
    let status = get(addr, "/v1/models/m").json();
    assert_eq!(status["model_version_status"][0]["version"], "2");
    assert_eq!(status["model_version_status"][0]["state"], "AVAILABLE");
    assert_eq!(status["model_version_status"][1]["version"], "1");
    assert_eq!(status["model_version_status"][1]["state"], "END");
    assert_eq!(post(addr, "/v1/models/m/versions/1:predict", "{}").status, 404);
    // A broken version 3 fails to load: END with its error; version 2 keeps serving.
    std::fs::create_dir(dir.path().join("3")).unwrap();
    std::fs::write(dir.path().join("3").join("saved_model.pb"), b"not a protobuf").unwrap();
    server.poll_now();
    assert_eq!(predict("/v1/models/m:predict"), r#"{"predictions":[[2.0,0.0]]}"#);
    let three = get(addr, "/v1/models/m/versions/3").json();
    assert_eq!(three["model_version_status"][0]["state"], "END");
    assert_ne!(three["model_version_status"][0]["status"]["error_code"], "OK");
    assert!(!three["model_version_status"][0]["status"]["error_message"].as_str().unwrap().is_empty());
    // Versions 2 and 3 removed: version 1 is served again.
    std::fs::remove_dir_all(dir.path().join("3")).unwrap();
    std::fs::remove_dir_all(dir.path().join("2")).unwrap();
    server.poll_now();
    assert_eq!(predict("/v1/models/m:predict"), r#"{"predictions":[[1.0,0.0]]}"#);
    assert_eq!(get(addr, "/v1/models/m/versions/1").json()["model_version_status"][0]["state"], "AVAILABLE");
    server.shutdown();

    // A config file: both versions, labels.
    write_model(&dir.path().join("2"), 2.0);
    let config = format!(
        "model_config_list {{ config {{ name: \"m\" base_path: \"{}\" model_platform: \"tensorflow\"\n model_version_policy {{ all {{}} }}\n version_labels {{ key: \"stable\" value: 1 }} version_labels {{ key: \"canary\" value: 2 }} }} }}",
        dir.path().display()
    );
    let models = parse_model_config(&config).unwrap();
    assert_eq!(models[0].policy, VersionPolicy::All);
    let mut options = ServeOptions::new().with_rest_port(0).with_poll_wait_seconds(0);
    for m in models {
        options = options.with_model(m);
    }
    let server = Server::start(options).unwrap();
    let addr = server.rest_addr().unwrap();
    let predict = |path: &str| post(addr, path, r#"{"instances": [[0, 0, 0]]}"#).body;
    assert_eq!(predict("/v1/models/m:predict"), r#"{"predictions":[[2.0,0.0]]}"#);
    assert_eq!(predict("/v1/models/m/labels/stable:predict"), r#"{"predictions":[[1.0,0.0]]}"#);
    assert_eq!(predict("/v1/models/m/labels/canary:predict"), r#"{"predictions":[[2.0,0.0]]}"#);
    assert_eq!(predict("/v1/models/m/versions/1:predict"), r#"{"predictions":[[1.0,0.0]]}"#);
    server.shutdown();
}

/// Writes `<version>/assets.extra/tf_serving_warmup_requests` with one predict record.
fn write_warmup(version_dir: &Path, signature: &str, input: &str) {
    use ferroflow::proto::serving::{prediction_log, ModelSpec, PredictLog, PredictRequest, PredictionLog};
    use ferroflow::proto::Message;
    let x = Tensor::from_vec(&[1, 3], vec![1.0f32, 2.0, 3.0]).unwrap();
    let request = PredictRequest {
        model_spec: Some(ModelSpec { name: "m".into(), signature_name: signature.into(), ..Default::default() }),
        inputs: [(input.to_string(), ferroflow::proto::convert::tensor_to_proto(&x))].into_iter().collect(),
        output_filter: Vec::new(),
    };
    let log = PredictionLog {
        log_metadata: None,
        log_type: Some(prediction_log::LogType::PredictLog(PredictLog { request: Some(request), response: None })),
    };
    let dir = version_dir.join("assets.extra");
    std::fs::create_dir_all(&dir).unwrap();
    let mut bytes = Vec::new();
    ferroflow::summary::record::write_record(&mut bytes, &log.encode_to_vec()).unwrap();
    std::fs::write(dir.join("tf_serving_warmup_requests"), bytes).unwrap();
}

#[test]
fn warmup_records_are_replayed_and_failed_loads_retried() {
    let dir = tempfile::tempdir().unwrap();
    write_model(&dir.path().join("1"), 1.0);
    write_warmup(&dir.path().join("1"), "", "x");
    // Version 2's warmup request names an input the signature does not have: the load fails.
    write_model(&dir.path().join("2"), 2.0);
    write_warmup(&dir.path().join("2"), "serving_default", "nope");
    let options = ServeOptions::new()
        .with_model(ModelConfig::new("m", dir.path()))
        .with_rest_port(0)
        .with_poll_wait_seconds(0)
        .with_load_retries(2, Duration::from_millis(10));
    let server = Server::start(options).unwrap();
    let addr = server.rest_addr().unwrap();
    let status = get(addr, "/v1/models/m").json();
    assert_eq!(status["model_version_status"][0]["version"], "2", "{status}");
    assert_eq!(status["model_version_status"][0]["state"], "END");
    let error = status["model_version_status"][0]["status"]["error_message"].as_str().unwrap();
    assert!(error.starts_with("warmup:") && error.contains("nope"), "{error}");
    assert_eq!(status["model_version_status"][0]["status"]["error_code"], "INVALID_ARGUMENT");
    assert_eq!(status["model_version_status"][1]["state"], "AVAILABLE");
    let r = post(addr, "/v1/models/m:predict", r#"{"instances": [[0, 0, 0]]}"#);
    assert_eq!(r.body, r#"{"predictions":[[1.0,0.0]]}"#);
}

#[test]
fn the_poller_thread_picks_up_new_versions() {
    let dir = tempfile::tempdir().unwrap();
    let staging = tempfile::tempdir().unwrap();
    write_model(&dir.path().join("1"), 1.0);
    write_model(&staging.path().join("7"), 7.0);
    let server = Server::start(
        ServeOptions::new().with_model(ModelConfig::new("m", dir.path())).with_rest_port(0).with_poll_wait_seconds(1),
    )
    .unwrap();
    let addr = server.rest_addr().unwrap();
    std::fs::rename(staging.path().join("7"), dir.path().join("7")).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let body = post(addr, "/v1/models/m:predict", r#"{"instances": [[0, 0, 0]]}"#).body;
        if body == r#"{"predictions":[[7.0,0.0]]}"# {
            break;
        }
        assert_eq!(body, r#"{"predictions":[[1.0,0.0]]}"#, "served while version 7 loads");
        assert!(std::time::Instant::now() < deadline, "version 7 never served");
        std::thread::sleep(Duration::from_millis(100));
    }
    server.shutdown();
}

/// A reread `--model_config_file`: a model added is loaded, one removed is gone, a changed
/// label is applied; a file that does not parse changes nothing; `reload_config` does the same.
#[test]
fn a_changed_model_config_file_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    write_model(&a.join("1"), 1.0);
    write_model(&a.join("2"), 2.0);
    write_model(&b.join("5"), 5.0);
    let file = dir.path().join("models.config");
    let config = |models: &[(&str, &Path, &str)]| {
        let mut text = String::from("model_config_list {\n");
        for (name, base, extra) in models {
            text += &format!(
                "  config {{ name: '{name}' base_path: '{}' model_platform: 'tensorflow' {extra} }}\n",
                base.display()
            );
        }
        text + "}\n"
    };
    let all = "model_version_policy { all {} }";
    std::fs::write(&file, config(&[("a", &a, &format!("{all} version_labels {{ key: 'stable' value: 1 }}"))])).unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    let mut options = ServeOptions::new().with_rest_port(0).with_poll_wait_seconds(0).with_model_config_file(&file, 1);
    for m in parse_model_config(&text).unwrap() {
        options = options.with_model(m);
    }
    let server = Server::start(options).unwrap();
    let addr = server.rest_addr().unwrap();
    let x = r#"{"instances": [[0, 0, 0]]}"#;
    assert_eq!(post(addr, "/v1/models/a/labels/stable:predict", x).body, r#"{"predictions":[[1.0,0.0]]}"#);
    assert_eq!(post(addr, "/v1/models/b:predict", x).status, 404);

    let wait_for = |what: &str, cond: &dyn Fn() -> bool| {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !cond() {
            assert!(std::time::Instant::now() < deadline, "{what}: not after 60 s");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    // A file that does not parse: logged, the models stay.
    std::fs::write(&file, "model_config_list { config { name: ").unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(post(addr, "/v1/models/a:predict", x).body, r#"{"predictions":[[2.0,0.0]]}"#);

    // b added, a's label moved to version 2.
    let both = config(&[("a", &a, &format!("{all} version_labels {{ key: 'stable' value: 2 }}")), ("b", &b, "")]);
    std::fs::write(&file, both).unwrap();
    wait_for("b served", &|| post(addr, "/v1/models/b:predict", x).body == r#"{"predictions":[[5.0,0.0]]}"#);
    assert_eq!(post(addr, "/v1/models/a/labels/stable:predict", x).body, r#"{"predictions":[[2.0,0.0]]}"#);
    assert_eq!(post(addr, "/v1/models/a/versions/1:predict", x).status, 200, "a keeps both versions");

    // a removed.
    std::fs::write(&file, config(&[("b", &b, "")])).unwrap();
    wait_for("a gone", &|| get(addr, "/v1/models/a").status == 404);
    assert_eq!(post(addr, "/v1/models/a:predict", x).status, 404);
    assert_eq!(post(addr, "/v1/models/b:predict", x).status, 200);

    // The same through the API: a back with only its latest version.
    server.reload_config(&[ModelConfig::new("a", &a), ModelConfig::new("b", &b)]);
    assert_eq!(post(addr, "/v1/models/a:predict", x).body, r#"{"predictions":[[2.0,0.0]]}"#);
    assert_eq!(get(addr, "/v1/models/a").json()["model_version_status"].as_array().unwrap().len(), 1);
    server.shutdown();
}

#[test]
fn shutdown_finishes_requests_in_flight() {
    let (_dir, server) = one_version();
    let addr = server.rest_addr().unwrap();
    // A request whose body is still arriving when shutdown starts is answered.
    let mut s = TcpStream::connect(addr).unwrap();
    let body = r#"{"instances": [[1, 2, 3]]}"#;
    write!(
        s,
        "POST /v1/models/m:predict HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let stopper = std::thread::spawn(move || server.shutdown());
    std::thread::sleep(Duration::from_millis(200));
    s.write_all(body.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert!(out.ends_with(r#"{"predictions":[[5.0,5.0]]}"#), "{out}");
    stopper.join().unwrap();
    assert!(TcpStream::connect(addr).is_err(), "still accepting after shutdown");
}

#[test]
fn batching_merges_concurrent_requests_and_splits_the_answers() {
    let dir = tempfile::tempdir().unwrap();
    write_model(&dir.path().join("1"), 1.0);
    let params = ferroflow_serve::parse_batching_parameters(
        "max_batch_size { value: 8 } batch_timeout_micros { value: 100000 } num_batch_threads { value: 1 }",
    )
    .unwrap();
    let server = start(dir.path(), ServeOptions::new().with_batching(Some(params)));
    let addr = server.rest_addr().unwrap();
    let threads: Vec<_> = (0..8)
        .map(|i| {
            std::thread::spawn(move || {
                let x = [[i as f32, 1.0, 2.0]];
                let r = post(addr, "/v1/models/m:predict", &json!({ "instances": x }).to_string());
                assert_eq!(r.status, 200, "{}", r.body);
                let want: Vec<Vec<f32>> = scores(&x, 1.0).iter().map(|r| r.to_vec()).collect();
                assert_eq!(r.json()["predictions"], json!(want));
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let stats = server.batch_stats().unwrap();
    assert_eq!(stats.tasks, 8);
    assert!(stats.batches < 8, "{stats:?}");
    // A request over max_batch_size is refused; a scalar-free signature still answers.
    let rows = ["[1, 2, 3]"; 9].join(",");
    let r = post(addr, "/v1/models/m:predict", &format!(r#"{{"instances": [{rows}]}}"#));
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("larger than maximum input batch size"), "{}", r.body);
}

#[test]
fn the_deadline_answers_504() {
    let dir = tempfile::tempdir().unwrap();
    write_model(&dir.path().join("1"), 1.0);
    // A 1 ms deadline on a big batch: the run (or its conversion) cannot finish in time.
    let server = start(dir.path(), ServeOptions::new().with_timeout_ms(1));
    let rows = vec!["[1.5, 2.5, 3.5]"; 200_000].join(",");
    let r = post(server.rest_addr().unwrap(), "/v1/models/m:predict", &format!(r#"{{"instances": [{rows}]}}"#));
    assert_eq!(r.status, 504, "{}", &r.body[..r.body.len().min(200)]);
    assert!(r.json()["error"].as_str().unwrap().contains("Deadline"));
}

#[test]
fn a_savedmodel_written_by_tensorflow_is_served_as_its_signature_computes() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/saved_model/keras_mlp");
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture, &dir.path().join("00000005"));
    let server = start(dir.path(), ServeOptions::new());
    let x = [[0.1f32, -0.2, 0.3, 0.4], [1.0, 2.0, -3.0, 0.5]];
    let model = SavedModel::load(&fixture, &["serve"], Default::default()).unwrap();
    let flat: Vec<f32> = x.iter().flatten().copied().collect();
    let direct =
        model.call("serving_default", &[("keras_tensor", Tensor::from_vec(&[2, 4], flat).unwrap())], &[]).unwrap();
    let out = &direct["output_0"];
    let cols = out.dims()[1];
    let want: Vec<String> = out
        .as_slice::<f32>()
        .unwrap()
        .chunks(cols)
        .map(|r| {
            format!(
                "[{}]",
                r.iter().map(|v| ferroflow_serve::format_float(f64::from(*v), true)).collect::<Vec<_>>().join(",")
            )
        })
        .collect();
    let r = post(server.rest_addr().unwrap(), "/v1/models/m:predict", &json!({"instances": x}).to_string());
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body, format!(r#"{{"predictions":[{}]}}"#, want.join(",")));
    let status = get(server.rest_addr().unwrap(), "/v1/models/m").json();
    assert_eq!(status["model_version_status"][0]["version"], "5");
    let meta = get(server.rest_addr().unwrap(), "/v1/models/m/metadata").json();
    let sig = &meta["metadata"]["signature_def"]["signature_def"]["serving_default"];
    assert_eq!(sig["inputs"]["keras_tensor"]["tensor_shape"]["dim"][1]["size"], "4");
}

#[test]
fn classify_and_regress_match_tensorflow() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/saved_model");
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixtures.join("classify_regress/1"), &dir.path().join("1"));
    let expected: std::collections::BTreeMap<String, Tensor> =
        ferroflow::tensor::npy::read_npz(&fixtures.join("classify_regress.npz")).unwrap().into_iter().collect();
    let x = expected["x"].as_slice::<f32>().unwrap().to_vec();
    let server = start(dir.path(), ServeOptions::new());
    let addr = server.rest_addr().unwrap();
    // x of the first example in the context, overridden by each example's own.
    let examples: Vec<Value> = x.chunks(2).map(|r| json!({"x": r})).collect();
    let body = json!({"signature_name": "classification", "context": {"x": [9.0, 9.0]}, "examples": examples});
    let r = post(addr, "/v1/models/m:classify", &body.to_string());
    assert_eq!(r.status, 200, "{}", r.body);
    let results = r.json()["results"].clone();
    let scores = expected["scores"].as_slice::<f32>().unwrap();
    let classes = expected["classes"].as_strings().unwrap();
    for (i, row) in results.as_array().unwrap().iter().enumerate() {
        for (j, pair) in row.as_array().unwrap().iter().enumerate() {
            assert_eq!(pair[0].as_str().unwrap().as_bytes(), &classes[i * 2 + j][..]);
            assert!((pair[1].as_f64().unwrap() as f32 - scores[i * 2 + j]).abs() < 1e-5, "{pair}");
        }
    }
    let body = json!({"signature_name": "regression", "examples": examples});
    let r = post(addr, "/v1/models/m:regress", &body.to_string());
    assert_eq!(r.status, 200, "{}", r.body);
    let got: Vec<f32> = r.json()["results"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32).collect();
    let want = expected["outputs"].as_slice::<f32>().unwrap();
    assert!(got.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-5), "{got:?} vs {want:?}");
    // The wrong kind of signature, a missing feature, a predict signature.
    let r =
        post(addr, "/v1/models/m:classify", &json!({"signature_name": "regression", "examples": examples}).to_string());
    assert_eq!(r.status, 400, "{}", r.body);
    let r = post(
        addr,
        "/v1/models/m:regress",
        &json!({"signature_name": "regression", "examples": [{"y": 1}]}).to_string(),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    let r = post(addr, "/v1/models/m:classify", &json!({"signature_name": "nope", "examples": examples}).to_string());
    assert_eq!(r.status, 400, "{}", r.body);
}
