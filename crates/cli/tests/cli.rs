//! The `ferroflow` binary end to end: every TensorFlow fixture through `ferroflow run`, and
//! bad input of every kind giving a one-line error (never a panic).
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ferroflow::tensor::{npy, DType, Tensor};
use ferroflow::testing::{compare, read_manifest};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ferroflow"))
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tf")
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("run ferroflow")
}

#[test]
fn every_fixture_runs_through_the_cli_and_matches_tensorflow() {
    let dir = tempfile::tempdir().unwrap();
    for fx in read_manifest(&fixtures().join("MANIFEST")).unwrap() {
        let expected = npy::read_npz(&fixtures().join(format!("{}.expected.npz", fx.name))).unwrap();
        for ext in ["pb", "pbtxt"] {
            let out = dir.path().join(format!("{}.{ext}.npz", fx.name));
            let graph = fixtures().join(format!("{}.{ext}", fx.name));
            let inputs = fixtures().join(format!("{}.inputs.npz", fx.name));
            let mut cmd = bin();
            cmd.arg("run").arg(&graph).arg("--inputs").arg(&inputs).arg("--output").arg(&out);
            for (name, _) in &expected {
                cmd.arg("--fetch").arg(name);
            }
            let o = cmd.output().unwrap();
            assert!(o.status.success(), "{}: {}", fx.name, String::from_utf8_lossy(&o.stderr));
            let stdout = String::from_utf8_lossy(&o.stdout);
            let got = npy::read_npz(&out).unwrap();
            assert_eq!(got.len(), expected.len());
            for ((gn, g), (wn, w)) in got.iter().zip(&expected) {
                assert_eq!(gn, wn, "output npz keeps the fetch names as given");
                assert!(stdout.contains(&format!("{wn}: {} {:?}", w.dtype(), w.dims())), "{stdout}");
                compare(g, w, fx.rtol, fx.atol).unwrap_or_else(|e| panic!("{} {wn}: {e}", fx.name));
            }
        }
    }
}

#[test]
fn feeds_from_npy_files() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = npy::read_npz(&fixtures().join("mlp.inputs.npz")).unwrap();
    let x = dir.path().join("x.npy");
    npy::write_npy(&x, &inputs[0].1).unwrap();
    let out = dir.path().join("o.npz");
    let o = bin()
        .arg("run")
        .arg(fixtures().join("mlp.pb"))
        .arg("--feed")
        .arg(format!("x:0={}", x.display()))
        .args(["--fetch", "Identity:0", "--output"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let expected = npy::read_npz(&fixtures().join("mlp.expected.npz")).unwrap();
    compare(&npy::read_npz(&out).unwrap()[0].1, &expected[0].1, 1e-5, 1e-6).unwrap();
}

#[test]
fn what_runs_pbtxt_prints_nine() {
    let o = run(&["run", fixtures().join("seed_000.pbtxt").to_str().unwrap(), "--fetch", "Mul:0"]);
    assert!(o.status.success());
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "Mul:0: float [] [9.0]");
}

#[test]
fn demo_runs() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(&["demo", "--out", dir.path().to_str().unwrap(), "--mnist-steps", "100", "--effnet-epochs", "1"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(s.contains("Mul:0: float [] [9.0]") && s.contains("max |ferroflow - TensorFlow|"), "{s}");
    // what_runs end to end on two devices: partition graphs, merged graph, TensorBoard runs.
    let parts = dir.path().join("partitions/global_step_0");
    for d in ["CPU_0", "CPU_1"] {
        let p = parts.join(format!("_job_localhost_replica_0_task_0_device_{d}.pbtxt"));
        assert!(std::fs::read_to_string(&p).unwrap().contains("_Send"), "{p:?}");
    }
    assert!(s.contains("merged into") && s.contains("(1 nodes): Mul:0 = [9.0]"), "{s}");
    for run in ["what_runs", "what_runs_optimized"] {
        let files: Vec<_> = std::fs::read_dir(dir.path().join("logdir").join(run)).unwrap().collect();
        assert_eq!(files.len(), 1);
    }
    // mnist_training: trained, then evaluated by tensor names.
    let acc: f64 = s.lines().last().unwrap().strip_prefix("test_accuracy=").expect("last line").parse().unwrap();
    assert!(acc > 0.8, "{s}");
    assert!(s.contains("global_step = 100"), "{s}");
    // ... saved, and restored from the .meta under an import scope with the same accuracy.
    let restored = s.lines().find_map(|l| l.strip_prefix("restored_accuracy=")).expect("restored line");
    assert!(restored.starts_with(&format!("{acc:.4} ")), "{s}");
    for ext in ["index", "data-00000-of-00001", "meta"] {
        assert!(dir.path().join(format!("mnist_training/model.ckpt-100.{ext}")).exists());
    }
    assert!(std::fs::read_to_string(dir.path().join("mnist_training/checkpoint")).unwrap().contains("model.ckpt-100"));
    // input_pipeline: the pipeline four ways, the file cache written, the model trained from it.
    for stage in ["map (serial)", "map + prefetch(AUTOTUNE)", "num_parallel_calls=AUTOTUNE", "cache(file)"] {
        assert!(s.lines().any(|l| l.contains(stage) && l.contains("images/s per epoch")), "{stage}: {s}");
    }
    assert!(dir.path().join("flowers.cache.index").exists());
    // seed 001: Keras's EfficientNetB0 written by ferroflow, fine-tuned in two phases, saved.
    assert!(s.contains("keras.applications.EfficientNetB0 (237 layers, 4055976 parameters)"), "{s}");
    let epochs: Vec<&str> =
        s.lines().filter(|l| l.trim_start().starts_with("epoch ") && l.contains("val_accuracy")).collect();
    assert_eq!(epochs.len(), 2, "{s}");
    assert!(s.contains("base frozen: 6405 of 4055976 parameters train"), "{s}");
    assert!(s.contains("160 training / 40 validation images"), "{s}");
    let tuned = ferroflow::keras::KerasModel::load(dir.path().join("efficientnetb0_64.tuned.keras")).unwrap();
    assert_eq!(tuned.summary().unwrap().total, 4_055_976);
}

/// Keras files at the command line: `run` (inputs by the model's input names, outputs under
/// its output names), `inspect` (model.summary()), `convert` (ferroflow's writer), `fit`
/// (frozen base, saved as .keras) and `keras-app`.
#[test]
fn keras_files_run_inspect_convert_fit_and_keras_app() {
    let keras = fixtures().join("../keras");
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let model = keras.join("transfer.keras");
    let inputs = keras.join("transfer.npz");
    let o = run(&["run", model.to_str().unwrap(), "--inputs", inputs.to_str().unwrap(), "--output", &d("out.npz")]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got = npy::read_npz(Path::new(&d("out.npz"))).unwrap();
    let want = npy::read_npz(&inputs).unwrap();
    let want = &want.iter().find(|(k, _)| k == "out").unwrap().1;
    assert_eq!(got[0].0, "predictions");
    compare(&got[0].1, want, 1e-4, 1e-5).unwrap();
    let o = run(&["inspect", model.to_str().unwrap()]);
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && s.contains("Total params: 35,624") && s.contains("Trainable params: 645"), "{s}");
    let o = run(&["convert", model.to_str().unwrap(), &d("copy.keras")]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = run(&["run", &d("copy.keras"), "--inputs", inputs.to_str().unwrap(), "--output", &d("copy.npz")]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(npy::read_npz(Path::new(&d("copy.npz"))).unwrap()[0].1, got[0].1);
    // fit: five class folders of 32x32 images, the base frozen, saved as .keras.
    let o = run(&["flowers", &d("flowers"), "--per-class", "8", "--size", "40x32"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = run(&[
        "fit",
        model.to_str().unwrap(),
        &d("flowers"),
        "--freeze-base",
        "--epochs",
        "2",
        "--batch",
        "8",
        "--validation-split",
        "0.25",
        "--save",
        &d("tuned.keras"),
        "--quiet",
    ]);
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(s.contains("30 training / 10 validation images of 5 classes; 645 of 35624 parameters trained"), "{s}");
    assert!(s.contains("epoch 2: loss") && s.contains("steady state"), "{s}");
    let tuned = ferroflow::keras::KerasModel::load(d("tuned.keras")).unwrap();
    let before = ferroflow::keras::KerasModel::load(&model).unwrap();
    let (a, b) = (tuned.weights().unwrap(), before.weights().unwrap());
    assert_ne!(a["predictions"], b["predictions"], "the head trained");
    let base: Vec<&String> = b.keys().filter(|k| k.starts_with("efficientnet_reduced/")).collect();
    assert!(!base.is_empty() && base.iter().all(|k| a[*k] == b[*k]), "the frozen base kept its weights");
    // Wrong inputs: one line naming what was expected.
    let o = run(&["fit", model.to_str().unwrap(), &d("flowers"), "--size", "64"]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("32x32") && e.lines().count() == 1, "{e}");
    let o = run(&["keras-app", "efficientnetb0", &d("b0.keras"), "--size", "32", "--classes", "3"]);
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && s.contains("4053414 parameters (4011391 trainable)"),
        "{s}{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// mnist_training's evaluation without model code, on TensorFlow's own checkpoint: `ferroflow run
/// model.ckpt-200.meta --checkpoint DIR --inputs FEEDS.npz --fetch accuracy:0` gives
/// TensorFlow's accuracy; `inspect-checkpoint` lists and prints its tensors.
#[test]
fn run_meta_with_checkpoint_and_inspect_checkpoint() {
    let ckpt = fixtures().join("checkpoints/seed_003");
    let dir = tempfile::tempdir().unwrap();
    let m = ferroflow::train::mnist::load(&ferroflow::train::mnist::bundled_dir()).unwrap();
    let feeds = dir.path().join("feeds.npz");
    npy::write_npz(
        &feeds,
        &[
            ("inputs:0".into(), m.test.images.clone()),
            ("outputs:0".into(), m.test.one_hot(10).unwrap()),
            ("is_training:0".into(), Tensor::scalar(false)),
        ],
    )
    .unwrap();
    let out = dir.path().join("out.npz");
    let meta = ckpt.join("model.ckpt-200.meta");
    let o = bin()
        .arg("run")
        .arg(&meta)
        .arg("--checkpoint")
        .arg(&ckpt)
        .arg("--inputs")
        .arg(&feeds)
        .args(["--fetch", "accuracy:0", "--output"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("restored 21 variables"));
    let want = npy::read_npz(&ckpt.join("expected.npz")).unwrap();
    let got = npy::read_npz(&out).unwrap();
    assert_eq!(got[0].1, want.iter().find(|(n, _)| n == "accuracy:0").unwrap().1);

    let o = run(&["inspect-checkpoint", ckpt.join("model.ckpt-200").to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(s.contains("layer_0/kernel (float) [784, 256]") && s.contains("global_step (int64) []"), "{s}");
    assert!(s.contains("21 tensors"), "{s}");
    let o = run(&["inspect-checkpoint", ckpt.to_str().unwrap(), "--tensor", "global_step"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("200"), "{}", String::from_utf8_lossy(&o.stdout));
    let e = error_of(&["inspect-checkpoint", ckpt.to_str().unwrap(), "--tensor", "nope"]);
    assert!(e.contains("no tensor named 'nope'") && e.contains("layer_0/bias"), "{e}");
    let e = error_of(&["inspect-checkpoint", "/no/such/ckpt"]);
    assert!(e.contains("/no/such/ckpt.index"), "{e}");
    // --checkpoint needs a meta graph; a corrupted checkpoint names file and tensor.
    let e = error_of(&["run", fixtures().join("mlp.pb").to_str().unwrap(), "--checkpoint", "x", "--fetch", "a:0"]);
    assert!(e.contains("--checkpoint needs a .meta graph"), "{e}");
    let bad = dir.path().join("bad");
    std::fs::create_dir_all(&bad).unwrap();
    for f in ["model.ckpt-200.index", "model.ckpt-200.data-00000-of-00001"] {
        std::fs::copy(ckpt.join(f), bad.join(f)).unwrap();
    }
    let data = bad.join("model.ckpt-200.data-00000-of-00001");
    let mut bytes = std::fs::read(&data).unwrap();
    let n = bytes.len();
    bytes[n - 100] ^= 0x20;
    std::fs::write(&data, bytes).unwrap();
    let prefix = bad.join("model.ckpt-200");
    let e =
        error_of(&["run", meta.to_str().unwrap(), "--checkpoint", prefix.to_str().unwrap(), "--fetch", "accuracy:0"]);
    assert!(e.contains("data-00000-of-00001") && e.contains("CRC32C") && e.contains("tensor '"), "{e}");
}

#[test]
fn mnist_trains_and_rejects_bad_data() {
    let o = run(&["mnist", "--steps", "30"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(s.lines().last().unwrap().starts_with("test_accuracy="), "{s}");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("train-images-idx3-ubyte"), [0u8, 0, 8, 3, 0, 0, 0, 9]).unwrap();
    let e = error_of(&["mnist", "--data", dir.path().to_str().unwrap()]);
    assert!(e.contains("train-images-idx3-ubyte") && e.contains("truncated"), "{e}");
    let e = error_of(&["mnist", "--data", "/no/such/dir"]);
    assert!(e.contains("/no/such/dir"), "{e}");

    // --logdir: the TensorBoard callback's train run (event file) and the profile of 3..5.
    let log = dir.path().join("tb");
    let o = run(&["mnist", "--steps", "8", "--logdir", log.to_str().unwrap(), "--profile-batch", "3,5"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let files = walk(&log);
    assert!(
        files.iter().any(|f| f.starts_with(log.join("train")) && f.to_string_lossy().contains("tfevents")),
        "{files:?}"
    );
    let capture = files.iter().find(|f| f.to_string_lossy().ends_with(".xplane.pb")).expect("a profile");
    let out = run(&["profile", capture.to_str().unwrap()]);
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && report.contains("3 steps") && report.contains("MatMul"), "{report}");
    let e = error_of(&["mnist", "--logdir", "/proc/ff-mnist"]);
    assert!(e.contains("/proc/ff-mnist"), "{e}");
}

#[test]
fn run_on_two_cpu_devices_writes_partition_graphs() {
    let dir = tempfile::tempdir().unwrap();
    let mlp = fixtures().join("mlp.pb");
    let o = run(&[
        "run",
        mlp.to_str().unwrap(),
        "--inputs",
        fixtures().join("mlp.inputs.npz").to_str().unwrap(),
        "--fetch",
        "Identity:0",
        "--cpu-devices",
        "2",
        "--partition-graphs",
        dir.path().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(dir.path().join("global_step_0/_job_localhost_replica_0_task_0_device_CPU_0.pbtxt").exists());
}

#[test]
fn convert_round_trips_through_text_and_binary() {
    let dir = tempfile::tempdir().unwrap();
    let txt = dir.path().join("mlp.pbtxt");
    let pb = dir.path().join("mlp.pb");
    assert!(run(&["convert", fixtures().join("mlp.pb").to_str().unwrap(), txt.to_str().unwrap()]).status.success());
    assert!(run(&["convert", txt.to_str().unwrap(), pb.to_str().unwrap()]).status.success());
    let a = ferroflow::graph::io::read_graph_def(&fixtures().join("mlp.pb")).unwrap();
    let b = ferroflow::graph::io::read_graph_def(&pb).unwrap();
    assert_eq!(a, b);
}

/// Runs a failing command and returns its one-line error.
fn error_of(args: &[&str]) -> String {
    let o = run(args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(1), "{args:?} should fail with exit code 1, stderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one-line error expected: {err}");
    assert!(err.starts_with("error: "), "{err}");
    err
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p.to_str().unwrap().to_string()
}

const TWO_CONSTS: &str = r#"node { name: "a" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } } attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 1 } } } }
"#;

#[test]
fn bad_graphs_are_rejected_with_the_node_named() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cases: Vec<(String, &[&str])> = vec![
        (
            format!("{TWO_CONSTS}node {{ name: \"f\" op: \"FancyOp\" input: \"a\" }} node {{ name: \"g\" op: \"OtherOp\" }} node {{ name: \"h\" op: \"FancyOp\" }}"),
            &[
                "unknown op(s)",
                "'FancyOp' (nodes 'f', 'h'; not a TensorFlow op either (a custom op?))",
                "'OtherOp' (node 'g'; not a TensorFlow op either (a custom op?))",
            ],
        ),
        (
            format!("{TWO_CONSTS}node {{ name: \"s\" op: \"AudioSpectrogram\" input: \"a\" }} node {{ name: \"r\" op: \"Reluu\" input: \"a\" }}"),
            &[
                "'AudioSpectrogram' (node 's'; TensorFlow has this op, ferroflow does not yet)",
                "'Reluu' (node 'r'; not a TensorFlow op either (a custom op?); nearest ferroflow op: 'Relu')",
            ],
        ),
        (
            format!("{TWO_CONSTS}node {{ name: \"p\" op: \"MaxPool\" input: \"a\" attr {{ key: \"T\" value {{ type: DT_FLOAT }} }} attr {{ key: \"padding\" value {{ s: \"FULL\" }} }} attr {{ key: \"ksize\" value {{ list {{ i: [1, 2, 2, 1] }} }} }} attr {{ key: \"strides\" value {{ list {{ i: [1, 2, 2, 1] }} }} }} }}"),
            &["node 'p' (MaxPool)", "attr 'padding' is 'FULL', which is not one of {'SAME', 'VALID', 'EXPLICIT'}"],
        ),
        (
            format!("{TWO_CONSTS}node {{ name: \"n\" op: \"Neg\" input: \"ghost\" attr {{ key: \"T\" value {{ type: DT_FLOAT }} }} }}"),
            &["node 'n'", "input 'ghost' names a node that does not exist"],
        ),
        (format!("{TWO_CONSTS}{TWO_CONSTS}"), &["duplicate node name 'a'"]),
        (
            format!("{TWO_CONSTS}node {{ name: \"n\" op: \"AddV2\" input: \"a\" attr {{ key: \"T\" value {{ type: DT_FLOAT }} }} }}"),
            &["node 'n' (AddV2): expected 2 data input(s), got 1"],
        ),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let g = write(d, &format!("g{i}.pbtxt"), text.as_bytes());
        let err = error_of(&["run", &g, "--fetch", "a:0"]);
        for w in *want {
            assert!(err.contains(w), "case {i}: want '{w}' in: {err}");
        }
    }
}

#[test]
fn bad_files_are_rejected_with_the_file_named() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pb = std::fs::read(fixtures().join("mlp.pb")).unwrap();
    let truncated = write(d, "cut.pb", &pb[..pb.len() / 2]);
    let err = error_of(&["run", &truncated, "--fetch", "Identity:0"]);
    assert!(err.contains("cut.pb") && err.contains("not a valid binary tensorflow.GraphDef"), "{err}");

    let bad_txt = write(d, "bad.pbtxt", b"node { name: \"a\" op: \"Const\" attr { key: \"dtype\" ");
    let err = error_of(&["run", &bad_txt, "--fetch", "a:0"]);
    assert!(err.contains("bad.pbtxt") && err.contains("text-format"), "{err}");

    let mlp = fixtures().join("mlp.pb");
    let mlp = mlp.to_str().unwrap();
    let good = npy::write_npy_bytes(&Tensor::from_vec(&[1, 8], vec![0f32; 8]).unwrap()).unwrap();
    let short = write(d, "short.npy", &good[..good.len() - 3]);
    let err = error_of(&["run", mlp, "--feed", &format!("x:0={short}"), "--fetch", "Identity:0"]);
    assert!(err.contains("short.npy") && err.contains("truncated"), "{err}");
    let junk = write(d, "junk.npy", b"definitely not numpy");
    let err = error_of(&["run", mlp, "--feed", &format!("x:0={junk}"), "--fetch", "Identity:0"]);
    assert!(err.contains("junk.npy") && err.contains("bad magic"), "{err}");
    let junk_npz = write(d, "junk.npz", b"PK\x03\x04 not a zip");
    let err = error_of(&["run", mlp, "--inputs", &junk_npz, "--fetch", "Identity:0"]);
    assert!(err.contains("junk.npz"), "{err}");
}

#[test]
fn bad_feeds_fetches_and_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mlp = fixtures().join("mlp.pb");
    let mlp = mlp.to_str().unwrap();
    let int_feed =
        write(d, "i.npy", &npy::write_npy_bytes(&Tensor::from_vec(&[1, 8], vec![0i32; 8]).unwrap()).unwrap());
    let err = error_of(&["run", mlp, "--feed", &format!("x:0={int_feed}"), "--fetch", "Identity:0"]);
    assert!(err.contains("feed 'x:0': expected a float tensor, got int32"), "{err}");
    let wide = write(d, "w.npy", &npy::write_npy_bytes(&Tensor::from_vec(&[2, 3], vec![0f32; 6]).unwrap()).unwrap());
    let err = error_of(&["run", mlp, "--feed", &format!("x:0={wide}"), "--fetch", "Identity:0"]);
    assert!(err.contains("feed 'x:0': expected shape [?,8], got [2, 3]"), "{err}");
    let err = error_of(&[
        "run",
        mlp,
        "--inputs",
        fixtures().join("mlp.inputs.npz").to_str().unwrap(),
        "--fetch",
        "nothere:0",
    ]);
    assert!(err.contains("fetch 'nothere:0'") && err.contains("no node named 'nothere'"), "{err}");
    let err = error_of(&["run", mlp, "--feed", "x:0", "--fetch", "Identity:0"]);
    assert!(err.contains("--feed 'x:0': expected NAME=FILE.npy"), "{err}");
    let err = error_of(&["run", mlp]);
    assert!(err.contains("--fetch"), "{err}");
    let err = error_of(&["run", mlp, "--fetch", "Identity:0"]);
    assert!(err.contains("You must feed a value for placeholder tensor 'x'"), "{err}");
}

#[test]
fn optimize_shows_which_pass_merged_and_which_folded_what_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("what_runs.opt.pbtxt");
    let dumps = dir.path().join("dumps");
    let what_runs = fixtures().join("seed_000.pbtxt");
    let o = run(&[
        "optimize",
        what_runs.to_str().unwrap(),
        "--fetch",
        "Mul:0",
        "--report",
        "-o",
        out.to_str().unwrap(),
        "--dump-dir",
        dumps.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(s.contains("round 1 common_subexpression_elimination:\n  merged   Add_1 into Add"), "{s}");
    assert!(s.contains("round 1 constant_folding:\n  folded   Add (now a Const)\n  folded   Mul (now a Const)"), "{s}");
    assert!(s.contains("total: 5 -> 1 nodes"), "{s}");
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("name: \"Mul\"\n  op: \"Const\"") && text.contains("float_val: 9"), "{text}");
    // The written graph runs and gives 9.
    let o = run(&["run", out.to_str().unwrap(), "--fetch", "Mul:0"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "Mul:0: float [] [9.0]");
    // One dump per pass, plus the original.
    let files: Vec<String> =
        std::fs::read_dir(&dumps).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(files.contains(&"00_round0_original.pbtxt".to_string()), "{files:?}");
    assert!(files.contains(&"02_round1_common_subexpression_elimination.pbtxt".to_string()), "{files:?}");
}

#[test]
fn optimize_rejects_bad_arguments_with_one_line() {
    let what_runs = fixtures().join("seed_000.pbtxt");
    let what_runs = what_runs.to_str().unwrap();
    for (args, want) in [
        (vec!["optimize", what_runs, "--fetch", "Nope:0"], "fetch 'Nope:0'"),
        (vec!["optimize", what_runs, "--fetch", "Mul:0", "--feed", "Add:7"], "feed 'Add:7'"),
        (vec!["optimize", what_runs, "--fetch", "Mul:0", "--disable", "magic"], "--disable 'magic': no such pass"),
        (vec!["optimize", "/nonexistent.pb", "--fetch", "Mul:0"], "/nonexistent.pb"),
    ] {
        let o = run(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(want) && err.lines().count() == 1, "{args:?}: {err}");
    }
    let o = run(&["optimize", what_runs]);
    assert_eq!(o.status.code(), Some(2), "clap requires --fetch");
}

#[test]
fn run_without_the_optimizer_gives_the_same_result() {
    let what_runs = fixtures().join("seed_000.pbtxt");
    let o = run(&["run", what_runs.to_str().unwrap(), "--fetch", "Mul:0", "--no-optimize"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "Mul:0: float [] [9.0]");
}

#[test]
fn tensorboard_writes_a_run_with_the_graph() {
    let dir = tempfile::tempdir().unwrap();
    let what_runs = fixtures().join("seed_000.pbtxt");
    let o = run(&["tensorboard", what_runs.to_str().unwrap(), "--logdir", dir.path().to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let files: Vec<_> = std::fs::read_dir(dir.path().join("seed_000")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 1);
    let events = ferroflow::summary::read_events(&files[0]).unwrap();
    let Some(ferroflow::proto::event::What::GraphDef(bytes)) = &events[1].what else { panic!("{:?}", events[1]) };
    let def: ferroflow::proto::GraphDef = ferroflow::proto::decode(bytes, "graph event").unwrap();
    assert_eq!(def.node.len(), 5);
    for (args, want) in [
        (vec!["tensorboard", what_runs.to_str().unwrap(), "--logdir", "/tmp", "--run", "../x"], "--run '../x'"),
        (vec!["tensorboard", "/nonexistent.pbtxt", "--logdir", "/tmp"], "/nonexistent.pbtxt"),
    ] {
        let o = run(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains(want) && err.lines().count() == 1, "{err}");
    }
}

#[test]
fn merge_partitions_of_tensorflows_partition_graphs_runs() {
    let dir = tempfile::tempdir().unwrap();
    let p = fixtures().join("partitions");
    let out = dir.path().join("merged.pbtxt");
    let o = run(&[
        "merge-partitions",
        p.join("_job_localhost_replica_0_task_0_device_CPU_0.pbtxt").to_str().unwrap(),
        p.join("_job_localhost_replica_0_task_0_device_CPU_1.pbtxt").to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o =
        run(&["run", out.to_str().unwrap(), "--inputs", p.join("inputs.npz").to_str().unwrap(), "--fetch", "out:0"]);
    assert!(
        String::from_utf8_lossy(&o.stdout).starts_with("out:0: float [2] [1.5388"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    // Only one partition: its _Recv has no _Send.
    let o = run(&[
        "merge-partitions",
        p.join("_job_localhost_replica_0_task_0_device_CPU_1.pbtxt").to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1));
    assert!(err.contains("_Recv 'h/_1'") && err.contains("no _Send"), "{err}");
}

#[test]
fn ops_lists_the_registry_as_json_and_one_op_readably() {
    let o = run(&["ops", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let ops = doc.as_array().unwrap();
    let names: Vec<&str> = ops.iter().map(|op| op["name"].as_str().unwrap()).collect();
    assert_eq!(names, ferroflow::ops::OpRegistry::global().names(), "every registered op, sorted");
    for op in ops {
        for field in ["inputs", "outputs", "attrs", "cpu_kernels", "run_by", "gradient", "flags", "family"] {
            assert!(op.get(field).is_some(), "{}: no '{field}'", op["name"]);
        }
        let g = op["gradient"].as_str().unwrap();
        assert!(["yes", "not_differentiable", "not_implemented"].contains(&g), "{}: gradient {g}", op["name"]);
        if g != "yes" {
            assert!(op["gradient_reason"].as_str().is_some_and(|r| !r.is_empty()), "{}", op["name"]);
        }
        if op["run_by"] == "kernel" {
            assert!(!op["cpu_kernels"].as_array().unwrap().is_empty(), "{}: no kernels", op["name"]);
        }
    }
    let relu6 = ops.iter().find(|op| op["name"] == "Relu6").unwrap();
    assert_eq!(relu6["inputs"][0]["name"], "features");
    assert_eq!(relu6["cpu_kernels"][0]["dtypes"], serde_json::json!(["float", "double"]));
    assert_eq!(relu6["flags"]["activation"], true);
    let floor = ops.iter().find(|op| op["name"] == "Floor").unwrap();
    assert_eq!(floor["gradient"], "not_differentiable");

    let o = run(&["ops", "Relu6"]);
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    for line in [
        "crates/ops/src/defs/elementwise.rs",
        "inputs       features: T",
        "outputs      activations: T",
        "CPU kernels  T in {float, double}",
        "gradient     yes",
        "fusible activation",
    ] {
        assert!(text.contains(line), "missing '{line}' in\n{text}");
    }
    let o = run(&["ops", "Conv2D"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("padding: {'SAME', 'VALID', 'EXPLICIT'}") && text.contains("dilations: list(int) = [1, 1, 1, 1]"),
        "{text}"
    );

    let o = run(&["ops", "relu6x"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no op named 'relu6x'"), "{err}");
    let o = run(&["ops", "relu"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("did you mean Relu"), "case-insensitive suggestions");
}

/// A frozen TensorFlow graph `placeholder(string) → ReadFile → DecodeJpeg → resize(224)`,
/// fed a file name from an `.npy` of numpy byte strings, gives TensorFlow's pixels.
#[test]
fn a_tf_image_graph_reads_decodes_and_resizes_a_fed_file_name() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/data");
    let dir = tempfile::tempdir().unwrap();
    let jpeg = data.join("flowers_tiny/daisy/daisy_00.jpg");
    let path_npy = dir.path().join("path.npy");
    let name = Tensor::from_strings(&[], vec![jpeg.to_string_lossy().into_owned().into_bytes()]).unwrap();
    npy::write_npy(&path_npy, &name).unwrap();
    let out = dir.path().join("out.npz");
    let graph = data.join("read_decode_resize.pb");
    let o = bin()
        .arg("run")
        .arg(&graph)
        .arg("--feed")
        .arg(format!("path:0={}", path_npy.display()))
        .args(["--fetch", "out:0", "--output"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got = &npy::read_npz(&out).unwrap()[0].1;
    let want = npy::read_npz(&data.join("resize_224.npz")).unwrap();
    let resized = &want.iter().find(|(n, _)| n == "resized").unwrap().1;
    compare(got, resized, 0.0, 1e-4).unwrap();
    // A missing file names it.
    let missing = Tensor::from_strings(&[], vec![b"/no/such/dir/rose.jpg".to_vec()]).unwrap();
    npy::write_npy(&path_npy, &missing).unwrap();
    let o = bin()
        .arg("run")
        .arg(&graph)
        .arg("--feed")
        .arg(format!("path:0={}", path_npy.display()))
        .args(["--fetch", "out:0"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("/no/such/dir/rose.jpg") && err.contains("ReadFile"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// `ferroflow pipeline --logdir` trains and profiles; `ferroflow profile` reports the log
/// directory, compares two, writes Chrome trace JSON, and names a damaged file and offset.
#[test]
fn pipeline_logdir_profiles_and_profile_reports() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("flowers");
    let out = run(&["flowers", data.to_str().unwrap(), "--per-class", "4", "--size", "64x48"]);
    assert!(out.status.success());
    let log = dir.path().join("log");
    let out = run(&[
        "pipeline",
        data.to_str().unwrap(),
        "--size",
        "32",
        "--batch",
        "4",
        "--logdir",
        log.to_str().unwrap(),
        "--profile-batch",
        "2,4",
        "--train-steps",
        "5",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("profile of batches 2,4") && stdout.contains("Verdict:"), "{stdout}");
    let chrome = dir.path().join("trace.json");
    let out = run(&["profile", log.to_str().unwrap(), log.to_str().unwrap(), "--chrome", chrome.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.contains("3 steps") && stdout.contains("Second against first"), "{stdout}");
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&chrome).unwrap()).unwrap();
    assert!(json["traceEvents"].as_array().unwrap().iter().any(|e| e["ph"] == "X"));

    // A truncated capture names the file and where it breaks; a bad --profile-batch and an
    // unwritable log directory fail before training.
    let cut = dir.path().join("cut.xplane.pb");
    let mut capture = None;
    for e in walk(&log) {
        if e.to_string_lossy().ends_with(".xplane.pb") {
            capture = Some(e);
        }
    }
    let bytes = std::fs::read(capture.unwrap()).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let e = error_of(&["profile", cut.to_str().unwrap()]);
    assert!(e.contains("cut.xplane.pb") && e.contains("byte offset"), "{e}");
    let e =
        error_of(&["pipeline", data.to_str().unwrap(), "--logdir", log.to_str().unwrap(), "--profile-batch", "5,2"]);
    assert!(e.contains("profile_batch") && e.contains("5,2"), "{e}");
    let e = error_of(&["pipeline", data.to_str().unwrap(), "--logdir", "/proc/ff-log", "--profile-batch", "1,2"]);
    assert!(e.contains("/proc/ff-log") && e.contains("not writable"), "{e}");
    let e = error_of(&["profile", dir.path().join("nothing").to_str().unwrap()]);
    assert!(e.contains("nothing"), "{e}");

    // `run --profile`: one `run` step with the graph's ops.
    let prof = dir.path().join("runprof");
    let mlp = fixtures().join("mlp.pb");
    let inputs = fixtures().join("mlp.inputs.npz");
    let out = run(&[
        "run",
        mlp.to_str().unwrap(),
        "--inputs",
        inputs.to_str().unwrap(),
        "--fetch",
        "Identity:0",
        "--profile",
        prof.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("wrote the profile to") && stdout.contains("_FusedMatMul"),
        "{stdout}"
    );
    let e = error_of(&["run", mlp.to_str().unwrap(), "--fetch", "Identity:0", "--profile", "/proc/ff-prof"]);
    assert!(e.contains("/proc/ff-prof"), "{e}");
}

fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn run_calls_a_saved_model_signature_by_keys() {
    let dir = fixtures().join("../saved_model/keras_mlp");
    let want: std::collections::HashMap<String, Tensor> =
        npy::read_npz(&fixtures().join("../saved_model/keras_mlp.npz")).unwrap().into_iter().collect();
    let tmp = std::env::temp_dir().join(format!("ff_cli_sm_{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let x = tmp.join("x.npy");
    npy::write_npy(&x, &want["x"]).unwrap();
    let out = tmp.join("out.npz");
    let o = run(&[
        "run",
        dir.to_str().unwrap(),
        "--feed",
        &format!("keras_tensor={}", x.display()),
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("output_0: float [2, 3]"));
    let got: Vec<(String, Tensor)> = npy::read_npz(&out).unwrap();
    assert_eq!(got[0].0, "output_0");
    for (a, b) in got[0].1.as_slice::<f32>().unwrap().iter().zip(want["output_0"].as_slice::<f32>().unwrap()) {
        assert!((a - b).abs() <= 1e-5 * b.abs().max(1e-3), "{a} vs TensorFlow's {b}");
    }
    let o = run(&["run", dir.to_str().unwrap(), "--feed", &format!("features={}", x.display())]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no input 'features'; its inputs: keras_tensor"), "{err}");
    std::fs::remove_dir_all(&tmp).unwrap();
}

/// Every TensorFlow-written SavedModel fixture through the CLI: `run DIR --inputs in.npz`
/// (keys = the signature's input names) gives TensorFlow's outputs, and `inspect DIR` prints
/// what `saved_model_cli show --all` printed.
#[test]
fn saved_models_of_every_kind_run_and_inspect_through_the_cli() {
    let tmp = std::env::temp_dir().join(format!("ff_cli_sm_all_{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a [&'a str]);
    let cases: [Case; 3] = [
        ("keras_cnn", &[("x", "keras_tensor")], &["output_0"]),
        ("module_loop", &[("x", "x"), ("n", "n")], &["steps", "y"]),
        ("tf1_builder", &[("x", "x")], &["scores"]),
    ];
    for (name, inputs, outputs) in cases {
        let dir = fixtures().join("../saved_model").join(name);
        let want: std::collections::HashMap<String, Tensor> =
            npy::read_npz(&fixtures().join(format!("../saved_model/{name}.npz"))).unwrap().into_iter().collect();
        let feeds: Vec<(String, Tensor)> = inputs.iter().map(|(f, k)| (k.to_string(), want[*f].clone())).collect();
        let inp = tmp.join(format!("{name}_in.npz"));
        npy::write_npz(&inp, &feeds).unwrap();
        let out = tmp.join(format!("{name}_out.npz"));
        let o =
            run(&["run", dir.to_str().unwrap(), "--inputs", inp.to_str().unwrap(), "--output", out.to_str().unwrap()]);
        assert!(o.status.success(), "{name}: {}", String::from_utf8_lossy(&o.stderr));
        let got: Vec<(String, Tensor)> = npy::read_npz(&out).unwrap();
        let keys: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, outputs, "{name}");
        for (k, t) in &got {
            let w = &want[k];
            assert_eq!(t.dims(), w.dims(), "{name} {k}");
            if t.dtype() == DType::Float {
                for (a, b) in t.as_slice::<f32>().unwrap().iter().zip(w.as_slice::<f32>().unwrap()) {
                    assert!((a - b).abs() <= 1e-5 * b.abs().max(1e-3), "{name} {k}: {a} vs TensorFlow's {b}");
                }
            } else {
                assert_eq!(t, w, "{name} {k}");
            }
        }
        let o = run(&["inspect", dir.to_str().unwrap()]);
        assert!(o.status.success(), "{name}: {}", String::from_utf8_lossy(&o.stderr));
        let text = String::from_utf8_lossy(&o.stdout);
        let cli = std::fs::read_to_string(fixtures().join(format!("../saved_model/{name}.cli.txt"))).unwrap();
        for line in cli.lines().filter(|l| !l.starts_with("The MetaGraph with tag set")) {
            assert!(text.contains(line), "{name}: inspect lacks the line {line:?}\n{text}");
        }
    }
    // Freezing: the Keras CNN's signature into a GraphDef that runs by its keys.
    let frozen = tmp.join("keras_cnn.pb");
    let dir = fixtures().join("../saved_model/keras_cnn");
    let o = run(&["convert", dir.to_str().unwrap(), frozen.to_str().unwrap(), "--signature", "serving_default"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("feed  keras_tensor:0"));
    let want: std::collections::HashMap<String, Tensor> =
        npy::read_npz(&fixtures().join("../saved_model/keras_cnn.npz")).unwrap().into_iter().collect();
    let x = tmp.join("x.npy");
    npy::write_npy(&x, &want["x"]).unwrap();
    let out = tmp.join("frozen_out.npz");
    let o = run(&[
        "run",
        frozen.to_str().unwrap(),
        "--feed",
        &format!("keras_tensor:0={}", x.display()),
        "--fetch",
        "output_0:0",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got = &npy::read_npz(&out).unwrap()[0].1;
    for (a, b) in got.as_slice::<f32>().unwrap().iter().zip(want["output_0"].as_slice::<f32>().unwrap()) {
        assert!((a - b).abs() <= 1e-5 * b.abs().max(1e-3), "frozen: {a} vs TensorFlow's {b}");
    }
    let g = ferroflow::load_graph(&frozen).unwrap();
    assert!(g.nodes().iter().all(|n| n.op != "VarHandleOp" && !n.op.ends_with("PartitionedCall")));
    // A loop carrying a variable's handle cannot be frozen: say which.
    let o =
        run(&["convert", fixtures().join("../saved_model/module_loop").to_str().unwrap(), frozen.to_str().unwrap()]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("cannot be frozen") && err.contains("variable '"), "{err}");

    let o = run(&["inspect", fixtures().join("../saved_model/unsupported_ops").to_str().unwrap()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("Ops ferroflow cannot run in the meta graph tagged 'serve' (loading it fails):\n  BesselI0e"),
        "{text}"
    );
    let o = run(&["run", fixtures().join("../saved_model/unsupported_ops").to_str().unwrap()]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("ferroflow cannot run: BesselI0e") && err.contains("MatrixDeterminant"), "{err}");
    std::fs::remove_dir_all(&tmp).unwrap();
}

/// `benchmark`: the last line's five figures, and with `--profile` the per-op-type table and
/// the slowest nodes (each a node of the optimized graph with its op and output shape).
#[test]
fn benchmark_prints_latency_and_the_profile() {
    let mlp = fixtures().join("mlp.pb");
    let inputs = fixtures().join("mlp.inputs.npz");
    let args = ["benchmark", mlp.to_str().unwrap(), "--inputs", inputs.to_str().unwrap(), "--fetch", "Identity:0"];
    let out = run(&[&args[..], &["--runs", "3", "--warmup", "1", "--intra-op-threads", "1", "--profile"]].concat());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let last = stdout.lines().last().unwrap_or_default();
    let keys: Vec<&str> = last.split(' ').map(|kv| kv.split('=').next().unwrap_or_default()).collect();
    assert_eq!(keys, ["median_ms", "min_ms", "max_ms", "peak_rss_mb", "page_faults_per_run"], "{stdout}");
    for kv in last.split(' ') {
        let v: f64 = kv.split('=').nth(1).and_then(|v| v.parse().ok()).unwrap_or(-1.0);
        // Page faults may be none at all (memory kept from the warm-up).
        assert!(v > 0.0 || (kv.starts_with("page_faults_per_run") && v == 0.0), "{kv} in {stdout}");
    }
    let (table, nodes) = stdout.split_once("slowest nodes").unwrap_or_else(|| panic!("{stdout}"));
    assert!(table.contains("time per op type") && table.contains("_FusedMatMul"), "{stdout}");
    // A `_FusedMatMul` of the MLP, with its [batch, units] output shape.
    assert!(nodes.lines().any(|l| l.contains("_FusedMatMul [") && l.contains('%')), "{stdout}");
    let e = error_of(&[&args[..], &["--runs", "0"]].concat());
    assert!(e.contains("runs"), "{e}");
}

/// `inspect --coverage` lists every op type a model uses, its library functions' included
/// (a `StatelessWhile`'s condition and body), with whether ferroflow runs and differentiates it; an op
/// ferroflow lacks does not stop the listing (the graph is read, not imported) and says
/// whether TensorFlow has it. `--json` carries the same facts; a SavedModel's serving graph
/// is listed without its save and restore nodes.
#[test]
fn inspect_coverage_lists_every_op_with_what_ferroflow_does_with_it() {
    let o = run(&["inspect", "--coverage", fixtures().join("control_flow_v2.pbtxt").to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    let row = |op: &str| text.lines().find(|l| l.split_whitespace().next() == Some(op)).map(str::to_string);
    assert!(row("StatelessWhile").is_some_and(|r| r.contains(" yes ")), "{text}");
    assert!(row("Less").is_some(), "the loop condition's ops are listed: {text}");
    let last = text.lines().last().unwrap();
    assert!(last.contains("op types; ferroflow runs") && last.contains("differentiable ones"), "{last}");

    let dir = tempfile::tempdir().unwrap();
    let g = write(
        dir.path(),
        "g.pbtxt",
        format!("{TWO_CONSTS}node {{ name: \"s\" op: \"AudioSpectrogram\" input: \"a\" }} node {{ name: \"r\" op: \"Reluu\" input: \"a\" }}").as_bytes(),
    );
    let o = run(&["inspect", "--coverage", &g]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("no: TensorFlow has it"), "{text}");
    assert!(text.contains("no: not a TensorFlow op; nearest ferroflow op 'Relu'"), "{text}");
    assert!(text.lines().last().unwrap().contains("ferroflow runs 1 of 3 op types"), "{text}");

    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/saved_model/keras_cnn");
    let o = run(&["inspect", "--coverage", "--json", model.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let ops = v["ops"].as_array().unwrap();
    assert!(ops.iter().any(|o| o["op"] == "Conv2D" && o["runs"] == true && o["gradient"] == "yes"), "{v}");
    assert!(!ops.iter().any(|o| o["op"] == "SaveV2"), "the save function is left out: {v}");
    assert_eq!(v["runs"], v["op_types"], "{v}");
}
