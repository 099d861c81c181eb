//! Reading a predict body: a batch-1 image as a client writes `x.tolist()` (17-digit floats in
//! nested lists, three channels innermost), through the direct reader and through a JSON tree.
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use ferroflow_serve::json;

/// `{"instances": [[[[c, c, c], ...]]]}` of `h x w x 3` uniform floats in [0, 1) (as `f32`
/// widened to `f64` and printed shortest, as Python prints them).
fn image_body(h: usize, w: usize) -> Vec<u8> {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        f64::from((x >> 40) as f32 / (1u64 << 24) as f32)
    };
    let row = |next: &mut dyn FnMut() -> f64| {
        let px: Vec<String> = (0..w).map(|_| format!("[{},{},{}]", next(), next(), next())).collect();
        format!("[{}]", px.join(","))
    };
    let rows: Vec<String> = (0..h).map(|_| row(&mut next)).collect();
    format!("{{\"instances\":[[{}]]}}", rows.join(",")).into_bytes()
}

fn bench(c: &mut Criterion) {
    for (name, h, w) in [("32x32x3", 32, 32), ("224x224x3", 224, 224)] {
        let body = image_body(h, w);
        let mut g = c.benchmark_group(format!("predict body {name}"));
        g.throughput(Throughput::Elements((h * w * 3) as u64));
        g.bench_function("direct reader", |b| b.iter(|| json::parse_fast(&body).expect("a fast body")));
        g.bench_function("JSON tree (serde_json)", |b| {
            b.iter_batched(|| (), |()| json::parse_body(&body).expect("JSON"), BatchSize::SmallInput)
        });
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench
}
criterion_main!(benches);
