//! TensorFlow 2.21's own checkpoint (written by SaveV2 in scripts/make_fixtures.py): ferroflow
//! reads every tensor with TensorFlow's values, and writing the same tensors in the same order
//! gives byte-identical `.index` and `.data` files.
use std::path::PathBuf;

use ferroflow_checkpoint::{data_path, index_path, write_bundle, BundleReader};
use ferroflow_tensor::npy::read_npz;
use ferroflow_tensor::{DType, Tensor};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tf/checkpoints")
}

fn expected() -> Vec<(String, Tensor)> {
    let values: std::collections::HashMap<String, Tensor> =
        read_npz(&dir().join("mixed.npz")).unwrap().into_iter().collect();
    let strings: Vec<Vec<u8>> = std::fs::read_to_string(dir().join("mixed.strings.hex"))
        .unwrap()
        .lines()
        .map(|l| (0..l.len()).step_by(2).map(|i| u8::from_str_radix(&l[i..i + 2], 16).unwrap()).collect())
        .collect();
    let order = std::fs::read_to_string(dir().join("mixed.order")).unwrap();
    order
        .lines()
        .map(|n| {
            let t = if n == "strings" {
                Tensor::from_strings(&[strings.len()], strings.clone()).unwrap()
            } else {
                values[n].clone()
            };
            (n.to_string(), t)
        })
        .collect()
}

#[test]
fn reads_tensorflows_checkpoint() {
    let r = BundleReader::open(&dir().join("mixed")).unwrap();
    assert_eq!(r.header().num_shards, 1);
    let want = expected();
    assert_eq!(r.entries().len(), want.len());
    for (name, t) in &want {
        let got = r.read(name).unwrap();
        assert_eq!(&got, t, "{name}");
    }
    assert_eq!(r.read("global_step").unwrap().dtype(), DType::Int64);
    let e = r.read("nope").unwrap_err().to_string();
    assert!(e.contains("mixed.index") && e.contains("'nope'"), "{e}");
}

#[test]
fn writes_tensorflows_bytes() {
    let tmp = std::env::temp_dir().join(format!("ff_ckpt_tf_{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let ours = tmp.join("mixed");
    write_bundle(&ours, &expected()).unwrap();
    let theirs = dir().join("mixed");
    assert_eq!(std::fs::read(data_path(&ours, 0, 1)).unwrap(), std::fs::read(data_path(&theirs, 0, 1)).unwrap());
    assert_eq!(std::fs::read(index_path(&ours)).unwrap(), std::fs::read(index_path(&theirs)).unwrap());
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn every_bit_flip_in_checksummed_bytes_and_every_truncation_of_the_index_is_an_error() {
    let index = std::fs::read(index_path(&dir().join("mixed"))).unwrap();
    // The footer's handles: (metaindex offset, size), (index offset, size). The metaindex block
    // and the footer's padding are never read (by TensorFlow either); everything else is
    // covered by a block CRC or checked (magic, handles).
    let footer = &index[index.len() - 48..];
    let mut pos = 0;
    let mut varint = || {
        let mut v = 0usize;
        let mut shift = 0;
        loop {
            let b = footer[pos];
            pos += 1;
            v |= ((b & 0x7f) as usize) << shift;
            if b < 0x80 {
                return v;
            }
            shift += 7;
        }
    };
    let (meta_off, _meta_len, idx_off, idx_len) = (varint(), varint(), varint(), varint());
    let checked = |i: usize| i < meta_off || (idx_off..idx_off + idx_len + 5).contains(&i);
    for i in (0..index.len()).filter(|&i| checked(i)) {
        for bit in 0..8 {
            let mut b = index.clone();
            b[i] ^= 1 << bit;
            assert!(ferroflow_checkpoint::table::read(&b).is_err(), "flip of bit {bit} of byte {i} went unnoticed");
        }
    }
    // Elsewhere (footer, ignored metaindex): never a panic.
    for i in (0..index.len()).filter(|&i| !checked(i)) {
        for bit in 0..8 {
            let mut b = index.clone();
            b[i] ^= 1 << bit;
            let _ = ferroflow_checkpoint::table::read(&b);
        }
    }
    for n in 0..index.len() {
        assert!(ferroflow_checkpoint::table::read(&index[..n]).is_err(), "truncated to {n} bytes");
    }
}
