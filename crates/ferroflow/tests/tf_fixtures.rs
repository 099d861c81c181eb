//! Every TensorFlow fixture runs through the Session API (from both its .pb and its .pbtxt)
//! and matches TensorFlow's outputs; every fixture survives an export/re-import round trip.
use std::path::{Path, PathBuf};

use ferroflow::prelude::*;
use ferroflow::tensor::npy;
use ferroflow::testing::{compare, read_manifest, Fixture};

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tf")
}

fn fixtures() -> Vec<Fixture> {
    read_manifest(&fixtures_dir().join("MANIFEST")).unwrap()
}

fn run_fixture(graph: Graph, fx: &Fixture, opts: SessionOptions) {
    let dir = fixtures_dir();
    let inputs = npy::read_npz(&dir.join(format!("{}.inputs.npz", fx.name))).unwrap();
    let expected = npy::read_npz(&dir.join(format!("{}.expected.npz", fx.name))).unwrap();
    let sess = Session::new(graph, opts).unwrap();
    let feeds: Vec<(&str, Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let fetches: Vec<&str> = expected.iter().map(|(n, _)| n.as_str()).collect();
    let got = sess.run(&feeds, &fetches, &[]).unwrap_or_else(|e| panic!("{}: {e}", fx.name));
    for ((name, want), got) in expected.iter().zip(&got) {
        compare(got, want, fx.rtol, fx.atol).unwrap_or_else(|e| panic!("{} {name}: {e}", fx.name));
    }
}

#[test]
fn every_fixture_matches_tensorflow_from_pb_and_pbtxt() {
    let all = fixtures();
    assert!(all.len() >= 8, "manifest lists {} fixtures", all.len());
    for fx in &all {
        for ext in ["pb", "pbtxt"] {
            let g = ferroflow::load_graph(&fixtures_dir().join(format!("{}.{ext}", fx.name))).unwrap();
            for threads in [1, 2] {
                run_fixture(
                    g.clone(),
                    fx,
                    SessionOptions::default().with_inter_op_threads(threads).with_intra_op_threads(threads),
                );
            }
        }
    }
}

#[test]
fn pb_and_pbtxt_from_tensorflow_parse_to_the_same_graph_def() {
    for fx in fixtures() {
        let dir = fixtures_dir();
        let a = ferroflow::graph::io::read_graph_def(&dir.join(format!("{}.pb", fx.name))).unwrap();
        let b = ferroflow::graph::io::read_graph_def(&dir.join(format!("{}.pbtxt", fx.name))).unwrap();
        assert_eq!(a, b, "{}", fx.name);
    }
}

#[test]
fn export_and_reimport_gives_identical_graphs_and_outputs() {
    for fx in fixtures() {
        let path = fixtures_dir().join(format!("{}.pb", fx.name));
        let original = ferroflow::graph::io::read_graph_def(&path).unwrap();
        let g = ferroflow::ops::import_graph_def(&original).unwrap();
        let exported = g.to_graph_def();
        assert_eq!(exported.node, original.node, "{}: nodes changed on export", fx.name);
        let text = ferroflow::proto::print_text(&exported);
        let reparsed: ferroflow::proto::GraphDef = ferroflow::proto::parse_text(&text, "exported").unwrap();
        assert_eq!(reparsed, exported, "{}: text round trip", fx.name);
        let bytes = ferroflow::proto::encode(&exported);
        assert_eq!(ferroflow::proto::decode::<ferroflow::proto::GraphDef>(&bytes, "exported").unwrap(), exported);
        run_fixture(ferroflow::ops::import_graph_def(&reparsed).unwrap(), &fx, SessionOptions::default());
    }
}

#[test]
fn fixtures_cover_every_core_op() {
    let covered: std::collections::BTreeSet<String> = fixtures().into_iter().flat_map(|f| f.ops).collect();
    let required = [
        "Const",
        "Placeholder",
        "PlaceholderWithDefault",
        "Identity",
        "IdentityN",
        "NoOp",
        "Add",
        "AddV2",
        "Sub",
        "Mul",
        "RealDiv",
        "Neg",
        "Square",
        "Sqrt",
        "Rsqrt",
        "Exp",
        "Log",
        "Tanh",
        "Sigmoid",
        "Relu",
        "Maximum",
        "Minimum",
        "MatMul",
        "BiasAdd",
        "Softmax",
        "LogSoftmax",
        "Sum",
        "Mean",
        "Max",
        "ArgMax",
        "Equal",
        "Cast",
        "Reshape",
        "Shape",
        "ExpandDims",
        "Squeeze",
        "Fill",
        "ZerosLike",
        "OnesLike",
        "Pack",
        "ConcatV2",
    ];
    let missing: Vec<&str> = required.iter().copied().filter(|op| !covered.contains(*op)).collect();
    assert!(missing.is_empty(), "ops without a TensorFlow fixture: {missing:?}");
}

#[test]
fn every_kernel_is_exercised_by_a_tensorflow_fixture() {
    let mut covered: std::collections::BTreeSet<String> = fixtures().into_iter().flat_map(|f| f.ops).collect();
    // Grappler's optimized fixture graphs hold TensorFlow's fused ops (tests/optimizer.rs runs them).
    for e in std::fs::read_dir(fixtures_dir().join("grappler")).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "pb") {
            covered.extend(ferroflow::load_graph(&path).unwrap().nodes().iter().map(|n| n.op.clone()));
        }
    }
    // TensorFlow's partition graphs (tests/partitions.rs merges and runs them).
    for e in std::fs::read_dir(fixtures_dir().join("partitions")).unwrap() {
        let path = e.unwrap().path();
        if path.file_name().is_some_and(|n| n.to_string_lossy().starts_with("_job_")) {
            let def = ferroflow::graph::io::read_graph_def(&path).unwrap();
            covered.extend(def.node.iter().map(|n| n.op.clone()));
        }
    }
    // TensorFlow's training graphs (tests/training.rs runs them for 3 steps against TF's values
    // and tests the random ops statistically against TF's samples).
    for e in std::fs::read_dir(fixtures_dir().join("training")).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "pb") {
            covered.extend(ferroflow::load_graph(&path).unwrap().nodes().iter().map(|n| n.op.clone()));
        }
    }
    // TensorFlow's TF1 Saver graph (SaveV2/RestoreV2; tests/checkpoints.rs restores TF's
    // checkpoint through it, saves through it and compares what TensorFlow reads back).
    // The cond_v2 one's functions hold the Optional ops (its test trains through them).
    for e in std::fs::read_dir(fixtures_dir().join("checkpoints")).unwrap() {
        let dir = e.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(&dir).unwrap() {
            let path = f.unwrap().path();
            if path.extension().is_some_and(|x| x == "meta") {
                let def = ferroflow::train::meta_graph::read_meta_graph(&path).unwrap().graph_def.unwrap();
                covered.extend(def.node.iter().map(|n| n.op.clone()));
                for func in def.library.iter().flat_map(|l| &l.function) {
                    covered.extend(func.node_def.iter().map(|n| n.op.clone()));
                }
            }
        }
    }
    // TensorFlow's input-pipeline graphs (tests/image_ops.rs and the CLI test run them).
    for e in std::fs::read_dir(fixtures_dir().join("../data")).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "pb") {
            covered.extend(ferroflow::load_graph(&path).unwrap().nodes().iter().map(|n| n.op.clone()));
        }
    }
    // Keras's recurrent layers frozen by TensorFlow, loop bodies in their function libraries,
    // and the list ops graph (tests/recurrent.rs runs them against TF's outputs); Keras'
    // spatial layers and TensorFlow's 3-D gradients (tests/spatial.rs runs them), with the
    // functions a frozen grouped convolution calls; Keras's training losses (tests/
    // layer_training.rs trains them to Keras's losses); TensorFlow's tf.io.parse_example graphs
    // (tests/parsing.rs runs them).
    for e in ["../recurrent", "../spatial", "../detection", "../training", "../parsing"]
        .iter()
        .flat_map(|d| std::fs::read_dir(fixtures_dir().join(d)).unwrap())
    {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "pb") {
            let def = ferroflow::graph::io::read_graph_def(&path).unwrap();
            covered.extend(def.node.iter().map(|n| n.op.clone()));
            for func in def.library.iter().flat_map(|l| &l.function) {
                covered.extend(func.node_def.iter().map(|n| n.op.clone()));
            }
        }
    }
    // ferroflow's own fused op: no TensorFlow counterpart; tests/optimizer.rs checks it is
    // bit-identical to the unfused kernels it replaces.
    covered.insert("_FusedElementwise".into());
    // A broadcast's receiving end needs a second rank (in a group of one TensorFlow has no
    // sender for it); `collectives` covers its sending end, and tests/distributed.rs its
    // error when no rank sends.
    covered.insert("CollectiveBcastRecvV2".into());
    // Keras' MobileNetV2 as ferroflow optimizes it (tests/real_models.rs runs it against
    // TensorFlow's logits with the optimizer on): `_FusedDepthwiseConv2dElementwise`.
    let mobilenet = ferroflow::load_graph(&fixtures_dir().join("../models/mobilenet_v2_035_96.pb")).unwrap();
    let item =
        ferroflow::optimize::Item { feeds: vec!["x:0".into()], fetches: vec!["logits:0".into()], ..Default::default() };
    let optimized = ferroflow::optimize::MetaOptimizer::new(Default::default()).optimize(&mobilenet, &item).unwrap();
    covered.extend(optimized.graph.nodes().iter().map(|n| n.op.clone()));
    let kernels = ferroflow::kernels::KernelRegistry::global().ops();
    let missing: Vec<&str> = kernels.iter().copied().filter(|op| !covered.contains(*op)).collect();
    assert!(missing.is_empty(), "kernels without a TensorFlow fixture: {missing:?}");
    println!("{} op types have CPU kernels, all checked against TensorFlow", kernels.len());
}

#[test]
fn what_runs_from_tensorflow_pbtxt_gives_nine() {
    let g = ferroflow::load_graph(&fixtures_dir().join("seed_000.pbtxt")).unwrap();
    let expected = npy::read_npz(&fixtures_dir().join("seed_000.expected.npz")).unwrap();
    let sess = Session::new(g, SessionOptions::default()).unwrap();
    let (name, want) = &expected[0];
    assert_eq!(name, "Mul:0");
    let got = sess.run(&[], &[name], &[]).unwrap();
    assert_eq!(got[0].scalar_value::<f32>().unwrap(), 9.0);
    assert_eq!(&got[0], want);
}

#[test]
fn what_runs_built_with_the_rust_api_gives_nine() {
    let (graph, fetch) = ferroflow::workflows::what_runs::graph().unwrap();
    let sess = Session::new(graph.clone(), SessionOptions::default()).unwrap();
    assert_eq!(sess.run(&[], &[&fetch], &[]).unwrap()[0].scalar_value::<f32>().unwrap(), 9.0);
    // The same node names TensorFlow gives the same graph.
    let tf = ferroflow::load_graph(&fixtures_dir().join("seed_000.pbtxt")).unwrap();
    let ops = |g: &Graph| {
        g.nodes().iter().filter(|n| n.op != "Const").map(|n| (n.name.clone(), n.op.clone())).collect::<Vec<_>>()
    };
    assert_eq!(ops(&graph), ops(&tf));
}

#[test]
fn edge_case_graph_def_round_trips_exactly() {
    // Written by TensorFlow: every AttrValue case, NaN/inf/denormal floats, all 256 byte
    // values, UTF-8, an empty list, a function library with arg attrs.
    let dir = fixtures_dir();
    let pb = ferroflow::graph::io::read_graph_def(&dir.join("edge.pb")).unwrap();
    let txt = ferroflow::graph::io::read_graph_def(&dir.join("edge.pbtxt")).unwrap();
    let bytes = ferroflow::proto::encode(&pb);
    assert_eq!(bytes, ferroflow::proto::encode(&txt), "text and binary parse to the same message");
    // Not byte-equal to TensorFlow's file: upb orders map keys where one is a prefix of
    // another differently and writes default map keys (see reference/protobuf-stack.md);
    // equal by value, which scripts/interop_check.py confirms with TensorFlow itself.
    let g = ferroflow::ops::import_graph_def(&pb).unwrap();
    let exported = g.to_graph_def();
    assert_eq!(ferroflow::proto::encode(&exported), bytes);
    let printed = ferroflow::proto::print_text(&exported);
    let reparsed: ferroflow::proto::GraphDef = ferroflow::proto::parse_text(&printed, "printed").unwrap();
    assert_eq!(ferroflow::proto::encode(&reparsed), bytes);
}
