//! Training coverage (issue 43): a tiny Keras model per layer kind (LSTM, GRU, SimpleRNN, an
//! LSTM masked by `Embedding(mask_zero=True)`,
//! Bidirectional, MultiHeadAttention, LayerNormalization, GroupNormalization, Conv1D/3D, the
//! transposed convolutions), its training loss frozen by TensorFlow as a function of the
//! batch and the weights (`scripts/make_training_fixtures.py`). ferroflow differentiates the
//! loss (recurrent layers through their `While` loops), checks the gradients at Keras's
//! initial weights against TensorFlow's, and trains 5 SGD steps on Keras's batches: each
//! step's loss equals Keras's `train_on_batch` loss within 1e-4 relative.
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ferroflow::autodiff::gradients;
use ferroflow::prelude::*;
use ferroflow::tensor::npy;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/training")
}

fn options(threads: usize, optimize: bool) -> SessionOptions {
    let mut o = SessionOptions::default().with_inter_op_threads(threads).with_intra_op_threads(threads);
    o.optimizer.enabled = optimize;
    o
}

fn floats(t: &Tensor) -> &[f32] {
    t.as_slice::<f32>().unwrap()
}

/// Trains `name` for 5 steps; returns the worst relative loss difference.
fn train(name: &str, threads: usize, optimize: bool) -> f64 {
    let want: HashMap<String, Tensor> =
        npy::read_npz(&dir().join(format!("{name}.npz"))).unwrap().into_iter().collect();
    let graph = ferroflow::load_graph(&dir().join(format!("{name}.pb"))).unwrap();
    let n = (0..).take_while(|i| want.contains_key(&format!("w{i}"))).count();
    let s = Scope::from_graph(graph);
    let loss = s.with_graph(|g| g.output_by_name("loss:0")).unwrap();
    let ws: Vec<Output> = (0..n).map(|i| s.with_graph(|g| g.output_by_name(&format!("w{i}:0"))).unwrap()).collect();
    let gs = gradients(&s, &[loss], &ws, None).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut fetch = vec!["loss:0".to_string()];
    for (i, g) in gs.iter().enumerate() {
        let g = g.unwrap_or_else(|| panic!("{name}: no gradient reaches w{i}"));
        fetch.push(s.with_graph(|gr| gr.output_name(g)));
    }
    let fetch: Vec<&str> = fetch.iter().map(String::as_str).collect();
    let sess = Session::new(s.graph(), options(threads, optimize)).unwrap();
    let lr = want["lr"].scalar_value::<f32>().unwrap();
    let mut w: Vec<Tensor> = (0..n).map(|i| want[&format!("w{i}")].clone()).collect();
    let keras = floats(&want["losses"]).to_vec();
    let mut worst = 0f64;
    for (step, &keras_loss) in keras.iter().enumerate() {
        let names: Vec<String> = (0..n).map(|i| format!("w{i}:0")).collect();
        let mut feeds: Vec<(&str, Tensor)> =
            vec![("x:0", want[&format!("x{step}")].clone()), ("y:0", want[&format!("y{step}")].clone())];
        feeds.extend(names.iter().map(String::as_str).zip(w.iter().cloned()));
        let out = sess.run(&feeds, &fetch, &[]).unwrap_or_else(|e| panic!("{name} step {step}: {e}"));
        let got = floats(&out[0])[0];
        let rel = ((got - keras_loss).abs() / keras_loss.abs().max(1e-6)) as f64;
        assert!(
            rel <= 1e-4,
            "{name} (threads {threads}, optimizer {optimize}) step {step}: loss {got}, Keras {keras_loss} (relative {rel:e})"
        );
        worst = worst.max(rel);
        if step == 0 {
            for i in 0..n {
                let (g, tf) = (floats(&out[i + 1]), floats(&want[&format!("g{i}")]));
                let scale = tf.iter().fold(1e-3f32, |m, v| m.max(v.abs()));
                let diff = g.iter().zip(tf).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
                assert!(diff <= 1e-4 * scale.max(1.0), "{name}: gradient of w{i}: max |diff| {diff} (scale {scale})");
            }
        }
        for i in 0..n {
            let upd: Vec<f32> = floats(&w[i]).iter().zip(floats(&out[i + 1])).map(|(a, g)| a - lr * g).collect();
            w[i] = Tensor::from_vec(w[i].dims(), upd).unwrap();
        }
    }
    worst
}

fn check(models: &[&str]) {
    for name in models {
        for (threads, optimize) in [(1, true), (2, false)] {
            let worst = train(name, threads, optimize);
            eprintln!("{name}: threads {threads}, optimizer {optimize}: 5 steps, worst relative loss diff {worst:e}");
        }
    }
}

#[test]
fn recurrent_layers_train_through_their_while_loops_as_keras_does() {
    check(&["lstm", "lstm_sequences", "gru", "gru_reset_before", "simple_rnn", "bidirectional", "masked_lstm"]);
}

#[test]
fn attention_and_normalization_layers_train_as_keras_does() {
    check(&["mha", "mha_causal", "layer_norm", "group_norm"]);
}

#[test]
fn convolution_variants_train_as_keras_does() {
    check(&["conv1d", "conv3d", "conv2d_transpose", "conv3d_transpose"]);
}

/// A loss written with tf.function control flow (a `StatelessIf` on the batch, whose branches
/// both run across the batches, and a `StatelessWhile` nested in another, carrying weights):
/// 5 SGD steps give TensorFlow's `GradientTape` losses.
#[test]
fn tf_function_conditionals_and_nested_loops_train_as_tensorflow_does() {
    check(&["control_flow"]);
}
