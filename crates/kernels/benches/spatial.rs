//! The 3-D convolution kernels (`Conv3D` and its two gradients, as a video or volume model's
//! layers call them), the 3-D pools, and the weighted resizes (`ResizeBicubic`,
//! `ScaleAndTranslate` with Lanczos 3), each on one thread and on two
//! (`cargo bench -p ferroflow-kernels --bench spatial -- <filter>`).
mod common;

use common::{attrs, bench_cases, ints, tensor, Case};
use criterion::{criterion_group, criterion_main, Criterion};
use ferroflow_graph::Attrs;
use ferroflow_proto::attr_value::Value;
use ferroflow_tensor::{DType, Tensor};

fn window3d(op: &str, strides: [i64; 3], ksize: Option<[i64; 3]>) -> Attrs {
    let mut a = vec![
        ("T", Value::Type(DType::Float.to_tf())),
        ("strides", ints(&[1, strides[0], strides[1], strides[2], 1])),
        ("padding", Value::S(b"SAME".to_vec())),
        ("data_format", Value::S(b"NDHWC".to_vec())),
    ];
    match ksize {
        Some(k) => a.push(("ksize", ints(&[1, k[0], k[1], k[2], 1]))),
        None => a.push(("dilations", ints(&[1; 5]))),
    }
    if op == "Conv3DBackpropInputV2" {
        a.push(("Tshape", Value::Type(DType::Int32.to_tf())));
    }
    attrs(a)
}

fn i32s(v: &[i32]) -> Tensor {
    Tensor::from_vec(&[v.len()], v.to_vec()).unwrap()
}

/// A 3×3×3 SAME convolution of `[n, d, hw, hw, c]` to `oc` channels, as `op` computes it.
fn conv3d(name: &'static str, op: &'static str, [n, d, hw, c, oc]: [usize; 5]) -> Case {
    let (x, f, dy) = ([n, d, hw, hw, c], [3, 3, 3, c, oc], [n, d, hw, hw, oc]);
    let inputs = match op {
        "Conv3D" => vec![tensor(&x, 1), tensor(&f, 2)],
        "Conv3DBackpropInputV2" => vec![i32s(&x.map(|v| v as i32)), tensor(&f, 2), tensor(&dy, 3)],
        _ => vec![tensor(&x, 1), i32s(&f.map(|v| v as i32)), tensor(&dy, 3)],
    };
    let work = (n * d * hw * hw * oc * 27 * c) as u64;
    Case { name, op, attrs: window3d(op, [1, 1, 1], None), inputs, work }
}

fn resize(name: &'static str, op: &'static str, [n, hw, c, out]: [usize; 4]) -> Case {
    let mut a = vec![("T", Value::Type(DType::Float.to_tf()))];
    let mut inputs = vec![tensor(&[n, hw, hw, c], 1), i32s(&[out as i32, out as i32])];
    if op == "ScaleAndTranslate" {
        a.push(("kernel_type", Value::S(b"lanczos3".to_vec())));
        a.push(("antialias", Value::B(true)));
        let s = out as f32 / hw as f32;
        inputs.push(Tensor::from_vec(&[2], vec![s, s]).unwrap());
        inputs.push(Tensor::from_vec(&[2], vec![0f32, 0.0]).unwrap());
    } else {
        a.push(("align_corners", Value::B(false)));
        a.push(("half_pixel_centers", Value::B(true)));
    }
    Case { name, op, attrs: attrs(a), inputs, work: (n * out * out * c) as u64 }
}

fn bench(cr: &mut Criterion) {
    let shape = [2, 8, 28, 32, 32];
    let cases = [
        conv3d("conv3d_3x3x3_8x28x28_32to32_batch2", "Conv3D", shape),
        conv3d("conv3d_backprop_input_3x3x3_8x28x28_32to32_batch2", "Conv3DBackpropInputV2", shape),
        conv3d("conv3d_backprop_filter_3x3x3_8x28x28_32to32_batch2", "Conv3DBackpropFilterV2", shape),
        Case {
            name: "max_pool3d_2x2x2_s2_16x56x56x32",
            op: "MaxPool3D",
            attrs: window3d("MaxPool3D", [2, 2, 2], Some([2, 2, 2])),
            inputs: vec![tensor(&[1, 16, 56, 56, 32], 1)],
            work: (8 * 28 * 28 * 32) as u64,
        },
        resize("resize_bicubic_112_to_224x3_batch8", "ResizeBicubic", [8, 112, 3, 224]),
        resize("scale_and_translate_lanczos3_224_to_112x3_batch8", "ScaleAndTranslate", [8, 224, 3, 112]),
        // A GPT-style causal mask: the lower triangle of 8 heads' 512×512 scores.
        Case {
            name: "matrix_band_part_causal_8x512x512",
            op: "MatrixBandPart",
            attrs: attrs(vec![("T", Value::Type(DType::Float.to_tf())), ("Tindex", Value::Type(DType::Int64.to_tf()))]),
            inputs: vec![
                tensor(&[8, 512, 512], 4),
                Tensor::from_vec(&[], vec![-1i64]).unwrap(),
                Tensor::from_vec(&[], vec![0i64]).unwrap(),
            ],
            work: (8 * 512 * 512) as u64,
        },
    ];
    bench_cases(cr, "spatial", &cases);
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
