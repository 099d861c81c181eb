//! Graph-time shape inference: one function per op, run over a graph in topological order.
use ferroflow_graph::{Attrs, Graph, GraphError};
use ferroflow_proto::{attr_value, convert};
use ferroflow_tensor::{Shape, Tensor};

use crate::{OpDef, OpRegistry};

/// Computes an op's output shapes from its input shapes (and constant input values).
pub type ShapeFn = fn(&InferCtx) -> Result<Vec<Shape>, String>;

/// What a shape function sees of a node.
pub struct InferCtx<'a> {
    /// The op definition.
    pub def: &'a OpDef,
    /// The node's attrs.
    pub attrs: &'a Attrs,
    /// Shapes of the data inputs.
    pub inputs: &'a [Shape],
    /// Values of inputs produced by `Const` nodes.
    pub values: &'a [Option<Tensor>],
    /// Number of outputs.
    pub num_outputs: usize,
}

impl InferCtx<'_> {
    /// An int attr (or its default).
    pub fn int(&self, name: &str) -> Option<i64> {
        match self.def.attr(self.attrs, name)?.value {
            Some(attr_value::Value::I(i)) => Some(i),
            _ => None,
        }
    }
    /// A bool attr (or its default).
    pub fn bool(&self, name: &str) -> bool {
        matches!(self.def.attr(self.attrs, name).and_then(|v| v.value.as_ref()), Some(attr_value::Value::B(true)))
    }
    /// A constant input's values as i64.
    pub fn const_ints(&self, i: usize) -> Option<Vec<i64>> {
        let t = self.values.get(i)?.as_ref()?;
        match t.dtype() {
            ferroflow_tensor::DType::Int32 => Some(t.as_slice::<i32>().ok()?.iter().map(|&v| v as i64).collect()),
            ferroflow_tensor::DType::Int64 => Some(t.as_slice::<i64>().ok()?.to_vec()),
            _ => None,
        }
    }
}

/// Every output of unknown shape.
pub fn unknown(c: &InferCtx) -> Result<Vec<Shape>, String> {
    Ok(vec![Shape::unknown(); c.num_outputs])
}

/// The output has the shape of input 0.
pub fn unchanged(c: &InferCtx) -> Result<Vec<Shape>, String> {
    Ok(vec![c.inputs[0].clone()])
}

/// Every output has the shape of the matching input.
pub fn pass_through(c: &InferCtx) -> Result<Vec<Shape>, String> {
    Ok(c.inputs.to_vec())
}

/// The NumPy broadcast of inputs 0 and 1.
pub fn broadcast(c: &InferCtx) -> Result<Vec<Shape>, String> {
    let s = c.inputs[0]
        .broadcast(&c.inputs[1])
        .ok_or_else(|| format!("shapes {} and {} are incompatible for broadcasting", c.inputs[0], c.inputs[1]))?;
    Ok(vec![s])
}

/// `(Sparse)SoftmaxCrossEntropyWithLogits`: loss `[batch]`, backprop like the logits.
pub fn cross_entropy(c: &InferCtx) -> Result<Vec<Shape>, String> {
    let f = &c.inputs[0];
    match f.dims() {
        Some([b, _]) => Ok(vec![Shape::new(vec![*b]), f.clone()]),
        Some(d) => Err(format!("logits must be 2-dimensional, got rank {}", d.len())),
        None => Ok(vec![Shape::new(vec![None]), Shape::new(vec![None, None])]),
    }
}

/// `GatherV2` with a constant axis and `batch_dims` 0: params[:axis] + indices + params[axis+1:].
pub fn gather_v2(c: &InferCtx) -> Result<Vec<Shape>, String> {
    let batch_dims = match c.attrs.get("batch_dims").and_then(|a| a.value.as_ref()) {
        Some(ferroflow_proto::attr_value::Value::I(b)) => *b,
        _ => 0,
    };
    let (Some(axis), Some(p), Some(idx)) = (c.const_ints(2), c.inputs[0].dims(), c.inputs[1].dims()) else {
        return Ok(vec![Shape::unknown()]);
    };
    let Some(&axis) = axis.first() else { return Ok(vec![Shape::unknown()]) };
    let axis = if axis < 0 { axis + p.len() as i64 } else { axis };
    if batch_dims != 0 || axis < 0 || axis as usize >= p.len() {
        return Ok(vec![Shape::unknown()]);
    }
    let a = axis as usize;
    let mut out = p[..a].to_vec();
    out.extend_from_slice(idx);
    out.extend_from_slice(&p[a + 1..]);
    Ok(vec![Shape::new(out)])
}

/// `Transpose` with a constant permutation.
pub fn transpose(c: &InferCtx) -> Result<Vec<Shape>, String> {
    let (Some(perm), Some(dims)) = (c.const_ints(1), c.inputs[0].dims()) else { return Ok(vec![Shape::unknown()]) };
    if perm.len() != dims.len() {
        return Err(format!("permutation {perm:?} does not match rank {}", dims.len()));
    }
    let out = perm
        .iter()
        .map(|&p| {
            usize::try_from(p)
                .ok()
                .and_then(|p| dims.get(p).copied())
                .ok_or_else(|| format!("bad permutation {perm:?}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(vec![Shape::new(out)])
}

/// `Slice` with constant begin and size (`-1` = to the end).
pub fn slice(c: &InferCtx) -> Result<Vec<Shape>, String> {
    let (Some(begin), Some(size), Some(dims)) = (c.const_ints(1), c.const_ints(2), c.inputs[0].dims()) else {
        return Ok(vec![Shape::unknown()]);
    };
    if begin.len() != dims.len() || size.len() != dims.len() {
        return Err(format!("begin {begin:?} and size {size:?} must have the input's rank {}", dims.len()));
    }
    let out = (0..dims.len())
        .map(|i| match size[i] {
            -1 => dims[i].and_then(|d| usize::try_from(d as i64 - begin[i]).ok()),
            n => usize::try_from(n).ok(),
        })
        .collect();
    Ok(vec![Shape::new(out)])
}

/// `BroadcastTo`: the shape given by input 1's value (unknown if not constant).
pub fn fill_like_shape(c: &InferCtx) -> Result<Vec<Shape>, String> {
    shape_from_value(c, 1)
}

/// Random ops: the output's shape is the value of input 0 (when constant).
pub fn shape_from_input0(c: &InferCtx) -> Result<Vec<Shape>, String> {
    shape_from_value(c, 0)
}

/// `Conv2DBackpropInput` (shape = value of `input_sizes`, input 0) and
/// `Conv2DBackpropFilter` (shape = value of `filter_sizes`, input 1).
pub fn shape_from_input0_or_1(c: &InferCtx) -> Result<Vec<Shape>, String> {
    let i = if c.def.name == "Conv2DBackpropFilter" { 1 } else { 0 };
    shape_from_value(c, i)
}

fn shape_from_value(c: &InferCtx, input: usize) -> Result<Vec<Shape>, String> {
    let dims = c.values.get(input).and_then(|v| v.as_ref()).and_then(|t| match t.dtype() {
        ferroflow_tensor::DType::Int32 => {
            Some(t.as_slice::<i32>().ok()?.iter().map(|&d| usize::try_from(d).ok()).collect())
        }
        ferroflow_tensor::DType::Int64 => {
            Some(t.as_slice::<i64>().ok()?.iter().map(|&d| usize::try_from(d).ok()).collect())
        }
        _ => None,
    });
    Ok(vec![dims.map_or_else(Shape::unknown, Shape::new)])
}

/// The NumPy broadcast of all inputs.
pub fn broadcast_all(c: &InferCtx) -> Result<Vec<Shape>, String> {
    let mut s = Shape::scalar();
    for i in c.inputs {
        s = s.broadcast(i).ok_or_else(|| format!("shapes {s} and {i} are incompatible for broadcasting"))?;
    }
    Ok(vec![s])
}

/// `SelectV2`: the broadcast of condition, then and else.
pub fn select_v2(c: &InferCtx) -> Result<Vec<Shape>, String> {
    let te = c.inputs[1]
        .broadcast(&c.inputs[2])
        .ok_or_else(|| format!("shapes {} and {} are incompatible for broadcasting", c.inputs[1], c.inputs[2]))?;
    let all = c.inputs[0]
        .broadcast(&te)
        .ok_or_else(|| format!("condition shape {} does not broadcast with {te}", c.inputs[0]))?;
    Ok(vec![all])
}

/// `Select` (v1): `t` and `e` have one shape; the condition matches it or is a vector over
/// its first dimension.
pub fn select(c: &InferCtx) -> Result<Vec<Shape>, String> {
    let (cond, t, e) = (&c.inputs[0], &c.inputs[1], &c.inputs[2]);
    if let (Some(td), Some(ed)) = (t.dims(), e.dims()) {
        let same = td.len() == ed.len() && td.iter().zip(ed).all(|(a, b)| a.is_none() || b.is_none() || a == b);
        if !same {
            return Err(format!("'then' and 'else' must have the same shape, got {t} and {e}"));
        }
    }
    if let (Some(cd), Some(td)) = (cond.dims(), t.dims()) {
        let row_vector = cd.len() == 1 && !td.is_empty();
        if cd.len() != td.len() && !row_vector {
            return Err(format!("condition shape {cond} must equal {t} or be a vector over its first dimension"));
        }
    }
    Ok(vec![if t.rank().is_some() { t.clone() } else { e.clone() }])
}

fn ints_attr(c: &InferCtx, name: &str) -> Vec<i64> {
    match c.def.attr(c.attrs, name).and_then(|v| v.value.as_ref()) {
        Some(attr_value::Value::List(l)) => l.i.clone(),
        _ => vec![],
    }
}

fn string_attr(c: &InferCtx, name: &str) -> String {
    match c.def.attr(c.attrs, name).and_then(|v| v.value.as_ref()) {
        Some(attr_value::Value::S(s)) => String::from_utf8_lossy(s).into_owned(),
        _ => String::new(),
    }
}

/// Output size of one spatial dimension of a convolution or pool, TensorFlow's rule.
pub fn conv_output_size(
    input: usize,
    k: usize,
    stride: usize,
    dilation: usize,
    padding: &str,
    pads: (usize, usize),
) -> Result<usize, String> {
    if stride == 0 || dilation == 0 || k == 0 {
        return Err("strides, dilations and window sizes must be positive".into());
    }
    let eff = (k - 1) * dilation + 1;
    Ok(match padding {
        "VALID" => {
            if input < eff {
                return Err(format!(
                    "window of effective size {eff} does not fit input size {input} with VALID padding"
                ));
            }
            (input - eff) / stride + 1
        }
        "SAME" => input.div_ceil(stride),
        "EXPLICIT" => {
            let padded = input + pads.0 + pads.1;
            if padded < eff {
                return Err(format!("window of effective size {eff} does not fit padded input size {padded}"));
            }
            (padded - eff) / stride + 1
        }
        p => return Err(format!("unknown padding '{p}'")),
    })
}

fn spatial(c: &InferCtx, window: [Option<usize>; 2], channels: Option<usize>) -> Result<Vec<Shape>, String> {
    let Some(x) = c.inputs[0].dims() else { return Ok(vec![Shape::unknown()]) };
    if x.len() != 4 {
        return Err(format!("input must be 4-dimensional, got shape {}", c.inputs[0]));
    }
    if string_attr(c, "data_format") == "NCHW" {
        return Ok(vec![Shape::new(vec![None; 4])]);
    }
    let strides = ints_attr(c, "strides");
    let dil = ints_attr(c, "dilations");
    if strides.len() != 4 {
        return Err(format!("strides must have 4 elements, got {strides:?}"));
    }
    let pads = ints_attr(c, "explicit_paddings");
    let padding = string_attr(c, "padding");
    let mut out = vec![x[0], None, None, channels];
    for i in 0..2 {
        let (Some(inp), Some(k)) = (x[1 + i], window[i]) else { continue };
        let d = dil.get(1 + i).copied().unwrap_or(1).max(0) as usize;
        let p = (
            pads.get(2 + 2 * i).copied().unwrap_or(0).max(0) as usize,
            pads.get(3 + 2 * i).copied().unwrap_or(0).max(0) as usize,
        );
        out[1 + i] = Some(conv_output_size(inp, k, strides[1 + i].max(0) as usize, d.max(1), &padding, p)?);
    }
    Ok(vec![Shape::new(out)])
}

/// `Conv2D`, `DepthwiseConv2dNative` (NHWC).
pub fn conv2d(c: &InferCtx) -> Result<Vec<Shape>, String> {
    let f = c.inputs[1].dims().map(|d| d.to_vec());
    let (window, channels) = match &f {
        Some(f) if f.len() == 4 => {
            let ch = if c.def.name != "DepthwiseConv2dNative" { f[3] } else { f[2].zip(f[3]).map(|(a, b)| a * b) };
            ([f[0], f[1]], ch)
        }
        Some(f) => return Err(format!("filter must be 4-dimensional, got {}", Shape::new(f.clone()))),
        None => ([None, None], None),
    };
    spatial(c, window, channels)
}

/// `MaxPool`, `AvgPool` (NHWC).
pub fn pool(c: &InferCtx) -> Result<Vec<Shape>, String> {
    let k = ints_attr(c, "ksize");
    if k.len() != 4 {
        return Err(format!("ksize must have 4 elements, got {k:?}"));
    }
    let ch = c.inputs[0].dims().and_then(|d| d.get(3).copied().flatten());
    let mut r = spatial(c, [Some(k[1].max(0) as usize), Some(k[2].max(0) as usize)], ch)?;
    if let (Some(d), Some(x)) = (r[0].dims().map(|d| d.to_vec()), c.inputs[0].dims()) {
        if x.len() == 4 {
            r[0] = Shape::new(vec![d[0], d[1], d[2], x[3]]);
        }
    }
    Ok(r)
}

/// `FusedBatchNormV3`: y has x's shape; the statistics are vectors over channels.
pub fn fused_batch_norm(c: &InferCtx) -> Result<Vec<Shape>, String> {
    let ch = c.inputs[1].dims().and_then(|d| d.first().copied().flatten());
    let v = Shape::new(vec![ch]);
    Ok(vec![c.inputs[0].clone(), v.clone(), v.clone(), v.clone(), v, Shape::unknown()])
}

/// `Switch`: both outputs have the data's shape.
pub fn switch(c: &InferCtx) -> Result<Vec<Shape>, String> {
    Ok(vec![c.inputs[0].clone(), c.inputs[0].clone()])
}

/// `Merge`: the inputs' shape when they all agree, else unknown (a loop's back edge is not
/// known yet, and loop variables may change shape); and the scalar `value_index`.
pub fn merge(c: &InferCtx) -> Result<Vec<Shape>, String> {
    let first = &c.inputs[0];
    let rank = first.rank();
    let out = match first.dims() {
        Some(d0) if c.inputs.iter().all(|s| s.rank() == rank) => {
            // Same rank: keep each dimension the inputs agree on.
            let dims = (0..d0.len())
                .map(|i| {
                    let v = d0[i];
                    c.inputs.iter().all(|s| s.dims().is_some_and(|d| d[i] == v)).then_some(v).flatten()
                })
                .collect();
            Shape::new(dims)
        }
        _ => Shape::unknown(),
    };
    Ok(vec![out, Shape::scalar()])
}

/// A scalar output.
pub fn scalar(_: &InferCtx) -> Result<Vec<Shape>, String> {
    Ok(vec![Shape::scalar()])
}

/// Nothing.
pub fn no_outputs(_: &InferCtx) -> Result<Vec<Shape>, String> {
    Ok(vec![])
}

/// The shape of the `value` attr tensor.
pub fn const_shape(c: &InferCtx) -> Result<Vec<Shape>, String> {
    match c.def.attr(c.attrs, "value").and_then(|v| v.value.as_ref()) {
        Some(attr_value::Value::Tensor(t)) => {
            Ok(vec![convert::shape_from_proto(&t.tensor_shape.clone().unwrap_or_default())])
        }
        _ => Err("attr 'value' must be a tensor".into()),
    }
}

/// The shape in the `shape` attr.
pub fn shape_attr(c: &InferCtx) -> Result<Vec<Shape>, String> {
    match c.def.attr(c.attrs, "shape").and_then(|v| v.value.as_ref()) {
        Some(attr_value::Value::Shape(s)) => Ok(vec![convert::shape_from_proto(s)]),
        _ => Ok(vec![Shape::unknown()]),
    }
}

/// `MatMul`: [m, k] x [k, n] -> [m, n], honouring `transpose_a/b`.
pub fn matmul(c: &InferCtx) -> Result<Vec<Shape>, String> {
    let (a, b) = (&c.inputs[0], &c.inputs[1]);
    for (s, n) in [(a, "a"), (b, "b")] {
        if s.rank().is_some_and(|r| r != 2) {
            return Err(format!("input '{n}' must be a matrix, got shape {s}"));
        }
    }
    let dim = |s: &Shape, i: usize| s.dims().and_then(|d| d[i]);
    let (ta, tb) = (c.bool("transpose_a"), c.bool("transpose_b"));
    let (m, ka) = if ta { (dim(a, 1), dim(a, 0)) } else { (dim(a, 0), dim(a, 1)) };
    let (kb, n) = if tb { (dim(b, 1), dim(b, 0)) } else { (dim(b, 0), dim(b, 1)) };
    if let (Some(x), Some(y)) = (ka, kb) {
        if x != y {
            return Err(format!("inner dimensions differ: {a} x {b} (transpose_a={ta}, transpose_b={tb})"));
        }
    }
    Ok(vec![Shape::new(vec![m, n])])
}

fn norm_axis(axis: i64, rank: usize) -> Result<usize, String> {
    let r = rank as i64;
    if axis < -r || axis >= r.max(1) {
        return Err(format!("axis {axis} is out of range for rank {rank}"));
    }
    Ok(if axis < 0 { (axis + r) as usize } else { axis as usize })
}

/// Reductions (`Sum`, `Mean`, `Max`, ...): input 1 holds the axes; `keep_dims`.
pub fn reduce(c: &InferCtx) -> Result<Vec<Shape>, String> {
    let (Some(dims), Some(axes)) = (c.inputs[0].dims(), c.const_ints(1)) else {
        return Ok(vec![Shape::unknown()]);
    };
    let mut reduced = vec![false; dims.len()];
    for a in axes {
        reduced[norm_axis(a, dims.len())?] = true;
    }
    let keep = c.bool("keep_dims");
    let out =
        dims.iter().zip(&reduced).filter_map(|(d, &r)| if r { keep.then_some(Some(1)) } else { Some(*d) }).collect();
    Ok(vec![Shape::new(out)])
}

/// `ArgMax`/`ArgMin`: removes the axis given by input 1.
pub fn arg_reduce(c: &InferCtx) -> Result<Vec<Shape>, String> {
    let (Some(dims), Some(axis)) = (c.inputs[0].dims(), c.const_ints(1)) else {
        return Ok(vec![Shape::unknown()]);
    };
    let a = norm_axis(*axis.first().ok_or("dimension must be a scalar")?, dims.len())?;
    Ok(vec![Shape::new(dims.iter().enumerate().filter(|(i, _)| *i != a).map(|(_, d)| *d).collect())])
}

/// `Reshape`: the constant shape input, with one `-1` inferred when the input is known.
pub fn reshape(c: &InferCtx) -> Result<Vec<Shape>, String> {
    let Some(target) = c.const_ints(1) else {
        return Ok(vec![Shape::unknown()]);
    };
    let mut out: Vec<Option<usize>> = target.iter().map(|&d| usize::try_from(d).ok()).collect();
    let known: usize = out.iter().flatten().product();
    if let Some(n) = c.inputs[0].num_elements() {
        let unknowns = target.iter().filter(|&&d| d == -1).count();
        if unknowns == 0 && known != n {
            return Err(format!("cannot reshape a tensor of {n} elements to shape {target:?}"));
        }
        if unknowns == 1 {
            if known == 0 || !n.is_multiple_of(known) {
                return Err(format!("cannot reshape a tensor of {n} elements to shape {target:?}"));
            }
            let i = target.iter().position(|&d| d == -1).expect("one -1");
            out[i] = Some(n / known);
        }
    }
    Ok(vec![Shape::new(out)])
}

/// `Shape`: a vector of the input's rank.
pub fn shape_of(c: &InferCtx) -> Result<Vec<Shape>, String> {
    Ok(vec![Shape::new(vec![c.inputs[0].rank()])])
}

/// `ExpandDims`: inserts a 1 at the constant axis.
pub fn expand_dims(c: &InferCtx) -> Result<Vec<Shape>, String> {
    let (Some(dims), Some(axis)) = (c.inputs[0].dims(), c.const_ints(1)) else {
        return Ok(vec![Shape::unknown()]);
    };
    let a = *axis.first().ok_or("dim must be a scalar")?;
    let r = dims.len() as i64 + 1;
    if a < -r || a >= r {
        return Err(format!("axis {a} is out of range for rank {}", dims.len()));
    }
    let a = if a < 0 { a + r } else { a } as usize;
    let mut out = dims.to_vec();
    out.insert(a, Some(1));
    Ok(vec![Shape::new(out)])
}

/// `Squeeze`: removes the listed size-1 axes, or every size-1 axis.
pub fn squeeze(c: &InferCtx) -> Result<Vec<Shape>, String> {
    let Some(dims) = c.inputs[0].dims() else {
        return Ok(vec![Shape::unknown()]);
    };
    let axes: Vec<i64> = match c.def.attr(c.attrs, "squeeze_dims").and_then(|v| v.value.as_ref()) {
        Some(attr_value::Value::List(l)) => l.i.clone(),
        _ => vec![],
    };
    let mut keep = vec![true; dims.len()];
    if axes.is_empty() {
        if dims.iter().any(Option::is_none) {
            return Ok(vec![Shape::unknown()]);
        }
        for (k, d) in keep.iter_mut().zip(dims) {
            *k = *d != Some(1);
        }
    } else {
        for a in axes {
            let i = norm_axis(a, dims.len())?;
            if dims[i].is_some_and(|d| d != 1) {
                return Err(format!("cannot squeeze dimension {i} of size {}", dims[i].unwrap_or(0)));
            }
            keep[i] = false;
        }
    }
    Ok(vec![Shape::new(dims.iter().zip(&keep).filter(|(_, k)| **k).map(|(d, _)| *d).collect())])
}

/// `Fill`: the constant dims input.
pub fn fill(c: &InferCtx) -> Result<Vec<Shape>, String> {
    match c.const_ints(0) {
        Some(d) => Ok(vec![Shape::new(d.iter().map(|&x| usize::try_from(x).ok()).collect())]),
        None => Ok(vec![Shape::new(vec![None; c.inputs[0].dims().and_then(|d| d[0]).unwrap_or(0)])]),
    }
}

/// `Pack`: N equal shapes stacked along `axis`.
pub fn pack(c: &InferCtx) -> Result<Vec<Shape>, String> {
    let n = c.inputs.len();
    let Some(first) = c.inputs.iter().find_map(|s| s.dims()) else {
        return Ok(vec![Shape::unknown()]);
    };
    for s in c.inputs {
        if s.rank().is_some_and(|r| r != first.len()) {
            return Err(format!("all inputs must have the same rank, got {} and {s}", Shape::new(first.to_vec())));
        }
    }
    let axis = c.int("axis").unwrap_or(0);
    let r = first.len() as i64 + 1;
    if axis < -r || axis >= r {
        return Err(format!("axis {axis} is out of range for rank {}", first.len()));
    }
    let a = if axis < 0 { axis + r } else { axis } as usize;
    let mut out = first.to_vec();
    out.insert(a, Some(n));
    Ok(vec![Shape::new(out)])
}

/// `ConcatV2`: inputs joined along the constant last input.
pub fn concat(c: &InferCtx) -> Result<Vec<Shape>, String> {
    let n = c.inputs.len() - 1;
    let (Some(axis), Some(first)) = (c.const_ints(n), c.inputs[..n].iter().find_map(|s| s.dims())) else {
        return Ok(vec![Shape::unknown()]);
    };
    let a = norm_axis(*axis.first().ok_or("axis must be a scalar")?, first.len())?;
    let mut out = first.to_vec();
    let mut total = Some(0);
    for s in &c.inputs[..n] {
        let Some(d) = s.dims() else {
            return Ok(vec![Shape::unknown()]);
        };
        if d.len() != first.len() {
            return Err(format!("all inputs must have the same rank, got {} and {s}", Shape::new(first.to_vec())));
        }
        total = match (total, d[a]) {
            (Some(t), Some(x)) => Some(t + x),
            _ => None,
        };
    }
    out[a] = total;
    Ok(vec![Shape::new(out)])
}

/// Constants up to this many elements are read as values during inference.
const MAX_CONST_VALUE_ELEMENTS: usize = 64;

/// Infers the output shapes of every node of `graph`; errors name the node.
pub fn infer_shapes(graph: &Graph) -> Result<Vec<Vec<Shape>>, GraphError> {
    let reg = OpRegistry::global();
    let order = graph.topological_order()?;
    let mut shapes: Vec<Vec<Shape>> = vec![Vec::new(); graph.len()];
    let mut values: Vec<Option<Tensor>> = vec![None; graph.len()];
    for id in order {
        let node = graph.node(id);
        let Some(def) = reg.get(&node.op) else {
            shapes[id] = vec![Shape::unknown(); node.num_outputs()];
            continue;
        };
        let inputs: Vec<Shape> =
            node.inputs.iter().map(|o| shapes[o.node].get(o.index).cloned().unwrap_or_else(Shape::unknown)).collect();
        let vals: Vec<Option<Tensor>> =
            node.inputs.iter().map(|o| if o.index == 0 { values[o.node].clone() } else { None }).collect();
        let ctx = InferCtx { def, attrs: &node.attrs, inputs: &inputs, values: &vals, num_outputs: node.num_outputs() };
        let out = (def.shape_fn)(&ctx).map_err(|reason| GraphError::BadAttrs {
            node: node.name.clone(),
            op: node.op.clone(),
            reason,
        })?;
        if node.op == "Const" {
            if let Some(attr_value::Value::Tensor(t)) = node.attrs.get("value").and_then(|v| v.value.as_ref()) {
                // Only small constants matter here (shapes, axes); never materialise big ones.
                let small = convert::shape_from_proto(&t.tensor_shape.clone().unwrap_or_default())
                    .num_elements()
                    .is_some_and(|n| n <= MAX_CONST_VALUE_ELEMENTS);
                values[id] = if small { convert::tensor_from_proto(t).ok() } else { None };
            }
        }
        // A variable's handle is a scalar, but reads of it have the variable's shape: take
        // it from the `VarHandleOp` that made the handle (TensorFlow's "handle data").
        let out = match (node.op.as_str(), node.inputs.first()) {
            ("ReadVariableOp", Some(h)) if graph.node(h.node).op == "VarHandleOp" => {
                match graph.node(h.node).attrs.get("shape").and_then(|v| v.value.as_ref()) {
                    Some(attr_value::Value::Shape(s)) => vec![convert::shape_from_proto(s)],
                    _ => out,
                }
            }
            // Random tensors shaped like another tensor (`RandomUniform(Shape(x))`, as in
            // dropout) have x's shape, even when x's batch dimension is unknown.
            ("RandomUniform" | "RandomStandardNormal" | "TruncatedNormal", Some(sh))
                if out.first().is_some_and(|o| o.rank().is_none()) && graph.node(sh.node).op == "Shape" =>
            {
                let src = graph.node(sh.node).inputs[0];
                vec![shapes[src.node].get(src.index).cloned().unwrap_or_else(Shape::unknown)]
            }
            _ => out,
        };
        shapes[id] = out;
    }
    Ok(shapes)
}
