//! Checkpoints and meta graphs: the Saver's files and state file, max_to_keep, restore into a
//! fresh session, import_meta_graph under scopes, restore reports, and TensorFlow's own
//! MNIST MLP checkpoint and meta graph (fixtures/tf/checkpoints/seed_003/).
use std::path::{Path, PathBuf};

use ferroflow::prelude::*;
use ferroflow::train::layers::{dense, Activation};
use ferroflow::train::meta_graph::{import_meta_graph_file, read_meta_graph};
use ferroflow::train::optimizers::Optimizer;
use ferroflow::train::saver::{
    latest_checkpoint, meta_path, read_checkpoint_state, RestoreOptions, Saver, SaverOptions,
};
use ferroflow::train::{Builder, Initializer};

/// A small trained-able model: `x` → dense(3→4, relu) → dense(4→2) → `loss`; Adam with a
/// global step; a saver.
struct Small {
    graph: Graph,
    saver: Saver,
    train: String,
    out: String,
}

fn small(max_to_keep: usize) -> Small {
    let b = Builder::with_seed(7);
    let s = b.scope().clone();
    let x = s.with_name("x").placeholder(DType::Float, &Shape::new(vec![None, Some(3)])).unwrap();
    let init = Initializer::GlorotUniform { seed: None };
    let h = dense(&b, x, 4, Activation::Relu, &init, "layer_0").unwrap();
    let out = dense(&b, h, 2, Activation::Linear, &init, "out").unwrap();
    let loss = s.reduce("Sum", s.mul(out, out).unwrap(), &[0, 1], false).unwrap();
    let gs = b.global_step().unwrap();
    let train = Optimizer::adam(0.05).minimize(&b, loss, None, Some(&gs)).unwrap();
    b.global_variables_initializer().unwrap();
    let saver = Saver::new(&b, None, SaverOptions::default().with_max_to_keep(max_to_keep)).unwrap();
    let graph = b.graph();
    let train = graph.node(train).name.clone();
    let out = graph.output_name(out);
    Small { graph, saver, train, out }
}

fn x() -> Tensor {
    Tensor::from_vec(&[2, 3], vec![0.5f32, -1.0, 2.0, 1.5, 0.25, -0.75]).unwrap()
}

fn vars(sess: &Session) -> Vec<(String, Tensor)> {
    sess.resources().snapshot().into_iter().collect()
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ff_ckpt_{name}_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn save_keeps_max_to_keep_and_restores_into_a_fresh_session() {
    let dir = tmp("save");
    let mut m = small(2);
    let sess = Session::new(m.graph.clone(), SessionOptions::default()).unwrap();
    sess.run(&[], &[], &["init"]).unwrap();
    let prefix = dir.join("model.ckpt");
    let mut saved = Vec::new();
    for step in 1..=3 {
        sess.run(&[("x:0", x())], &[], &[&m.train]).unwrap();
        saved.push((m.saver.save(&sess, &prefix, Some(step)).unwrap(), vars(&sess)));
    }
    // The oldest checkpoint is gone, the two newest are complete, the state file names them.
    let first = &saved[0].0;
    assert_eq!(*first, dir.join("model.ckpt-1"));
    for ext in ["index", "data-00000-of-00001", "meta"] {
        assert!(!Path::new(&format!("{}.{ext}", first.display())).exists(), "{ext} of step 1 kept");
        assert!(Path::new(&format!("{}.{ext}", saved[2].0.display())).exists());
    }
    let st = read_checkpoint_state(&dir).unwrap().unwrap();
    // An absolute save path is recorded as is (TensorFlow's rule; relative ones are written
    // relative to the directory).
    let abs = |s: u32| dir.join(format!("model.ckpt-{s}")).display().to_string();
    assert_eq!(st.model_checkpoint_path, abs(3));
    assert_eq!(st.all_model_checkpoint_paths, [abs(2), abs(3)]);
    assert_eq!(st.all_model_checkpoint_timestamps.len(), 2);
    assert_eq!(latest_checkpoint(&dir).unwrap().unwrap(), dir.join("model.ckpt-3"));
    assert_eq!(m.saver.last_checkpoints(), [dir.join("model.ckpt-2"), dir.join("model.ckpt-3")]);

    // Restore step 2 into a fresh session of the same graph: every variable equals what
    // was saved, and the model computes the same output.
    let fresh = Session::new(m.graph.clone(), SessionOptions::default()).unwrap();
    let report = m.saver.restore(&fresh, &saved[1].0).unwrap();
    assert!(report.missing.is_empty() && report.unexpected.is_empty());
    assert_eq!(report.restored.len(), saved[1].1.len());
    assert_eq!(vars(&fresh), saved[1].1);
    let step = fresh.run(&[], &["global_step/Read/ReadVariableOp:0"], &[]).unwrap();
    assert_eq!(step[0].scalar_value::<i64>().unwrap(), 2);

    // A new saver in the same directory continues the list (max_to_keep across restarts).
    let mut again = small(2).saver;
    sess.run(&[("x:0", x())], &[], &[&m.train]).unwrap();
    again.save(&sess, &prefix, Some(4)).unwrap();
    assert!(!Path::new(&format!("{}.index", saved[1].0.display())).exists());
    let st = read_checkpoint_state(&dir).unwrap().unwrap();
    assert_eq!(st.all_model_checkpoint_paths, [abs(3), abs(4)]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn meta_graph_imports_under_scopes_that_keep_models_apart() {
    let dir = tmp("meta");
    let mut m = small(5);
    let sess = Session::new(m.graph.clone(), SessionOptions::default()).unwrap();
    sess.run(&[], &[], &["init"]).unwrap();
    let a = m.saver.save(&sess, dir.join("a"), None).unwrap();
    let want_a = sess.run(&[("x:0", x())], &[&m.out], &[]).unwrap();
    for _ in 0..5 {
        sess.run(&[("x:0", x())], &[], &[&m.train]).unwrap();
    }
    let b = m.saver.save(&sess, dir.join("b"), None).unwrap();
    let want_b = sess.run(&[("x:0", x())], &[&m.out], &[]).unwrap();
    assert_ne!(want_a, want_b);

    // The .meta alone rebuilds the graph; two imports under scopes live in one session.
    let meta = meta_path(&b);
    let one = import_meta_graph_file(&meta, None, "one").unwrap();
    let two = import_meta_graph_file(&meta, Some(&one.graph), "two").unwrap();
    assert_eq!(one.collection("train_op"), ["one/Adam"]);
    assert!(one.collection("trainable_variables").contains(&"one/layer_0/kernel:0".to_string()));
    two.tensor("two/x:0").unwrap();
    assert!(two.tensor("two/nope:0").is_err());
    let sess = Session::new(two.graph.clone(), SessionOptions::default()).unwrap();
    one.saver.as_ref().unwrap().restore(&sess, &a).unwrap();
    two.saver.as_ref().unwrap().restore(&sess, &b).unwrap();
    let out = m.out.clone();
    let got =
        sess.run(&[("one/x:0", x()), ("two/x:0", x())], &[&format!("one/{out}"), &format!("two/{out}")], &[]).unwrap();
    assert_eq!(got[0], want_a[0]);
    assert_eq!(got[1], want_b[0]);
    // The same meta graph twice under one scope is an error naming the node.
    let e = import_meta_graph_file(&meta, Some(&one.graph), "one").err().unwrap().to_string();
    assert!(e.contains("already in the graph"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn restore_names_missing_and_unexpected_keys_and_can_be_partial() {
    let dir = tmp("partial");
    // Save a checkpoint of a model, then restore it into a graph with one more variable and
    // one renamed variable.
    let mut m = small(5);
    let sess = Session::new(m.graph.clone(), SessionOptions::default()).unwrap();
    sess.run(&[], &[], &["init"]).unwrap();
    let path = m.saver.save(&sess, dir.join("m"), None).unwrap();
    let saved = sess.resources().snapshot();

    let b = Builder::with_seed(1);
    let s = b.scope().clone();
    let x = s.with_name("x").placeholder(DType::Float, &Shape::new(vec![None, Some(3)])).unwrap();
    let init = Initializer::Constant(0.5);
    dense(&b, x, 4, Activation::Relu, &init, "layer_0").unwrap();
    b.variable(&s, "extra", &[2], DType::Float, &Initializer::Ones, true).unwrap();
    b.variable(&s, "renamed", &[4, 2], DType::Float, &Initializer::Ones, true).unwrap();
    b.global_variables_initializer().unwrap();
    let saver = Saver::new(&b, None, SaverOptions::default()).unwrap();
    let fresh = Session::new(b.graph(), SessionOptions::default()).unwrap();
    fresh.run(&[], &[], &["init"]).unwrap();
    let e = saver.restore(&fresh, &path).unwrap_err().to_string();
    assert!(e.contains("m.index") && e.contains("\"extra\"") && e.contains("\"renamed\""), "{e}");
    assert!(e.contains("\"out/kernel\"") && e.contains("allow_partial"), "{e}");
    let report = saver.restore_with(&fresh, &path, &RestoreOptions::default().with_allow_partial(true)).unwrap();
    assert_eq!(report.restored, ["layer_0/bias", "layer_0/kernel"]);
    assert_eq!(report.missing, ["extra", "renamed"]);
    assert!(report.unexpected.contains(&"out/kernel".to_string()));
    let now = fresh.resources().snapshot();
    assert_eq!(now["localhost/layer_0/kernel"], saved["localhost/layer_0/kernel"]);
    assert_eq!(now["localhost/extra"], Tensor::from_vec(&[2], vec![1.0f32; 2]).unwrap());

    // A variable whose shape differs from the checkpoint's is named, with both shapes.
    let b = Builder::new();
    let s = b.scope().clone();
    b.variable(&s.name_scope("layer_0"), "kernel", &[3, 5], DType::Float, &Initializer::Zeros, true).unwrap();
    let saver = Saver::new(&b, None, SaverOptions::default()).unwrap();
    let fresh = Session::new(b.graph(), SessionOptions::default()).unwrap();
    let e = saver.restore(&fresh, &path).unwrap_err().to_string();
    assert!(e.contains("'layer_0/kernel'") && e.contains("[3, 4]") && e.contains("[3, 5]"), "{e}");
    // A missing checkpoint names its index file.
    let e = saver.restore(&fresh, dir.join("nope")).unwrap_err().to_string();
    assert!(e.contains("nope.index"), "{e}");
    // Damaged data names the restoring node once (it was named twice).
    let data = path.with_extension("data-00000-of-00001");
    let keep = std::fs::read(&data).unwrap();
    std::fs::write(&data, b"").unwrap();
    let b = Builder::new();
    let s = b.scope().clone();
    b.variable(&s.name_scope("layer_0"), "kernel", &[3, 4], DType::Float, &Initializer::Zeros, true).unwrap();
    let saver = Saver::new(&b, None, SaverOptions::default()).unwrap();
    let fresh = Session::new(b.graph(), SessionOptions::default()).unwrap();
    let e = saver.restore(&fresh, &path).unwrap_err().to_string();
    assert_eq!(e.matches("save/RestoreV2").count(), 1, "{e}");
    std::fs::write(&data, keep).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn keep_checkpoint_every_n_hours_preserves_old_checkpoints() {
    let dir = tmp("keep");
    // Keep one checkpoint per 3.6 ms of training, beyond max_to_keep = 1.
    let m = small(1);
    let mut def = m.saver.def().clone();
    def.keep_checkpoint_every_n_hours = 1e-6;
    let mut saver = Saver::from_def(def, Default::default());
    let sess = Session::new(m.graph.clone(), SessionOptions::default()).unwrap();
    sess.run(&[], &[], &["init"]).unwrap();
    for step in 1..=3 {
        std::thread::sleep(std::time::Duration::from_millis(20));
        saver.save(&sess, dir.join("model.ckpt"), Some(step)).unwrap();
    }
    let st = read_checkpoint_state(&dir).unwrap().unwrap();
    assert_eq!(st.all_model_checkpoint_paths.len(), 1);
    for step in 1..=3 {
        assert!(dir.join(format!("model.ckpt-{step}.index")).exists(), "step {step} was deleted");
    }
    // Without it, max_to_keep = 1 deletes them.
    let mut m = small(1);
    for step in 4..=6 {
        m.saver.save(&sess, dir.join("other"), Some(step)).unwrap();
    }
    assert!(!dir.join("other-4.index").exists() && !dir.join("other-5.index").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn relative_paths_and_the_model_api() {
    // A relative save path is recorded relative to the directory, as TensorFlow does.
    let rel = PathBuf::from(format!("../../target/ff_ckpt_relative_{}", std::process::id()));
    std::fs::create_dir_all(&rel).unwrap();
    let mut m = small(3);
    let sess = Session::new(m.graph.clone(), SessionOptions::default()).unwrap();
    sess.run(&[], &[], &["init"]).unwrap();
    let saved = m.saver.save(&sess, rel.join("model.ckpt"), Some(7)).unwrap();
    assert_eq!(saved, rel.join("model.ckpt-7"));
    assert_eq!(read_checkpoint_state(&rel).unwrap().unwrap().model_checkpoint_path, "model.ckpt-7");
    assert_eq!(latest_checkpoint(&rel).unwrap().unwrap(), rel.join("model.ckpt-7"));
    std::fs::remove_dir_all(&rel).unwrap();
    let dir = tmp("model_api");
    // Sequential models save and restore through their saver.
    use ferroflow::train::model::{Layer, Loss, Sequential};
    let model = Sequential::new(&[3])
        .seed(3)
        .push(Layer::dense(2, Activation::Softmax))
        .compile(Loss::SparseCategoricalCrossentropy, &Optimizer::adam(0.1), SessionOptions::default())
        .unwrap();
    let saved = model.save(dir.join("seq")).unwrap();
    assert_eq!(saved, dir.join("seq-0"));
    let before = model.session().resources().snapshot();
    let other = Sequential::new(&[3])
        .seed(4)
        .push(Layer::dense(2, Activation::Softmax))
        .compile(Loss::SparseCategoricalCrossentropy, &Optimizer::adam(0.1), SessionOptions::default())
        .unwrap();
    assert_ne!(other.session().resources().snapshot(), before);
    other.restore(&saved).unwrap();
    assert_eq!(other.session().resources().snapshot(), before);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn meta_graph_files_that_are_not_meta_graphs_are_errors() {
    let dir = tmp("badmeta");
    let p = dir.join("x.meta");
    std::fs::write(&p, b"\x0a\x05hello world").unwrap();
    let e = read_meta_graph(&p).err().unwrap().to_string();
    assert!(e.contains("x.meta") && e.contains("MetaGraphDef"), "{e}");
    let e = read_meta_graph(&dir.join("missing.meta")).err().unwrap().to_string();
    assert!(e.contains("missing.meta"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A TensorFlow Saver fixture (fixtures/tf/checkpoints/NAME): its latest checkpoint imported
/// from the `.meta` alone and restored into a session, and TensorFlow's expected values.
struct TfFixture {
    prefix: PathBuf,
    imported: ferroflow::train::meta_graph::Imported,
    sess: Session,
    expected: std::collections::HashMap<String, Tensor>,
    mnist: ferroflow::train::mnist::Mnist,
}

fn restore_tf_fixture(name: &str) -> TfFixture {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = root.join("fixtures/tf/checkpoints").join(name);
    let expected = ferroflow::tensor::npy::read_npz(&dir.join("expected.npz")).unwrap().into_iter().collect();
    let prefix = latest_checkpoint(&dir).unwrap().expect("the checkpoint file names a checkpoint");
    let imported = import_meta_graph_file(&meta_path(&prefix), None, "").unwrap();
    let sess = Session::new(imported.graph.clone(), SessionOptions::default()).unwrap();
    let report = imported.saver.as_ref().unwrap().restore(&sess, &prefix).unwrap();
    assert_eq!(report.restored.len(), 21); // 6 variables + 12 Adam slots + beta powers + global_step
    let mnist = ferroflow::train::mnist::load(&ferroflow::train::mnist::bundled_dir()).unwrap();
    TfFixture { prefix, imported, sess, expected, mnist }
}

impl TfFixture {
    /// accuracy:0 on the test split, fed by names with is_training false.
    fn accuracy(&self) -> f32 {
        let m = &self.mnist;
        let feeds = [
            ("inputs:0", m.test.images.clone()),
            ("outputs:0", m.test.one_hot(10).unwrap()),
            ("is_training:0", Tensor::scalar(false)),
        ];
        self.sess.run(&feeds, &["accuracy:0"], &[]).unwrap()[0].scalar_value::<f32>().unwrap()
    }
}

/// TensorFlow's TF1 Saver wrote the `mnist_training` model (cond_v2 dropout, Adam, global step) and
/// evaluated accuracy:0 after import_meta_graph + restore; ferroflow does the same from the
/// same files, without the model's code, and gets TensorFlow's accuracy exactly.
#[test]
fn tensorflows_mnist_mlp_checkpoint_restores_and_gives_tensorflows_accuracy() {
    let f = restore_tf_fixture("seed_003");
    assert_eq!(f.prefix.file_name().unwrap(), "model.ckpt-200");
    assert_eq!(f.imported.collection("train_op"), ["Adam"]);
    let kernel = f.sess.run(&[], &["layer_0/kernel/Read/ReadVariableOp:0"], &[]).unwrap();
    let first_rows = kernel[0].as_slice::<f32>().unwrap()[..512].to_vec();
    assert_eq!(first_rows, f.expected["layer_0/kernel[:2]"].as_slice::<f32>().unwrap());
    assert_eq!(f.accuracy(), f.expected["accuracy:0"].scalar_value::<f32>().unwrap());
    let TfFixture { prefix, imported, sess, mnist: m, .. } = f;
    // Training continues from TensorFlow's state with TensorFlow's update graph, and the
    // saver in TensorFlow's graph (its SaveV2) writes a checkpoint that restores.
    let batch = [
        ("inputs:0", m.train.images.reshaped(&[8000, 784]).unwrap()),
        ("outputs:0", m.train.one_hot(10).unwrap()),
        ("is_training:0", Tensor::scalar(true)),
    ];
    sess.run(&batch, &[], &["Adam"]).unwrap();
    let step = sess.run(&[], &["global_step/Read/ReadVariableOp:0"], &[]).unwrap()[0].scalar_value::<i64>().unwrap();
    assert_eq!(step, 201);
    let out = tmp("tf_graph_save");
    let mut saver =
        Saver::from_def(imported.saver.as_ref().unwrap().def().clone(), imported.meta.collection_def.clone());
    let saved = saver.save(&sess, out.join("model.ckpt"), Some(step)).unwrap();
    let fresh = Session::new(imported.graph.clone(), SessionOptions::default()).unwrap();
    saver.restore(&fresh, &saved).unwrap();
    assert_eq!(fresh.resources().snapshot(), sess.resources().snapshot());
    std::fs::remove_dir_all(&out).unwrap();
    // The same model imported twice under scopes, one restored, keeps the other unset.
    let a = import_meta_graph_file(&meta_path(&prefix), None, "a").unwrap();
    let ab = import_meta_graph_file(&meta_path(&prefix), Some(&a.graph), "b").unwrap();
    let sess = Session::new(ab.graph.clone(), SessionOptions::default()).unwrap();
    a.saver.as_ref().unwrap().restore(&sess, &prefix).unwrap();
    let init = sess.run(&[], &["b/layer_0/kernel/IsInitialized/VarIsInitializedOp:0"], &[]).unwrap();
    assert!(!init[0].scalar_value::<bool>().unwrap());
}

/// The graph the crash test saves: `big` (500,000 floats) and `step` (int64), set through
/// placeholders so every checkpoint's contents say which step wrote them.
fn crash_model() -> (Graph, Saver) {
    let b = Builder::new();
    let s = b.scope().clone();
    let big = b.variable(&s, "big", &[500_000], DType::Float, &Initializer::Zeros, true).unwrap();
    let step = b.variable(&s, "step", &[], DType::Int64, &Initializer::Zeros, false).unwrap();
    for (v, dtype, dims) in [(&big, DType::Float, vec![Some(500_000)]), (&step, DType::Int64, vec![])] {
        let name = format!("set_{}", v.name);
        let p = s.with_name(&format!("{name}_value")).placeholder(dtype, &Shape::new(dims)).unwrap();
        let mut a = ferroflow::graph::Attrs::new();
        a.insert(
            "dtype".into(),
            ferroflow::proto::AttrValue { value: Some(ferroflow::proto::attr_value::Value::Type(dtype.to_tf())) },
        );
        s.with_name(&name).add_op("AssignVariableOp", "AssignVariableOp", &[v.handle, p], &[], a).unwrap();
    }
    let saver = Saver::new(&b, None, SaverOptions::default().with_max_to_keep(2)).unwrap();
    (b.graph(), saver)
}

/// Run by `killed_saves_leave_restorable_checkpoints` in a child process (this test binary,
/// with FF_CRASH_DIR set): saves forever, continuing after the latest checkpoint's step.
#[test]
fn crash_child_saves_until_killed() {
    let Ok(dir) = std::env::var("FF_CRASH_DIR") else { return };
    let dir = PathBuf::from(dir);
    let (graph, mut saver) = crash_model();
    let sess = Session::new(graph, SessionOptions::default()).unwrap();
    let mut step = match latest_checkpoint(&dir).unwrap() {
        Some(p) => p.to_string_lossy().rsplit('-').next().unwrap().parse::<i64>().unwrap() + 1,
        None => 1,
    };
    loop {
        let big = Tensor::from_vec(&[500_000], vec![step as f32; 500_000]).unwrap();
        sess.run(
            &[("set_big_value:0", big), ("set_step_value:0", Tensor::scalar(step))],
            &[],
            &["set_big", "set_step"],
        )
        .unwrap();
        saver.save(&sess, dir.join("model.ckpt"), Some(step)).unwrap();
        step += 1;
    }
}

/// Crash safety: a saving process killed (SIGKILL) at random moments, 40 times, always
/// leaves a valid `checkpoint` file whose checkpoints all restore with the values of the
/// step they are named after, and every `.index` on disk is complete.
#[test]
fn killed_saves_leave_restorable_checkpoints() {
    use std::process::{Command, Stdio};
    let dir = tmp("crash");
    let exe = std::env::current_exe().unwrap();
    let (graph, saver) = crash_model();
    let mut rng = ferroflow::tensor::rng::Rng::new(0x9e37_79b9_7f4a_7c15);
    let mut restored_steps = Vec::new();
    for round in 0..40 {
        let mut child = Command::new(&exe)
            .args(["--exact", "crash_child_saves_until_killed", "--test-threads=1", "--nocapture"])
            .env("FF_CRASH_DIR", &dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_micros(20_000 + rng.next_u64() % 180_000));
        child.kill().unwrap();
        child.wait().unwrap();
        let Some(st) = read_checkpoint_state(&dir).unwrap() else { continue };
        let latest = latest_checkpoint(&dir).unwrap().unwrap_or_else(|| panic!("round {round}: {st:?}"));
        for p in &st.all_model_checkpoint_paths {
            let prefix = if Path::new(p).is_absolute() { PathBuf::from(p) } else { dir.join(p) };
            let step: i64 = p.rsplit('-').next().unwrap().parse().unwrap();
            let sess = Session::new(graph.clone(), SessionOptions::default()).unwrap();
            saver.restore(&sess, &prefix).unwrap_or_else(|e| panic!("round {round}: {}: {e}", prefix.display()));
            let v = sess.resources().snapshot();
            assert_eq!(v["localhost/step"].scalar_value::<i64>().unwrap(), step);
            assert!(v["localhost/big"].as_slice::<f32>().unwrap().iter().all(|&x| x == step as f32));
            if prefix == latest {
                restored_steps.push(step);
            }
        }
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            if let Some(prefix) = path.to_str().and_then(|s| s.strip_suffix(".index")) {
                let r = ferroflow::checkpoint::BundleReader::open(Path::new(prefix)).unwrap();
                for name in r.entries().keys() {
                    r.read(name).unwrap_or_else(|e| panic!("round {round}: {e}"));
                }
            }
        }
    }
    println!("latest step after each kill: {restored_steps:?}");
    // The next save clears the temporary files the killed processes left.
    let sess = Session::new(graph.clone(), SessionOptions::default()).unwrap();
    let mut saver = crash_model().1;
    saver.restore(&sess, latest_checkpoint(&dir).unwrap().unwrap()).unwrap();
    saver.save(&sess, dir.join("model.ckpt"), Some(1_000_000)).unwrap();
    let stray: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert!(stray.is_empty(), "{stray:?}");
    // The child got far enough to save in most rounds, and steps only go forward.
    assert!(restored_steps.len() >= 20, "{restored_steps:?}");
    assert!(restored_steps.windows(2).all(|w| w[0] <= w[1]), "{restored_steps:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// TensorFlow 1's ref variables (VariableV2, Assign, ApplyAdam, AssignAdd, `V/read`): a TF1
/// Saver's `.meta` and checkpoint import (ref variables run as resource variables), restore,
/// give TensorFlow's accuracy exactly, and one more Adam step gives TensorFlow's variables.
#[test]
fn tensorflows_ref_variable_model_restores_and_trains_like_tensorflow() {
    let f = restore_tf_fixture("seed_003_ref");
    let raw = read_meta_graph(&meta_path(&f.prefix)).unwrap();
    assert!(raw.graph_def.as_ref().unwrap().node.iter().any(|n| n.op == "VariableV2"));
    assert_eq!(f.imported.graph.node(f.imported.graph.find("layer_0/kernel").unwrap()).op, "VarHandleOp");
    assert_eq!(f.accuracy(), f.expected["accuracy:0"].scalar_value::<f32>().unwrap());
    f.step_matches_tensorflow();
}

/// TensorFlow 2.21's default for tf.compat.v1 code: dropout's tf.cond is a functional If
/// (cond_v2) whose branches hand intermediates to the gradient as variant Optionals. The
/// .meta imports, restores, gives TensorFlow's accuracy exactly, one more Adam step (dropout
/// off) gives TensorFlow's variables, and a step with dropout on runs the gradient through
/// OptionalGetValue.
#[test]
fn tensorflows_cond_v2_model_restores_and_trains_like_tensorflow() {
    let f = restore_tf_fixture("seed_003_v2");
    let ops: std::collections::BTreeSet<&str> = f.imported.graph.nodes().iter().map(|n| n.op.as_str()).collect();
    assert!(ops.contains("If") && !ops.contains("Switch"), "{ops:?}");
    assert_eq!(f.accuracy(), f.expected["accuracy:0"].scalar_value::<f32>().unwrap());
    f.step_matches_tensorflow();
    let step = f.first_batch(true);
    f.sess.run(&step, &[], &["Adam"]).unwrap();
    let gs = f.sess.run(&[], &["global_step/Read/ReadVariableOp:0"], &[]).unwrap()[0].scalar_value::<i64>().unwrap();
    assert_eq!(gs, 52);
}

impl TfFixture {
    /// The first 100 training digits as a batch.
    fn first_batch(&self, training: bool) -> [(&'static str, Tensor); 3] {
        let idx: Vec<usize> = (0..100).collect();
        let m = &self.mnist;
        let x = ferroflow::train::model::gather_rows(&m.train.images, &idx).unwrap();
        let y = ferroflow::train::model::gather_rows(&m.train.one_hot(10).unwrap(), &idx).unwrap();
        [("inputs:0", x), ("outputs:0", y), ("is_training:0", Tensor::scalar(training))]
    }

    /// One Adam step on the first batch with dropout off: every variable equals TensorFlow's.
    fn step_matches_tensorflow(&self) {
        self.sess.run(&self.first_batch(false), &[], &["Adam"]).unwrap();
        let now = self.sess.resources().snapshot();
        let mut compared = 0;
        for (name, want) in self.expected.iter().filter(|(n, _)| *n != "accuracy:0") {
            let got = &now[&format!("localhost/{name}")];
            ferroflow::testing::compare(got, want, 1e-5, 1e-6).unwrap_or_else(|e| panic!("{name}: {e}"));
            compared += 1;
        }
        assert_eq!(compared, 21);
    }
}

/// The facade compiles in copies of a few fixtures (the demo's TensorFlow MLP, the fuzzing
/// seed's checkpoint index) so that its package is self-contained: they must stay the
/// fixtures `scripts/` regenerates.
#[test]
fn the_facades_bundled_fixtures_are_the_checked_in_ones() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for (copy, fixture) in [
        ("mlp.pb", "tf/mlp.pb"),
        ("mlp.inputs.npz", "tf/mlp.inputs.npz"),
        ("mlp.expected.npz", "tf/mlp.expected.npz"),
        ("mixed.index", "tf/checkpoints/mixed.index"),
    ] {
        let a = std::fs::read(root.join("data").join(copy)).unwrap();
        let b = std::fs::read(root.join("../../fixtures").join(fixture)).unwrap();
        assert!(a == b, "crates/ferroflow/data/{copy} differs from fixtures/{fixture}: copy it again");
    }
}
