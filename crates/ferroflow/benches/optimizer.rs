//! The optimizer's effect and cost:
//! - `mlp_forward`: a 784-256-256-10 MLP (`mnist_training`'s shape), batch 100, with ReLU and with
//!   tanh-GELU activations, run with the default passes (`fused`: `_FusedMatMul` and
//!   `_FusedElementwise`) and with the two fusion passes switched off (`unfused`);
//! - `optimize`: optimizer wall time on the 20,400-node layered graph that
//!   `scripts/bench_optimizer.py` times against TensorFlow's Grappler.
use criterion::{criterion_group, criterion_main, Criterion};
use ferroflow::optimize::{Item, MetaOptimizer, OptimizerOptions};
use ferroflow::prelude::*;
use ferroflow::testing::graphs;

fn mlp(c: &mut Criterion) {
    let mut group = c.benchmark_group("mlp_forward");
    let batch = 100;
    let x =
        Tensor::from_vec(&[batch, 784], (0..batch * 784).map(|i| ((i * 31) % 255) as f32 / 255.0).collect()).unwrap();
    for act in ["relu", "gelu"] {
        let (graph, fetch) = graphs::mlp(&[784, 256, 256, 10], act);
        for (variant, disabled) in [("fused", vec![]), ("unfused", vec!["contraction_fusion", "elementwise_fusion"])] {
            for threads in [1, 2] {
                let mut opts = SessionOptions::default().with_inter_op_threads(threads).with_intra_op_threads(threads);
                opts.optimizer.disabled_passes = disabled.iter().map(|s| s.to_string()).collect();
                let sess = Session::new(graph.clone(), opts).unwrap();
                let plan = sess.plan(&["x:0"], &[&fetch], &[]).unwrap();
                let feeds = [x.clone()];
                group.bench_function(format!("{act}/{variant}/threads_{threads}"), |b| {
                    b.iter(|| sess.run_plan(&plan, &feeds).unwrap())
                });
            }
        }
    }
    group.finish();
}

fn optimize(c: &mut Criterion) {
    let mut group = c.benchmark_group("optimize");
    group.sample_size(10);
    let (graph, fetch) = graphs::layered(1200, 16);
    let item = Item { feeds: vec!["x:0".into()], fetches: vec![fetch], ..Default::default() };
    let opt = MetaOptimizer::new(OptimizerOptions::default());
    group.bench_function(format!("layered_{}_nodes", graph.len()), |b| b.iter(|| opt.optimize(&graph, &item).unwrap()));
    group.finish();
}

criterion_group!(benches, mlp, optimize);
criterion_main!(benches);
