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
        // Within 2 ulp of the float64 answer (the float32 functions are vectorized
        // approximations, not libm's).
        let xs = x.as_slice::<f32>().unwrap();
        let f: fn(f64) -> f64 = match op {
            "Tanh" => f64::tanh,
            "Exp" => f64::exp,
            _ => |v| -v,
        };
        let close = |o: f32, i: f32| (o as f64 - f(i as f64)).abs() <= 2.0 * f32::EPSILON as f64 * f(i as f64).abs();
        assert!(s[0].as_slice::<f32>().unwrap().iter().zip(xs).all(|(o, i)| close(*o, *i)), "{op}");
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

/// Constant `Pad` (copied by rows) against the definition, element by element: every rank up
/// to 4, paddings on any axes (none, leading only, trailing only), zero and non-zero fill,
/// empty inputs; serially and on two threads (slabs split across the pool from 1 MB out).
#[test]
fn constant_pad_equals_its_definition() {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    for ctx in [
        KernelContext { intra_op: None, resources: None, step: None },
        KernelContext { intra_op: Some(&pool), resources: None, step: None },
    ] {
        constant_pad_cases(&ctx);
    }
}

fn constant_pad_cases(ctx: &KernelContext) {
    let cases: [(&[usize], &[i64]); 9] = [
        (&[2, 62, 62, 32], &[0, 0, 1, 1, 1, 1, 0, 0]),
        (&[3, 40, 50, 40], &[1, 0, 2, 1, 0, 0, 0, 0]),
        (&[3], &[1, 2]),
        (&[2, 3], &[0, 0, 1, 1]),
        (&[2, 3], &[2, 0, 0, 0]),
        (&[1, 4, 5, 3], &[0, 0, 1, 1, 1, 1, 0, 0]),
        (&[2, 3, 2, 2], &[1, 0, 0, 2, 0, 1, 1, 1]),
        (&[2, 0, 3], &[1, 1, 0, 0, 2, 0]),
        (&[2, 3], &[0, 0, 0, 0]),
    ];
    for (dims, pads) in cases {
        let n: usize = dims.iter().product();
        let x = Tensor::from_vec(dims, values(n, 9)).unwrap();
        let p = Tensor::from_vec(&[dims.len(), 2], pads.to_vec()).unwrap();
        for fill in [None, Some(2.5f32)] {
            let (op, mut inputs) = match fill {
                None => ("Pad", vec![x.clone(), p.clone()]),
                Some(v) => ("PadV2", vec![x.clone(), p.clone(), Tensor::scalar(v)]),
            };
            let a = attrs(&[("T", t_float()), ("Tpaddings", Value::Type(DType::Int64.to_tf()))]);
            let out = run_op(op, &a, std::mem::take(&mut inputs), ctx).unwrap().remove(0);
            let od: Vec<usize> =
                dims.iter().enumerate().map(|(i, d)| d + (pads[2 * i] + pads[2 * i + 1]) as usize).collect();
            assert_eq!(out.dims(), od.as_slice());
            let xs = x.as_slice::<f32>().unwrap();
            let got = out.as_slice::<f32>().unwrap();
            for (flat, v) in got.iter().enumerate() {
                // The output index, and the input element it holds (if any).
                let mut rem = flat;
                let mut src = Some(0usize);
                for a in (0..dims.len()).rev() {
                    let i = rem % od[a];
                    rem /= od[a];
                    let j = i as i64 - pads[2 * a];
                    let stride: usize = dims[a + 1..].iter().product();
                    src = match src {
                        Some(s) if j >= 0 && (j as usize) < dims[a] => Some(s + j as usize * stride),
                        _ => None,
                    };
                }
                let want = src.map_or(fill.unwrap_or(0.0), |s| xs[s]);
                assert_eq!(*v, want, "{op} {dims:?} {pads:?} at {flat}");
            }
        }
    }
}

/// `_FusedElementwise` with per-channel operands (`x * scale + offset` then `Relu6`, as a
/// Keras BatchNormalization becomes when frozen) equals the unfused ops, serially and on two
/// threads, for a vector `[C]`, a `[1, 1, 1, C]` operand and a scalar.
#[test]
fn fused_elementwise_with_per_channel_operands_equals_the_unfused_ops() {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let (n, h, w, c) = (2, 37, 29, 24);
    let x = Tensor::from_vec(&[n, h, w, c], values(n * h * w * c, 5)).unwrap();
    let scale = Tensor::from_vec(&[c], values(c, 6)).unwrap();
    let offset = Tensor::from_vec(&[1, 1, 1, c], values(c, 7)).unwrap();
    let a = attrs(&[("T", t_float())]);
    for ctx in [
        KernelContext { intra_op: None, resources: None, step: None },
        KernelContext { intra_op: Some(&pool), resources: None, step: None },
    ] {
        let m = run_op("Mul", &a, vec![x.clone(), scale.clone()], &ctx).unwrap().remove(0);
        let s = run_op("AddV2", &a, vec![m, offset.clone()], &ctx).unwrap().remove(0);
        let s = run_op("Maximum", &a, vec![s, Tensor::scalar(-0.25f32)], &ctx).unwrap().remove(0);
        let want = run_op("Relu6", &a, vec![s], &ctx).unwrap().remove(0);
        let program = Value::List(Box::new(ferroflow_proto::attr_value::ListValue {
            s: ["Mul a0 a1", "AddV2 r0 a2", "Maximum r1 a3", "Relu6 r2"]
                .iter()
                .map(|l| l.as_bytes().to_vec())
                .collect(),
            ..Default::default()
        }));
        let fa = attrs(&[("T", t_float()), ("N", Value::I(4)), ("program", program)]);
        let got = run_op(
            "_FusedElementwise",
            &fa,
            vec![x.clone(), scale.clone(), offset.clone(), Tensor::scalar(-0.25f32)],
            &ctx,
        )
        .unwrap()
        .remove(0);
        assert_eq!(got, want);
    }
}

/// `DepthwiseConv2dNative` in f32 (channels in blocks of 32 and 16 in registers, then one by
/// one) against the generic f64 kernel on the same values: strides 1 and 2, SAME and VALID
/// padding, channel counts that take each kind of block and not, one and two threads.
#[test]
fn f32_depthwise_convolution_equals_the_f64_kernel() {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    // (channels, stride, padding, window side): 3×3 takes the register-blocked path, 5×5 and
    // 7×7 the taps listed once per row.
    let cases = [
        (16, 1, "SAME", 3),
        (20, 2, "SAME", 3),
        (35, 1, "VALID", 3),
        (7, 2, "VALID", 3),
        (32, 2, "SAME", 3),
        (56, 1, "SAME", 3),
        (11, 2, "SAME", 5),
        (32, 2, "SAME", 7),
        (48, 1, "VALID", 5),
        (24, 1, "SAME", 7),
    ];
    for (c, stride, padding, k) in cases {
        let (n, h, w) = (2, 15, 13);
        let xv = values(n * h * w * c, 11);
        let fv = values(k * k * c, 12);
        let x32 = Tensor::from_vec(&[n, h, w, c], xv.clone()).unwrap();
        let f32_ = Tensor::from_vec(&[k, k, c, 1], fv.clone()).unwrap();
        let x64 = Tensor::from_vec(&[n, h, w, c], xv.iter().map(|&v| v as f64).collect()).unwrap();
        let f64_ = Tensor::from_vec(&[k, k, c, 1], fv.iter().map(|&v| v as f64).collect()).unwrap();
        let common = |t: DType| {
            attrs(&[
                ("T", Value::Type(t.to_tf())),
                (
                    "strides",
                    Value::List(Box::new(ferroflow_proto::attr_value::ListValue {
                        i: vec![1, stride, stride, 1],
                        ..Default::default()
                    })),
                ),
                ("padding", Value::S(padding.as_bytes().to_vec())),
            ])
        };
        for ctx in [
            KernelContext { intra_op: None, resources: None, step: None },
            KernelContext { intra_op: Some(&pool), resources: None, step: None },
        ] {
            let a = run_op("DepthwiseConv2dNative", &common(DType::Float), vec![x32.clone(), f32_.clone()], &ctx)
                .unwrap()
                .remove(0);
            let b = run_op("DepthwiseConv2dNative", &common(DType::Double), vec![x64.clone(), f64_.clone()], &ctx)
                .unwrap()
                .remove(0);
            assert_eq!(a.dims(), b.dims());
            for (p, q) in a.as_slice::<f32>().unwrap().iter().zip(b.as_slice::<f64>().unwrap()) {
                assert!(
                    (*p as f64 - q).abs() <= 1e-5 * q.abs().max(1.0),
                    "c {c} stride {stride} {padding} {k}x{k}: {p} vs {q}"
                );
            }
        }
    }
}

/// The streaming kernels that split large tensors across the pool (softmax, reductions over
/// H×W and over the last axis, transposes and slices) give the same bits on one thread and
/// on two, and match first principles.
#[test]
fn large_rearrangements_and_reductions_are_the_same_on_one_thread_and_two() {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let serial = KernelContext { intra_op: None, resources: None, step: None };
    let parallel = KernelContext { intra_op: Some(&pool), resources: None, step: None };
    let (n, h, w, c) = (8usize, 20usize, 19usize, 37usize); // 112,480 values: above every split threshold
    let v = values(n * h * w * c, 5);
    let x = Tensor::from_vec(&[n, h, w, c], v.clone()).unwrap();
    let i32s = |v: &[i32]| Tensor::from_vec(&[v.len()], v.to_vec()).unwrap();
    let int = Value::Type(DType::Int32.to_tf());
    let both = |op: &str, a: &Attrs, inputs: Vec<Tensor>| {
        let s = run_op(op, a, inputs.clone(), &serial).unwrap();
        let p = run_op(op, a, inputs, &parallel).unwrap();
        assert_eq!(s[0], p[0], "{op}");
        s.into_iter().next().unwrap()
    };
    let at = |i: usize, y: usize, xx: usize, ch: usize| v[((i * h + y) * w + xx) * c + ch];
    // Softmax over the channels.
    let sm = both("Softmax", &attrs(&[("T", t_float())]), vec![x.clone()]);
    let sm = sm.as_slice::<f32>().unwrap();
    for row in 0..n * h * w {
        let r = &v[row * c..(row + 1) * c];
        let max = r.iter().fold(f64::MIN, |a, &b| a.max(b as f64));
        let sum: f64 = r.iter().map(|&b| (b as f64 - max).exp()).sum();
        for (j, &b) in r.iter().enumerate() {
            let want = (b as f64 - max).exp() / sum;
            assert!((sm[row * c + j] as f64 - want).abs() <= 4e-7 * want.max(1e-3), "softmax {row},{j}");
        }
    }
    // Mean over H×W, Sum over the last axis, Max over the last axis.
    let red = |op: &str, axes: &[i32], keep: bool| {
        let a = attrs(&[("T", t_float()), ("Tidx", int.clone()), ("keep_dims", Value::B(keep))]);
        both(op, &a, vec![x.clone(), i32s(axes)])
    };
    let mean = red("Mean", &[1, 2], false);
    let sum = red("Sum", &[3], true);
    let max = red("Max", &[3], false);
    for i in 0..n {
        for ch in 0..c {
            let want: f64 = (0..h * w).map(|k| at(i, k / w, k % w, ch) as f64).sum::<f64>() / (h * w) as f64;
            assert!((mean.as_slice::<f32>().unwrap()[i * c + ch] as f64 - want).abs() < 1e-6, "mean");
        }
        for k in 0..h * w {
            let row = &v[(i * h * w + k) * c..(i * h * w + k + 1) * c];
            let want: f64 = row.iter().map(|&b| b as f64).sum();
            assert!((sum.as_slice::<f32>().unwrap()[i * h * w + k] as f64 - want).abs() < 1e-5, "sum");
            let m = row.iter().copied().fold(f32::MIN, f32::max);
            assert_eq!(max.as_slice::<f32>().unwrap()[i * h * w + k], m, "max");
        }
    }
    // Transposes (NHWC to NCHW and back, and one that keeps the last axis) and a slice.
    let perm =
        |p: &[i32]| both("Transpose", &attrs(&[("T", t_float()), ("Tperm", int.clone())]), vec![x.clone(), i32s(p)]);
    let nchw = perm(&[0, 3, 1, 2]);
    let kept = perm(&[0, 2, 1, 3]);
    let (t1, t2) = (nchw.as_slice::<f32>().unwrap(), kept.as_slice::<f32>().unwrap());
    for i in 0..n {
        for y in 0..h {
            for xx in 0..w {
                for ch in 0..c {
                    assert_eq!(t1[((i * c + ch) * h + y) * w + xx], at(i, y, xx, ch));
                    assert_eq!(t2[((i * w + xx) * h + y) * c + ch], at(i, y, xx, ch));
                }
            }
        }
    }
    let back = both("Transpose", &attrs(&[("T", t_float()), ("Tperm", int.clone())]), vec![nchw, i32s(&[0, 2, 3, 1])]);
    assert_eq!(back, x);
    let sl = both(
        "Slice",
        &attrs(&[("T", t_float()), ("Index", int.clone())]),
        vec![x.clone(), i32s(&[1, 2, 3, 4]), i32s(&[2, -1, 5, 30])],
    );
    assert_eq!(sl.dims(), &[2, h - 2, 5, 30]);
    let s = sl.as_slice::<f32>().unwrap();
    for (k, &got) in s.iter().enumerate() {
        let (ch, rest) = (k % 30, k / 30);
        let (xx, rest) = (rest % 5, rest / 5);
        let (y, i) = (rest % (h - 2), rest / (h - 2));
        assert_eq!(got, at(i + 1, y + 2, xx + 3, ch + 4));
    }
}

/// Concatenations, stacks and bias additions large enough to be split across the pool give
/// the same bits on one thread and on two and match first principles: joins along every axis
/// (pieces of whole rows, and of bytes when there is a single row), blocks of one element
/// (the fixed-size path), and a bias added in place or, when the input is shared, into a new
/// output.
#[test]
fn large_joins_and_bias_additions_are_the_same_on_one_thread_and_two() {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let serial = KernelContext { intra_op: None, resources: None, step: None };
    let parallel = KernelContext { intra_op: Some(&pool), resources: None, step: None };
    let int = Value::Type(DType::Int32.to_tf());
    let (n, h, w) = (9usize, 21usize, 17usize); // every output over the 1 MB split threshold
    let channels = [37usize, 5, 41];
    let parts: Vec<Vec<f32>> =
        channels.iter().enumerate().map(|(i, &c)| values(n * h * w * c, 10 + i as u32)).collect();
    let total: usize = channels.iter().sum();
    // Along the channels (the last axis, also spelled -1).
    for axis in [3, -1] {
        let inputs: Vec<Tensor> = (parts.iter().zip(channels))
            .map(|(p, c)| Tensor::from_vec(&[n, h, w, c], p.clone()).unwrap())
            .chain([Tensor::scalar(axis)])
            .collect();
        let a = attrs(&[("T", t_float()), ("N", Value::I(3)), ("Tidx", int.clone())]);
        let s = run_op("ConcatV2", &a, inputs.clone(), &serial).unwrap();
        let p = run_op("ConcatV2", &a, inputs, &parallel).unwrap();
        assert_eq!(s[0], p[0]);
        assert_eq!(s[0].dims(), &[n, h, w, total]);
        let got = s[0].as_slice::<f32>().unwrap();
        for px in 0..n * h * w {
            let mut at = px * total;
            for (part, &c) in parts.iter().zip(&channels) {
                assert_eq!(&got[at..at + c], &part[px * c..(px + 1) * c], "pixel {px}");
                at += c;
            }
        }
    }
    // Along the batch (one row: the pieces are byte ranges) and along H.
    let same: Vec<Tensor> =
        (0..3).map(|i| Tensor::from_vec(&[n, h, w, 37], values(n * h * w * 37, 20 + i)).unwrap()).collect();
    for axis in [0usize, 1] {
        let inputs: Vec<Tensor> = same.iter().cloned().chain([Tensor::scalar(axis as i32)]).collect();
        let a = attrs(&[("T", t_float()), ("N", Value::I(3)), ("Tidx", int.clone())]);
        let s = run_op("ConcatV2", &a, inputs.clone(), &serial).unwrap();
        let p = run_op("ConcatV2", &a, inputs, &parallel).unwrap();
        assert_eq!(s[0], p[0]);
        let got = s[0].as_slice::<f32>().unwrap();
        let outer: usize = [n, h][..axis].iter().product();
        let block = same[0].len() / outer;
        for o in 0..outer {
            for (i, t) in same.iter().enumerate() {
                let want = &t.as_slice::<f32>().unwrap()[o * block..(o + 1) * block];
                assert_eq!(&got[(o * 3 + i) * block..(o * 3 + i + 1) * block], want, "axis {axis} row {o} part {i}");
            }
        }
    }
    // A stack along a new last axis: blocks of one float.
    let a = attrs(&[("T", t_float()), ("N", Value::I(3)), ("axis", Value::I(-1))]);
    let s = run_op("Pack", &a, same.clone(), &serial).unwrap();
    let p = run_op("Pack", &a, same.clone(), &parallel).unwrap();
    assert_eq!(s[0], p[0]);
    assert_eq!(s[0].dims(), &[n, h, w, 37, 3]);
    for (k, &got) in s[0].as_slice::<f32>().unwrap().iter().enumerate() {
        assert_eq!(got, same[k % 3].as_slice::<f32>().unwrap()[k / 3]);
    }
    // BiasAdd, channels last, with the input shared (kept here) and not.
    let x = Tensor::from_vec(&[n, h, w, 37], parts[0].clone()).unwrap();
    let bias = Tensor::from_vec(&[37], values(37, 30)).unwrap();
    let a = attrs(&[("T", t_float()), ("data_format", Value::S(b"NHWC".to_vec()))]);
    let shared = run_op("BiasAdd", &a, vec![x.clone(), bias.clone()], &parallel).unwrap();
    let b = bias.as_slice::<f32>().unwrap();
    for (k, (&got, &xv)) in shared[0].as_slice::<f32>().unwrap().iter().zip(&parts[0]).enumerate() {
        assert_eq!(got, xv + b[k % 37]);
    }
    let fresh = |ctx| {
        run_op("BiasAdd", &a, vec![Tensor::from_vec(&[n, h, w, 37], parts[0].clone()).unwrap(), bias.clone()], ctx)
    };
    assert_eq!(fresh(&serial).unwrap()[0], shared[0]);
    assert_eq!(fresh(&parallel).unwrap()[0], shared[0]);
    assert_eq!(x.as_slice::<f32>().unwrap(), &parts[0][..], "the shared input is left as it was");
}

/// A grouped `Conv2D` with one input channel per group (Keras 3's `DepthwiseConv2D`, as
/// ConvNeXt exports it) equals a naive float64 grouped convolution, for channel multipliers 1
/// and 2, strides 1 and 2, SAME and VALID, 3×3, 5×5 and 7×7 windows, on one thread and two; with a multiplier of 1 it
/// also equals `DepthwiseConv2dNative` on the reshaped filter bit for bit (the same kernel).
#[test]
fn grouped_convolutions_of_one_channel_per_group_are_depthwise() {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let (n, h, w) = (2usize, 12usize, 11usize);
    let cases = [
        (24usize, 1usize, 1i64, "SAME", 3usize),
        (8, 2, 2, "VALID", 3),
        (33, 1, 2, "SAME", 3),
        (11, 1, 2, "SAME", 5),
        (32, 1, 1, "SAME", 7),
        (20, 1, 2, "VALID", 5),
    ];
    for (c, m, stride, padding, k) in cases {
        let oc = c * m;
        let xv = values(n * h * w * c, 40);
        let fv = values(k * k * oc, 41);
        let x = Tensor::from_vec(&[n, h, w, c], xv.clone()).unwrap();
        let grouped_f = Tensor::from_vec(&[k, k, 1, oc], fv.clone()).unwrap();
        let a = attrs(&[
            ("T", t_float()),
            (
                "strides",
                Value::List(Box::new(ferroflow_proto::attr_value::ListValue {
                    i: vec![1, stride, stride, 1],
                    ..Default::default()
                })),
            ),
            ("padding", Value::S(padding.as_bytes().to_vec())),
        ]);
        let s = stride as usize;
        let same = padding == "SAME";
        let (oh, ow) = if same { (h.div_ceil(s), w.div_ceil(s)) } else { ((h - k) / s + 1, (w - k) / s + 1) };
        // TensorFlow's SAME: the total padding split with the smaller half before.
        let pad = |out: usize, inp: usize| if same { ((out - 1) * s + k).saturating_sub(inp) / 2 } else { 0 };
        let (ph, pw) = (pad(oh, h), pad(ow, w));
        for ctx in [
            KernelContext { intra_op: None, resources: None, step: None },
            KernelContext { intra_op: Some(&pool), resources: None, step: None },
        ] {
            let got = run_op("Conv2D", &a, vec![x.clone(), grouped_f.clone()], &ctx).unwrap().remove(0);
            assert_eq!(got.dims(), &[n, oh, ow, oc]);
            let g = got.as_slice::<f32>().unwrap();
            for b in 0..n {
                for y in 0..oh {
                    for xo in 0..ow {
                        for o in 0..oc {
                            let mut want = 0f64;
                            for ky in 0..k {
                                for kx in 0..k {
                                    let (iy, ix) =
                                        ((y * s + ky) as isize - ph as isize, (xo * s + kx) as isize - pw as isize);
                                    if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                                        continue;
                                    }
                                    let xi = xv[((b * h + iy as usize) * w + ix as usize) * c + o / m] as f64;
                                    want += xi * fv[(ky * k + kx) * oc + o] as f64;
                                }
                            }
                            let got = g[((b * oh + y) * ow + xo) * oc + o] as f64;
                            assert!((got - want).abs() <= 1e-5 * want.abs().max(1.0), "c {c} m {m}: {got} vs {want}");
                        }
                    }
                }
            }
            if m == 1 {
                let dw_f = grouped_f.reshaped(&[k, k, c, 1]).unwrap();
                let dw = run_op("DepthwiseConv2dNative", &a, vec![x.clone(), dw_f], &ctx).unwrap().remove(0);
                assert_eq!(dw, got);
            }
        }
    }
}
