//! The `.keras` archive: a zip of `metadata.json`, `config.json` and `model.weights.h5`
//! (Keras writes them stored, uncompressed; deflated members are read too). Members are read
//! through bounded readers: a member's declared size is checked against its kind's limit and
//! the memory limit before it is read, and a member that inflates past its declared size
//! fails, so a zip bomb costs no more than the limit.
use std::io::{Read, Seek, Write};
use std::path::Path;

use crate::{KerasError, Result};

/// The members of a `.keras` file.
pub struct Archive {
    /// `config.json`, parsed.
    pub config: serde_json::Value,
    /// `metadata.json`, parsed (empty object if absent).
    pub metadata: serde_json::Value,
    /// `model.weights.h5`'s bytes.
    pub weights: Vec<u8>,
}

/// JSON members larger than this are refused (EfficientNetB7's config is ~1 MB).
const MAX_JSON: u64 = 256 << 20;

fn file_err(path: &Path, reason: impl Into<String>) -> KerasError {
    KerasError::File { path: path.display().to_string(), reason: reason.into() }
}

fn read_member<R: Read + Seek>(
    zip: &mut zip::ZipArchive<R>,
    name: &str,
    limit: u64,
    path: &Path,
) -> Result<Option<Vec<u8>>> {
    let mut entry = match zip.by_name(name) {
        Ok(e) => e,
        Err(zip::result::ZipError::FileNotFound) => return Ok(None),
        Err(e) => return Err(file_err(path, format!("cannot read member '{name}': {e}"))),
    };
    let declared = entry.size();
    if declared > limit {
        return Err(file_err(
            path,
            format!("member '{name}' declares {declared} bytes, more than the {limit} allowed"),
        ));
    }
    let size = usize::try_from(declared).unwrap_or(usize::MAX);
    ferroflow_tensor::limit::check(size, || format!("member '{name}' of {}", path.display()))
        .map_err(|e| file_err(path, e.to_string()))?;
    let mut bytes = Vec::with_capacity(size);
    (&mut entry)
        .take(declared + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| file_err(path, format!("cannot read member '{name}': {e}")))?;
    if bytes.len() as u64 != declared {
        return Err(file_err(
            path,
            format!(
                "member '{name}' holds {} bytes but declares {declared} (a damaged or hostile archive)",
                bytes.len()
            ),
        ));
    }
    Ok(Some(bytes))
}

fn json(bytes: &[u8], name: &str, path: &Path) -> Result<serde_json::Value> {
    serde_json::from_slice(bytes).map_err(|e| file_err(path, format!("'{name}' is not valid JSON: {e}")))
}

/// Reads a `.keras` archive from `bytes` (`path` names it in errors).
pub fn read(bytes: &[u8], path: &Path) -> Result<Archive> {
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes))
        .map_err(|e| file_err(path, format!("not a .keras file (a zip archive): {e}")))?;
    let config = read_member(&mut zip, "config.json", MAX_JSON, path)?
        .ok_or_else(|| file_err(path, "the archive has no config.json"))?;
    let config = json(&config, "config.json", path)?;
    let metadata = match read_member(&mut zip, "metadata.json", MAX_JSON, path)? {
        Some(m) => json(&m, "metadata.json", path)?,
        None => serde_json::Value::Object(Default::default()),
    };
    // The weights are at most what the archive could hold uncompressed: the memory limit.
    let weights = read_member(&mut zip, "model.weights.h5", u64::MAX, path)?.ok_or_else(|| {
        file_err(path, "the archive has no model.weights.h5 (a .keras file written by another tool?)")
    })?;
    Ok(Archive { config, metadata, weights })
}

/// Writes a `.keras` archive atomically: `metadata.json`, `config.json`, `model.weights.h5`,
/// stored, as Keras writes them.
pub fn write(path: &Path, config: &serde_json::Value, metadata: &serde_json::Value, weights: &[u8]) -> Result<()> {
    let mut cursor = std::io::Cursor::new(Vec::with_capacity(weights.len() + (64 << 10)));
    {
        let mut zip = zip::ZipWriter::new(&mut cursor);
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored)
            .large_file(weights.len() as u64 >= u32::MAX as u64);
        let err = |e: zip::result::ZipError| file_err(path, e.to_string());
        let io = |e: std::io::Error| file_err(path, e.to_string());
        for (name, bytes) in [
            ("metadata.json", serde_json::to_vec(metadata).expect("JSON values serialize")),
            ("config.json", serde_json::to_vec(config).expect("JSON values serialize")),
        ] {
            zip.start_file(name, opts).map_err(err)?;
            zip.write_all(&bytes).map_err(io)?;
        }
        zip.start_file("model.weights.h5", opts).map_err(err)?;
        zip.write_all(weights).map_err(io)?;
        zip.finish().map_err(err)?;
    }
    ferroflow_tensor::fs::write_atomic(path, &cursor.into_inner()).map_err(|e| file_err(path, e.to_string()))
}
