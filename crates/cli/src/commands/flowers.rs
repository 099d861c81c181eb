//! `ferroflow flowers`: the generated flowers-like dataset, optionally as TFRecords too.
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use ferroflow::data::example::example_bytes;
use ferroflow::data::TFRecordWriter;
use ferroflow::tensor::Tensor;
use ferroflow::workflows::flowers::{self, FlowersOptions};

/// Generate a flowers-like image dataset: tf_flowers' five class folders of JPEGs.
///
/// Five class folders (daisy, dandelion, roses, sunflowers, tulips) of photo-like JPEGs (nothing
/// is downloaded), laid out as `image_dataset_from_directory` reads them, for `ferroflow
/// pipeline` and `ferroflow fit`; --tfrecord also writes them as a TFRecord of tf.train.Examples.
#[derive(Args)]
pub struct FlowersArgs {
    /// The directory to write the class folders to (or give it as -o DIR).
    #[arg(value_name = "DIR", required_unless_present = "output")]
    dir: Option<PathBuf>,
    /// The directory to write the class folders to (the same as the positional DIR).
    #[arg(short = 'o', long, value_name = "DIR", conflicts_with = "dir")]
    output: Option<PathBuf>,
    /// Images per class.
    #[arg(long, default_value_t = 40)]
    per_class: usize,
    /// One size for every image, WIDTHxHEIGHT (default: varied, 320–500 × 240–375).
    #[arg(long, value_name = "WxH")]
    size: Option<String>,
    /// Generator seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Also write the images as a TFRecord file of `tf.train.Example`s (`image/encoded`:
    /// the JPEG bytes, `image/class/label`: int64, `image/filename`), as TensorFlow's
    /// image datasets store them.
    #[arg(long, value_name = "FILE")]
    tfrecord: Option<PathBuf>,
}

pub fn run(args: FlowersArgs) -> Result<()> {
    let FlowersArgs { dir, output, per_class, size, seed, tfrecord } = args;
    let dir = output.or(dir).context("give the output directory (DIR or -o DIR)")?;
    let size = match size.as_deref() {
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
    let files = flowers::generate(&dir, &FlowersOptions { per_class, size, seed, ..Default::default() })?;
    out!("wrote {} images in {} class folders under {}", files.len(), flowers::CLASSES.len(), dir.display());
    if let Some(out) = &tfrecord {
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
        out!("wrote {} tf.train.Examples to {}", files.len(), out.display());
    }
    Ok(())
}
