//! Every registered gradient against central finite differences in float64: for
//! `loss = Σ f(x…) · r` (r a fixed random tensor, so the whole Jacobian is exercised),
//! `gradients(loss, xs)` must equal `(loss(x + h·eᵢ) − loss(x − h·eᵢ)) / 2h` for every element.
use std::collections::BTreeSet;

use ferroflow::autodiff::{gradients, ops_with_gradients};
use ferroflow::graph::Attrs;
use ferroflow::ops::RawOps;
use ferroflow::prelude::*;
use ferroflow::proto::{attr, attr_value::Value, AttrValue};

type Build = fn(&Scope, &[Output]) -> Output;

struct Case {
    op: &'static str,
    shapes: Vec<Vec<usize>>,
    /// Inputs drawn from this range.
    range: (f64, f64),
    build: Build,
}

fn values(n: usize, seed: u64, (lo, hi): (f64, f64)) -> Vec<f64> {
    let mut r = ferroflow::tensor::rng::Rng::new(seed);
    (0..n).map(|_| lo + (hi - lo) * r.unit()).collect()
}

fn t64() -> AttrValue {
    AttrValue { value: Some(Value::Type(DType::Double.to_tf())) }
}

fn op_with(s: &Scope, op: &str, inputs: &[Output], attrs: &[(&str, AttrValue)]) -> Output {
    let mut a = Attrs::new();
    a.insert("T".into(), t64());
    for (k, v) in attrs {
        a.insert(k.to_string(), v.clone());
    }
    Output { node: s.add_op(op, op, inputs, &[], a).unwrap(), index: 0 }
}

fn cases() -> Vec<Case> {
    let m23 = vec![2, 3];
    let c = |op, shapes: Vec<Vec<usize>>, range, build| Case { op, shapes, range, build };
    vec![
        c("Identity", vec![m23.clone()], (-2.0, 2.0), |s, x| s.identity(x[0]).unwrap()),
        c("Snapshot", vec![m23.clone()], (-2.0, 2.0), |s, x| s.unary("Snapshot", x[0]).unwrap()),
        c("AddV2", vec![m23.clone(), vec![3]], (-2.0, 2.0), |s, x| s.add_v2(x[0], x[1]).unwrap()),
        c("Add", vec![vec![3], m23.clone()], (-2.0, 2.0), |s, x| op_with(s, "Add", x, &[])),
        c("Sub", vec![m23.clone(), vec![2, 1]], (-2.0, 2.0), |s, x| s.sub(x[0], x[1]).unwrap()),
        c("Mul", vec![m23.clone(), vec![3]], (-2.0, 2.0), |s, x| s.mul(x[0], x[1]).unwrap()),
        c("RealDiv", vec![m23.clone(), vec![3]], (0.5, 2.0), |s, x| s.real_div(x[0], x[1]).unwrap()),
        c("Neg", vec![m23.clone()], (-2.0, 2.0), |s, x| s.unary("Neg", x[0]).unwrap()),
        c("Square", vec![m23.clone()], (-2.0, 2.0), |s, x| s.unary("Square", x[0]).unwrap()),
        c("Sqrt", vec![m23.clone()], (0.5, 2.0), |s, x| s.unary("Sqrt", x[0]).unwrap()),
        c("Exp", vec![m23.clone()], (-2.0, 2.0), |s, x| s.unary("Exp", x[0]).unwrap()),
        c("Log", vec![m23.clone()], (0.5, 2.0), |s, x| s.unary("Log", x[0]).unwrap()),
        c("Relu", vec![m23.clone()], (-2.0, 2.0), |s, x| s.relu(x[0]).unwrap()),
        c("Sigmoid", vec![m23.clone()], (-2.0, 2.0), |s, x| s.unary("Sigmoid", x[0]).unwrap()),
        c("Tanh", vec![m23.clone()], (-2.0, 2.0), |s, x| s.unary("Tanh", x[0]).unwrap()),
        c("MatMul", vec![vec![2, 4], vec![4, 3]], (-2.0, 2.0), |s, x| s.matmul(x[0], x[1], false, false).unwrap()),
        c("MatMul", vec![vec![2, 4], vec![3, 4]], (-2.0, 2.0), |s, x| s.matmul(x[0], x[1], false, true).unwrap()),
        c("MatMul", vec![vec![4, 2], vec![4, 3]], (-2.0, 2.0), |s, x| s.matmul(x[0], x[1], true, false).unwrap()),
        c("MatMul", vec![vec![4, 2], vec![3, 4]], (-2.0, 2.0), |s, x| s.matmul(x[0], x[1], true, true).unwrap()),
        c("BiasAdd", vec![vec![2, 2, 3], vec![3]], (-2.0, 2.0), |s, x| s.bias_add(x[0], x[1]).unwrap()),
        c("Sum", vec![vec![2, 3, 2]], (-2.0, 2.0), |s, x| s.reduce("Sum", x[0], &[1], false).unwrap()),
        c("Sum", vec![vec![2, 3, 2]], (-2.0, 2.0), |s, x| s.reduce("Sum", x[0], &[0, -1], true).unwrap()),
        c("Mean", vec![vec![2, 3, 2]], (-2.0, 2.0), |s, x| s.reduce("Mean", x[0], &[0, 2], false).unwrap()),
        c("Reshape", vec![m23.clone()], (-2.0, 2.0), |s, x| s.reshape(x[0], &[3, -1]).unwrap()),
        c("Cast", vec![m23.clone()], (-2.0, 2.0), |s, x| s.cast(x[0], DType::Double).unwrap()),
        c("Softmax", vec![m23.clone()], (-2.0, 2.0), |s, x| s.softmax(x[0]).unwrap()),
        c("LogSoftmax", vec![m23.clone()], (-2.0, 2.0), |s, x| s.unary("LogSoftmax", x[0]).unwrap()),
        c("Relu6", vec![m23.clone()], (-1.0, 7.0), |s, x| s.unary("Relu6", x[0]).unwrap()),
        c("Transpose", vec![vec![2, 3, 4]], (-2.0, 2.0), |s, x| {
            let perm = s.constant_from(&[3], &[2i32, 0, 1]).unwrap();
            op_with(s, "Transpose", &[x[0], perm], &[("Tperm", AttrValue { value: Some(Value::Type(3)) })])
        }),
        c("ReverseV2", vec![vec![2, 3, 4]], (-2.0, 2.0), |s, x| {
            let axes = s.constant_from(&[2], &[0i32, -1]).unwrap();
            op_with(s, "ReverseV2", &[x[0], axes], &[])
        }),
        c("Max", vec![vec![2, 3, 4]], (-2.0, 2.0), |s, x| s.reduce("Max", x[0], &[1], false).unwrap()),
        c("ConcatV2", vec![m23.clone(), vec![2, 2]], (-2.0, 2.0), |s, x| s.concat_v2(&[x[0], x[1]], -1i32).unwrap()),
        c("Slice", vec![vec![3, 4]], (-2.0, 2.0), |s, x| {
            let begin = s.constant_from(&[2], &[1i32, 1]).unwrap();
            let size = s.constant_from(&[2], &[2i32, 2]).unwrap();
            op_with(s, "Slice", &[x[0], begin, size], &[("Index", AttrValue { value: Some(Value::Type(3)) })])
        }),
        // x[newaxis, 1:3, -1:-6:-2, ...], then [..., 1] (ellipsis, shrink), then [:, 1:3]
        // under begin/end masks: every kind of axis StridedSlice's gradient writes back through.
        c("StridedSlice", vec![vec![3, 5, 2]], (-2.0, 2.0), |s, x| {
            let v = |a: [i32; 4]| s.constant_from(&[4], &a).unwrap();
            let i32t = ("Index", AttrValue { value: Some(Value::Type(3)) });
            let int = |v: i64| AttrValue { value: Some(Value::I(v)) };
            let y = op_with(
                s,
                "StridedSlice",
                &[x[0], v([0, 1, -1, 0]), v([0, 3, -6, 0]), v([1, 1, -2, 1])],
                &[i32t.clone(), ("new_axis_mask", int(1)), ("ellipsis_mask", int(8))],
            );
            let b = |a: [i32; 2]| s.constant_from(&[2], &a).unwrap();
            let y = op_with(
                s,
                "StridedSlice",
                &[y, b([0, 1]), b([0, 2]), b([1, 1])],
                &[i32t.clone(), ("ellipsis_mask", int(1)), ("shrink_axis_mask", int(2))],
            );
            let y = op_with(
                s,
                "StridedSlice",
                &[y, b([0, 1]), b([9, 3]), b([1, 1])],
                &[i32t, ("begin_mask", int(1)), ("end_mask", int(1))],
            );
            // StridedSlice infers no shape yet; the loss's Sum needs a known rank.
            s.reshape(y, &[1, 1, 3]).unwrap()
        }),
        c("StridedSliceGrad", vec![vec![2, 2]], (-2.0, 2.0), |s, x| {
            let v = |a: [i32; 2]| s.constant_from(&[2], &a).unwrap();
            let i32t = ("Index", AttrValue { value: Some(Value::Type(3)) });
            op_with(s, "StridedSliceGrad", &[v([3, 5]), v([0, 4]), v([3, 0]), v([2, -3]), x[0]], &[i32t])
        }),
        c("Select", vec![m23.clone(), m23.clone()], (-2.0, 2.0), |s, x| {
            let c =
                s.constant(&Tensor::from_vec(&[2, 3], vec![true, false, true, false, false, true]).unwrap()).unwrap();
            op_with(s, "Select", &[c, x[0], x[1]], &[])
        }),
        c("SelectV2", vec![m23.clone(), vec![3]], (-2.0, 2.0), |s, x| {
            let c = s.constant(&Tensor::from_vec(&[2, 1], vec![true, false]).unwrap()).unwrap();
            op_with(s, "SelectV2", &[c, x[0], x[1]], &[])
        }),
        c("SoftmaxCrossEntropyWithLogits", vec![m23.clone(), m23.clone()], (0.1, 1.0), |s, x| {
            let mut a = Attrs::new();
            a.insert("T".into(), t64());
            // Labels must be distributions (TensorFlow's backprop assumes rows summing to 1).
            let labels = s.real_div(x[1], s.reduce("Sum", x[1], &[1], true).unwrap()).unwrap();
            let id = s.add_op("SoftmaxCrossEntropyWithLogits", "xent", &[x[0], labels], &[], a).unwrap();
            Output { node: id, index: 0 }
        }),
        c("SparseSoftmaxCrossEntropyWithLogits", vec![m23.clone()], (-2.0, 2.0), |s, x| {
            let labels = s.constant(&Tensor::from_vec(&[2], vec![2i64, 0]).unwrap()).unwrap();
            let mut a = Attrs::new();
            a.insert("T".into(), t64());
            a.insert("Tlabels".into(), AttrValue { value: Some(Value::Type(DType::Int64.to_tf())) });
            let id = s.add_op("SparseSoftmaxCrossEntropyWithLogits", "xent", &[x[0], labels], &[], a).unwrap();
            Output { node: id, index: 0 }
        }),
        c("GatherV2", vec![vec![4, 3]], (-2.0, 2.0), |s, x| {
            let ids = s.constant_from(&[5], &[2i32, 0, 2, 3, 2]).unwrap();
            let axis = s.scalar(0i32).unwrap();
            let mut a = Attrs::new();
            a.insert("Tparams".into(), t64());
            a.insert("Tindices".into(), AttrValue { value: Some(Value::Type(3)) });
            a.insert("Taxis".into(), AttrValue { value: Some(Value::Type(3)) });
            Output { node: s.add_op("GatherV2", "gather", &[x[0], ids, axis], &[], a).unwrap(), index: 0 }
        }),
        // Along a middle axis and the last (negative), with 2-D indices that repeat.
        c("GatherV2", vec![vec![2, 4, 3]], (-2.0, 2.0), |s, x| {
            let ids = s.constant_from(&[2, 2], &[3i32, 1, 1, 0]).unwrap();
            s.gather_v2(x[0], ids, s.scalar(1i32).unwrap()).unwrap()
        }),
        c("GatherV2", vec![vec![2, 3, 4]], (-2.0, 2.0), |s, x| {
            let ids = s.constant_from(&[3], &[0i64, 3, 0]).unwrap();
            s.gather_v2(x[0], ids, s.scalar(-1i32).unwrap()).unwrap()
        }),
        c("AddN", vec![m23.clone(), m23.clone()], (-2.0, 2.0), |s, x| {
            op_with(s, "AddN", &[x[0], x[1], x[0]], &[("N", AttrValue { value: Some(Value::I(3)) })])
        }),
        c("Conv2D", vec![vec![2, 5, 5, 3], vec![3, 3, 3, 4]], (-1.0, 1.0), |s, x| {
            window(s, "Conv2D", x, [2, 2], "SAME")
        }),
        c("Conv2D", vec![vec![1, 6, 5, 2], vec![2, 3, 2, 3]], (-1.0, 1.0), |s, x| {
            window(s, "Conv2D", x, [1, 2], "VALID")
        }),
        c("DepthwiseConv2dNative", vec![vec![2, 5, 5, 3], vec![3, 3, 3, 2]], (-1.0, 1.0), |s, x| {
            window(s, "DepthwiseConv2dNative", x, [2, 2], "SAME")
        }),
        c("DepthwiseConv2dNative", vec![vec![1, 6, 5, 2], vec![2, 3, 2, 1]], (-1.0, 1.0), |s, x| {
            window(s, "DepthwiseConv2dNative", x, [1, 2], "VALID")
        }),
        c("DepthwiseConv2dNativeBackpropInput", vec![vec![3, 3, 2, 2], vec![2, 3, 3, 4]], (-1.0, 1.0), |s, x| {
            let sizes = s.constant_from(&[4], &[2i32, 5, 5, 2]).unwrap();
            op_with(s, "DepthwiseConv2dNativeBackpropInput", &[sizes, x[0], x[1]], &conv_attrs([2, 2], "SAME"))
        }),
        c("DepthwiseConv2dNativeBackpropFilter", vec![vec![2, 5, 5, 2], vec![2, 3, 3, 4]], (-1.0, 1.0), |s, x| {
            let sizes = s.constant_from(&[4], &[3i32, 3, 2, 2]).unwrap();
            op_with(s, "DepthwiseConv2dNativeBackpropFilter", &[x[0], sizes, x[1]], &conv_attrs([2, 2], "SAME"))
        }),
        // Training mode: the batch statistics depend on x too; the moving averages blend in.
        c("FusedBatchNormV3", vec![vec![2, 3, 3, 2], vec![2], vec![2]], (-2.0, 2.0), |s, x| batch_norm(s, x, true)),
        c("FusedBatchNormV3", vec![vec![2, 3, 3, 2], vec![2], vec![2]], (-2.0, 2.0), |s, x| batch_norm(s, x, false)),
        c("MaxPool", vec![vec![2, 5, 5, 3]], (-2.0, 2.0), |s, x| window(s, "MaxPool", x, [2, 2], "SAME")),
        c("MaxPool", vec![vec![1, 6, 6, 2]], (-2.0, 2.0), |s, x| window(s, "MaxPool", x, [1, 1], "VALID")),
        c("AvgPool", vec![vec![2, 5, 5, 3]], (-2.0, 2.0), |s, x| window(s, "AvgPool", x, [2, 2], "SAME")),
        c("AvgPool", vec![vec![1, 6, 6, 2]], (-2.0, 2.0), |s, x| window(s, "AvgPool", x, [2, 1], "VALID")),
        c("Abs", vec![m23.clone()], (-2.0, 2.0), |s, x| s.unary("Abs", x[0]).unwrap()),
        c("Rsqrt", vec![m23.clone()], (0.5, 2.0), |s, x| s.unary("Rsqrt", x[0]).unwrap()),
        c("Elu", vec![m23.clone()], (-2.0, 2.0), |s, x| s.unary("Elu", x[0]).unwrap()),
        c("Selu", vec![m23.clone()], (-2.0, 2.0), |s, x| s.unary("Selu", x[0]).unwrap()),
        c("Softplus", vec![m23.clone()], (-2.0, 2.0), |s, x| s.unary("Softplus", x[0]).unwrap()),
        c("Softsign", vec![m23.clone()], (-2.0, 2.0), |s, x| s.unary("Softsign", x[0]).unwrap()),
        c("Erf", vec![m23.clone()], (-2.0, 2.0), |s, x| s.unary("Erf", x[0]).unwrap()),
        c("Sign", vec![m23.clone()], (-2.0, 2.0), |s, x| s.unary("Sign", x[0]).unwrap()),
        c("Reciprocal", vec![m23.clone()], (0.5, 2.0), |s, x| s.unary("Reciprocal", x[0]).unwrap()),
        c("Log1p", vec![m23.clone()], (0.0, 2.0), |s, x| s.unary("Log1p", x[0]).unwrap()),
        c("Expm1", vec![m23.clone()], (-2.0, 2.0), |s, x| s.unary("Expm1", x[0]).unwrap()),
        c("Sin", vec![m23.clone()], (-2.0, 2.0), |s, x| s.unary("Sin", x[0]).unwrap()),
        c("Cos", vec![m23.clone()], (-2.0, 2.0), |s, x| s.unary("Cos", x[0]).unwrap()),
        c("Maximum", vec![m23.clone(), vec![3]], (-2.0, 2.0), |s, x| s.maximum(x[0], x[1]).unwrap()),
        c("Minimum", vec![vec![3], m23.clone()], (-2.0, 2.0), |s, x| s.minimum(x[0], x[1]).unwrap()),
        c("SquaredDifference", vec![m23.clone(), vec![2, 1]], (-2.0, 2.0), |s, x| {
            op_with(s, "SquaredDifference", x, &[])
        }),
        c("Pow", vec![m23.clone(), vec![3]], (0.5, 2.0), |s, x| op_with(s, "Pow", x, &[])),
        c("FloorMod", vec![m23.clone(), vec![3]], (0.5, 2.0), |s, x| op_with(s, "FloorMod", x, &[])),
        c("LeakyRelu", vec![m23.clone()], (-2.0, 2.0), |s, x| {
            op_with(s, "LeakyRelu", x, &[("alpha", attr::float(0.1))])
        }),
        c("PlaceholderWithDefault", vec![m23.clone()], (-2.0, 2.0), |s, x| {
            let mut a = Attrs::new();
            a.insert("dtype".into(), t64());
            a.insert("shape".into(), attr::shape(&Shape::known(&[2, 3])));
            let id = s.add_op("PlaceholderWithDefault", "default", &[x[0]], &[], a).unwrap();
            s.unary("Square", Output { node: id, index: 0 }).unwrap()
        }),
        c("IdentityN", vec![m23.clone(), m23.clone()], (-2.0, 2.0), |s, x| {
            let o = s.identity_n(&[x[0], x[1]]).unwrap();
            s.mul(o[0], o[1]).unwrap()
        }),
        c("ExpandDims", vec![m23.clone()], (-2.0, 2.0), |s, x| {
            let dim = s.scalar(1i32).unwrap();
            op_with(s, "ExpandDims", &[x[0], dim], &[("Tdim", attr::dtype(DType::Int32))])
        }),
        c("Squeeze", vec![vec![2, 1, 3]], (-2.0, 2.0), |s, x| {
            op_with(s, "Squeeze", &[x[0]], &[("squeeze_dims", attr::ints(&[1]))])
        }),
        c("Fill", vec![vec![]], (-2.0, 2.0), |s, x| {
            let dims = s.constant_from(&[2], &[2i32, 3]).unwrap();
            op_with(s, "Fill", &[dims, x[0]], &[("index_type", attr::dtype(DType::Int32))])
        }),
        c("Pack", vec![m23.clone(), m23.clone()], (-2.0, 2.0), |s, x| {
            op_with(s, "Pack", x, &[("N", attr::int(2)), ("axis", attr::int(1))])
        }),
        c("Unpack", vec![vec![3, 2]], (-2.0, 2.0), |s, x| {
            let u = op_with(s, "Unpack", x, &[("num", attr::int(3)), ("axis", attr::int(0))]);
            // Output 1 gets no gradient: it is given zeros.
            s.mul(u, Output { node: u.node, index: 2 }).unwrap()
        }),
        c("Split", vec![vec![2, 4]], (-2.0, 2.0), |s, x| {
            let axis = s.scalar(1i32).unwrap();
            let mut a = Attrs::new();
            a.insert("T".into(), t64());
            a.insert("num_split".into(), attr::int(2));
            let id = s.add_op("Split", "split", &[axis, x[0]], &[], a).unwrap();
            s.mul(Output { node: id, index: 0 }, Output { node: id, index: 1 }).unwrap()
        }),
        c("SplitV", vec![vec![2, 5]], (-2.0, 2.0), |s, x| {
            let sizes = s.constant_from(&[2], &[2i64, 3]).unwrap();
            let axis = s.scalar(1i32).unwrap();
            let id = op_with(s, "SplitV", &[x[0], sizes, axis], &[("num_split", attr::int(2))]).node;
            s.unary("Square", Output { node: id, index: 1 }).unwrap()
        }),
        c("Pad", vec![m23.clone()], (-2.0, 2.0), |s, x| {
            let p = s.constant_from(&[2, 2], &[1i32, 0, 0, 2]).unwrap();
            op_with(s, "Pad", &[x[0], p], &[("Tpaddings", attr::dtype(DType::Int32))])
        }),
        c("PadV2", vec![m23.clone()], (-2.0, 2.0), |s, x| {
            let p = s.constant_from(&[2, 2], &[0i64, 1, 2, 1]).unwrap();
            let fill = s.scalar(0.5f64).unwrap();
            op_with(s, "PadV2", &[x[0], p, fill], &[("Tpaddings", attr::dtype(DType::Int64))])
        }),
        c("Cumsum", vec![vec![2, 4]], (-2.0, 2.0), |s, x| {
            let axis = s.scalar(1i32).unwrap();
            op_with(s, "Cumsum", &[x[0], axis], &[("exclusive", attr::boolean(true))])
        }),
        c("Cumsum", vec![vec![3, 2]], (-2.0, 2.0), |s, x| {
            let axis = s.scalar(0i32).unwrap();
            op_with(s, "Cumsum", &[x[0], axis], &[("reverse", attr::boolean(true))])
        }),
        c("Cumprod", vec![vec![2, 4]], (0.5, 2.0), |s, x| {
            let axis = s.scalar(1i32).unwrap();
            op_with(s, "Cumprod", &[x[0], axis], &[("exclusive", attr::boolean(true))])
        }),
        c("Cumprod", vec![vec![3, 2]], (-2.0, -0.5), |s, x| {
            let axis = s.scalar(0i32).unwrap();
            op_with(s, "Cumprod", &[x[0], axis], &[("reverse", attr::boolean(true))])
        }),
        // Over the middle and last axes, over all of them, and with negative values.
        c("Prod", vec![vec![2, 3, 4]], (0.5, 1.5), |s, x| s.reduce("Prod", x[0], &[1, -1], false).unwrap()),
        c("Prod", vec![vec![3, 2]], (-1.5, 1.5), |s, x| s.reduce("Prod", x[0], &[0, 1], true).unwrap()),
        c("Prod", vec![vec![2, 3, 2]], (-1.5, 1.5), |s, x| s.reduce("Prod", x[0], &[0], false).unwrap()),
        c("BatchMatMulV2", vec![vec![2, 2, 3], vec![2, 3, 4]], (-2.0, 2.0), |s, x| op_with(s, "BatchMatMulV2", x, &[])),
        c("BatchMatMulV2", vec![vec![2, 3, 2], vec![2, 4, 3]], (-2.0, 2.0), |s, x| {
            op_with(s, "BatchMatMulV2", x, &[("adj_x", attr::boolean(true)), ("adj_y", attr::boolean(true))])
        }),
        c("Min", vec![vec![2, 3, 4]], (-2.0, 2.0), |s, x| s.reduce("Min", x[0], &[0, 2], true).unwrap()),
        c("ReluGrad", vec![m23.clone(), m23.clone()], (-2.0, 2.0), |s, x| op_with(s, "ReluGrad", x, &[])),
        c("Relu6Grad", vec![m23.clone(), m23.clone()], (-1.0, 7.0), |s, x| op_with(s, "Relu6Grad", x, &[])),
        c("SigmoidGrad", vec![m23.clone(), m23.clone()], (0.1, 0.9), |s, x| op_with(s, "SigmoidGrad", x, &[])),
        c("TanhGrad", vec![m23.clone(), m23.clone()], (-0.9, 0.9), |s, x| op_with(s, "TanhGrad", x, &[])),
        c("BiasAddGrad", vec![vec![2, 3, 4]], (-2.0, 2.0), |s, x| op_with(s, "BiasAddGrad", x, &[])),
        c("BroadcastTo", vec![vec![3]], (-2.0, 2.0), |s, x| {
            let shape = s.constant_from(&[2], &[2i32, 3]).unwrap();
            op_with(s, "BroadcastTo", &[x[0], shape], &[("Tidx", attr::dtype(DType::Int32))])
        }),
        c("OptionalFromValue", vec![m23.clone()], (-2.0, 2.0), |s, x| optional_round_trip(s, x[0])),
        c("OptionalGetValue", vec![m23.clone()], (-2.0, 2.0), |s, x| optional_round_trip(s, x[0])),
        c("Tile", vec![vec![2, 3]], (-2.0, 2.0), |s, x| {
            let m = s.constant_from(&[2], &[3i32, 2]).unwrap();
            op_with(s, "Tile", &[x[0], m], &[("Tmultiples", attr::dtype(DType::Int32))])
        }),
        c("UnsortedSegmentSum", vec![vec![4, 3]], (-2.0, 2.0), |s, x| {
            // Row 2 has a negative id: dropped, so its gradient is zero.
            let ids = s.constant_from(&[4], &[1i32, 0, -1, 1]).unwrap();
            let n = s.scalar(3i32).unwrap();
            let a = [("Tindices", attr::dtype(DType::Int32)), ("Tnumsegments", attr::dtype(DType::Int32))];
            op_with(s, "UnsortedSegmentSum", &[x[0], ids, n], &a)
        }),
        c("Conv2DBackpropInput", vec![vec![3, 3, 2, 4], vec![2, 3, 3, 4]], (-1.0, 1.0), |s, x| {
            let sizes = s.constant_from(&[4], &[2i32, 5, 5, 2]).unwrap();
            let mut attrs = conv_attrs([2, 2], "SAME");
            attrs.retain(|(k, _)| *k != "ksize");
            op_with(s, "Conv2DBackpropInput", &[sizes, x[0], x[1]], &attrs)
        }),
        c("Conv2DBackpropFilter", vec![vec![2, 5, 5, 2], vec![2, 3, 3, 4]], (-1.0, 1.0), |s, x| {
            let sizes = s.constant_from(&[4], &[3i32, 3, 2, 4]).unwrap();
            op_with(s, "Conv2DBackpropFilter", &[x[0], sizes, x[1]], &conv_attrs([2, 2], "SAME"))
        }),
        c("AvgPoolGrad", vec![vec![2, 3, 3, 3]], (-1.0, 1.0), |s, x| {
            let sizes = s.constant_from(&[4], &[2i32, 5, 5, 3]).unwrap();
            let mut attrs = conv_attrs([2, 2], "SAME");
            attrs.push(("ksize", attr::ints(&[1, 3, 3, 1])));
            op_with(s, "AvgPoolGrad", &[sizes, x[0]], &attrs)
        }),
        c("Xlogy", vec![m23.clone(), vec![3]], (0.5, 2.0), |s, x| op_with(s, "Xlogy", x, &[])),
        c("Xdivy", vec![vec![3], m23.clone()], (0.5, 2.0), |s, x| op_with(s, "Xdivy", x, &[])),
        c("DivNoNan", vec![vec![3], m23.clone()], (0.5, 2.0), |s, x| op_with(s, "DivNoNan", x, &[])),
        // cond (Switch/Merge): each branch uses one input, so the other input's gradient is
        // the zeros guarded by its switch; both predicates.
        c("Switch", vec![m23.clone(), m23.clone()], (-2.0, 2.0), |s, x| cond(s, x, true)),
        c("Merge", vec![m23.clone(), m23.clone()], (-2.0, 2.0), |s, x| cond(s, x, false)),
    ]
}

/// `strides` and `padding` attrs of a convolution or pool.
fn conv_attrs(strides: [i64; 2], padding: &str) -> Vec<(&'static str, AttrValue)> {
    vec![("strides", attr::ints(&[1, strides[0], strides[1], 1])), ("padding", attr::string(padding))]
}

/// `OptionalGetValue(OptionalFromValue(x))`.
fn optional_round_trip(s: &Scope, x: Output) -> Output {
    let mut a = Attrs::new();
    a.insert("Toutput_types".into(), attr::dtypes(&[DType::Double]));
    let opt = s.add_op("OptionalFromValue", "optional", &[x], &[], a).unwrap();
    let mut a = Attrs::new();
    a.insert("output_types".into(), attr::dtypes(&[DType::Double]));
    let shapes = ferroflow::proto::attr_value::ListValue {
        shape: vec![ferroflow::proto::convert::shape_to_proto(&Shape::known(&[2, 3]))],
        ..Default::default()
    };
    a.insert("output_shapes".into(), attr::list(shapes));
    Output { node: s.add_op("OptionalGetValue", "value", &[Output { node: opt, index: 0 }], &[], a).unwrap(), index: 0 }
}

/// A convolution (filter `x[1]`) or a 3×3 pool (`x[0]` only), NHWC.
fn window(s: &Scope, op: &str, x: &[Output], strides: [i64; 2], padding: &str) -> Output {
    let ints = |v: Vec<i64>| AttrValue {
        value: Some(Value::List(Box::new(ferroflow::proto::attr_value::ListValue { i: v, ..Default::default() }))),
    };
    let mut attrs = vec![
        ("strides", ints(vec![1, strides[0], strides[1], 1])),
        ("padding", AttrValue { value: Some(Value::S(padding.as_bytes().to_vec())) }),
    ];
    if op == "Conv2D" || op == "DepthwiseConv2dNative" {
        op_with(s, op, &x[..2], &attrs)
    } else {
        attrs.push(("ksize", ints(vec![1, 3, 3, 1])));
        op_with(s, op, &x[..1], &attrs)
    }
}

/// `FusedBatchNormV3(x, scale = x[1], offset = x[2])` in float64 (ferroflow's kernel; TensorFlow
/// has float only), with fixed moving statistics and epsilon 1e-3; output `y`.
fn batch_norm(s: &Scope, x: &[Output], training: bool) -> Output {
    let mean = s.constant_from(&[2], &[0.3f64, -0.2]).unwrap();
    let var = s.constant_from(&[2], &[0.8f64, 1.5]).unwrap();
    let attrs = [
        ("U", t64()),
        ("epsilon", attr::float(1e-3)),
        ("is_training", attr::boolean(training)),
        ("exponential_avg_factor", attr::float(if training { 0.01 } else { 1.0 })),
    ];
    op_with(s, "FusedBatchNormV3", &[x[0], x[1], x[2], mean, var], &attrs)
}

fn cond(s: &Scope, x: &[Output], pred: bool) -> Output {
    let p = s.scalar(pred).unwrap();
    s.cond::<ferroflow::ops::BuildError>(
        p,
        x,
        |t, i| Ok(vec![t.mul(t.unary("Exp", i[0])?, t.scalar(2.0f64)?)?]),
        |f, i| Ok(vec![f.unary("Square", i[1])?]),
    )
    .unwrap()[0]
}

fn check(case: &Case) {
    let s = Scope::new();
    let xs: Vec<Output> = case
        .shapes
        .iter()
        .enumerate()
        .map(|(i, sh)| s.with_name(&format!("x{i}")).placeholder(DType::Double, &Shape::known(sh)).unwrap())
        .collect();
    let y = (case.build)(&s, &xs);
    // loss = Σ y · r
    let inputs: Vec<Tensor> = case
        .shapes
        .iter()
        .enumerate()
        .map(|(i, sh)| Tensor::from_vec(sh, values(sh.iter().product(), i as u64 + 1, case.range)).unwrap())
        .collect();
    // y's shape, from running the forward graph once.
    let ydims = {
        let g0 = s.graph();
        let sess = Session::new(g0.clone(), SessionOptions::default()).unwrap();
        let feeds: Vec<(String, Tensor)> = xs.iter().map(|x| g0.output_name(*x)).zip(inputs.iter().cloned()).collect();
        let feeds: Vec<(&str, Tensor)> = feeds.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
        sess.run(&feeds, &[&g0.output_name(y)], &[]).unwrap()[0].dims().to_vec()
    };
    let n: usize = ydims.iter().product();
    let r = s.constant(&Tensor::from_vec(&ydims, values(n, 99, (-1.0, 1.0))).unwrap()).unwrap();
    let axes: Vec<i32> = (0..ydims.len() as i32).collect();
    let loss = s.reduce("Sum", s.mul(y, r).unwrap(), &axes, false).unwrap();
    let grads = gradients(&s, &[loss], &xs, None).unwrap_or_else(|e| panic!("{}: {e}", case.op));
    let g = s.graph();
    let sess = Session::new(g.clone(), SessionOptions::default()).unwrap();
    let names: Vec<String> = xs.iter().map(|x| g.output_name(*x)).collect();
    let feeds = |vals: &[Tensor]| -> Vec<(&str, Tensor)> {
        names.iter().map(String::as_str).zip(vals.iter().cloned()).collect()
    };
    let loss_name = g.output_name(loss);
    let grad_names: Vec<String> = grads.iter().map(|o| g.output_name(o.expect("every x has a gradient"))).collect();
    let fetch: Vec<&str> = grad_names.iter().map(String::as_str).collect();
    let analytic = sess.run(&feeds(&inputs), &fetch, &[]).unwrap();
    let h = 1e-6;
    for (k, x) in inputs.iter().enumerate() {
        assert_eq!(analytic[k].dims(), x.dims(), "{}: gradient of input {k} has the input's shape", case.op);
        let a = analytic[k].as_slice::<f64>().unwrap();
        for i in 0..x.len() {
            let at = |delta: f64| {
                let mut vals = inputs.clone();
                let mut v = vals[k].as_slice::<f64>().unwrap().to_vec();
                v[i] += delta;
                vals[k] = Tensor::from_vec(x.dims(), v).unwrap();
                sess.run(&feeds(&vals), &[&loss_name], &[]).unwrap()[0].scalar_value::<f64>().unwrap()
            };
            let numeric = (at(h) - at(-h)) / (2.0 * h);
            let err = (a[i] - numeric).abs();
            assert!(
                err <= 1e-6 * numeric.abs().max(1.0),
                "{}: input {k} element {i}: analytic {} vs numeric {numeric}",
                case.op,
                a[i]
            );
        }
    }
}

#[test]
fn every_registered_gradient_passes_a_finite_difference_check() {
    let mut cases = cases();
    cases.extend(attention_cases());
    cases.extend(list_cases());
    cases.extend(spatial_cases());
    cases.extend(detection_cases());
    for c in &cases {
        check(c);
    }
    let mut covered: BTreeSet<&str> = cases.iter().map(|c| c.op).collect();
    // Both predicates above go through both Switch and Merge gradients.
    covered.extend(["Switch", "Merge"]);
    // Checked by `gradient_of_a_variable_read_flows_to_its_handle` below.
    covered.insert("ReadVariableOp");
    // Its gradient is an error (TensorFlow's): `prevent_gradient_is_an_error_with_its_message`.
    covered.insert("PreventGradient");
    // Its crops are float32 whatever the image's type, too coarse for finite differences:
    // tests/detection.rs `crop_and_resize_gradients_match_tensorflow` checks autodiff's image
    // and box gradients against TensorFlow's.
    covered.insert("CropAndResize");
    // The same for the resizes whose output is float32 whatever the input's type: tests/
    // spatial.rs `resize_gradients_built_by_autodiff_match_tensorflow`.
    covered.extend(["ResizeBicubic", "ScaleAndTranslate", "ResizeBilinear"]);
    let missing: Vec<&str> = ops_with_gradients().into_iter().filter(|op| !covered.contains(op)).collect();
    assert!(missing.is_empty(), "gradients without a finite-difference case: {missing:?}");
}

#[test]
fn unconnected_xs_get_none_and_stop_gradient_stops() {
    let s = Scope::new();
    let x = s.with_name("x").placeholder(DType::Double, &Shape::known(&[2])).unwrap();
    let z = s.with_name("z").placeholder(DType::Double, &Shape::known(&[2])).unwrap();
    let y =
        s.add_v2(s.unary("Square", x).unwrap(), s.unary("StopGradient", s.unary("Exp", x).unwrap()).unwrap()).unwrap();
    let grads = gradients(&s, &[y], &[x, z], None).unwrap();
    assert!(grads[1].is_none(), "z does not reach y");
    let g = s.graph();
    let sess = Session::new(g.clone(), SessionOptions::default()).unwrap();
    let out = sess.run(
        &[("x:0", Tensor::from_vec(&[2], vec![1.5f64, -2.0]).unwrap())],
        &[&g.output_name(grads[0].unwrap())],
        &[],
    );
    assert_eq!(
        out.unwrap()[0].as_slice::<f64>().unwrap(),
        &[3.0, -4.0],
        "only d(x^2)/dx = 2x; StopGradient blocks exp"
    );
}

#[test]
fn ops_without_gradients_are_errors_naming_the_node_and_what_is_missing() {
    let s = Scope::new();
    let x = s.with_name("x").placeholder(DType::Double, &Shape::known(&[2])).unwrap();
    let p = s.constant_from(&[1, 2], &[1i32, 1]).unwrap();
    let y = op_with(&s.with_name("weird"), "MirrorPad", &[x, p], &[("mode", attr::string("REFLECT"))]);
    let e = gradients(&s, &[y], &[x], None).unwrap_err().to_string();
    assert!(e.contains("'MirrorPad'") && e.contains("'weird'") && e.contains("MirrorPadGrad"), "{e}");
}

#[test]
fn prevent_gradient_is_an_error_with_its_message() {
    let s = Scope::new();
    let x = s.with_name("x").placeholder(DType::Double, &Shape::known(&[2])).unwrap();
    let y = op_with(&s.with_name("guard"), "PreventGradient", &[x], &[("message", attr::string("second derivative"))]);
    let e = gradients(&s, &[y], &[x], None).unwrap_err().to_string();
    assert!(e.contains("'guard'") && e.contains("explicitly disabled") && e.contains("second derivative"), "{e}");
}

#[test]
fn not_differentiable_ops_pass_no_gradient() {
    // y = x² + Floor(x)·x: Floor is declared not differentiable, so only the paths around it
    // count: d/dx = 2x + Floor(x).
    let s = Scope::new();
    let x = s.with_name("x").placeholder(DType::Double, &Shape::known(&[2])).unwrap();
    let y = s.add_v2(s.unary("Square", x).unwrap(), s.mul(s.unary("Floor", x).unwrap(), x).unwrap()).unwrap();
    let g = gradients(&s, &[y], &[x], None).unwrap()[0].unwrap();
    let graph = s.graph();
    let sess = Session::new(graph.clone(), SessionOptions::default()).unwrap();
    let out = sess.run(&[("x:0", Tensor::from_vec(&[2], vec![1.5f64, -2.5]).unwrap())], &[&graph.output_name(g)], &[]);
    assert_eq!(out.unwrap()[0].as_slice::<f64>().unwrap(), &[4.0, -8.0]);
}

#[test]
fn mlp_gradients_match_tensorflows_tf_gradients() {
    // fixtures/tf/gradients: TensorFlow's graph with its own gradient nodes, and the values of
    // loss and d loss / d (w1, b1, w2, b2). Our gradients of the same forward graph must match.
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tf");
    let g = ferroflow::load_graph(&dir.join("gradients.pb")).unwrap();
    let inputs = ferroflow::tensor::npy::read_npz(&dir.join("gradients.inputs.npz")).unwrap();
    let expected = ferroflow::tensor::npy::read_npz(&dir.join("gradients.expected.npz")).unwrap();
    let s = Scope::from_graph(g);
    let out = |name: &str| s.with_graph(|g| g.output_by_name(name).unwrap());
    let loss = out("loss:0");
    let xs: Vec<Output> = ["w1:0", "b1:0", "w2:0", "b2:0"].iter().map(|n| out(n)).collect();
    let grads = gradients(&s, &[loss], &xs, None).unwrap();
    let g = s.graph();
    let names: Vec<String> = grads.iter().map(|o| g.output_name(o.unwrap())).collect();
    let sess = Session::new(g, SessionOptions::default()).unwrap();
    let feeds: Vec<(&str, Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let fetches: Vec<&str> = names.iter().map(String::as_str).collect();
    let got = sess.run(&feeds, &fetches, &[]).unwrap();
    // expected[0] is the loss; then the four gradients in order.
    for ((name, want), got) in expected[1..].iter().zip(&got) {
        ferroflow::testing::compare(got, want, 1e-5, 1e-5).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn sparse_labels_out_of_range_are_an_error_naming_the_node() {
    let s = Scope::new();
    let logits = s.with_name("logits").placeholder(DType::Float, &Shape::known(&[2, 3])).unwrap();
    let ids = s.with_name("ids").placeholder(DType::Int64, &Shape::known(&[2])).unwrap();
    let mut a = Attrs::new();
    a.insert("T".into(), AttrValue { value: Some(Value::Type(DType::Float.to_tf())) });
    a.insert("Tlabels".into(), AttrValue { value: Some(Value::Type(DType::Int64.to_tf())) });
    s.add_op("SparseSoftmaxCrossEntropyWithLogits", "xent", &[logits, ids], &[], a).unwrap();
    let sess = Session::new(s.graph(), SessionOptions::default()).unwrap();
    let feeds = [
        ("logits:0", Tensor::from_vec(&[2, 3], vec![0.0f32; 6]).unwrap()),
        ("ids:0", Tensor::from_vec(&[2], vec![1i64, 3]).unwrap()),
    ];
    let e = sess.run(&feeds, &["xent:0"], &[]).unwrap_err().to_string();
    assert!(e.contains("'xent'") && e.contains("label value of 3") && e.contains("[0, 3)"), "{e}");
}

#[test]
fn gradient_of_a_variable_read_flows_to_its_handle() {
    use ferroflow::train::{Builder, Initializer};
    let b = Builder::new();
    let s = b.scope().clone();
    let w = b.variable(&s, "w", &[2, 3], DType::Double, &Initializer::Constant(0.0), true).unwrap();
    let x = s.with_name("x").placeholder(DType::Double, &Shape::known(&[2, 3])).unwrap();
    // Two reads of w, so the handle's gradient is a sum: loss = Σ w·x + Σ w².
    let second = b.read(&s, &w).unwrap();
    let loss = s
        .add_v2(
            s.reduce("Sum", s.mul(w.value, x).unwrap(), &[0, 1], false).unwrap(),
            s.reduce("Sum", s.unary("Square", second).unwrap(), &[0, 1], false).unwrap(),
        )
        .unwrap();
    let g = gradients(&s, &[loss], &[w.handle], None).unwrap()[0].unwrap();
    let init = b.global_variables_initializer().unwrap();
    let graph = b.graph();
    let sess = Session::new(graph.clone(), SessionOptions::default()).unwrap();
    sess.run(&[], &[], &[&graph.node(init).name]).unwrap();
    let wv = Tensor::from_vec(&[2, 3], values(6, 5, (-1.0, 1.0))).unwrap();
    let xv = Tensor::from_vec(&[2, 3], values(6, 6, (-1.0, 1.0))).unwrap();
    sess.resources().lookup("localhost/w").unwrap().assign(wv.clone());
    let got = sess.run(&[("x:0", xv.clone())], &[&graph.output_name(g)], &[]).unwrap();
    let want: Vec<f64> =
        wv.as_slice::<f64>().unwrap().iter().zip(xv.as_slice::<f64>().unwrap()).map(|(w, x)| x + 2.0 * w).collect();
    for (a, b) in got[0].as_slice::<f64>().unwrap().iter().zip(&want) {
        assert!((a - b).abs() < 1e-12, "{a} vs {b}");
    }
}

/// The ops the Keras attention models and activations brought (issue 43): `Erfc` (exact GELU)
/// and `MatrixBandPart` (causal masks; the full band, the lower triangle and a narrow band of
/// a batch of non-square matrices, int32 and int64 limits).
fn attention_cases() -> Vec<Case> {
    let c = |op, shapes: Vec<Vec<usize>>, range, build| Case { op, shapes, range, build };
    fn band(s: &Scope, x: Output, lower: i64, upper: i64, wide: bool) -> Output {
        let (l, u, t) = if wide {
            (s.scalar(lower).unwrap(), s.scalar(upper).unwrap(), DType::Int64)
        } else {
            (s.scalar(lower as i32).unwrap(), s.scalar(upper as i32).unwrap(), DType::Int32)
        };
        op_with(s, "MatrixBandPart", &[x, l, u], &[("Tindex", attr::dtype(t))])
    }
    vec![
        c("Erfc", vec![vec![2, 3]], (-2.0, 2.0), |s, x| s.unary("Erfc", x[0]).unwrap()),
        c("MatrixBandPart", vec![vec![2, 3, 4]], (-2.0, 2.0), |s, x| band(s, x[0], -1, 0, true)),
        c("MatrixBandPart", vec![vec![2, 4, 3]], (-2.0, 2.0), |s, x| band(s, x[0], 1, 1, false)),
        c("MatrixBandPart", vec![vec![3, 3]], (-2.0, 2.0), |s, x| band(s, x[0], -1, -1, false)),
        // MultiHeadAttention's projections and scores, a matrix product, a summed-away label.
        c("Einsum", vec![vec![2, 3, 4], vec![4, 2, 3]], (-1.0, 1.0), |s, x| s.einsum(x, "abc,cde->abde").unwrap()),
        c("Einsum", vec![vec![2, 3, 2, 2], vec![2, 4, 2, 2]], (-1.0, 1.0), |s, x| {
            s.einsum(x, "aecd,abcd->acbe").unwrap()
        }),
        c("Einsum", vec![vec![3, 4], vec![4, 2]], (-1.0, 1.0), |s, x| s.einsum(x, "ij,jk->ik").unwrap()),
        c("Einsum", vec![vec![3, 4, 2]], (-1.0, 1.0), |s, x| s.einsum(x, "ijk->ki").unwrap()),
        // Operands broadcast along the batch dimensions (summed back in the gradient).
        c("BatchMatMulV2", vec![vec![2, 3, 4], vec![4, 2]], (-1.0, 1.0), |s, x| op_with(s, "BatchMatMulV2", x, &[])),
        c("BatchMatMulV2", vec![vec![2, 1, 3, 4], vec![3, 4, 2]], (-1.0, 1.0), |s, x| {
            op_with(s, "BatchMatMulV2", x, &[])
        }),
    ]
}

// TensorList gradients (TensorFlow's list_ops.py): each case ends in a dense tensor, so the
// lists' gradients run through the list ops' own.

/// `op(inputs)` with `element_dtype` double (and int32 `shape_type` where the op has it).
fn list_op(s: &Scope, op: &str, inputs: &[Output]) -> Output {
    let mut a = Attrs::new();
    a.insert("element_dtype".into(), t64());
    if matches!(op, "TensorListFromTensor" | "TensorListReserve" | "EmptyTensorList") {
        a.insert("shape_type".into(), attr::dtype(DType::Int32));
    }
    Output { node: s.add_op(op, op, inputs, &[], a).unwrap(), index: 0 }
}

/// A list of `x`'s rows (each of shape `[2]`).
fn rows(s: &Scope, x: Output) -> Output {
    let shape = s.constant_from(&[1], &[2i32]).unwrap();
    list_op(s, "TensorListFromTensor", &[x, shape])
}

fn stack(s: &Scope, list: Output) -> Output {
    let shape = s.constant_from(&[1], &[2i32]).unwrap();
    list_op(s, "TensorListStack", &[list, shape])
}

fn list_cases() -> Vec<Case> {
    let c = |op, shapes: Vec<Vec<usize>>, build| Case { op, shapes, range: (-2.0, 2.0), build };
    vec![
        c("TensorListFromTensor", vec![vec![3, 2]], |s, x| {
            let l = rows(s, x[0]);
            stack(s, l)
        }),
        c("TensorListStack", vec![vec![3, 2]], |s, x| {
            let l = rows(s, x[0]);
            s.unary("Square", stack(s, l)).unwrap()
        }),
        // Only row 1 is read: the others' gradients are the unset entries, read as zeros.
        c("TensorListGetItem", vec![vec![3, 2]], |s, x| {
            let i = s.scalar(1i32).unwrap();
            let shape = s.constant_from(&[1], &[2i32]).unwrap();
            let l = rows(s, x[0]);
            list_op(s, "TensorListGetItem", &[l, i, shape])
        }),
        // Rows 0 and 2 read: the list gets two gradients, summed by AddN of lists.
        c("TensorListGetItem", vec![vec![3, 2]], |s, x| {
            let shape = s.constant_from(&[1], &[2i32]).unwrap();
            let l = rows(s, x[0]);
            let (i, j) = (s.scalar(0i32).unwrap(), s.scalar(2i32).unwrap());
            let a = list_op(s, "TensorListGetItem", &[l, i, shape]);
            let b = list_op(s, "TensorListGetItem", &[l, j, shape]);
            s.mul(a, b).unwrap()
        }),
        c("TensorListSetItem", vec![vec![3, 2], vec![2]], |s, x| {
            let i = s.scalar(2i32).unwrap();
            let l = rows(s, x[0]);
            let set = list_op(s, "TensorListSetItem", &[l, i, x[1]]);
            stack(s, set)
        }),
        c("TensorListPushBack", vec![vec![3, 2], vec![2]], |s, x| {
            let l = rows(s, x[0]);
            let pushed = list_op(s, "TensorListPushBack", &[l, x[1]]);
            stack(s, pushed)
        }),
        // The popped row squared and pushed back: gradients reach both the list and the item.
        c("TensorListPopBack", vec![vec![3, 2]], |s, x| {
            let shape = s.constant_from(&[1], &[2i32]).unwrap();
            let l = rows(s, x[0]);
            let popped = list_op(s, "TensorListPopBack", &[l, shape]);
            let item = s.unary("Square", Output { node: popped.node, index: 1 }).unwrap();
            let pushed = list_op(s, "TensorListPushBack", &[popped, item]);
            stack(s, pushed)
        }),
    ]
}

/// `strides` (and `ksize`, for a pool) and `padding` of a 3-D window op (NDHWC).
fn window3d(strides: [i64; 3], ksize: Option<[i64; 3]>, padding: &str) -> Vec<(&'static str, AttrValue)> {
    let mut a =
        vec![("strides", attr::ints(&[1, strides[0], strides[1], strides[2], 1])), ("padding", attr::string(padding))];
    if let Some(k) = ksize {
        a.push(("ksize", attr::ints(&[1, k[0], k[1], k[2], 1])));
    }
    a
}

/// `SpaceToBatchND` or `BatchToSpaceND` with blocks `[2, 2]` and the paddings or crops `p`.
fn space_batch(s: &Scope, op: &str, x: Output, p: [i32; 4]) -> Output {
    let block = s.constant_from(&[2], &[2i32, 2]).unwrap();
    let p = s.constant_from(&[2, 2], &p).unwrap();
    let third = if op == "SpaceToBatchND" { "Tpaddings" } else { "Tcrops" };
    let a = [("Tblock_shape", attr::dtype(DType::Int32)), (third, attr::dtype(DType::Int32))];
    op_with(s, op, &[x, block, p], &a)
}

/// The spatial ops' cases: space-to-batch and back, and the 3-D convolutions and pools.
fn spatial_cases() -> Vec<Case> {
    let c = |op, shapes: Vec<Vec<usize>>, range, build| Case { op, shapes, range, build };
    fn nearest(s: &Scope, x: Output, size: [i32; 2], align: bool, half: bool) -> Output {
        let size = s.constant_from(&[2], &size).unwrap();
        op_with(
            s,
            "ResizeNearestNeighbor",
            &[x, size],
            &[("align_corners", attr::boolean(align)), ("half_pixel_centers", attr::boolean(half))],
        )
    }
    vec![
        // Up and down, every coordinate rule (UpSampling2D's nearest is the legacy one).
        c("ResizeNearestNeighbor", vec![vec![2, 3, 4, 2]], (-2.0, 2.0), |s, x| nearest(s, x[0], [6, 8], false, false)),
        c("ResizeNearestNeighbor", vec![vec![1, 5, 4, 2]], (-2.0, 2.0), |s, x| nearest(s, x[0], [3, 7], false, true)),
        c("ResizeNearestNeighbor", vec![vec![1, 4, 5, 1]], (-2.0, 2.0), |s, x| nearest(s, x[0], [7, 3], true, false)),
        c("SpaceToBatchND", vec![vec![2, 5, 4, 3]], (-2.0, 2.0), |s, x| {
            space_batch(s, "SpaceToBatchND", x[0], [1, 0, 0, 2])
        }),
        c("BatchToSpaceND", vec![vec![8, 3, 2, 3]], (-2.0, 2.0), |s, x| {
            space_batch(s, "BatchToSpaceND", x[0], [1, 0, 0, 1])
        }),
        c("Conv3D", vec![vec![2, 4, 5, 4, 2], vec![2, 3, 2, 2, 3]], (-1.0, 1.0), |s, x| {
            op_with(s, "Conv3D", x, &window3d([1, 2, 1], None, "SAME"))
        }),
        c("Conv3D", vec![vec![1, 5, 4, 6, 2], vec![2, 2, 3, 2, 2]], (-1.0, 1.0), |s, x| {
            let mut a = window3d([1, 1, 2], None, "VALID");
            a.push(("dilations", attr::ints(&[1, 2, 1, 1, 1])));
            op_with(s, "Conv3D", x, &a)
        }),
        c("Conv3DBackpropInputV2", vec![vec![2, 3, 2, 2, 3], vec![2, 4, 3, 4, 3]], (-1.0, 1.0), |s, x| {
            let sizes = s.constant_from(&[5], &[2i32, 4, 5, 4, 2]).unwrap();
            op_with(s, "Conv3DBackpropInputV2", &[sizes, x[0], x[1]], &window3d([1, 2, 1], None, "SAME"))
        }),
        c("Conv3DBackpropFilterV2", vec![vec![2, 4, 5, 4, 2], vec![2, 4, 3, 4, 3]], (-1.0, 1.0), |s, x| {
            let sizes = s.constant_from(&[5], &[2i32, 3, 2, 2, 3]).unwrap();
            op_with(s, "Conv3DBackpropFilterV2", &[x[0], sizes, x[1]], &window3d([1, 2, 1], None, "SAME"))
        }),
        c("MaxPool3D", vec![vec![2, 4, 4, 3, 2]], (-2.0, 2.0), |s, x| {
            op_with(s, "MaxPool3D", x, &window3d([2, 1, 1], Some([2, 2, 2]), "SAME"))
        }),
        c("AvgPool3D", vec![vec![2, 4, 5, 3, 2]], (-2.0, 2.0), |s, x| {
            op_with(s, "AvgPool3D", x, &window3d([1, 2, 1], Some([2, 3, 2]), "SAME"))
        }),
        c("AvgPool3DGrad", vec![vec![2, 4, 3, 3, 2]], (-1.0, 1.0), |s, x| {
            let sizes = s.constant_from(&[5], &[2i32, 4, 5, 3, 2]).unwrap();
            op_with(s, "AvgPool3DGrad", &[sizes, x[0]], &window3d([1, 2, 1], Some([2, 3, 2]), "SAME"))
        }),
    ]
}

// Detection post-processing and indexing (scripts/make_detection_fixtures.py): the scatters
// and GatherNd, with constant indices (repeated ones sum) of both index types.

/// A constant index tensor of `dims` (int32, or int64 with `wide`).
fn index_const(s: &Scope, dims: &[usize], v: &[i64], wide: bool) -> Output {
    if wide {
        s.constant_from(dims, v).unwrap()
    } else {
        s.constant_from(dims, &v.iter().map(|&i| i as i32).collect::<Vec<_>>()).unwrap()
    }
}

fn tindices(wide: bool) -> AttrValue {
    attr::dtype(if wide { DType::Int64 } else { DType::Int32 })
}

/// `op(tensor = x[0], indices, updates = x[1])`.
fn tensor_scatter(s: &Scope, op: &str, x: &[Output], idims: &[usize], idx: &[i64], wide: bool) -> Output {
    let i = index_const(s, idims, idx, wide);
    op_with(s, op, &[x[0], i, x[1]], &[("Tindices", tindices(wide))])
}

fn detection_cases() -> Vec<Case> {
    let c = |op, shapes: Vec<Vec<usize>>, range, build| Case { op, shapes, range, build };
    fn top_k(s: &Scope, x: Output, k: i32, index: DType) -> Output {
        let k = s.scalar(k).unwrap();
        op_with(s, "TopKV2", &[x, k], &[("index_type", attr::dtype(index)), ("Tk", attr::dtype(DType::Int32))])
    }
    vec![
        // Rows of a batch, the k largest values (distinct, so the selection is stable under
        // the finite-difference steps), int32 and int64 indices.
        c("TopKV2", vec![vec![2, 3, 5]], (-2.0, 2.0), |s, x| top_k(s, x[0], 2, DType::Int32)),
        c("TopKV2", vec![vec![6]], (-2.0, 2.0), |s, x| top_k(s, x[0], 6, DType::Int64)),
        c("GatherNd", vec![vec![3, 4]], (-2.0, 2.0), |s, x| {
            let i = index_const(s, &[3, 2], &[1, 2, 0, 0, 1, 2], false);
            op_with(s, "GatherNd", &[x[0], i], &[("Tparams", t64()), ("Tindices", tindices(false))])
        }),
        c("GatherNd", vec![vec![3, 2, 2]], (-2.0, 2.0), |s, x| {
            let i = index_const(s, &[2, 2, 1], &[2, 0, 2, 1], true);
            op_with(s, "GatherNd", &[x[0], i], &[("Tparams", t64()), ("Tindices", tindices(true))])
        }),
        c("ScatterNd", vec![vec![3, 4]], (-2.0, 2.0), |s, x| {
            let i = index_const(s, &[3, 1], &[1, 3, 1], false);
            let shape = index_const(s, &[2], &[5, 4], false);
            op_with(s, "ScatterNd", &[i, x[0], shape], &[("Tindices", tindices(false))])
        }),
        c("TensorScatterUpdate", vec![vec![4, 3], vec![2, 3]], (-2.0, 2.0), |s, x| {
            tensor_scatter(s, "TensorScatterUpdate", x, &[2, 1], &[1, 3], false)
        }),
        c("TensorScatterAdd", vec![vec![4, 3], vec![3, 3]], (-2.0, 2.0), |s, x| {
            tensor_scatter(s, "TensorScatterAdd", x, &[3, 1], &[2, 0, 2], true)
        }),
        c("TensorScatterSub", vec![vec![4, 3], vec![3]], (-2.0, 2.0), |s, x| {
            tensor_scatter(s, "TensorScatterSub", x, &[3, 2], &[0, 1, 3, 2, 0, 1], false)
        }),
        c("TensorScatterMax", vec![vec![3, 3], vec![3]], (-2.0, 2.0), |s, x| {
            tensor_scatter(s, "TensorScatterMax", x, &[3, 2], &[0, 1, 2, 2, 1, 0], false)
        }),
        c("TensorScatterMin", vec![vec![3, 3], vec![3]], (-2.0, 2.0), |s, x| {
            tensor_scatter(s, "TensorScatterMin", x, &[3, 2], &[0, 1, 2, 2, 1, 0], true)
        }),
    ]
}
