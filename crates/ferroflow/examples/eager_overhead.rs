//! Prints the cost of eager calls in ns/op for tiny inputs, as JSON lines:
//! `cargo run --release --example eager_overhead -- [ITERS]`.
//! Used by `scripts/bench_eager.py`, which times the same calls in TensorFlow's eager mode.

use ferroflow::function::eager::{self, Eager};
use ferroflow::function::{function, Traced, Value};
use ferroflow::ops::{Ops, RawOps};
use ferroflow::tensor::Tensor;

/// A named call to time.
type Case<'a> = (&'static str, Box<dyn Fn() + 'a>);

fn time(iters: usize, f: impl FnMut()) -> f64 {
    ferroflow::testing::median_secs_per_call(iters / 10 + 1, iters, f) * 1e9
}

fn main() -> anyhow::Result<()> {
    let iters: usize = std::env::args().nth(1).map(|a| a.parse()).transpose()?.unwrap_or(100_000);
    let (x, y) = (Tensor::scalar(2.0f32), Tensor::scalar(3.0f32));
    let m = Tensor::from_vec(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.0])?;
    let v = Tensor::from_vec(&[4], vec![1.0f32, 2.0, 3.0, 4.0])?;
    let parts = [v.clone(), v.clone()];
    let axis = Tensor::scalar(0i32);
    let cases: Vec<Case> = vec![
        ("add_scalar", Box::new(|| drop(Eager.add_v2(&x, &y).unwrap()))),
        ("relu_scalar", Box::new(|| drop(Eager.relu(&x).unwrap()))),
        ("matmul_2x2", Box::new(|| drop(Eager.mat_mul(&m, &m).unwrap()))),
        ("reduce_sum_4", Box::new(|| drop(Eager.reduce("Sum", &v, &[0], false).unwrap()))),
        ("concat_2x4", Box::new(|| drop(eager::op("ConcatV2").inputs(&parts).input(&axis).run1().unwrap()))),
    ];
    for (name, f) in cases {
        println!("{{\"op\": \"{name}\", \"ns_per_op\": {:.1}}}", time(iters, f));
    }
    // A 1,000-op body (Square of a scalar, 1,000 times) eagerly and as a graph function.
    let body = |a: &[Value]| {
        let mut x = a[0].clone();
        for _ in 0..1000 {
            x = Traced.square(&x)?;
        }
        Ok(vec![x])
    };
    let f = function("chain_1000", body);
    let one = [Tensor::scalar(1.0f32)];
    let calls = (iters / 1000).max(10);
    let eager_ns = time(calls, || drop(f.call_eagerly(&one).unwrap()));
    let graph_ns = time(calls, || drop(f.call(&one).unwrap()));
    println!("{{\"op\": \"function_1000_eager\", \"ns_per_call\": {eager_ns:.1}}}");
    println!("{{\"op\": \"function_1000_graph\", \"ns_per_call\": {graph_ns:.1}}}");
    Ok(())
}
