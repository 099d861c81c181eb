//! Keras 3 attention and transformer models (MultiHeadAttention with and without a causal
//! mask, encoder and decoder blocks, embeddings, a small BERT-like encoder and GPT-like
//! decoder), every `tf.keras.activations` function, and Keras' normalization and
//! preprocessing layers, frozen by TensorFlow (`scripts/make_attention_fixtures.py`), run to
//! TensorFlow's outputs at 1 and 2 threads, with the optimizer on and off (issue 43).
use std::collections::HashMap;
use std::path::Path;

use ferroflow::prelude::*;
use ferroflow::tensor::npy;

/// Runs fixture `name` under each configuration and compares every output TensorFlow wrote
/// (each npz entry but `x`) within 1e-4 × max(1, max |TensorFlow's output|).
fn matches_tensorflow(name: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/attention");
    let graph = ferroflow::load_graph(&dir.join(format!("{name}.pb"))).unwrap();
    let want: HashMap<String, Tensor> = npy::read_npz(&dir.join(format!("{name}.npz"))).unwrap().into_iter().collect();
    let mut outputs: Vec<&String> = want.keys().filter(|k| *k != "x").collect();
    outputs.sort();
    let fetches: Vec<String> = outputs.iter().map(|o| format!("{o}:0")).collect();
    let fetches: Vec<&str> = fetches.iter().map(String::as_str).collect();
    for (threads, optimize) in [(1, true), (2, true), (1, false), (2, false)] {
        let mut options = SessionOptions::default().with_inter_op_threads(threads).with_intra_op_threads(threads);
        options.optimizer.enabled = optimize;
        let sess = Session::new(graph.clone(), options).unwrap();
        let got = sess.run(&[("x:0", want["x"].clone())], &fetches, &[]).unwrap();
        for (out, got) in outputs.iter().zip(&got) {
            let want = &want[*out];
            assert_eq!(got.dims(), want.dims(), "{name} {out}: shape");
            let (g, w) = (got.as_slice::<f32>().unwrap(), want.as_slice::<f32>().unwrap());
            let scale = w.iter().fold(1f32, |m, v| m.max(v.abs()));
            let worst = g.iter().zip(w).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            eprintln!("{name} {out} (threads {threads}, optimizer {optimize}): max |diff| {worst:e}, scale {scale}");
            assert!(worst <= 1e-4 * scale, "{name} {out}: max |diff| {worst} against TensorFlow (scale {scale})");
        }
    }
}

#[test]
fn every_keras_activation_matches_tensorflow() {
    matches_tensorflow("activations");
}

#[test]
fn multi_head_attention_matches_tensorflow() {
    matches_tensorflow("mha");
}

#[test]
fn causal_multi_head_attention_matches_tensorflow() {
    matches_tensorflow("mha_causal");
}

#[test]
fn transformer_encoder_block_with_exact_gelu_matches_tensorflow() {
    matches_tensorflow("encoder_block");
}

#[test]
fn transformer_decoder_block_with_tanh_gelu_matches_tensorflow() {
    matches_tensorflow("decoder_block");
}

#[test]
fn token_and_learned_position_embeddings_match_tensorflow() {
    matches_tensorflow("embedding");
}

#[test]
fn bert_like_encoder_matches_tensorflow() {
    matches_tensorflow("bert");
}

#[test]
fn gpt_like_decoder_matches_tensorflow() {
    matches_tensorflow("gpt");
}

#[test]
fn normalization_layers_on_sequences_match_tensorflow() {
    matches_tensorflow("norm_1d");
}

#[test]
fn normalization_layers_on_volumes_match_tensorflow() {
    matches_tensorflow("norm_3d");
}

#[test]
fn center_crop_matches_tensorflow() {
    matches_tensorflow("crop");
}
