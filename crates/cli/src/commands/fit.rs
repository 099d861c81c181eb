//! `ferroflow fit`: a Keras model file fine-tuned on class folders of images (seed 001).
use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;
use ferroflow::keras::Freeze;
use ferroflow::workflows::fine_tune::{fine_tune, FineTuneOptions};

/// Fine-tune a Keras model (.keras) on class folders of images, as Keras's model.fit does.
///
/// Follows Keras's transfer-learning guide: image_dataset_from_directory's listing and
/// validation split, a tf.data pipeline (shuffle, parallel decode and resize, batch, prefetch
/// AUTOTUNE), Adam and sparse categorical cross-entropy (from logits unless the model ends in a
/// softmax), Keras's progress bar (left out with -q), the TensorBoard callback with profiling, and
/// the trained model written as a .keras file Keras loads.
#[derive(Args)]
pub struct FitArgs {
    /// The model (.keras): one image input [batch, size, size, 3] taking pixels 0-255, one
    /// output of one score per class folder.
    model: PathBuf,
    /// A folder of class folders of images (labels in sorted folder order).
    data_dir: PathBuf,
    /// Images are resized to SIZE×SIZE (default and requirement: the model's input size).
    #[arg(long)]
    size: Option<usize>,
    /// Images per batch.
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// Passes over the training images.
    #[arg(long, default_value_t = 1)]
    epochs: usize,
    /// Stop after this many steps in all.
    #[arg(long, value_name = "N")]
    max_steps: Option<u64>,
    /// Keep this fraction of the images for validation (evaluated after each epoch).
    #[arg(long, value_name = "F")]
    validation_split: Option<f32>,
    /// Train only the layers after the base model (the model's nested model); its
    /// BatchNormalization layers run in inference mode.
    #[arg(long, conflicts_with = "unfreeze_top")]
    freeze_base: bool,
    /// Also train the base model's top N layers (its BatchNormalization layers stay frozen).
    #[arg(long, value_name = "N")]
    unfreeze_top: Option<usize>,
    /// Adam's learning rate.
    #[arg(long, default_value_t = 1e-3)]
    learning_rate: f64,
    /// Batches follow the listing order (no shuffle).
    #[arg(long)]
    no_shuffle: bool,
    /// Seed of the validation split, the shuffle and dropout.
    #[arg(long, default_value_t = 1223)]
    seed: u64,
    /// Write TensorBoard logs here (per-batch loss, weight histograms, the graph).
    #[arg(long, value_name = "DIR")]
    logdir: Option<PathBuf>,
    /// With --logdir: profile these batches (Keras's profile_batch, e.g. 110,120).
    #[arg(long, value_name = "A,B", requires = "logdir")]
    profile_batch: Option<String>,
    /// Write the trained model to this .keras file (Keras's `model.save`).
    #[arg(short = 'o', long, value_name = "OUT.keras", alias = "save")]
    output: Option<PathBuf>,
    /// Print every Nth step's loss on stderr (0: never).
    #[arg(long, value_name = "N", default_value_t = 0)]
    log_every: u64,
}

pub fn run(a: FitArgs) -> Result<()> {
    if let Some(out) = &a.output {
        ferroflow::keras::model::check_keras_suffix(out)?;
    }
    if a.batch == 0 || a.epochs == 0 {
        bail!("--batch and --epochs must be at least 1");
    }
    let freeze = match (a.freeze_base, a.unfreeze_top) {
        (true, _) => Freeze::Base,
        (false, Some(n)) => Freeze::UnfreezeTop(n),
        (false, None) => Freeze::AsSaved,
    };
    let options = FineTuneOptions {
        size: a.size,
        batch: a.batch,
        epochs: a.epochs,
        max_steps: a.max_steps,
        validation_split: a.validation_split,
        freeze,
        learning_rate: a.learning_rate,
        shuffle: !a.no_shuffle,
        seed: a.seed,
        tensorboard: a.logdir.clone().map(|d| (d, a.profile_batch.clone())),
        save: a.output.clone(),
        verbose: !crate::logging::quiet(),
        log_every: a.log_every,
    };
    let run = fine_tune(&a.model, &a.data_dir, &options)?;
    let (layers, trainable, total) = &run.trainable;
    out!(
        "{} training / {} validation images of {} classes; {} of {} parameters trained ({} layers)",
        run.images.0,
        run.images.1,
        run.classes.len(),
        trainable,
        total,
        layers.len()
    );
    let h = &run.history;
    for (i, loss) in h.history.loss.iter().enumerate() {
        match h.history.validation.get(i) {
            Some((vl, va)) => {
                out!("epoch {}: loss {loss:.4}, val_loss {vl:.4}, val_accuracy {:.4}", i + 1, va.unwrap_or(f64::NAN))
            }
            None => out!("epoch {}: loss {loss:.4}", i + 1),
        }
    }
    out!(
        "{} steps, {:.2} steps/s ({:.0} ms per step, input wait {:.0}% of the loop)",
        h.history.steps,
        h.history.steps_per_sec,
        h.mean_step_seconds() * 1e3,
        h.input_fraction() * 100.0
    );
    // After warm-up (the first steps build and optimize the step's plan): the median step,
    // input wait included.
    let mut steady: Vec<f64> =
        h.step_seconds.iter().skip(2.min(h.step_seconds.len().saturating_sub(1))).copied().collect();
    steady.sort_by(f64::total_cmp);
    if let Some(&m) = steady.get(steady.len() / 2) {
        out!("steady state: {:.3} steps/s (median step {:.0} ms after 2 warm-up steps)", 1.0 / m.max(1e-9), m * 1e3);
    }
    if let Some(p) = &h.profile {
        out!("profile: {}", p.display());
    }
    if let Some(out) = &a.output {
        out!("saved {}", out.display());
    }
    Ok(())
}
