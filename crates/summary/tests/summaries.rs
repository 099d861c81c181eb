//! Summaries against TensorFlow: histograms equal the `HistogramProto` TensorFlow's
//! `HistogramSummary` op makes of the same values (fixtures/summary/, from
//! scripts/make_summary_fixtures.py); the writer's scalar, histogram, image, text and graph
//! events read back; one writer per run directory.
use std::path::Path;

use ferroflow_proto::{summary, HistogramProto, Message};
use ferroflow_summary::histogram::histogram;
use ferroflow_summary::{read_events, SummaryWriter};
use ferroflow_tensor::npy::read_npz;

fn fixture() -> std::collections::BTreeMap<String, ferroflow_tensor::Tensor> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/summary/histogram.npz");
    read_npz(&p).unwrap().into_iter().collect()
}

fn same(a: &HistogramProto, b: &HistogramProto) -> bool {
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    [a.min, a.max, a.num, a.sum, a.sum_squares].map(f64::to_bits)
        == [b.min, b.max, b.num, b.sum, b.sum_squares].map(f64::to_bits)
        && bits(&a.bucket_limit) == bits(&b.bucket_limit)
        && bits(&a.bucket) == bits(&b.bucket)
}

#[test]
fn histograms_equal_tensorflow_s() {
    let f = fixture();
    let values = f["values"].as_slice::<f32>().unwrap();
    let tf = HistogramProto::decode(f["proto"].as_slice::<u8>().unwrap()).unwrap();
    let ours = histogram(values.iter().map(|&v| f64::from(v))).unwrap();
    assert!(same(&ours, &tf), "ours {ours:?}\nTensorFlow's {tf:?}");
    assert!(tf.bucket.len() > 20, "a real spread of buckets: {}", tf.bucket.len());
    let tf_empty = HistogramProto::decode(f["empty_proto"].as_slice::<u8>().unwrap()).unwrap();
    assert!(same(&histogram(std::iter::empty()).unwrap(), &tf_empty), "{tf_empty:?}");
    let e = histogram([1.0, f64::NAN]).unwrap_err();
    assert!(matches!(e, ferroflow_summary::SummaryError::NotFinite(v) if v.is_nan()), "{e:?}");
    assert!(e.to_string().contains("NaN"), "{e}");
}

#[test]
fn the_writer_writes_every_kind_and_one_writer_per_directory() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("train");
    let mut w = SummaryWriter::create(&run).unwrap();
    let e = SummaryWriter::create(&run).err().unwrap().to_string();
    assert!(e.contains("already writes this run directory"), "{e}");
    w.scalar("loss", 0.5, 1).unwrap();
    w.histogram("dense/kernel", &[0.1, -0.2, 0.3], 1).unwrap();
    let pixels: Vec<u8> = (0..4 * 5 * 3).map(|i| (i * 7) as u8).collect();
    w.image("batch", &pixels, [4, 5, 3], 1).unwrap();
    w.text("pipeline", "Root::Prefetch::Batch", 1).unwrap();
    let e = w.histogram("bad", &[f32::NAN], 2).unwrap_err().to_string();
    assert!(e.contains("'bad'"), "{e}");
    let e = w.image("bad", &pixels, [4, 5, 2], 2).unwrap_err().to_string();
    assert!(e.contains("'bad'") && e.contains("channels"), "{e}");
    let path = w.path().unwrap().to_path_buf();
    w.close().unwrap();
    assert!(w.scalar("x", 1.0, 3).is_err());
    let again = SummaryWriter::create(&run).unwrap();
    drop(again);

    let events = read_events(&path).unwrap();
    let values: Vec<&summary::Value> = events
        .iter()
        .filter_map(|e| match &e.what {
            Some(ferroflow_proto::event::What::Summary(s)) => Some(&s.value[0]),
            _ => None,
        })
        .collect();
    let tags: Vec<&str> = values.iter().map(|v| v.tag.as_str()).collect();
    assert_eq!(tags, ["loss", "dense/kernel", "batch", "pipeline"]);
    let plugins: Vec<&str> = values
        .iter()
        .map(|v| v.metadata.as_ref().unwrap().plugin_data.as_ref().unwrap().plugin_name.as_str())
        .collect();
    assert_eq!(plugins, ["scalars", "histograms", "images", "text"]);
    match &values[2].value {
        Some(summary::value::Value::Image(img)) => {
            let opts = ferroflow_codec::png::PngDecodeOptions::default().with_channels(3);
            let (px, shape) = ferroflow_codec::png::decode_png(&img.encoded_image_string, &opts).unwrap();
            assert_eq!(shape, [4, 5, 3]);
            assert!(matches!(px, ferroflow_codec::png::PngPixels::U8(ref v) if *v == pixels));
        }
        other => panic!("{other:?}"),
    }
    match &values[1].value {
        Some(summary::value::Value::Histo(h)) => assert_eq!(h.num, 3.0),
        other => panic!("{other:?}"),
    }
}
