//! The readers of user files as functions of arbitrary bytes: the entry points of the
//! libFuzzer targets (`fuzz/fuzz_targets/<target>.rs`, one line each) and of the test that
//! replays every crash they found (`tests/fuzz_regressions.rs`, over
//! `fuzz/regressions/<target>/*`).
//!
//! Each function runs a reader the way the command line does — a `.pb` is decoded and
//! imported, a `.meta` read and imported, a checkpoint's tensors read — and discards the
//! result. Any input must end in `Ok` or an error; a panic, a hang or an allocation that
//! escapes the memory limit is a bug. The readers run under [`MEMORY_LIMIT`], so a size
//! taken from the data that is checked against the limit fails there, well below the fuzzer's
//! own allocation limit (2 GiB in `scripts/fuzz_all.sh`), which catches the unchecked ones.
//!
//! The errors of the readers themselves (not of graph import, which names nodes) are also
//! checked to be one line of at most [`MAX_ERROR_BYTES`]: a hostile file cannot make a
//! message kilobytes long.
use std::fmt::Display;
use std::io::Cursor;
use std::path::{Path, PathBuf};

use crate::{checkpoint, codec, data, graph, kernels, ops, profiler, proto, summary, tensor, train};

/// The memory limit the readers run under ([`tensor::limit`]).
pub const MEMORY_LIMIT: usize = 256 << 20;

/// The longest error message a reader may give (its file name here is a few bytes).
pub const MAX_ERROR_BYTES: usize = 512;

/// A fuzz target: its name (the directory of its corpus and regressions) and its function.
pub type Target = (&'static str, fn(&[u8]));

/// Every target, by name.
pub const TARGETS: &[Target] = &[
    ("graph_def_binary", graph_def_binary),
    ("graph_def_text", graph_def_text),
    ("meta_graph", meta_graph),
    ("npy", npy),
    ("npz", npz),
    ("event_file", event_file),
    ("bundle_index", bundle_index),
    ("checkpoint_data", checkpoint_data),
    ("checkpoint_bundle", checkpoint_bundle),
    ("mnist_idx", mnist_idx),
    ("jpeg", jpeg),
    ("png", png),
    ("tfrecord_examples", tfrecord_examples),
    ("xspace", xspace),
    ("saved_model", saved_model),
    ("keras_archive", keras_archive),
    ("keras_config", keras_config),
    ("hdf5", hdf5),
];

/// The target named `name`.
pub fn target(name: &str) -> Option<fn(&[u8])> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|&(_, f)| f)
}

/// Panics unless `e` is one line of at most [`MAX_ERROR_BYTES`].
fn check_error(e: &impl Display) {
    let text = e.to_string();
    assert!(
        text.len() <= MAX_ERROR_BYTES && !text.contains('\n'),
        "an error message of {} bytes (at most {MAX_ERROR_BYTES}, one line): {}",
        text.len(),
        text.chars().take(2000).collect::<String>()
    );
}

/// `r`'s value, or `None` after checking its error.
fn ok<T, E: Display>(r: Result<T, E>) -> Option<T> {
    r.map_err(|e| check_error(&e)).ok()
}

/// A binary `.pb` GraphDef: decoded and imported (op signatures, validation, shape inference),
/// as `ferroflow run`/`optimize` load one.
pub fn graph_def_binary(data: &[u8]) {
    let _limit = tensor::limit::scoped(MEMORY_LIMIT);
    if let Some(def) = ok(graph::io::parse_graph_def(data, false, "fuzz.pb")) {
        let _ = ops::import_graph_def(&def);
    }
}

/// A text-format `.pbtxt` GraphDef: parsed and imported.
pub fn graph_def_text(data: &[u8]) {
    let _limit = tensor::limit::scoped(MEMORY_LIMIT);
    if let Some(def) = ok(graph::io::parse_graph_def(data, true, "fuzz.pbtxt")) {
        let _ = ops::import_graph_def(&def);
    }
}

/// A `.meta` MetaGraphDef (binary, or text as a fallback): read, imported, and imported again
/// into the result under a scope (the demo's `import_meta_graph(..., import_scope=...)`),
/// with its saver and collections.
pub fn meta_graph(data: &[u8]) {
    let _limit = tensor::limit::scoped(MEMORY_LIMIT);
    let Some(meta) = ok(train::meta_graph::parse_meta_graph(data, "fuzz.meta")) else { return };
    let Ok(imported) = train::meta_graph::import_meta_graph(&meta, None, "") else { return };
    for key in meta.collection_def.keys() {
        let _ = imported.collection(key);
    }
    let _ = train::meta_graph::import_meta_graph(&meta, Some(&imported.graph), "restored");
}

/// A SavedModel's `saved_model.pb`: decoded, listed as `ferroflow inspect DIR` lists it, and
/// for each meta graph its signatures read, the ops ferroflow cannot run found, its calls
/// inlined (as `ferroflow convert DIR` does before freezing) and the meta graph imported.
pub fn saved_model(data: &[u8]) {
    let _limit = tensor::limit::scoped(MEMORY_LIMIT);
    let Some(model) = ok(proto::decode::<proto::SavedModel>(data, "saved_model.pb")) else { return };
    let _ = train::saved_model_show::show_all_of(&model);
    for meta in &model.meta_graphs {
        let _ = train::saved_model::signatures_of(meta, Path::new("fuzz"));
        if let Some(graph) = &meta.graph_def {
            let _ = crate::runtime::support::missing_ops(graph, &[]);
            let _ = crate::runtime::support::inline_calls(graph);
        }
        let _ = train::meta_graph::import_meta_graph(meta, None, "");
    }
}

/// A `.npy` file.
pub fn npy(data: &[u8]) {
    let _limit = tensor::limit::scoped(MEMORY_LIMIT);
    ok(tensor::npy::read_npy_bytes(data, "fuzz.npy"));
    ok(tensor::npy::read_npy_from(data, "fuzz.npy", None));
}

/// A `.npz` archive (every member).
pub fn npz(data: &[u8]) {
    let _limit = tensor::limit::scoped(MEMORY_LIMIT);
    ok(tensor::npy::read_npz_from(Cursor::new(data), "fuzz.npz"));
}

/// Keras models are built under this many graph nodes at most in the fuzz targets (a config
/// of a few kilobytes can describe a model of millions of nodes; building one is not a
/// defect, only slow).
const MAX_KERAS_LAYERS: usize = 2_000;

fn keras_layers(m: &crate::keras::ModelSpec) -> usize {
    m.layers.iter().map(|l| 1 + l.model.as_ref().map_or(0, |inner| keras_layers(inner))).sum()
}

/// Builds a Keras model read from hostile bytes in inference mode (its weights assigned and
/// checked), when it is small enough to build quickly.
fn build_keras(m: &crate::keras::KerasModel) {
    if keras_layers(&m.spec) <= MAX_KERAS_LAYERS {
        if let Err(e) = m.predictor(crate::runtime::SessionOptions::default()) {
            check_error(&e);
        }
    }
}

/// A `.keras` file: the zip archive, its `config.json` and `metadata.json`, the HDF5 weights
/// (Keras 3's layout), then the model built with them.
pub fn keras_archive(data: &[u8]) {
    let _limit = tensor::limit::scoped(MEMORY_LIMIT);
    if let Some(m) = ok(crate::keras::KerasModel::from_bytes(data.to_vec(), Path::new("fuzz.keras"))) {
        build_keras(&m);
    }
}

/// A Keras model config (`config.json`, or Keras 2's `model_config`): parsed, then the model
/// built with its initializers' values.
pub fn keras_config(data: &[u8]) {
    let _limit = tensor::limit::scoped(MEMORY_LIMIT);
    if let Some(m) = ok(crate::keras::KerasModel::from_config_json(data)) {
        build_keras(&m);
    }
}

/// An HDF5 file: read whole (groups, attributes, datasets), then taken as Keras 2 weights
/// (`layer_names`, `weight_names`) against an empty model.
pub fn hdf5(data: &[u8]) {
    let _limit = tensor::limit::scoped(MEMORY_LIMIT);
    if let Some(root) = ok(crate::keras::h5::read(data, "fuzz.h5")) {
        for (_, a) in &root.attrs {
            let _ = a.strings();
        }
        let empty =
            br#"{"class_name": "Sequential", "config": {"name": "m", "layers": [], "build_input_shape": [null, 1]}}"#;
        if let Some(m) = ok(crate::keras::KerasModel::from_config_json(empty)) {
            let _ =
                crate::keras::weights::read_legacy(root.group("model_weights").unwrap_or(&root), &m.spec, "fuzz.h5");
            let _ = crate::keras::weights::read_keras3(&root, &m.spec, "fuzz.h5");
        }
    }
}

/// A TensorBoard event file: its TFRecord framing read as a file (size known) and as a
/// stream (size unknown), each event decoded with what it carries (graph, run metadata,
/// meta graph, scalar values). The bytes are also framed as the payload of one record with
/// valid CRCs, so that mutations reach the events and what they carry (raw mutations of an
/// event file almost never pass its CRCs).
pub fn event_file(data: &[u8]) {
    let _limit = tensor::limit::scoped(MEMORY_LIMIT);
    for len in [Some(data.len() as u64), None] {
        read_events(data, len);
    }
    let mut framed = Vec::with_capacity(data.len() + 16);
    if summary::record::write_record(&mut framed, data).is_ok() {
        read_events(&framed, Some(framed.len() as u64));
    }
}

fn read_events(data: &[u8], len: Option<u64>) {
    use proto::event::What;
    for event in summary::EventReader::new(data, "fuzz.tfevents", len) {
        let Some(event) = ok(event) else { break };
        match event.what {
            Some(What::GraphDef(bytes)) => {
                ok(proto::decode::<proto::GraphDef>(&bytes, "graph_def"));
            }
            Some(What::MetaGraphDef(bytes)) => {
                ok(proto::decode::<proto::MetaGraphDef>(&bytes, "meta_graph_def"));
            }
            Some(What::TaggedRunMetadata(t)) => {
                ok(proto::decode::<proto::RunMetadata>(&t.run_metadata, "run_metadata"));
            }
            Some(What::Summary(s)) => {
                for v in &s.value {
                    let _ = summary::scalar_value(v);
                    if let Some(proto::summary::value::Value::Tensor(t)) = &v.value {
                        let _ = proto::convert::tensor_from_proto(t);
                    }
                }
            }
            _ => {}
        }
    }
}

/// A checkpoint's `.index`: the SSTable layer (footer, handles, block trailers and CRCs,
/// restart arrays, prefix-compressed entries) and the bundle layer (header, entries).
pub fn bundle_index(data: &[u8]) {
    let _limit = tensor::limit::scoped(MEMORY_LIMIT);
    ok(checkpoint::table::read(data));
    ok(checkpoint::BundleReader::from_index_bytes(Path::new("fuzz"), data));
}

/// The `.index` of `fixtures/tf/checkpoints/mixed` (TensorFlow's: floats, ints, bools,
/// strings, scalars and empty tensors).
const MIXED_INDEX: &[u8] = include_bytes!("../data/mixed.index");

/// A directory of its own for one checkpoint (tmpfs where there is one), removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> std::io::Result<Scratch> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let shm = Path::new("/dev/shm");
        let base = if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() };
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("ferroflow-fuzz-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Reads every tensor that `index` names from a data file holding `data` (the first shard;
/// the others are missing).
fn read_bundle(index: &[u8], data: &[u8]) {
    let Ok(dir) = Scratch::new() else { return };
    let prefix = dir.0.join("ckpt");
    let Some(reader) = ok(checkpoint::BundleReader::from_index_bytes(&prefix, index)) else { return };
    let shards = reader.header().num_shards;
    if std::fs::write(checkpoint::data_path(&prefix, 0, shards), data).is_err() {
        return;
    }
    for name in reader.entries().keys() {
        ok(reader.read(name));
    }
}

/// A checkpoint's data file: every tensor of a fixed, valid `.index` (TensorFlow's
/// `mixed` fixture) read from the fuzzed bytes (offsets, sizes, CRCs, string lengths).
pub fn checkpoint_data(data: &[u8]) {
    let _limit = tensor::limit::scoped(MEMORY_LIMIT);
    read_bundle(MIXED_INDEX, data);
}

/// A whole checkpoint: a 2-byte little-endian length, that many bytes of `.index`, and the
/// data file; every tensor the index names is read (hostile entries against real data).
pub fn checkpoint_bundle(data: &[u8]) {
    let _limit = tensor::limit::scoped(MEMORY_LIMIT);
    let Some((len, rest)) = data.split_first_chunk::<2>() else { return };
    let len = (u16::from_le_bytes(*len) as usize).min(rest.len());
    let (index, data) = rest.split_at(len);
    read_bundle(index, data);
}

/// An MNIST IDX file, gzipped or not; images (`[n, rows, cols]`) are converted to the float
/// tensor training uses.
pub fn mnist_idx(data: &[u8]) {
    let _limit = tensor::limit::scoped(MEMORY_LIMIT);
    let path = Path::new("fuzz-idx3-ubyte");
    if let Some((dims, bytes)) = ok(train::mnist::read_idx_bytes(data, path)) {
        if dims.len() == 3 {
            ok(train::mnist::images_tensor(&dims, &bytes, path));
        }
    }
}

/// A JPEG: its header shape, and decoded as `DecodeJpeg` does with TensorFlow's defaults,
/// as gray, at 1/4 scale with the accurate IDCT, with truncated-file recovery, and through
/// `DecodeImage` to float.
pub fn jpeg(data: &[u8]) {
    use codec::jpeg::{DctMethod, DecodeOptions};
    let _limit = tensor::limit::scoped(MEMORY_LIMIT);
    ok(codec::jpeg::jpeg_shape(data));
    let d = DecodeOptions::default();
    for opts in [
        d.clone(),
        d.clone().with_channels(1),
        d.clone().with_ratio(4).with_dct_method(DctMethod::IntegerAccurate).with_fancy_upscaling(false),
        d.with_channels(3).with_try_recover_truncated(true).with_acceptable_fraction(0.5),
    ] {
        ok(kernels::image::decode_jpeg(data, &opts));
    }
    ok(kernels::image::decode_image(data, 0, tensor::DType::Float, None));
}

/// A PNG, decoded as `DecodePng` with every channel count, to uint8 and uint16.
pub fn png(data: &[u8]) {
    let _limit = tensor::limit::scoped(MEMORY_LIMIT);
    for channels in [0, 1, 3, 4] {
        for dtype in [tensor::DType::UInt8, tensor::DType::UInt16] {
            ok(kernels::image::decode_png(data, channels, dtype, None));
        }
    }
}

/// A TFRecord file of `tf.train.Example`s: every record read (as `TFRecordDataset` does) and
/// parsed with fixed-length, defaulted and variable-length features of each type; the bytes
/// are also parsed as one Example.
pub fn tfrecord_examples(data: &[u8]) {
    use data::example::{parse_example, parse_single_example, FeatureSpec};
    use tensor::{DType, Tensor};
    let _limit = tensor::limit::scoped(MEMORY_LIMIT);
    let mut spec = std::collections::BTreeMap::new();
    spec.insert("x".to_string(), FeatureSpec::Fixed { dtype: DType::Float, shape: vec![3], default: None });
    spec.insert(
        "label".to_string(),
        FeatureSpec::Fixed { dtype: DType::Int64, shape: vec![], default: Some(Tensor::scalar(0i64)) },
    );
    spec.insert("name".to_string(), FeatureSpec::Var { dtype: DType::String });
    spec.insert("tags".to_string(), FeatureSpec::Var { dtype: DType::Int64 });
    ok(parse_single_example(data, &spec));
    let mut reader = summary::record::RecordReader::new(data, "fuzz.tfrecord", Some(data.len() as u64));
    let mut records = Vec::new();
    while let Some(r) = ok(reader.next_record()).flatten() {
        ok(parse_single_example(&r, &spec));
        records.push(r);
    }
    if let Some(batch) = ok(Tensor::from_strings(&[records.len()], records)) {
        ok(parse_example(&batch, &spec));
    }
}

/// A profile (`.xplane.pb`, ferroflow's or TensorFlow's), as `ferroflow profile` reads one:
/// decoded, analysed into the report (printed, and compared with itself) and exported as
/// Chrome trace JSON.
pub fn xspace(data: &[u8]) {
    let _limit = tensor::limit::scoped(MEMORY_LIMIT);
    let Some(space) = ok(profiler::xspace::decode_xspace(data, Path::new("fuzz.xplane.pb"))) else { return };
    if let Some(report) = ok(profiler::report::analyze(&space)) {
        let _ = report.to_string();
        let _ = profiler::report::compare(&report, &report);
    }
    let _ = profiler::chrome::write_xspace_chrome_trace(&space, &mut std::io::sink());
}
