//! Checkpoint save and restore throughput: `--vars K` float variables of `--params N` values
//! in all (default 10 x 10,000,000 = 100 million, 400 MB), random-initialized in a session,
//! saved by a TF1-style `Saver` (SaveV2: data file, index, .meta, `checkpoint` file, each
//! synced) and restored into the same session (RestoreV2 + AssignVariableOp), `--repeat`
//! times. Prints `save_mb_per_s=` and `restore_mb_per_s=` (best and median);
//! scripts/bench_checkpoint.py runs TensorFlow's Saver on the same workload alongside.
//!
//! `cargo run --release -p ferroflow --example checkpoint_bench -- [--params N] [--vars K]
//! [--dir DIR] [--repeat R]`
use std::path::PathBuf;
use std::time::Instant;

use ferroflow::prelude::*;
use ferroflow::train::saver::{Saver, SaverOptions};
use ferroflow::train::{Builder, Initializer};

fn stats(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (v[v.len() - 1], v[v.len() / 2])
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (mut params, mut vars, mut repeat) = (100_000_000usize, 10usize, 3usize);
    let mut dir = std::env::temp_dir().join("ferroflow_checkpoint_bench");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--params" => params = val()?.parse()?,
            "--vars" => vars = val()?.parse()?,
            "--repeat" => repeat = val()?.parse()?,
            "--dir" => dir = PathBuf::from(val()?),
            other => return Err(format!("unknown argument '{other}' (--params, --vars, --dir, --repeat)").into()),
        }
    }
    let b = Builder::with_seed(1);
    let per = params / vars;
    let init = Initializer::RandomUniform { minval: -1.0, maxval: 1.0, seed: None };
    for i in 0..vars {
        b.variable(b.scope(), &format!("var_{i}"), &[per], DType::Float, &init, true)?;
    }
    b.global_variables_initializer()?;
    let mut saver = Saver::new(&b, None, SaverOptions::default().with_max_to_keep(1))?;
    let sess = Session::new(b.graph(), SessionOptions::default())?;
    sess.run(&[], &[], &["init"])?;
    let mb = (per * vars * 4) as f64 / 1e6;
    let _ = std::fs::remove_dir_all(&dir);
    let (mut save, mut restore) = (Vec::new(), Vec::new());
    for i in 0..repeat {
        let t = Instant::now();
        let path = saver.save(&sess, dir.join("model.ckpt"), Some(i as i64))?;
        save.push(mb / t.elapsed().as_secs_f64());
        let t = Instant::now();
        saver.restore(&sess, &path)?;
        restore.push(mb / t.elapsed().as_secs_f64());
    }
    let (sb, sm) = stats(save);
    let (rb, rm) = stats(restore);
    println!("params={} vars={vars} mb={mb:.1}", per * vars);
    println!("save_mb_per_s={sm:.1} best={sb:.1}");
    println!("restore_mb_per_s={rm:.1} best={rb:.1}");
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
