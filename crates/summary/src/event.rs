//! Event files: writing (TensorFlow's naming and first record) and reading.
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use ferroflow_proto::{
    event, summary, DataClass, Event, GraphDef, RunMetadata, SourceMetadata, Summary, SummaryMetadata,
    TaggedRunMetadata, TensorProto, TensorShapeProto,
};
use prost::Message;

use crate::record::{write_record, RecordReader};
use crate::SummaryError;

/// The writer name recorded in each file's first event.
pub const WRITER_NAME: &str = "ferroflow.summary.event_writer";

fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

fn hostname() -> String {
    let from_file = std::fs::read_to_string("/proc/sys/kernel/hostname").ok().map(|s| s.trim().to_string());
    from_file
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| "localhost".into())
}

/// Appends events to `events.out.tfevents.<seconds>.<host>` in a log directory; the first
/// record is `file_version: "brain.Event:2"`. Every event is flushed as it is written.
pub struct EventWriter {
    out: BufWriter<File>,
    path: PathBuf,
}

impl EventWriter {
    /// Creates the directory if needed and a new event file in it.
    pub fn create(logdir: &Path) -> Result<EventWriter, SummaryError> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let io = |e| SummaryError::Io { file: logdir.display().to_string(), source: e };
        std::fs::create_dir_all(logdir).map_err(io)?;
        let wall = now();
        let base = format!("events.out.tfevents.{:010}.{}", wall as u64, hostname());
        let mut path = logdir.join(&base);
        let file = loop {
            match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(f) => break f,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
                    path = logdir.join(format!("{base}.{}.{n}", std::process::id()));
                }
                Err(e) => return Err(SummaryError::Io { file: path.display().to_string(), source: e }),
            }
        };
        let mut w = EventWriter { out: BufWriter::new(file), path };
        w.write_event(&Event {
            wall_time: wall.floor(),
            what: Some(event::What::FileVersion("brain.Event:2".into())),
            source_metadata: Some(SourceMetadata { writer: WRITER_NAME.into() }),
            ..Default::default()
        })?;
        Ok(w)
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes one event (and flushes it).
    pub fn write_event(&mut self, e: &Event) -> Result<(), SummaryError> {
        let io = |source| SummaryError::Io { file: self.path.display().to_string(), source };
        write_record(&mut self.out, &e.encode_to_vec()).map_err(io)?;
        self.out.flush().map_err(io)
    }

    fn write(&mut self, step: i64, what: event::What) -> Result<(), SummaryError> {
        self.write_event(&Event { wall_time: now(), step, what: Some(what), ..Default::default() })
    }

    /// A `graph_def` event: the run graph TensorBoard's graph dashboard shows.
    pub fn add_graph(&mut self, graph: &GraphDef, step: i64) -> Result<(), SummaryError> {
        self.write(step, event::What::GraphDef(graph.encode_to_vec()))
    }

    /// A `tagged_run_metadata` event (step stats and partition graphs, shown by the graph
    /// dashboard as a profile of that step).
    pub fn add_run_metadata(&mut self, tag: &str, meta: &RunMetadata, step: i64) -> Result<(), SummaryError> {
        let t = TaggedRunMetadata { tag: tag.into(), run_metadata: meta.encode_to_vec() };
        self.write(step, event::What::TaggedRunMetadata(t))
    }

    /// A scalar summary in TensorBoard's tensor form (plugin `scalars`, a rank-0 float).
    pub fn add_scalar(&mut self, tag: &str, value: f32, step: i64) -> Result<(), SummaryError> {
        let tensor = TensorProto {
            dtype: ferroflow_tensor::DType::Float.to_tf(),
            tensor_shape: Some(TensorShapeProto::default()),
            float_val: vec![value],
            ..Default::default()
        };
        let value = summary::Value {
            tag: tag.into(),
            metadata: Some(SummaryMetadata {
                plugin_data: Some(ferroflow_proto::summary_metadata::PluginData {
                    plugin_name: "scalars".into(),
                    content: vec![],
                }),
                data_class: DataClass::Scalar as i32,
                ..Default::default()
            }),
            value: Some(summary::value::Value::Tensor(tensor)),
            ..Default::default()
        };
        self.write(step, event::What::Summary(Summary { value: vec![value] }))
    }
}

/// Reads the events of one file in order.
pub struct EventReader<R> {
    records: RecordReader<R>,
    what: String,
    index: usize,
}

impl EventReader<BufReader<File>> {
    /// Opens an event file.
    pub fn open(path: &Path) -> Result<Self, SummaryError> {
        let what = path.display().to_string();
        let io = |source| SummaryError::Io { file: what.clone(), source };
        let file = File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        Ok(EventReader::new(BufReader::new(file), &what, Some(len)))
    }
}

impl<R: Read> EventReader<R> {
    /// Events from any reader (`len`: its size when known).
    pub fn new(inner: R, what: &str, len: Option<u64>) -> Self {
        EventReader { records: RecordReader::new(inner, what, len), what: what.into(), index: 0 }
    }
}

impl<R: Read> Iterator for EventReader<R> {
    type Item = Result<Event, SummaryError>;

    fn next(&mut self) -> Option<Self::Item> {
        let at = self.records.offset();
        let data = match self.records.next_record() {
            Ok(Some(d)) => d,
            Ok(None) => return None,
            Err(e) => return Some(Err(e)),
        };
        let i = self.index;
        self.index += 1;
        let what = format!("{} (record {i})", self.what);
        if let Err(e) = ferroflow_proto::check_decoded_size::<Event>(&data, &what) {
            return Some(Err(e.into()));
        }
        Some(Event::decode(data.as_slice()).map_err(|e| SummaryError::Corrupt {
            file: self.what.clone(),
            offset: at,
            reason: format!("record {i} is not an Event: {}", ferroflow_proto::decode_reason(&e)),
        }))
    }
}

/// All events of a file.
pub fn read_events(path: &Path) -> Result<Vec<Event>, SummaryError> {
    EventReader::open(path)?.collect()
}

/// The value of a scalar summary: `simple_value` (TF1) or a rank-0 float tensor (TF2).
pub fn scalar_value(v: &summary::Value) -> Option<f32> {
    match v.value.as_ref()? {
        summary::value::Value::SimpleValue(x) => Some(*x),
        summary::value::Value::Tensor(t) => {
            let t = ferroflow_proto::convert::tensor_from_proto(t).ok()?;
            (t.dtype() == ferroflow_tensor::DType::Float && t.len() == 1)
                .then(|| t.as_slice::<f32>().ok()?.first().copied())?
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_record_matches_tensorflows_bytes() {
        // tf-formats.md §5.7: Event{wall_time=1700000000, file_version="brain.Event:2"}.
        let e = Event {
            wall_time: 1_700_000_000.0,
            what: Some(event::What::FileVersion("brain.Event:2".into())),
            ..Default::default()
        };
        let mut buf = Vec::new();
        write_record(&mut buf, &e.encode_to_vec()).unwrap();
        let expected: Vec<u8> = [
            "18 00 00 00 00 00 00 00 a3 7f 4b 22",
            "09 00 00 00 40 fc 54 d9 41 1a 0d 62 72 61 69 6e 2e 45 76 65 6e 74 3a 32",
            "ec ed 8f 9d",
        ]
        .join(" ")
        .split(' ')
        .map(|h| u8::from_str_radix(h, 16).unwrap())
        .collect();
        assert_eq!(buf, expected);
    }

    #[test]
    fn write_then_read_and_corruption_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = EventWriter::create(dir.path()).unwrap();
        w.add_scalar("loss", 0.5, 3).unwrap();
        w.add_graph(&GraphDef::default(), 0).unwrap();
        let path = w.path().to_path_buf();
        drop(w);
        assert!(path.file_name().unwrap().to_string_lossy().starts_with("events.out.tfevents."));
        let events = read_events(&path).unwrap();
        assert_eq!(events.len(), 3);
        assert_eq!(events[0].what, Some(event::What::FileVersion("brain.Event:2".into())));
        let Some(event::What::Summary(s)) = &events[1].what else { panic!("{:?}", events[1]) };
        assert_eq!((s.value[0].tag.as_str(), scalar_value(&s.value[0]), events[1].step), ("loss", Some(0.5), 3));
        let bytes = std::fs::read(&path).unwrap();
        // Truncated anywhere inside a record: an error naming the file and offset.
        for cut in [bytes.len() - 1, bytes.len() - 5, 13, 3] {
            let bad = dir.path().join(format!("cut{cut}"));
            std::fs::write(&bad, &bytes[..cut]).unwrap();
            let e = read_events(&bad).unwrap_err().to_string();
            assert!(e.contains(&format!("cut{cut}")) && (e.contains("truncated") || e.contains("remain")), "{e}");
        }
        // A flipped data byte or length byte: a CRC error.
        for at in [20, 2] {
            let mut b = bytes.clone();
            b[at] ^= 0x40;
            let bad = dir.path().join(format!("flip{at}"));
            std::fs::write(&bad, &b).unwrap();
            let e = read_events(&bad).unwrap_err().to_string();
            assert!(e.contains("CRC mismatch"), "{e}");
        }
        // A huge declared length is refused before allocating.
        let mut b = Vec::new();
        let len = (1u64 << 60).to_le_bytes();
        b.extend_from_slice(&len);
        b.extend_from_slice(&crate::crc32c::masked_crc32c(&len).to_le_bytes());
        let bad = dir.path().join("huge");
        std::fs::write(&bad, &b).unwrap();
        assert!(read_events(&bad).unwrap_err().to_string().contains("remain"));
    }
}
