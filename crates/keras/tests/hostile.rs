//! Hostile and broken Keras files: each is a one-line error naming the file, member, layer or
//! weight, with memory bounded by the allocation limit, never a panic.
use std::io::Write;
use std::path::{Path, PathBuf};

use ferroflow_keras::{KerasError, KerasModel};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/keras").join(name)
}

fn one_line(e: &KerasError) -> String {
    let t = e.to_string();
    assert!(!t.contains('\n') && t.len() < 600, "not one short line: {t}");
    t
}

fn zip_of(members: &[(&str, &[u8], zip::CompressionMethod)]) -> Vec<u8> {
    let mut cursor = std::io::Cursor::new(Vec::new());
    {
        let mut z = zip::ZipWriter::new(&mut cursor);
        for (name, bytes, method) in members {
            z.start_file(*name, zip::write::SimpleFileOptions::default().compression_method(*method).large_file(true))
                .unwrap();
            z.write_all(bytes).unwrap();
        }
        z.finish().unwrap();
    }
    cursor.into_inner()
}

fn member(path: &Path, name: &str) -> Vec<u8> {
    let mut z = zip::ZipArchive::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut z.by_name(name).unwrap(), &mut out).unwrap();
    out
}

#[test]
fn a_file_that_is_neither_zip_nor_hdf5_is_refused() {
    let e = KerasModel::from_bytes(b"hello, not a model".to_vec(), Path::new("x.keras")).unwrap_err();
    let t = one_line(&e);
    assert!(t.contains("x.keras") && t.contains("neither a .keras archive"), "{t}");
    let e = KerasModel::from_bytes(b"PK\x03\x04 truncated".to_vec(), Path::new("y.keras")).unwrap_err();
    assert!(one_line(&e).contains("not a .keras file"), "{e}");
}

#[test]
fn a_zip_bomb_fails_at_the_memory_limit_having_read_nothing_large() {
    // 256 MiB of zeros deflate to ~256 KiB: the member declares its size, which is checked
    // against the limit before anything is inflated.
    let zeros = vec![0u8; 256 << 20];
    let config = std::fs::read(fixture("sequential_cnn.keras")).unwrap();
    let cfg = member(&fixture("sequential_cnn.keras"), "config.json");
    drop(config);
    let bomb = zip_of(&[
        ("config.json", &cfg, zip::CompressionMethod::Stored),
        ("model.weights.h5", &zeros, zip::CompressionMethod::Deflated),
    ]);
    drop(zeros);
    assert!(bomb.len() < 2 << 20, "{}", bomb.len());
    let _limit = ferroflow_tensor::limit::scoped(64 << 20);
    let e = KerasModel::from_bytes(bomb, Path::new("bomb.keras")).unwrap_err();
    let t = one_line(&e);
    assert!(t.contains("model.weights.h5") && t.contains("bomb.keras"), "{t}");
}

#[test]
fn a_member_that_inflates_past_its_declared_size_is_refused() {
    let cfg = member(&fixture("sequential_cnn.keras"), "config.json");
    let mut z = zip_of(&[("config.json", &cfg, zip::CompressionMethod::Deflated)]);
    // Lower the declared uncompressed size (local header at 22, central directory entry at
    // +24 from its signature) to 10 bytes.
    let set = |z: &mut Vec<u8>, at: usize| z[at..at + 4].copy_from_slice(&10u32.to_le_bytes());
    set(&mut z, 22);
    let cd = z.windows(4).position(|w| w == b"PK\x01\x02").unwrap();
    set(&mut z, cd + 24);
    let e = KerasModel::from_bytes(z, Path::new("liar.keras")).unwrap_err();
    let t = one_line(&e);
    assert!(t.contains("liar.keras") && t.contains("config.json"), "{t}");
}

/// A Keras 3 weights file whose B-tree nodes (`TREE`) and heap (`HEAP`) signatures are
/// damaged, one at a time.
#[test]
fn an_hdf5_file_with_a_damaged_btree_or_heap_is_an_error() {
    let bytes = member(&fixture("sequential_cnn.keras"), "model.weights.h5");
    let mut damaged_any = false;
    for sig in [&b"TREE"[..], b"HEAP", b"SNOD"] {
        for (at, _) in bytes.windows(4).enumerate().filter(|(_, w)| *w == sig).take(3) {
            let mut b = bytes.clone();
            b[at] ^= 0x20;
            let r = ferroflow_keras::h5::read(&b, "damaged.h5");
            if let Err(e) = r {
                assert!(one_line(&e).contains("damaged.h5"), "{e}");
                damaged_any = true;
            }
        }
    }
    assert!(damaged_any, "no damaged signature was noticed");
}

#[test]
fn a_dataset_whose_shape_contradicts_the_file_is_refused_before_it_is_read() {
    // A dataset of 12345 floats; its dataspace's dimension is patched to 2^40.
    let mut root = ferroflow_keras::h5::Group::default();
    let v: Vec<f32> = (0..12345).map(|i| i as f32).collect();
    root.ensure("layers/dense/vars")
        .datasets
        .push(("0".into(), ferroflow_tensor::Tensor::from_vec(&[12345], v).unwrap()));
    let mut bytes = ferroflow_keras::h5::write(&root, "t.h5").unwrap();
    let at: Vec<usize> =
        bytes.windows(8).enumerate().filter(|(_, w)| *w == 12345u64.to_le_bytes()).map(|(i, _)| i).collect();
    assert!(!at.is_empty());
    for i in at {
        bytes[i..i + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    }
    let e = ferroflow_keras::h5::read(&bytes, "liar.h5").unwrap_err();
    let t = one_line(&e);
    assert!(t.contains("liar.h5"), "{t}");
}

#[test]
fn weights_of_the_wrong_shape_name_the_layer_the_weight_and_both_shapes() {
    let mut m = KerasModel::load(fixture("sequential_cnn.keras")).unwrap();
    let mut w = m.weights().unwrap().clone();
    let dense = w.keys().find(|k| k.starts_with("dense")).unwrap().clone();
    let kernel = &w[&dense][0];
    let mut dims = kernel.dims().to_vec();
    dims[0] += 1;
    w.get_mut(&dense).unwrap()[0] = ferroflow_tensor::Tensor::zeros(ferroflow_tensor::DType::Float, &dims).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.weights.h5");
    m.save_weights(&path, Some(&w)).unwrap();
    m.load_weights(&path).unwrap();
    let e = m.predictor(Default::default()).err().unwrap();
    let t = one_line(&e);
    assert!(
        t.contains(&format!("layer '{dense}'")) && t.contains("weight 'kernel'") && t.contains(&format!("{dims:?}")),
        "{t}"
    );
    // Missing and extra layers too.
    let mut w2 = m.weights().unwrap().clone();
    w2.remove(&dense);
    m.set_weights(w2);
    let t = one_line(&m.predictor(Default::default()).err().unwrap());
    assert!(t.contains(&dense) && t.contains("no weights"), "{t}");
}

#[test]
fn unknown_and_python_code_layers_name_their_class_and_layer() {
    let m = KerasModel::load(fixture("custom_layer.keras")).unwrap();
    let t = one_line(&m.predictor(Default::default()).err().unwrap());
    assert!(t.contains("'doubling'") && t.contains("Scale"), "{t}");
    let lambda = br#"{"module":"keras","class_name":"Functional","config":{"name":"m","layers":[
        {"module":"keras.layers","class_name":"InputLayer","name":"x","config":{"batch_shape":[null,3],"name":"x"},"inbound_nodes":[]},
        {"module":"keras.layers","class_name":"Dense","name":"d","config":{"name":"d","units":2,"activation":{"value":["4wEAAAAA"]}},
         "inbound_nodes":[{"args":[{"class_name":"__keras_tensor__","config":{"shape":[null,3],"dtype":"float32","keras_history":["x",0,0]}}],"kwargs":{}}]}],
        "input_layers":[["x",0,0]],"output_layers":["d",0,0]}}"#;
    let m = KerasModel::from_config_json(lambda).unwrap();
    let t = one_line(&m.predictor(Default::default()).err().unwrap());
    assert!(t.contains("'d'") && t.contains("activation"), "{t}");
}

#[test]
fn a_huge_layer_in_a_small_config_fails_at_the_memory_limit() {
    let cfg = br#"{"class_name":"Sequential","config":{"name":"s","layers":[
        {"class_name":"InputLayer","config":{"batch_input_shape":[null,100000],"name":"x"}},
        {"class_name":"Dense","config":{"name":"huge","units":100000}}]}}"#;
    let m = KerasModel::from_config_json(cfg).unwrap();
    let _limit = ferroflow_tensor::limit::scoped(256 << 20);
    let e = m.predictor(Default::default()).err().unwrap();
    assert!(one_line(&e).contains("huge"), "{e}");
}
