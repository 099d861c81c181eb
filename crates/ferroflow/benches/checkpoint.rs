//! Tensor bundle throughput: `write_bundle` (data file streamed and synced, index built) and
//! `BundleReader::read` of every tensor (CRC32C checked) for 8 float tensors of 1M values
//! (32 MB); scripts/bench_checkpoint.py compares the whole Saver with TensorFlow's.
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ferroflow::checkpoint::{write_bundle, BundleReader};
use ferroflow::prelude::*;

fn bundle(c: &mut Criterion) {
    let tensors: Vec<(String, Tensor)> = (0..8)
        .map(|i| {
            let v: Vec<f32> = (0..1_000_000).map(|j| ((i * 7 + j) % 1000) as f32 * 1e-3).collect();
            (format!("layer_{i}/kernel"), Tensor::from_vec(&[1000, 1000], v).unwrap())
        })
        .collect();
    let dir = std::env::temp_dir().join(format!("ff_bench_bundle_{}", std::process::id()));
    let prefix = dir.join("model.ckpt");
    let mut group = c.benchmark_group("bundle");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(32_000_000));
    group.bench_function("write_32MB", |b| b.iter(|| write_bundle(&prefix, &tensors).unwrap()));
    write_bundle(&prefix, &tensors).unwrap();
    group.bench_function("read_32MB", |b| {
        b.iter(|| {
            let r = BundleReader::open(&prefix).unwrap();
            for (name, _) in &tensors {
                r.read(name).unwrap();
            }
        })
    });
    group.finish();
    std::fs::remove_dir_all(&dir).unwrap();
}

criterion_group!(benches, bundle);
criterion_main!(benches);
