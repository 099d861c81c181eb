//! MNIST in the standard IDX format (`train-images-idx3-ubyte[.gz]`, ...), gzipped or not.
//!
//! This crate bundles a real 10,000-digit sample (8,000 training and 2,000 test digits, 1.6 MB
//! gzipped; see `scripts/make_mnist.py` for the split) in `crates/train/data/mnist/`, and
//! compiled into the library, so an installed binary has it too ([`bundled_dir`]); point
//! [`load`] at a directory holding the full MNIST files to use all 70,000.
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use ferroflow_tensor::Tensor;

use crate::{Result, TrainError};

/// The largest IDX payload accepted (bytes): far above full MNIST (47 MB), far below memory.
const MAX_PAYLOAD: u64 = 1 << 31;

/// One split: images as `f32` `[n, rows·cols]` scaled to [0, 1], labels 0..9.
#[derive(Clone, Debug)]
pub struct Split {
    /// Pixels, `[n, rows * cols]`, in [0, 1].
    pub images: Tensor,
    /// Class of each image.
    pub labels: Vec<u8>,
}

impl Split {
    /// The number of examples.
    pub fn len(&self) -> usize {
        self.labels.len()
    }
    /// True when there are no examples.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }
    /// Labels one-hot encoded as `f32` `[n, classes]`.
    pub fn one_hot(&self, classes: usize) -> Result<Tensor> {
        one_hot(&self.labels, classes)
    }
    /// Labels as `int64` `[n]` (for sparse cross-entropy).
    pub fn sparse_labels(&self) -> Tensor {
        let v: Vec<i64> = self.labels.iter().map(|&l| l as i64).collect();
        Tensor::from_vec(&[v.len()], v).expect("length matches")
    }
}

/// MNIST's training and test splits.
#[derive(Clone, Debug)]
pub struct Mnist {
    /// Training digits.
    pub train: Split,
    /// Test digits.
    pub test: Split,
}

/// `labels` one-hot as `f32` `[n, classes]`; a label ≥ `classes` is an error.
pub fn one_hot(labels: &[u8], classes: usize) -> Result<Tensor> {
    let mut v = vec![0f32; labels.len() * classes];
    for (i, &l) in labels.iter().enumerate() {
        if l as usize >= classes {
            return Err(TrainError::Invalid(format!("label {l} at index {i} is out of range for {classes} classes")));
        }
        v[i * classes + l as usize] = 1.0;
    }
    Ok(Tensor::from_vec(&[labels.len(), classes], v)?)
}

/// Opens `path`, or `path.gz` when `path` does not exist.
fn open(path: &Path) -> Result<(PathBuf, File)> {
    let path = if path.exists() { path.to_path_buf() } else { PathBuf::from(format!("{}.gz", path.display())) };
    let f = File::open(&path).map_err(|e| TrainError::file_error(&path, e))?;
    Ok((path, f))
}

/// `r`, decompressing gzip (detected by its magic bytes).
fn maybe_gunzip<'a>(r: impl Read + 'a, path: &Path) -> Result<Box<dyn Read + 'a>> {
    let mut r = BufReader::new(r);
    let mut magic = [0u8; 2];
    let mut n = 0;
    while n < 2 {
        match r.read(&mut magic[n..]).map_err(|e| TrainError::file_error(path, e))? {
            0 => break,
            k => n += k,
        }
    }
    let head = std::io::Cursor::new(magic[..n].to_vec()).chain(r);
    Ok(if magic == [0x1f, 0x8b] { Box::new(flate2::read::GzDecoder::new(head)) } else { Box::new(head) })
}

fn read_u32(r: &mut dyn Read, path: &Path, what: &str) -> Result<u32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b)
        .map_err(|e| TrainError::file_caused(path, format!("truncated IDX header ({what}): {e}"), e))?;
    Ok(u32::from_be_bytes(b))
}

/// Reads an IDX file of unsigned bytes: its dimensions and data. The declared size is checked
/// against a cap before reading, and a file shorter than declared is an error.
pub fn read_idx(path: &Path) -> Result<(Vec<usize>, Vec<u8>)> {
    let (path, f) = open(path)?;
    read_idx_from(f, &path)
}

/// Reads an IDX file of unsigned bytes, gzipped or not, from its bytes; `path` names it in
/// errors.
pub fn read_idx_bytes(bytes: &[u8], path: &Path) -> Result<(Vec<usize>, Vec<u8>)> {
    read_idx_from(bytes, path)
}

/// Reads an IDX file of unsigned bytes, gzipped or not, from a stream. The size its header
/// declares (dimensions × 1 byte) is checked against [`MAX_PAYLOAD`] and the memory limit
/// ([`ferroflow_tensor::limit`]) before anything is read, and the data is read through a
/// bounded reader: a gzip bomb or a lying header fails without inflating (or allocating) more
/// than the header declares or the stream really holds.
pub fn read_idx_from(r: impl Read, path: &Path) -> Result<(Vec<usize>, Vec<u8>)> {
    let mut r = maybe_gunzip(r, path)?;
    let magic = read_u32(&mut r, path, "magic")?;
    if magic >> 16 != 0 || (magic >> 8) & 0xff != 0x08 {
        return Err(TrainError::file(
            path,
            format!("not an IDX file of unsigned bytes: magic {magic:#010x} (expected 0x0000080N)"),
        ));
    }
    let rank = (magic & 0xff) as usize;
    if rank == 0 || rank > 4 {
        return Err(TrainError::file(path, format!("IDX rank {rank} is not 1..=4")));
    }
    let mut dims = Vec::with_capacity(rank);
    for i in 0..rank {
        dims.push(read_u32(&mut r, path, &format!("dimension {i}"))? as usize);
    }
    let total = dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d as u64)).filter(|&n| n <= MAX_PAYLOAD);
    let Some(total) = total else {
        return Err(TrainError::file(path, format!("declared shape {dims:?} is larger than {MAX_PAYLOAD} bytes")));
    };
    ferroflow_tensor::limit::check(total as usize, || format!("IDX data of shape {dims:?}"))
        .map_err(|e| TrainError::file_error(path, e))?;
    let mut data = Vec::new();
    r.take(total).read_to_end(&mut data).map_err(|e| TrainError::file_error(path, e))?;
    if data.len() as u64 != total {
        return Err(TrainError::file(
            path,
            format!("declares {total} bytes of data ({dims:?}) but holds {}", data.len()),
        ));
    }
    Ok((dims, data))
}

/// Images `[n, rows, cols]` of bytes as `f32` `[n, rows·cols]` scaled to [0, 1]; the float
/// tensor's size is checked against the memory limit first. `path` names the file in errors.
pub fn images_tensor(dims: &[usize], pixels: &[u8], path: &Path) -> Result<Tensor> {
    let &[n, rows, cols] = dims else {
        return Err(TrainError::file(path, format!("images must be [n, rows, cols], got {dims:?}")));
    };
    let per_image = rows.checked_mul(cols).filter(|&p| n.checked_mul(p) == Some(pixels.len()));
    let Some(per_image) = per_image else {
        return Err(TrainError::file(
            path,
            format!("images of shape {dims:?} need a different size than {}", pixels.len()),
        ));
    };
    let bytes = pixels.len().saturating_mul(std::mem::size_of::<f32>());
    ferroflow_tensor::limit::check(bytes, || format!("float tensor for images of shape {dims:?}"))
        .map_err(|e| TrainError::file_error(path, e))?;
    let px: Vec<f32> = pixels.iter().map(|&p| p as f32 / 255.0).collect();
    Ok(Tensor::from_vec(&[n, per_image], px)?)
}

/// Reads an images file (`[n, rows, cols]`) and a labels file (`[n]`) into a [`Split`].
pub fn read_split(images: &Path, labels: &Path) -> Result<Split> {
    let (idims, pixels) = read_idx(images)?;
    let images_t = images_tensor(&idims, &pixels, images)?;
    drop(pixels);
    let (ldims, labels_v) = read_idx(labels)?;
    if ldims.len() != 1 || ldims[0] != idims[0] {
        return Err(TrainError::file(
            labels,
            format!("labels have shape {ldims:?}, expected [{}] to match the images", idims[0]),
        ));
    }
    if let Some((i, l)) = labels_v.iter().enumerate().find(|(_, &l)| l > 9) {
        return Err(TrainError::file(labels, format!("label {l} at index {i} is not a digit 0..9")));
    }
    Ok(Split { images: images_t, labels: labels_v })
}

/// Loads `dir`'s `train-images-idx3-ubyte`, `train-labels-idx1-ubyte`,
/// `t10k-images-idx3-ubyte` and `t10k-labels-idx1-ubyte` (each optionally `.gz`).
pub fn load(dir: &Path) -> Result<Mnist> {
    Ok(Mnist {
        train: read_split(&dir.join("train-images-idx3-ubyte"), &dir.join("train-labels-idx1-ubyte"))?,
        test: read_split(&dir.join("t10k-images-idx3-ubyte"), &dir.join("t10k-labels-idx1-ubyte"))?,
    })
}

/// The bundled sample's files, compiled in.
const BUNDLED: [(&str, &[u8]); 4] = [
    ("train-images-idx3-ubyte.gz", include_bytes!("../data/mnist/train-images-idx3-ubyte.gz")),
    ("train-labels-idx1-ubyte.gz", include_bytes!("../data/mnist/train-labels-idx1-ubyte.gz")),
    ("t10k-images-idx3-ubyte.gz", include_bytes!("../data/mnist/t10k-images-idx3-ubyte.gz")),
    ("t10k-labels-idx1-ubyte.gz", include_bytes!("../data/mnist/t10k-labels-idx1-ubyte.gz")),
];

/// The bundled sample's directory: the crate's own `data/mnist` when its sources are on this
/// machine (a checkout), otherwise the compiled-in copy written once to
/// `$XDG_CACHE_HOME/ferroflow/mnist-sample-<version>` (or `~/.cache/…`, or the temp directory),
/// each file atomically (an installed binary, whose sources are gone). If that cannot be
/// written, the path is still returned and [`load`] reports what is missing there.
pub fn bundled_dir() -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/mnist");
    if BUNDLED.iter().all(|(name, bytes)| source.join(name).metadata().is_ok_and(|m| m.len() == bytes.len() as u64)) {
        return source;
    }
    // XDG: an empty or relative XDG_CACHE_HOME is ignored, as an unset one.
    let absolute = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .and_then(absolute)
        .or_else(|| std::env::var_os("HOME").and_then(absolute).map(|h| h.join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    let dir = cache.join("ferroflow").join(concat!("mnist-sample-", env!("CARGO_PKG_VERSION")));
    if let Err(e) = write_bundled(&dir) {
        log::warn!("cannot write the bundled MNIST sample to {}: {e}", dir.display());
    }
    dir
}

/// Writes the compiled-in sample's files into `dir` (those not there already with their size).
fn write_bundled(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for (name, bytes) in BUNDLED {
        let path = dir.join(name);
        if path.metadata().is_ok_and(|m| m.len() == bytes.len() as u64) {
            continue;
        }
        let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(&tmp, &path)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compiled_in_sample_is_the_checked_in_one() {
        let dir = std::env::temp_dir().join(format!("ff-mnist-{}", std::process::id()));
        write_bundled(&dir).unwrap();
        let (a, b) = (load(&dir).unwrap(), load(&bundled_dir()).unwrap());
        assert_eq!(a.train.labels, b.train.labels);
        assert_eq!(a.test.images.as_slice::<f32>().unwrap(), b.test.images.as_slice::<f32>().unwrap());
        write_bundled(&dir).unwrap(); // present already: nothing rewritten
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bundled_sample_loads_with_the_documented_split() {
        let m = load(&bundled_dir()).unwrap();
        assert_eq!(m.train.images.dims(), [8000, 784]);
        assert_eq!(m.test.images.dims(), [2000, 784]);
        let px = m.train.images.as_slice::<f32>().unwrap();
        assert!(px.iter().all(|&v| (0.0..=1.0).contains(&v)));
        // Real digits: mostly background, some ink.
        let ink = px.iter().filter(|&&v| v > 0.5).count() as f64 / px.len() as f64;
        assert!((0.05..0.3).contains(&ink), "{ink}");
        let mut counts = [0usize; 10];
        m.test.labels.iter().for_each(|&l| counts[l as usize] += 1);
        assert_eq!(counts, [200, 225, 198, 207, 196, 172, 203, 214, 189, 196]);
    }

    #[test]
    fn bad_files_are_errors_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x");
        std::fs::write(&p, [0u8, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 28, 0, 0, 0, 28, 1, 2, 3]).unwrap();
        let e = read_idx(&p).unwrap_err().to_string();
        assert!(e.contains("x") && e.contains("declares 1568 bytes") && e.contains("holds 3"), "{e}");
        std::fs::write(&p, [0u8, 0, 9, 3]).unwrap();
        assert!(read_idx(&p).unwrap_err().to_string().contains("not an IDX file"));
        std::fs::write(&p, [0u8, 0, 8, 3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff])
            .unwrap();
        assert!(read_idx(&p).unwrap_err().to_string().contains("larger than"));
        std::fs::write(&p, [0u8, 0, 8]).unwrap();
        assert!(read_idx(&p).unwrap_err().to_string().contains("truncated"));
        let missing = dir.path().join("nope");
        assert!(read_idx(&missing).unwrap_err().to_string().contains("nope"));
        assert!(one_hot(&[3, 12], 10).unwrap_err().to_string().contains("label 12 at index 1"));
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(bytes).unwrap();
        z.finish().unwrap()
    }

    fn idx(dims: &[u32], data: usize) -> Vec<u8> {
        let mut b = vec![0u8, 0, 8, dims.len() as u8];
        for d in dims {
            b.extend_from_slice(&d.to_be_bytes());
        }
        b.resize(b.len() + data, 0);
        b
    }

    #[test]
    fn a_gzip_bomb_is_refused_before_it_is_inflated() {
        let dir = tempfile::tempdir().unwrap();
        let _limit = ferroflow_tensor::limit::scoped(8 << 20);
        // 16 MiB of pixels gzip to ~16 KB: the declared size is refused before inflating.
        let bomb = gzip(&idx(&[16 << 10, 32, 32], 16 << 20));
        assert!(bomb.len() < 1 << 20);
        let p = dir.path().join("bomb-images-idx3-ubyte.gz");
        std::fs::write(&p, &bomb).unwrap();
        let e = read_idx(&p).unwrap_err().to_string();
        assert!(e.contains("bomb-images") && e.contains("16777216 bytes") && e.contains("8388608"), "{e}");
        let e = read_idx_bytes(&bomb, Path::new("bytes.gz")).unwrap_err().to_string();
        assert!(e.contains("bytes.gz") && e.contains("resource exhausted"), "{e}");
        // 4 MiB of pixels fit, but not as 16 MiB of floats: refused before converting.
        let images = dir.path().join("images");
        std::fs::write(&images, gzip(&idx(&[4 << 10, 32, 32], 4 << 20))).unwrap();
        let labels = dir.path().join("labels");
        std::fs::write(&labels, gzip(&idx(&[4 << 10], 4 << 10))).unwrap();
        let e = read_split(&images, &labels).unwrap_err().to_string();
        assert!(e.contains("images") && e.contains("float tensor") && e.contains("16777216 bytes"), "{e}");
        let _limit = ferroflow_tensor::limit::scoped(64 << 20);
        assert_eq!(read_split(&images, &labels).unwrap().images.dims(), [4096, 1024]);
        // A header that declares more than the stream holds: an error, having read what is there.
        let short = gzip(&idx(&[1 << 14, 28, 28], 100));
        let e = read_idx_bytes(&short, Path::new("short.gz")).unwrap_err().to_string();
        assert!(e.contains("declares 12845056 bytes") && e.contains("holds 100"), "{e}");
    }
}
