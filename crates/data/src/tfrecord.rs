//! TFRecord files: `TFRecordDataset` reads records as string scalars (a bad CRC or a
//! truncated record names the file and byte offset); `TFRecordWriter` writes them
//! atomically (the file appears when closed).
use std::hash::Hasher;

use ferroflow_tensor::hash::Fnv1a;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ferroflow_summary::record::{write_record, RecordReader};
use ferroflow_tensor::Tensor;

use crate::dataset::{invalid, Cardinality, Ctx, ElementIter, FnIter, Node};
use crate::{DataError, Dataset, Result};

struct TfRecords {
    files: Vec<PathBuf>,
}

impl Node for TfRecords {
    fn kind(&self) -> &'static str {
        "TFRecord"
    }
    fn describe(&self) -> String {
        let mut h = Fnv1a::default();
        for f in &self.files {
            h.write(f.to_string_lossy().as_bytes());
            if let Ok(m) = std::fs::metadata(f) {
                h.write(&m.len().to_le_bytes());
                if let Ok(t) = m.modified() {
                    h.write(&t.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()).to_le_bytes());
                }
            }
        }
        format!("{:016x}", h.finish())
    }
    fn cardinality(&self) -> Cardinality {
        Cardinality::Unknown
    }
    fn iterate(&self, _: &Ctx) -> Result<Box<dyn ElementIter>> {
        let mut files = self.files.clone().into_iter();
        let mut reader: Option<RecordReader<BufReader<std::fs::File>>> = None;
        Ok(Box::new(FnIter(move || loop {
            if reader.is_none() {
                let f = files.next()?;
                let file = match std::fs::File::open(&f) {
                    Ok(file) => file,
                    Err(e) => return Some(Err(DataError::io(&f, e))),
                };
                let len = file.metadata().ok().map(|m| m.len());
                reader = Some(RecordReader::new(BufReader::new(file), f.display().to_string(), len));
            }
            match reader.as_mut().expect("opened above").next_record() {
                Ok(Some(r)) => return Some(Tensor::from_strings(&[], vec![r]).map(|t| vec![t]).map_err(Into::into)),
                Ok(None) => reader = None,
                Err(e) => {
                    reader = None;
                    return Some(Err(DataError::other(e)));
                }
            }
        })))
    }
}

impl Dataset<Tensor> {
    /// The records of TFRecord `files` (uncompressed), one after the other, as string
    /// scalars.
    pub fn tfrecord(files: &[impl AsRef<Path>]) -> Result<Dataset<Tensor>> {
        if files.is_empty() {
            return invalid("TFRecordDataset needs at least one file");
        }
        Ok(Dataset::from_node(Arc::new(TfRecords { files: files.iter().map(|f| f.as_ref().to_path_buf()).collect() })))
    }
}

/// Writes a TFRecord file; it appears (complete) at `path` when [`TFRecordWriter::close`]
/// returns.
pub struct TFRecordWriter {
    file: ferroflow_tensor::fs::AtomicFile,
}

impl TFRecordWriter {
    /// Starts writing `path`.
    pub fn create(path: &Path) -> Result<TFRecordWriter> {
        Ok(TFRecordWriter { file: ferroflow_tensor::fs::AtomicFile::create(path).map_err(|e| DataError::io(path, e))? })
    }

    /// Appends one record.
    pub fn write(&mut self, record: &[u8]) -> Result<()> {
        let path = self.file.path().to_path_buf();
        write_record(self.file.writer(), record).map_err(|e| DataError::io(&path, e))
    }

    /// Finishes the file.
    pub fn close(self) -> Result<()> {
        let path = self.file.path().to_path_buf();
        self.file.commit().map_err(|e| DataError::io(&path, e))
    }
}
