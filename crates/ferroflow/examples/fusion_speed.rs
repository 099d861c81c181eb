//! Fused vs unfused MLP forward passes, interleaved, best of many runs (robust to a noisy
//! machine; `cargo bench --bench optimizer` has the criterion version).
//!
//! `cargo run --release -p ferroflow --example fusion_speed`
use std::time::Instant;

use ferroflow::prelude::*;
use ferroflow::testing::graphs;

fn main() {
    for batch in [100usize, 1000] {
        let x = Tensor::from_vec(&[batch, 784], (0..batch * 784).map(|i| ((i * 31) % 255) as f32 / 255.0).collect())
            .expect("input");
        for act in ["relu", "gelu"] {
            let (graph, fetch) = graphs::mlp(&[784, 256, 256, 10], act);
            let mut sessions = vec![];
            for disabled in [vec![], vec!["contraction_fusion", "elementwise_fusion"]] {
                let mut opts = SessionOptions::default().with_inter_op_threads(1).with_intra_op_threads(1);
                opts.optimizer.disabled_passes = disabled.iter().map(|s| s.to_string()).collect();
                let sess = Session::new(graph.clone(), opts).expect("session");
                let plan = sess.plan(&["x:0"], &[&fetch], &[]).expect("plan");
                sessions.push((sess, plan));
            }
            let mut best = [f64::MAX; 2];
            for _ in 0..30 {
                for (i, (sess, plan)) in sessions.iter().enumerate() {
                    let t = Instant::now();
                    for _ in 0..10 {
                        sess.run_plan(plan, std::slice::from_ref(&x)).expect("run");
                    }
                    best[i] = best[i].min(t.elapsed().as_secs_f64() / 10.0);
                }
            }
            println!(
                "MLP 784-256-256-10 {act:<4} batch {batch:>4}: fused {:>8.1} us  unfused {:>8.1} us  fused/unfused {:.3}",
                best[0] * 1e6,
                best[1] * 1e6,
                best[0] / best[1]
            );
        }
    }
}
