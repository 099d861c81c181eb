//! `ferroflow convert MODEL.meta --checkpoint DIR --fetch NAME... -o frozen.pb`: TensorFlow's
//! meta graphs and checkpoints (resource variables, TF1 ref variables, cond_v2's functional
//! `If`) frozen into GraphDefs without variables, which `ferroflow run` runs to the outputs of
//! the meta graph restored from its checkpoint. (`scripts/interop_check.py freeze` has
//! TensorFlow run them.)
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ferroflow::tensor::{npy, Tensor};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ferroflow")).args(args).output().expect("run ferroflow")
}

fn ok(args: &[&str]) -> String {
    let o = run(args);
    assert!(o.status.success(), "ferroflow {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn error_of(args: &[&str]) -> String {
    let o = run(args);
    assert!(!o.status.success(), "ferroflow {args:?} should fail");
    let e = String::from_utf8_lossy(&o.stderr).into_owned();
    // One error line, last (progress lines such as "restored N variables" may come first).
    assert!(!e.contains("panicked") && e.lines().filter(|l| l.starts_with("error")).count() == 1, "{e}");
    assert!(e.lines().last().is_some_and(|l| l.starts_with("error")), "{e}");
    e
}

fn checkpoints() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tf/checkpoints")
}

const FETCHES: [&str; 2] = ["out_layer/Softmax:0", "accuracy:0"];

#[test]
fn frozen_meta_graphs_run_to_the_restored_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let m = ferroflow::train::mnist::load(&ferroflow::train::mnist::bundled_dir()).unwrap();
    let feeds = d("feeds.npz");
    npy::write_npz(
        Path::new(&feeds),
        &[
            ("inputs:0".into(), m.test.images.clone()),
            ("outputs:0".into(), m.test.one_hot(10).unwrap()),
            ("is_training:0".into(), Tensor::scalar(false)),
        ],
    )
    .unwrap();
    for (name, step) in [("seed_003", 200), ("seed_003_ref", 50), ("seed_003_v2", 50)] {
        let ckpt = checkpoints().join(name);
        let meta = ckpt.join(format!("model.ckpt-{step}.meta"));
        let (ckpt, meta) = (ckpt.to_str().unwrap(), meta.to_str().unwrap());
        let fetch_args: Vec<&str> = FETCHES.iter().flat_map(|f| ["--fetch", f]).collect();
        let restored = d(&format!("{name}.restored.npz"));
        ok(&[&["run", meta, "--checkpoint", ckpt, "--inputs", &feeds, "-o", &restored][..], &fetch_args].concat());
        for ext in ["pb", "pbtxt"] {
            let frozen = d(&format!("{name}.frozen.{ext}"));
            let said = ok(&[&["convert", meta, "--checkpoint", ckpt, "-o", &frozen][..], &fetch_args].concat());
            assert!(
                said.contains("6 variables") && said.contains("feed  inputs:0, outputs:0, is_training:0"),
                "{said}"
            );
            // No variable left: each is a Const under its own name, each read an Identity.
            let def = ferroflow::graph::io::read_graph_def(Path::new(&frozen)).unwrap();
            let op_of = |n: &str| def.node.iter().find(|x| x.name == n).map(|x| x.op.as_str());
            for n in &def.node {
                assert!(
                    !["VarHandleOp", "VariableV2", "ReadVariableOp", "AssignVariableOp", "RestoreV2", "SaveV2"]
                        .contains(&n.op.as_str()),
                    "{name}: {} is still a {}",
                    n.name,
                    n.op
                );
            }
            assert_eq!(op_of("layer_0/kernel"), Some("Const"), "{name}");
            assert_eq!(op_of("out_layer/bias"), Some("Const"), "{name}");
            assert_eq!(op_of("global_step"), None, "{name}: what the fetches do not need is pruned");
            // Run: the same outputs as the meta graph restored from the checkpoint.
            let out = d(&format!("{name}.frozen.{ext}.npz"));
            ok(&[&["run", &frozen, "--inputs", &feeds, "-o", &out][..], &fetch_args].concat());
            let (got, want) = (npy::read_npz(Path::new(&out)).unwrap(), npy::read_npz(Path::new(&restored)).unwrap());
            assert_eq!(got[1].1, want[1].1, "{name}: accuracy:0");
            ferroflow::testing::compare(&got[0].1, &want[0].1, 1e-6, 1e-7).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        // TensorFlow's accuracy after restoring, too.
        let expected = npy::read_npz(&checkpoints().join(name).join("expected.npz")).unwrap();
        let acc = &expected.iter().find(|(k, _)| k == "accuracy:0").unwrap().1;
        assert_eq!(&npy::read_npz(Path::new(&restored)).unwrap()[1].1, acc, "{name}");
    }
}

#[test]
fn freezing_needs_fetches_that_only_read_variables() {
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let ckpt = checkpoints().join("seed_003");
    let meta = ckpt.join("model.ckpt-200.meta");
    let (ckpt, meta) = (ckpt.to_str().unwrap(), meta.to_str().unwrap());
    let out = d("f.pb");
    // The checkpoint beside the .meta is the default.
    let said = ok(&["convert", meta, "--fetch", "accuracy", &out]);
    assert!(said.contains("model.ckpt-200 frozen into"), "{said}");
    let e = error_of(&["convert", meta, "--checkpoint", ckpt, "-o", &out]);
    assert!(e.contains("--fetch"), "{e}");
    let e = error_of(&["convert", meta, "--checkpoint", ckpt, "--fetch", "nope:0", "-o", &out]);
    assert!(e.contains("no node 'nope'"), "{e}");
    // The training op assigns the variables: nothing a frozen graph can do.
    let e = error_of(&["convert", meta, "--checkpoint", ckpt, "--fetch", "Adam", "-o", &out]);
    assert!(e.contains("other than to read it") && e.contains("ResourceApplyAdam"), "{e}");
    // A .meta alone, with no checkpoint beside it.
    let lone = d("model.meta");
    std::fs::copy(meta, &lone).unwrap();
    let e = error_of(&["convert", &lone, "--fetch", "accuracy:0", "-o", &out]);
    assert!(e.contains("--checkpoint"), "{e}");
    // --checkpoint and --fetch are for meta graphs.
    let g = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tf/seed_000.pbtxt");
    let e = error_of(&["convert", g.to_str().unwrap(), "--fetch", "Mul:0", "-o", &out]);
    assert!(e.contains("freeze a meta graph"), "{e}");
}
