//! `ferroflow pipeline` (`input_pipeline` over a class-folder directory, with its images/s
//! per epoch and AUTOTUNE's choices) and `ferroflow flowers` (the generated dataset).
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use ferroflow::data::example::example_bytes;
use ferroflow::data::{Budget, TFRecordWriter, AUTOTUNE};
use ferroflow::tensor::{npy, Tensor};
use ferroflow::workflows::flowers::{self, FlowersOptions};
use ferroflow::workflows::input_pipeline::{self, PipelineOptions};

/// `N` or `auto` (AUTOTUNE) for --parallel and --prefetch.
pub fn parse_tunable(s: &str) -> Result<i64, String> {
    match s {
        "auto" | "AUTOTUNE" => Ok(AUTOTUNE),
        n => match n.parse::<i64>() {
            Ok(v) if v > 0 => Ok(v),
            _ => Err(format!("expected a positive number or 'auto', got '{s}'")),
        },
    }
}

/// What `ferroflow pipeline` was asked for.
#[derive(clap::Args)]
pub struct PipelineArgs {
    /// A directory with one folder of images per class (e.g. from `ferroflow flowers`).
    pub dir: PathBuf,
    /// Images are resized to SIZE × SIZE.
    #[arg(long, default_value_t = 224)]
    pub size: usize,
    /// Images per batch.
    #[arg(long, default_value_t = 32)]
    pub batch: usize,
    /// Keep the files in order (class folders sorted, files sorted).
    #[arg(long)]
    pub no_shuffle: bool,
    /// Shuffle seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Epochs to read.
    #[arg(long, default_value_t = 1)]
    pub epochs: usize,
    /// Decode on N worker threads, or `auto` (AUTOTUNE); decoding is serial without it.
    #[arg(long, value_name = "N|auto", value_parser = parse_tunable)]
    pub parallel: Option<i64>,
    /// Prefetch N batches, or `auto` (AUTOTUNE); no prefetch without it.
    #[arg(long, value_name = "N|auto", value_parser = parse_tunable)]
    pub prefetch: Option<i64>,
    /// Cache the decoded images after the first epoch: in memory, or in FILE (a tensor
    /// bundle written atomically; reused by later runs of the same pipeline).
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "")]
    pub cache: Option<PathBuf>,
    /// Write the first --dump-batches batches as images0, labels0, images1, ... to this .npz.
    #[arg(long, value_name = "OUT.npz")]
    pub dump: Option<PathBuf>,
    /// Batches --dump writes.
    #[arg(long, default_value_t = 1)]
    pub dump_batches: usize,
    /// Bytes AUTOTUNE's buffers may hold (default: a quarter of physical memory).
    #[arg(long, value_name = "BYTES")]
    pub ram_budget: Option<u64>,
    /// Train input_pipeline's small CNN from the pipeline instead of only reading it, with this
    /// TensorBoard log directory (the profile of --profile-batch goes to
    /// LOGDIR/plugins/profile/<run>/<host>.xplane.pb).
    #[arg(long, value_name = "DIR")]
    pub logdir: Option<PathBuf>,
    /// With --logdir: the batches to profile, Keras's profile_batch ('A,B', 1-based).
    #[arg(long, value_name = "A,B", default_value = "3,8", requires = "logdir")]
    pub profile_batch: String,
    /// With --logdir: training steps.
    #[arg(long, default_value_t = 12, requires = "logdir")]
    pub train_steps: u64,
}

fn shown(v: Option<i64>) -> String {
    match v {
        None => "off".into(),
        Some(AUTOTUNE) => "auto".into(),
        Some(n) => n.to_string(),
    }
}

pub fn pipeline(a: &PipelineArgs) -> Result<()> {
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
    };
    let (ds, classes) =
        input_pipeline::pipeline(&a.dir, &options).with_context(|| format!("pipeline over {}", a.dir.display()))?;
    let quoted: Vec<String> = classes.iter().map(|c| format!("'{c}'")).collect();
    println!("class_names=[{}]", quoted.join(", "));
    println!(
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
        println!(
            "trained {} steps: {:.1} ms per step, input wait {:.0}% of the loop, final loss {:.4}",
            h.history.steps,
            1e3 * h.mean_step_seconds(),
            100.0 * h.input_fraction(),
            h.history.loss.last().copied().unwrap_or(f64::NAN)
        );
        if let Some(p) = &h.profile {
            println!("profile of batches {}: {}", a.profile_batch, p.display());
            let space = ferroflow::profiler::xspace::read_xspace(p)?;
            print!("{}", ferroflow::profiler::report::analyze(&space)?);
        }
        return Ok(());
    }
    let mut dumped: Vec<(String, Tensor)> = Vec::new();
    let (epochs, tuned) = input_pipeline::run_epochs(&ds, a.epochs, |epoch, i, x, y| {
        if a.dump.is_some() && epoch == 0 && i < a.dump_batches {
            dumped.push((format!("images{i}"), x.clone()));
            dumped.push((format!("labels{i}"), y.clone()));
        }
        Ok(())
    })?;
    for (i, e) in epochs.iter().enumerate() {
        println!(
            "epoch {}: {} images in {} batches, {:.3} s, {:.1} images/s",
            i + 1,
            e.images,
            e.batches,
            e.seconds,
            e.images_per_second()
        );
    }
    for t in &tuned {
        println!("autotune {}: {}={} ({})", t.stage, t.kind, t.value, t.reason);
    }
    if let Some(out) = &a.dump {
        npy::write_npz(out, &dumped).with_context(|| format!("writing {}", out.display()))?;
        println!("wrote {} batches to {}", dumped.len() / 2, out.display());
    }
    Ok(())
}

pub fn make_flowers(
    dir: &Path,
    per_class: usize,
    size: Option<&str>,
    seed: u64,
    tfrecord: Option<&Path>,
) -> Result<()> {
    let size = match size {
        None => None,
        Some(s) => {
            let (w, h) = s.split_once('x').context("--size must be WIDTHxHEIGHT, e.g. 500x375")?;
            let (w, h): (usize, usize) = (w.parse().context("--size width")?, h.parse().context("--size height")?);
            if w == 0 || h == 0 || w > 8192 || h > 8192 {
                bail!("--size {s}: width and height must be in 1..=8192");
            }
            Some((w, h))
        }
    };
    let files = flowers::generate(dir, &FlowersOptions { per_class, size, seed, ..Default::default() })?;
    println!("wrote {} images in {} class folders under {}", files.len(), flowers::CLASSES.len(), dir.display());
    if let Some(out) = tfrecord {
        let mut w = TFRecordWriter::create(out).with_context(|| format!("creating {}", out.display()))?;
        for f in &files {
            let class = f.parent().and_then(|p| p.file_name()).and_then(|n| n.to_str()).unwrap_or_default();
            let label = flowers::CLASSES.iter().position(|c| *c == class).context("a generated image's class")? as i64;
            let bytes = std::fs::read(f).with_context(|| format!("reading {}", f.display()))?;
            let name = f.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let record = example_bytes(&[
                ("image/encoded", &Tensor::from_strings(&[1], vec![bytes])?),
                ("image/class/label", &Tensor::from_vec(&[1], vec![label])?),
                ("image/filename", &Tensor::from_strings(&[1], vec![name.into_bytes()])?),
            ])?;
            w.write(&record)?;
        }
        w.close()?;
        println!("wrote {} tf.train.Examples to {}", files.len(), out.display());
    }
    Ok(())
}
