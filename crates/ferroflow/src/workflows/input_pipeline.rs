//! The input pipeline: class folders of JPEGs → `from_tensor_slices((paths, labels))`
//! → shuffle the file list → `map(read_file → decode_jpeg(channels=3) → resize)` (on the
//! consumer's thread, or `parallel` workers / AUTOTUNE) → optional `cache()` (memory or a file)
//! → `batch` → optional `prefetch`. [`run_epochs`] measures images per second per epoch, the
//! figure to compare with and without prefetch, parallel map and cache.
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::data::image::{decode_jpeg, read_file, resize};
use crate::data::{Budget, DataError, Dataset, MapOptions, TunedStage};
use crate::tensor::Tensor;

/// How the pipeline runs.
#[derive(Debug, Clone)]
pub struct PipelineOptions {
    /// Images are resized to `size × size`.
    pub size: usize,
    /// Images per batch.
    pub batch: usize,
    /// Shuffle the file list each epoch.
    pub shuffle: bool,
    /// Shuffle seed.
    pub seed: u64,
    /// `None`: decode on the consumer's thread; `Some(n)` workers, or `Some(AUTOTUNE)`.
    pub parallel: Option<i64>,
    /// `None`: no prefetch; `Some(n)` batches, or `Some(AUTOTUNE)`.
    pub prefetch: Option<i64>,
    /// `None`: no cache; `Some(None)`: in memory; `Some(Some(file))`: a cache file.
    pub cache: Option<Option<PathBuf>>,
    /// CPU and RAM for AUTOTUNE.
    pub budget: Budget,
    /// Skip images that fail to read or decode (`ignore_errors()` after the map, as
    /// TensorFlow's pipelines apply it), counting them here and naming each on stderr.
    pub ignore_errors: Option<std::sync::Arc<std::sync::atomic::AtomicU64>>,
}

impl Default for PipelineOptions {
    fn default() -> Self {
        PipelineOptions {
            size: 224,
            batch: 32,
            shuffle: true,
            seed: 1,
            parallel: None,
            prefetch: None,
            cache: None,
            budget: Budget::default(),
            ignore_errors: None,
        }
    }
}

pub use crate::data::image::Classes;

/// A batched dataset of `(images, labels)`.
pub type Batches = Dataset<(Tensor, Tensor)>;

/// The class folders of `dir` and their images, listed as Keras's
/// `image_dataset_from_directory` lists them ([`crate::data::image::list_classes`]).
pub fn list_classes(dir: &Path) -> Result<Classes, DataError> {
    let classes = crate::data::image::list_classes(dir)?;
    if classes.files.is_empty() {
        return Err(DataError::Invalid(format!("{}: no images in the class folders", dir.display())));
    }
    Ok(classes)
}

/// The pipeline over `dir`'s class folders: batches of `(float32 [n, size, size, 3], int32 [n])`
/// and the class names.
pub fn pipeline(dir: &Path, o: &PipelineOptions) -> Result<(Batches, Vec<String>), DataError> {
    let Classes { names: classes, files, labels } = list_classes(dir)?;
    let n = files.len();
    let names: Vec<Vec<u8>> = files.iter().map(|p| p.to_string_lossy().into_owned().into_bytes()).collect();
    let mut ds = Dataset::from_tensor_slices((Tensor::from_strings(&[n], names)?, Tensor::from_vec(&[n], labels)?))?
        .with_budget(o.budget.clone());
    if o.shuffle {
        ds = ds.shuffle(n, Some(o.seed), true)?;
    }
    let size = o.size;
    let map = MapOptions::default()
        .with_num_parallel_calls(o.parallel)
        .with_deterministic(true)
        .with_name(Some(format!("load_jpeg{size}")));
    let mut ds = ds.map_with(&map, load_image(size));
    if let Some(counter) = &o.ignore_errors {
        ds = ds.ignore_errors(counter.clone(), true);
    }
    if let Some(cache) = &o.cache {
        ds = ds.cache(cache.as_deref());
    }
    let mut ds = ds.batch(o.batch, false)?;
    if let Some(p) = o.prefetch {
        ds = ds.prefetch(p);
    }
    Ok((ds, classes))
}

/// The seed's `load_and_preprocess_image` on `(path, label)`: read the file, decode the JPEG
/// with 3 channels, resize (bilinear) to `size × size` as float32; an error names the file.
pub fn load_image(
    size: usize,
) -> impl Fn((Tensor, Tensor)) -> Result<(Tensor, Tensor), DataError> + Send + Sync + Clone {
    move |(path, label): (Tensor, Tensor)| {
        let image = decode_jpeg(&read_file(&path)?, 3).map_err(|e| {
            let p = String::from_utf8_lossy(&path.as_strings().map(|s| s[0].clone()).unwrap_or_default()).into_owned();
            DataError::msg(format!("{p}: {e}"))
        })?;
        Ok((resize(&image, [size, size])?, label))
    }
}

/// One epoch's figures.
#[derive(Debug, Clone)]
pub struct Epoch {
    /// Images read.
    pub images: usize,
    /// Batches read.
    pub batches: usize,
    /// Wall-clock seconds.
    pub seconds: f64,
}

impl Epoch {
    /// Images per second.
    pub fn images_per_second(&self) -> f64 {
        self.images as f64 / self.seconds.max(1e-9)
    }
}

/// Reads `epochs` epochs (a fresh iterator each), calling `each` on every batch; returns
/// each epoch's figures and what AUTOTUNE chose.
pub fn run_epochs(
    ds: &Dataset<(Tensor, Tensor)>,
    epochs: usize,
    mut each: impl FnMut(usize, usize, &Tensor, &Tensor) -> Result<(), DataError>,
) -> Result<(Vec<Epoch>, Vec<TunedStage>), DataError> {
    let mut out = Vec::new();
    for e in 0..epochs {
        let start = Instant::now();
        let (mut images, mut batches) = (0, 0);
        for b in ds.iter()? {
            let (x, y) = b?;
            each(e, batches, &x, &y)?;
            images += x.dims().first().copied().unwrap_or(0);
            batches += 1;
        }
        out.push(Epoch { images, batches, seconds: start.elapsed().as_secs_f64() });
    }
    Ok((out, ds.autotune_report()))
}

/// What [`train_efficientnet`] did.
pub struct EfficientNetRun {
    /// Per-epoch losses and validation, step times and the input pipeline's share.
    pub history: crate::train::model::PipelineHistory,
    /// The class names (label `i` is `classes[i]`).
    pub classes: Vec<String>,
    /// Training and validation images.
    pub images: (usize, usize),
}

/// An EfficientNet-B0-style network trained from the pipeline (the same block structure —
/// stem, MBConv blocks with expansion, depthwise convolution, squeeze-and-excitation and
/// projection, head, pooling, dropout — at width 0.25, depth 0.5 and the first `stages`
/// stages so an epoch takes seconds to minutes on 2 cores), fed by
/// `image_dataset_from_directory` over `dir` (80/20 split with `seed`, pixels scaled to
/// [0, 1], parallel decode + prefetch) and trained with `Model::fit_dataset` and Adam
/// (batch-normalization momentum 0.9: short runs).
pub fn train_efficientnet(
    dir: &Path,
    size: usize,
    epochs: usize,
    stages: usize,
    seed: u64,
) -> Result<EfficientNetRun, crate::Error> {
    use crate::data::image::{image_dataset_from_directory, DirectoryOptions, Subset};
    use crate::train::efficientnet::{self, EfficientNetConfig};
    use crate::train::model::{FitOptions, Functional, Loss};
    use crate::train::optimizers::Optimizer;

    let options = DirectoryOptions::default()
        .with_image_size([size, size])
        .with_batch_size(32)
        .with_seed(Some(seed))
        .with_validation_split(Some(0.2));
    let scaled = |d: crate::data::image::ImageDirectory| {
        let n = d.files.len();
        let ds = d
            .dataset
            .map(|(x, y): (Tensor, Tensor)| {
                let x = Tensor::from_vec(x.dims(), x.as_slice::<f32>()?.iter().map(|v| v / 255.0).collect())?;
                let y: Vec<i64> = y.as_slice::<i32>()?.iter().map(|&v| v as i64).collect();
                let len = y.len();
                Ok((x, Tensor::from_vec(&[len], y)?))
            })
            .prefetch(crate::data::AUTOTUNE);
        (ds, d.class_names, n)
    };
    let (train, classes, n_train) = scaled(image_dataset_from_directory(dir, &options, Subset::Training)?);
    let (val, _, n_val) = scaled(image_dataset_from_directory(dir, &options, Subset::Validation)?);
    // Keras' 0.99 batch-norm momentum needs hundreds of steps before the moving statistics
    // that evaluation uses are meaningful; a few dozen steps need a faster average.
    let config = EfficientNetConfig::reduced(classes.len(), 0.25, 0.5, stages)
        .with_seed(Some(seed as i64))
        .with_bn_momentum(0.9);
    let model = Functional::new(&[size, size, 3]).seed(seed as i64).compile(
        |b, x, training| efficientnet::efficientnet(b, x, training, &config),
        Loss::SparseCategoricalCrossentropy,
        &Optimizer::adam(1e-3),
        crate::runtime::SessionOptions::default(),
    )?;
    let fit = FitOptions::default().with_epochs(epochs).with_verbose(true);
    let history = model.fit_dataset(&train, &fit, None, Some(&val))?;
    Ok(EfficientNetRun { history, classes, images: (n_train, n_val) })
}

/// The bottleneck hunt: a small CNN (two strided 3×3 convolutions with pooling, a
/// softmax head) trained for `steps` (two epochs) with `fit_dataset_with` from [`pipeline`]
/// over `dir` at `size × size` (`pipeline.size`) and the [`TensorBoard`] callback: per-batch
/// and per-epoch loss, weight histograms each epoch, the graph, and the profile of batches
/// `profile_batch` (Keras's `'A,B'`) under `logdir`; `logdir/input` gets the pipeline as text
/// and the first image.
/// Run it without and then with `prefetch`: `ferroflow profile` calls the first input-bound
/// and compares the two.
pub fn train_profiled_cnn(
    dir: &Path,
    pipeline_options: &PipelineOptions,
    steps: u64,
    logdir: &Path,
    profile_batch: &str,
) -> Result<crate::train::model::PipelineHistory, crate::Error> {
    use crate::summary::SummaryWriter;
    use crate::train::callbacks::{TensorBoard, UpdateFreq};
    use crate::train::layers::{Activation, Padding};
    use crate::train::model::{FitOptions, Layer, Loss, Sequential};
    use crate::train::optimizers::Optimizer;
    use crate::train::Initializer;

    let mut tensorboard = TensorBoard::new(logdir, 1, true, UpdateFreq::Batches(1), profile_batch)?;
    let (batches, classes) = pipeline(dir, pipeline_options)?;
    // What the input looks like, for the images and text dashboards.
    {
        let mut input = SummaryWriter::create(&logdir.join("input"))?;
        input.text("pipeline", &format!("`{}`", batches.describe()), 0)?;
        if let Some(first) = batches.iter()?.next() {
            let (x, _) = first?;
            let [_, h, w, c] = x.dims()[..] else {
                return Err(crate::data::DataError::Invalid(format!(
                    "batches must be [n, h, w, c], got {:?}",
                    x.dims()
                ))
                .into());
            };
            let bytes: Vec<u8> = x.as_slice::<f32>()?[..h * w * c].iter().map(|v| v.clamp(0.0, 255.0) as u8).collect();
            input.image("first_image", &bytes, [h, w, c], 0)?;
        }
    }
    let train = batches
        .map(|(x, y): (Tensor, Tensor)| {
            let y: Vec<i64> = y.as_slice::<i32>()?.iter().map(|&v| v as i64).collect();
            let len = y.len();
            Ok((x, Tensor::from_vec(&[len], y)?))
        })
        .repeat(None);
    let size = pipeline_options.size;
    let conv = |filters| Layer::Conv2D {
        filters,
        kernel: [3, 3],
        strides: [2, 2],
        padding: Padding::Same,
        activation: Activation::Relu,
        kernel_init: Initializer::GlorotUniform { seed: None },
    };
    let pool = Layer::MaxPool2D { pool: [2, 2], strides: [2, 2], padding: Padding::Valid };
    let model = Sequential::new(&[size, size, 3])
        .seed(1)
        .push(conv(8))
        .push(pool.clone())
        .push(conv(16))
        .push(pool)
        .push(Layer::Flatten)
        .push(Layer::dense(classes.len(), Activation::Softmax))
        .compile(
            Loss::SparseCategoricalCrossentropy,
            &Optimizer::adam(1e-3),
            crate::runtime::SessionOptions::default(),
        )?;
    // verbose: Keras's progress bar.
    let fit = FitOptions::default().with_epochs(2).with_verbose(true);
    let mut h = model.fit_dataset_with(&train, &fit, Some(steps.div_ceil(2)), None, &mut [&mut tensorboard])?;
    h.profile = tensorboard.profile_path().map(Path::to_path_buf);
    Ok(h)
}
