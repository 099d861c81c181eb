//! Keras model files at the command line: `run MODEL.keras`, `inspect MODEL.keras`,
//! `convert MODEL.keras OUT.keras|OUT.weights.h5 [--weights W]`.
use std::path::Path;

use anyhow::{bail, Context, Result};
use ferroflow::keras::KerasModel;
use ferroflow::prelude::*;
use ferroflow::tensor::npy;

/// Whether `path` names a Keras model file (`.keras`, `.h5`, `.hdf5`).
pub fn is_keras(path: &Path) -> bool {
    path.is_file() && path.extension().and_then(|e| e.to_str()).is_some_and(|e| matches!(e, "keras" | "h5" | "hdf5"))
}

/// `ferroflow run MODEL.keras --inputs IN.npz [--output OUT.npz]`: the model in inference
/// mode; inputs by the model's input names (or the one array when the model has one input),
/// outputs under its output names.
pub fn run(path: &Path, inputs: Option<&Path>, output: Option<&Path>, opts: SessionOptions) -> Result<()> {
    let model = KerasModel::load(path)?;
    let p = model.predictor(opts)?;
    let inputs = inputs.with_context(|| {
        format!(
            "{}: give the model's inputs as --inputs IN.npz (arrays named {})",
            path.display(),
            p.input_names().join(", ")
        )
    })?;
    let arrays = npy::read_npz(inputs)?;
    let names = p.input_names();
    let feeds: Vec<Tensor> = if names.len() == 1 && arrays.len() == 1 {
        vec![arrays[0].1.clone()]
    } else {
        names
            .iter()
            .map(|n| {
                arrays.iter().find(|(k, _)| k == n).map(|(_, t)| t.clone()).with_context(|| {
                    let have: Vec<&str> = arrays.iter().map(|(k, _)| k.as_str()).collect();
                    format!(
                        "{}: no array '{n}' (the model's inputs: {}; the file has: {})",
                        inputs.display(),
                        names.join(", "),
                        have.join(", ")
                    )
                })
            })
            .collect::<Result<_>>()?
    };
    let outs = p.predict(&feeds)?;
    let results: Vec<(String, Tensor)> = p.output_names().iter().map(|n| n.to_string()).zip(outs).collect();
    for (name, t) in &results {
        super::run::print_tensor(name, t);
    }
    if let Some(out) = output {
        npy::write_npz(out, &results)?;
        out!("wrote {} tensor(s) to {}", results.len(), out.display());
    }
    Ok(())
}

/// `ferroflow inspect MODEL.keras`: what `model.summary()` prints (as JSON with `as_json`).
pub fn inspect(path: &Path, as_json: bool) -> Result<()> {
    let model = KerasModel::load(path)?;
    let s = model.summary()?;
    if as_json {
        let layers: Vec<serde_json::Value> = s
            .rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "name": r.name,
                    "class": r.class,
                    "output_shape": r.output_shape,
                    "params": r.params,
                    "connected_to": r.connected,
                })
            })
            .collect();
        return super::print_json(&serde_json::json!({
            "model": path.display().to_string(),
            "format": "keras",
            "name": s.name,
            "sequential": s.sequential,
            "layers": layers,
            "total_params": s.total,
            "trainable_params": s.trainable,
            "non_trainable_params": s.non_trainable,
            "trainable_bytes": s.trainable_bytes,
            "non_trainable_bytes": s.non_trainable_bytes,
        }));
    }
    out!("{s}");
    Ok(())
}

/// `ferroflow convert MODEL OUT.keras|OUT.weights.h5 [--weights W]`: a Keras model (with
/// weights read from W when given) built, and its weights written back through ferroflow's
/// own writer as a `.keras` archive or a Keras 3 `.weights.h5`.
pub fn convert(input: &Path, output: &Path, weights: Option<&Path>) -> Result<()> {
    let mut model = KerasModel::load(input)?;
    if let Some(w) = weights {
        model.load_weights(w)?;
    }
    let p = model.predictor(SessionOptions::default())?;
    let values = p.weights()?;
    let name = output.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name.ends_with(".weights.h5") {
        model.save_weights(output, Some(&values))?;
    } else if name.ends_with(".keras") {
        model.save(output, Some(&values))?;
    } else {
        bail!("{}: write a Keras model as OUT.keras or its weights as OUT.weights.h5", output.display());
    }
    let n: usize = values.values().map(Vec::len).sum();
    out!("{}: {} weights of {} layers -> {}", input.display(), n, values.len(), output.display());
    Ok(())
}
