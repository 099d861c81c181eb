//! `ferroflow mnist`: `mnist_training` from the command line, alone or data-parallel under
//! `mpirun`.
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use clap::Args;
use ferroflow::prelude::*;
use ferroflow::workflows::mnist_training::{self, Config, Outputs};

use crate::world;

/// Train a TF1-style MLP on MNIST in a Session, with a Saver and SavedModel export.
///
/// The model of TensorFlow 1's MNIST tutorials, built as a graph and trained in a Session:
/// placeholders `inputs`, `outputs` and `is_training`; dropout, two dense+relu layers of 256,
/// softmax, cross-entropy, Adam 1e-3 with `global_step`, batches of 100. Reads MNIST's IDX files
/// (default: a bundled 8,000/2,000-digit sample), then runs `accuracy:0` on the test split by
/// tensor name; prints `test_accuracy=<value>` last. --save writes a TF1 Saver checkpoint with its
/// .meta, --saved-model a SavedModel TensorFlow loads, --logdir TensorBoard logs.
#[derive(Args)]
pub struct MnistArgs {
    /// Training steps (batches of 100).
    #[arg(long, default_value_t = 3000)]
    steps: u64,
    /// Directory with train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz],
    /// t10k-images-idx3-ubyte[.gz], t10k-labels-idx1-ubyte[.gz] (default: the bundled
    /// 8,000/2,000-digit sample; full MNIST works too).
    #[arg(long)]
    data: Option<PathBuf>,
    /// Graph-level random seed (initializers, dropout, shuffling).
    #[arg(long, default_value_t = 1)]
    seed: i64,
    /// Threads one large kernel may use (0 = one per core).
    #[arg(long, default_value_t = 0)]
    intra_op_threads: usize,
    /// Threads running independent nodes (0 = one per core).
    #[arg(long, default_value_t = 0)]
    inter_op_threads: usize,
    /// Save the trained model with a TF1 Saver: SAVE-STEP.{index,data-00000-of-00001,meta}
    /// and SAVE's directory's `checkpoint` file.
    #[arg(long, value_name = "PREFIX")]
    save: Option<PathBuf>,
    /// Export the trained model as a SavedModel that TensorFlow loads (`serving_default`:
    /// `inputs` → `predictions`; `ferroflow run DIR` and `ferroflow inspect DIR` read it).
    #[arg(long, value_name = "DIR")]
    saved_model: Option<PathBuf>,
    /// TensorBoard log directory (Keras's TensorBoard callback: loss every 100 batches and
    /// per epoch, weight histograms, the graph, and the profile of --profile-batch).
    #[arg(long, value_name = "DIR")]
    logdir: Option<PathBuf>,
    /// With --logdir: the batches to profile ('A,B', 1-based; empty for none).
    #[arg(long, value_name = "A,B", default_value = "", requires = "logdir")]
    profile_batch: String,
    /// Data-parallel over MPI (`mpirun -np N ferroflow mnist --distributed`, a build with
    /// `--features mpi`): rank 0's initial variables are broadcast, each batch of 100 is
    /// split across the ranks, gradients are averaged (fused all-reduce); every rank prints
    /// its test accuracy and a checksum of its variables; only rank 0 writes --save,
    /// --saved-model and --logdir. Alone (no mpirun) it is a 1-rank world.
    #[arg(long)]
    distributed: bool,
    /// Examples per step; with --distributed, the global batch, split across the ranks.
    #[arg(long, default_value_t = 100, value_name = "N")]
    batch: usize,
    /// Dropout rate of the input and hidden layers (0 turns dropout off, which makes a
    /// distributed run comparable with one process step by step).
    #[arg(long, default_value_t = 0.2, value_name = "RATE")]
    dropout: f64,
}

pub fn run(args: MnistArgs) -> Result<()> {
    let options = SessionOptions::default()
        .with_intra_op_threads(args.intra_op_threads)
        .with_inter_op_threads(args.inter_op_threads);
    let outputs = Outputs {
        save: args.save.as_deref(),
        saved_model: args.saved_model.as_deref(),
        tensorboard: args.logdir.as_deref().map(|d| (d, args.profile_batch.as_str())),
    };
    let config = Config {
        dropout_rate: args.dropout,
        distributed: args.distributed,
        batch_size: args.batch,
        ..Default::default()
    };
    let train = || train_and_report(args.data.as_deref(), args.steps, args.seed, options, outputs, &config);
    if !(0.0..1.0).contains(&args.dropout) {
        bail!("--dropout {}: expected a rate in [0, 1)", args.dropout);
    } else if args.distributed {
        world::run_in_world(train)
    } else {
        train()
    }
}

/// Trains, saying what it does and, for a single process, `Report::summary` after it.
fn train_and_report(
    data: Option<&Path>,
    steps: u64,
    seed: i64,
    options: SessionOptions,
    outputs: Outputs,
    config: &Config,
) -> Result<()> {
    let data = data.map_or_else(ferroflow::train::mnist::bundled_dir, Path::to_path_buf);
    let world = ferroflow::collective::world();
    let (rank, ranks) = if config.distributed { (world.rank(), world.size()) } else { (0, 1) };
    if config.distributed {
        out!(
            "rank {rank} of {ranks} ({} world): training the MNIST MLP data-parallel for {steps} steps of {} digits \
             ({} per rank) on {}",
            world.backend(),
            config.batch_size,
            config.batch_size / ranks.max(1),
            data.display()
        );
    } else {
        out!("training the MNIST MLP for {steps} steps on {} (loss every 500 steps on stderr)", data.display());
    }
    if config.batch_size == 0 {
        bail!("--batch 0: expected at least one example per step");
    }
    let r = mnist_training::train_config(&data, steps, seed, options, 500, outputs, config)
        .map_err(|e| anyhow::anyhow!("mnist_training: {e}"))?;
    if config.distributed {
        out!(
            "rank={rank} ranks={ranks} steps={} global_step={} ({:.0} steps/s) variables_fnv1a={:016x} test_accuracy={:.4}",
            r.steps,
            r.global_step,
            r.steps_per_sec,
            r.checksum,
            r.test_accuracy
        );
        if let Some(c) = &r.checkpoint {
            out!("rank 0 saved {}.{{index,data-00000-of-00001,meta}}", c.display());
        }
        return Ok(());
    }
    out!("{}", r.summary(&outputs));
    Ok(())
}
