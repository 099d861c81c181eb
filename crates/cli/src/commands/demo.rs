//! `ferroflow demo`: [`ferroflow::workflows::demo`], printed to stdout.
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use ferroflow::workflows::demo::{self, DemoOptions};

/// Run the end-to-end tour of ferroflow as a TensorFlow user meets it.
///
/// In order: a small graph built with the Rust API and optimized as Grappler would (constant
/// folding, common subexpressions), then run on two CPU devices (partition graphs written and
/// merged, a TensorBoard log directory); a TensorFlow MLP GraphDef checked against TensorFlow's
/// outputs; a TF1-style MNIST MLP trained in a Session, saved with a Saver and restored from its
/// .meta under an import scope in a fresh session; tf.data pipelines over generated flower JPEGs
/// (serial, prefetch, parallel map, cache); Keras's EfficientNetB0 written as a .keras file and
/// fine-tuned on the flowers, profiled and saved; tf.function tracing and AutoGraph.
#[derive(Args)]
pub struct DemoArgs {
    /// The directory the demo writes its files to.
    #[arg(short = 'o', long, value_name = "DIR", default_value = "ferroflow-demo", alias = "out")]
    output: PathBuf,
    /// Training steps of the MNIST MLP (batches of 100) before it is saved and restored.
    #[arg(long, default_value_t = 3000)]
    mnist_steps: u64,
    /// Epochs of each phase of the EfficientNetB0 fine-tuning (frozen base, then its top
    /// layers; 0 skips it).
    #[arg(long, default_value_t = 3)]
    effnet_epochs: usize,
    /// A TensorBoard log directory: the MNIST MLP's training (scalars, histograms, graph and
    /// the profile of --profile-batch) goes to LOGDIR/mnist_training, and the input-bottleneck
    /// hunt — a small CNN trained from the flowers tf.data pipeline as it is, then with
    /// prefetch and a parallel map, each profiled and reported — to
    /// LOGDIR/input_pipeline_serial and LOGDIR/input_pipeline_prefetch.
    #[arg(long)]
    logdir: Option<PathBuf>,
    /// With --logdir: the batches to profile ('A,B', 1-based, Keras's profile_batch).
    #[arg(long, value_name = "A,B", default_value = "3,8", requires = "logdir")]
    profile_batch: String,
}

pub fn run(args: DemoArgs) -> Result<()> {
    let options = DemoOptions {
        out_dir: &args.output,
        mnist_steps: args.mnist_steps,
        effnet_epochs: args.effnet_epochs,
        tensorboard: args.logdir.as_deref().map(|d| (d, args.profile_batch.as_str())),
    };
    Ok(demo::run(&mut crate::output::Stdout, &options)?)
}
