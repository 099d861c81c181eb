//! `SummaryWriter`: the summaries TensorBoard's dashboards show — scalars, histograms
//! (TensorFlow's `HistogramProto` and bucket edges), images (PNG-encoded), text, the graph —
//! appended to one event file per run directory. Every event is flushed as it is written, so a
//! crash loses at most the event being written and TensorBoard reads the file while it grows.
//! One writer per run directory in a process: a second one for the same directory is an error
//! (two writers would interleave two files whose steps TensorBoard merges unpredictably).
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ferroflow_codec::png::{encode_png, PngPixels};
use ferroflow_proto::{
    event, summary, summary_metadata::PluginData, DataClass, GraphDef, Summary, SummaryMetadata, TensorProto,
    TensorShapeProto,
};

use crate::event::EventWriter;
use crate::SummaryError;

static OPEN: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);

/// Writes summaries of one run directory.
pub struct SummaryWriter {
    events: Option<EventWriter>,
    dir: PathBuf,
}

/// A summary value of `tag` for TensorBoard's `plugin`.
fn tagged(tag: &str, plugin: &str, class: DataClass, value: summary::value::Value) -> summary::Value {
    summary::Value {
        tag: tag.into(),
        metadata: Some(SummaryMetadata {
            plugin_data: Some(PluginData { plugin_name: plugin.into(), content: vec![] }),
            data_class: class as i32,
            ..Default::default()
        }),
        value: Some(value),
        ..Default::default()
    }
}

impl SummaryWriter {
    /// Creates `dir` if needed and a new event file in it; fails when the directory cannot be
    /// written or another writer of this process has it open.
    pub fn create(dir: &Path) -> Result<SummaryWriter, SummaryError> {
        std::fs::create_dir_all(dir).map_err(|e| SummaryError::Io { file: dir.display().to_string(), source: e })?;
        let key = dir.canonicalize().map_err(|e| SummaryError::Io { file: dir.display().to_string(), source: e })?;
        {
            let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
            if !open.get_or_insert_with(HashSet::new).insert(key.clone()) {
                return Err(SummaryError::Invalid(format!(
                    "{}: a summary writer of this process already writes this run directory",
                    dir.display()
                )));
            }
        }
        match EventWriter::create(dir) {
            Ok(events) => Ok(SummaryWriter { events: Some(events), dir: key }),
            Err(e) => {
                Self::release(&key);
                Err(e)
            }
        }
    }

    fn release(key: &Path) {
        if let Some(open) = OPEN.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            open.remove(key);
        }
    }

    fn events(&mut self) -> Result<&mut EventWriter, SummaryError> {
        self.events
            .as_mut()
            .ok_or_else(|| SummaryError::Invalid(format!("{}: the writer is closed", self.dir.display())))
    }

    fn value(&mut self, step: i64, v: summary::Value) -> Result<(), SummaryError> {
        let e = ferroflow_proto::Event {
            wall_time: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
            step,
            what: Some(event::What::Summary(Summary { value: vec![v] })),
            ..Default::default()
        };
        self.events()?.write_event(&e)
    }

    /// The event file.
    pub fn path(&self) -> Option<&Path> {
        self.events.as_ref().map(|e| e.path())
    }

    /// A scalar (the scalars dashboard).
    pub fn scalar(&mut self, tag: &str, value: f32, step: i64) -> Result<(), SummaryError> {
        self.events()?.add_scalar(tag, value, step)
    }

    /// A histogram of `values` with TensorFlow's default buckets (the histograms and
    /// distributions dashboards); NaN or infinite values are an error naming the tag.
    pub fn histogram(&mut self, tag: &str, values: &[f32], step: i64) -> Result<(), SummaryError> {
        let histo = crate::histogram::histogram(values.iter().map(|&v| f64::from(v)))
            .map_err(|e| SummaryError::Value { kind: "histogram", tag: tag.to_string(), source: Box::new(e) })?;
        self.value(step, tagged(tag, "histograms", DataClass::Unknown, summary::value::Value::Histo(histo)))
    }

    /// An image of `height × width × channels` (1, 3 or 4) bytes, PNG-encoded (the images
    /// dashboard).
    pub fn image(
        &mut self,
        tag: &str,
        pixels: &[u8],
        [height, width, channels]: [usize; 3],
        step: i64,
    ) -> Result<(), SummaryError> {
        let bad = |why: String| SummaryError::Invalid(format!("image '{tag}': {why}"));
        if !matches!(channels, 1 | 3 | 4) || height == 0 || width == 0 {
            return Err(bad(format!("shape [{height}, {width}, {channels}]: needs 1, 3 or 4 channels and a size")));
        }
        if pixels.len() != height * width * channels {
            return Err(bad(format!("{} bytes for shape [{height}, {width}, {channels}]", pixels.len())));
        }
        let png = encode_png(&PngPixels::U8(pixels.to_vec()), height, width, channels, -1).map_err(|e| {
            SummaryError::Value { kind: "image", tag: tag.to_string(), source: Box::new(SummaryError::Codec(e)) }
        })?;
        let image = summary::Image {
            height: height as i32,
            width: width as i32,
            colorspace: channels as i32,
            encoded_image_string: png,
        };
        self.value(step, tagged(tag, "images", DataClass::Unknown, summary::value::Value::Image(image)))
    }

    /// Markdown text (the text dashboard).
    pub fn text(&mut self, tag: &str, text: &str, step: i64) -> Result<(), SummaryError> {
        let tensor = TensorProto {
            dtype: ferroflow_tensor::DType::String.to_tf(),
            tensor_shape: Some(TensorShapeProto::default()),
            string_val: vec![text.as_bytes().to_vec()],
            ..Default::default()
        };
        self.value(step, tagged(tag, "text", DataClass::Tensor, summary::value::Value::Tensor(tensor)))
    }

    /// The graph (the graphs dashboard).
    pub fn graph(&mut self, graph: &GraphDef) -> Result<(), SummaryError> {
        self.events()?.add_graph(graph, 0)
    }

    /// Flushes (every event is flushed already; kept for TensorFlow's API).
    pub fn flush(&mut self) -> Result<(), SummaryError> {
        self.events().map(|_| ())
    }

    /// Closes the file and releases the run directory.
    pub fn close(&mut self) -> Result<(), SummaryError> {
        if self.events.take().is_some() {
            Self::release(&self.dir);
        }
        Ok(())
    }
}

impl Drop for SummaryWriter {
    fn drop(&mut self) {
        let _ = self.close();
    }
}
