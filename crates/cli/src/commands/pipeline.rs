//! `ferroflow pipeline`: `input_pipeline` over a class-folder directory, with its images/s
//! per epoch and AUTOTUNE's choices, or a small CNN trained and profiled from it.
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use ferroflow::data::{Budget, AUTOTUNE};
use ferroflow::tensor::{npy, Tensor};
use ferroflow::workflows::input_pipeline::{self, PipelineOptions};

/// `N` or `auto` (AUTOTUNE) for --parallel and --prefetch.
fn parse_tunable(s: &str) -> Result<i64, String> {
    match s {
        "auto" | "AUTOTUNE" => Ok(AUTOTUNE),
        n => match n.parse::<i64>() {
            Ok(v) if v > 0 => Ok(v),
            _ => Err(format!("expected a positive number or 'auto', got '{s}'")),
        },
    }
}

/// Run a tf.data image pipeline over class folders and report images/s and AUTOTUNE's choices.
///
/// The pipeline `image_dataset_from_directory` builds: file list → map(read_file → decode_jpeg →
/// resize) → batch → prefetch, with --parallel, --prefetch and --cache as tf.data's
/// num_parallel_calls, prefetch and cache; prints `class_names=[...]`, images/s per epoch and
/// what AUTOTUNE chose. With --logdir it trains a small CNN from the pipeline instead, profiles
/// --profile-batch as Keras's TensorBoard callback does and prints the profile's report.
#[derive(Args)]
pub struct PipelineArgs {
    /// A directory with one folder of images per class (e.g. from `ferroflow flowers`).
    dir: PathBuf,
    /// Images are resized to SIZE × SIZE.
    #[arg(long, default_value_t = 224)]
    size: usize,
    /// Images per batch.
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// Keep the files in order (class folders sorted, files sorted).
    #[arg(long)]
    no_shuffle: bool,
    /// Shuffle seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Epochs to read.
    #[arg(long, default_value_t = 1)]
    epochs: usize,
    /// Decode on N worker threads, or `auto` (AUTOTUNE); decoding is serial without it.
    #[arg(long, value_name = "N|auto", value_parser = parse_tunable)]
    parallel: Option<i64>,
    /// Prefetch N batches, or `auto` (AUTOTUNE); no prefetch without it.
    #[arg(long, value_name = "N|auto", value_parser = parse_tunable)]
    prefetch: Option<i64>,
    /// Cache the decoded images after the first epoch: in memory, or in FILE (a tensor
    /// bundle written atomically; reused by later runs of the same pipeline).
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "")]
    cache: Option<PathBuf>,
    /// Write the first --dump-batches batches as images0, labels0, images1, ... to this .npz.
    #[arg(short = 'o', long, value_name = "OUT.npz", alias = "dump")]
    output: Option<PathBuf>,
    /// Batches --output writes.
    #[arg(long, default_value_t = 1)]
    dump_batches: usize,
    /// Bytes AUTOTUNE's buffers may hold (default: a quarter of physical memory).
    #[arg(long, value_name = "BYTES")]
    ram_budget: Option<u64>,
    /// Train a small CNN from the pipeline instead of only reading it, with this
    /// TensorBoard log directory (the profile of --profile-batch goes to
    /// LOGDIR/plugins/profile/<run>/<host>.xplane.pb).
    #[arg(long, value_name = "DIR")]
    logdir: Option<PathBuf>,
    /// With --logdir: the batches to profile, Keras's profile_batch ('A,B', 1-based).
    #[arg(long, value_name = "A,B", default_value = "3,8", requires = "logdir")]
    profile_batch: String,
    /// With --logdir: training steps.
    #[arg(long, default_value_t = 12, requires = "logdir")]
    train_steps: u64,
    /// The most scans a progressive JPEG may have (0 = no limit): a file with more fails
    /// (its element fails, naming the file and the count).
    #[arg(long, value_name = "N", default_value_t = ferroflow::codec::jpeg::DEFAULT_MAX_SCANS)]
    jpeg_max_scans: u32,
    /// Skip images that fail to read or decode, naming each on stderr; the count is printed
    /// last (`ignored_errors=N`).
    #[arg(long)]
    ignore_errors: bool,
}

fn shown(v: Option<i64>) -> String {
    match v {
        None => "off".into(),
        Some(AUTOTUNE) => "auto".into(),
        Some(n) => n.to_string(),
    }
}

pub fn run(a: PipelineArgs) -> Result<()> {
    ferroflow::codec::jpeg::set_default_max_scans(a.jpeg_max_scans);
    if a.size == 0 || a.batch == 0 || a.epochs == 0 {
        bail!("--size, --batch and --epochs must be at least 1");
    }
    // `--cache` alone: in memory; `--cache FILE`: a file.
    let cache = a.cache.clone().map(|c| (!c.as_os_str().is_empty()).then_some(c));
    let mut budget = Budget::default();
    if let Some(r) = a.ram_budget {
        budget.ram_bytes = r;
    }
    let options = PipelineOptions {
        size: a.size,
        batch: a.batch,
        shuffle: !a.no_shuffle,
        seed: a.seed,
        parallel: a.parallel,
        prefetch: a.prefetch,
        cache: cache.clone(),
        budget,
        ignore_errors: a.ignore_errors.then(Default::default),
    };
    let (ds, classes) =
        input_pipeline::pipeline(&a.dir, &options).with_context(|| format!("pipeline over {}", a.dir.display()))?;
    let quoted: Vec<String> = classes.iter().map(|c| format!("'{c}'")).collect();
    out!("class_names=[{}]", quoted.join(", "));
    out!(
        "pipeline: {} (parallel map {}, prefetch {}, cache {})",
        ds.describe(),
        shown(a.parallel),
        shown(a.prefetch),
        match &cache {
            None => "off".to_string(),
            Some(None) => "memory".to_string(),
            Some(Some(f)) => f.display().to_string(),
        }
    );
    if let Some(logdir) = &a.logdir {
        let h = input_pipeline::train_profiled_cnn(&a.dir, &options, a.train_steps, logdir, &a.profile_batch)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        out!(
            "trained {} steps: {:.1} ms per step, input wait {:.0}% of the loop, final loss {:.4}",
            h.history.steps,
            1e3 * h.mean_step_seconds(),
            100.0 * h.input_fraction(),
            h.history.loss.last().copied().unwrap_or(f64::NAN)
        );
        if let Some(p) = &h.profile {
            out!("profile of batches {}: {}", a.profile_batch, p.display());
            let space = ferroflow::profiler::xspace::read_xspace(p)?;
            crate::output::print_str(&ferroflow::profiler::report::analyze(&space)?.to_string());
        }
        return Ok(());
    }
    let mut dumped: Vec<(String, Tensor)> = Vec::new();
    let mut started = None;
    let (epochs, tuned) = input_pipeline::run_epochs(&ds, a.epochs, |epoch, i, x, y| {
        // Progress as it happens (the figures are printed at the end).
        if started != Some(epoch) {
            started = Some(epoch);
            if !crate::logging::quiet() {
                eprintln!("[pipeline] epoch {} of {}", epoch + 1, a.epochs);
            }
        }
        if a.output.is_some() && epoch == 0 && i < a.dump_batches {
            dumped.push((format!("images{i}"), x.clone()));
            dumped.push((format!("labels{i}"), y.clone()));
        }
        Ok(())
    })?;
    for (i, e) in epochs.iter().enumerate() {
        out!(
            "epoch {}: {} images in {} batches, {:.3} s, {:.1} images/s",
            i + 1,
            e.images,
            e.batches,
            e.seconds,
            e.images_per_second()
        );
    }
    for t in &tuned {
        out!("autotune {}: {}={} ({})", t.stage, t.kind, t.value, t.reason);
    }
    if let Some(out) = &a.output {
        npy::write_npz(out, &dumped).with_context(|| format!("writing {}", out.display()))?;
        out!("wrote {} batches to {}", dumped.len() / 2, out.display());
    }
    if let Some(counter) = &options.ignore_errors {
        out!("ignored_errors={}", counter.load(std::sync::atomic::Ordering::Relaxed));
    }
    Ok(())
}
