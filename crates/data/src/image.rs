//! Image preprocessing as `tf.image` does it, on the same kernels a graph's image ops run
//! (pixels identical to TensorFlow's), and Keras's `image_dataset_from_directory`.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ferroflow_kernels::{image as kimage, run_op, KernelContext};
use ferroflow_proto::{attr, AttrValue};
use ferroflow_tensor::rng::Rng;
use ferroflow_tensor::{DType, Tensor};

use crate::{DataError, Dataset, Result, AUTOTUNE};

fn ctx() -> KernelContext<'static> {
    KernelContext { intra_op: None, resources: None, step: None }
}

fn op(name: &str, attrs: &[(&str, AttrValue)], inputs: Vec<Tensor>) -> Result<Tensor> {
    let attrs: BTreeMap<String, AttrValue> = attrs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    let mut out = run_op(name, &attrs, inputs, &ctx()).map_err(|e| DataError::kernel(name, e))?;
    Ok(out.remove(0))
}

fn text(t: &Tensor, what: &str) -> Result<String> {
    let s = t.as_strings().ok().filter(|s| s.len() == 1 && t.rank() == 0);
    let s = s.ok_or_else(|| {
        DataError::Invalid(format!("{what} must be a string scalar, got {} {:?}", t.dtype(), t.dims()))
    })?;
    String::from_utf8(s[0].clone()).map_err(|_| DataError::Invalid(format!("{what} is not UTF-8")))
}

/// `tf.io.read_file`: the bytes of the file named by a string scalar, as a string scalar.
pub fn read_file(path: &Tensor) -> Result<Tensor> {
    let p = text(path, "the file name")?;
    let bytes = kimage::read_file(Path::new(&p))?;
    Ok(Tensor::from_strings(&[], vec![bytes])?)
}

/// `tf.io.decode_jpeg(contents, channels)` with TensorFlow's defaults (fast integer IDCT,
/// fancy upsampling): a uint8 `[height, width, channels]` image.
pub fn decode_jpeg(contents: &Tensor, channels: u8) -> Result<Tensor> {
    op("DecodeJpeg", &[("channels", attr::int(channels as i64))], vec![contents.clone()])
}

/// `tf.io.decode_image(contents, channels, dtype, expand_animations=False)`: JPEG or PNG.
pub fn decode_image(contents: &Tensor, channels: u8, dtype: DType) -> Result<Tensor> {
    op(
        "DecodeImage",
        &[
            ("channels", attr::int(channels as i64)),
            ("dtype", attr::dtype(dtype)),
            ("expand_animations", attr::boolean(false)),
        ],
        vec![contents.clone()],
    )
}

/// `tf.image.resize(images, size)` with its defaults: bilinear, half-pixel centers, no
/// antialiasing, float32 out. `images` is `[h, w, c]` or `[n, h, w, c]`.
pub fn resize(images: &Tensor, size: [usize; 2]) -> Result<Tensor> {
    let batched = match images.rank() {
        4 => images.clone(),
        3 => images.reshaped(&[&[1], images.dims()].concat())?,
        r => return Err(DataError::msg(format!("resize: images must be 3- or 4-dimensional, got rank {r}"))),
    };
    let size_t = Tensor::from_vec(&[2], vec![size[0] as i32, size[1] as i32])?;
    let out = op(
        "ResizeBilinear",
        &[
            ("T", attr::dtype(batched.dtype())),
            ("half_pixel_centers", attr::boolean(true)),
            ("align_corners", attr::boolean(false)),
        ],
        vec![batched, size_t],
    )?;
    if images.rank() == 3 {
        return Ok(out.reshaped(&out.dims()[1..])?);
    }
    Ok(out)
}

/// Mirrors the image left to right (`tf.image.flip_left_right`).
pub fn flip_left_right(image: &Tensor) -> Result<Tensor> {
    let axis = image.rank() as i32 - 2;
    op(
        "ReverseV2",
        &[("T", attr::dtype(image.dtype())), ("Tidx", attr::dtype(DType::Int32))],
        vec![image.clone(), Tensor::from_vec(&[1], vec![axis])?],
    )
}

/// Mirrors the image with probability 1/2, decided by `seed`.
pub fn random_flip_left_right(image: &Tensor, seed: u64) -> Result<Tensor> {
    if Rng::new(seed).below(2) == 1 {
        flip_left_right(image)
    } else {
        Ok(image.clone())
    }
}

/// A `size[0] × size[1]` window of a `[h, w, c]` image at a position chosen by `seed`
/// (`tf.image.random_crop`'s uniform offsets).
pub fn random_crop(image: &Tensor, size: [usize; 2], seed: u64) -> Result<Tensor> {
    let &[h, w, c] = image.dims() else {
        return Err(DataError::msg(format!(
            "random_crop: image must be [height, width, channels], got {:?}",
            image.dims()
        )));
    };
    if size[0] > h || size[1] > w {
        return Err(DataError::msg(format!("random_crop: crop {size:?} is larger than the image [{h}, {w}]")));
    }
    let mut rng = Rng::new(seed);
    let (top, left) = (rng.below(h - size[0] + 1), rng.below(w - size[1] + 1));
    let begin = Tensor::from_vec(&[3], vec![top as i32, left as i32, 0])?;
    let len = Tensor::from_vec(&[3], vec![size[0] as i32, size[1] as i32, c as i32])?;
    op(
        "Slice",
        &[("T", attr::dtype(image.dtype())), ("Index", attr::dtype(DType::Int32))],
        vec![image.clone(), begin, len],
    )
}

fn floats(image: &Tensor, what: &str) -> Result<Vec<f32>> {
    match image.dtype() {
        DType::Float => Ok(image.as_slice::<f32>()?.to_vec()),
        DType::UInt8 => Ok(image.as_slice::<u8>()?.iter().map(|&v| v as f32).collect()),
        d => Err(DataError::msg(format!("{what}: {d} images are not supported (float32 or uint8)"))),
    }
}

/// `image + delta` (`tf.image.adjust_brightness` on float images).
pub fn adjust_brightness(image: &Tensor, delta: f32) -> Result<Tensor> {
    let v = floats(image, "adjust_brightness")?;
    Ok(Tensor::from_vec(image.dims(), v.into_iter().map(|x| x + delta).collect())?)
}

/// `(x - mean) * factor + mean` per channel (`tf.image.adjust_contrast`, the `AdjustContrastv2`
/// kernel).
pub fn adjust_contrast(image: &Tensor, factor: f32) -> Result<Tensor> {
    let x = Tensor::from_vec(image.dims(), floats(image, "adjust_contrast")?)?;
    op("AdjustContrastv2", &[("T", attr::dtype(DType::Float))], vec![x, Tensor::scalar(factor)])
}

/// `(x - mean) / max(stddev, 1/sqrt(N))` over each image (`tf.image.per_image_standardization`).
pub fn per_image_standardization(image: &Tensor) -> Result<Tensor> {
    let v = floats(image, "per_image_standardization")?;
    let dims = image.dims();
    let per = dims.iter().rev().take(3).product::<usize>().max(1);
    let mut out = Vec::with_capacity(v.len());
    for img in v.chunks(per) {
        let n = img.len() as f32;
        let mean = img.iter().sum::<f32>() / n;
        let var = img.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / n;
        let adjusted = var.sqrt().max(1.0 / n.sqrt());
        out.extend(img.iter().map(|x| (x - mean) / adjusted));
    }
    Ok(Tensor::from_vec(dims, out)?)
}

/// How labels are returned by [`image_dataset_from_directory`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelMode {
    /// int32 class indices.
    Int,
    /// float32 one-hot vectors.
    Categorical,
}

/// Options of [`image_dataset_from_directory`] (Keras's, with its defaults).
///
/// `#[non_exhaustive]`: other crates build a `DirectoryOptions` from `DirectoryOptions::default()` and its
/// `with_*` setters, so fields can be added without breaking them.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DirectoryOptions {
    /// `(height, width)` images are resized to (default 256×256).
    pub image_size: [usize; 2],
    /// Images per batch (default 32).
    pub batch_size: usize,
    /// 1 (grayscale), 3 (rgb, default) or 4 (rgba).
    pub channels: u8,
    /// How labels come out (default int).
    pub label_mode: LabelMode,
    /// Shuffle the files (default true).
    pub shuffle: bool,
    /// Seed of the shuffle and the validation split.
    pub seed: Option<u64>,
    /// Fraction of the files held out for validation (default none).
    pub validation_split: Option<f32>,
    /// Decode and resize on worker threads (default AUTOTUNE).
    pub num_parallel_calls: i64,
}

impl DirectoryOptions {
    /// Sets [`DirectoryOptions::image_size`].
    pub fn with_image_size(mut self, image_size: [usize; 2]) -> Self {
        self.image_size = image_size;
        self
    }

    /// Sets [`DirectoryOptions::batch_size`].
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size;
        self
    }

    /// Sets [`DirectoryOptions::channels`].
    pub fn with_channels(mut self, channels: u8) -> Self {
        self.channels = channels;
        self
    }

    /// Sets [`DirectoryOptions::label_mode`].
    pub fn with_label_mode(mut self, label_mode: LabelMode) -> Self {
        self.label_mode = label_mode;
        self
    }

    /// Sets [`DirectoryOptions::shuffle`].
    pub fn with_shuffle(mut self, shuffle: bool) -> Self {
        self.shuffle = shuffle;
        self
    }

    /// Sets [`DirectoryOptions::seed`].
    pub fn with_seed(mut self, seed: Option<u64>) -> Self {
        self.seed = seed;
        self
    }

    /// Sets [`DirectoryOptions::validation_split`].
    pub fn with_validation_split(mut self, validation_split: Option<f32>) -> Self {
        self.validation_split = validation_split;
        self
    }

    /// Sets [`DirectoryOptions::num_parallel_calls`].
    pub fn with_num_parallel_calls(mut self, num_parallel_calls: i64) -> Self {
        self.num_parallel_calls = num_parallel_calls;
        self
    }
}

impl Default for DirectoryOptions {
    fn default() -> Self {
        DirectoryOptions {
            image_size: [256, 256],
            batch_size: 32,
            channels: 3,
            label_mode: LabelMode::Int,
            shuffle: true,
            seed: None,
            validation_split: None,
            num_parallel_calls: AUTOTUNE,
        }
    }
}

/// Which part of a split directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subset {
    /// Everything (no split).
    All,
    /// The first `1 - validation_split` of the (shuffled) files.
    Training,
    /// The last `validation_split` of them.
    Validation,
}

/// An image directory as a dataset.
pub struct ImageDirectory {
    /// Batches of `(images float32 [n, h, w, c], labels)`.
    pub dataset: Dataset<(Tensor, Tensor)>,
    /// The class folder names, sorted; label `i` is `class_names[i]`.
    pub class_names: Vec<String>,
    /// The files in the order the dataset reads them.
    pub files: Vec<PathBuf>,
}

const IMAGE_EXTENSIONS: [&str; 5] = ["bmp", "gif", "jpeg", "jpg", "png"];

/// Whether `p` names a file to read: a regular file (or a link to one). Anything else a
/// class folder holds under an image's name — a FIFO, which would block the reader forever,
/// a socket, a device, a dangling link — is skipped with a warning naming it.
fn readable_file(p: &Path) -> bool {
    match std::fs::metadata(p) {
        Ok(m) if m.is_file() => true,
        Ok(m) => {
            log::warn!("skipping {}: not a regular file ({})", p.display(), file_kind(&m.file_type()));
            false
        }
        Err(e) => {
            log::warn!("skipping {}: {e}", p.display());
            false
        }
    }
}

/// A file type in words.
fn file_kind(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else {
        "not a file"
    }
}

/// The image files under `dir` (recursively; the extensions Keras lists, any case), sorted
/// by path; entries that are not regular files are skipped with a warning.
fn image_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).map_err(|e| DataError::io(&d, e))? {
            let p = e.map_err(|e| DataError::io(&d, e))?.path();
            if p.is_dir() {
                stack.push(p);
            } else if p
                .extension()
                .and_then(|x| x.to_str())
                .is_some_and(|x| IMAGE_EXTENSIONS.contains(&x.to_lowercase().as_str()))
                && readable_file(&p)
            {
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// A directory of class folders: the class names (sorted), every image in them (sorted
/// within each class) and each file's label.
#[derive(Debug, Clone)]
pub struct Classes {
    /// Folder names; label `i` is `names[i]`.
    pub names: Vec<String>,
    /// The image files, class by class.
    pub files: Vec<PathBuf>,
    /// Each file's label.
    pub labels: Vec<i32>,
}

/// The class folders of `dir` and their images, as Keras's `image_dataset_from_directory`
/// lists them: each subfolder a class (sorted by name, labels 0..n−1), the files under it
/// (recursively) with the extensions `.bmp .gif .jpeg .jpg .png` in any case, sorted. Entries
/// that are not regular files are skipped with a warning naming them.
pub fn list_classes(dir: &Path) -> Result<Classes> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| DataError::io(dir, e))?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    if names.is_empty() {
        return Err(DataError::Invalid(format!(
            "{}: no class subdirectories (one folder per class is expected)",
            dir.display()
        )));
    }
    let mut files = Vec::new();
    let mut labels = Vec::new();
    for (i, c) in names.iter().enumerate() {
        let f = image_files(&dir.join(c))?;
        labels.extend(std::iter::repeat_n(i as i32, f.len()));
        files.extend(f);
    }
    Ok(Classes { names, files, labels })
}

/// Keras's `image_dataset_from_directory`: each subfolder of `dir` is a class (sorted by name,
/// labels 0..n−1), its images (sorted) are read, decoded (`decode_image`, `channels`) and
/// resized (bilinear) to `image_size` as float32, then batched. With `shuffle` the file order
/// is shuffled with `seed` before the split. Prints Keras's "Found N files belonging to K
/// classes." line.
pub fn image_dataset_from_directory(dir: &Path, options: &DirectoryOptions, subset: Subset) -> Result<ImageDirectory> {
    let Classes { names: class_names, mut files, mut labels } = list_classes(dir)?;
    log::info!("Found {} files belonging to {} classes.", files.len(), class_names.len());
    if files.is_empty() {
        return Err(DataError::Invalid(format!(
            "{}: no images found (extensions {IMAGE_EXTENSIONS:?}) in the class folders",
            dir.display()
        )));
    }
    if options.shuffle || options.validation_split.is_some() {
        let seed = crate::rng::seed_or_random(options.seed);
        if options.shuffle {
            let mut order: Vec<usize> = (0..files.len()).collect();
            Rng::new(seed).shuffle(&mut order);
            files = order.iter().map(|&i| files[i].clone()).collect();
            labels = order.iter().map(|&i| labels[i]).collect();
        }
    }
    if let Some(split) = options.validation_split {
        if !(0.0..1.0).contains(&split) {
            return Err(DataError::Invalid(format!("validation_split must be in [0, 1), got {split}")));
        }
        let n_val = (split * files.len() as f32) as usize;
        let cut = files.len() - n_val;
        match subset {
            Subset::Training => {
                files.truncate(cut);
                labels.truncate(cut);
                log::info!("Using {} files for training.", files.len());
            }
            Subset::Validation => {
                files.drain(..cut);
                labels.drain(..cut);
                log::info!("Using {} files for validation.", files.len());
            }
            Subset::All => {}
        }
    }
    let names: Vec<Vec<u8>> = files.iter().map(|p| p.to_string_lossy().into_owned().into_bytes()).collect();
    let n = names.len();
    let classes = class_names.len();
    let label_t = match options.label_mode {
        LabelMode::Int => Tensor::from_vec(&[n], labels)?,
        LabelMode::Categorical => {
            let mut one_hot = vec![0f32; n * classes];
            for (i, &l) in labels.iter().enumerate() {
                one_hot[i * classes + l as usize] = 1.0;
            }
            Tensor::from_vec(&[n, classes], one_hot)?
        }
    };
    let (size, channels) = (options.image_size, options.channels);
    let load = Arc::new(move |path: Tensor| -> Result<Tensor> {
        let bytes = read_file(&path)?;
        let image = decode_image(&bytes, channels, DType::UInt8)
            .map_err(|e| DataError::with_context(text(&path, "path").unwrap_or_default(), e))?;
        resize(&image, size)
    });
    let dataset = Dataset::from_tensor_slices((Tensor::from_strings(&[n], names)?, label_t))?
        .map_with(
            &crate::MapOptions {
                num_parallel_calls: Some(options.num_parallel_calls),
                deterministic: true,
                name: Some(format!("load_image{size:?}c{channels}")),
            },
            move |(path, label): (Tensor, Tensor)| Ok((load(path)?, label)),
        )
        .batch(options.batch_size, false)?;
    Ok(ImageDirectory { dataset, class_names, files })
}
