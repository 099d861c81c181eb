//! `mnist_training`: trains an MNIST MLP (dropout 0.2, two dense+relu layers of 256, softmax,
//! cross-entropy, Adam 1e-3, batch 100) in a TensorFlow-1-style session on the bundled MNIST
//! sample (8,000 training / 2,000 test digits), then evaluates it by tensor names as TensorFlow 1
//! code does: `accuracy:0` with feeds `inputs:0`, `outputs:0`, `is_training:0`.
//!
//! `cargo run --release -p ferroflow --example mnist_mlp -- [--steps N] [--data DIR] [--seed S]
//! [--intra-op-threads N]`
//! Prints `steps_per_sec=`, `peak_rss_mb=` and, last, `test_accuracy=<value>`.
//! `--write-graph FILE.pb|.pbtxt` only writes the (untrained) training graph — placeholders,
//! variables, `init`, the Adam train op — for TensorFlow to import (scripts/interop_check.py).
use std::path::PathBuf;

use ferroflow::runtime::SessionOptions;
use ferroflow::train::mnist;
use ferroflow::workflows::mnist_training;

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let mut steps = 3000u64;
    let mut data = mnist::bundled_dir();
    let mut seed = 1i64;
    let mut intra = 0usize;
    let mut write_graph: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--steps" => steps = val()?.parse()?,
            "--data" => data = PathBuf::from(val()?),
            "--seed" => seed = val()?.parse()?,
            "--intra-op-threads" => intra = val()?.parse()?,
            "--write-graph" => write_graph = Some(PathBuf::from(val()?)),
            other => {
                return Err(format!(
                    "unknown argument '{other}' (expected --steps, --data, --seed, --intra-op-threads, --write-graph)"
                )
                .into())
            }
        }
    }
    if let Some(path) = write_graph {
        let b = ferroflow::train::Builder::with_seed(seed);
        let roles = mnist_training::build(&b, &mnist_training::Config::default())?;
        ferroflow::graph::io::write_graph_def(&path, &b.graph().to_graph_def())?;
        println!(
            "wrote {} (train op '{}', init '{}', loss '{}')",
            path.display(),
            roles.train_op,
            roles.init,
            roles.loss
        );
        return Ok(());
    }
    let options = SessionOptions::default().with_intra_op_threads(intra);
    let r = mnist_training::train(&data, steps, seed, options, 500, None)?;
    eprintln!("MNIST from {}: {} training, {} test digits", data.display(), r.examples.0, r.examples.1);
    eprintln!("global_step = {}", r.global_step);
    println!("steps={} steps_per_sec={:.1}", r.steps, r.steps_per_sec);
    if let Some(mb) = ferroflow::testing::peak_rss_mb() {
        println!("peak_rss_mb={mb:.1}");
    }
    println!("test_accuracy={:.4}", r.test_accuracy);
    Ok(())
}
