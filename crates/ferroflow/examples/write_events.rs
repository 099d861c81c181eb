//! Writes a TensorBoard run with ferroflow's event writer: `what_runs`' graph, a `loss` scalar
//! over 5 steps and the RunMetadata of a traced step on two CPU devices (FULL_TRACE step stats
//! per device and both partition graphs) as tagged run metadata; the RunMetadata also goes to `LOGDIR/RUN/run_metadata.pb`. `scripts/tensorboard_check.py` reads it back with
//! TensorFlow and serves it with real TensorBoard.
//!
//! `cargo run --example write_events -p ferroflow -- LOGDIR/RUN`
use ferroflow::prelude::*;
use ferroflow::proto::{run_options::TraceLevel, RunMetadata, RunOptions};
use ferroflow::summary::EventWriter;

fn main() -> anyhow::Result<()> {
    let dir = std::env::args().nth(1).ok_or_else(|| anyhow::anyhow!("usage: write_events LOGDIR/RUN"))?;
    let (graph, fetch) = ferroflow::workflows::what_runs::graph()?;
    let mut w = EventWriter::create(std::path::Path::new(&dir))?;
    w.add_graph(&graph.to_graph_def(), 0)?;
    for step in 0..5 {
        w.add_scalar("loss", 1.0 / (step as f32 + 1.0), step)?;
    }
    // One traced step on two CPU devices (Add_1 requested on /cpu:1), unoptimized so every
    // node of the seed runs.
    let mut graph = graph;
    let add_1 = graph.find("Add_1").expect("what_runs has Add_1");
    graph.node_mut(add_1).device = "/cpu:1".into();
    let mut opts = SessionOptions::default().with_cpu_devices(2);
    opts.optimizer.enabled = false;
    let sess = Session::new(graph, opts)?;
    let run_options =
        RunOptions { trace_level: TraceLevel::FullTrace as i32, output_partition_graphs: true, ..Default::default() };
    let (_, meta) = sess.run_with_options(&[], &[&fetch], &[], &run_options)?;
    w.add_run_metadata("step_0", &meta, 0)?;
    let bytes: Vec<u8> = ferroflow::proto::encode::<RunMetadata>(&meta);
    std::fs::write(std::path::Path::new(&dir).join("run_metadata.pb"), bytes)?;
    println!("{}", w.path().display());
    Ok(())
}
