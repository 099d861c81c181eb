//! Where a training step of `mnist_training`'s model spends its time, by op type: runs a few steps,
//! then one with FULL_TRACE, and prints total kernel time per op (from the step stats).
//! `cargo run --release -p ferroflow --example step_profile [-- INTRA_OP_THREADS]`
use std::collections::BTreeMap;

use ferroflow::proto::{run_options::TraceLevel, RunOptions};
use ferroflow::runtime::{Session, SessionOptions};
use ferroflow::tensor::Tensor;
use ferroflow::train::{mnist, Builder};
use ferroflow::workflows::mnist_training;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let m = mnist::load(&mnist::bundled_dir())?;
    let b = Builder::with_seed(1);
    let roles = mnist_training::build(&b, &mnist_training::Config::default())?;
    // `step_profile [intra_op_threads]`
    let intra = std::env::args().nth(1).map_or(Ok(0), |v| v.parse())?;
    let sopts = SessionOptions::default().with_intra_op_threads(intra);
    let sess = Session::new(b.graph(), sopts)?;
    sess.run(&[], &[], &[&roles.init])?;
    let idx: Vec<usize> = (0..100).collect();
    let x = ferroflow::train::model::gather_rows(&m.train.images, &idx)?;
    let y = ferroflow::train::model::gather_rows(&m.train.one_hot(10)?, &idx)?;
    let feeds = [("inputs:0", x), ("outputs:0", y), ("is_training:0", Tensor::scalar(true))];
    for _ in 0..50 {
        sess.run(&feeds, &[&roles.loss], &[&roles.train_op])?;
    }
    let opts = RunOptions { trace_level: TraceLevel::FullTrace as i32, ..Default::default() };
    let mut by_op: BTreeMap<String, (u64, usize)> = BTreeMap::new();
    // Node names as the step runs them: the optimized graph (fused MatMul+BiasAdd+Relu nodes
    // take the Relu's name and show as `_FusedMatMul`).
    let names: Vec<&str> = feeds.iter().map(|(n, _)| *n).collect();
    let graph = sess.plan(&names, &[&roles.loss], &[&roles.train_op])?.graph().clone();
    let steps = 20;
    let t0 = std::time::Instant::now();
    for _ in 0..steps {
        let (_, meta) = sess.run_with_options(&feeds, &[&roles.loss], &[&roles.train_op], &opts)?;
        for dev in meta.step_stats.unwrap_or_default().dev_stats {
            for n in dev.node_stats {
                let op = graph.find(&n.node_name).map_or("?".to_string(), |id| graph.node(id).op.clone());
                let e = by_op.entry(op).or_default();
                e.0 += n.all_end_rel_nanos as u64;
                e.1 += 1;
            }
        }
    }
    let wall = t0.elapsed().as_secs_f64() / steps as f64 * 1e6;
    let mut v: Vec<_> = by_op.into_iter().collect();
    v.sort_by_key(|(_, (t, _))| std::cmp::Reverse(*t));
    let total: u64 = v.iter().map(|(_, (t, _))| t).sum();
    println!("step wall {wall:.0} us; kernel time {:.0} us", total as f64 / steps as f64 / 1e3);
    for (op, (t, n)) in v {
        println!("{op:32} {:8.1} us  x{}", t as f64 / steps as f64 / 1e3, n / steps);
    }
    Ok(())
}
