//! Seed 001 for real: a Keras model file fine-tuned on a folder of class folders, as the
//! article's pipeline feeds it and Keras's transfer-learning recipe trains it.
//!
//! The files are listed as `image_dataset_from_directory` lists them (sorted class folders,
//! `validation_split` taken from the end of the list shuffled with `seed`); the training set
//! is the seed's pipeline: `from_tensor_slices((paths, labels))` → `shuffle(1223)` (each epoch
//! anew) → `map(read_file → decode_jpeg(channels=3) → resize)` on AUTOTUNE workers →
//! `batch` → `prefetch(AUTOTUNE)`. The model is a [`KerasModel`] frozen as asked
//! ([`Freeze`]), compiled with Adam and sparse categorical cross-entropy, and trained by
//! `fit_dataset` with Keras's progress bar and, given a log directory, the TensorBoard
//! callback profiling the batches asked for. `save` writes the trained model as a `.keras`.
use std::path::{Path, PathBuf};

use crate::data::{DataError, Dataset, MapOptions, AUTOTUNE};
use crate::keras::{Freeze, KerasModel, TrainOptions};
use crate::tensor::Tensor;
use crate::train::model::{FitOptions, PipelineHistory};
use crate::Error;

/// The seed's shuffle buffer (`BUFFER_SIZE = 1223`).
pub const SHUFFLE_BUFFER: usize = 1223;

/// What to train.
#[derive(Clone, Debug)]
pub struct FineTuneOptions {
    /// Images are resized to `size × size` (the model's input size when `None`).
    pub size: Option<usize>,
    /// Images per batch.
    pub batch: usize,
    /// Passes over the training images.
    pub epochs: usize,
    /// Stop after this many steps in all, if set.
    pub max_steps: Option<u64>,
    /// The fraction of the images kept for validation, if any.
    pub validation_split: Option<f32>,
    /// Which layers train.
    pub freeze: Freeze,
    /// Adam's learning rate.
    pub learning_rate: f64,
    /// Shuffle the training images (buffer [`SHUFFLE_BUFFER`]); off, batches follow the
    /// listing order, as `image_dataset_from_directory(shuffle=False)`.
    pub shuffle: bool,
    /// The seed of the split, the shuffle and dropout.
    pub seed: u64,
    /// A TensorBoard log directory (the TensorBoard callback: per-batch loss, histograms,
    /// the graph) and the batches to profile (Keras's `profile_batch`, `"A,B"`).
    pub tensorboard: Option<(PathBuf, Option<String>)>,
    /// Write the trained model here (`.keras`).
    pub save: Option<PathBuf>,
    /// Keras's progress bar.
    pub verbose: bool,
    /// Print each `log_every`-th step's loss (0: never).
    pub log_every: u64,
}

impl Default for FineTuneOptions {
    fn default() -> Self {
        FineTuneOptions {
            size: None,
            batch: 32,
            epochs: 1,
            max_steps: None,
            validation_split: None,
            freeze: Freeze::AsSaved,
            learning_rate: 1e-3,
            shuffle: true,
            seed: 1223,
            tensorboard: None,
            save: None,
            verbose: true,
            log_every: 0,
        }
    }
}

/// What [`fine_tune`] did.
pub struct FineTuneRun {
    /// Losses, validation, step times, the profile written.
    pub history: PipelineHistory,
    /// The class names (label `i` is `classes[i]`).
    pub classes: Vec<String>,
    /// Training and validation images.
    pub images: (usize, usize),
    /// The layers that trained (paths), and the parameters: (trainable, total).
    pub trainable: (Vec<String>, usize, usize),
}

/// Files and their labels.
struct Listing {
    files: Vec<PathBuf>,
    labels: Vec<i32>,
}

/// The training and validation file lists and the class names, as
/// `image_dataset_from_directory` splits them.
fn split(dir: &Path, o: &FineTuneOptions) -> Result<(Listing, Listing, Vec<String>), Error> {
    let classes = super::input_pipeline::list_classes(dir)?;
    let (mut files, mut labels) = (classes.files, classes.labels);
    let Some(fraction) = o.validation_split else {
        return Ok((Listing { files, labels }, Listing { files: Vec::new(), labels: Vec::new() }, classes.names));
    };
    if !(0.0..1.0).contains(&fraction) {
        return Err(DataError::Invalid(format!("validation split must be in [0, 1), got {fraction}")).into());
    }
    let mut order: Vec<usize> = (0..files.len()).collect();
    crate::tensor::rng::Rng::new(o.seed).shuffle(&mut order);
    files = order.iter().map(|&i| files[i].clone()).collect();
    labels = order.iter().map(|&i| labels[i]).collect();
    let cut = files.len() - (fraction * files.len() as f32) as usize;
    let val = Listing { files: files.split_off(cut), labels: labels.split_off(cut) };
    Ok((Listing { files, labels }, val, classes.names))
}

/// The seed's pipeline over `files`: batches of `(float32 [n, size, size, 3], int64 [n])`.
pub fn batches(
    files: &[PathBuf],
    labels: &[i32],
    size: usize,
    batch: usize,
    shuffle: Option<u64>,
) -> Result<Dataset<(Tensor, Tensor)>, Error> {
    let n = files.len();
    let names: Vec<Vec<u8>> = files.iter().map(|p| p.to_string_lossy().into_owned().into_bytes()).collect();
    let labels: Vec<i64> = labels.iter().map(|&l| i64::from(l)).collect();
    let mut ds = Dataset::from_tensor_slices((Tensor::from_strings(&[n], names)?, Tensor::from_vec(&[n], labels)?))?;
    if let Some(seed) = shuffle {
        ds = ds.shuffle(SHUFFLE_BUFFER, Some(seed), true)?;
    }
    let map = MapOptions::default()
        .with_num_parallel_calls(Some(AUTOTUNE))
        .with_deterministic(true)
        .with_name(Some(format!("load_jpeg{size}")));
    Ok(ds.map_with(&map, super::input_pipeline::load_image(size)).batch(batch, false)?.prefetch(AUTOTUNE))
}

/// Fine-tunes the Keras model in `model` on the class folders of `dir` (see the module).
pub fn fine_tune(model: &Path, dir: &Path, o: &FineTuneOptions) -> Result<FineTuneRun, Error> {
    let mut keras = KerasModel::load(model)?;
    keras.freeze(o.freeze)?;
    let spec = &keras.spec;
    let input =
        spec.layer(&spec.inputs[0].layer).ok_or_else(|| crate::keras::KerasError::Invalid("no input layer".into()))?;
    let shape = crate::keras::build::input_shape(input)?;
    let (h, w) = match shape.dims() {
        Some([_, Some(h), Some(w), Some(3)]) => (*h, *w),
        _ => {
            return Err(crate::keras::KerasError::Invalid(format!(
                "{}: fit trains image models of input [batch, height, width, 3], this one takes {shape}",
                model.display()
            ))
            .into())
        }
    };
    let size = o.size.unwrap_or(h);
    if h != w || size != h {
        return Err(crate::keras::KerasError::Invalid(format!(
            "{}: the model takes {h}x{w} images, not {size}x{size} (--size)",
            model.display()
        ))
        .into());
    }
    let (train_list, val_list, classes) = split(dir, o)?;
    let trainer = keras.compile(
        &TrainOptions::default().with_learning_rate(o.learning_rate).with_seed(Some(o.seed as i64)),
        crate::runtime::SessionOptions::default(),
    )?;
    let outputs = trainer.model.roles().predictions.clone().unwrap_or_default();
    let width = trainer.model.session().graph().find(outputs.split(':').next().unwrap_or("")).and_then(|id| {
        let shapes = crate::ops::infer_shapes(trainer.model.session().graph()).ok()?;
        shapes[id].first()?.dims()?.last().copied().flatten()
    });
    if let Some(k) = width.filter(|&k| k != classes.len()) {
        return Err(crate::keras::KerasError::Invalid(format!(
            "{}: the model has {k} outputs but {} has {} class folders ({})",
            model.display(),
            dir.display(),
            classes.len(),
            classes.join(", ")
        ))
        .into());
    }
    let train = batches(&train_list.files, &train_list.labels, size, o.batch, o.shuffle.then_some(o.seed))?;
    let val = if val_list.files.is_empty() {
        None
    } else {
        Some(batches(&val_list.files, &val_list.labels, size, o.batch, None)?)
    };
    let mut tensorboard = match &o.tensorboard {
        Some((logdir, spec)) => Some(crate::train::callbacks::TensorBoard::new(
            logdir,
            1,
            true,
            crate::train::callbacks::UpdateFreq::Batches(1),
            spec.as_deref().unwrap_or("0"),
        )?),
        None => None,
    };
    let fit = FitOptions::default()
        .with_epochs(o.epochs)
        .with_verbose(o.verbose)
        .with_log_every(o.log_every)
        .with_max_steps(o.max_steps);
    let mut callbacks: Vec<&mut dyn crate::train::callbacks::Callback> = Vec::new();
    if let Some(tb) = tensorboard.as_mut() {
        callbacks.push(tb);
    }
    let mut history = trainer.model.fit_dataset_with(&train, &fit, None, val.as_ref(), &mut callbacks)?;
    if let Some(tb) = &tensorboard {
        history.profile = tb.profile_path().map(Path::to_path_buf);
    }
    if let Some(out) = &o.save {
        keras.save(out, Some(&trainer.weights()?))?;
    }
    let (trainable, total) = trainer.params();
    Ok(FineTuneRun {
        history,
        classes,
        images: (train_list.files.len(), val_list.files.len()),
        trainable: (trainer.trainable_layers.clone(), trainable, total),
    })
}
