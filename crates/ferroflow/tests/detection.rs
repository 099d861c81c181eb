//! Detection post-processing and indexing ops against TensorFlow
//! (`scripts/make_detection_fixtures.py` → `fixtures/detection/`): non-max suppression V3, V4,
//! V5 (soft-NMS), combined NMS,
//! CropAndResize, TopKV2, Where, GatherNd (batch_dims, int64 indices), ScatterNd,
//! TensorScatter*, and SSD/RetinaNet-style post-processing end to end — each frozen graph run
//! with 1 and 2 intra-op threads, optimizer on and off. Selections (indices, kept boxes and
//! scores) are bit-identical; computed floats within the manifest's tolerances.
use std::path::{Path, PathBuf};

use ferroflow::graph::Attrs;
use ferroflow::ops::RawOps;
use ferroflow::prelude::*;
use ferroflow::proto::attr;
use ferroflow::tensor::npy;
use ferroflow::testing::{compare, read_manifest};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/detection")
}

fn run(name: &str, rtol: f64, atol: f64) {
    let d = dir();
    let graph = ferroflow::load_graph(&d.join(format!("{name}.pb"))).unwrap();
    let inputs = npy::read_npz(&d.join(format!("{name}.inputs.npz"))).unwrap();
    let expected = npy::read_npz(&d.join(format!("{name}.expected.npz"))).unwrap();
    let feeds: Vec<(&str, Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let fetches: Vec<&str> = expected.iter().map(|(n, _)| n.as_str()).collect();
    for (threads, optimize) in [(1, true), (2, true), (1, false), (2, false)] {
        let mut opts = SessionOptions::default().with_inter_op_threads(threads).with_intra_op_threads(threads);
        opts.optimizer.enabled = optimize;
        let sess = Session::new(graph.clone(), opts).unwrap();
        let got = sess.run(&feeds, &fetches, &[]).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut worst = 0f64;
        for ((out, want), got) in expected.iter().zip(&got) {
            let d = compare(got, want, rtol, atol)
                .unwrap_or_else(|e| panic!("{name} {out} (threads {threads}, optimizer {optimize}): {e}"));
            worst = worst.max(d);
        }
        eprintln!("{name}: threads {threads}, optimizer {optimize}: {} outputs, max |diff| {worst:e}", got.len());
    }
}

fn fixture(name: &str) {
    let fx = read_manifest(&dir().join("MANIFEST")).unwrap();
    let f = fx.iter().find(|f| f.name == name).unwrap_or_else(|| panic!("{name} is not in the MANIFEST"));
    run(&f.name, f.rtol, f.atol);
}

#[test]
fn every_fixture_is_tested() {
    let tested = [
        "nms_v3",
        "nms_v4_v5",
        "nms_padded",
        "combined_nms",
        "crop_and_resize",
        "crop_and_resize_grad",
        "cumulative",
        "topk_where_gather",
        "scatter",
        "ssd_postprocess",
        "retinanet_postprocess",
    ];
    for f in read_manifest(&dir().join("MANIFEST")).unwrap() {
        assert!(tested.contains(&f.name.as_str()), "{} has no test", f.name);
    }
}

#[test]
fn non_max_suppression_v3_selects_tensorflows_boxes() {
    fixture("nms_v3");
}

#[test]
fn non_max_suppression_v4_v5_and_soft_nms_match_tensorflow() {
    fixture("nms_v4_v5");
}

/// `tf.image.non_max_suppression_padded`: TensorFlow 2's tiled algorithm written in ordinary
/// ops (a lowered while loop, `GatherV2` with `batch_dims`).
#[test]
fn padded_non_max_suppression_matches_tensorflow() {
    fixture("nms_padded");
}

#[test]
fn combined_non_max_suppression_matches_tensorflow_with_ties() {
    fixture("combined_nms");
}

#[test]
fn crop_and_resize_matches_tensorflow() {
    fixture("crop_and_resize");
}

/// TensorFlow's CropAndResizeGradImage/GradBoxes kernels (its own gradient graph), and
/// ferroflow's gradient of CropAndResize built by autodiff on the same inputs: both give
/// TensorFlow's image and box gradients.
#[test]
fn crop_and_resize_gradients_match_tensorflow() {
    fixture("crop_and_resize_grad");
    let d = dir();
    let inputs: std::collections::HashMap<String, Tensor> =
        npy::read_npz(&d.join("crop_and_resize_grad.inputs.npz")).unwrap().into_iter().collect();
    let expected = npy::read_npz(&d.join("crop_and_resize_grad.expected.npz")).unwrap();
    let s = Scope::new();
    let feed = |n: &str| {
        let t = &inputs[&format!("{n}:0")];
        s.with_name(n).placeholder(t.dtype(), &Shape::known(t.dims())).unwrap()
    };
    let (img, bx, ind, w) = (feed("img"), feed("bx"), feed("ind"), feed("w"));
    let crop = |size: [i32; 2], method: &str, w: Output| {
        let size = s.constant_from(&[2], &size).unwrap();
        let mut a = Attrs::new();
        a.insert("T".into(), attr::dtype(DType::Float));
        a.insert("method".into(), attr::string(method));
        a.insert("extrapolation_value".into(), attr::float(0.0));
        let c = s.add_op("CropAndResize", "crop", &[img, bx, ind, size], &[], a).unwrap();
        let prod = s.mul(Output { node: c, index: 0 }, w).unwrap();
        s.reduce("Sum", prod, &[0, 1, 2, 3], false).unwrap()
    };
    let begin = s.constant_from(&[4], &[0i32, 0, 0, 0]).unwrap();
    let size = s.constant_from(&[4], &[-1i32, 1, 1, -1]).unwrap();
    let w11 = s.slice(w, begin, size).unwrap();
    let (a, b, c) = (crop([4, 3], "bilinear", w), crop([1, 1], "bilinear", w11), crop([4, 3], "nearest", w));
    let ga = ferroflow::autodiff::gradients(&s, &[a], &[img, bx], None).unwrap();
    let gb = ferroflow::autodiff::gradients(&s, &[b], &[img, bx], None).unwrap();
    let gc = ferroflow::autodiff::gradients(&s, &[c], &[img], None).unwrap();
    let grads: Vec<Output> = ga.into_iter().chain(gb).chain(gc).map(Option::unwrap).collect();
    let names: Vec<String> = grads.iter().map(|g| s.with_graph(|gr| gr.output_name(*g))).collect();
    let fetches: Vec<&str> = names.iter().map(String::as_str).collect();
    let feeds: Vec<(&str, Tensor)> =
        ["img:0", "bx:0", "ind:0", "w:0"].iter().map(|n| (*n, inputs[*n].clone())).collect();
    let sess = Session::new(s.graph(), SessionOptions::default()).unwrap();
    let got = sess.run(&feeds, &fetches, &[]).unwrap();
    for ((name, want), got) in expected.iter().zip(&got) {
        compare(got, want, 1e-5, 1e-5).unwrap_or_else(|e| panic!("autodiff {name}: {e}"));
    }
}

/// Cumsum and Cumprod in every mode, and TensorFlow's gradient of a product over an axis with
/// zeros; then ferroflow's own gradient of the same product (autodiff) against TensorFlow's.
#[test]
fn cumulative_ops_and_the_product_s_gradient_match_tensorflow() {
    fixture("cumulative");
    let d = dir();
    let inputs = npy::read_npz(&d.join("cumulative.inputs.npz")).unwrap();
    let expected = npy::read_npz(&d.join("cumulative.expected.npz")).unwrap();
    let x_val = inputs[0].1.clone();
    let s = Scope::new();
    let x = s.with_name("x").placeholder(DType::Float, &Shape::known(x_val.dims())).unwrap();
    let p = s.reduce("Prod", x, &[1], false).unwrap();
    let w: Vec<f32> = (0..12).map(|i| -1.0 + 2.0 * i as f32 / 11.0).collect();
    let w = s.constant(&Tensor::from_vec(&[3, 4], w).unwrap()).unwrap();
    let loss = s.reduce("Sum", s.mul(p, w).unwrap(), &[0, 1], false).unwrap();
    let g = ferroflow::autodiff::gradients(&s, &[loss], &[x], None).unwrap()[0].unwrap();
    let sess = Session::new(s.graph(), SessionOptions::default()).unwrap();
    let got = sess.run(&[("x:0", x_val)], &[&s.with_graph(|gr| gr.output_name(g))], &[]).unwrap();
    let (name, want) = expected.last().unwrap();
    compare(&got[0], want, 1e-5, 1e-6).unwrap_or_else(|e| panic!("autodiff's Prod gradient vs {name}: {e}"));
}

#[test]
fn top_k_where_and_gather_nd_match_tensorflow() {
    fixture("topk_where_gather");
}

#[test]
fn scatter_nd_and_tensor_scatters_match_tensorflow() {
    fixture("scatter");
}

#[test]
fn ssd_post_processing_matches_tensorflow_end_to_end() {
    fixture("ssd_postprocess");
}

#[test]
fn retinanet_post_processing_matches_tensorflow_end_to_end() {
    fixture("retinanet_postprocess");
}

/// A graph `NonMaxSuppressionV5` node named "nms" over fed boxes and scores with constant
/// thresholds; runs it and returns the error text.
fn nms_error(boxes: Tensor, max_output: i32, iou: f32, sigma: f32) -> String {
    let s = Scope::new();
    let b = s.with_name("boxes").placeholder(DType::Float, &Shape::unknown()).unwrap();
    let sc = s.with_name("scores").placeholder(DType::Float, &Shape::unknown()).unwrap();
    let m = s.scalar(max_output).unwrap();
    let (i, t, g) = (s.scalar(iou).unwrap(), s.scalar(0.1f32).unwrap(), s.scalar(sigma).unwrap());
    let mut a = Attrs::new();
    a.insert("T".into(), attr::dtype(DType::Float));
    s.add_op("NonMaxSuppressionV5", "nms", &[b, sc, m, i, t, g], &[], a).unwrap();
    let n = boxes.dims().first().copied().unwrap_or(1);
    let scores = Tensor::from_vec(&[n], vec![0.5f32; n]).unwrap();
    let sess = Session::new(s.graph(), SessionOptions::default()).unwrap();
    let err = sess.run(&[("boxes:0", boxes), ("scores:0", scores)], &["nms:0"], &[]).unwrap_err();
    err.to_string()
}

#[test]
fn bad_nms_inputs_are_errors_naming_the_node() {
    let boxes = || Tensor::from_vec(&[2, 4], vec![0f32, 0.0, 1.0, 1.0, 0.1, 0.1, 0.9, 0.9]).unwrap();
    for (err, want) in [
        (nms_error(boxes(), -1, 0.5, 0.0), "max_output_size must be non-negative"),
        (nms_error(boxes(), 3, 1.5, 0.0), "iou_threshold must be in [0, 1]"),
        (nms_error(boxes(), 3, -0.1, 0.0), "iou_threshold must be in [0, 1]"),
        (nms_error(boxes(), 3, 0.5, -1.0), "soft_nms_sigma must be >= 0"),
        (nms_error(Tensor::from_vec(&[2, 2, 2], vec![0f32; 8]).unwrap(), 3, 0.5, 0.0), "boxes must be [num_boxes, 4]"),
    ] {
        assert!(err.contains("nms") && err.contains(want), "{err:?} should name node 'nms' and say {want:?}");
    }
}

#[test]
fn bad_scatter_and_crop_inputs_are_errors_naming_the_node() {
    let s = Scope::new();
    let idx = s.with_name("idx").placeholder(DType::Int32, &Shape::unknown()).unwrap();
    let upd = s.constant_from(&[2], &[1f32, 2.0]).unwrap();
    let shape = s.constant_from(&[1], &[4i32]).unwrap();
    let mut a = Attrs::new();
    a.insert("T".into(), attr::dtype(DType::Float));
    a.insert("Tindices".into(), attr::dtype(DType::Int32));
    s.add_op("ScatterNd", "scatter", &[idx, upd, shape], &[], a).unwrap();
    let img = s.constant_from(&[1, 2, 2, 1], &[1f32, 2.0, 3.0, 4.0]).unwrap();
    let boxes = s.constant_from(&[1, 4], &[0f32, 0.0, 1.0, 1.0]).unwrap();
    let ind = s.with_name("ind").placeholder(DType::Int32, &Shape::unknown()).unwrap();
    let size = s.constant_from(&[2], &[2i32, 2]).unwrap();
    let mut a = Attrs::new();
    a.insert("T".into(), attr::dtype(DType::Float));
    s.add_op("CropAndResize", "crop", &[img, boxes, ind, size], &[], a).unwrap();
    let sess = Session::new(s.graph(), SessionOptions::default()).unwrap();
    let bad_index = Tensor::from_vec(&[2, 1], vec![1i32, 4]).unwrap();
    let err = sess.run(&[("idx:0", bad_index)], &["scatter:0"], &[]).unwrap_err().to_string();
    assert!(err.contains("scatter") && err.contains("does not index into shape"), "{err}");
    let err = sess.run(&[("ind:0", Tensor::from_vec(&[1], vec![3i32]).unwrap())], &["crop:0"], &[]).unwrap_err();
    let err = err.to_string();
    assert!(err.contains("crop") && err.contains("box_index has values outside [0, 1)"), "{err}");
}

/// A permutation that repeats an index, gradients of crops with a box index past the batch,
/// and a `ListDiff` of mismatched vectors are errors naming the node, not panics.
#[test]
fn bad_permutation_crop_gradient_and_list_diff_inputs_are_errors_naming_the_node() {
    let s = Scope::new();
    let p = s.with_name("p").placeholder(DType::Int32, &Shape::unknown()).unwrap();
    let mut a = Attrs::new();
    a.insert("T".into(), attr::dtype(DType::Int32));
    s.add_op("InvertPermutation", "invert", &[p], &[], a).unwrap();
    let g = s.constant_from(&[1, 2, 2, 1], &[1f32, 2.0, 3.0, 4.0]).unwrap();
    let boxes = s.constant_from(&[1, 4], &[0f32, 0.0, 1.0, 1.0]).unwrap();
    let ind = s.constant_from(&[1], &[5i32]).unwrap();
    let size = s.constant_from(&[4], &[1i32, 3, 3, 1]).unwrap();
    let mut a = Attrs::new();
    a.insert("T".into(), attr::dtype(DType::Float));
    s.add_op("CropAndResizeGradImage", "crop_grad", &[g, boxes, ind, size], &[], a).unwrap();
    let x = s.constant_from(&[2, 2], &[1i32, 2, 3, 4]).unwrap();
    let y = s.constant_from(&[1], &[2i32]).unwrap();
    let mut a = Attrs::new();
    a.insert("T".into(), attr::dtype(DType::Int32));
    s.add_op("ListDiff", "diff", &[x, y], &[], a).unwrap();
    let sess = Session::new(s.graph(), SessionOptions::default()).unwrap();
    let twice = Tensor::from_vec(&[3], vec![0i32, 2, 0]).unwrap();
    let err = sess.run(&[("p:0", twice)], &["invert:0"], &[]).unwrap_err().to_string();
    assert!(err.contains("invert") && err.contains("not a permutation"), "{err}");
    let err = sess.run(&[], &["crop_grad:0"], &[]).unwrap_err().to_string();
    assert!(err.contains("crop_grad") && err.contains("box_index has values outside [0, 1)"), "{err}");
    let err = sess.run(&[], &["diff:0"], &[]).unwrap_err().to_string();
    assert!(err.contains("diff") && err.contains("must be vectors"), "{err}");
}
