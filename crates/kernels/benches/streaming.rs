//! Memory-bound kernels against this machine's copy bandwidth, measured in the same run
//! (`cargo bench -p ferroflow-kernels --bench streaming`): elementwise maps (cheap and
//! transcendental), the activation chains fused programs run (swish, GELU, hard-swish),
//! broadcast binaries (same shape, per image and channel `[N,1,1,C]`, per channel, scalar),
//! concat, slice, pad, transpose, reductions over H×W and over the last axis, softmax. Every
//! tensor is 8 MB or more (the `[32, 56, 56, 144]` activations of an EfficientNet at batch 32
//! are 58 MB), so caches do not hold them.
//!
//! Prints one markdown table (docs/PERFORMANCE.md keeps it): for each op the bytes it must
//! move (its inputs read once, its output written once), the median time of 15 calls on one
//! thread and on a pool of two, and the GB/s that makes, next to `copy` (a `memcpy` of the
//! same size, split in two halves on two threads) and as a share of it. Then the same cases
//! through criterion, for comparisons between runs.
mod common;

use std::time::Instant;

use common::{attrs, tensor, Case};
use criterion::Criterion;
use ferroflow_kernels::{KernelContext, KernelRegistry, NodeDesc, OpKernel};
use ferroflow_ops::OpRegistry;
use ferroflow_proto::attr_value::{ListValue, Value};
use ferroflow_proto::DataType;
use ferroflow_tensor::Tensor;

const N: usize = 32;
const H: usize = 56;
const W: usize = 56;
const C: usize = 144;

fn t_float() -> (&'static str, Value) {
    ("T", Value::Type(DataType::DtFloat as i32))
}

fn program(lines: &[&str], operands: usize) -> Vec<(&'static str, Value)> {
    let l = ListValue { s: lines.iter().map(|l| l.as_bytes().to_vec()).collect(), ..Default::default() };
    vec![t_float(), ("program", Value::List(Box::new(l))), ("N", Value::I(operands as i64))]
}

fn scalar(v: f32) -> Tensor {
    Tensor::scalar(v)
}

fn cases() -> Vec<Case> {
    let x = tensor(&[N, H, W, C], 1);
    let positive =
        Tensor::from_vec(&[N, H, W, C], x.as_slice::<f32>().unwrap().iter().map(|v| v.abs() + 0.01).collect()).unwrap();
    let y = tensor(&[N, H, W, C], 2);
    let per_image = tensor(&[N, 1, 1, C], 3);
    let channel = tensor(&[C], 4);
    let half = tensor(&[N, H, W, C / 2], 5);
    let logits = tensor(&[N * 452, 1000], 6); // 14.5M values, like the activation
    let i32s = |v: &[i32]| Tensor::from_vec(&[v.len()], v.to_vec()).unwrap();
    let elems = (N * H * W * C) as u64;
    let unary = |name: &'static str, op: &'static str, input: &Tensor| Case {
        name,
        op,
        attrs: attrs(vec![t_float()]),
        inputs: vec![input.clone()],
        work: elems,
    };
    let binary = |name: &'static str, op: &'static str, b: &Tensor| Case {
        name,
        op,
        attrs: attrs(vec![t_float()]),
        inputs: vec![x.clone(), b.clone()],
        work: elems,
    };
    let fused = |name: &'static str, lines: &[&str], mut inputs: Vec<Tensor>| Case {
        name,
        op: "_FusedElementwise",
        attrs: attrs(program(lines, inputs.len() + 1)),
        inputs: {
            inputs.insert(0, x.clone());
            inputs
        },
        work: elems,
    };
    let int32 = ("Tidx", Value::Type(DataType::DtInt32 as i32));
    vec![
        unary("Relu", "Relu", &x),
        unary("Exp", "Exp", &x),
        unary("Log", "Log", &positive),
        unary("Sigmoid", "Sigmoid", &x),
        unary("Tanh", "Tanh", &x),
        unary("Erf", "Erf", &x),
        unary("Erfc", "Erfc", &x),
        unary("Softplus", "Softplus", &x),
        fused("swish (fused x·sigmoid(x))", &["Sigmoid a0", "Mul a0 r0"], vec![]),
        fused(
            "GELU exact (fused 0.5·x·erfc(-x/√2))",
            &["Mul a0 a1", "Erfc r0", "Mul a0 r1", "Mul r2 a2"],
            vec![scalar(-std::f32::consts::FRAC_1_SQRT_2), scalar(0.5)],
        ),
        fused(
            "GELU tanh (fused)",
            &[
                "Mul a0 a0",
                "Mul r0 a0",
                "Mul r1 a1",
                "AddV2 a0 r2",
                "Mul r3 a2",
                "Tanh r4",
                "AddV2 r5 a3",
                "Mul a0 r6",
                "Mul r7 a4",
            ],
            vec![scalar(0.044715), scalar(0.797_884_6), scalar(1.0), scalar(0.5)],
        ),
        fused(
            "hard-swish (fused x·relu6(x+3)/6)",
            &["AddV2 a0 a1", "Relu6 r0", "Mul a0 r1", "Mul r2 a2"],
            vec![scalar(3.0), scalar(1.0 / 6.0)],
        ),
        binary("AddV2 same shape", "AddV2", &y),
        binary("Mul [N,H,W,C]·[N,1,1,C]", "Mul", &per_image),
        binary("BiasAdd [C]", "BiasAdd", &channel),
        binary("Mul by a scalar", "Mul", &scalar(1.5)),
        Case {
            name: "ConcatV2 of two halves, last axis",
            op: "ConcatV2",
            attrs: attrs(vec![t_float(), ("N", Value::I(2)), int32.clone()]),
            inputs: vec![half.clone(), tensor(&[N, H, W, C / 2], 7), Tensor::scalar(3i32)],
            work: elems,
        },
        Case {
            name: "Slice, half the channels",
            op: "Slice",
            attrs: attrs(vec![t_float(), ("Index", Value::Type(DataType::DtInt32 as i32))]),
            inputs: vec![x.clone(), i32s(&[0, 0, 0, 0]), i32s(&[N as i32, H as i32, W as i32, (C / 2) as i32])],
            work: elems / 2,
        },
        Case {
            name: "Pad, 1 each side of H and W",
            op: "Pad",
            attrs: attrs(vec![t_float(), ("Tpaddings", Value::Type(DataType::DtInt32 as i32))]),
            inputs: vec![x.clone(), Tensor::from_vec(&[4, 2], vec![0i32, 0, 1, 1, 1, 1, 0, 0]).unwrap()],
            work: elems,
        },
        Case {
            name: "Transpose NHWC → NCHW",
            op: "Transpose",
            attrs: attrs(vec![t_float(), ("Tperm", Value::Type(DataType::DtInt32 as i32))]),
            inputs: vec![x.clone(), i32s(&[0, 3, 1, 2])],
            work: elems,
        },
        Case {
            name: "Mean over H×W",
            op: "Mean",
            attrs: attrs(vec![t_float(), int32.clone(), ("keep_dims", Value::B(false))]),
            inputs: vec![x.clone(), i32s(&[1, 2])],
            work: elems,
        },
        Case {
            name: "Sum over the last axis (1000)",
            op: "Sum",
            attrs: attrs(vec![t_float(), int32, ("keep_dims", Value::B(true))]),
            inputs: vec![logits.clone(), i32s(&[1])],
            work: logits.len() as u64,
        },
        Case {
            name: "Softmax over the last axis (1000)",
            op: "Softmax",
            attrs: attrs(vec![t_float()]),
            inputs: vec![logits.clone()],
            work: logits.len() as u64,
        },
    ]
}

fn kernel(case: &Case) -> Box<dyn OpKernel> {
    let def = OpRegistry::global().get(case.op).unwrap();
    let types = def.resolve_types(&case.attrs).unwrap();
    let desc = NodeDesc { name: case.name, def, attrs: &case.attrs, types: &types };
    KernelRegistry::global().create(&desc).unwrap_or_else(|e| panic!("{}: {e}", case.name))
}

/// Median seconds of `runs` calls of `f` after 2 untimed ones.
fn median(runs: usize, mut f: impl FnMut()) -> f64 {
    f();
    f();
    let mut t: Vec<f64> = (0..runs)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[runs / 2]
}

/// Bytes a case must move: its inputs read once and its outputs written once.
fn bytes_moved(case: &Case, outputs: &[Tensor]) -> usize {
    case.inputs.iter().chain(outputs).map(|t| t.as_bytes().map_or(0, <[u8]>::len)).sum()
}

fn table(pool: &rayon::ThreadPool) {
    let serial = KernelContext { intra_op: None, resources: None, step: None };
    let parallel = KernelContext { intra_op: Some(pool), resources: None, step: None };
    let n = N * H * W * C;
    let src = vec![1.0f32; n];
    let mut dst = vec![0.0f32; n];
    let copy1 = median(15, || dst.copy_from_slice(&src));
    let copy2 = median(15, || {
        let (a, b) = dst.split_at_mut(n / 2);
        pool.join(|| a.copy_from_slice(&src[..n / 2]), || b.copy_from_slice(&src[n / 2..]));
    });
    let copy_bytes = (2 * n * 4) as f64;
    let gb = |bytes: f64, s: f64| bytes / s / 1e9;
    let (c1, c2) = (gb(copy_bytes, copy1), gb(copy_bytes, copy2));
    println!("\n| op ({N}×{H}×{W}×{C} float32 unless named) | MB moved | 1 thread ms | GB/s | of copy | 2 threads ms | GB/s | of copy |");
    println!("|---|---|---|---|---|---|---|---|");
    println!(
        "| copy (memcpy) | {:.1} | {:.2} | {c1:.1} | 100% | {:.2} | {c2:.1} | 100% |",
        copy_bytes / 1e6,
        copy1 * 1e3,
        copy2 * 1e3
    );
    for case in cases() {
        let k = kernel(&case);
        let mut out = Vec::new();
        k.compute(&serial, &mut case.inputs.clone(), &mut out).unwrap();
        let bytes = bytes_moved(&case, &out) as f64;
        drop(out);
        let time = |ctx: &KernelContext| {
            median(15, || {
                let mut outputs = Vec::new();
                k.compute(ctx, &mut case.inputs.clone(), &mut outputs).unwrap();
            })
        };
        let (t1, t2) = (time(&serial), time(&parallel));
        let (g1, g2) = (gb(bytes, t1), gb(bytes, t2));
        println!(
            "| {} | {:.1} | {:.2} | {g1:.1} | {:.0}% | {:.2} | {g2:.1} | {:.0}% |",
            case.name,
            bytes / 1e6,
            t1 * 1e3,
            100.0 * g1 / c1,
            t2 * 1e3,
            100.0 * g2 / c2
        );
    }
    println!();
}

fn main() {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    table(&pool);
    let mut cr = Criterion::default().configure_from_args().sample_size(10);
    common::bench_cases(&mut cr, "streaming", &cases());
    cr.final_summary();
}
