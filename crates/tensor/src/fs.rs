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
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let io = |e| TensorError::Io { path: path.display().to_string(), source: e };
    let file_name = path.file_name().ok_or_else(|| TensorError::Io {
        path: path.display().to_string(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "path has no file name"),
    })?;
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let tmp = path.with_file_name(format!(".{}.tmp{}-{n}", file_name.to_string_lossy(), std::process::id()));
    let result = (|| {
        let mut w = std::io::BufWriter::with_capacity(1 << 20, EarlyFlush::new(std::fs::File::create(&tmp)?));
        write(&mut w)?;
        let f = w.into_inner().map_err(|e| e.into_error())?.file;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(e));
    }
    // Make the rename itself durable (best effort: not every filesystem lets a directory be
    // opened for syncing).
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}
