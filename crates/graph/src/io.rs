//! Reading and writing GraphDef files: binary (`.pb`) and text (`.pbtxt`).
use std::path::Path;

use ferroflow_proto::GraphDef;

/// An error reading or writing a GraphDef file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GraphFileError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not a valid GraphDef.
    #[error(transparent)]
    Format(#[from] ferroflow_proto::ProtoError),
    /// Writing failed.
    #[error(transparent)]
    Write(#[from] ferroflow_tensor::TensorError),
}

/// True when the path names a text-format file (`.pbtxt`, `.txt`, `.prototxt`).
pub fn is_text_path(path: &Path) -> bool {
    matches!(path.extension().and_then(|e| e.to_str()), Some("pbtxt" | "txt" | "prototxt"))
}

/// Reads a GraphDef: text format for `.pbtxt`/`.txt`, binary otherwise.
pub fn read_graph_def(path: &Path) -> Result<GraphDef, GraphFileError> {
    let what = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| GraphFileError::Io { path: what.clone(), source })?;
    parse_graph_def(&bytes, is_text_path(path), &what)
}

/// Parses a GraphDef file's bytes (what [`read_graph_def`] reads): text format when `text`,
/// binary otherwise; `what` names the file in errors.
pub fn parse_graph_def(bytes: &[u8], text: bool, what: &str) -> Result<GraphDef, GraphFileError> {
    if text {
        let text = std::str::from_utf8(bytes).map_err(|e| ferroflow_proto::ProtoError::Text {
            what: what.to_string(),
            message: "tensorflow.GraphDef".into(),
            reason: format!("not UTF-8 text ({e})"),
        })?;
        Ok(ferroflow_proto::parse_text(text, what)?)
    } else {
        Ok(ferroflow_proto::decode(bytes, what)?)
    }
}

/// Writes a GraphDef atomically, as text for `.pbtxt`/`.txt`, binary otherwise.
pub fn write_graph_def(path: &Path, def: &GraphDef) -> Result<(), GraphFileError> {
    let bytes =
        if is_text_path(path) { ferroflow_proto::print_text(def).into_bytes() } else { ferroflow_proto::encode(def) };
    ferroflow_tensor::fs::write_atomic(path, &bytes)?;
    Ok(())
}
