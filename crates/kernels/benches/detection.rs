//! Detection post-processing kernels: `NonMaxSuppressionV3` and soft-NMS `NonMaxSuppressionV5`
//! on 10,000 candidate boxes (clustered, so suppression does real work), SSD-sized
//! `CombinedNonMaxSuppression` (batch 8, 1,917 anchors, 90 classes), and `CropAndResize` of
//! 100 boxes from a 2×64×64×256 feature map to 14×14 (Mask R-CNN's ROI crop), each on one
//! thread and on two (`cargo bench -p ferroflow-kernels --bench detection -- <filter>`).
mod common;

use common::{bench_cases, Case};
use criterion::{criterion_group, criterion_main, Criterion};
use ferroflow_graph::Attrs;
use ferroflow_proto::attr;
use ferroflow_tensor::{DType, Tensor};

/// Deterministic values in [0, 1).
fn uniform(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2654435761).max(1);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s % 100_000) as f32 / 100_000.0
        })
        .collect()
}

/// `n` boxes `[y1, x1, y2, x2]` around 200 cluster centres, as a detector's raw candidates.
fn boxes(n: usize, seed: u32) -> Vec<f32> {
    let (c, j) = (uniform(400, seed), uniform(4 * n, seed + 1));
    (0..n)
        .flat_map(|i| {
            let k = i % 200;
            let (cy, cx) = (c[2 * k], c[2 * k + 1]);
            let (h, w) = (0.05 + 0.1 * j[4 * i], 0.05 + 0.1 * j[4 * i + 1]);
            let (dy, dx) = (0.02 * (j[4 * i + 2] - 0.5), 0.02 * (j[4 * i + 3] - 0.5));
            [cy + dy - h / 2.0, cx + dx - w / 2.0, cy + dy + h / 2.0, cx + dx + w / 2.0]
        })
        .collect()
}

fn scalar<T: ferroflow_tensor::Element>(v: T) -> Tensor {
    Tensor::from_vec(&[], vec![v]).unwrap()
}

fn bench(cr: &mut Criterion) {
    let n = 10_000;
    let nms_in = |extra: Vec<Tensor>| {
        let mut v = vec![
            Tensor::from_vec(&[n, 4], boxes(n, 1)).unwrap(),
            Tensor::from_vec(&[n], uniform(n, 7)).unwrap(),
            scalar(100i32),
            scalar(0.5f32),
            scalar(0.05f32),
        ];
        v.extend(extra);
        v
    };
    let float = |extra: Vec<(&str, ferroflow_proto::AttrValue)>| {
        let mut a: Attrs = [("T".to_string(), attr::dtype(DType::Float))].into_iter().collect();
        a.extend(extra.into_iter().map(|(k, v)| (k.to_string(), v)));
        a
    };
    let (batch, anchors, classes) = (8, 1917, 90);
    let cases = vec![
        Case { name: "nms_v3_10k", op: "NonMaxSuppressionV3", attrs: float(vec![]), inputs: nms_in(vec![]), work: 0 },
        Case {
            name: "soft_nms_v5_10k",
            op: "NonMaxSuppressionV5",
            work: 0,
            attrs: float(vec![("pad_to_max_output_size", attr::boolean(false))]),
            inputs: nms_in(vec![scalar(0.5f32)]),
        },
        Case {
            name: "combined_nms_ssd_8x1917x90",
            op: "CombinedNonMaxSuppression",
            work: 0,
            attrs: [("pad_per_class", attr::boolean(false)), ("clip_boxes", attr::boolean(true))]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            inputs: vec![
                Tensor::from_vec(&[batch, anchors, 1, 4], boxes(batch * anchors, 3)).unwrap(),
                Tensor::from_vec(&[batch, anchors, classes], uniform(batch * anchors * classes, 5)).unwrap(),
                scalar(100i32),
                scalar(100i32),
                scalar(0.6f32),
                scalar(0.3f32),
            ],
        },
        Case {
            name: "crop_and_resize_100x14x14x256",
            op: "CropAndResize",
            work: 0,
            attrs: float(vec![("method", attr::string("bilinear")), ("extrapolation_value", attr::float(0.0))]),
            inputs: vec![
                Tensor::from_vec(&[2, 64, 64, 256], uniform(2 * 64 * 64 * 256, 9)).unwrap(),
                Tensor::from_vec(&[100, 4], boxes(100, 11)).unwrap(),
                Tensor::from_vec(&[100], (0..100).map(|i| i % 2).collect::<Vec<i32>>()).unwrap(),
                Tensor::from_vec(&[2], vec![14i32, 14]).unwrap(),
            ],
        },
        Case {
            name: "crop_and_resize_grad_image_100x14x14x256",
            op: "CropAndResizeGradImage",
            work: 0,
            attrs: float(vec![("method", attr::string("bilinear"))]),
            inputs: vec![
                Tensor::from_vec(&[100, 14, 14, 256], uniform(100 * 14 * 14 * 256, 13)).unwrap(),
                Tensor::from_vec(&[100, 4], boxes(100, 11)).unwrap(),
                Tensor::from_vec(&[100], (0..100).map(|i| i % 2).collect::<Vec<i32>>()).unwrap(),
                Tensor::from_vec(&[4], vec![2i32, 64, 64, 256]).unwrap(),
            ],
        },
        Case {
            name: "crop_and_resize_grad_boxes_100x14x14x256",
            op: "CropAndResizeGradBoxes",
            work: 0,
            attrs: float(vec![("method", attr::string("bilinear"))]),
            inputs: vec![
                Tensor::from_vec(&[100, 14, 14, 256], uniform(100 * 14 * 14 * 256, 13)).unwrap(),
                Tensor::from_vec(&[2, 64, 64, 256], uniform(2 * 64 * 64 * 256, 9)).unwrap(),
                Tensor::from_vec(&[100, 4], boxes(100, 11)).unwrap(),
                Tensor::from_vec(&[100], (0..100).map(|i| i % 2).collect::<Vec<i32>>()).unwrap(),
            ],
        },
        Case {
            name: "top_k_8x10k_k100",
            op: "TopKV2",
            work: 8 * 10_000,
            attrs: float(vec![("sorted", attr::boolean(true)), ("Tk", attr::dtype(DType::Int32))]),
            inputs: vec![Tensor::from_vec(&[8, 10_000], uniform(80_000, 17)).unwrap(), scalar(100i32)],
        },
        Case {
            name: "gather_v2_batch_dims1_8x1917x4_k100",
            op: "GatherV2",
            work: 8 * 100 * 4,
            attrs: [
                ("Tparams", attr::dtype(DType::Float)),
                ("Tindices", attr::dtype(DType::Int32)),
                ("Taxis", attr::dtype(DType::Int32)),
                ("batch_dims", attr::int(1)),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
            inputs: vec![
                Tensor::from_vec(&[8, 1917, 4], uniform(8 * 1917 * 4, 19)).unwrap(),
                Tensor::from_vec(&[8, 100], (0..800i32).map(|i| i * 37 % 1917).collect::<Vec<i32>>()).unwrap(),
                scalar(1i32),
            ],
        },
    ];
    bench_cases(cr, "detection", &cases);
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
