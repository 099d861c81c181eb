//! Weights-only files read into a model built from its config, as Keras's `load_weights`:
//! Keras 3's `.weights.h5` (by position in Keras's layer order) and Keras 2's `save_weights`
//! `.h5` (by layer name), each against Keras's outputs with those weights; and ferroflow's
//! own `.weights.h5` and `.keras` read back unchanged.
use std::path::{Path, PathBuf};

use ferroflow_keras::KerasModel;
use ferroflow_tensor::{npy, Tensor};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/keras").join(name)
}

fn check(model: &KerasModel, npz: &str) {
    let arrays = npy::read_npz(&fixture(npz)).unwrap();
    let get = |k: &str| arrays.iter().find(|(n, _)| n == k).unwrap().1.clone();
    let p = model.predictor(Default::default()).unwrap();
    let out = p.predict(&[get("x")]).unwrap();
    let (a, b) = (out[0].as_slice::<f32>().unwrap(), get("out"));
    let b = b.as_slice::<f32>().unwrap();
    let scale = b.iter().fold(1f32, |m, v| m.max(v.abs()));
    let d = a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max) / scale;
    assert!(d <= 1e-5, "{npz}: {d:e}");
}

#[test]
fn keras3_weights_h5_loads_into_the_model_of_its_config() {
    let mut m = KerasModel::load(fixture("transfer.keras")).unwrap();
    m.load_weights(fixture("transfer.weights.h5")).unwrap();
    check(&m, "transfer_reweighted.npz");
}

#[test]
fn keras2_save_weights_h5_loads_by_layer_name() {
    let mut m = KerasModel::load(fixture("legacy_cnn.h5")).unwrap();
    check(&m, "legacy_cnn.npz");
    m.load_weights(fixture("legacy_cnn.weights_only.h5")).unwrap();
    check(&m, "legacy_cnn_reweighted.npz");
}

#[test]
fn what_ferroflow_writes_reads_back_bit_for_bit() {
    let m = KerasModel::load(fixture("shared.keras")).unwrap();
    let p = m.predictor(Default::default()).unwrap();
    let w = p.weights().unwrap();
    let dir = tempfile::tempdir().unwrap();
    m.save(dir.path().join("m.keras"), Some(&w)).unwrap();
    m.save_weights(dir.path().join("m.weights.h5"), Some(&w)).unwrap();
    let back = KerasModel::load(dir.path().join("m.keras")).unwrap();
    assert_eq!(back.weights().unwrap(), &w);
    assert_eq!(back.config(), m.config());
    let mut again = KerasModel::load(fixture("shared.keras")).unwrap();
    again.load_weights(dir.path().join("m.weights.h5")).unwrap();
    assert_eq!(again.weights().unwrap(), &w);
    let zero: Vec<Tensor> = Vec::new();
    assert!(p.predict(&zero).is_err(), "a call with the wrong number of inputs is an error");
}
