//! SavedModel signature calls: the Keras CNN with BatchNormalization that TensorFlow's
//! `model.export()` wrote (fixtures/saved_model/keras_cnn), `serving_default` at batch 1 and
//! 32 through `SavedModel::call` (plan cached after the first call);
//! scripts/bench_saved_model.py times TensorFlow loading the same directory.
use std::path::Path;

use criterion::{criterion_group, criterion_main, Criterion};
use ferroflow::prelude::*;
use ferroflow::train::saved_model::SavedModel;

fn keras_cnn(c: &mut Criterion) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/saved_model/keras_cnn");
    let model = SavedModel::load(&dir, &["serve"], SessionOptions::default()).unwrap();
    let mut group = c.benchmark_group("saved_model_keras_cnn");
    for batch in [1usize, 32] {
        let n = batch * 32 * 32 * 3;
        let x = Tensor::from_vec(&[batch, 32, 32, 3], (0..n).map(|i| ((i * 7919) % 1000) as f32 / 1000.0).collect())
            .unwrap();
        group.bench_function(format!("batch_{batch}"), |b| {
            b.iter(|| model.call("serving_default", &[("keras_tensor", x.clone())], &[]).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, keras_cnn);
criterion_main!(benches);
