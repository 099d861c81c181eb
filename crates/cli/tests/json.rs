//! `--json` of `inspect`, `inspect-checkpoint`, `benchmark`, `profile`, `optimize --report` and
//! `info`: each runs the binary on a fixture, parses stdout with serde_json and checks the
//! fields docs/CLI-JSON.md describes against what the text output says.
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

fn fixture(path: &str) -> String {
    fixtures().join(path).to_str().unwrap().to_string()
}

/// Runs `ferroflow ARGS`, asserts success, returns stdout.
fn stdout_of(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_ferroflow")).args(args).output().expect("run ferroflow");
    assert!(o.status.success(), "ferroflow {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).expect("stdout is UTF-8")
}

/// Runs `ferroflow ARGS` and parses its stdout as one JSON document.
fn json_of(args: &[&str]) -> Value {
    let out = stdout_of(args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("ferroflow {args:?}: not JSON ({e}): {out}"))
}

#[test]
fn inspect_json_lists_a_graphs_nodes_with_shapes() {
    let g = fixture("tf/mlp.pb");
    let v = json_of(&["inspect", &g, "--json"]);
    assert_eq!(v["format"], "graph_def");
    assert_eq!(v["model"], g.as_str());
    let nodes = v["node_list"].as_array().unwrap();
    assert_eq!(v["nodes"].as_u64().unwrap() as usize, nodes.len());
    // The text lists the same nodes, one line each after the header.
    let text = stdout_of(&["inspect", &g]);
    assert_eq!(text.lines().count() - 1, nodes.len(), "{text}");
    let x = nodes.iter().find(|n| n["name"] == "x").expect("the placeholder x");
    assert_eq!(x["op"], "Placeholder");
    assert_eq!(x["outputs"][0]["dtype"], "float");
    assert!(x["outputs"][0]["shape"][0].is_null(), "the batch dimension is unknown: {x}");
    let identity = nodes.iter().find(|n| n["name"] == "Identity").unwrap();
    assert_eq!(identity["inputs"].as_array().unwrap().len(), 1);
    assert!(text.contains(&format!("  Identity = Identity({})", identity["inputs"][0].as_str().unwrap())), "{text}");
}

#[test]
fn inspect_json_of_a_saved_model_and_a_keras_file() {
    let dir = fixture("saved_model/keras_cnn");
    let v = json_of(&["inspect", &dir, "--json"]);
    assert_eq!(v["format"], "saved_model");
    let meta = &v["meta_graphs"][0];
    assert_eq!(meta["tags"][0], "serve");
    let sig = &meta["signatures"]["serving_default"];
    assert_eq!(sig["method_name"], "tensorflow/serving/predict");
    let input = sig["inputs"].as_object().unwrap().values().next().unwrap();
    assert_eq!(input["dtype"], "DT_FLOAT");
    assert!(input["shape"][0].as_i64() == Some(-1), "{input}");
    assert!(meta["ops"].as_array().unwrap().iter().any(|o| o == "Conv2D"), "{meta}");
    assert_eq!(meta["unsupported_ops"].as_array().unwrap().len(), 0);
    // The text: `saved_model_cli show --all`'s output, then the ops only the save function uses.
    let text = stdout_of(&["inspect", &dir]);
    assert!(text.starts_with(v["saved_model_cli"].as_str().unwrap()), "{text}");
    let save_only = meta["save_only_unsupported_ops"].as_array().unwrap();
    assert!(save_only.iter().any(|m| m["op"] == "MergeV2Checkpoints"), "{meta}");
    assert!(
        text.contains("Only the meta graph's save function uses ops ferroflow cannot run (DisableCopyOnRead"),
        "{text}"
    );
    assert!(v["concrete_functions"].as_str().unwrap().contains("Function Name: 'serve'"), "{v}");

    let model = fixture("keras/transfer.keras");
    let v = json_of(&["inspect", &model, "--json"]);
    assert_eq!(v["format"], "keras");
    let layers = v["layers"].as_array().unwrap();
    assert!(!layers.is_empty());
    let params: u64 = layers.iter().map(|l| l["params"].as_u64().unwrap()).sum();
    assert_eq!(params, v["total_params"].as_u64().unwrap());
    assert_eq!(
        v["total_params"].as_u64().unwrap(),
        v["trainable_params"].as_u64().unwrap() + v["non_trainable_params"].as_u64().unwrap()
    );
}

#[test]
fn inspect_checkpoint_json_lists_tensors_and_values() {
    let ckpt = fixture("tf/checkpoints/seed_003");
    let v = json_of(&["inspect-checkpoint", &ckpt, "--json"]);
    assert_eq!(v["tensor_count"], 21);
    assert!(v["prefix"].as_str().unwrap().ends_with("model.ckpt-200"), "{v}");
    let tensors = v["tensors"].as_array().unwrap();
    assert_eq!(tensors.len(), 21);
    let kernel = tensors.iter().find(|t| t["name"] == "layer_0/kernel").unwrap();
    assert_eq!(kernel["dtype"], "float");
    assert_eq!(kernel["shape"], serde_json::json!([784, 256]));
    assert_eq!(kernel["bytes"], 784 * 256 * 4);
    assert!(kernel.get("values").is_none(), "values only with --tensor or --all: {kernel}");
    let bytes: i64 = tensors.iter().map(|t| t["bytes"].as_i64().unwrap()).sum();
    assert_eq!(v["data_bytes"].as_i64().unwrap(), bytes);

    let v = json_of(&["inspect-checkpoint", &ckpt, "--tensor", "global_step", "--json"]);
    assert_eq!(v["tensors"][0]["values"], serde_json::json!([200]));
    assert_eq!(v["tensors"][0]["values_truncated"], false);
    let v = json_of(&["inspect-checkpoint", &ckpt, "--tensor", "layer_0/bias", "--max-values", "3", "--json"]);
    let t = &v["tensors"][0];
    assert_eq!(t["values"].as_array().unwrap().len(), 3);
    assert_eq!(t["values_truncated"], true);
    // The same first value the text prints.
    let text = stdout_of(&["inspect-checkpoint", &ckpt, "--tensor", "layer_0/bias", "--max-values", "3"]);
    let first: f64 = text.lines().nth(1).unwrap().trim_start_matches('[').split(',').next().unwrap().parse().unwrap();
    assert!((t["values"][0].as_f64().unwrap() - first).abs() <= 1e-6 * first.abs().max(1.0), "{text} vs {t}");
}

#[test]
fn benchmark_json_has_the_latency_figures_and_the_profile() {
    let mlp = fixture("tf/mlp.pb");
    let inputs = fixture("tf/mlp.inputs.npz");
    let v = json_of(&[
        "benchmark",
        &mlp,
        "--inputs",
        &inputs,
        "--fetch",
        "Identity:0",
        "--runs",
        "3",
        "--warmup",
        "1",
        "--intra-op-threads",
        "1",
        "--profile",
        "--top",
        "2",
        "--json",
    ]);
    assert_eq!(v["runs"], 3);
    assert_eq!(v["warmup"], 1);
    assert_eq!(v["run_ms"].as_array().unwrap().len(), 3);
    let (min, median, max) =
        (v["min_ms"].as_f64().unwrap(), v["median_ms"].as_f64().unwrap(), v["max_ms"].as_f64().unwrap());
    assert!(0.0 < min && min <= median && median <= max, "{v}");
    assert!(v["peak_rss_mb"].as_f64().unwrap() > 0.0);
    assert!(v["nodes"].as_u64().unwrap() >= v["nodes_optimized"].as_u64().unwrap());
    let profile = &v["profile"];
    assert!(profile["op_types"].as_array().unwrap().iter().any(|o| o["op"] == "_FusedMatMul"), "{profile}");
    let slowest = profile["slowest_nodes"].as_array().unwrap();
    assert_eq!(slowest.len(), 2, "--top 2");
    assert!(slowest.iter().all(|n| n["ms_per_run"].as_f64().is_some() && n["op"].is_string()), "{profile}");
    // Without --profile: null.
    let v = json_of(&["benchmark", &mlp, "--inputs", &inputs, "--fetch", "Identity:0", "--runs", "1", "--json"]);
    assert!(v["profile"].is_null());
}

#[test]
fn profile_json_has_the_reports_figures() {
    let xplane = fixture("profile/tf_keras_fit.xplane.pb");
    let v = json_of(&["profile", &xplane, "--json"]);
    let p = &v["profiles"][0];
    assert_eq!(p["file"], xplane.as_str());
    assert_eq!(p["hosts"][0], "vm");
    assert_eq!(p["steps"].as_array().unwrap().len(), 3);
    assert_eq!(p["verdict"], "not_input_bound");
    assert_eq!(p["op_types"][0]["name"], "_FusedMatMul");
    let text = stdout_of(&["profile", &xplane]);
    assert!(text.contains(&format!("host vm: {} threads, 3 steps", p["threads"])), "{text}");
    assert!(v["comparison"].is_null() && v["chrome_trace"].is_null());
    // Two profiles: the comparison's figures and its sentence.
    let dir = tempfile::tempdir().unwrap();
    let chrome = dir.path().join("trace.json");
    let v = json_of(&["profile", &xplane, &xplane, "--json", "-o", chrome.to_str().unwrap()]);
    assert_eq!(v["profiles"].as_array().unwrap().len(), 2);
    assert!((v["comparison"]["speedup"].as_f64().unwrap() - 1.0).abs() < 1e-9, "{v}");
    assert!(v["comparison"]["text"].as_str().unwrap().contains("1.00x faster"), "{v}");
    assert_eq!(v["chrome_trace"], chrome.to_str().unwrap());
    assert!(chrome.is_file());
}

#[test]
fn optimize_report_json_names_each_change() {
    let g = fixture("tf/seed_000.pbtxt");
    let v = json_of(&["optimize", &g, "--fetch", "Mul:0", "--report", "--json"]);
    assert_eq!(v["nodes_before"], 5);
    assert_eq!(v["nodes_after"], 1);
    let passes = v["passes"].as_array().unwrap();
    let cse = passes.iter().find(|p| p["pass"] == "common_subexpression_elimination" && p["round"] == 1).unwrap();
    assert_eq!(cse["merged"][0], serde_json::json!({"node": "Add_1", "into": "Add"}));
    let folded: Vec<&str> = passes
        .iter()
        .filter(|p| p["pass"] == "constant_folding")
        .flat_map(|p| p["folded"].as_array().unwrap())
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(folded.contains(&"Mul"), "{v}");
    // The text's --report names the same merge.
    let text = stdout_of(&["optimize", &g, "--fetch", "Mul:0", "--report"]);
    assert!(text.contains("merged   Add_1 into Add"), "{text}");
    // With -o: the file is written and named.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.pbtxt");
    let v = json_of(&["optimize", &g, "--fetch", "Mul:0", "--json", "-o", out.to_str().unwrap()]);
    assert_eq!(v["output"], out.to_str().unwrap());
    assert!(out.is_file());
}

#[test]
fn info_json_has_the_version_and_the_machine() {
    let v = json_of(&["info", "--json"]);
    assert_eq!(v["version"], env!("CARGO_PKG_VERSION"));
    assert!(v["threads"].as_u64().unwrap() >= 1);
    assert!(v["features"].as_array().is_some_and(|f| f.iter().any(|x| x == "jpeg")), "{v}");
    assert!(v["jpeg"].is_string());
    if cfg!(target_arch = "x86_64") {
        assert_eq!(v["cpu_features"]["sse2"], true, "every x86-64 has SSE2: {v}");
        assert!(v["cpu_features"]["avx2"].is_boolean());
    }
    let text = stdout_of(&["info"]);
    assert!(text.starts_with(&format!("ferroflow {}", env!("CARGO_PKG_VERSION"))), "{text}");
}
