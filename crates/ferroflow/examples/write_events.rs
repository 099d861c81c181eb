//! Writes a TensorBoard run with ferroflow's event writer: seed 000's graph, a `loss` scalar
//! over 5 steps and a tagged run metadata. `scripts/tensorboard_check.py` reads it back with
//! TensorFlow and serves it with real TensorBoard.
//!
//! `cargo run --example write_events -p ferroflow -- LOGDIR/RUN`
use ferroflow::proto::RunMetadata;
use ferroflow::summary::EventWriter;

fn main() -> anyhow::Result<()> {
    let dir = std::env::args().nth(1).ok_or_else(|| anyhow::anyhow!("usage: write_events LOGDIR/RUN"))?;
    let (graph, _) = ferroflow::testing::graphs::seed_000()?;
    let mut w = EventWriter::create(std::path::Path::new(&dir))?;
    w.add_graph(&graph.to_graph_def(), 0)?;
    for step in 0..5 {
        w.add_scalar("loss", 1.0 / (step as f32 + 1.0), step)?;
    }
    let meta = RunMetadata { partition_graphs: vec![graph.to_graph_def()], ..Default::default() };
    w.add_run_metadata("step_0", &meta, 0)?;
    println!("{}", w.path().display());
    Ok(())
}
