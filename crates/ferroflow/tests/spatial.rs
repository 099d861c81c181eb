//! Keras 3's spatial layers (1-D and 3-D convolutions and pools, transposed, separable,
//! dilated and grouped convolutions, up-sampling, cropping, zero padding, global pools and
//! `Resizing` with each interpolation), each a small model frozen by TensorFlow
//! (`scripts/make_spatial_fixtures.py`), and TensorFlow's graph of the 3-D convolution's and
//! pools' gradients (`grads3d`), run to TensorFlow's outputs at 1 and 2 threads with the
//! optimizer on and off.
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use ferroflow::prelude::*;
use ferroflow::tensor::npy;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/spatial")
}

/// Runs fixture `name` (input `x`, output `y`) and compares with TensorFlow's output within
/// 1e-4 of its largest magnitude (at least 1).
fn check(name: &str) {
    let graph = ferroflow::load_graph(&dir().join(format!("{name}.pb"))).unwrap_or_else(|e| panic!("{name}: {e}"));
    let want: HashMap<String, Tensor> =
        npy::read_npz(&dir().join(format!("{name}.npz"))).unwrap().into_iter().collect();
    let y = want["y"].as_slice::<f32>().unwrap();
    let scale = y.iter().fold(1f32, |m, v| m.max(v.abs()));
    let mut worst_all = 0f32;
    for (threads, optimize) in [(1, true), (2, true), (1, false), (2, false)] {
        let mut options = SessionOptions::default().with_inter_op_threads(threads).with_intra_op_threads(threads);
        options.optimizer.enabled = optimize;
        let sess = Session::new(graph.clone(), options).unwrap_or_else(|e| panic!("{name}: {e}"));
        let got = sess.run(&[("x:0", want["x"].clone())], &["y:0"], &[]).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(got[0].dims(), want["y"].dims(), "{name}: output shape");
        let worst = got[0].as_slice::<f32>().unwrap().iter().zip(y).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(
            worst <= 1e-4 * scale,
            "{name}, {threads} threads, optimizer {optimize}: max |diff| {worst} against TensorFlow's (scale {scale})"
        );
        worst_all = worst_all.max(worst);
    }
    eprintln!("{name}: max |diff| {worst_all:e} (outputs up to {scale})");
}

macro_rules! fixtures {
    ($($test:ident: [$($name:literal),+ $(,)?];)*) => {
        $(#[test]
        fn $test() {
            $(check($name);)+
        })*

        /// Every fixture the script writes has a test above.
        #[test]
        fn every_fixture_is_checked() {
            let tested: BTreeSet<&str> = [$($($name,)+)*].into_iter().collect();
            let written: BTreeSet<String> = std::fs::read_dir(dir())
                .unwrap()
                .filter_map(|e| e.unwrap().file_name().to_str()?.strip_suffix(".pb").map(str::to_string))
                .collect();
            let untested: Vec<&String> = written.iter().filter(|n| !tested.contains(n.as_str())).collect();
            assert!(untested.is_empty(), "fixtures without a test: {untested:?}");
        }
    };
}

fixtures! {
    conv1d_with_strides_dilations_and_causal_padding: ["conv1d", "conv1d_dilated", "conv1d_causal"];
    conv3d_and_tensorflow_s_3d_gradients: ["conv3d", "grads3d"];
    tensorflow_s_resize_gradients: ["grads_resize"];
    transposed_convolutions: ["conv2d_transpose", "conv3d_transpose"];
    separable_convolutions: ["separable_conv1d", "separable_conv2d", "separable_conv2d_dilated"];
    dilated_convolutions: ["conv2d_dilated", "depthwise_dilated"];
    grouped_convolution: ["conv2d_groups"];
    up_sampling: ["upsampling1d", "upsampling2d_nearest", "upsampling2d_bilinear", "upsampling3d"];
    cropping_and_zero_padding: ["cropping1d", "cropping3d", "zeropadding1d", "zeropadding3d"];
    pools_1d_and_3d: ["pool1d", "pool3d"];
    global_pools: ["global_max1d", "global_max2d", "global_max3d", "global_avg1d", "global_avg3d"];
    resize_bilinear: ["resize_bilinear_up", "resize_bilinear_down", "resize_bilinear_crop", "resize_bilinear_antialias"];
    resize_nearest: ["resize_nearest_up", "resize_nearest_down", "resize_nearest_crop"];
    resize_bicubic: ["resize_bicubic_up", "resize_bicubic_down", "resize_bicubic_crop", "resize_bicubic_antialias"];
    resize_area: ["resize_area_up", "resize_area_down", "resize_area_crop"];
    resize_lanczos3: ["resize_lanczos3_up", "resize_lanczos3_down", "resize_lanczos3_crop", "resize_lanczos3_antialias"];
    resize_lanczos5: ["resize_lanczos5_up", "resize_lanczos5_down", "resize_lanczos5_crop", "resize_lanczos5_antialias"];
}

/// ferroflow's own gradients of ResizeBicubic, ScaleAndTranslate, ResizeBilinear and
/// ResizeNearestNeighbor (autodiff on the forward ops of `grads_resize`, weighted by the same
/// `w0..w8`) give TensorFlow's.
#[test]
fn resize_gradients_built_by_autodiff_match_tensorflow() {
    use ferroflow::graph::Attrs;
    use ferroflow::proto::attr;
    let want: HashMap<String, Tensor> = npy::read_npz(&dir().join("grads_resize.npz")).unwrap().into_iter().collect();
    let s = Scope::new();
    let x = s.with_name("x").placeholder(DType::Float, &Shape::known(want["x"].dims())).unwrap();
    let resize =
        |op: &str, size: [i32; 2], extra: Vec<(&str, ferroflow::proto::AttrValue)>, st: Option<[[f32; 2]; 2]>| {
            let mut inputs = vec![x, s.constant_from(&[2], &size).unwrap()];
            if let Some([scale, translation]) = st {
                inputs.push(s.constant_from(&[2], &scale).unwrap());
                inputs.push(s.constant_from(&[2], &translation).unwrap());
            }
            let mut a = Attrs::new();
            a.insert("T".into(), attr::dtype(DType::Float));
            a.extend(extra.into_iter().map(|(k, v)| (k.to_string(), v)));
            Output { node: s.add_op(op, op, &inputs, &[], a).unwrap(), index: 0 }
        };
    let outs = [
        resize("ResizeBicubic", [9, 5], vec![("half_pixel_centers", attr::boolean(true))], None),
        resize("ResizeBicubic", [4, 11], vec![("align_corners", attr::boolean(true))], None),
        resize(
            "ScaleAndTranslate",
            [4, 5],
            vec![("kernel_type", attr::string("lanczos3")), ("antialias", attr::boolean(true))],
            Some([[4.0 / 6.0, 5.0 / 7.0], [0.0, 0.0]]),
        ),
        resize(
            "ScaleAndTranslate",
            [10, 9],
            vec![("kernel_type", attr::string("keyscubic")), ("antialias", attr::boolean(false))],
            Some([[10.0 / 6.0, 1.3], [0.5, -1.0]]),
        ),
        resize("ResizeBilinear", [11, 4], vec![("half_pixel_centers", attr::boolean(true))], None),
        resize("ResizeBilinear", [3, 13], vec![("align_corners", attr::boolean(true))], None),
        resize("ResizeNearestNeighbor", [13, 5], vec![("half_pixel_centers", attr::boolean(true))], None),
        resize("ResizeNearestNeighbor", [4, 10], vec![("align_corners", attr::boolean(true))], None),
        resize("ResizeBilinear", [12, 14], vec![], None),
    ];
    let mut flat = Vec::new();
    for (i, o) in outs.iter().enumerate() {
        let w = s.constant(&want[&format!("w{i}")]).unwrap();
        let loss = s.reduce("Sum", s.mul(*o, w).unwrap(), &[0, 1, 2, 3], false).unwrap();
        let g = ferroflow::autodiff::gradients(&s, &[loss], &[x], None).unwrap()[0].unwrap();
        flat.push(s.reshape(g, &[-1i32]).unwrap());
    }
    let y = ferroflow::ops::RawOps::concat_v2(&s, &flat, s.scalar(0i32).unwrap()).unwrap();
    let sess = Session::new(s.graph(), SessionOptions::default()).unwrap();
    let got = sess.run(&[("x:0", want["x"].clone())], &[&s.with_graph(|g| g.output_name(y))], &[]).unwrap();
    let (g, w) = (got[0].as_slice::<f32>().unwrap(), want["y"].as_slice::<f32>().unwrap());
    assert_eq!(g.len(), w.len());
    let worst = g.iter().zip(w).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    assert!(worst <= 1e-5, "max |diff| {worst} against TensorFlow's gradients");
}

/// A nearest-neighbour resize gradient asked for a huge original size is refused before its
/// output is allocated, naming the node.
#[test]
fn a_huge_resize_gradient_size_is_refused_before_allocating() {
    use ferroflow::graph::Attrs;
    use ferroflow::proto::attr;
    let s = Scope::new();
    let g = s.constant_from(&[1, 2, 2, 1], &[1f32, 2.0, 3.0, 4.0]).unwrap();
    let size = s.constant_from(&[2], &[1i32 << 30, 1 << 30]).unwrap();
    let mut a = Attrs::new();
    a.insert("T".into(), attr::dtype(DType::Float));
    s.add_op("ResizeNearestNeighborGrad", "huge", &[g, size], &[], a).unwrap();
    let sess = Session::new(s.graph(), SessionOptions::default()).unwrap();
    let err = sess.run(&[], &["huge:0"], &[]).unwrap_err().to_string();
    assert!(err.contains("huge"), "{err}");
}
