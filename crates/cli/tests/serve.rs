//! `ferroflow serve` as a deployment runs it: TensorFlow Serving's flags (its other flags
//! accepted with a warning), a prediction over HTTP, SIGTERM ending it with status 0.
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

#[test]
fn serve_takes_tensorflow_servings_flags_answers_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/saved_model/keras_mlp");
    copy_dir(&fixture, &dir.path().join("1"));
    // A free port: bound and released (another process could take it in between; unlikely).
    let free = || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (port, grpc_port) = (free(), free());
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferroflow"))
        .arg("serve")
        .arg("--model_name=mlp")
        .arg(format!("--model_base_path={}", dir.path().display()))
        .arg(format!("--rest_api_port={port}"))
        .arg(format!("--port={grpc_port}"))
        .args(["--enable_batching", "--tensorflow_session_parallelism", "2"])
        .args(["--rest-api-timeout-in-ms", "5000", "--file_system_poll_wait_seconds=0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), format!("serving REST API at http://127.0.0.1:{port}/v1/models/"));
    line.clear();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), format!("serving gRPC API at 127.0.0.1:{grpc_port}"));

    let body = r#"{"instances": [[0.1, 0.2, 0.3, 0.4]]}"#;
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "POST /v1/models/mlp:predict HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(reply.contains(r#"{"predictions":[["#), "{reply}");

    // SAFETY: kill(2) on the child this test started.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) }, 0);
    let status = child.wait().unwrap();
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(status.success(), "{status:?}: {err}");
    assert!(err.contains("batching: 1 tasks (1 rows) ran in 1 batches"), "{err}");
    assert!(err.contains("--tensorflow_session_parallelism is not implemented"), "{err}");
}

#[test]
fn serve_without_a_model_says_what_to_give() {
    let out = Command::new(env!("CARGO_BIN_EXE_ferroflow")).arg("serve").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--model_base_path"), "{err}");
}
