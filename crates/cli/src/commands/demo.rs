//! `ferroflow demo`: [`ferroflow::workflows::demo`], printed to stdout.
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use ferroflow::workflows::demo::{self, DemoOptions};

/// Run the demo: what_runs' graph built with the Rust API and optimized; what_runs on two
/// CPU devices end to end (partition graphs written, merged, a TensorBoard log directory);
/// a bundled TensorFlow MLP; mnist_training's MNIST model trained for 3,000 steps, saved with
/// a Saver and restored from its .meta under an import_scope in a fresh session;
/// input_pipeline, and seed 001's EfficientNetB0 (a .keras file ferroflow writes) fine-tuned
/// on the flowers, profiled and saved; traced_functions.
#[derive(Args)]
pub struct DemoArgs {
    /// Where the demo writes its files.
    #[arg(long, default_value = "ferroflow-demo")]
    out: PathBuf,
    /// Training steps of the mnist_training part.
    #[arg(long, default_value_t = 3000)]
    mnist_steps: u64,
    /// Epochs of each phase of seed 001's EfficientNetB0 fine-tuning (0 skips it).
    #[arg(long, default_value_t = 3)]
    effnet_epochs: usize,
    /// A TensorBoard log directory: mnist_training's training (scalars, histograms, graph
    /// and the profile of --profile-batch) goes to LOGDIR/mnist_training, and
    /// input_pipeline's bottleneck hunt — a small CNN trained from the flowers pipeline as it
    /// is, then with prefetch and a parallel map, each profiled and reported — to
    /// LOGDIR/input_pipeline_serial and LOGDIR/input_pipeline_prefetch.
    #[arg(long)]
    logdir: Option<PathBuf>,
    /// With --logdir: the batches to profile ('A,B', 1-based, Keras's profile_batch).
    #[arg(long, value_name = "A,B", default_value = "3,8", requires = "logdir")]
    profile_batch: String,
}

pub fn run(args: DemoArgs) -> Result<()> {
    let options = DemoOptions {
        out_dir: &args.out,
        mnist_steps: args.mnist_steps,
        effnet_epochs: args.effnet_epochs,
        tensorboard: args.logdir.as_deref().map(|d| (d, args.profile_batch.as_str())),
    };
    Ok(demo::run(&mut std::io::stdout(), &options)?)
}
