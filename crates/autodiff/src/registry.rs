//! The gradient function of each differentiable op (TensorFlow's formulas; TensorFlow's
//! helper ops `ReluGrad`, `SigmoidGrad`, `TanhGrad`, `BiasAddGrad`, `BroadcastGradientArgs`).
use std::collections::HashMap;
use std::sync::OnceLock;

use ferroflow_graph::{Attrs, Output};
use ferroflow_ops::{BuildError, OpRegistry, Scope};
use ferroflow_proto::{attr_value::Value, AttrValue};
use ferroflow_tensor::{DType, Tensor};

use crate::{GradCtx, GradError, GradFn};

type R = Result<Vec<Option<Output>>, GradError>;

fn a_type(d: DType) -> AttrValue {
    AttrValue { value: Some(Value::Type(d.to_tf())) }
}

/// Adds `op(inputs)` with `attrs`; `T` is filled from the first input when the op has it.
fn build(s: &Scope, op: &str, inputs: &[Output], attrs: &[(&str, AttrValue)]) -> Result<Output, BuildError> {
    let mut at = Attrs::new();
    for (k, v) in attrs {
        at.insert(k.to_string(), v.clone());
    }
    let def = OpRegistry::global().get(op);
    if let (Some(def), Some(first)) = (def, inputs.first()) {
        if def.attr_def("T").is_some() && !at.contains_key("T") {
            at.insert("T".into(), a_type(s.dtype(*first)));
        }
    }
    Ok(Output { node: s.add_op(op, op, inputs, &[], at)?, index: 0 })
}

fn b(v: bool) -> AttrValue {
    AttrValue { value: Some(Value::B(v)) }
}

/// A scalar constant of `x`'s dtype.
fn scalar_like(s: &Scope, x: Output, v: f64) -> Result<Output, BuildError> {
    match s.dtype(x) {
        DType::Double => s.scalar(v),
        _ => s.scalar(v as f32),
    }
}

pub(crate) fn add_n(s: &Scope, xs: &[Output]) -> Result<Output, BuildError> {
    let n = AttrValue { value: Some(Value::I(xs.len() as i64)) };
    build(s, "AddN", xs, &[("N", n)])
}

/// `g` summed down to `x`'s shape (undoing broadcasting against `other`).
fn reduce_like(ctx: &GradCtx, g: Output, x: Output, other: Output) -> Result<Output, GradError> {
    let (sx, so) = (ctx.shape(x), ctx.shape(other));
    if sx.as_known().is_some() && sx.as_known() == so.as_known() {
        return Ok(g);
    }
    let s = &ctx.scope;
    let shape_x = s.unary("Shape", x)?;
    let shape_o = s.unary("Shape", other)?;
    let args = s.add_op("BroadcastGradientArgs", "BroadcastGradientArgs", &[shape_x, shape_o], &[], {
        let mut a = Attrs::new();
        a.insert("T".into(), a_type(DType::Int32));
        a
    })?;
    let axes = Output { node: args, index: 0 };
    let mut a = Attrs::new();
    a.insert("keep_dims".into(), b(false));
    a.insert("T".into(), a_type(s.dtype(g)));
    a.insert("Tidx".into(), a_type(DType::Int32));
    let summed = Output { node: s.add_op("Sum", "Sum", &[g, axes], &[], a)?, index: 0 };
    Ok(build(s, "Reshape", &[summed, shape_x], &[("Tshape", a_type(DType::Int32))])?)
}

fn binary(ctx: &GradCtx, gx: Output, gy: Output) -> R {
    let (x, y) = (ctx.input(0), ctx.input(1));
    Ok(vec![Some(reduce_like(ctx, gx, x, y)?), Some(reduce_like(ctx, gy, y, x)?)])
}

fn g0(gs: &[Option<Output>]) -> Option<Output> {
    gs.first().copied().flatten()
}

fn identity(_: &GradCtx, gs: &[Option<Output>]) -> R {
    Ok(vec![g0(gs)])
}

fn add(ctx: &GradCtx, gs: &[Option<Output>]) -> R {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    binary(ctx, g, g)
}

fn sub(ctx: &GradCtx, gs: &[Option<Output>]) -> R {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let neg = ctx.scope.unary("Neg", g)?;
    binary(ctx, g, neg)
}

fn mul(ctx: &GradCtx, gs: &[Option<Output>]) -> R {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let gx = s.mul(g, ctx.input(1))?;
    let gy = s.mul(ctx.input(0), g)?;
    binary(ctx, gx, gy)
}

fn real_div(ctx: &GradCtx, gs: &[Option<Output>]) -> R {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let (x, y) = (ctx.input(0), ctx.input(1));
    let gx = s.div(g, y)?;
    // -g * x / y / y
    let gy = s.mul(g, s.div(s.div(s.unary("Neg", x)?, y)?, y)?)?;
    binary(ctx, gx, gy)
}

fn neg(ctx: &GradCtx, gs: &[Option<Output>]) -> R {
    Ok(vec![g0(gs).map(|g| ctx.scope.unary("Neg", g)).transpose()?])
}

fn square(ctx: &GradCtx, gs: &[Option<Output>]) -> R {
    let Some(g) = g0(gs) else { return Ok(vec![None]) };
    let s = &ctx.scope;
    let x = ctx.input(0);
    Ok(vec![Some(s.mul(g, s.mul(scalar_like(s, x, 2.0)?, x)?)?)])
}

fn sqrt(ctx: &GradCtx, gs: &[Option<Output>]) -> R {
    let Some(g) = g0(gs) else { return Ok(vec![None]) };
    let s = &ctx.scope;
    let y = ctx.output(0);
    Ok(vec![Some(s.div(s.mul(g, scalar_like(s, y, 0.5)?)?, y)?)])
}

fn exp(ctx: &GradCtx, gs: &[Option<Output>]) -> R {
    Ok(vec![g0(gs).map(|g| ctx.scope.mul(g, ctx.output(0))).transpose()?])
}

fn log(ctx: &GradCtx, gs: &[Option<Output>]) -> R {
    Ok(vec![g0(gs).map(|g| ctx.scope.div(g, ctx.input(0))).transpose()?])
}

fn relu(ctx: &GradCtx, gs: &[Option<Output>]) -> R {
    Ok(vec![g0(gs).map(|g| build(&ctx.scope, "ReluGrad", &[g, ctx.output(0)], &[])).transpose()?])
}

fn relu6(ctx: &GradCtx, gs: &[Option<Output>]) -> R {
    Ok(vec![g0(gs).map(|g| build(&ctx.scope, "Relu6Grad", &[g, ctx.input(0)], &[])).transpose()?])
}

/// The value of a `Const` input as integers.
fn const_ints(ctx: &GradCtx, o: Output) -> Option<Vec<i64>> {
    let t = ctx.scope.with_graph(|g| {
        let n = g.node(o.node);
        match (n.op.as_str(), n.attrs.get("value").and_then(|v| v.value.as_ref())) {
            ("Const", Some(Value::Tensor(t))) => ferroflow_proto::convert::tensor_from_proto(t).ok(),
            _ => None,
        }
    })?;
    match t.dtype() {
        DType::Int32 => Some(t.as_slice::<i32>().ok()?.iter().map(|&v| v as i64).collect()),
        DType::Int64 => Some(t.as_slice::<i64>().ok()?.to_vec()),
        _ => None,
    }
}

fn transpose(ctx: &GradCtx, gs: &[Option<Output>]) -> R {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let perm = const_ints(ctx, ctx.input(1)).ok_or_else(|| ctx.unsupported("the permutation must be a constant"))?;
    let mut inv = vec![0i32; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        let p =
            usize::try_from(p).ok().filter(|&p| p < perm.len()).ok_or_else(|| ctx.unsupported("bad permutation"))?;
        inv[p] = i as i32;
    }
    let s = &ctx.scope;
    let inv = s.constant_from(&[inv.len()], &inv)?;
    Ok(vec![Some(build(s, "Transpose", &[g, inv], &[("Tperm", a_type(DType::Int32))])?), None])
}

fn max(ctx: &GradCtx, gs: &[Option<Output>]) -> R {
    // TensorFlow's: the gradient goes to the maxima, split evenly between ties.
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let x = ctx.input(0);
    let y = unreduce(ctx, ctx.output(0))?;
    let dt = s.dtype(x);
    let hits = s.cast(build(s, "Equal", &[x, y], &[("incompatible_shape_error", b(true))])?, dt)?;
    let axes = ctx.input(1);
    let mut a = Attrs::new();
    a.insert("keep_dims".into(), b(true));
    a.insert("T".into(), a_type(dt));
    a.insert("Tidx".into(), a_type(s.dtype(axes)));
    let count = Output { node: s.add_op("Sum", "Sum", &[hits, axes], &[], a)?, index: 0 };
    let share = s.div(hits, count)?;
    Ok(vec![Some(s.mul(share, unreduce(ctx, g)?)?), None])
}

fn concat(ctx: &GradCtx, gs: &[Option<Output>]) -> R {
    let n = ctx.node.inputs.len() - 1;
    let Some(g) = g0(gs) else { return Ok(vec![None; n + 1]) };
    let axis = const_ints(ctx, ctx.input(n))
        .and_then(|v| v.first().copied())
        .ok_or_else(|| ctx.unsupported("the axis must be a constant"))?;
    let rank = ctx.shape(ctx.input(0)).rank().ok_or_else(|| ctx.unsupported("the inputs' rank must be known"))? as i64;
    let axis = if axis < 0 { axis + rank } else { axis };
    let mut sizes = Vec::with_capacity(n);
    for i in 0..n {
        let d = ctx.shape(ctx.input(i)).dims().and_then(|d| d.get(axis as usize).copied().flatten());
        sizes.push(d.ok_or_else(|| ctx.unsupported("sizes along the concat axis must be known"))? as i64);
    }
    let s = &ctx.scope;
    let sizes = s.constant_from(&[n], &sizes)?;
    let ax = s.scalar(axis as i32)?;
    let mut a = Attrs::new();
    a.insert("num_split".into(), AttrValue { value: Some(Value::I(n as i64)) });
    a.insert("T".into(), a_type(s.dtype(g)));
    a.insert("Tlen".into(), a_type(DType::Int64));
    let split = s.add_op("SplitV", "SplitV", &[g, sizes, ax], &[], a)?;
    let mut out: Vec<Option<Output>> = (0..n).map(|i| Some(Output { node: split, index: i })).collect();
    out.push(None);
    Ok(out)
}

fn slice(ctx: &GradCtx, gs: &[Option<Output>]) -> R {
    // Pad the gradient back: before = begin, after = shape(x) - shape(y) - begin.
    let Some(g) = g0(gs) else { return Ok(vec![None, None, None]) };
    let s = &ctx.scope;
    let (x, begin) = (ctx.input(0), ctx.input(1));
    let int = s.dtype(begin);
    let shape = |t: Output| -> Result<Output, GradError> {
        let mut a = Attrs::new();
        a.insert("T".into(), a_type(s.dtype(t)));
        a.insert("out_type".into(), a_type(int));
        Ok(Output { node: s.add_op("Shape", "Shape", &[t], &[], a)?, index: 0 })
    };
    let after = s.sub(s.sub(shape(x)?, shape(ctx.output(0))?)?, begin)?;
    let paddings = s.pack(&[begin, after], 1)?;
    Ok(vec![Some(build(s, "Pad", &[g, paddings], &[("Tpaddings", a_type(int))])?), None, None])
}

fn select(ctx: &GradCtx, gs: &[Option<Output>]) -> R {
    let Some(g) = g0(gs) else { return Ok(vec![None, None, None]) };
    let s = &ctx.scope;
    let c = ctx.input(0);
    let zeros = s.unary("ZerosLike", g)?;
    let op = ctx.node.op.as_str();
    let t = a_type(s.dtype(g));
    let pick = |a: Output, b2: Output| build(s, op, &[c, a, b2], &[("T", t.clone())]);
    let (gt, ge) = (pick(g, zeros)?, pick(zeros, g)?);
    if op == "SelectV2" {
        let (t, e) = (ctx.input(1), ctx.input(2));
        return Ok(vec![
            None,
            Some(reduce_like(ctx, gt, t, ctx.output(0))?),
            Some(reduce_like(ctx, ge, e, ctx.output(0))?),
        ]);
    }
    Ok(vec![None, Some(gt), Some(ge)])
}

fn gather(ctx: &GradCtx, gs: &[Option<Output>]) -> R {
    // Axis 0, batch_dims 0: the gradient rows go back to the gathered rows, summed where an
    // index repeats (TensorFlow's IndexedSlices made dense).
    let Some(g) = g0(gs) else { return Ok(vec![None, None, None]) };
    let axis = const_ints(ctx, ctx.input(2)).and_then(|v| v.first().copied());
    let batch_dims = match ctx.node.attrs.get("batch_dims").and_then(|a| a.value.as_ref()) {
        Some(Value::I(b)) => *b,
        _ => 0,
    };
    if axis != Some(0) || batch_dims != 0 {
        return Err(ctx.unsupported("only gathers along a constant axis 0 with batch_dims 0 are differentiable yet"));
    }
    let s = &ctx.scope;
    let (params, indices) = (ctx.input(0), ctx.input(1));
    let int = s.dtype(indices);
    let mut a = Attrs::new();
    a.insert("T".into(), a_type(s.dtype(params)));
    a.insert("out_type".into(), a_type(DType::Int32));
    let shape = Output { node: s.add_op("Shape", "Shape", &[params], &[], a)?, index: 0 };
    let zero = s.constant_from(&[1], &[0i32])?;
    let one = s.constant_from(&[1], &[1i32])?;
    let rows = build(s, "Slice", &[shape, zero, one], &[("T", a_type(DType::Int32)), ("Index", a_type(DType::Int32))])?;
    let rows = s.reshape(rows, &[])?;
    let seg = build(
        s,
        "UnsortedSegmentSum",
        &[g, indices, rows],
        &[("Tindices", a_type(int)), ("Tnumsegments", a_type(DType::Int32))],
    )?;
    Ok(vec![Some(seg), None, None])
}

fn cross_entropy(ctx: &GradCtx, gs: &[Option<Output>]) -> R {
    if gs.get(1).copied().flatten().is_some() {
        return Err(ctx.unsupported("gradients through the backprop output are not supported"));
    }
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let minus_one = s.scalar(-1i32)?;
    let g = build(s, "ExpandDims", &[g, minus_one], &[("Tdim", a_type(DType::Int32))])?;
    let features = s.mul(g, ctx.output(1))?;
    if ctx.node.op.starts_with("Sparse") {
        return Ok(vec![Some(features), None]);
    }
    let labels = s.mul(g, s.unary("Neg", s.unary("LogSoftmax", ctx.input(0))?)?)?;
    Ok(vec![Some(features), Some(labels)])
}

fn sigmoid(ctx: &GradCtx, gs: &[Option<Output>]) -> R {
    Ok(vec![g0(gs).map(|g| build(&ctx.scope, "SigmoidGrad", &[ctx.output(0), g], &[])).transpose()?])
}

fn tanh(ctx: &GradCtx, gs: &[Option<Output>]) -> R {
    Ok(vec![g0(gs).map(|g| build(&ctx.scope, "TanhGrad", &[ctx.output(0), g], &[])).transpose()?])
}

fn attr_bool(ctx: &GradCtx, name: &str) -> bool {
    matches!(ctx.node.attrs.get(name).and_then(|a| a.value.as_ref()), Some(Value::B(true)))
}

fn matmul(ctx: &GradCtx, gs: &[Option<Output>]) -> R {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let (a, bm) = (ctx.input(0), ctx.input(1));
    let (ta, tb) = (attr_bool(ctx, "transpose_a"), attr_bool(ctx, "transpose_b"));
    let mm = |x, y, tx, ty| s.matmul(x, y, tx, ty);
    let (ga, gb) = match (ta, tb) {
        (false, false) => (mm(g, bm, false, true)?, mm(a, g, true, false)?),
        (false, true) => (mm(g, bm, false, false)?, mm(g, a, true, false)?),
        (true, false) => (mm(bm, g, false, true)?, mm(a, g, false, false)?),
        (true, true) => (mm(bm, g, true, true)?, mm(g, a, true, true)?),
    };
    Ok(vec![Some(ga), Some(gb)])
}

fn bias_add(ctx: &GradCtx, gs: &[Option<Output>]) -> R {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let mut attrs = vec![];
    if let Some(f) = ctx.node.attrs.get("data_format") {
        attrs.push(("data_format", f.clone()));
    }
    Ok(vec![Some(g), Some(build(&ctx.scope, "BiasAddGrad", &[g], &attrs)?)])
}

fn constant_axes(ctx: &GradCtx) -> Result<Vec<i64>, GradError> {
    let axes = ctx.input(1);
    let t = ctx.scope.with_graph(|g| {
        let n = g.node(axes.node);
        match (n.op.as_str(), n.attrs.get("value").and_then(|v| v.value.as_ref())) {
            ("Const", Some(Value::Tensor(t))) => ferroflow_proto::convert::tensor_from_proto(t).ok(),
            _ => None,
        }
    });
    let t: Tensor = t.ok_or_else(|| ctx.unsupported("reduction axes must be a constant"))?;
    Ok(match t.dtype() {
        DType::Int32 => {
            t.as_slice::<i32>().map_err(|e| ctx.unsupported(e.to_string()))?.iter().map(|&v| v as i64).collect()
        }
        DType::Int64 => t.as_slice::<i64>().map_err(|e| ctx.unsupported(e.to_string()))?.to_vec(),
        d => return Err(ctx.unsupported(format!("axes of type {d}"))),
    })
}

/// `g` (the gradient of a reduction's output) broadcast back to the input's shape.
fn unreduce(ctx: &GradCtx, g: Output) -> Result<Output, GradError> {
    let s = &ctx.scope;
    let x = ctx.input(0);
    let keep = attr_bool(ctx, "keep_dims");
    let mut g = g;
    if !keep {
        let rank = ctx.shape(x).rank().ok_or_else(|| ctx.unsupported("the input's rank must be known"))? as i64;
        let mut axes: Vec<i64> = constant_axes(ctx)?.into_iter().map(|a| if a < 0 { a + rank } else { a }).collect();
        if axes.iter().any(|&a| a < 0 || a >= rank) {
            return Err(ctx.unsupported("reduction axis out of range"));
        }
        axes.sort_unstable();
        axes.dedup();
        for a in axes {
            let dim = s.scalar(a as i32)?;
            g = build(s, "ExpandDims", &[g, dim], &[("Tdim", a_type(DType::Int32))])?;
        }
    }
    let shape = s.unary("Shape", x)?;
    Ok(build(s, "BroadcastTo", &[g, shape], &[("Tidx", a_type(DType::Int32))])?)
}

fn sum(ctx: &GradCtx, gs: &[Option<Output>]) -> R {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    Ok(vec![Some(unreduce(ctx, g)?), None])
}

fn mean(ctx: &GradCtx, gs: &[Option<Output>]) -> R {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let dt = s.dtype(g);
    let (x, y) = (ctx.input(0), ctx.output(0));
    // count = size(x) / size(y)
    let count = s.div(s.cast(s.unary("Size", x)?, dt)?, s.cast(s.unary("Size", y)?, dt)?)?;
    Ok(vec![Some(s.div(unreduce(ctx, g)?, count)?), None])
}

fn reshape(ctx: &GradCtx, gs: &[Option<Output>]) -> R {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let shape = s.unary("Shape", ctx.input(0))?;
    Ok(vec![Some(build(s, "Reshape", &[g, shape], &[("Tshape", a_type(DType::Int32))])?), None])
}

fn cast(ctx: &GradCtx, gs: &[Option<Output>]) -> R {
    let Some(g) = g0(gs) else { return Ok(vec![None]) };
    let src = ctx.scope.dtype(ctx.input(0));
    if !src.is_float() {
        return Ok(vec![None]);
    }
    Ok(vec![Some(ctx.scope.cast(g, src)?)])
}

fn softmax(ctx: &GradCtx, gs: &[Option<Output>]) -> R {
    let Some(g) = g0(gs) else { return Ok(vec![None]) };
    let s = &ctx.scope;
    let y = ctx.output(0);
    let dot = s.reduce("Sum", s.mul(g, y)?, &[-1], true)?;
    Ok(vec![Some(s.mul(s.sub(g, dot)?, y)?)])
}

fn log_softmax(ctx: &GradCtx, gs: &[Option<Output>]) -> R {
    let Some(g) = g0(gs) else { return Ok(vec![None]) };
    let s = &ctx.scope;
    let y = ctx.output(0);
    let total = s.reduce("Sum", g, &[-1], true)?;
    Ok(vec![Some(s.sub(g, s.mul(s.unary("Exp", y)?, total)?)?)])
}

fn add_n_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> R {
    Ok(vec![g0(gs); ctx.node.inputs.len()])
}

/// `ReadVariableOp`: the gradient of a read is the gradient of the variable (its handle).
fn read_variable(_: &GradCtx, gs: &[Option<Output>]) -> R {
    Ok(vec![g0(gs)])
}

/// `Switch`: the gradients of both outputs merged (only the taken branch's is live); an
/// output without a gradient contributes zeros guarded by the same switch output.
fn switch(ctx: &GradCtx, gs: &[Option<Output>]) -> R {
    let s = &ctx.scope;
    let mut g = [None, None];
    for (i, slot) in g.iter_mut().enumerate() {
        *slot = Some(match gs.get(i).copied().flatten() {
            Some(x) => x,
            None => s.unary("ZerosLike", ctx.output(i))?,
        });
    }
    let (merged, _) = s.merge(&[g[0].expect("set"), g[1].expect("set")])?;
    Ok(vec![Some(merged), None])
}

/// `Merge` of two inputs (a `cond`): the gradient goes back to the input that was taken,
/// switched on the merge's `value_index`.
fn merge(ctx: &GradCtx, gs: &[Option<Output>]) -> R {
    let n = ctx.node.inputs.len();
    let Some(g) = g0(gs) else { return Ok(vec![None; n]) };
    if n != 2 {
        return Err(ctx.unsupported(format!("only two-input Merges (cond) are differentiable, this one has {n}")));
    }
    let s = &ctx.scope;
    let one = s.scalar(1i32)?;
    let taken_second = build(s, "Equal", &[ctx.output(1), one], &[])?;
    let (f, t) = s.switch(g, taken_second)?;
    Ok(vec![Some(f), Some(t)])
}

/// The forward node's attrs named in `keep` (those it has), for its gradient op.
fn attrs_of(ctx: &GradCtx, keep: &[&str]) -> Vec<(&'static str, AttrValue)> {
    const ALL: [&str; 8] =
        ["T", "strides", "padding", "explicit_paddings", "data_format", "dilations", "use_cudnn_on_gpu", "ksize"];
    ALL.iter().filter(|k| keep.contains(k)).filter_map(|k| ctx.node.attrs.get(*k).map(|v| (*k, v.clone()))).collect()
}

/// `Conv2D`: TensorFlow's `Conv2DBackpropInput` and `Conv2DBackpropFilter`.
fn conv2d(ctx: &GradCtx, gs: &[Option<Output>]) -> R {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let (x, f) = (ctx.input(0), ctx.input(1));
    let a = attrs_of(
        ctx,
        &["T", "strides", "padding", "explicit_paddings", "data_format", "dilations", "use_cudnn_on_gpu"],
    );
    let dx = build(s, "Conv2DBackpropInput", &[s.unary("Shape", x)?, f, g], &a)?;
    let df = build(s, "Conv2DBackpropFilter", &[x, s.unary("Shape", f)?, g], &a)?;
    Ok(vec![Some(dx), Some(df)])
}

/// `MaxPool`: `MaxPoolGrad` (to the first maximum of each window).
fn max_pool(ctx: &GradCtx, gs: &[Option<Output>]) -> R {
    let Some(g) = g0(gs) else { return Ok(vec![None]) };
    let a = attrs_of(ctx, &["T", "ksize", "strides", "padding", "explicit_paddings", "data_format"]);
    Ok(vec![Some(build(&ctx.scope, "MaxPoolGrad", &[ctx.input(0), ctx.output(0), g], &a)?)])
}

/// `AvgPool`: `AvgPoolGrad`.
fn avg_pool(ctx: &GradCtx, gs: &[Option<Output>]) -> R {
    let Some(g) = g0(gs) else { return Ok(vec![None]) };
    let s = &ctx.scope;
    let a = attrs_of(ctx, &["T", "ksize", "strides", "padding", "data_format"]);
    Ok(vec![Some(build(s, "AvgPoolGrad", &[s.unary("Shape", ctx.input(0))?, g], &a)?)])
}

fn table() -> &'static HashMap<&'static str, GradFn> {
    static T: OnceLock<HashMap<&'static str, GradFn>> = OnceLock::new();
    T.get_or_init(|| {
        let entries: &[(&str, GradFn)] = &[
            ("Identity", identity),
            ("Snapshot", identity),
            ("Add", add),
            ("AddV2", add),
            ("Sub", sub),
            ("Mul", mul),
            ("RealDiv", real_div),
            ("Neg", neg),
            ("Square", square),
            ("Sqrt", sqrt),
            ("Exp", exp),
            ("Log", log),
            ("Relu", relu),
            ("Relu6", relu6),
            ("Transpose", transpose),
            ("Max", max),
            ("ConcatV2", concat),
            ("Slice", slice),
            ("Select", select),
            ("SelectV2", select),
            ("Sigmoid", sigmoid),
            ("Tanh", tanh),
            ("MatMul", matmul),
            ("BiasAdd", bias_add),
            ("Sum", sum),
            ("Mean", mean),
            ("Reshape", reshape),
            ("Cast", cast),
            ("Softmax", softmax),
            ("LogSoftmax", log_softmax),
            ("AddN", add_n_grad),
            ("SoftmaxCrossEntropyWithLogits", cross_entropy),
            ("GatherV2", gather),
            ("SparseSoftmaxCrossEntropyWithLogits", cross_entropy),
            ("ReadVariableOp", read_variable),
            ("Conv2D", conv2d),
            ("MaxPool", max_pool),
            ("AvgPool", avg_pool),
            ("Switch", switch),
            ("Merge", merge),
        ];
        entries.iter().copied().collect()
    })
}

/// The gradient function of `op`.
pub(crate) fn get(op: &str) -> Option<GradFn> {
    table().get(op).copied()
}

/// True if `op` has a registered gradient.
pub fn has_gradient(op: &str) -> bool {
    table().contains_key(op)
}

/// Every op with a registered gradient.
pub fn ops_with_gradients() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = table().keys().copied().collect();
    v.sort_unstable();
    v
}
