//! Lasting files written atomically: a temporary file in the same directory, synced, renamed
//! over the target, the directory synced. Every file ferroflow keeps (graphs, checkpoints,
//! meta graphs, `.npy`/`.npz`, the `checkpoint` state file) goes through here.
use std::io::Write;
use std::path::Path;

use crate::TensorError;

/// Writes `bytes` to `path` through a temporary file in the same directory and a rename, so
/// readers see either the old file or the complete new one.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), TensorError> {
    write_atomic_with(path, |w| w.write_all(bytes))
}

/// A file being written whose pages the kernel starts writing to disk every 8 MiB (Linux
/// `sync_file_range`, which does not wait), so the final `fsync` of a large file finds most
/// of it on disk already instead of flushing it all at the end.
pub struct EarlyFlush {
    file: std::fs::File,
    written: u64,
    flushed: u64,
}

impl EarlyFlush {
    const CHUNK: u64 = 8 << 20;

    fn new(file: std::fs::File) -> EarlyFlush {
        EarlyFlush { file, written: 0, flushed: 0 }
    }
}

impl Write for EarlyFlush {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.written += n as u64;
        if self.written - self.flushed >= Self::CHUNK {
            #[cfg(target_os = "linux")]
            {
                use std::os::fd::AsRawFd;
                // SAFETY: a valid open descriptor and a byte range of it; the call only starts
                // writeback (errors are reported again by the fsync that follows).
                unsafe {
                    libc::sync_file_range(
                        self.file.as_raw_fd(),
                        self.flushed as i64,
                        (self.written - self.flushed) as i64,
                        libc::SYNC_FILE_RANGE_WRITE,
                    );
                }
            }
            self.flushed = self.written;
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// Writes `path` atomically with what `write` produces: into a temporary file in the same
/// directory (`.NAME.tmpPID-N`), flushed and synced, then renamed over `path`, then the
/// directory synced. A process killed at any point leaves either the old file or the new one
/// (and perhaps a stray temporary file), never a partial `path`.
pub fn write_atomic_with(
    path: &Path,
    write: impl FnOnce(&mut std::io::BufWriter<EarlyFlush>) -> std::io::Result<()>,
) -> Result<(), TensorError> {
    let mut file = AtomicFile::create(path)?;
    write(file.writer()).map_err(|e| TensorError::Io { path: path.display().to_string(), source: e })?;
    file.commit()
}

/// A lasting file written over time: bytes go to a temporary file in the same directory
/// (`.NAME.tmpPID-N`); [`AtomicFile::commit`] syncs it and renames it over the target. Dropped
/// without a commit (an error, an abandoned epoch), the temporary file is removed, so the
/// target is only ever absent, the old file, or complete.
pub struct AtomicFile {
    path: std::path::PathBuf,
    tmp: std::path::PathBuf,
    writer: Option<std::io::BufWriter<EarlyFlush>>,
}

impl AtomicFile {
    /// Starts writing `path` (nothing appears at `path` until the commit).
    pub fn create(path: &Path) -> Result<AtomicFile, TensorError> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let file_name = path.file_name().ok_or_else(|| TensorError::Io {
            path: path.display().to_string(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "path has no file name"),
        })?;
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let tmp = path.with_file_name(format!(".{}.tmp{}-{n}", file_name.to_string_lossy(), std::process::id()));
        let file = std::fs::File::create(&tmp)
            .map_err(|source| TensorError::Io { path: tmp.display().to_string(), source })?;
        Ok(AtomicFile {
            path: path.to_path_buf(),
            tmp,
            writer: Some(std::io::BufWriter::with_capacity(1 << 20, EarlyFlush::new(file))),
        })
    }

    /// The temporary file's writer.
    pub fn writer(&mut self) -> &mut std::io::BufWriter<EarlyFlush> {
        self.writer.as_mut().expect("present until commit")
    }

    /// The file being written (its final name).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Flushes and syncs the temporary file, renames it over the target and syncs the
    /// directory (best effort: not every filesystem lets a directory be opened for syncing).
    pub fn commit(mut self) -> Result<(), TensorError> {
        let io = |e| TensorError::Io { path: self.path.display().to_string(), source: e };
        let w = self.writer.take().expect("present until commit");
        let result = (|| {
            let f = w.into_inner().map_err(|e| e.into_error())?.file;
            f.sync_all()?;
            drop(f);
            std::fs::rename(&self.tmp, &self.path)
        })();
        if let Err(e) = result {
            let _ = std::fs::remove_file(&self.tmp);
            return Err(io(e));
        }
        let dir = self.path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.writer.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}
