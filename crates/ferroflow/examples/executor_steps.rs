//! Runs the executor bench's graphs a fixed number of steps (for instruction counts under
//! callgrind, which a shared machine cannot disturb).
use ferroflow::prelude::*;
use ferroflow::proto::RunOptions;
use ferroflow::testing::graphs;

fn main() {
    let which = std::env::args().nth(1).unwrap_or_else(|| "chain".into());
    let steps: usize = std::env::args().nth(2).and_then(|s| s.parse().ok()).unwrap_or(100);
    let (graph, fetch) = if which.starts_with("wide") { graphs::wide(2000) } else { graphs::chain(2000) };
    let mut o = SessionOptions::default().with_inter_op_threads(1).with_intra_op_threads(1);
    o.optimizer.enabled = false;
    let sess = Session::new(graph, o).unwrap();
    let plan = sess.plan(&["x:0"], &[&fetch], &[]).unwrap();
    let feeds = [Tensor::scalar(1.0f32)];
    let options =
        RunOptions { timeout_in_ms: if which.ends_with("deadline") { 60_000 } else { 0 }, ..Default::default() };
    for _ in 0..steps {
        sess.run_plan_with_options(&plan, &feeds, &options).unwrap();
    }
}
