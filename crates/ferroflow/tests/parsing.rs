//! `tf.train.Example` parsing against TensorFlow (`scripts/make_parsing_fixtures.py` →
//! `fixtures/parsing/`): `tf.io.parse_example` (ParseExampleV2) with fixed-length float, int64
//! and string features (scalar, vector, matrix; defaulted and required), padded sequence
//! features, sparse (var-len) and ragged features, over a batch, an empty batch and a scalar;
//! TF1's ParseExample and ParseSingleExample. Each frozen graph runs with 1 and 2 threads,
//! optimizer on and off, and gives TensorFlow's outputs exactly. Inputs TensorFlow refuses are
//! errors here too (never panics), and their messages name the feature and the example.
use std::path::{Path, PathBuf};

use ferroflow::prelude::*;
use ferroflow::proto::{feature, BytesList, Example, Feature, Features, FloatList, Int64List};
use ferroflow::tensor::npy;
use ferroflow::testing::{compare, read_manifest};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/parsing")
}

fn npz(file: &str) -> Vec<(String, Tensor)> {
    npy::read_npz(&dir().join(file)).unwrap()
}

fn graph(name: &str) -> ferroflow::graph::Graph {
    ferroflow::load_graph(&dir().join(format!("{name}.pb"))).unwrap()
}

/// The fixture's graph run on its inputs, the outputs compared with TensorFlow's.
fn fixture(name: &str) {
    assert!(read_manifest(&dir().join("MANIFEST")).unwrap().iter().any(|f| f.name == name), "{name}: not listed");
    let graph = graph(name);
    let inputs = npz(&format!("{name}.inputs.npz"));
    let expected = npz(&format!("{name}.expected.npz"));
    let feeds: Vec<(&str, Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let fetches: Vec<&str> = expected.iter().map(|(n, _)| n.as_str()).collect();
    for (threads, optimize) in [(1, true), (2, true), (1, false), (2, false)] {
        let mut opts = SessionOptions::default().with_inter_op_threads(threads).with_intra_op_threads(threads);
        opts.optimizer.enabled = optimize;
        let sess = Session::new(graph.clone(), opts).unwrap();
        let got = sess.run(&feeds, &fetches, &[]).unwrap_or_else(|e| panic!("{name}: {e}"));
        for ((out, want), got) in expected.iter().zip(&got) {
            compare(got, want, 0.0, 0.0)
                .unwrap_or_else(|e| panic!("{name} {out} (threads {threads}, optimizer {optimize}): {e}"));
        }
    }
}

#[test]
fn every_fixture_is_tested() {
    let tested = [
        "fixed",
        "fixed_empty_batch",
        "varlen",
        "sequence",
        "ragged",
        "scalar",
        "single",
        "parse_example_v1",
        "parse_single_example",
    ];
    for f in read_manifest(&dir().join("MANIFEST")).unwrap() {
        assert!(tested.contains(&f.name.as_str()), "{} has no test", f.name);
    }
}

/// Float, int64 and string `FixedLenFeature`s: scalar, `[2]`, `[3]` and `[2, 2]`, the missing
/// ones (and a `Feature` with no list set) filled from their defaults.
#[test]
fn fixed_length_features_match_tensorflow() {
    fixture("fixed");
    fixture("fixed_empty_batch");
}

/// `VarLenFeature`s as sparse tensors: missing, empty and typed-but-empty lists.
#[test]
fn var_len_features_are_tensorflow_s_sparse_tensors() {
    fixture("varlen");
}

/// `FixedLenSequenceFeature(allow_missing=True)`: rows padded with the default to the longest.
#[test]
fn sequence_features_are_padded_as_tensorflow_pads_them() {
    fixture("sequence");
}

/// `RaggedFeature`s: values and row splits, int32 and int64.
#[test]
fn ragged_features_match_tensorflow() {
    fixture("ragged");
}

/// One scalar serialized example (`parse_example` of a scalar, `parse_single_example`): no
/// batch dimension, sparse indices `[n, 1]`.
#[test]
fn a_scalar_example_parses_without_a_batch_dimension() {
    fixture("scalar");
    fixture("single");
}

/// TF1's ops: `ParseExample` (one scalar key input per feature, `names`) and
/// `ParseSingleExample` (keys as attrs).
#[test]
fn tf1_parse_example_and_parse_single_example_match_tensorflow() {
    fixture("parse_example_v1");
    fixture("parse_single_example");
}

fn message(graph: &ferroflow::graph::Graph, batch: Tensor) -> String {
    let fetches: Vec<String> = npz("fixed.expected.npz").into_iter().map(|(n, _)| n).collect();
    let fetches: Vec<&str> = fetches.iter().map(String::as_str).collect();
    let sess = Session::new(graph.clone(), SessionOptions::default()).unwrap();
    match sess.run(&[("serialized:0", batch)], &fetches, &[]) {
        Ok(_) => panic!("the batch parsed"),
        Err(e) => e.to_string(),
    }
}

/// The batches TensorFlow refuses (`ERRORS`: a malformed proto, a missing required feature, a
/// wrong value count, a list of the wrong kind) are errors, each naming the feature and the
/// example as TensorFlow's message does.
#[test]
fn bad_examples_are_errors_naming_the_feature() {
    let graph = graph("fixed");
    let batches: std::collections::HashMap<String, Tensor> = npz("errors.inputs.npz").into_iter().collect();
    let text = std::fs::read_to_string(dir().join("ERRORS")).unwrap();
    let mut cases = 0;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (head, tf_message) = line.split_once(" | ").unwrap();
        let [case, key, words] = head.split(' ').collect::<Vec<_>>()[..] else { panic!("bad line {line}") };
        let e = message(&graph, batches[case].clone());
        eprintln!("{case}: {e}");
        assert!(e.contains(&words.replace('_', " ")), "{case}: '{e}' (TensorFlow: '{tf_message}')");
        if key != "-" {
            assert!(e.contains(&format!("Key: {key},")) || e.contains(&format!("Feature: {key} ")), "{case}: {e}");
        }
        // TensorFlow's message names the example by index, except for a missing feature.
        if let Some(index) = tf_message.split("Index: ").nth(1) {
            let index = index.split('.').next().unwrap();
            assert!(e.contains(&format!("Index: {index}")), "{case}: {e}");
        }
        cases += 1;
    }
    assert_eq!(cases, 6);
}

fn example(features: &[(&str, feature::Kind)]) -> Vec<u8> {
    let feature = features.iter().map(|(k, v)| (k.to_string(), Feature { kind: Some(v.clone()) })).collect();
    ferroflow::proto::encode(&Example { features: Some(Features { feature }) })
}

fn batch(examples: Vec<Vec<u8>>) -> Tensor {
    Tensor::from_strings(&[examples.len()], examples).unwrap()
}

/// Hostile and odd bytes are errors, not panics or huge allocations: a length prefix claiming
/// gigabytes, truncated varints, a string where a message belongs; the example's name from
/// `names` and its index appear in the message.
#[test]
fn hostile_bytes_are_errors_and_errors_name_the_example() {
    let graph = graph("fixed");
    let good = example(&[
        ("f_vec", feature::Kind::FloatList(FloatList { value: vec![1.0, 2.0, 3.0] })),
        ("s_vec", feature::Kind::BytesList(BytesList { value: vec![b"a".to_vec(), b"b".to_vec()] })),
    ]);
    for bad in [&b"\x0a\xff\xff\xff\xff\x0f"[..], b"\x0a\x02\x0a\xff", b"\xff", b"\x0a\x03abc", b"\x0a\x80"] {
        let e = message(&graph, batch(vec![good.clone(), bad.to_vec()]));
        assert!(e.contains("Could not parse example input") && e.contains("Index: 1"), "{e}");
    }
    // A batch big enough to be decoded in parallel: the first bad example (in order) is the error.
    let mut big = vec![good.clone(); 40];
    big[17] = b"\x0a\x05abc".to_vec();
    big[31] = b"\xff".to_vec();
    for threads in [1, 4] {
        let opts = SessionOptions::default().with_intra_op_threads(threads);
        let sess = Session::new(graph.clone(), opts).unwrap();
        let e = sess.run(&[("serialized:0", batch(big.clone()))], &["Identity:0"], &[]).err().unwrap().to_string();
        assert!(e.contains("Index: 17.  Could not parse example input, value: '\\n\\x05abc'"), "{e}");
    }
    // A float_list of 10^6 values where 3 are expected: the count error, nothing padded.
    let many = example(&[("f_vec", feature::Kind::FloatList(FloatList { value: vec![0.5; 1_000_000] }))]);
    let e = message(&graph, batch(vec![many]));
    assert!(e.contains("Key: f_vec, Index: 0.  Number of float values != expected.  Values size: 1000000"), "{e}");

    // TF1's ParseExample names its examples: the wrong kind in example 1 says "Name: e1".
    let v1 = graph_v1();
    let wrong = example(&[("a", feature::Kind::Int64List(Int64List { value: vec![1, 2] }))]);
    let sess = Session::new(v1, SessionOptions::default()).unwrap();
    let e = sess
        .run(&[("serialized:0", batch(vec![good.clone(), wrong, good]))], &["Identity_6:0"], &[])
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("Name: e1, Key: a, Index: 1.  Data types don't match. Data type: int64"), "{e}");
}

fn graph_v1() -> ferroflow::graph::Graph {
    graph("parse_example_v1")
}

/// Parsing in a graph built with the op surface: shapes are inferred as TensorFlow's
/// (`[batch] + shape` for dense values, `[?, 2]`, `[?]`, `[2]` for sparse ones).
#[test]
fn shapes_are_inferred_from_the_parse_config() {
    use ferroflow::ops::{shape_inference::infer_shapes, Ops, RawOps};
    let s = Scope::new();
    let serialized = s.placeholder(DType::String, &Shape::new(vec![Some(3)])).unwrap();
    let strings = |k: &[&str]| {
        let t = Tensor::from_strings(&[k.len()], k.iter().map(|k| k.as_bytes().to_vec()).collect()).unwrap();
        s.constant(&t).unwrap()
    };
    let default = s.constant_from(&[2], &[0.0f32, 1.0]).unwrap();
    let pad = s.constant_from(&[], &[0i64]).unwrap();
    let out = s
        .parse_example_v2(
            serialized,
            strings(&[]),
            strings(&["v"]),
            strings(&["d", "q"]),
            strings(&["r"]),
            &[default, pad],
            1,
            &[DType::String],
            &[DType::Float],
            &[DType::Int64],
            &[Shape::known(&[2]), Shape::new(vec![None, Some(3)])],
        )
        .unwrap();
    let inferred = infer_shapes(&s.graph()).unwrap();
    let shapes: Vec<String> = out.iter().map(|o| inferred[o.node][o.index].to_string()).collect();
    assert_eq!(shapes, ["[?,2]", "[?]", "[2]", "[3,2]", "[3,?,3]", "[?]", "[4]"]);
}
