//! Keras's recurrent layers (LSTM, GRU with reset_after on and off, SimpleRNN, Bidirectional,
//! stacked, masked by an Embedding, backwards, returning states), frozen by TensorFlow
//! (`scripts/make_recurrent_fixtures.py`) as functional `While` loops over TensorLists and as
//! lowered TF1 loops, and exported as a SavedModel: each runs to TensorFlow's outputs at 1 and
//! 2 threads, with the optimizer on and off.
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ferroflow::graph::Attrs;
use ferroflow::prelude::*;
use ferroflow::proto::attr;
use ferroflow::tensor::npy;
use ferroflow::train::saved_model::SavedModel;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/recurrent")
}

fn npz(name: &str) -> HashMap<String, Tensor> {
    npy::read_npz(&dir().join(format!("{name}.npz"))).unwrap().into_iter().collect()
}

/// max |got - want|, after checking the shapes agree and the difference is within
/// 1e-4 × max(1, max |want|).
fn check(what: &str, got: &Tensor, want: &Tensor) -> f32 {
    assert_eq!(got.dims(), want.dims(), "{what}: shape");
    let w = want.as_slice::<f32>().unwrap();
    let scale = w.iter().fold(1f32, |m, v| m.max(v.abs()));
    let worst = got.as_slice::<f32>().unwrap().iter().zip(w).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    assert!(worst <= 1e-4 * scale, "{what}: max |diff| {worst} against TensorFlow (scale {scale})");
    worst
}

fn options(threads: usize, optimize: bool) -> SessionOptions {
    let mut o = SessionOptions::default().with_inter_op_threads(threads).with_intra_op_threads(threads);
    o.optimizer.enabled = optimize;
    o
}

fn run_graph(file: &str, name: &str) {
    let want = npz(name);
    let graph = ferroflow::load_graph(&dir().join(file)).unwrap();
    let fetches: Vec<String> = (0..).map(|i| format!("y{i}")).take_while(|k| want.contains_key(k)).collect();
    let fetch: Vec<String> = fetches.iter().map(|f| format!("{f}:0")).collect();
    let fetch: Vec<&str> = fetch.iter().map(String::as_str).collect();
    for (threads, optimize) in [(1, true), (2, true), (1, false), (2, false)] {
        let sess = Session::new(graph.clone(), options(threads, optimize)).unwrap();
        let got = sess.run(&[("x:0", want["x"].clone())], &fetch, &[]).unwrap_or_else(|e| panic!("{file}: {e}"));
        for (g, f) in got.iter().zip(&fetches) {
            let worst = check(&format!("{file} {f} (threads {threads}, optimizer {optimize})"), g, &want[f]);
            eprintln!("{file} {f}: threads {threads}, optimizer {optimize}: max |diff| {worst:e}");
        }
    }
}

const MODELS: &[&str] = &[
    "lstm",
    "gru",
    "gru_reset_before",
    "simple_rnn",
    "bidirectional_lstm",
    "stacked",
    "lstm_backwards",
    "gru_backwards_sequences",
    "masked_lstm",
    "masked_gru",
    "lstm_state",
];

#[test]
fn keras_recurrent_layers_as_functional_while_loops_give_tensorflow_s_outputs() {
    for name in MODELS {
        run_graph(&format!("{name}_while.pb"), name);
    }
}

#[test]
fn keras_recurrent_layers_as_lowered_loops_give_tensorflow_s_outputs() {
    for name in ["lstm", "gru", "simple_rnn"] {
        run_graph(&format!("{name}.pb"), name);
    }
}

#[test]
fn a_keras_lstm_export_runs_its_serving_signature_as_tensorflow_does() {
    let want = npz("lstm");
    for (threads, optimize) in [(1, true), (2, false)] {
        let m = SavedModel::load(&dir().join("lstm_saved"), &["serve"], options(threads, optimize)).unwrap();
        let out = m.call("serving_default", &[("keras_tensor", want["x"].clone())], &[]).unwrap();
        let worst = check("lstm_saved output_0", &out["output_0"], &want["y0"]);
        eprintln!("lstm_saved: threads {threads}, optimizer {optimize}: max |diff| {worst:e}");
    }
}

/// The list ops Keras's loops leave out (EmptyTensorList, PushBack, PopBack, Length,
/// ElementShape) on TensorFlow's graph: the stacked list and the popped item as TF's, the
/// length and element shape exactly.
#[test]
fn a_list_pushed_popped_and_measured_gives_tensorflow_s_values() {
    let want = npz("list_ops");
    let graph = ferroflow::load_graph(&dir().join("list_ops.pb")).unwrap();
    for (threads, optimize) in [(1, true), (2, false)] {
        let sess = Session::new(graph.clone(), options(threads, optimize)).unwrap();
        let got = sess.run(&[("x:0", want["x"].clone())], &["y0:0", "y1:0", "y2:0", "y3:0"], &[]).unwrap();
        check("list_ops stack", &got[0], &want["y0"]);
        check("list_ops popped", &got[1], &want["y1"]);
        assert_eq!(got[2], want["y2"], "length");
        assert_eq!(got[3], want["y3"], "element shape");
    }
}

/// A list read past its end is a one-line error naming the node, not a panic.
#[test]
fn reading_past_a_list_s_end_is_an_error_naming_the_node() {
    let s = Scope::new();
    let x = s.with_name("x").placeholder(DType::Float, &Shape::unknown()).unwrap();
    let shape = s.constant_from(&[1], &[-1i32]).unwrap();
    let mut a = Attrs::new();
    a.insert("element_dtype".into(), attr::dtype(DType::Float));
    a.insert("shape_type".into(), attr::dtype(DType::Int32));
    let list = s.add_op("TensorListFromTensor", "list", &[x, shape], &[], a.clone()).unwrap();
    let i = s.scalar(7i32).unwrap();
    a.remove("shape_type");
    s.add_op("TensorListGetItem", "item", &[Output { node: list, index: 0 }, i, shape], &[], a).unwrap();
    let sess = Session::new(s.graph(), SessionOptions::default()).unwrap();
    let x = Tensor::from_vec(&[2, 3], vec![0f32; 6]).unwrap();
    let e = sess.run(&[("x:0", x)], &["item:0"], &[]).unwrap_err().to_string();
    assert!(e.contains("'item'") && e.contains("element 7 in a list with 2 elements"), "{e}");
}

/// A list reserved (or resized by an index) past the memory limit is refused before anything
/// is allocated, naming the node.
#[test]
fn a_huge_list_reserve_is_refused_before_allocating() {
    let s = Scope::new();
    let shape = s.constant_from(&[1], &[-1i32]).unwrap();
    let n = s.with_name("n").placeholder(DType::Int32, &Shape::scalar()).unwrap();
    let mut a = Attrs::new();
    a.insert("element_dtype".into(), attr::dtype(DType::Float));
    a.insert("shape_type".into(), attr::dtype(DType::Int32));
    let list = s.add_op("TensorListReserve", "reserve", &[shape, n], &[], a).unwrap();
    s.add_op("TensorListLength", "length", &[Output { node: list, index: 0 }], &[], Attrs::new()).unwrap();
    let sess = Session::new(s.graph(), SessionOptions::default()).unwrap();
    let e = sess.run(&[("n:0", Tensor::scalar(i32::MAX))], &["length:0"], &[]).unwrap_err().to_string();
    assert!(e.contains("'reserve'") && e.contains("tensor list of 2147483647 elements"), "{e}");
    let ok = sess.run(&[("n:0", Tensor::scalar(3i32))], &["length:0"], &[]).unwrap();
    assert_eq!(ok[0].as_slice::<i32>().unwrap(), &[3]);
}
