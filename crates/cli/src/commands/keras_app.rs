//! `ferroflow keras-app`: a Keras application's `.keras` file written by ferroflow.
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use ferroflow::keras::{applications, KerasModel};

/// Write a keras.applications model (EfficientNetB0) with a classifier head as a .keras file.
///
/// The application with random weights (its initializers'; nothing is downloaded), as Keras's
/// transfer-learning guide sets it up: the base called with training=False, global average
/// pooling, dropout 0.2 and a Dense layer of --classes logits (--no-head: the base alone, as
/// include_top=False gives it). Keras loads the file; `ferroflow fit` trains it.
#[derive(Args)]
pub struct KerasAppArgs {
    /// The application: efficientnetb0.
    name: String,
    /// Where to write the model (.keras; or give it as -o OUT.keras).
    #[arg(value_name = "OUT.keras", required_unless_present = "output")]
    out: Option<PathBuf>,
    /// Where to write the model (the same as the positional OUT.keras).
    #[arg(short = 'o', long, value_name = "OUT.keras", conflicts_with = "out")]
    output: Option<PathBuf>,
    /// Input height and width (pixels 0-255).
    #[arg(long, default_value_t = 224)]
    size: usize,
    /// Output classes.
    #[arg(long, default_value_t = 5)]
    classes: usize,
    /// Seed of the random weights.
    #[arg(long, default_value_t = 1)]
    seed: i64,
    /// The base alone (keras.applications' include_top=False model), without the head.
    #[arg(long)]
    no_head: bool,
}

pub fn run(a: KerasAppArgs) -> Result<()> {
    let output =
        a.output.clone().or_else(|| a.out.clone()).context("give the output file (OUT.keras or -o OUT.keras)")?;
    ferroflow::keras::model::check_keras_suffix(&output)?;
    if a.size < 32 || a.size > 1024 || a.classes == 0 {
        bail!("--size must be 32 to 1024 and --classes at least 1");
    }
    let base = match a.name.to_ascii_lowercase().as_str() {
        "efficientnetb0" => applications::efficientnet_b0(a.size, 0.2),
        other => bail!("unknown application '{other}' (ferroflow writes: efficientnetb0)"),
    };
    let config = if a.no_head { base } else { applications::transfer_model("seed001", base, a.size, a.classes) };
    let model = KerasModel::initialized(config, Some(a.seed))?;
    model.save(&output, None)?;
    let s = model.summary()?;
    out!("{}: {} parameters ({} trainable) -> {}", a.name, s.total, s.trainable, output.display());
    Ok(())
}
