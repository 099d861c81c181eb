//! TensorFlow's list ops (`variant` tensors holding a TensorList): TF2 `while_loop`s, Keras's
//! recurrent layers among them, read their steps from a list (`TensorListFromTensor`,
//! `TensorListGetItem`) and write their outputs into one (`TensorListReserve`,
//! `TensorListSetItem`, `TensorListStack`). Gradients as TensorFlow's `list_ops.py`.
use ferroflow_graph::{Output, ShapeError};
use ferroflow_proto::attr::{self, AttrMap};
use ferroflow_tensor::{DType, Shape};

use crate::gradient::{build, g0, GradCtx, GradResult};
use crate::registry::{op, OpDef};
use crate::shape_inference::{self as s, InferCtx};
use crate::Ops;

const SIZES: &str = "it gives integer sizes";

/// The list ops.
pub fn defs() -> Vec<OpDef> {
    // A new list, empty (with a size limit) or of unset elements.
    let new_list = |name, size: &str| {
        op(name)
            .input("element_shape: shape_type")
            .input(size)
            .output("handle: variant")
            .attr("element_dtype: type")
            .attr("shape_type: {int32, int64}")
            .shape(s::scalar)
            .not_differentiable("a new list depends on no float input")
            .build()
    };
    vec![
        new_list("EmptyTensorList", "max_num_elements: int32"),
        new_list("TensorListReserve", "num_elements: int32"),
        op("TensorListFromTensor")
            .input("tensor: element_dtype")
            .input("element_shape: shape_type")
            .output("output_handle: variant")
            .attr("element_dtype: type")
            .attr("shape_type: {int32, int64}")
            .shape(s::scalar)
            .gradient(from_tensor_grad)
            .build(),
        op("TensorListGetItem")
            .input("input_handle: variant")
            .input("index: int32")
            .input("element_shape: Tshape")
            .output("item: element_dtype")
            .attr("element_dtype: type")
            .attr("Tshape: {int32, int64} = DT_INT32")
            .shape(get_item_shape)
            .gradient(get_item_grad)
            .build(),
        op("TensorListSetItem")
            .input("input_handle: variant")
            .input("index: int32")
            .input("item: element_dtype")
            .output("output_handle: variant")
            .attr("element_dtype: type")
            .attr("resize_if_index_out_of_bounds: bool = false")
            .shape(s::scalar)
            .gradient(set_item_grad)
            .build(),
        op("TensorListStack")
            .input("input_handle: variant")
            .input("element_shape: int32")
            .output("tensor: element_dtype")
            .attr("element_dtype: type")
            .attr("num_elements: int = -1")
            .shape(stack_shape)
            .gradient(stack_grad)
            .build(),
        op("TensorListLength")
            .input("input_handle: variant")
            .output("length: int32")
            .shape(s::scalar)
            .not_differentiable(SIZES)
            .build(),
        op("TensorListElementShape")
            .input("input_handle: variant")
            .output("element_shape: shape_type")
            .attr("shape_type: {int32, int64}")
            .shape(s::unknown)
            .not_differentiable(SIZES)
            .build(),
        op("TensorListPushBack")
            .input("input_handle: variant")
            .input("tensor: element_dtype")
            .output("output_handle: variant")
            .attr("element_dtype: type")
            .shape(s::scalar)
            .gradient(push_back_grad)
            .build(),
        op("TensorListPopBack")
            .input("input_handle: variant")
            .input("element_shape: int32")
            .output("output_handle: variant")
            .output("tensor: element_dtype")
            .attr("element_dtype: type")
            .shape(pop_back_shape)
            .gradient(pop_back_grad)
            .build(),
    ]
}

fn get_item_shape(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    Ok(vec![c.shape_value(2)])
}

fn pop_back_shape(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    Ok(vec![Shape::scalar(), c.shape_value(1)])
}

/// `[num_elements, *element_shape]`.
fn stack_shape(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let n = c.int("num_elements").and_then(|n| usize::try_from(n).ok());
    Ok(vec![match c.shape_value(1).dims() {
        Some(d) => Shape::new(std::iter::once(n).chain(d.iter().copied()).collect()),
        None => Shape::unknown(),
    }])
}

fn element_dtype(ctx: &GradCtx) -> Result<DType, crate::gradient::GradError> {
    ctx.node
        .attrs
        .attr_value("element_dtype")
        .and_then(attr::dtype_of)
        .and_then(|d| DType::from_tf(d).ok())
        .ok_or_else(|| ctx.unsupported("the node has no element_dtype"))
}

/// `Shape(x)[1:]` as int32: the element shape of a tensor split along its first axis.
fn inner_shape(s: &crate::Scope, x: Output) -> Result<Output, crate::gradient::GradError> {
    let shape = s.unary("Shape", x)?;
    let begin = s.constant_from(&[1], &[1i32])?;
    let size = s.constant_from(&[1], &[-1i32])?;
    Ok(build(s, "Slice", &[shape, begin, size], &[("Index", attr::dtype(DType::Int32))])?)
}

/// The list's gradient stacked back into the tensor's.
fn from_tensor_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(dlist) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let t = ctx.input(0);
    let n = ctx.shape(t).dims().and_then(|d| d.first().copied().flatten()).map_or(-1, |n| n as i64);
    let shape = inner_shape(s, t)?;
    let dt = build(
        s,
        "TensorListStack",
        &[dlist, shape],
        &[("element_dtype", attr::dtype(s.dtype(t))), ("num_elements", attr::int(n))],
    )?;
    Ok(vec![Some(dt), None])
}

/// The tensor's gradient split back into a list.
fn stack_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(dt) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let shape = inner_shape(s, dt)?;
    let dlist = build(
        s,
        "TensorListFromTensor",
        &[dt, shape],
        &[("element_dtype", attr::dtype(s.dtype(dt))), ("shape_type", attr::dtype(DType::Int32))],
    )?;
    Ok(vec![Some(dlist), None])
}

/// A list as long as the input's, holding the item's gradient at the index (the rest unset,
/// read as zeros).
fn get_item_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(ditem) = g0(gs) else { return Ok(vec![None, None, None]) };
    let s = &ctx.scope;
    let list = ctx.input(0);
    let dtype = attr::dtype(s.dtype(ditem));
    let len = s.unary("TensorListLength", list)?;
    let shape = build(s, "TensorListElementShape", &[list], &[("shape_type", attr::dtype(DType::Int32))])?;
    let reserved = build(
        s,
        "TensorListReserve",
        &[shape, len],
        &[("element_dtype", dtype.clone()), ("shape_type", attr::dtype(DType::Int32))],
    )?;
    let dlist = build(s, "TensorListSetItem", &[reserved, ctx.input(1), ditem], &[("element_dtype", dtype)])?;
    Ok(vec![Some(dlist), None, None])
}

/// The item's gradient read from the list's at the index; the list's is the same list with
/// zeros there.
fn set_item_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(dlist) = g0(gs) else { return Ok(vec![None, None, None]) };
    if ctx.attr_bool("resize_if_index_out_of_bounds") {
        return Err(ctx.unsupported("the gradient of a resizing TensorListSetItem is not supported"));
    }
    let s = &ctx.scope;
    let (index, item) = (ctx.input(1), ctx.input(2));
    let dtype = attr::dtype(element_dtype(ctx)?);
    let zeros = s.unary("ZerosLike", item)?;
    let list_grad = build(s, "TensorListSetItem", &[dlist, index, zeros], &[("element_dtype", dtype.clone())])?;
    let shape = s.unary("Shape", item)?;
    let item_grad = build(s, "TensorListGetItem", &[dlist, index, shape], &[("element_dtype", dtype)])?;
    Ok(vec![Some(list_grad), None, Some(item_grad)])
}

/// The pushed item's gradient popped from the list's.
fn push_back_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(dlist) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let item = ctx.input(1);
    let shape = s.unary("Shape", item)?;
    let dtype = attr::dtype(element_dtype(ctx)?);
    let popped = build(s, "TensorListPopBack", &[dlist, shape], &[("element_dtype", dtype)])?;
    Ok(vec![Some(popped), Some(Output { node: popped.node, index: 1 })])
}

/// The popped item's gradient pushed back onto the list's.
fn pop_back_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let (dlist, ditem) = (gs.first().copied().flatten(), gs.get(1).copied().flatten());
    if dlist.is_none() && ditem.is_none() {
        return Ok(vec![None, None]);
    }
    let s = &ctx.scope;
    let dtype = attr::dtype(element_dtype(ctx)?);
    let dlist = match dlist {
        Some(l) => l,
        None => {
            let shape =
                build(s, "TensorListElementShape", &[ctx.output(0)], &[("shape_type", attr::dtype(DType::Int32))])?;
            let max = s.scalar(-1i32)?;
            build(
                s,
                "EmptyTensorList",
                &[shape, max],
                &[("element_dtype", dtype.clone()), ("shape_type", attr::dtype(DType::Int32))],
            )?
        }
    };
    let ditem = match ditem {
        Some(d) => d,
        None => s.unary("ZerosLike", ctx.output(1))?,
    };
    Ok(vec![Some(build(s, "TensorListPushBack", &[dlist, ditem], &[("element_dtype", dtype)])?), None])
}
