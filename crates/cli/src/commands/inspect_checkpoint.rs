//! `ferroflow inspect-checkpoint`: a checkpoint's tensors, or their values.
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::load;

/// List a checkpoint's tensors (name, dtype, shape), or print their values: like
/// TensorFlow's inspect_checkpoint. PREFIX may be a directory (its latest checkpoint).
#[derive(Args)]
pub struct InspectCheckpointArgs {
    /// The checkpoint prefix (`model.ckpt-5000`, without `.index`) or its directory.
    prefix: PathBuf,
    /// Print this tensor's values.
    #[arg(long, value_name = "NAME")]
    tensor: Option<String>,
    /// Print every tensor's values.
    #[arg(long)]
    all: bool,
    /// Values printed per tensor (0 = all).
    #[arg(long, default_value_t = 20)]
    max_values: usize,
}

pub fn run(args: InspectCheckpointArgs) -> Result<()> {
    let InspectCheckpointArgs { prefix, tensor, all, max_values } = args;
    let prefix = load::checkpoint_prefix(&prefix)?;
    let reader = ferroflow::checkpoint::BundleReader::open(&prefix)?;
    let limit = if max_values == 0 { usize::MAX } else { max_values };
    let describe = |name: &str, e: &ferroflow::proto::BundleEntryProto| -> String {
        let (dtype, dims) = ferroflow::checkpoint::entry_signature(e);
        format!("{name} ({dtype}) {dims:?}")
    };
    if let Some(name) = tensor.as_deref() {
        let e = reader.entries().get(name).ok_or_else(|| {
            let names: Vec<&String> = reader.entries().keys().collect();
            anyhow::anyhow!("{}: no tensor named '{name}'; it has {names:?}", prefix.display())
        })?;
        out!("{}", describe(name, e));
        out!("{}", reader.read(name)?.preview(limit));
        return Ok(());
    }
    let mut bytes = 0i64;
    for (name, e) in reader.entries() {
        out!("{}", describe(name, e));
        if all {
            out!("  {}", reader.read(name)?.preview(limit));
        }
        bytes += e.size;
    }
    out!("{} tensors, {bytes} bytes of data ({})", reader.entries().len(), prefix.display());
    Ok(())
}
