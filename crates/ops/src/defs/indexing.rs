//! Moving data by index: transposes, slices, tiles, pads, space-to-batch and back,
//! unstacking and splits, gathers, one-hot, `Where`, `Range`, `Cumsum`, `TopKV2`.
use ferroflow_graph::{Output, ShapeError};
use ferroflow_proto::attr;
use ferroflow_tensor::{DType, Shape, Tensor};

use crate::gradient::{build, g0, GradCtx, GradResult};
use crate::registry::{op, OpBuilder, OpDef};
use crate::shape_inference::{self as s, norm_axis, InferCtx, Known};
use crate::{attrs, Ops, RawOps};

fn index_attr(name: &str) -> String {
    format!("{name}: {{int32, int64}} = DT_INT32")
}

/// `Pad`, `PadV2`, `MirrorPad`: the input grown by constant paddings.
/// `Cumsum` and `Cumprod`: a running total along an axis.
fn cumulative(name: &str, gradient: crate::GradFn) -> OpDef {
    op(name)
        .input("x: T")
        .input("axis: Tidx")
        .output("out: T")
        .attr("exclusive: bool = false")
        .attr("reverse: bool = false")
        .attr("T: type")
        .attr(&index_attr("Tidx"))
        .shape(s::unchanged)
        .gradient(gradient)
        .build()
}

fn pad_op(name: &str) -> OpBuilder {
    op(name)
        .input("input: T")
        .input("paddings: Tpaddings")
        .output("output: T")
        .attr("T: type")
        .attr(&index_attr("Tpaddings"))
        .shape(pad)
        .grows()
}

/// `TensorScatterUpdate` and its arithmetic forms: `tensor` with slices at `indices`
/// combined with `updates`.
fn tensor_scatter(name: &str, index_types: &str) -> OpBuilder {
    op(name)
        .input("tensor: T")
        .input("indices: Tindices")
        .input("updates: T")
        .output("output: T")
        .attr("T: type")
        .attr(&format!("Tindices: {index_types}"))
        .attr("bad_indices_policy: string = ''")
        .shape(s::unchanged)
}

/// The indexing ops.
pub fn defs() -> Vec<OpDef> {
    vec![
        op("Transpose")
            .input("x: T")
            .input("perm: Tperm")
            .output("y: T")
            .attr("T: type")
            .attr(&index_attr("Tperm"))
            .shape(transpose)
            .gradient(transpose_grad)
            .build(),
        op("Slice")
            .input("input: T")
            .input("begin: Index")
            .input("size: Index")
            .output("output: T")
            .attr("T: type")
            .attr("Index: {int32, int64}")
            .shape(slice)
            .gradient(slice_grad)
            .build(),
        op("StridedSlice")
            .input("input: T")
            .input("begin: Index")
            .input("end: Index")
            .input("strides: Index")
            .output("output: T")
            .attr("T: type")
            .attr("Index: {int16, int32, int64}")
            .attr("begin_mask: int = 0")
            .attr("end_mask: int = 0")
            .attr("ellipsis_mask: int = 0")
            .attr("new_axis_mask: int = 0")
            .attr("shrink_axis_mask: int = 0")
            .shape(strided_slice_shape)
            .known(strided_slice_of_shape)
            .gradient(strided_slice_grad)
            .build(),
        op("StridedSliceGrad")
            .input("shape: Index")
            .input("begin: Index")
            .input("end: Index")
            .input("strides: Index")
            .input("dy: T")
            .output("output: T")
            .attr("T: type")
            .attr("Index: {int32, int64}")
            .attr("begin_mask: int = 0")
            .attr("end_mask: int = 0")
            .attr("ellipsis_mask: int = 0")
            .attr("new_axis_mask: int = 0")
            .attr("shrink_axis_mask: int = 0")
            .shape(s::shape_of_input0_value)
            .gradient(strided_slice_grad_grad)
            .build(),
        op("Tile")
            .input("input: T")
            .input("multiples: Tmultiples")
            .output("output: T")
            .attr("T: type")
            .attr(&index_attr("Tmultiples"))
            .shape(tile)
            .grows()
            .gradient(tile_grad)
            .build(),
        pad_op("Pad").gradient(pad_grad).build(),
        pad_op("PadV2").input("constant_values: T").gradient(pad_grad).build(),
        op("SpaceToBatchND")
            .input("input: T")
            .input("block_shape: Tblock_shape")
            .input("paddings: Tpaddings")
            .output("output: T")
            .attr("T: type")
            .attr(&index_attr("Tblock_shape"))
            .attr(&index_attr("Tpaddings"))
            .shape(|c| space_batch(c, true))
            .grows()
            .gradient(space_to_batch_grad)
            .build(),
        op("BatchToSpaceND")
            .input("input: T")
            .input("block_shape: Tblock_shape")
            .input("crops: Tcrops")
            .output("output: T")
            .attr("T: type")
            .attr(&index_attr("Tblock_shape"))
            .attr(&index_attr("Tcrops"))
            .shape(|c| space_batch(c, false))
            .gradient(batch_to_space_grad)
            .build(),
        pad_op("MirrorPad")
            .attr("mode: {'REFLECT', 'SYMMETRIC'}")
            .gradient_unavailable("TensorFlow differentiates it with MirrorPadGrad, which ferroflow does not have yet")
            .build(),
        op("Range")
            .input("start: Tidx")
            .input("limit: Tidx")
            .input("delta: Tidx")
            .output("output: Tidx")
            .attr("Tidx: {bfloat16, half, float, double, int8, int16, int32, int64, uint16, uint32} = DT_INT32")
            .shape(range)
            .grows()
            .not_differentiable("its output is a sequence of numbers, not a function of values to differentiate (TensorFlow's gradient is None)")
            .build(),
        op("Unpack")
            .input("value: T")
            .output("output: num * T")
            .attr("num: int >= 0")
            .attr("T: type")
            .attr("axis: int = 0")
            .shape(unpack)
            .gradient(unpack_grad)
            .build(),
        op("Split")
            .input("split_dim: int32")
            .input("value: T")
            .output("output: num_split * T")
            .attr("num_split: int >= 1")
            .attr("T: type")
            .shape(split)
            .gradient(split_grad)
            .build(),
        op("SplitV")
            .input("value: T")
            .input("size_splits: Tlen")
            .input("split_dim: int32")
            .output("output: num_split * T")
            .attr("num_split: int >= 1")
            .attr("T: type")
            .attr("Tlen: {int8, int32, int64} = DT_INT64")
            .shape(split_v)
            .gradient(split_v_grad)
            .build(),
        op("GatherV2")
            .input("params: Tparams")
            .input("indices: Tindices")
            .input("axis: Taxis")
            .output("output: Tparams")
            .attr("batch_dims: int = 0")
            .attr("Tparams: type")
            .attr("Tindices: {int16, int32, int64}")
            .attr("Taxis: {int32, int64}")
            .shape(gather_v2)
            .grows()
            .gradient(gather_grad)
            .build(),
        op("GatherNd")
            .input("params: Tparams")
            .input("indices: Tindices")
            .output("output: Tparams")
            .attr("Tparams: type")
            .attr("Tindices: {int16, int32, int64}")
            .attr("bad_indices_policy: string = ''")
            .shape(gather_nd_shape)
            .grows()
            .gradient(gather_nd_grad)
            .build(),
        op("ScatterNd")
            .input("indices: Tindices")
            .input("updates: T")
            .input("shape: Tindices")
            .output("output: T")
            .attr("T: type")
            .attr("Tindices: {int16, int32, int64}")
            .attr("bad_indices_policy: string = ''")
            .shape(scatter_nd)
            .grows()
            .gradient(scatter_nd_grad)
            .build(),
        tensor_scatter("TensorScatterUpdate", "{int16, int32, int64, uint16}").gradient(tensor_scatter_update_grad).build(),
        tensor_scatter("TensorScatterAdd", "{int32, int64}").gradient(tensor_scatter_add_grad).build(),
        tensor_scatter("TensorScatterSub", "{int32, int64}").gradient(tensor_scatter_add_grad).build(),
        tensor_scatter("TensorScatterMax", "{int32, int64}").gradient(tensor_scatter_min_max_grad).build(),
        tensor_scatter("TensorScatterMin", "{int32, int64}").gradient(tensor_scatter_min_max_grad).build(),
        op("OneHot")
            .input("indices: TI")
            .input("depth: int32")
            .input("on_value: T")
            .input("off_value: T")
            .output("output: T")
            .attr("axis: int = -1")
            .attr("T: type")
            .attr("TI: {uint8, int8, int32, int64} = DT_INT64")
            .shape(one_hot)
            .grows()
            .not_differentiable("TensorFlow's gradient is None")
            .build(),
        cumulative("Cumsum", cumsum_grad),
        cumulative("Cumprod", cumprod_grad),
        op("Where")
            .input("input: T")
            .output("index: int64")
            .attr("T: type = DT_BOOL")
            .not_differentiable("its output is integer indices")
            .build(),
        op("InvertPermutation")
            .input("x: T")
            .output("y: T")
            .attr("T: {int32, int64} = DT_INT32")
            .shape(s::unchanged)
            .not_differentiable("its output is integer indices")
            .build(),
        op("ListDiff")
            .input("x: T")
            .input("y: T")
            .output("out: T")
            .output("idx: out_idx")
            .attr("T: type")
            .attr("out_idx: {int32, int64} = DT_INT32")
            .shape(|_| Ok(vec![Shape::new(vec![None]), Shape::new(vec![None])]))
            .not_differentiable("TensorFlow's gradient is None: its output is a selection of values")
            .build(),
        op("TopKV2")
            .input("input: T")
            .input("k: Tk")
            .output("values: T")
            .output("indices: index_type")
            .attr("sorted: bool = true")
            .attr("T: type")
            .attr(&index_attr("Tk"))
            .attr("index_type: {int16, int32, int64} = DT_INT32")
            .shape(top_k_shape)
            .gradient(top_k_grad)
            .build(),
    ]
}

/// `StridedSlice`'s output shape, from the input's (partly known) shape and constant begin, end
/// and strides, with TensorFlow's masks: an ellipsis covers the input dimensions the other
/// entries leave (and is implicit at the end), a new axis adds a 1, a shrunk axis is dropped.
/// A dimension of unknown size gives an unknown one (its slice's length depends on it).
/// `StridedSlice` of a (partially known) shape vector along its one axis, as TensorFlow's
/// shape inference reads `tf.shape(x)[0]` and `tf.shape(x)[1:]`: one dimension (the axis
/// shrunk) or the sliced shape. Only the plain forms (no ellipsis, no new axis).
fn strided_slice_of_shape(c: &InferCtx) -> Option<Known> {
    let Some(Some(Known::Shape(shape))) = c.known.first() else { return None };
    let dims = shape.dims()?;
    let (b, e, st) = (c.const_ints(1)?, c.const_ints(2)?, c.const_ints(3)?);
    if b.len() != 1 || e.len() != 1 || st.len() != 1 || c.int("ellipsis_mask").unwrap_or(0) != 0 {
        return None;
    }
    if c.int("new_axis_mask").unwrap_or(0) != 0 {
        return None;
    }
    let size = dims.len() as i64;
    if c.int("shrink_axis_mask").unwrap_or(0) & 1 == 1 {
        let i = if b[0] < 0 { b[0] + size } else { b[0] };
        return (0..size).contains(&i).then(|| Known::Dim(dims[i as usize]));
    }
    let stride = st[0];
    if stride <= 0 {
        return None;
    }
    let canon = |x: i64| (if x < 0 { x + size } else { x }).clamp(0, size);
    let begin = if c.int("begin_mask").unwrap_or(0) & 1 == 1 { 0 } else { canon(b[0]) };
    let end = if c.int("end_mask").unwrap_or(0) & 1 == 1 { size } else { canon(e[0]) };
    let picked = (begin..end).step_by(stride as usize).map(|i| dims[i as usize]).collect();
    Some(Known::Shape(Shape::new(picked)))
}

fn strided_slice_shape(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let unknown = Ok(vec![Shape::unknown()]);
    let (Some(dims), Some(b), Some(e), Some(st)) =
        (c.inputs[0].dims(), c.const_ints(1), c.const_ints(2), c.const_ints(3))
    else {
        return unknown;
    };
    let n = b.len();
    if e.len() != n || st.len() != n || n > 64 {
        return unknown;
    }
    let bit = |mask: &str, i: usize| (c.int(mask).unwrap_or(0) >> i) & 1 == 1;
    let mut out = Vec::new();
    let mut dim = 0usize;
    let mut saw_ellipsis = false;
    for i in 0..n {
        if bit("ellipsis_mask", i) {
            if saw_ellipsis {
                return unknown; // TensorFlow allows one ellipsis
            }
            saw_ellipsis = true;
            let later = (i + 1..n).filter(|&j| !bit("new_axis_mask", j)).count();
            let Some(cover) = dims.len().checked_sub(dim + later) else { return unknown };
            out.extend_from_slice(&dims[dim..dim + cover]);
            dim += cover;
            continue;
        }
        if bit("new_axis_mask", i) {
            out.push(Some(1));
            continue;
        }
        let Some(&size) = dims.get(dim) else { return unknown };
        dim += 1;
        if bit("shrink_axis_mask", i) {
            continue;
        }
        let stride = st[i];
        if stride == 0 {
            return unknown;
        }
        let Some(size) = size else {
            out.push(None);
            continue;
        };
        let size = size as i64;
        let (lo, hi) = if stride > 0 { (0, size) } else { (-1, size - 1) };
        let canon = |x: i64| (if x < 0 { x + size } else { x }).clamp(lo, hi);
        let begin = if bit("begin_mask", i) {
            if stride > 0 {
                0
            } else {
                size - 1
            }
        } else {
            canon(b[i])
        };
        let end = if bit("end_mask", i) {
            if stride > 0 {
                size
            } else {
                -1
            }
        } else {
            canon(e[i])
        };
        let len = if stride > 0 {
            (end - begin + stride - 1).div_euclid(stride)
        } else {
            (begin - end - stride - 1).div_euclid(-stride)
        };
        out.push(Some(len.max(0) as usize));
    }
    out.extend_from_slice(&dims[dim.min(dims.len())..]);
    Ok(vec![Shape::new(out)])
}

/// `TopKV2`'s values and indices: the input's shape with the last dimension `k` (unknown
/// unless `k` is constant).
fn top_k_shape(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let out = match c.inputs[0].dims() {
        Some(d) if !d.is_empty() => {
            let k = c.const_ints(1).and_then(|k| k.first().copied()).and_then(|k| usize::try_from(k).ok());
            let mut d = d.to_vec();
            *d.last_mut().expect("non-empty") = k;
            Shape::new(d)
        }
        _ => Shape::unknown(),
    };
    Ok(vec![out.clone(), out])
}

/// `TopKV2`: the values' gradient scattered back to the positions the indices name along the
/// last axis, zeros elsewhere (TensorFlow's `_TopKGrad`: one `ScatterNd` over the flattened
/// input, each row's indices offset by the row's start).
fn top_k_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let (x, indices) = (ctx.input(0), ctx.output(1));
    let indices = if s.dtype(indices) == DType::Int32 { indices } else { s.cast(indices, DType::Int32)? };
    let last = |t: Output| -> Result<Output, crate::BuildError> {
        let shape = s.unary("Shape", t)?;
        let one = s.scalar(1i32)?;
        let at = s.sub(s.size(shape)?, one)?;
        let zero = s.scalar(0i32)?;
        s.gather_v2(shape, at, zero)
    };
    let (n, k) = (last(x)?, last(indices)?);
    let minus_one = s.scalar(-1i32)?;
    let rows_k = s.pack(&[minus_one, k])?;
    let ind2d = s.reshape(indices, rows_k)?;
    let rows = s.gather_v2(s.unary("Shape", ind2d)?, s.scalar(0i32)?, s.scalar(0i32)?)?;
    let starts = s.range(s.scalar(0i32)?, s.mul(rows, n)?, n)?;
    let flat = s.add_v2(ind2d, s.expand_dims(starts, minus_one)?)?;
    let flat = s.expand_dims(s.reshape(flat, s.constant_from(&[1], &[-1i32])?)?, minus_one)?;
    let total = s.reshape(s.size(x)?, s.constant_from(&[1], &[1i32])?)?;
    let scattered = s.scatter_nd(flat, s.reshape(g, s.constant_from(&[1], &[-1i32])?)?, total)?;
    Ok(vec![Some(s.reshape(scattered, s.unary("Shape", x)?)?), None])
}

/// `Transpose` with a constant permutation.
fn transpose(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let (Some(perm), Some(dims)) = (c.const_ints(1), c.inputs[0].dims()) else { return Ok(vec![Shape::unknown()]) };
    if perm.len() != dims.len() {
        return Err(format!("permutation {perm:?} does not match rank {}", dims.len()).into());
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
fn slice(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let (Some(begin), Some(size), Some(dims)) = (c.const_ints(1), c.const_ints(2), c.inputs[0].dims()) else {
        return Ok(vec![Shape::unknown()]);
    };
    if begin.len() != dims.len() || size.len() != dims.len() {
        return Err(format!("begin {begin:?} and size {size:?} must have the input's rank {}", dims.len()).into());
    }
    let out = (0..dims.len())
        .map(|i| match size[i] {
            -1 => dims[i].and_then(|d| usize::try_from(d as i64 - begin[i]).ok()),
            n => usize::try_from(n).ok(),
        })
        .collect();
    Ok(vec![Shape::new(out)])
}

/// `Unpack`: `num` outputs, the input's shape without `axis`.
fn unpack(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let Some(dims) = c.inputs[0].dims() else { return Ok(vec![Shape::unknown(); c.num_outputs]) };
    let axis = norm_axis(c.int("axis").unwrap_or(0), dims.len())?;
    if let Some(n) = dims[axis] {
        if n != c.num_outputs {
            return Err(format!("dimension {axis} has size {n}, but num is {}", c.num_outputs).into());
        }
    }
    let mut out = dims.to_vec();
    out.remove(axis);
    Ok(vec![Shape::new(out); c.num_outputs])
}

/// The input's shape with `axis` resized to each of `sizes` (`None` = unknown).
fn split_shapes(dims: &[Option<usize>], axis: usize, sizes: Vec<Option<usize>>) -> Vec<Shape> {
    sizes
        .into_iter()
        .map(|n| {
            let mut d = dims.to_vec();
            d[axis] = n;
            Shape::new(d)
        })
        .collect()
}

/// `Split`: `num_split` equal parts along the constant axis (input 0).
fn split(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let n = c.num_outputs;
    let (Some(dims), Some(axis)) = (c.inputs[1].dims(), c.const_ints(0)) else { return Ok(vec![Shape::unknown(); n]) };
    let axis = norm_axis(*axis.first().ok_or("axis must be a scalar")?, dims.len())?;
    let part = match dims[axis] {
        Some(d) if n > 0 && d % n != 0 => {
            return Err(format!("dimension {axis} of size {d} does not split into {n}").into())
        }
        Some(d) => Some(d / n.max(1)),
        None => None,
    };
    Ok(split_shapes(dims, axis, vec![part; n]))
}

/// `SplitV`: parts of the constant sizes (one may be -1) along the constant axis (input 2).
fn split_v(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let n = c.num_outputs;
    let (Some(dims), Some(axis), Some(sizes)) = (c.inputs[0].dims(), c.const_ints(2), c.const_ints(1)) else {
        return Ok(vec![Shape::unknown(); n]);
    };
    let axis = norm_axis(*axis.first().ok_or("axis must be a scalar")?, dims.len())?;
    if sizes.len() != n {
        return Err(format!("size_splits has {} values for num_split {n}", sizes.len()).into());
    }
    let known: i64 = sizes.iter().filter(|&&s| s >= 0).sum();
    let mut out: Vec<Option<usize>> = sizes.iter().map(|&s| usize::try_from(s).ok()).collect();
    if let (Some(total), Some(i)) = (dims[axis], sizes.iter().position(|&s| s == -1)) {
        out[i] = usize::try_from(total as i64 - known).ok();
    }
    Ok(split_shapes(dims, axis, out))
}

/// `Tile`: each dimension times its constant multiple.
fn tile(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let Some(dims) = c.inputs[0].dims() else { return Ok(vec![Shape::unknown()]) };
    let Some(m) = c.const_ints(1) else { return Ok(vec![Shape::new(vec![None; dims.len()])]) };
    if m.len() != dims.len() {
        return Err(format!("multiples {m:?} must have the input's rank {}", dims.len()).into());
    }
    let out =
        dims.iter().zip(&m).map(|(d, &k)| d.zip(usize::try_from(k).ok()).map(|(d, k)| d.saturating_mul(k))).collect();
    Ok(vec![Shape::new(out)])
}

/// `Pad`, `PadV2`, `MirrorPad`: each dimension grown by its constant paddings.
fn pad(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let Some(dims) = c.inputs[0].dims() else { return Ok(vec![Shape::unknown()]) };
    let Some(p) = c.const_ints(1) else { return Ok(vec![Shape::new(vec![None; dims.len()])]) };
    if p.len() != 2 * dims.len() {
        return Err(format!("paddings must be a [{}, 2] matrix, got {} values", dims.len(), p.len()).into());
    }
    let out = dims
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let grown = d.map(|d| d as i64).and_then(|d| d.checked_add(p[2 * i])?.checked_add(p[2 * i + 1]));
            grown.and_then(|g| usize::try_from(g).ok())
        })
        .collect();
    Ok(vec![Shape::new(out)])
}

fn scalar_f64(t: &Tensor) -> Option<f64> {
    Some(match t.dtype() {
        DType::Int32 => t.scalar_value::<i32>().ok()? as f64,
        DType::Int64 => t.scalar_value::<i64>().ok()? as f64,
        DType::Float => t.scalar_value::<f32>().ok()? as f64,
        DType::Double => t.scalar_value::<f64>().ok()?,
        _ => return None,
    })
}

/// `Range` with constant bounds: `ceil((limit - start) / delta)` elements, TensorFlow's size.
fn range(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let bounds = (|| Some((scalar_f64(c.constant(0)?)?, scalar_f64(c.constant(1)?)?, scalar_f64(c.constant(2)?)?)))();
    let Some((start, limit, delta)) = bounds else { return Ok(vec![Shape::new(vec![None])]) };
    let n = ((limit - start) / delta).abs().ceil();
    let consistent = delta != 0.0 && (limit - start == 0.0 || (limit > start) == (delta > 0.0));
    Ok(vec![Shape::new(vec![(consistent && n.is_finite()).then(|| n.min(usize::MAX as f64) as usize)])])
}

/// `GatherNd`: `indices.shape[:-1] + params.shape[indices.shape[-1]:]` (unknown rank until
/// the indices' rank, their last dimension and the params' rank are known).
fn gather_nd_shape(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let (Some(p), Some(i)) = (c.inputs[0].dims(), c.inputs[1].dims()) else { return Ok(vec![Shape::unknown()]) };
    let Some((&Some(depth), outer)) = i.split_last() else {
        if i.is_empty() {
            return Err("indices must be at least a vector".to_string().into());
        }
        return Ok(vec![Shape::unknown()]);
    };
    if depth > p.len() {
        return Err(format!("the last dimension of indices ({depth}) exceeds the params' rank ({})", p.len()).into());
    }
    let mut dims = outer.to_vec();
    dims.extend_from_slice(&p[depth..]);
    Ok(vec![Shape::new(dims)])
}

/// `ScatterNd`: the shape its constant `shape` input says.
fn scatter_nd(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    Ok(vec![c.shape_value(2)])
}

/// `OneHot`: the indices' shape with `depth` inserted at `axis`.
fn one_hot(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let Some(dims) = c.inputs[0].dims() else { return Ok(vec![Shape::unknown()]) };
    let depth = c.const_ints(1).and_then(|d| d.first().copied()).and_then(|d| usize::try_from(d).ok());
    let axis = c.int("axis").unwrap_or(-1);
    let at = if axis == -1 { dims.len() } else { norm_axis(axis, dims.len() + 1)? };
    let mut out = dims.to_vec();
    out.insert(at, depth);
    Ok(vec![Shape::new(out)])
}

/// `GatherV2` with a constant axis and `batch_dims` 0: params[:axis] + indices + params[axis+1:].
fn gather_v2(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let (Some(axis), Some(p), Some(idx)) = (c.const_ints(2), c.inputs[0].dims(), c.inputs[1].dims()) else {
        return Ok(vec![Shape::unknown()]);
    };
    let Some(&axis) = axis.first() else { return Ok(vec![Shape::unknown()]) };
    let axis = if axis < 0 { axis + p.len() as i64 } else { axis };
    let batch_dims = c.int("batch_dims").unwrap_or(0);
    let b = if batch_dims < 0 { batch_dims + idx.len() as i64 } else { batch_dims };
    if b < 0 || b > axis || b as usize > idx.len() || axis < 0 || axis as usize >= p.len() {
        return Ok(vec![Shape::unknown()]);
    }
    let a = axis as usize;
    let mut out = p[..a].to_vec();
    out.extend_from_slice(&idx[b as usize..]);
    out.extend_from_slice(&p[a + 1..]);
    Ok(vec![Shape::new(out)])
}

fn transpose_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let perm = ctx.const_ints(ctx.input(1)).ok_or_else(|| ctx.unsupported("the permutation must be a constant"))?;
    let mut inv = vec![0i32; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        let p =
            usize::try_from(p).ok().filter(|&p| p < perm.len()).ok_or_else(|| ctx.unsupported("bad permutation"))?;
        inv[p] = i as i32;
    }
    let s = &ctx.scope;
    let inv = s.constant_from(&[inv.len()], &inv)?;
    Ok(vec![Some(build(s, "Transpose", &[g, inv], &[("Tperm", attr::dtype(DType::Int32))])?), None])
}

/// `Shape(t)` with the given index type.
fn shape_as(ctx: &GradCtx, t: Output, int: DType) -> Result<Output, crate::BuildError> {
    build(&ctx.scope, "Shape", &[t], &[("out_type", attr::dtype(int))])
}

fn slice_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    // Pad the gradient back: before = begin, after = shape(x) - shape(y) - begin.
    let Some(g) = g0(gs) else { return Ok(vec![None, None, None]) };
    let s = &ctx.scope;
    let (x, begin) = (ctx.input(0), ctx.input(1));
    let int = s.dtype(begin);
    let after = s.sub(s.sub(shape_as(ctx, x, int)?, shape_as(ctx, ctx.output(0), int)?)?, begin)?;
    let paddings = s.pack_with(&[begin, after], attrs::Pack::new().axis(1))?;
    Ok(vec![Some(build(s, "Pad", &[g, paddings], &[("Tpaddings", attr::dtype(int))])?), None, None])
}

/// The attrs a `StridedSlice` and its `StridedSliceGrad` share.
const STRIDED_SLICE_MASKS: &[&str] =
    &["T", "Index", "begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask"];

/// `StridedSlice`: TensorFlow's `StridedSliceGrad(shape(x), begin, end, strides, g)` (the
/// gradient written back where the slice read, zeros elsewhere); none to the spec.
fn strided_slice_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None, None, None]) };
    let s = &ctx.scope;
    let (x, begin, end, strides) = (ctx.input(0), ctx.input(1), ctx.input(2), ctx.input(3));
    let shape = shape_as(ctx, x, s.dtype(begin))?;
    let a = ctx.attrs_of(STRIDED_SLICE_MASKS);
    Ok(vec![Some(build(s, "StridedSliceGrad", &[shape, begin, end, strides, g], &a)?), None, None, None])
}

/// `StridedSliceGrad` is linear in `dy`: its gradient is `StridedSlice(g, begin, end, strides)`.
fn strided_slice_grad_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None; 5]) };
    let s = &ctx.scope;
    let a = ctx.attrs_of(STRIDED_SLICE_MASKS);
    let dy = build(s, "StridedSlice", &[g, ctx.input(1), ctx.input(2), ctx.input(3)], &a)?;
    Ok(vec![None, None, None, None, Some(dy)])
}

/// `SpaceToBatchND` (`to_batch`) and `BatchToSpaceND`: the batch times (or divided by) the
/// blocks' product; each blocked dimension padded then divided by its block (or multiplied,
/// then cropped); the other dimensions unchanged.
fn space_batch(c: &InferCtx, to_batch: bool) -> Result<Vec<Shape>, ShapeError> {
    let Some(dims) = c.inputs[0].dims() else { return Ok(vec![Shape::unknown()]) };
    let (Some(block), Some(pads)) = (c.const_ints(1), c.const_ints(2)) else {
        return Ok(vec![Shape::new(vec![None; dims.len()])]);
    };
    let m = block.len();
    if m + 1 > dims.len() || pads.len() != 2 * m || block.iter().any(|&b| b < 1) || pads.iter().any(|&p| p < 0) {
        return Err(format!(
            "block_shape {block:?} must be positive and paddings/crops {pads:?} a non-negative [{m}, 2] matrix for an input of rank {}",
            dims.len()
        )
        .into());
    }
    let prod: i64 = block.iter().product();
    let mut out = dims.to_vec();
    out[0] = match dims[0] {
        Some(b) if to_batch => Some(b * prod as usize),
        Some(b) if b as i64 % prod == 0 => Some(b / prod as usize),
        Some(b) => return Err(format!("batch {b} is not divisible by the blocks' product {prod}").into()),
        None => None,
    };
    for i in 0..m {
        let Some(d) = dims[1 + i] else { continue };
        let (d, b, total) = (d as i64, block[i], pads[2 * i] + pads[2 * i + 1]);
        out[1 + i] = Some(if to_batch {
            if (d + total) % b != 0 {
                return Err(
                    format!("padded dimension {} of size {} is not divisible by block {b}", 1 + i, d + total).into()
                );
            }
            ((d + total) / b) as usize
        } else {
            if total > d * b {
                return Err(format!("crops {total} exceed dimension {} of size {}", 1 + i, d * b).into());
            }
            (d * b - total) as usize
        });
    }
    Ok(vec![Shape::new(out)])
}

/// `SpaceToBatchND`: TensorFlow's `BatchToSpaceND(g, block_shape, paddings)`.
fn space_to_batch_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None; 3]) };
    let a = [
        ("Tblock_shape", attr::dtype(ctx.scope.dtype(ctx.input(1)))),
        ("Tcrops", attr::dtype(ctx.scope.dtype(ctx.input(2)))),
    ];
    Ok(vec![Some(build(&ctx.scope, "BatchToSpaceND", &[g, ctx.input(1), ctx.input(2)], &a)?), None, None])
}

/// `BatchToSpaceND`: TensorFlow's `SpaceToBatchND(g, block_shape, crops)`.
fn batch_to_space_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None; 3]) };
    let a = [
        ("Tblock_shape", attr::dtype(ctx.scope.dtype(ctx.input(1)))),
        ("Tpaddings", attr::dtype(ctx.scope.dtype(ctx.input(2)))),
    ];
    Ok(vec![Some(build(&ctx.scope, "SpaceToBatchND", &[g, ctx.input(1), ctx.input(2)], &a)?), None, None])
}

/// `Pad`, `PadV2`: the gradient sliced back to the input (from each dimension's padding
/// before); none to the paddings or the constant.
fn pad_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let rest = ctx.node.inputs.len() - 1;
    let Some(g) = g0(gs) else { return Ok(vec![None; rest + 1]) };
    let s = &ctx.scope;
    let (x, paddings) = (ctx.input(0), ctx.input(1));
    let int = s.dtype(paddings);
    let rank = ctx.shape(x).rank().ok_or_else(|| ctx.unsupported("the input's rank must be known"))?;
    let index = |v: Vec<i64>| -> Result<Output, crate::BuildError> {
        match int {
            DType::Int64 => s.constant_from(&[v.len()], &v),
            _ => s.constant_from(&[v.len()], &v.iter().map(|&x| x as i32).collect::<Vec<_>>()),
        }
    };
    let before = build(
        s,
        "Slice",
        &[paddings, index(vec![0, 0])?, index(vec![rank as i64, 1])?],
        &[("Index", attr::dtype(int))],
    )?;
    let begin = build(s, "Reshape", &[before, index(vec![-1])?], &[("Tshape", attr::dtype(int))])?;
    let sliced = build(s, "Slice", &[g, begin, shape_as(ctx, x, int)?], &[("Index", attr::dtype(int))])?;
    let mut out = vec![Some(sliced)];
    out.extend(std::iter::repeat_n(None, rest));
    Ok(out)
}

/// The gradients of a node's outputs, zeros for those that got none (to be joined).
fn dense_grads(ctx: &GradCtx, gs: &[Option<Output>]) -> Result<Vec<Output>, crate::BuildError> {
    (0..ctx.node.num_outputs())
        .map(|i| match gs.get(i).copied().flatten() {
            Some(g) => Ok(g),
            None => ctx.scope.unary("ZerosLike", ctx.output(i)),
        })
        .collect()
}

/// `Unpack`: the outputs' gradients stacked back along the axis.
fn unpack_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    if gs.iter().all(Option::is_none) {
        return Ok(vec![None]);
    }
    let grads = dense_grads(ctx, gs)?;
    Ok(vec![Some(ctx.scope.pack_with(&grads, attrs::Pack::new().axis(ctx.attr_int("axis").unwrap_or(0)))?)])
}

/// The outputs' gradients joined along the split axis.
fn join(ctx: &GradCtx, gs: &[Option<Output>], axis: Output) -> Result<Output, crate::BuildError> {
    let mut inputs = dense_grads(ctx, gs)?;
    let n = inputs.len();
    inputs.push(axis);
    let s = &ctx.scope;
    if n == 1 {
        return Ok(inputs[0]);
    }
    build(s, "ConcatV2", &inputs, &[("N", attr::int(n as i64)), ("Tidx", attr::dtype(s.dtype(axis)))])
}

fn split_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    if gs.iter().all(Option::is_none) {
        return Ok(vec![None, None]);
    }
    Ok(vec![None, Some(join(ctx, gs, ctx.input(0))?)])
}

fn split_v_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    if gs.iter().all(Option::is_none) {
        return Ok(vec![None, None, None]);
    }
    Ok(vec![Some(join(ctx, gs, ctx.input(2))?), None, None])
}

/// `Cumsum`: the cumulative sum of the gradient in the other direction.
fn cumsum_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let axis = ctx.input(1);
    let a = [
        ("exclusive", attr::boolean(ctx.attr_bool("exclusive"))),
        ("reverse", attr::boolean(!ctx.attr_bool("reverse"))),
        ("Tidx", attr::dtype(s.dtype(axis))),
    ];
    Ok(vec![Some(build(s, "Cumsum", &[g, axis], &a)?), None])
}

/// `Cumprod` (TensorFlow's `_CumprodGrad`): the reversed cumulative sum of the gradient times
/// the products, over `x` (0 where `x` is 0, as `div_no_nan`).
fn cumprod_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let (x, axis) = (ctx.input(0), ctx.input(1));
    let (ex, rev) = (ctx.attr_bool("exclusive"), ctx.attr_bool("reverse"));
    let tidx = ("Tidx", attr::dtype(s.dtype(axis)));
    let cum = |op: &str, v: Output, reverse: bool| {
        build(s, op, &[v, axis], &[("exclusive", attr::boolean(ex)), ("reverse", attr::boolean(reverse)), tidx.clone()])
    };
    let prod = cum("Cumprod", x, rev)?;
    let out = cum("Cumsum", s.mul(prod, g)?, !rev)?;
    Ok(vec![Some(build(s, "DivNoNan", &[out, x], crate::gradient::NO_ATTRS)?), None])
}

/// `GatherV2` (batch_dims 0): the gradient's slices go back to the gathered positions along
/// the axis, summed where an index repeats (TensorFlow's `_GatherV2Grad`: IndexedSlices made
/// dense). Along an axis other than 0, the gathered axis is moved first for the segment sum
/// and back after, which needs the params' rank.
fn gather_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None, None]) };
    let (params, indices) = (ctx.input(0), ctx.input(1));
    let axis = ctx.const_ints(ctx.input(2)).and_then(|v| v.first().copied());
    let rank = ctx.shape(params).rank();
    let axis = match (axis, rank) {
        (Some(0), _) => 0,
        (Some(a), Some(r)) if a < 0 && a + r as i64 >= 0 => (a + r as i64) as usize,
        (Some(a), Some(r)) if a >= 0 && (a as usize) < r => a as usize,
        _ => {
            return Err(
                ctx.unsupported("the axis must be a constant, and the params' rank known for an axis other than 0")
            )
        }
    };
    if ctx.attr_int("batch_dims").unwrap_or(0) != 0 {
        return Err(ctx.unsupported("gathers with batch_dims are not differentiable yet"));
    }
    let s = &ctx.scope;
    let int = s.dtype(indices);
    let shape = shape_as(ctx, params, DType::Int32)?;
    let part = |begin: i32, size: i32| -> Result<Output, crate::BuildError> {
        let b = s.constant_from(&[1], &[begin])?;
        let n = s.constant_from(&[1], &[size])?;
        build(s, "Slice", &[shape, b, n], &[("T", attr::dtype(DType::Int32)), ("Index", attr::dtype(DType::Int32))])
    };
    let rows = s.reshape(part(axis as i32, 1)?, &[0i32; 0])?;
    let segment_sum = |values: Output, indices: Output| {
        build(
            s,
            "UnsortedSegmentSum",
            &[values, indices, rows],
            &[("Tindices", attr::dtype(int)), ("Tnumsegments", attr::dtype(DType::Int32))],
        )
    };
    if axis == 0 {
        return Ok(vec![Some(segment_sum(g, indices)?), None, None]);
    }
    let rank = rank.expect("checked above");
    // [outer..., n_indices, inner...] -> [n_indices, outer..., inner...], summed, and back.
    let minus_one = s.constant_from(&[1], &[-1i32])?;
    let values_shape = s.concat_v2(&[part(0, axis as i32)?, minus_one, part(axis as i32 + 1, -1)?], s.scalar(0i32)?)?;
    let values = s.reshape(g, values_shape)?;
    let flat = s.reshape(indices, minus_one)?;
    let mut perm: Vec<i32> = vec![axis as i32];
    perm.extend((0..rank as i32).filter(|&d| d != axis as i32));
    let moved = s.transpose(values, s.constant_from(&[rank], &perm)?)?;
    let summed = segment_sum(moved, flat)?;
    let mut back: Vec<i32> = (1..=axis as i32).collect();
    back.push(0);
    back.extend(axis as i32 + 1..rank as i32);
    let grad = s.transpose(summed, s.constant_from(&[rank], &back)?)?;
    Ok(vec![Some(grad), None, None])
}

/// `Tile`: the tiles summed back, TensorFlow's way — the gradient reshaped to
/// `[m0, d0, m1, d1, ...]` (multiples interleaved with the input's dims) and summed over the
/// multiples' axes.
fn tile_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let (x, multiples) = (ctx.input(0), ctx.input(1));
    let int = s.dtype(multiples);
    let pairs = s.pack_with(&[multiples, shape_as(ctx, x, int)?], attrs::Pack::new().axis(0))?;
    let perm = s.constant_from(&[2], &[1i32, 0])?;
    let interleaved = build(s, "Transpose", &[pairs, perm], &[("Tperm", attr::dtype(DType::Int32))])?;
    let minus_one = match int {
        DType::Int64 => s.constant_from(&[1], &[-1i64])?,
        _ => s.constant_from(&[1], &[-1i32])?,
    };
    let split_shape = build(s, "Reshape", &[interleaved, minus_one], &[("Tshape", attr::dtype(int))])?;
    let size = build(s, "Size", &[split_shape], &[("out_type", attr::dtype(DType::Int32))])?;
    let axes = build(s, "Range", &[s.scalar(0i32)?, size, s.scalar(2i32)?], &[("Tidx", attr::dtype(DType::Int32))])?;
    let tiles = build(s, "Reshape", &[g, split_shape], &[("Tshape", attr::dtype(int))])?;
    let summed =
        build(s, "Sum", &[tiles, axes], &[("keep_dims", attr::boolean(false)), ("Tidx", attr::dtype(DType::Int32))])?;
    Ok(vec![Some(summed), None])
}

/// `GatherNd(params, indices)` with `T` from the params and `Tindices` from the indices.
fn gather_nd(s: &crate::Scope, params: Output, indices: Output) -> Result<Output, crate::BuildError> {
    let attrs = [("Tparams", attr::dtype(s.dtype(params))), ("Tindices", attr::dtype(s.dtype(indices)))];
    build(s, "GatherNd", &[params, indices], &attrs)
}

/// `ScatterNd(indices, updates, shape)`.
fn scatter_nd_op(
    s: &crate::Scope,
    indices: Output,
    updates: Output,
    shape: Output,
) -> Result<Output, crate::BuildError> {
    build(
        s,
        "ScatterNd",
        &[indices, updates, shape],
        &[("T", attr::dtype(s.dtype(updates))), ("Tindices", attr::dtype(s.dtype(indices)))],
    )
}

/// `GatherNd`: the gradient scattered back to the gathered slices (summed where an index
/// repeats), TensorFlow's `ScatterNd(indices, grad, shape(params))`.
fn gather_nd_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let (params, indices) = (ctx.input(0), ctx.input(1));
    let shape = shape_as(ctx, params, s.dtype(indices))?;
    Ok(vec![Some(scatter_nd_op(s, indices, g, shape)?), None])
}

/// `ScatterNd`: the updates' gradient is the output gradient gathered at the indices.
fn scatter_nd_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None, None]) };
    Ok(vec![None, Some(gather_nd(&ctx.scope, g, ctx.input(0))?), None])
}

/// `TensorScatterUpdate`: the tensor's gradient with the overwritten slices zeroed; the
/// updates' gradient gathered from those slices.
fn tensor_scatter_update_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None, None]) };
    let s = &ctx.scope;
    let (indices, updates) = (ctx.input(1), ctx.input(2));
    let zeros = s.zeros_like(updates)?;
    let attrs = [("Tindices", attr::dtype(s.dtype(indices)))];
    let tensor_grad = build(s, "TensorScatterUpdate", &[g, indices, zeros], &attrs)?;
    Ok(vec![Some(tensor_grad), None, Some(gather_nd(s, g, indices)?)])
}

/// `TensorScatterAdd`, `TensorScatterSub`: the gradient passes to the tensor; the updates get
/// it gathered at the indices (negated for `Sub`).
fn tensor_scatter_add_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None, None]) };
    let s = &ctx.scope;
    let mut ug = gather_nd(s, g, ctx.input(1))?;
    if ctx.node.op == "TensorScatterSub" {
        ug = s.neg(ug)?;
    }
    Ok(vec![Some(g), None, Some(ug)])
}

/// `TensorScatterMax`, `TensorScatterMin`: TensorFlow's split of the gradient between every
/// element equal to the result (the tensor's and the updates'), evenly where several tie.
fn tensor_scatter_min_max_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None, None]) };
    let s = &ctx.scope;
    let (x, indices, y, out) = (ctx.input(0), ctx.input(1), ctx.input(2), ctx.output(0));
    let dt = s.dtype(g);
    let x_ind = s.cast(s.equal(x, out)?, dt)?;
    let y_out = gather_nd(s, out, indices)?;
    let y_ind = s.cast(s.equal(y, y_out)?, dt)?;
    let ys = scatter_nd_op(s, indices, y_ind, shape_as(ctx, x, s.dtype(indices))?)?;
    let ind = s.add_v2(x_ind, ys)?;
    let xg = s.real_div(s.mul(g, x_ind)?, ind)?;
    let yg = s.mul(gather_nd(s, s.real_div(g, ind)?, indices)?, y_ind)?;
    Ok(vec![Some(xg), None, Some(yg)])
}
