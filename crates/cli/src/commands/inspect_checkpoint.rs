//! `ferroflow inspect-checkpoint`: a checkpoint's tensors, or their values.
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use serde_json::{json, Value};

use crate::load;

/// List a checkpoint's tensors or print their values, as TensorFlow's inspect_checkpoint does.
///
/// Each tensor's name, dtype and shape (with --tensor or --all, its values) of a TensorFlow
/// checkpoint (`tf.train.Saver` / `tf.train.Checkpoint`: PREFIX.index + PREFIX.data-*). PREFIX may
/// be a directory: its latest checkpoint, as `tf.train.latest_checkpoint` finds it. --json prints
/// the same as JSON (docs/CLI-JSON.md).
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
    #[arg(long, value_name = "N", default_value_t = 20)]
    max_values: usize,
    /// Print JSON: the tensors with their dtypes, shapes, sizes and (with --tensor or --all)
    /// values (see docs/CLI-JSON.md).
    #[arg(long)]
    json: bool,
}

pub fn run(args: InspectCheckpointArgs) -> Result<()> {
    let InspectCheckpointArgs { prefix, tensor, all, max_values, json } = args;
    let prefix = load::checkpoint_prefix(&prefix)?;
    let reader = ferroflow::checkpoint::BundleReader::open(&prefix)?;
    let limit = if max_values == 0 { usize::MAX } else { max_values };
    let describe = |name: &str, e: &ferroflow::proto::BundleEntryProto| -> String {
        let (dtype, dims) = ferroflow::checkpoint::entry_signature(e);
        format!("{name} ({dtype}) {dims:?}")
    };
    let entry_json = |name: &str, e: &ferroflow::proto::BundleEntryProto, with_values: bool| -> Result<Value> {
        let (dtype, dims) = ferroflow::checkpoint::entry_signature(e);
        let mut v = json!({"name": name, "dtype": dtype, "shape": dims, "bytes": e.size});
        if with_values {
            let (values, truncated) = super::values_json(&reader.read(name)?, limit);
            v["values"] = values;
            v["values_truncated"] = json!(truncated);
        }
        Ok(v)
    };
    let total: i64 = reader.entries().values().map(|e| e.size).sum();
    let document = |tensors: Vec<Value>| {
        json!({
            "prefix": prefix.display().to_string(),
            "tensor_count": reader.entries().len(),
            "data_bytes": total,
            "tensors": tensors,
        })
    };
    if let Some(name) = tensor.as_deref() {
        let e = reader.entries().get(name).ok_or_else(|| {
            let names: Vec<&String> = reader.entries().keys().collect();
            anyhow::anyhow!("{}: no tensor named '{name}'; it has {names:?}", prefix.display())
        })?;
        if json {
            return super::print_json(&document(vec![entry_json(name, e, true)?]));
        }
        out!("{}", describe(name, e));
        out!("{}", reader.read(name)?.preview(limit));
        return Ok(());
    }
    if json {
        let tensors = reader.entries().iter().map(|(name, e)| entry_json(name, e, all)).collect::<Result<Vec<_>>>()?;
        return super::print_json(&document(tensors));
    }
    for (name, e) in reader.entries() {
        out!("{}", describe(name, e));
        if all {
            out!("  {}", reader.read(name)?.preview(limit));
        }
    }
    out!("{} tensors, {total} bytes of data ({})", reader.entries().len(), prefix.display());
    Ok(())
}
