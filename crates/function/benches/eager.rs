//! Eager dispatch cost: one op on scalars and tiny tensors, where the kernel's own work is a
//! few ns and the rest is the call (type attrs, checks, shape function, cached kernel).
//! `scripts/bench_eager.py` times TensorFlow's eager ops on the same inputs.
use criterion::{criterion_group, criterion_main, Criterion};
use ferroflow_function::eager::{self, Eager};
use ferroflow_ops::{Ops, RawOps};
use ferroflow_tensor::Tensor;

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("eager");
    let x = Tensor::scalar(2.0f32);
    let y = Tensor::scalar(3.0f32);
    group.bench_function("add_scalar", |b| b.iter(|| Eager.add_v2(&x, &y).unwrap()));
    group.bench_function("relu_scalar", |b| b.iter(|| Eager.relu(&x).unwrap()));
    let m = Tensor::from_vec(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
    group.bench_function("matmul_2x2", |b| b.iter(|| Eager.mat_mul(&m, &m).unwrap()));
    let v = Tensor::from_vec(&[4], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
    group.bench_function("reduce_sum_4", |b| b.iter(|| Eager.reduce("Sum", &v, &[0], false).unwrap()));
    let parts = [v.clone(), v.clone()];
    let axis = Tensor::scalar(0i32);
    group
        .bench_function("concat_2x4", |b| b.iter(|| eager::op("ConcatV2").inputs(&parts).input(&axis).run1().unwrap()));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
