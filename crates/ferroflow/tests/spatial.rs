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
        let mut options = SessionOptions { inter_op_threads: threads, intra_op_threads: threads, ..Default::default() };
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
