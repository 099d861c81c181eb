//! SavedModel inference latency: loads DIR, calls its `serving_default` signature on a batch
//! of BATCH inputs (each input's unknown dims set to BATCH; values deterministic) RUNS times
//! after 5 warm-up calls, and prints `median_ms=<v> min_ms=<v> max_ms=<v> peak_rss_mb=<v>`.
//! `cargo run --release --example saved_model_bench -- DIR [BATCH] [RUNS]`; used by
//! `scripts/bench_saved_model.py`, which times TensorFlow loading the same directory.
use std::path::PathBuf;
use std::time::Instant;

use ferroflow::prelude::*;
use ferroflow::train::saved_model::SavedModel;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir =
        PathBuf::from(args.first().ok_or_else(|| anyhow::anyhow!("usage: saved_model_bench DIR [BATCH] [RUNS]"))?);
    let batch: usize = args.get(1).map(|a| a.parse()).transpose()?.unwrap_or(1);
    let runs: usize = args.get(2).map(|a| a.parse()).transpose()?.unwrap_or(50);
    let model = SavedModel::load(&dir, &["serve"], SessionOptions::default())?;
    let sig = model.signature("serving_default")?.clone();
    let mut inputs = Vec::new();
    for spec in &sig.inputs {
        let dims: Vec<usize> = spec
            .shape
            .dims()
            .ok_or_else(|| anyhow::anyhow!("input '{}' has an unknown rank", spec.key))?
            .iter()
            .map(|d| d.unwrap_or(batch))
            .collect();
        let n: usize = dims.iter().product();
        let values: Vec<f32> = (0..n).map(|i| ((i * 7919) % 1000) as f32 / 1000.0).collect();
        inputs.push((spec.key.clone(), Tensor::from_vec(&dims, values)?));
    }
    let feeds: Vec<(&str, Tensor)> = inputs.iter().map(|(k, t)| (k.as_str(), t.clone())).collect();
    for _ in 0..5 {
        model.call("serving_default", &feeds, &[])?;
    }
    let mut ms = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        model.call("serving_default", &feeds, &[])?;
        ms.push(start.elapsed().as_secs_f64() * 1e3);
    }
    ms.sort_by(f64::total_cmp);
    let peak_rss_mb = ferroflow::testing::peak_rss_mb().unwrap_or(0.0);
    println!(
        "median_ms={:.4} min_ms={:.4} max_ms={:.4} peak_rss_mb={peak_rss_mb:.1}",
        ms[ms.len() / 2],
        ms[0],
        ms[ms.len() - 1]
    );
    Ok(())
}
