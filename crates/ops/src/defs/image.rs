//! Image ops: resizes (NHWC: bilinear, nearest, bicubic, area, `ScaleAndTranslate`'s
//! kernels), file reading and writing, JPEG/PNG decoding and encoding, contrast, and
//! `ReverseV2` (flips).
use ferroflow_graph::{Output, ShapeError};
use ferroflow_proto::attr;
use ferroflow_tensor::{DType, Shape};

use crate::gradient::{build, g0, GradCtx, GradResult};
use crate::registry::{op, OpDef};
use crate::shape_inference::{self as s, InferCtx};
use crate::Ops;

/// The image ops.
pub fn defs() -> Vec<OpDef> {
    let mut defs = resizes();
    defs.extend(codecs());
    defs.extend(detection());
    defs
}

fn resizes() -> Vec<OpDef> {
    [
        ("ResizeBilinear", "resized_images: float", resize_bilinear_grad as crate::GradFn),
        ("ResizeNearestNeighbor", "resized_images: T", resize_nearest_grad),
    ]
    .into_iter()
    .map(|(name, out, gradient)| {
        op(name)
            .input("images: T")
            .input("size: int32")
            .output(out)
            .attr("T: type")
            .attr("align_corners: bool = false")
            .attr("half_pixel_centers: bool = false")
            .shape(resize)
            .grows()
            .gradient(gradient)
            .build()
    })
    .chain([
        op("ResizeBilinearGrad")
            .input("grads: float")
            .input("original_image: T")
            .output("output: T")
            .attr("T: {float, bfloat16, half, double}")
            .attr("align_corners: bool = false")
            .attr("half_pixel_centers: bool = false")
            .shape(|c| Ok(vec![c.inputs[1].clone()]))
            .gradient_unavailable("ferroflow has no second-order gradient of a resize")
            .build(),
        op("ResizeNearestNeighborGrad")
            .input("grads: T")
            .input("size: int32")
            .output("output: T")
            .attr("T: {uint8, int8, int32, half, float, double, bfloat16}")
            .attr("align_corners: bool = false")
            .attr("half_pixel_centers: bool = false")
            .shape(|c| {
                let (n, ch) = match c.inputs[0].dims() {
                    Some(d) if d.len() == 4 => (d[0], d[3]),
                    _ => (None, None),
                };
                let hw = c.shape_value(1);
                let hw = hw.dims().filter(|d| d.len() == 2).map(|d| (d[0], d[1])).unwrap_or((None, None));
                Ok(vec![Shape::new(vec![n, hw.0, hw.1, ch])])
            })
            .gradient_unavailable("ferroflow has no second-order gradient of a resize")
            .build(),
        op("ResizeBicubic")
            .input("images: T")
            .input("size: int32")
            .output("resized_images: float")
            .attr(RESIZE_TYPES)
            .attr("align_corners: bool = false")
            .attr("half_pixel_centers: bool = false")
            .shape(resize)
            .grows()
            .gradient(resize_bicubic_grad)
            .build(),
        op("ResizeBicubicGrad")
            .input("grads: float")
            .input("original_image: T")
            .output("output: T")
            .attr("T: {float, double}")
            .attr("align_corners: bool = false")
            .attr("half_pixel_centers: bool = false")
            .shape(|c| Ok(vec![c.inputs[1].clone()]))
            .gradient_unavailable("TensorFlow registers no gradient for ResizeBicubicGrad")
            .build(),
        op("ResizeArea")
            .input("images: T")
            .input("size: int32")
            .output("resized_images: float")
            .attr(RESIZE_TYPES)
            .attr("align_corners: bool = false")
            .shape(resize)
            .grows()
            .gradient_unavailable("TensorFlow registers no gradient for ResizeArea")
            .build(),
        op("ScaleAndTranslate")
            .input("images: T")
            .input("size: int32")
            .input("scale: float")
            .input("translation: float")
            .output("resized_images: float")
            .attr("T: {int8, uint8, int16, uint16, int32, int64, bfloat16, half, float, double}")
            .attr("kernel_type: string = 'lanczos3'")
            .attr("antialias: bool = true")
            .shape(resize)
            .grows()
            .gradient(scale_and_translate_grad)
            .build(),
        op("ScaleAndTranslateGrad")
            .input("grads: T")
            .input("original_image: T")
            .input("scale: float")
            .input("translation: float")
            .output("output: T")
            .attr("T: {float}")
            .attr("kernel_type: string = 'lanczos3'")
            .attr("antialias: bool = true")
            .shape(|c| Ok(vec![c.inputs[1].clone()]))
            .gradient_unavailable("TensorFlow registers no gradient for ScaleAndTranslateGrad")
            .build(),
    ])
    .collect()
}

/// The image types `ResizeBicubic` and `ResizeArea` take.
const RESIZE_TYPES: &str = "T: {int8, uint8, int16, uint16, int32, int64, half, float, double, bfloat16}";
/// Non-max suppression and `CropAndResize`: the post-processing of object detectors.
fn detection() -> Vec<OpDef> {
    const SELECTION: &str = "its outputs select boxes by index (TensorFlow registers no gradient)";
    let nms = |name: &str| {
        op(name)
            .input("boxes: T")
            .input("scores: T")
            .input("max_output_size: int32")
            .attr("T: {half, float} = DT_FLOAT")
    };
    vec![
        op("NonMaxSuppression")
            .input("boxes: float")
            .input("scores: float")
            .input("max_output_size: int32")
            .output("selected_indices: int32")
            .attr("iou_threshold: float = 0.5")
            .shape(nms_shape)
            .not_differentiable(SELECTION)
            .build(),
        nms("NonMaxSuppressionV2")
            .input("iou_threshold: T_threshold")
            .output("selected_indices: int32")
            .attr("T_threshold: {half, float} = DT_FLOAT")
            .shape(nms_shape)
            .not_differentiable(SELECTION)
            .build(),
        nms("NonMaxSuppressionV3")
            .input("iou_threshold: T_threshold")
            .input("score_threshold: T_threshold")
            .output("selected_indices: int32")
            .attr("T_threshold: {half, float} = DT_FLOAT")
            .shape(nms_shape)
            .not_differentiable(SELECTION)
            .build(),
        nms("NonMaxSuppressionV4")
            .input("iou_threshold: T_threshold")
            .input("score_threshold: T_threshold")
            .output("selected_indices: int32")
            .output("valid_outputs: int32")
            .attr("T_threshold: {half, float} = DT_FLOAT")
            .attr("pad_to_max_output_size: bool = false")
            .shape(nms_shape)
            .not_differentiable(SELECTION)
            .build(),
        nms("NonMaxSuppressionV5")
            .input("iou_threshold: T")
            .input("score_threshold: T")
            .input("soft_nms_sigma: T")
            .output("selected_indices: int32")
            .output("selected_scores: T")
            .output("valid_outputs: int32")
            .attr("pad_to_max_output_size: bool = false")
            .shape(nms_shape)
            .not_differentiable(SELECTION)
            .build(),
        op("CombinedNonMaxSuppression")
            .input("boxes: float")
            .input("scores: float")
            .input("max_output_size_per_class: int32")
            .input("max_total_size: int32")
            .input("iou_threshold: float")
            .input("score_threshold: float")
            .output("nmsed_boxes: float")
            .output("nmsed_scores: float")
            .output("nmsed_classes: float")
            .output("valid_detections: int32")
            .attr("pad_per_class: bool = false")
            .attr("clip_boxes: bool = true")
            .shape(combined_nms_shape)
            .not_differentiable(SELECTION)
            .build(),
        op("CropAndResize")
            .input("image: T")
            .input("boxes: float")
            .input("box_ind: int32")
            .input("crop_size: int32")
            .output("crops: float")
            .attr("T: {uint8, uint16, int8, int16, int32, int64, half, float, double}")
            .attr("method: {'bilinear', 'nearest'} = 'bilinear'")
            .attr("extrapolation_value: float = 0")
            .shape(crop_and_resize_shape)
            .grows()
            .gradient(crop_and_resize_grad)
            .build(),
        op("CropAndResizeGradImage")
            .input("grads: float")
            .input("boxes: float")
            .input("box_ind: int32")
            .input("image_size: int32")
            .output("output: T")
            .attr("T: {float, half, double}")
            .attr("method: {'bilinear', 'nearest'} = 'bilinear'")
            .shape(|c| {
                Ok(vec![Some(c.shape_value(3))
                    .filter(|s| s.rank().is_some())
                    .unwrap_or_else(|| Shape::new(vec![None; 4]))])
            })
            .gradient_unavailable("TensorFlow registers no gradient for CropAndResizeGradImage")
            .build(),
        op("CropAndResizeGradBoxes")
            .input("grads: float")
            .input("image: T")
            .input("boxes: float")
            .input("box_ind: int32")
            .output("output: float")
            .attr("T: {uint8, uint16, int8, int16, int32, int64, half, float, double}")
            .attr("method: {'bilinear'} = 'bilinear'")
            .shape(|c| Ok(vec![c.inputs[2].clone()]))
            .gradient_unavailable("TensorFlow registers no gradient for CropAndResizeGradBoxes")
            .build(),
    ]
}

/// The forward resize's `align_corners` and `half_pixel_centers`, for its gradient op.
fn resize_attrs(ctx: &GradCtx, t: DType) -> Vec<(&'static str, ferroflow_proto::AttrValue)> {
    let mut attrs = vec![("T", attr::dtype(t))];
    for k in ["align_corners", "half_pixel_centers"] {
        attrs.push((k, attr::boolean(ctx.attr_bool(k))));
    }
    attrs
}

/// `ResizeBilinear`: `ResizeBilinearGrad` for float images (TensorFlow's `_ResizeBilinearGrad`).
fn resize_bilinear_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let image = ctx.input(0);
    let t = ctx.scope.dtype(image);
    if !matches!(t, DType::Float | DType::Double | DType::Half | DType::BFloat16) {
        return Ok(vec![None, None]);
    }
    Ok(vec![Some(build(&ctx.scope, "ResizeBilinearGrad", &[g, image], &resize_attrs(ctx, t))?), None])
}

/// `ResizeNearestNeighbor`: `ResizeNearestNeighborGrad` onto the image's height and width
/// (TensorFlow's `_ResizeNearestNeighborGrad`).
fn resize_nearest_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let image = ctx.input(0);
    let shape = s.unary("Shape", image)?;
    let begin = s.constant_from(&[1], &[1i32])?;
    let size = s.constant_from(&[1], &[2i32])?;
    let hw = build(
        s,
        "Slice",
        &[shape, begin, size],
        &[("T", attr::dtype(DType::Int32)), ("Index", attr::dtype(DType::Int32))],
    )?;
    let t = s.dtype(g);
    Ok(vec![Some(build(s, "ResizeNearestNeighborGrad", &[g, hw], &resize_attrs(ctx, t))?), None])
}

/// `ResizeBicubic`: the gradient spread back with the same taps (`ResizeBicubicGrad`), for
/// float and double images (TensorFlow's `_ResizeBicubicGrad`; none for integer images).
fn resize_bicubic_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let s = &ctx.scope;
    let image = ctx.input(0);
    let t = s.dtype(image);
    if !matches!(t, DType::Float | DType::Double) {
        return Ok(vec![None, None]);
    }
    Ok(vec![Some(build(s, "ResizeBicubicGrad", &[g, image], &resize_attrs(ctx, t))?), None])
}

/// `ScaleAndTranslate`: the gradient spread back with the same kernel (`ScaleAndTranslateGrad`,
/// float images, as TensorFlow's `_ScaleAndTranslateGrad`).
fn scale_and_translate_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None; 4]) };
    let s = &ctx.scope;
    let image = ctx.input(0);
    if s.dtype(image) != DType::Float {
        return Ok(vec![None; 4]);
    }
    let attrs = [
        ("T", attr::dtype(DType::Float)),
        ("kernel_type", attr::string(&ctx.attr_string("kernel_type"))),
        ("antialias", attr::boolean(ctx.attr_bool("antialias"))),
    ];
    let grad = build(s, "ScaleAndTranslateGrad", &[g, image, ctx.input(2), ctx.input(3)], &attrs)?;
    Ok(vec![Some(grad), None, None, None])
}

/// `CropAndResize` (TensorFlow's `_CropAndResizeGrad`): the crops' gradient spread back onto
/// the image (float images) and, for bilinear sampling, onto the boxes' coordinates.
fn crop_and_resize_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None; 4]) };
    let s = &ctx.scope;
    let (image, boxes, box_ind) = (ctx.input(0), ctx.input(1), ctx.input(2));
    let t = s.dtype(image);
    let method = ctx.attr_string("method");
    let image_grad = if matches!(t, DType::Float | DType::Half | DType::Double) {
        let size = s.unary("Shape", image)?;
        Some(build(
            s,
            "CropAndResizeGradImage",
            &[g, boxes, box_ind, size],
            &[("T", attr::dtype(t)), ("method", attr::string(&method))],
        )?)
    } else {
        None
    };
    let boxes_grad = if method == "bilinear" {
        Some(build(s, "CropAndResizeGradBoxes", &[g, image, boxes, box_ind], &[("T", attr::dtype(t))])?)
    } else {
        None
    };
    Ok(vec![image_grad, boxes_grad, None, None])
}

/// The NMS ops: a vector of selected indices (of `max_output_size` when padded to it), then
/// the selected scores (V5) and the scalar count of valid outputs (V4, V5).
fn nms_shape(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    match c.inputs[0].dims() {
        Some(d) if d.len() != 2 || d[1].is_some_and(|n| n != 4) => {
            return Err(format!("boxes must be [num_boxes, 4], got {:?}", c.inputs[0].dims()).into())
        }
        _ => {}
    }
    if c.inputs[1].rank().is_some_and(|r| r != 1) {
        return Err(format!("scores must be a vector, got {:?}", c.inputs[1].dims()).into());
    }
    let padded = c.bool("pad_to_max_output_size");
    let max = c.const_ints(2).and_then(|v| v.first().copied()).and_then(|m| usize::try_from(m).ok());
    let n = if padded { max } else { None };
    let mut out = vec![Shape::new(vec![n])];
    if c.num_outputs == 3 {
        out.push(Shape::new(vec![n]));
    }
    if c.num_outputs >= 2 {
        out.push(Shape::new(vec![]));
    }
    Ok(out)
}

/// `CombinedNonMaxSuppression`: `[batch, per_batch, 4]`, `[batch, per_batch]` twice and
/// `[batch]`, where `per_batch` is `max_total_size` (capped by `max_output_size_per_class *
/// num_classes` with `pad_per_class`).
fn combined_nms_shape(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    if c.inputs[0].rank().is_some_and(|r| r != 4) {
        return Err(format!("boxes must be [batch, num_boxes, q, 4], got {:?}", c.inputs[0].dims()).into());
    }
    if c.inputs[1].rank().is_some_and(|r| r != 3) {
        return Err(format!("scores must be [batch, num_boxes, num_classes], got {:?}", c.inputs[1].dims()).into());
    }
    let batch = c.inputs[0].dims().and_then(|d| d[0]).or_else(|| c.inputs[1].dims().and_then(|d| d[0]));
    let scalar = |i| c.const_ints(i).and_then(|v| v.first().copied()).and_then(|m| usize::try_from(m).ok());
    let total = scalar(3);
    let per_batch = if c.bool("pad_per_class") {
        let classes = c.inputs[1].dims().and_then(|d| d[2]);
        match (total, scalar(2), classes) {
            (Some(t), Some(p), Some(k)) => Some(t.min(p.saturating_mul(k))),
            _ => None,
        }
    } else {
        total
    };
    Ok(vec![
        Shape::new(vec![batch, per_batch, Some(4)]),
        Shape::new(vec![batch, per_batch]),
        Shape::new(vec![batch, per_batch]),
        Shape::new(vec![batch]),
    ])
}

/// `CropAndResize`: `[num_boxes, crop_height, crop_width, depth]`.
fn crop_and_resize_shape(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let size = c.shape_value(3);
    let (h, w) = match size.dims() {
        Some([h, w]) => (*h, *w),
        Some(d) => return Err(format!("crop_size must hold 2 elements, got {}", d.len()).into()),
        None => (None, None),
    };
    let depth = match c.inputs[0].dims() {
        Some([_, _, _, d]) => *d,
        Some(d) => return Err(format!("image must be 4-dimensional, got rank {}", d.len()).into()),
        None => None,
    };
    let n = c.inputs[1].dims().and_then(|d| d.first().copied().flatten());
    Ok(vec![Shape::new(vec![n, h, w, depth])])
}

/// `[batch, size[0], size[1], channels]`.
fn resize(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let size = c.shape_value(1);
    let (h, w) = match size.dims() {
        Some([h, w]) => (*h, *w),
        Some(d) => return Err(format!("size must hold 2 elements, got {}", d.len()).into()),
        None => (None, None),
    };
    match c.inputs[0].dims() {
        Some([n, _, _, ch]) => Ok(vec![Shape::new(vec![*n, h, w, *ch])]),
        Some(d) => Err(format!("images must be 4-dimensional, got rank {}", d.len()).into()),
        None => Ok(vec![Shape::new(vec![None, h, w, None])]),
    }
}

/// A decode op's output, `[height, width, channels]` with `channels` from the attr (0:
/// unknown), after checking that `contents` is a scalar.
fn decoded(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    scalar_string_input(c)?;
    let ch = c.int("channels").unwrap_or(0);
    if !(0..=4).contains(&ch) {
        return Err(format!("channels must be 0, 1, 2, 3 or 4, got {ch}").into());
    }
    Ok(vec![Shape::new(vec![None, None, (ch > 0).then_some(ch as usize)])])
}

fn scalar_string_input(c: &InferCtx) -> Result<(), String> {
    match c.inputs[0].dims() {
        Some([]) | None => Ok(()),
        Some(d) => Err(format!("contents must be a scalar string, got rank {}", d.len())),
    }
}

fn codecs() -> Vec<OpDef> {
    vec![
        op("ReadFile")
            .input("filename: string")
            .output("contents: string")
            // Stateful: the file can change, and its bytes must not be folded into the graph.
            .stateful()
            .shape(s::scalar)
            .not_differentiable("its value comes from a file")
            .build(),
        op("WriteFile")
            .input("filename: string")
            .input("contents: string")
            .stateful()
            .shape(s::no_outputs)
            .not_differentiable("it has no outputs: it writes a file")
            .build(),
        op("DecodeJpeg")
            .input("contents: string")
            .output("image: uint8")
            .attrs(&[
                "channels: int = 0",
                "ratio: int = 1",
                "fancy_upscaling: bool = true",
                "try_recover_truncated: bool = false",
                "acceptable_fraction: float = 1",
                "dct_method: string = ''",
            ])
            .shape(decoded)
            .grows()
            .not_differentiable("decoding is not differentiable")
            .build(),
        op("DecodePng")
            .input("contents: string")
            .output("image: dtype")
            .attrs(&["channels: int = 0", "dtype: {uint8, uint16} = DT_UINT8"])
            .shape(decoded)
            .grows()
            .not_differentiable("decoding is not differentiable")
            .build(),
        op("DecodeImage")
            .input("contents: string")
            .output("image: dtype")
            .attrs(&["channels: int = 0", "dtype: {uint8, uint16, float} = DT_UINT8", "expand_animations: bool = true"])
            .shape(|c| {
                scalar_string_input(c)?;
                if c.bool("expand_animations") {
                    // A GIF decodes to [frames, height, width, channels].
                    Ok(vec![Shape::unknown()])
                } else {
                    decoded(c)
                }
            })
            .grows()
            .not_differentiable("decoding is not differentiable")
            .build(),
        op("EncodeJpeg")
            .input("image: uint8")
            .output("contents: string")
            .attrs(&[
                "format: {'', 'grayscale', 'rgb'} = ''",
                "quality: int = 95",
                "progressive: bool = false",
                "optimize_size: bool = false",
                "chroma_downsampling: bool = true",
                "density_unit: {'in', 'cm'} = 'in'",
                "x_density: int = 300",
                "y_density: int = 300",
                "xmp_metadata: string = ''",
            ])
            .shape(image_to_scalar)
            .not_differentiable("encoding is not differentiable")
            .build(),
        op("EncodePng")
            .input("image: T")
            .output("contents: string")
            .attrs(&["compression: int = -1", "T: {uint8, uint16} = DT_UINT8"])
            .shape(image_to_scalar)
            .not_differentiable("encoding is not differentiable")
            .build(),
        op("ExtractJpegShape")
            .input("contents: string")
            .output("image_shape: output_type")
            .attr("output_type: {int32, int64} = DT_INT32")
            .shape(|c| {
                scalar_string_input(c)?;
                Ok(vec![Shape::new(vec![Some(3)])])
            })
            .not_differentiable("a shape is not differentiable")
            .build(),
        op("AdjustContrastv2")
            .input("images: T")
            .input("contrast_factor: float")
            .output("output: T")
            .attr("T: {half, float} = DT_FLOAT")
            .shape(|c| match c.inputs[0].rank() {
                Some(r) if r < 3 => Err(format!("images must be at least 3-dimensional, got rank {r}").into()),
                _ => Ok(vec![c.inputs[0].clone()]),
            })
            .gradient_unavailable("TensorFlow has no gradient for AdjustContrastv2 either")
            .build(),
        op("ReverseV2")
            .input("tensor: T")
            .input("axis: Tidx")
            .output("output: T")
            .attrs(&["Tidx: {int32, int64} = DT_INT32", "T: type"])
            .shape(s::unchanged)
            .gradient(reverse_grad)
            .build(),
    ]
}

/// A 3-dimensional image in, a scalar string out.
fn image_to_scalar(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    match c.inputs[0].rank() {
        Some(3) | None => Ok(vec![Shape::scalar()]),
        Some(r) => Err(format!("image must be 3-dimensional [height, width, channels], got rank {r}").into()),
    }
}

/// Reversing the gradient along the same axes.
fn reverse_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let Some(g) = g0(gs) else { return Ok(vec![None, None]) };
    let axis = ctx.input(1);
    let tidx = ctx.scope.dtype(axis);
    let r = build(
        &ctx.scope,
        "ReverseV2",
        &[g, axis],
        &[("Tidx", attr::dtype(if tidx == DType::Int64 { DType::Int64 } else { DType::Int32 }))],
    )?;
    Ok(vec![Some(r), None])
}
