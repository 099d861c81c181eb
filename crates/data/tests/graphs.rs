//! Graphs in the pipeline: TensorFlow's frozen `placeholder(string) → ReadFile → DecodeJpeg →
//! resize` graph as a map function (serial and parallel, equal to TensorFlow's pixels), and a
//! Session graph (ours, and TensorFlow's `Iterator.from_structure` graph) that pulls batches
//! through `IteratorV2` + `IteratorGetNext` until the end of the data ("End of sequence", out
//! of range).
use std::path::{Path, PathBuf};

use ferroflow_data::{Budget, Dataset, GraphFunction, MapOptions};
use ferroflow_proto::GraphDef;
use ferroflow_runtime::{Session, SessionOptions};
use ferroflow_tensor::npy::read_npz;
use ferroflow_tensor::Tensor;
use prost::Message;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/data")
}

fn graph(text_or_file: Result<&str, &Path>) -> ferroflow_graph::Graph {
    let def: GraphDef = match text_or_file {
        Ok(text) => ferroflow_proto::parse_text(text, "test graph").unwrap(),
        Err(file) => GraphDef::decode(std::fs::read(file).unwrap().as_slice()).unwrap(),
    };
    ferroflow_ops::import_graph_def(&def).unwrap()
}

fn quiet() -> Budget {
    Budget::default().with_log(false)
}

#[test]
fn a_tensorflow_graph_is_a_map_function() {
    let jpeg = fixtures().join("flowers_tiny/daisy/daisy_00.jpg");
    let want = read_npz(&fixtures().join("resize_224.npz")).unwrap();
    let want = &want.iter().find(|(n, _)| n == "resized").unwrap().1;
    let paths: Vec<Vec<u8>> = vec![jpeg.to_string_lossy().into_owned().into_bytes(); 5];
    for parallel in [None, Some(2)] {
        let f =
            GraphFunction::new(graph(Err(&fixtures().join("read_decode_resize.pb"))), &["path:0"], &["out:0"]).unwrap();
        let options = MapOptions::default().with_num_parallel_calls(parallel);
        let ds: Dataset<Tensor> = Dataset::from_tensor_slices(Tensor::from_strings(&[5], paths.clone()).unwrap())
            .unwrap()
            .with_budget(quiet())
            .map_graph(f, &options);
        assert!(ds.describe().contains(if parallel.is_some() { "ParallelMap" } else { "Map" }));
        let out: Vec<Tensor> = ds.iter().unwrap().collect::<Result<_, _>>().unwrap();
        assert_eq!(out.len(), 5);
        for t in &out {
            assert_eq!(t.dims(), &[224, 224, 3]);
            let (a, b) = (t.as_slice::<f32>().unwrap(), want.as_slice::<f32>().unwrap());
            let diff = a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max);
            assert!(diff <= 1e-4, "max difference {diff}");
        }
    }
    // A missing file is the element's error, naming the file and the node.
    let f = GraphFunction::new(graph(Err(&fixtures().join("read_decode_resize.pb"))), &["path:0"], &["out:0"]).unwrap();
    let ds: Dataset<Tensor> =
        Dataset::from_tensors(Tensor::from_strings(&[], vec![b"/no/such/rose.jpg".to_vec()]).unwrap())
            .with_budget(quiet())
            .map_graph(f, &MapOptions::default());
    let e = ds.iter().unwrap().next().unwrap().unwrap_err();
    assert!(
        matches!(e, ferroflow_data::DataError::Element { cause: ferroflow_data::ElementCause::Graph(_), .. }),
        "{e:?}"
    );
    let e = e.to_string();
    assert!(e.contains("/no/such/rose.jpg") && e.contains("ReadFile"), "{e}");
    // A bad signature is an error when the function is made.
    let e = GraphFunction::new(graph(Err(&fixtures().join("read_decode_resize.pb"))), &["nope:0"], &["out:0"]);
    assert!(e.err().unwrap().to_string().contains("nope"));
}

const ITERATOR_GRAPH: &str = r#"
node { name: "it" op: "IteratorV2"
  attr { key: "shared_name" value { s: "train" } }
  attr { key: "container" value { s: "" } }
  attr { key: "output_types" value { list { type: DT_FLOAT type: DT_INT32 } } }
  attr { key: "output_shapes" value { list { shape { dim { size: -1 } dim { size: 2 } } shape { dim { size: -1 } } } } } }
node { name: "next" op: "IteratorGetNext" input: "it"
  attr { key: "output_types" value { list { type: DT_FLOAT type: DT_INT32 } } }
  attr { key: "output_shapes" value { list { shape { dim { size: -1 } dim { size: 2 } } shape { dim { size: -1 } } } } } }
node { name: "axis" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
  attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 2 } } int_val: 0 int_val: 1 } } } }
node { name: "total" op: "Sum" input: "next" input: "axis"
  attr { key: "T" value { type: DT_FLOAT } } attr { key: "Tidx" value { type: DT_INT32 } }
  attr { key: "keep_dims" value { b: false } } }
"#;

#[test]
fn a_session_graph_pulls_batches_until_the_end_of_the_data() {
    let g = graph(Ok(ITERATOR_GRAPH));
    let sess = Session::new(g, SessionOptions::default()).unwrap();
    // Before a dataset is attached the error says what to do.
    let e = sess.run(&[], &["total:0"], &[]).unwrap_err().to_string();
    assert!(e.contains("attach") && e.contains("train"), "{e}");
    let x = Tensor::from_vec(&[5, 2], (0..10).map(|v| v as f32).collect()).unwrap();
    let y = Tensor::from_vec(&[5], vec![0i32, 1, 2, 3, 4]).unwrap();
    let ds = Dataset::from_tensor_slices((x, y)).unwrap().with_budget(quiet()).batch(2, false).unwrap();
    for _epoch in 0..2 {
        ds.attach_iterator(sess.resources(), "train").unwrap();
        let mut totals = Vec::new();
        let mut labels = Vec::new();
        loop {
            match sess.run(&[], &["total:0", "next:1"], &[]) {
                Ok(out) => {
                    totals.push(out[0].scalar_value::<f32>().unwrap());
                    labels.extend_from_slice(out[1].as_slice::<i32>().unwrap());
                }
                Err(e) if e.is_out_of_range() => {
                    assert!(e.to_string().contains("End of sequence"), "{e}");
                    break;
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(totals, vec![6.0, 22.0, 17.0]);
        assert_eq!(labels, vec![0, 1, 2, 3, 4]);
    }
    // TensorFlow's own graph: Iterator.from_structure(shared_name="train") -> get_next -> sum.
    let tf_graph = Session::new(graph(Err(&fixtures().join("iterator.pb"))), SessionOptions::default()).unwrap();
    ds.attach_iterator(tf_graph.resources(), "train").unwrap();
    let mut totals = Vec::new();
    loop {
        match tf_graph.run(&[], &["total:0"], &[]) {
            Ok(out) => totals.push(out[0].scalar_value::<f32>().unwrap()),
            Err(e) if e.is_out_of_range() => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(totals, vec![6.0, 22.0, 17.0]);
    let handle = tf_graph.run(&[], &["IteratorToStringHandle:0"], &[]).unwrap();
    assert_eq!(handle[0].as_strings().unwrap()[0], b"localhost/train");
    // Components of the wrong dtype are named.
    let bad = Dataset::from_tensor_slices((
        Tensor::from_vec(&[2, 2], vec![0i32; 4]).unwrap(),
        Tensor::from_vec(&[2], vec![0i32; 2]).unwrap(),
    ))
    .unwrap()
    .batch(2, false)
    .unwrap();
    bad.attach_iterator(sess.resources(), "train").unwrap();
    let e = sess.run(&[], &["total:0"], &[]).unwrap_err();
    assert!(!e.is_out_of_range());
    assert!(e.to_string().contains("component 0 is int32") && e.to_string().contains("float"), "{e}");
}
