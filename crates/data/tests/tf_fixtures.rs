//! The input pipeline against TensorFlow's own outputs (`scripts/make_data_fixtures.py` →
//! `fixtures/data/`): Keras's `image_dataset_from_directory`, decode + resize, TFRecords
//! written by TensorFlow and `tf.io.parse_example`, and shuffle's draw distribution.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ferroflow_data::example::{parse_example, FeatureSpec, Parsed};
use ferroflow_data::image::{self, DirectoryOptions, Subset};
use ferroflow_data::{Budget, Dataset};
use ferroflow_tensor::npy::{read_npy, read_npz};
use ferroflow_tensor::{DType, Tensor};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/data")
}

fn npz(name: &str) -> BTreeMap<String, Tensor> {
    read_npz(&dir().join(name)).unwrap().into_iter().collect()
}

fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
    assert_eq!(a.dims(), b.dims());
    a.as_slice::<f32>()
        .unwrap()
        .iter()
        .zip(b.as_slice::<f32>().unwrap())
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn image_dataset_from_directory_matches_keras_without_shuffle() {
    let want = npz("keras_batches.npz");
    let options = DirectoryOptions::default().with_image_size([40, 48]).with_batch_size(4).with_shuffle(false);
    let d = image::image_dataset_from_directory(&dir().join("flowers_tiny"), &options, Subset::All).unwrap();
    let names: Vec<String> =
        want["class_names"].as_strings().unwrap().iter().map(|s| String::from_utf8(s.clone()).unwrap()).collect();
    assert_eq!(d.class_names, names);
    let ds = d.dataset.with_budget(Budget::default().with_log(false));
    let batches: Vec<(Tensor, Tensor)> = ds.iter().unwrap().collect::<Result<_, _>>().unwrap();
    assert_eq!(batches.len(), 3);
    for (i, (x, y)) in batches.iter().enumerate() {
        let wx = &want[&format!("images{i}")];
        let wy = &want[&format!("labels{i}")];
        assert_eq!(y.as_slice::<i32>().unwrap(), wy.as_slice::<i32>().unwrap(), "labels of batch {i}");
        let d = max_diff(x, wx);
        assert!(d <= 1e-4, "batch {i}: images differ from Keras's by {d}");
    }
}

#[test]
fn decode_and_resize_match_tensorflow() {
    let want = npz("resize_224.npz");
    let path = dir().join("flowers_tiny/daisy/daisy_00.jpg");
    let name = Tensor::from_strings(&[], vec![path.to_string_lossy().into_owned().into_bytes()]).unwrap();
    let decoded = image::decode_jpeg(&image::read_file(&name).unwrap(), 3).unwrap();
    assert_eq!(decoded.dims(), want["decoded"].dims());
    assert_eq!(decoded.as_slice::<u8>().unwrap(), want["decoded"].as_slice::<u8>().unwrap(), "decode_jpeg pixels");
    let resized = image::resize(&decoded, [224, 224]).unwrap();
    let d = max_diff(&resized, &want["resized"]);
    assert!(d <= 1e-4, "resize differs from tf.image.resize by {d}");
    let missing = Tensor::from_strings(&[], vec![b"/no/such/flower.jpg".to_vec()]).unwrap();
    let e = image::read_file(&missing).unwrap_err().to_string();
    assert!(e.contains("/no/such/flower.jpg"), "{e}");
}

/// The `uint8` resize path (which reads pixel bytes straight into vector lanes) gives the
/// same bits as resizing the same pixels given as `float32` (the widening path), for 1, 3
/// and 4 channels, down- and up-scaling, one-pixel-wide outputs and several images.
#[test]
fn uint8_resize_is_bit_identical_to_float_resize() {
    let mut rng = ferroflow_tensor::rng::Rng::new(0x9e37_79b9_7f4a_7c15);
    for (dims, sizes) in [
        ([1usize, 375, 500, 3], vec![[224usize, 224usize], [500, 700], [1, 1]]),
        ([2, 7, 9, 4], vec![[3, 5], [16, 20], [7, 1]]),
        ([1, 5, 6, 1], vec![[3, 4], [11, 13]]),
        ([3, 4, 3, 3], vec![[2, 2], [9, 5]]),
    ] {
        let n: usize = dims.iter().product();
        let bytes: Vec<u8> = (0..n).map(|_| (rng.next_u64() >> 24) as u8).collect();
        let floats: Vec<f32> = bytes.iter().map(|&b| b as f32).collect();
        let (u, f) = (Tensor::from_vec(&dims, bytes).unwrap(), Tensor::from_vec(&dims, floats).unwrap());
        for size in sizes {
            let (a, b) = (image::resize(&u, size).unwrap(), image::resize(&f, size).unwrap());
            let bits = |t: &Tensor| t.as_slice::<f32>().unwrap().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert!(bits(&a) == bits(&b), "uint8 {dims:?} -> {size:?} differs from float32");
        }
    }
}

#[test]
fn tfrecords_and_examples_written_by_tensorflow() {
    let want = npz("examples_parsed.npz");
    let ds = Dataset::tfrecord(&[dir().join("examples.tfrecord")]).unwrap();
    let records: Vec<Vec<u8>> = ds.iter().unwrap().map(|t| t.unwrap().as_strings().unwrap()[0].clone()).collect();
    let concat = want["records_concat"].as_slice::<u8>().unwrap();
    let mut at = 0;
    let tf_records: Vec<Vec<u8>> = want["records_len"]
        .as_slice::<i64>()
        .unwrap()
        .iter()
        .map(|&n| {
            at += n as usize;
            concat[at - n as usize..at].to_vec()
        })
        .collect();
    assert_eq!(records, tf_records);
    let mut spec = BTreeMap::new();
    spec.insert("x".into(), FeatureSpec::Fixed { dtype: DType::Float, shape: vec![3], default: None });
    spec.insert("label".into(), FeatureSpec::Fixed { dtype: DType::Int64, shape: vec![], default: None });
    spec.insert(
        "name".into(),
        FeatureSpec::Fixed {
            dtype: DType::String,
            shape: vec![],
            default: Some(Tensor::from_strings(&[], vec![b"none".to_vec()]).unwrap()),
        },
    );
    spec.insert("tags".into(), FeatureSpec::Var { dtype: DType::Int64 });
    let batch = Tensor::from_strings(&[records.len()], records).unwrap();
    let p = parse_example(&batch, &spec).unwrap();
    assert_eq!(p["x"].dense().unwrap().as_slice::<f32>().unwrap(), want["x"].as_slice::<f32>().unwrap());
    assert_eq!(p["label"].dense().unwrap().as_slice::<i64>().unwrap(), want["label"].as_slice::<i64>().unwrap());
    assert_eq!(p["name"].dense().unwrap().as_strings().unwrap(), want["name"].as_strings().unwrap());
    let Parsed::Sparse(tags) = &p["tags"] else { panic!("tags is sparse") };
    assert_eq!(tags.indices.as_slice::<i64>().unwrap(), want["tags_indices"].as_slice::<i64>().unwrap());
    assert_eq!(tags.values.as_slice::<i64>().unwrap(), want["tags_values"].as_slice::<i64>().unwrap());
    assert_eq!(tags.dense_shape.as_slice::<i64>().unwrap(), want["tags_dense_shape"].as_slice::<i64>().unwrap());
}

/// The first and second draws of `range(10).shuffle(3)` over many seeds are distributed as
/// TensorFlow's (fixture counts over 3,000 seeds): both within sampling error of each other.
#[test]
fn shuffle_draws_are_distributed_as_tensorflow_s() {
    let tf = read_npy(&dir().join("shuffle_first.npy")).unwrap();
    let tf = tf.as_slice::<i64>().unwrap();
    let trials = 3000u64;
    let mut ours = [[0i64; 10]; 2];
    for seed in 0..trials {
        let ds = Dataset::range(0, 10, 1).unwrap().shuffle(3, Some(seed + 1_000_000), false).unwrap().take(2);
        let v: Vec<i64> = ds.iter().unwrap().map(|t| t.unwrap().scalar_value::<i64>().unwrap()).collect();
        ours[0][v[0] as usize] += 1;
        ours[1][v[1] as usize] += 1;
    }
    for pos in 0..2 {
        for k in 0..10 {
            let (a, b) = (ours[pos][k] as f64 / trials as f64, tf[pos * 10 + k] as f64 / trials as f64);
            // Two proportions from 3,000 draws each: 5 standard errors of the difference.
            let se = ((a * (1.0 - a) + b * (1.0 - b)) / trials as f64).sqrt().max(1e-9);
            assert!((a - b).abs() <= 5.0 * se + 1e-12, "position {pos}, element {k}: ours {a:.3}, TensorFlow {b:.3}");
        }
    }
}
