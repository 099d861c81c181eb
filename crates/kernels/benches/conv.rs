//! Convolution kernels on the layer shapes of MobileNetV2 and ResNet50 (batch 1, 224×224
//! inputs; a depthwise and a pointwise layer at batch 32 too, whose data is in memory), called as the executor calls them (one kernel instance per layer, its filter-derived data
//! made once): the depthwise 3×3 (stride 1
//! and 2) with and without MobileNetV2's fused epilogue (`x * scale + shift`, `Relu6`), the
//! pointwise 1×1 expand and project convolutions, ResNet50's 3×3 and its 7×7 stem, each on
//! one thread and on two. `scripts/compare_tf.py` times whole models against TensorFlow;
//! these isolate one kernel (`cargo bench -p ferroflow-kernels --bench conv -- <filter>`).
mod common;

use common::{attrs, bench_cases, ints, tensor, Case};
use criterion::{criterion_group, criterion_main, Criterion};
use ferroflow_graph::Attrs;
use ferroflow_proto::attr_value::{ListValue, Value};
use ferroflow_tensor::DType;

fn strings(v: &[&str]) -> Value {
    Value::List(Box::new(ListValue { s: v.iter().map(|s| s.as_bytes().to_vec()).collect(), ..Default::default() }))
}

fn conv_attrs(stride: i64, padding: &str, program: Option<&[&str]>) -> Attrs {
    let mut a = vec![
        ("T", Value::Type(DType::Float.to_tf())),
        ("strides", ints(&[1, stride, stride, 1])),
        ("dilations", ints(&[1, 1, 1, 1])),
        ("padding", Value::S(padding.as_bytes().to_vec())),
        ("data_format", Value::S(b"NHWC".to_vec())),
        ("explicit_paddings", ints(&[])),
    ];
    if let Some(p) = program {
        a.push(("program", strings(p)));
        // Operands besides the convolution's output: the highest `aK` the program names.
        let n = p.iter().flat_map(|l| l.split(' ')).filter_map(|w| w.strip_prefix('a')?.parse::<i64>().ok()).max();
        a.push(("N", Value::I(n.unwrap_or(0))));
    }
    attrs(a)
}

const BN_RELU6: &[&str] = &["Mul a0 a1", "AddV2 r0 a2", "Relu6 r1"];
const BN: &[&str] = &["Mul a0 a1", "AddV2 r0 a2"];
const BN_RELU: &[&str] = &["Mul a0 a1", "AddV2 r0 a2", "Relu r1"];
/// ResNet's block output: batch norm, the shortcut added (`a3`, the output's shape), Relu.
const BN_ADD_RELU: &[&str] = &["Mul a0 a1", "AddV2 r0 a2", "AddV2 r1 a3", "Relu r2"];

fn depthwise(name: &'static str, [n, hw, c, stride]: [usize; 4], fused: bool) -> Case {
    let o = hw / stride;
    let mut inputs = vec![tensor(&[n, hw, hw, c], 1), tensor(&[3, 3, c, 1], 2)];
    if fused {
        inputs.extend([tensor(&[c], 3), tensor(&[c], 4)]);
    }
    Case {
        name,
        op: if fused { "_FusedDepthwiseConv2dElementwise" } else { "DepthwiseConv2dNative" },
        attrs: conv_attrs(stride as i64, "SAME", fused.then_some(BN_RELU6)),
        inputs,
        work: (n * o * o * c * 9) as u64,
    }
}

fn conv(
    name: &'static str,
    [n, hw, c, k, oc, stride]: [usize; 6],
    padding: &str,
    program: &'static [&'static str],
) -> Case {
    let o = if padding == "SAME" { hw.div_ceil(stride) } else { (hw - k) / stride + 1 };
    Case {
        name,
        op: "_FusedConv2DElementwise",
        attrs: conv_attrs(stride as i64, padding, Some(program)),
        inputs: {
            let mut v = vec![tensor(&[n, hw, hw, c], 1), tensor(&[k, k, c, oc], 2), tensor(&[oc], 3), tensor(&[oc], 4)];
            if program.contains(&"AddV2 r1 a3") {
                v.push(tensor(&[n, o, o, oc], 5));
            }
            v
        },
        work: (n * o * o * oc * k * k * c) as u64,
    }
}

fn bench(cr: &mut Criterion) {
    let layers = [
        depthwise("depthwise_3x3_s1_112x112x32", [1, 112, 32, 1], false),
        depthwise("depthwise_3x3_s1_112x112x32_bn_relu6", [1, 112, 32, 1], true),
        depthwise("depthwise_3x3_s1_56x56x144_bn_relu6", [1, 56, 144, 1], true),
        // Batch 32: 58 MB in and out, from and to memory as inside the model.
        depthwise("depthwise_3x3_s1_56x56x144_bn_relu6_batch32", [32, 56, 144, 1], true),
        depthwise("depthwise_3x3_s2_112x112x96_bn_relu6", [1, 112, 96, 2], true),
        depthwise("depthwise_3x3_s1_14x14x576_bn_relu6", [1, 14, 576, 1], true),
        conv("pointwise_expand_112x112_16to96_bn_relu6", [1, 112, 16, 1, 96, 1], "SAME", BN_RELU6),
        // Batch 32: a 154 MB output.
        conv("pointwise_expand_112x112_16to96_bn_relu6_batch32", [32, 112, 16, 1, 96, 1], "SAME", BN_RELU6),
        conv("pointwise_project_56x56_144to24_bn", [1, 56, 144, 1, 24, 1], "SAME", BN),
        conv("conv_3x3_s2_224x224_3to32_bn_relu6", [1, 224, 3, 3, 32, 2], "SAME", BN_RELU6),
        conv("conv_3x3_56x56_64to64_bn_relu", [1, 56, 64, 3, 64, 1], "SAME", BN_RELU),
        // Batch 1's late layers, whose filters are packed once (`packed.rs`): Winograd's α²
        // products of 49 tiles, a 3×3 and a 1×1 on 49 pixels.
        conv("conv_3x3_14x14_256to256_bn_relu", [1, 14, 256, 3, 256, 1], "SAME", BN_RELU),
        conv("conv_3x3_7x7_512to512_bn_relu", [1, 7, 512, 3, 512, 1], "SAME", BN_RELU),
        conv("pointwise_56x56_64to256_bn_relu", [1, 56, 64, 1, 256, 1], "SAME", BN_RELU),
        conv("pointwise_56x56_64to256_bn_add_relu", [1, 56, 64, 1, 256, 1], "SAME", BN_ADD_RELU),
        // ResNet50's 56×56 stage at batch 32: 100,352 rows, 25 MB in and 103 MB out.
        conv("pointwise_56x56_64to256_bn_add_relu_batch32", [32, 56, 64, 1, 256, 1], "SAME", BN_ADD_RELU),
        conv("pointwise_56x56_256to64_bn_relu_batch32", [32, 56, 256, 1, 64, 1], "SAME", BN_RELU),
        conv("pointwise_7x7_2048to512_bn_relu", [1, 7, 2048, 1, 512, 1], "SAME", BN_RELU),
        conv("conv_7x7_s2_230x230_3to64_bn_relu", [1, 230, 3, 7, 64, 2], "VALID", BN_RELU),
    ];
    bench_cases(cr, "conv", &layers);
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
