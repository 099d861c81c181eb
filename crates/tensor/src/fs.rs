//! Lasting files written atomically: a temporary file in the same directory, synced, renamed
//! over the target, the directory synced. Every file ferroflow keeps (graphs, checkpoints,
//! meta graphs, `.npy`/`.npz`, the `checkpoint` state file) goes through here.
use std::io::Write;
use std::path::{Path, PathBuf};

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

/// Where a write of `path` lands: symbolic links followed to the file they name (so the
/// link stays a link), with that file's type when it exists.
fn resolve(path: &Path) -> std::io::Result<(PathBuf, Option<std::fs::FileType>)> {
    let mut p = path.to_path_buf();
    // Linux's own limit on links followed in one lookup.
    for _ in 0..40 {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let link = std::fs::read_link(&p)?;
                p = match p.parent() {
                    Some(dir) if link.is_relative() => dir.join(link),
                    _ => link,
                };
            }
            Ok(m) => return Ok((p, Some(m.file_type()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((p, None)),
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other("too many levels of symbolic links"))
}

/// How an [`AtomicFile`] reaches its target.
enum Target {
    /// A regular file (or none yet): a temporary file beside it, renamed over it.
    Renamed { tmp: PathBuf },
    /// A device, FIFO or other special file: written in place, as a shell's `>` would (a
    /// rename would replace the node with a regular file).
    InPlace,
}

/// A lasting file written over time: bytes go to a temporary file in the same directory
/// (`.NAME.tmpPID-N`); [`AtomicFile::commit`] syncs it and renames it over the target. Dropped
/// without a commit (an error, an abandoned epoch), the temporary file is removed, so the
/// target is only ever absent, the old file, or complete.
///
/// A symbolic link is followed: the file it names is replaced and the link kept. A target
/// that is a character or block device or a FIFO (`/dev/null`, a named pipe) is opened and
/// written in place instead, as a shell's redirection writes it; a directory is an error.
pub struct AtomicFile {
    path: PathBuf,
    target: Target,
    writer: Option<std::io::BufWriter<EarlyFlush>>,
}

impl AtomicFile {
    /// Starts writing `path` (nothing appears at `path` until the commit, unless it is a
    /// device or FIFO, which is written as the bytes come).
    pub fn create(path: &Path) -> Result<AtomicFile, TensorError> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let fail = |source| TensorError::Io { path: path.display().to_string(), source };
        let (real, kind) = resolve(path).map_err(fail)?;
        if kind.is_some_and(|k| k.is_dir()) {
            return Err(fail(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "is a directory; expected a file name",
            )));
        }
        if kind.is_some_and(|k| !k.is_file()) {
            let file = std::fs::OpenOptions::new().write(true).open(&real).map_err(fail)?;
            return Ok(AtomicFile {
                path: path.to_path_buf(),
                target: Target::InPlace,
                writer: Some(std::io::BufWriter::with_capacity(1 << 20, EarlyFlush::new(file))),
            });
        }
        let file_name = real
            .file_name()
            .ok_or_else(|| fail(std::io::Error::new(std::io::ErrorKind::InvalidInput, "path has no file name")))?;
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let tmp = real.with_file_name(format!(".{}.tmp{}-{n}", file_name.to_string_lossy(), std::process::id()));
        let file = std::fs::File::create(&tmp)
            .map_err(|source| TensorError::Io { path: tmp.display().to_string(), source })?;
        Ok(AtomicFile {
            path: real,
            target: Target::Renamed { tmp },
            writer: Some(std::io::BufWriter::with_capacity(1 << 20, EarlyFlush::new(file))),
        })
    }

    /// The temporary file's writer.
    pub fn writer(&mut self) -> &mut std::io::BufWriter<EarlyFlush> {
        self.writer.as_mut().expect("present until commit")
    }

    /// The file being written (its final name; a symbolic link's target).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Flushes and syncs the temporary file, renames it over the target and syncs the
    /// directory (best effort: not every filesystem lets a directory be opened for syncing).
    /// A device or FIFO is only flushed.
    pub fn commit(mut self) -> Result<(), TensorError> {
        let io = |e| TensorError::Io { path: self.path.display().to_string(), source: e };
        let w = self.writer.take().expect("present until commit");
        let Target::Renamed { tmp } = &self.target else {
            // Devices and pipes have nothing to sync (fsync fails on some with EINVAL).
            return w.into_inner().map(drop).map_err(|e| io(e.into_error()));
        };
        let result = (|| {
            let f = w.into_inner().map_err(|e| e.into_error())?.file;
            f.sync_all()?;
            drop(f);
            std::fs::rename(tmp, &self.path)
        })();
        if let Err(e) = result {
            let _ = std::fs::remove_file(tmp);
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
        if let (Some(_), Target::Renamed { tmp }) = (self.writer.take(), &self.target) {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::FileTypeExt;

    use super::write_atomic;

    #[test]
    fn a_symbolic_link_is_followed_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let (target, link) = (dir.path().join("real.bin"), dir.path().join("link.bin"));
        std::fs::write(&target, b"old").unwrap();
        std::os::unix::fs::symlink("real.bin", &link).unwrap();
        write_atomic(&link, b"new").unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        // A dangling link: the file it names is created.
        let (ghost, dangling) = (dir.path().join("ghost.bin"), dir.path().join("dangling.bin"));
        std::os::unix::fs::symlink(&ghost, &dangling).unwrap();
        write_atomic(&dangling, b"made").unwrap();
        assert!(std::fs::symlink_metadata(&dangling).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read(&ghost).unwrap(), b"made");
        // A loop of links is an error naming the path.
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::os::unix::fs::symlink(&b, &a).unwrap();
        std::os::unix::fs::symlink(&a, &b).unwrap();
        let e = write_atomic(&a, b"x").unwrap_err().to_string();
        assert!(e.contains("symbolic links") && e.contains("/a"), "{e}");
    }

    #[test]
    fn a_device_is_written_in_place_not_replaced() {
        let null = std::path::Path::new("/dev/null");
        if !std::fs::metadata(null).is_ok_and(|m| m.file_type().is_char_device()) {
            return;
        }
        // As root a rename would replace /dev/null; as anyone else it would fail.
        write_atomic(null, &[1u8; 1 << 16]).unwrap();
        assert!(std::fs::metadata(null).unwrap().file_type().is_char_device());
        let full = std::path::Path::new("/dev/full");
        if std::fs::metadata(full).is_ok_and(|m| m.file_type().is_char_device()) {
            let e = write_atomic(full, b"bytes").unwrap_err().to_string();
            assert!(e.contains("/dev/full"), "{e}");
            assert!(std::fs::metadata(full).unwrap().file_type().is_char_device());
        }
    }

    #[test]
    fn a_fifo_is_written_in_place_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("out.pb");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap())
        };
        write_atomic(&fifo, b"through the pipe").unwrap();
        assert_eq!(reader.join().unwrap(), b"through the pipe");
        assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary file is left");
    }

    #[test]
    fn a_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let e = write_atomic(dir.path(), b"x").unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
        assert!(dir.path().is_dir());
    }
}
