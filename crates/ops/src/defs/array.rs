//! Sources, identities, shapes and reshapes, stacking and joining, and `BiasAdd`.
use ferroflow_graph::{Output, ShapeError};
use ferroflow_proto::attr::AttrMap;
use ferroflow_proto::{attr, attr_value::Value, convert};
use ferroflow_tensor::{DType, Shape, Tensor};

use crate::gradient::{build, g0, GradCtx, GradResult};
use crate::registry::{op, OpDef};
use crate::shape_inference::{self as s, norm_axis, InferCtx, Known};
use crate::{Ops, RawOps};

/// Constants up to this many elements are read as values during inference (shapes, axes);
/// big ones are never materialised there.
const MAX_KNOWN_CONSTANT_ELEMENTS: usize = 64;

const SHAPE_ONLY: &str = "its value depends only on the input's shape";

/// The array ops.
pub fn defs() -> Vec<OpDef> {
    vec![
        op("Const")
            .output("output: dtype")
            .attr("value: tensor")
            .attr("dtype: type")
            .shape(const_shape)
            .known(const_value)
            .not_differentiable("a constant: it has no inputs")
            .build(),
        op("Placeholder")
            .output("output: dtype")
            .attr("dtype: type")
            .attr("shape: shape = ?")
            .shape(s::shape_attr)
            .placeholder()
            .not_differentiable("a fed value: it has no inputs")
            .build(),
        op("PlaceholderWithDefault")
            .input("input: dtype")
            .output("output: dtype")
            .attr("dtype: type")
            .attr("shape: shape")
            .shape(s::shape_attr)
            .placeholder()
            .gradient(crate::gradient::identity)
            .build(),
        op("Identity")
            .input("input: T")
            .output("output: T")
            .attr("T: type")
            .shape(s::unchanged)
            .forwards_input()
            .gradient(crate::gradient::identity)
            .build(),
        op("IdentityN")
            .input("input: T")
            .output("output: T")
            .attr("T: list(type) >= 1")
            .shape(s::pass_through)
            .forwards_input()
            .gradient(crate::gradient::pass_through)
            .build(),
        op("Snapshot")
            .input("input: T")
            .output("output: T")
            .attr("T: type")
            .shape(s::unchanged)
            .forwards_input()
            .gradient(crate::gradient::identity)
            .build(),
        op("StopGradient")
            .input("input: T")
            .output("output: T")
            .attr("T: type")
            .shape(s::unchanged)
            .forwards_input()
            .not_differentiable("it stops gradients by definition")
            .build(),
        op("PreventGradient")
            .input("input: T")
            .output("output: T")
            .attr("T: type")
            .attr("message: string = ''")
            .shape(s::unchanged)
            .gradient(prevent_gradient_grad)
            .build(),
        op("NoOp").shape(s::no_outputs).not_differentiable("it has no data inputs or outputs").build(),
        op("BiasAdd")
            .input("value: T")
            .input("bias: T")
            .output("output: T")
            .attr("T: type")
            .attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
            .shape(s::unchanged)
            .gradient(bias_add_grad)
            .build(),
        op("Rank")
            .input("input: T")
            .output("output: int32")
            .attr("T: type")
            .shape(s::scalar)
            .known(|c| Some(Known::Value(Tensor::scalar(c.inputs[0].rank()? as i32))))
            .shape_only()
            .not_differentiable(SHAPE_ONLY)
            .build(),
        op("Size")
            .input("input: T")
            .output("output: out_type")
            .attr("T: type")
            .attr("out_type: {int32, int64} = DT_INT32")
            .shape(s::scalar)
            .known(size_value)
            .shape_only()
            .not_differentiable(SHAPE_ONLY)
            .build(),
        op("Shape")
            .input("input: T")
            .output("output: out_type")
            .attr("T: type")
            .attr("out_type: {int32, int64} = DT_INT32")
            .shape(shape_of_input)
            .known(|c| Some(Known::Shape(c.inputs[0].clone())))
            .shape_only()
            .not_differentiable(SHAPE_ONLY)
            .build(),
        op("ShapeN")
            .input("input: N * T")
            .output("output: N * out_type")
            .attr("N: int >= 1")
            .attr("T: type")
            .attr("out_type: {int32, int64} = DT_INT32")
            .shape(|c| Ok(c.inputs.iter().map(|i| Shape::new(vec![i.rank()])).collect()))
            .not_differentiable(SHAPE_ONLY)
            .build(),
        op("Reshape")
            .input("tensor: T")
            .input("shape: Tshape")
            .output("output: T")
            .attr("T: type")
            .attr("Tshape: {int32, int64} = DT_INT32")
            .shape(reshape)
            .gradient(reshape_grad)
            .build(),
        op("ExpandDims")
            .input("input: T")
            .input("dim: Tdim")
            .output("output: T")
            .attr("T: type")
            .attr("Tdim: {int32, int64} = DT_INT32")
            .shape(expand_dims)
            .gradient(reshape_grad)
            .build(),
        op("Squeeze")
            .input("input: T")
            .output("output: T")
            .attr("T: type")
            .attr("squeeze_dims: list(int) >= 0 = []")
            .shape(squeeze)
            .gradient(reshape_grad)
            .build(),
        op("Fill")
            .input("dims: index_type")
            .input("value: T")
            .output("output: T")
            .attr("T: type")
            .attr("index_type: {int32, int64} = DT_INT32")
            .shape(fill)
            .grows()
            .gradient(fill_grad)
            .build(),
        op("ZerosLike")
            .input("x: T")
            .output("y: T")
            .attr("T: type")
            .shape(s::unchanged)
            .shape_only()
            .grows()
            .not_differentiable(SHAPE_ONLY)
            .build(),
        op("OnesLike")
            .input("x: T")
            .output("y: T")
            .attr("T: type")
            .shape(s::unchanged)
            .shape_only()
            .grows()
            .not_differentiable(SHAPE_ONLY)
            .build(),
        op("Pack")
            .node_name("stack")
            .input("values: N * T")
            .output("output: T")
            .attr("N: int >= 1")
            .attr("T: type")
            .attr("axis: int = 0")
            .shape(pack)
            .known(pack_of_dims)
            .gradient(pack_grad)
            .build(),
        op("ConcatV2")
            .node_name("concat")
            .input("values: N * T")
            .input("axis: Tidx")
            .output("output: T")
            .attr("N: int >= 2")
            .attr("T: type")
            .attr("Tidx: {int32, int64} = DT_INT32")
            .shape(concat)
            .known(concat_of_shapes)
            .gradient(concat_grad)
            .build(),
        op("MatrixBandPart")
            .input("input: T")
            .input("num_lower: Tindex")
            .input("num_upper: Tindex")
            .output("band: T")
            .attr("T: type")
            .attr("Tindex: {int32, int64} = DT_INT64")
            .shape(matrix_band_part)
            .gradient(matrix_band_part_grad)
            .build(),
    ]
}

/// The shape of the `value` attr tensor.
fn const_shape(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    match c.def.attr(c.attrs, "value").and_then(|v| v.value.as_ref()) {
        Some(Value::Tensor(t)) => Ok(vec![convert::shape_from_proto(&t.tensor_shape.clone().unwrap_or_default())]),
        _ => Err("attr 'value' must be a tensor".into()),
    }
}

/// A small constant's value.
fn const_value(c: &InferCtx) -> Option<Known> {
    let Some(Value::Tensor(t)) = c.def.attr(c.attrs, "value").and_then(|v| v.value.as_ref()) else { return None };
    let small = convert::shape_from_proto(&t.tensor_shape.clone().unwrap_or_default())
        .num_elements()
        .is_some_and(|n| n <= MAX_KNOWN_CONSTANT_ELEMENTS);
    small.then(|| convert::tensor_from_proto(t).ok()).flatten().map(Known::Value)
}

/// `Size` of a statically known shape, in `out_type`.
fn size_value(c: &InferCtx) -> Option<Known> {
    let n = c.inputs[0].num_elements()?;
    let t = match c.def.attr(c.attrs, "out_type").and_then(|v| v.value.as_ref()) {
        Some(Value::Type(t)) if *t == DType::Int64.to_tf() => Tensor::scalar(i64::try_from(n).ok()?),
        _ => Tensor::scalar(i32::try_from(n).ok()?),
    };
    Some(Known::Value(t))
}

/// `Shape`: a vector of the input's rank.
fn shape_of_input(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    Ok(vec![Shape::new(vec![c.inputs[0].rank()])])
}

/// `Reshape`: the constant shape input, with one `-1` inferred when the input is known.
fn reshape(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let Some(target) = c.const_ints(1) else {
        // A shape known in part (`[tf.shape(x)[0], 1, 1, C]`): its known sizes, and the one
        // unknown size when the input's element count fixes it.
        let Some(dims) = c.shape_value(1).dims().map(<[_]>::to_vec) else {
            return Ok(vec![Shape::unknown()]);
        };
        let mut out = dims;
        let unknown: Vec<usize> = (0..out.len()).filter(|&i| out[i].is_none()).collect();
        if let (Some(n), &[i]) = (c.inputs[0].num_elements(), &unknown[..]) {
            let known: usize = out.iter().flatten().product();
            if known > 0 && n.is_multiple_of(known) {
                out[i] = Some(n / known);
            }
        }
        return Ok(vec![Shape::new(out)]);
    };
    let mut out: Vec<Option<usize>> = target.iter().map(|&d| usize::try_from(d).ok()).collect();
    let known: usize = out.iter().flatten().product();
    if let Some(n) = c.inputs[0].num_elements() {
        let unknowns = target.iter().filter(|&&d| d == -1).count();
        if unknowns == 0 && known != n {
            return Err(format!("cannot reshape a tensor of {n} elements to shape {target:?}").into());
        }
        if unknowns == 1 {
            if known == 0 || !n.is_multiple_of(known) {
                return Err(format!("cannot reshape a tensor of {n} elements to shape {target:?}").into());
            }
            let i = target.iter().position(|&d| d == -1).expect("one -1");
            out[i] = Some(n / known);
        }
    }
    Ok(vec![Shape::new(out)])
}

/// `ExpandDims`: inserts a 1 at the constant axis.
fn expand_dims(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let (Some(dims), Some(axis)) = (c.inputs[0].dims(), c.const_ints(1)) else {
        return Ok(vec![Shape::unknown()]);
    };
    let a = *axis.first().ok_or("dim must be a scalar")?;
    let r = dims.len() as i64 + 1;
    if a < -r || a >= r {
        return Err(format!("axis {a} is out of range for rank {}", dims.len()).into());
    }
    let a = if a < 0 { a + r } else { a } as usize;
    let mut out = dims.to_vec();
    out.insert(a, Some(1));
    Ok(vec![Shape::new(out)])
}

/// `MatrixBandPart`: the input's shape; the input must be at least a matrix and the band
/// limits scalars.
fn matrix_band_part(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    if c.inputs[0].rank().is_some_and(|r| r < 2) {
        return Err(format!("input must be at least rank 2, got shape {}", c.inputs[0]).into());
    }
    for (i, name) in [(1, "num_lower"), (2, "num_upper")] {
        if c.inputs[i].rank().is_some_and(|r| r != 0) {
            return Err(format!("{name} must be a scalar, got shape {}", c.inputs[i]).into());
        }
    }
    Ok(vec![c.inputs[0].clone()])
}

/// `Squeeze`: removes the listed size-1 axes, or every size-1 axis.
fn squeeze(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let Some(dims) = c.inputs[0].dims() else {
        return Ok(vec![Shape::unknown()]);
    };
    let axes = c.ints("squeeze_dims");
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
                return Err(format!("cannot squeeze dimension {i} of size {}", dims[i].unwrap_or(0)).into());
            }
            keep[i] = false;
        }
    }
    Ok(vec![Shape::new(dims.iter().zip(&keep).filter(|(_, k)| **k).map(|(d, _)| *d).collect())])
}

/// `Fill`: the shape held by the dims input (its length at least, when not known).
fn fill(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let held = c.shape_value(0);
    if held.rank().is_some() {
        return Ok(vec![held]);
    }
    // The output's rank is the length of `dims` when that is known (unknown, not a scalar, when
    // it is not: Keras' causal mask fills from a `Pack` of values whose shapes are unknown).
    Ok(vec![match c.inputs[0].dims().and_then(|d| d.first().copied().flatten()) {
        Some(rank) => Shape::new(vec![None; rank]),
        None => Shape::unknown(),
    }])
}

/// `Pack` of integer scalars along axis 0, read as a shape: each a known value, a
/// [`Known::Dim`], or an unknown dimension (Keras's `Reshape` target `[tf.shape(x)[0], 1, 1,
/// C]`).
fn pack_of_dims(c: &InferCtx) -> Option<Known> {
    if c.int("axis").unwrap_or(0) != 0 || c.inputs.iter().any(|s| s.rank() != Some(0)) || c.inputs.len() > 64 {
        return None;
    }
    let dims: Vec<Option<usize>> = (0..c.inputs.len()).map(|i| c.dim_value(i)).collect();
    // Every value known: constant folding makes the tensor itself.
    (dims.iter().any(Option::is_none) && is_int_type(c)).then(|| Known::Shape(Shape::new(dims)))
}

/// `ConcatV2` of shape vectors along axis 0, read as one shape.
fn concat_of_shapes(c: &InferCtx) -> Option<Known> {
    let n = c.inputs.len() - 1;
    if c.const_ints(n)?.first() != Some(&0) || !is_int_type(c) {
        return None;
    }
    let mut dims = Vec::new();
    for i in 0..n {
        dims.extend(c.shape_value(i).dims()?.iter().copied());
    }
    Some(Known::Shape(Shape::new(dims)))
}

/// Whether the op's `T` is int32 or int64 (a tensor that can hold a shape).
fn is_int_type(c: &InferCtx) -> bool {
    matches!(
        c.def.attr(c.attrs, "T").and_then(|v| v.value.as_ref()),
        Some(Value::Type(t)) if *t == DType::Int32.to_tf() || *t == DType::Int64.to_tf()
    )
}

/// `Pack`: N equal shapes stacked along `axis`.
fn pack(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let n = c.inputs.len();
    let Some(first) = c.inputs.iter().find_map(|s| s.dims()) else {
        return Ok(vec![Shape::unknown()]);
    };
    for s in c.inputs {
        if s.rank().is_some_and(|r| r != first.len()) {
            return Err(
                format!("all inputs must have the same rank, got {} and {s}", Shape::new(first.to_vec())).into()
            );
        }
    }
    let axis = c.int("axis").unwrap_or(0);
    let r = first.len() as i64 + 1;
    if axis < -r || axis >= r {
        return Err(format!("axis {axis} is out of range for rank {}", first.len()).into());
    }
    let a = if axis < 0 { axis + r } else { axis } as usize;
    let mut out = first.to_vec();
    out.insert(a, Some(n));
    Ok(vec![Shape::new(out)])
}

/// `ConcatV2`: inputs joined along the constant last input.
fn concat(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
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
            return Err(
                format!("all inputs must have the same rank, got {} and {s}", Shape::new(first.to_vec())).into()
            );
        }
        total = match (total, d[a]) {
            (Some(t), Some(x)) => Some(t + x),
            _ => None,
        };
    }
    out[a] = total;
    Ok(vec![Shape::new(out)])
}

/// TensorFlow's `_PreventGradientGrad`: differentiating through it is an error.
fn prevent_gradient_grad(ctx: &GradCtx, _: &[Option<Output>]) -> GradResult {
    let message = match ctx.node.attrs.attr_value("message") {
        Some(Value::S(m)) => String::from_utf8_lossy(m).into_owned(),
        _ => String::new(),
    };
    Err(ctx.unsupported(format!("gradient explicitly disabled; reason: {message}")))
}

fn bias_add_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    Ok(vec![Some(g), Some(build(&ctx.scope, "BiasAddGrad", &[g], &ctx.attrs_of(&["data_format"]))?)])
}

/// `Reshape`, `ExpandDims`, `Squeeze`: the gradient reshaped to the input's shape.
fn reshape_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let rest = ctx.node.inputs.len() - 1;
    let Some(g) = g0(gs) else { return Ok(vec![None; rest + 1]) };
    let s = &ctx.scope;
    let shape = s.unary("Shape", ctx.input(0))?;
    let mut out = vec![Some(build(s, "Reshape", &[g, shape], &[("Tshape", attr::dtype(DType::Int32))])?)];
    out.extend(std::iter::repeat_n(None, rest));
    Ok(out)
}

/// `Fill`: the value's gradient is the sum of the output's.
fn fill_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let rank = ctx.shape(ctx.output(0)).rank().ok_or_else(|| ctx.unsupported("the output's rank must be known"))?;
    let axes: Vec<i32> = (0..rank as i32).collect();
    Ok(vec![None, Some(ctx.scope.reduce("Sum", g, &axes, false)?)])
}

/// `MatrixBandPart`: the same band of the gradient (TensorFlow's `_MatrixBandPartGrad`); the
/// band limits are integers.
fn matrix_band_part_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None, None]) };
    let (lower, upper) = (ctx.input(1), ctx.input(2));
    let tindex = attr::dtype(ctx.scope.dtype(lower));
    Ok(vec![Some(build(&ctx.scope, "MatrixBandPart", &[g, lower, upper], &[("Tindex", tindex)])?), None, None])
}

/// `Pack`: the gradient unstacked along the same axis.
fn pack_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let n = ctx.node.inputs.len();
    let Some(g) = g0(gs) else { return Ok(vec![None; n]) };
    let axis = ctx.attr_int("axis").unwrap_or(0);
    let unpacked = build(&ctx.scope, "Unpack", &[g], &[("num", attr::int(n as i64)), ("axis", attr::int(axis))])?;
    Ok((0..n).map(|i| Some(Output { node: unpacked.node, index: i })).collect())
}

fn concat_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let n = ctx.node.inputs.len() - 1;
    let Some(g) = g0(gs) else { return Ok(vec![None; n + 1]) };
    let axis = ctx
        .const_ints(ctx.input(n))
        .and_then(|v| v.first().copied())
        .ok_or_else(|| ctx.unsupported("the axis must be a constant"))?;
    let s = &ctx.scope;
    let rank = ctx.shape(ctx.input(0)).rank();
    let static_sizes = rank.and_then(|rank| {
        let axis = if axis < 0 { axis + rank as i64 } else { axis };
        let sizes: Option<Vec<i64>> = (0..n)
            .map(|i| {
                ctx.shape(ctx.input(i)).dims().and_then(|d| d.get(axis as usize).copied().flatten()).map(|d| d as i64)
            })
            .collect();
        sizes.map(|v| (axis, v))
    });
    let split = match static_sizes {
        Some((axis, sizes)) => {
            let sizes = s.constant_from(&[n], &sizes)?;
            let ax = s.scalar(axis as i32)?;
            build(
                s,
                "SplitV",
                &[g, sizes, ax],
                &[("num_split", attr::int(n as i64)), ("Tlen", attr::dtype(DType::Int64))],
            )?
        }
        None => {
            // Shapes known only at run time: the sizes along the axis read from each input's
            // shape (the axis taken modulo the rank, as ConcatV2 does).
            let rank = s.unary("Rank", ctx.input(0))?;
            let ax = s.scalar(axis as i32)?;
            let ax = s.floor_mod(ax, rank)?;
            let zero = s.scalar(0i32)?;
            let sizes = (0..n)
                .map(|i| s.gather_v2(s.unary("Shape", ctx.input(i))?, ax, zero))
                .collect::<Result<Vec<_>, _>>()?;
            let sizes = s.pack(&sizes)?;
            s.split_v(g, sizes, ax, n as i64)?[0]
        }
    };
    let mut out: Vec<Option<Output>> = (0..n).map(|i| Some(Output { node: split.node, index: i })).collect();
    out.push(None);
    Ok(out)
}
