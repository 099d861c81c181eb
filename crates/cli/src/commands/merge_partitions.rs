//! `ferroflow merge-partitions`: partition graphs merged back into one runnable graph.
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;

/// Merge a step's partition graphs into one GraphDef that runs with the original names.
///
/// The partition graphs of one step (TensorFlow's or ferroflow's RunMetadata.partition_graphs,
/// one per device): _Send/_Recv pairs matched by tensor_name and removed with the _Arg/_Retval
/// plumbing, so the merged graph runs with the original feed and fetch names.
#[derive(Args)]
pub struct MergePartitionsArgs {
    /// The partition graphs (.pb or .pbtxt), one per device.
    #[arg(required = true)]
    partitions: Vec<PathBuf>,
    /// The merged graph (.pbtxt as text, otherwise binary).
    #[arg(short = 'o', long = "output")]
    output: PathBuf,
}

pub fn run(args: MergePartitionsArgs) -> Result<()> {
    let MergePartitionsArgs { partitions, output } = args;
    let defs = partitions
        .iter()
        .map(|p| ferroflow::graph::io::read_graph_def(p).with_context(|| format!("reading {}", p.display())))
        .collect::<Result<Vec<_>>>()?;
    let merged = ferroflow::runtime::merge_partitions(&defs)?;
    ferroflow::graph::io::write_graph_def(&output, &merged)?;
    let total: usize = defs.iter().map(|d| d.node.len()).sum();
    out!("merged {} partitions ({total} nodes) into {} ({} nodes)", defs.len(), output.display(), merged.node.len());
    Ok(())
}
