//! Prints executor overhead in ns/op for the benchmark graphs, as JSON lines:
//! `cargo run --release --example executor_overhead -- [N] [ITERS] [chain|wide] [plain|full|recorded]`
//! (the last limits the runs to one kind: without step stats, FULL_TRACE, or `run_plan_traced`).
//! Used by `scripts/bench_executor.py`, which times the same graphs in TensorFlow.
use std::time::Instant;

use ferroflow::prelude::*;
use ferroflow::proto::{run_options::TraceLevel, RunOptions};
use ferroflow::testing::graphs;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n = args.first().map(|a| a.parse()).transpose()?.unwrap_or(2000);
    let iters: usize = args.get(1).map(|a| a.parse()).transpose()?.unwrap_or(300);
    let only = args.get(2).cloned();
    let trace_only = args.get(3).cloned();
    for (name, (graph, fetch)) in [("chain", graphs::chain(n)), ("wide", graphs::wide(n))] {
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        for threads in [1, 2] {
            let sess = Session::new(graph.clone(), {
                // Executor overhead as written: the optimizer would fuse the chain and merge
                // the identical wide ops.
                let mut o = SessionOptions::default().with_inter_op_threads(threads).with_intra_op_threads(1);
                o.optimizer.enabled = false;
                o
            })?;
            let plan = sess.plan(&["x:0"], &[&fetch], &[])?;
            let feeds = [Tensor::scalar(1.0f32)];
            for _ in 0..iters / 10 + 1 {
                sess.run_plan(&plan, &feeds)?;
            }
            let no_trace = RunOptions::default();
            let full = RunOptions { trace_level: TraceLevel::FullTrace as i32, ..Default::default() };
            // With threads == 1 also the same runs with step-stats collection: FULL_TRACE
            // (recorded and made into RunMetadata's protos) and `run_plan_traced` (recorded
            // only: what tracing adds inside the step).
            for (opts, trace) in
                [(Some(&no_trace), ""), (Some(&full), ", \"trace\": \"full\""), (None, ", \"trace\": \"recorded\"")]
            {
                if !trace.is_empty() && threads != 1 {
                    continue;
                }
                if trace_only.as_deref().is_some_and(|t| !trace.contains(t) && (t != "plain" || !trace.is_empty())) {
                    continue;
                }
                // Median of 7 batches.
                let mut samples = Vec::new();
                for _ in 0..7 {
                    let t = Instant::now();
                    for _ in 0..iters {
                        match opts {
                            Some(opts) => drop(sess.run_plan_with_options(&plan, &feeds, opts)?),
                            None => drop(sess.run_plan_traced(&plan, &feeds)?),
                        }
                    }
                    samples.push(t.elapsed().as_nanos() as f64 / iters as f64 / plan.len() as f64);
                }
                samples.sort_by(|a, b| a.total_cmp(b));
                println!(
                    "{{\"graph\": \"{name}\", \"ops\": {}, \"inter_op_threads\": {threads}{trace}, \"ns_per_op\": {:.1}}}",
                    plan.len(),
                    samples[3]
                );
            }
        }
    }
    Ok(())
}
