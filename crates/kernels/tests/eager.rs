//! Kernels called op by op through `run_op` (the eager / constant-folding path), checked
//! against first-principles results.
use ferroflow_graph::Attrs;
use ferroflow_kernels::{run_op, KernelContext};
use ferroflow_proto::{attr_value::Value, AttrValue};
use ferroflow_tensor::{DType, Tensor};

fn attrs(pairs: &[(&str, Value)]) -> Attrs {
    pairs.iter().map(|(k, v)| (k.to_string(), AttrValue { value: Some(v.clone()) })).collect()
}

fn t_float() -> Value {
    Value::Type(DType::Float.to_tf())
}

/// Deterministic values in [-1, 1).
fn values(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2654435761).max(1);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s % 2000) as f32 / 1000.0 - 1.0
        })
        .collect()
}

#[test]
fn matmul_matches_a_naive_f64_product_for_every_transpose_and_thread_count() {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let (m, k, n) = (67, 129, 71);
    for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
        let a = values(m * k, 1);
        let b = values(k * n, 2);
        let (ad, bd) = (if ta { [k, m] } else { [m, k] }, if tb { [n, k] } else { [k, n] });
        let at = |i: usize, p: usize| if ta { a[p * m + i] } else { a[i * k + p] } as f64;
        let bt = |p: usize, j: usize| if tb { b[j * k + p] } else { b[p * n + j] } as f64;
        let at_attrs = attrs(&[("T", t_float()), ("transpose_a", Value::B(ta)), ("transpose_b", Value::B(tb))]);
        for ctx in [
            KernelContext { intra_op: None, resources: None, step: None },
            KernelContext { intra_op: Some(&pool), resources: None, step: None },
        ] {
            let inputs = vec![Tensor::from_vec(&ad, a.clone()).unwrap(), Tensor::from_vec(&bd, b.clone()).unwrap()];
            let out = run_op("MatMul", &at_attrs, inputs, &ctx).unwrap();
            assert_eq!(out[0].dims(), &[m, n]);
            let got = out[0].as_slice::<f32>().unwrap();
            for i in 0..m {
                for j in 0..n {
                    let want: f64 = (0..k).map(|p| at(i, p) * bt(p, j)).sum();
                    assert!(
                        (got[i * n + j] as f64 - want).abs() < 1e-4,
                        "({ta},{tb}) [{i},{j}]: {} vs {want}",
                        got[i * n + j]
                    );
                }
            }
        }
    }
}

#[test]
fn large_elementwise_ops_split_across_the_intra_op_pool_give_the_same_result() {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let n = 100_000;
    let x = Tensor::from_vec(&[n], values(n, 3)).unwrap();
    let y = Tensor::from_vec(&[n], values(n, 4)).unwrap();
    let a = attrs(&[("T", t_float())]);
    let serial = KernelContext { intra_op: None, resources: None, step: None };
    let parallel = KernelContext { intra_op: Some(&pool), resources: None, step: None };
    for op in ["AddV2", "Mul", "Maximum"] {
        let s = run_op(op, &a, vec![x.clone(), y.clone()], &serial).unwrap();
        let p = run_op(op, &a, vec![x.clone(), y.clone()], &parallel).unwrap();
        assert_eq!(s[0], p[0], "{op}");
    }
    for op in ["Tanh", "Exp", "Neg"] {
        let s = run_op(op, &a, vec![x.clone()], &serial).unwrap();
        let p = run_op(op, &a, vec![x.clone()], &parallel).unwrap();
        assert_eq!(s[0], p[0], "{op}");
        let xs = x.as_slice::<f32>().unwrap();
        let f: fn(f32) -> f32 = match op {
            "Tanh" => f32::tanh,
            "Exp" => f32::exp,
            _ => |v| -v,
        };
        assert!(s[0].as_slice::<f32>().unwrap().iter().zip(xs).all(|(o, i)| *o == f(*i)), "{op}");
    }
}

#[test]
fn eager_calls_check_arity_dtypes_and_kernels() {
    let ctx = KernelContext { intra_op: None, resources: None, step: None };
    let a = attrs(&[("T", t_float())]);
    let e = run_op("AddV2", &a, vec![Tensor::scalar(1f32)], &ctx).unwrap_err().to_string();
    assert!(e.contains("takes 2 inputs, got 1"), "{e}");
    let e = run_op("AddV2", &a, vec![Tensor::scalar(1f32), Tensor::scalar(1i32)], &ctx).unwrap_err().to_string();
    assert!(e.contains("input 1 is int32, expected float"), "{e}");
    let b = attrs(&[("T", Value::Type(DType::Bool.to_tf()))]);
    let e = run_op("Sqrt", &b, vec![Tensor::scalar(true)], &ctx).unwrap_err().to_string();
    assert!(e.contains("no CPU kernel for op 'Sqrt' with T=bool") && e.contains("registered: float, double"), "{e}");
    let e = run_op("Bogus", &a, vec![], &ctx).unwrap_err().to_string();
    assert!(e.contains("unknown op 'Bogus'"), "{e}");
    let e = run_op(
        "AddV2",
        &a,
        vec![Tensor::from_vec(&[2], vec![1f32, 2.0]).unwrap(), Tensor::from_vec(&[3], vec![1f32; 3]).unwrap()],
        &ctx,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("Incompatible shapes: [2] vs. [3]"), "{e}");
}

#[test]
fn products_split_across_threads_equal_one_call() {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let serial = KernelContext { intra_op: None, resources: None, step: None };
    let parallel = KernelContext { intra_op: Some(&pool), resources: None, step: None };
    // Wide (split by columns, a ragged last block), tall (split by rows), all transposes.
    for (m, k, n) in [(37, 190, 301), (301, 150, 37), (128, 64, 128)] {
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            let (ad, bd) =
                ([if ta { k } else { m }, if ta { m } else { k }], [if tb { n } else { k }, if tb { k } else { n }]);
            let a = Tensor::from_vec(&ad, values(m * k, 5)).unwrap();
            let b = Tensor::from_vec(&bd, values(k * n, 6)).unwrap();
            let at = attrs(&[("T", t_float()), ("transpose_a", Value::B(ta)), ("transpose_b", Value::B(tb))]);
            let s = run_op("MatMul", &at, vec![a.clone(), b.clone()], &serial).unwrap();
            let p = pool.install(|| run_op("MatMul", &at, vec![a, b], &parallel).unwrap());
            assert_eq!(s[0].dims(), [m, n]);
            assert_eq!(s[0], p[0], "{m}x{k}x{n} ta={ta} tb={tb}");
        }
    }
}
