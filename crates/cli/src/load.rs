//! What commands read besides their arguments: graph files, feeds and checkpoint prefixes.
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use ferroflow::prelude::*;
use ferroflow::tensor::npy;

/// A GraphDef file (.pb or .pbtxt), imported and validated.
pub fn graph(path: &Path) -> Result<Graph> {
    ferroflow::load_graph(path).with_context(|| format!("loading graph {}", path.display()))
}

/// The feeds of `--inputs FEEDS.npz` (keyed by tensor name), then of each `--feed NAME=FILE.npy`.
pub fn feeds(inputs: Option<&Path>, feeds: &[String]) -> Result<Vec<(String, Tensor)>> {
    let mut out = Vec::new();
    if let Some(p) = inputs {
        out.extend(npy::read_npz(p)?);
    }
    for f in feeds {
        let Some((name, file)) = f.split_once('=') else {
            bail!("--feed '{f}': expected NAME=FILE.npy");
        };
        out.push((name.to_string(), npy::read_npy(Path::new(file))?));
    }
    Ok(out)
}

/// A checkpoint prefix, or the latest checkpoint named by a directory's `checkpoint` file.
pub fn checkpoint_prefix(path: &Path) -> Result<PathBuf> {
    if path.is_dir() {
        return ferroflow::train::saver::latest_checkpoint(path)?.ok_or_else(|| {
            anyhow::anyhow!("{}: no checkpoint (no 'checkpoint' file naming an existing .index)", path.display())
        });
    }
    Ok(path.to_path_buf())
}
