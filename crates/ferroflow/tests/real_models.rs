//! Keras' MobileNetV2 (alpha 0.35, 96x96, 10 classes, random weights and BatchNormalization
//! statistics), frozen by TensorFlow (`scripts/make_model_fixtures.py`), runs to TensorFlow's
//! logits at 1 and 2 threads, with the optimizer (fusions) on and off.
use std::collections::HashMap;
use std::path::Path;

use ferroflow::prelude::*;
use ferroflow::tensor::npy;

#[test]
fn mobilenet_v2_gives_tensorflow_s_logits() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models");
    let graph = ferroflow::load_graph(&dir.join("mobilenet_v2_035_96.pb")).unwrap();
    let want: HashMap<String, Tensor> =
        npy::read_npz(&dir.join("mobilenet_v2_035_96.npz")).unwrap().into_iter().collect();
    let logits = want["logits"].as_slice::<f32>().unwrap();
    let scale = logits.iter().fold(0f32, |m, v| m.max(v.abs()));
    for (threads, optimize) in [(1, true), (2, true), (2, false)] {
        let mut options = SessionOptions::default().with_inter_op_threads(threads).with_intra_op_threads(threads);
        options.optimizer.enabled = optimize;
        let sess = Session::new(graph.clone(), options).unwrap();
        let got = sess.run(&[("x:0", want["x"].clone())], &["logits:0"], &[]).unwrap();
        assert_eq!(got[0].dims(), want["logits"].dims());
        let worst =
            got[0].as_slice::<f32>().unwrap().iter().zip(logits).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        eprintln!("threads {threads}, optimizer {optimize}: max |diff| {worst:e} (logits up to {scale})");
        assert!(worst <= 2e-5 * scale.max(1e-3), "max |diff| {worst} against TensorFlow's logits (scale {scale})");
    }
}
