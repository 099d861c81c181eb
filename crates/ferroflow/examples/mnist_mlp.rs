//! Seed 003: trains the article's MNIST MLP (dropout 0.2, two dense+relu layers of 256, softmax,
//! cross-entropy, Adam 1e-3, batch 100) in a TensorFlow-1-style session on the bundled MNIST
//! sample (8,000 training / 2,000 test digits), then evaluates it by tensor names as the
//! article does: `accuracy:0` with feeds `inputs:0`, `outputs:0`, `is_training:0`.
//!
//! `cargo run --release -p ferroflow --example mnist_mlp -- [--steps N] [--data DIR] [--seed S]
//! [--intra-op-threads N]`
//! Prints `steps_per_sec=`, `peak_rss_mb=` and, last, `test_accuracy=<value>`.
use std::path::PathBuf;

use ferroflow::runtime::{Session, SessionOptions};
use ferroflow::tensor::Tensor;
use ferroflow::testing::seed_003;
use ferroflow::train::model::{FitOptions, Model};
use ferroflow::train::{mnist, Builder};

fn peak_rss_mb() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut steps = 3000u64;
    let mut data = mnist::bundled_dir();
    let mut seed = 1i64;
    let mut intra = 0usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--steps" => steps = val()?.parse()?,
            "--data" => data = PathBuf::from(val()?),
            "--seed" => seed = val()?.parse()?,
            "--intra-op-threads" => intra = val()?.parse()?,
            other => {
                return Err(format!(
                    "unknown argument '{other}' (expected --steps, --data, --seed, --intra-op-threads)"
                )
                .into())
            }
        }
    }
    let m = mnist::load(&data)?;
    eprintln!("MNIST from {}: {} training, {} test digits", data.display(), m.train.len(), m.test.len());
    let b = Builder::with_seed(seed);
    let roles = seed_003::build(&b, &seed_003::Config::default())?;
    let sopts = SessionOptions { intra_op_threads: intra, ..Default::default() };
    let session = Session::new(b.graph(), sopts)?;
    let model = Model::new(session, roles, &[784]);
    model.initialize()?;
    let y_train = m.train.one_hot(10)?;
    let opts = FitOptions {
        epochs: usize::MAX,
        batch_size: 100,
        max_steps: Some(steps),
        shuffle_seed: seed as u64,
        verbose: false,
        log_every: 500,
    };
    let hist = model.fit(&m.train.images, &y_train, &opts, None)?;
    let sess = model.session();
    let step = sess.run(&[], &["global_step/Read/ReadVariableOp:0"], &[])?;
    eprintln!("global_step = {}", step[0].scalar_value::<i64>()?);
    // As in the article: run `accuracy:0` by name with dropout off.
    let y_test: Tensor = m.test.one_hot(10)?;
    let acc = sess.run(
        &[("inputs:0", m.test.images.clone()), ("outputs:0", y_test), ("is_training:0", Tensor::scalar(false))],
        &["accuracy:0"],
        &[],
    )?;
    println!("steps={} steps_per_sec={:.1}", hist.steps, hist.steps_per_sec);
    if let Some(mb) = peak_rss_mb() {
        println!("peak_rss_mb={mb:.1}");
    }
    println!("test_accuracy={:.4}", acc[0].scalar_value::<f32>()?);
    Ok(())
}
