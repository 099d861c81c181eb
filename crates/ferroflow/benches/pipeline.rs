//! `input_pipeline`'s per-image work: `decode_jpeg` of a 500×375 photo-like JPEG (as
//! `ferroflow flowers --size 500x375` writes them), bilinear `resize` of the decoded uint8
//! image to 224×224 float32, both together, and `batch(32)`'s stacking of 32 such images.
//! `scripts/bench_pipeline.py` runs the whole pipeline against tf.data side by side.
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ferroflow::data::image::{decode_jpeg, read_file, resize};
use ferroflow::data::Dataset;
use ferroflow::tensor::Tensor;
use ferroflow::workflows::flowers::{self, FlowersOptions};

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let options = FlowersOptions { per_class: 1, size: Some((500, 375)), ..Default::default() };
    let files = flowers::generate(dir.path(), &options).expect("generated images");
    let path = Tensor::from_strings(&[], vec![files[0].to_string_lossy().into_owned().into_bytes()]).unwrap();
    let contents = read_file(&path).unwrap();
    let image = decode_jpeg(&contents, 3).unwrap();
    let mut group = c.benchmark_group("pipeline");
    group.throughput(Throughput::Elements(1));
    group.bench_function("decode_jpeg_500x375", |b| b.iter(|| decode_jpeg(&contents, 3).unwrap()));
    group.bench_function("resize_u8_500x375_to_224", |b| b.iter(|| resize(&image, [224, 224]).unwrap()));
    group.bench_function("decode_and_resize", |b| {
        b.iter(|| resize(&decode_jpeg(&contents, 3).unwrap(), [224, 224]).unwrap())
    });
    let resized = resize(&image, [224, 224]).unwrap();
    group.throughput(Throughput::Elements(32));
    group.bench_function("batch_32x224x224x3", |b| {
        b.iter(|| {
            let ds = Dataset::from_tensors(resized.clone()).repeat(Some(32)).batch(32, false).unwrap();
            ds.iter().unwrap().next().unwrap().unwrap()
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
