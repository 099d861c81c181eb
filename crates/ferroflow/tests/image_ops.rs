//! A frozen TensorFlow graph with every image op (`scripts/make_data_fixtures.py` →
//! `fixtures/data/image_ops.pb`): ReadFile, ExtractJpegShape, DecodeImage, EncodePng,
//! DecodePng, EncodeJpeg, WriteFile, DecodeJpeg, ReverseV2 and AdjustContrastv2, run by a
//! Session and compared with TensorFlow's outputs (integers and encoded bytes exact).
use std::path::Path;

use ferroflow::prelude::*;
use ferroflow::tensor::npy::read_npz;

#[test]
fn every_image_op_matches_tensorflow_in_a_frozen_graph() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/data");
    let graph = ferroflow::load_graph(&data.join("image_ops.pb")).unwrap();
    let want: std::collections::BTreeMap<String, Tensor> =
        read_npz(&data.join("image_ops.npz")).unwrap().into_iter().collect();
    let dir = tempfile::tempdir().unwrap();
    let written = dir.path().join("sub/written.jpg");
    let text = |p: &Path| Tensor::from_strings(&[], vec![p.to_string_lossy().into_owned().into_bytes()]).unwrap();
    let sess = Session::new(graph, SessionOptions::default()).unwrap();
    let names = ["shape", "decoded", "png_round_trip", "encoded", "jpeg_round_trip", "flipped", "contrast"];
    let fetches: Vec<String> = names.iter().map(|n| format!("{n}:0")).collect();
    let fetch_refs: Vec<&str> = fetches.iter().map(String::as_str).collect();
    let feeds = [("path:0", text(&data.join("flowers_tiny/tulips/tulips_01.jpg"))), ("out_path:0", text(&written))];
    let out = sess.run(&feeds, &fetch_refs, &[]).unwrap();
    for (name, got) in names.iter().zip(&out) {
        let w = &want[*name];
        match *name {
            "encoded" => {
                let bytes = &got.as_strings().unwrap()[0];
                assert_eq!(bytes.as_slice(), w.as_slice::<u8>().unwrap(), "EncodeJpeg bytes");
                assert_eq!(&std::fs::read(&written).unwrap(), bytes, "WriteFile wrote the encoded bytes");
            }
            "flipped" | "contrast" => {
                assert_eq!(got.dims(), w.dims(), "{name}");
                let d = got
                    .as_slice::<f32>()
                    .unwrap()
                    .iter()
                    .zip(w.as_slice::<f32>().unwrap())
                    .map(|(a, b)| (a - b).abs())
                    .fold(0.0f32, f32::max);
                assert!(d <= 1e-5, "{name}: differs from TensorFlow by {d}");
            }
            _ => {
                assert_eq!(got.dims(), w.dims(), "{name}");
                assert_eq!(got.as_bytes().unwrap(), w.as_bytes().unwrap(), "{name}");
            }
        }
    }
}

/// TensorFlow 2.21's `DecodeJpeg` kernel decides the format by the bytes' signature: a frozen
/// `ReadFile → DecodeJpeg → ResizeBilinear` graph fed a PNG gives TensorFlow's pixels
/// (`scripts/make_hostile_fixtures.py` → `fixtures/hostile/decode_any.*`).
#[test]
fn decode_jpeg_decodes_a_png_as_tensorflow_does() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/hostile");
    let graph = ferroflow::load_graph(&dir.join("decode_any.pbtxt")).unwrap();
    let want: std::collections::BTreeMap<String, Tensor> =
        read_npz(&dir.join("decode_any.npz")).unwrap().into_iter().collect();
    let sess = Session::new(graph, SessionOptions::default()).unwrap();
    let png =
        Tensor::from_strings(&[], vec![dir.join("image.png").to_string_lossy().into_owned().into_bytes()]).unwrap();
    let got = sess.run(&[("filename:0", png)], &["resized:0"], &[]).unwrap().remove(0);
    let w = &want["resized"];
    assert_eq!(got.dims(), [1, 32, 32, 3]);
    let d = got.as_slice::<f32>().unwrap().iter().zip(w.as_slice::<f32>().unwrap()).map(|(a, b)| (a - b).abs());
    assert!(d.fold(0.0f32, f32::max) <= 1e-4);
}
