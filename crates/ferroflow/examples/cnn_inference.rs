//! CNN inference throughput on the frozen TensorFlow CNN fixture (conv 3x3x32 -> pool ->
//! conv 3x3x64 -> pool -> dense 10), printed as JSON lines:
//! `cargo run --release --example cnn_inference -- [BATCH] [SECONDS]`.
//! Used by `scripts/bench_cnn.py`, which times the same graph in TensorFlow.
use std::path::Path;
use std::time::Instant;

use ferroflow::prelude::*;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let batch: usize = args.first().map(|a| a.parse()).transpose()?.unwrap_or(32);
    let seconds: f64 = args.get(1).map(|a| a.parse()).transpose()?.unwrap_or(3.0);
    let graph = ferroflow::load_graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tf/cnn.pb"))?;
    let x: Vec<f32> = (0..batch * 28 * 28).map(|i| ((i * 7919) % 1000) as f32 / 1000.0).collect();
    let x = Tensor::from_vec(&[batch, 28, 28, 1], x)?;
    for threads in [1, 2] {
        let sess = Session::new(
            graph.clone(),
            SessionOptions::default().with_inter_op_threads(threads).with_intra_op_threads(threads),
        )?;
        let plan = sess.plan(&["x:0"], &["Identity:0"], &[])?;
        let feeds = [x.clone()];
        for _ in 0..3 {
            sess.run_plan(&plan, &feeds)?;
        }
        let start = Instant::now();
        let mut runs = 0usize;
        while start.elapsed().as_secs_f64() < seconds {
            sess.run_plan(&plan, &feeds)?;
            runs += 1;
        }
        let images_per_s = (runs * batch) as f64 / start.elapsed().as_secs_f64();
        println!("{{\"batch\": {batch}, \"threads\": {threads}, \"images_per_s\": {images_per_s:.0}}}");
    }
    Ok(())
}
