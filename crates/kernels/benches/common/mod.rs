//! What the kernel benches share: attr and tensor builders, and the loop that times each case
//! as the executor calls it (one kernel instance per case, made once and not timed) on one
//! thread and on two.
#![allow(dead_code)] // each bench uses its own part of these helpers

use criterion::{Criterion, Throughput};
use ferroflow_graph::Attrs;
use ferroflow_kernels::{KernelContext, KernelRegistry, NodeDesc};
use ferroflow_ops::OpRegistry;
use ferroflow_proto::attr_value::{ListValue, Value};
use ferroflow_proto::AttrValue;
use ferroflow_tensor::Tensor;

pub fn attrs(pairs: Vec<(&str, Value)>) -> Attrs {
    pairs.into_iter().map(|(k, v)| (k.to_string(), AttrValue { value: Some(v) })).collect()
}

pub fn ints(v: &[i64]) -> Value {
    Value::List(Box::new(ListValue { i: v.to_vec(), ..Default::default() }))
}

/// Deterministic values in [-1, 1).
pub fn tensor(dims: &[usize], seed: u32) -> Tensor {
    let n = dims.iter().product();
    let mut s = seed.wrapping_mul(2654435761).max(1);
    let v: Vec<f32> = (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s % 2000) as f32 / 1000.0 - 1.0
        })
        .collect();
    Tensor::from_vec(dims, v).unwrap()
}

/// One kernel call: the op, its attrs, its inputs, and the work it does (elements of
/// throughput: multiply-adds for convolutions, output values otherwise; 0 for none).
pub struct Case {
    pub name: &'static str,
    pub op: &'static str,
    pub attrs: Attrs,
    pub inputs: Vec<Tensor>,
    pub work: u64,
}

/// Times every case in criterion group `group`, on one thread and on a pool of two.
pub fn bench_cases(cr: &mut Criterion, group: &str, cases: &[Case]) {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let mut group = cr.benchmark_group(group);
    for case in cases {
        if case.work > 0 {
            group.throughput(Throughput::Elements(case.work));
        }
        for (threads, ctx) in [
            (1, KernelContext { intra_op: None, resources: None, step: None }),
            (2, KernelContext { intra_op: Some(&pool), resources: None, step: None }),
        ] {
            // One kernel per case, as the executor keeps one per node: what it derives from
            // constant inputs once (Winograd's transform, a packed filter) is not timed.
            let def = OpRegistry::global().get(case.op).unwrap();
            let types = def.resolve_types(&case.attrs).unwrap();
            let desc = NodeDesc { name: case.name, def, attrs: &case.attrs, types: &types };
            let kernel = KernelRegistry::global().create(&desc).unwrap();
            group.bench_function(format!("{}/threads_{threads}", case.name), |b| {
                b.iter(|| {
                    let mut outputs = Vec::new();
                    kernel.compute(&ctx, &mut case.inputs.clone(), &mut outputs).unwrap();
                    outputs
                })
            });
        }
    }
    group.finish();
}
