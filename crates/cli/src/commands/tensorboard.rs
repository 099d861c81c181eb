//! `ferroflow tensorboard`: any GraphDef written as a TensorBoard run.
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use clap::Args;

/// Write a GraphDef as a TensorBoard run (its Graphs tab shows it).
///
/// Any GraphDef (.pb or .pbtxt: a frozen model, merged partitions, any TensorFlow graph) is
/// written as LOGDIR/RUN/events.out.tfevents.<time>.<host> with a graph event, as
/// tf.summary.trace_export / FileWriter.add_graph write it.
#[derive(Args)]
pub struct TensorboardArgs {
    /// The graph file.
    graph: PathBuf,
    /// The TensorBoard log directory (`tensorboard --logdir LOGDIR`).
    #[arg(long)]
    logdir: PathBuf,
    /// The run (a subdirectory of LOGDIR); default: the graph file's stem.
    #[arg(long)]
    run: Option<String>,
}

pub fn run(args: TensorboardArgs) -> Result<()> {
    let TensorboardArgs { graph, logdir, run } = args;
    // Any GraphDef TensorBoard can show: read, not imported (partition graphs hold _Send/_Recv,
    // TensorFlow graphs may hold ops ferroflow does not run).
    let def = ferroflow::graph::io::read_graph_def(&graph)?;
    let run = match run {
        Some(r) => r,
        None => graph.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "run".into()),
    };
    if run.is_empty() || run.contains("..") || Path::new(&run).is_absolute() {
        bail!("--run '{run}': expected a run name (a subdirectory of --logdir)");
    }
    let mut w = ferroflow::summary::EventWriter::create(&logdir.join(&run))?;
    w.add_graph(&def, 0)?;
    out!(
        "wrote {} ({} nodes) as run '{run}': tensorboard --logdir {}",
        w.path().display(),
        def.node.len(),
        logdir.display()
    );
    Ok(())
}
