//! `cache()`: the first complete pass records the elements, later passes replay them.
//!
//! In memory, a pass that stops early is discarded (as tf.data does). To a file, the cache is
//! a tensor bundle (`FILE.index` + `FILE.data-00000-of-00001`, the format tf.data's file cache
//! and checkpoints use) written through temporary files and renamed into place when the pass
//! completes: a process killed mid-epoch leaves no cache (only a temporary file, removed by
//! the next run), never a partial one, and there is no lockfile to clean up by hand. The
//! bundle records the fingerprint of the pipeline before it; a cache written by a different
//! pipeline (other files, another map function, other parameters) is rebuilt, not replayed.
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ferroflow_checkpoint::{BundleReader, BundleWriter};
use ferroflow_tensor::Tensor;

use crate::dataset::{fingerprint, iterate_input, Ctx, Element, ElementIter, FnIter, Next, Node};
use crate::structure::Structure;
use crate::{DataError, Dataset, Result};

struct MemoryCache {
    input: Arc<dyn Node>,
    complete: Arc<Mutex<Option<Arc<Vec<Element>>>>>,
}

impl Node for MemoryCache {
    fn kind(&self) -> &'static str {
        "MemoryCache"
    }
    fn input(&self) -> Option<&Arc<dyn Node>> {
        Some(&self.input)
    }
    fn describe(&self) -> String {
        String::new()
    }
    fn iterate(&self, ctx: &Ctx) -> Result<Box<dyn ElementIter>> {
        if let Some(elems) = self.complete.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            let mut i = 0;
            return Ok(Box::new(FnIter(move || {
                i += 1;
                elems.get(i - 1).cloned().map(Ok)
            })));
        }
        Ok(Box::new(MemoryWriter {
            input: iterate_input(&self.input, ctx)?,
            recorded: Some(Vec::new()),
            complete: self.complete.clone(),
            path: ctx.path.clone(),
        }))
    }
}

struct MemoryWriter {
    input: Box<dyn ElementIter>,
    recorded: Option<Vec<Element>>,
    complete: Arc<Mutex<Option<Arc<Vec<Element>>>>>,
    path: String,
}

impl ElementIter for MemoryWriter {
    fn next(&mut self) -> Next {
        match self.input.next() {
            Some(Ok(e)) => {
                if let Some(r) = self.recorded.as_mut() {
                    r.push(e.clone());
                }
                Some(Ok(e))
            }
            Some(Err(err)) => {
                // An element that failed cannot be replayed: this pass will not be cached.
                self.recorded = None;
                Some(Err(err))
            }
            None => {
                if let Some(r) = self.recorded.take() {
                    *self.complete.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(r));
                }
                None
            }
        }
    }
}

impl Drop for MemoryWriter {
    fn drop(&mut self) {
        if self.recorded.as_ref().is_some_and(|r| !r.is_empty()) {
            log::warn!(
                "{}: the iterator did not read the whole dataset being cached, so the partial cache is discarded \
                 (a pipeline like cache().take(k).repeat() causes this; use take(k).cache().repeat())",
                self.path
            );
        }
    }
}

struct FileCache {
    input: Arc<dyn Node>,
    prefix: PathBuf,
}

const COUNT: &str = "__count";
const FINGERPRINT: &str = "__fingerprint";

fn key(i: u64, c: usize) -> String {
    format!("{i:010}/{c}")
}

impl Node for FileCache {
    fn kind(&self) -> &'static str {
        "FileCache"
    }
    fn input(&self) -> Option<&Arc<dyn Node>> {
        Some(&self.input)
    }
    fn describe(&self) -> String {
        self.prefix.display().to_string()
    }
    fn iterate(&self, ctx: &Ctx) -> Result<Box<dyn ElementIter>> {
        let want = format!("{:016x}", fingerprint(&self.input));
        let index = ferroflow_checkpoint::index_path(&self.prefix);
        if index.exists() {
            match open_cache(&self.prefix, &want) {
                Ok(Some((reader, n))) => return Ok(Box::new(replay(reader, n, self.prefix.clone()))),
                Ok(None) => log::warn!(
                    "{}: cache {} was written by a different pipeline; rebuilding it",
                    ctx.path,
                    self.prefix.display()
                ),
                Err(e) => log::warn!("{}: cache unreadable ({e}); rebuilding it", ctx.path),
            }
        }
        remove_stale_temporaries(&self.prefix);
        let writer = BundleWriter::create(&self.prefix).map_err(|e| DataError::io(&self.prefix, e))?;
        Ok(Box::new(FileWriter {
            input: iterate_input(&self.input, ctx)?,
            writer: Some(writer),
            count: 0,
            fingerprint: want,
            prefix: self.prefix.clone(),
            path: ctx.path.clone(),
        }))
    }
}

/// The cache at `prefix` and its element count if it was written by the pipeline with
/// fingerprint `want`; `None` if by another.
fn open_cache(prefix: &Path, want: &str) -> Result<Option<(BundleReader, u64)>> {
    let io = |e: ferroflow_checkpoint::CheckpointError| DataError::io(prefix, e);
    let reader = BundleReader::open(prefix).map_err(io)?;
    let fp = reader.read(FINGERPRINT).map_err(io)?;
    let fp = fp.as_strings().ok().and_then(|s| s.first().cloned()).unwrap_or_default();
    if fp != want.as_bytes() {
        return Ok(None);
    }
    let n = reader.read(COUNT).map_err(io)?.scalar_value::<i64>().map_err(|e| DataError::io(prefix, e))?;
    verify_once(&reader, prefix)?;
    Ok(Some((reader, n.max(0) as u64)))
}

/// Reads every element of the cache at `prefix` once per process (and again whenever its data
/// file changes), checking each one's CRC-32C, so a cache damaged on disk (a flipped byte, a
/// torn sector) is found before its first element is replayed and is rebuilt, instead of
/// failing every later pass at the damaged element.
fn verify_once(reader: &BundleReader, prefix: &Path) -> Result<()> {
    use std::collections::BTreeSet;
    use std::sync::Mutex;
    use std::time::SystemTime;
    static VERIFIED: Mutex<BTreeSet<(PathBuf, u64, SystemTime)>> = Mutex::new(BTreeSet::new());
    let data = ferroflow_checkpoint::data_path(prefix, 0, reader.header().num_shards.max(1));
    let meta = std::fs::metadata(&data).map_err(|e| DataError::io(&data, e))?;
    let stamp = (data.clone(), meta.len(), meta.modified().unwrap_or(SystemTime::UNIX_EPOCH));
    if VERIFIED.lock().unwrap_or_else(|p| p.into_inner()).contains(&stamp) {
        return Ok(());
    }
    for name in reader.entries().keys() {
        reader.read(name).map_err(|e| DataError::io(prefix, e))?;
    }
    VERIFIED.lock().unwrap_or_else(|p| p.into_inner()).insert(stamp);
    Ok(())
}

fn replay(reader: BundleReader, n: u64, prefix: PathBuf) -> impl ElementIter {
    let mut i = 0u64;
    FnIter(move || {
        if i >= n {
            return None;
        }
        i += 1;
        let mut e = Vec::new();
        for c in 0.. {
            let k = key(i - 1, c);
            if !reader.entries().contains_key(&k) {
                break;
            }
            match reader.read(&k) {
                Ok(t) => e.push(t),
                Err(err) => return Some(Err(DataError::io(&prefix, err))),
            }
        }
        Some(Ok(e))
    })
}

/// Removes temporary files of this cache left by processes that no longer run.
fn remove_stale_temporaries(prefix: &Path) {
    let dir = prefix.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let Some(base) = prefix.file_name().map(|b| b.to_string_lossy().into_owned()) else { return };
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(&format!(".{base}.")) else { continue };
        let Some(pid) = rest.rsplit_once(".tmp").and_then(|(_, t)| t.split('-').next()?.parse::<u32>().ok()) else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

struct FileWriter {
    input: Box<dyn ElementIter>,
    writer: Option<BundleWriter>,
    count: u64,
    fingerprint: String,
    prefix: PathBuf,
    path: String,
}

impl FileWriter {
    fn finish(&mut self) -> Result<()> {
        let Some(mut w) = self.writer.take() else { return Ok(()) };
        let io = |e| DataError::io(&self.prefix, e);
        w.add(COUNT, &Tensor::scalar(self.count as i64)).map_err(io)?;
        w.add(FINGERPRINT, &Tensor::from_strings(&[], vec![self.fingerprint.clone().into_bytes()])?).map_err(io)?;
        let bytes = w.data_bytes();
        w.finish().map_err(io)?;
        log::info!("{}: cached {} elements ({bytes} bytes) in {}", self.path, self.count, self.prefix.display());
        Ok(())
    }
}

impl ElementIter for FileWriter {
    fn next(&mut self) -> Next {
        match self.input.next() {
            Some(Ok(e)) => {
                if let Some(w) = self.writer.as_mut() {
                    for (c, t) in e.iter().enumerate() {
                        if let Err(err) = w.add(&key(self.count, c), t) {
                            self.writer = None;
                            return Some(Err(DataError::io(&self.prefix, err)));
                        }
                    }
                }
                self.count += 1;
                Some(Ok(e))
            }
            Some(Err(err)) => {
                if self.writer.take().is_some() {
                    log::warn!(
                        "{}: an element failed, so this pass is not cached in {}",
                        self.path,
                        self.prefix.display()
                    );
                }
                Some(Err(err))
            }
            None => match self.finish() {
                Ok(()) => None,
                Err(e) => Some(Err(e)),
            },
        }
    }
}

impl<T: Structure> Dataset<T> {
    /// The elements cached after the first complete pass: in memory (`None`) or in the
    /// tensor bundle `file` (see the module docs).
    pub fn cache(&self, file: Option<&Path>) -> Dataset<T> {
        match file {
            None => self.then(MemoryCache { input: self.node.clone(), complete: Arc::new(Mutex::new(None)) }),
            Some(f) => self.then(FileCache { input: self.node.clone(), prefix: f.to_path_buf() }),
        }
    }
}
