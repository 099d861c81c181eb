//! Image ops: resizes (NHWC: bilinear, nearest, bicubic, area, `ScaleAndTranslate`'s
//! kernels), file reading and writing, JPEG/PNG decoding and encoding, contrast, and
//! `ReverseV2` (flips).
use ferroflow_graph::{Output, ShapeError};
use ferroflow_proto::attr;
use ferroflow_tensor::{DType, Shape};

use crate::gradient::{build, g0, GradCtx, GradResult};
use crate::registry::{op, OpDef};
use crate::shape_inference::{self as s, InferCtx};

/// The image ops.
pub fn defs() -> Vec<OpDef> {
    let mut defs = resizes();
    defs.extend(codecs());
    defs
}

fn resizes() -> Vec<OpDef> {
    [
        (
            "ResizeBilinear",
            "resized_images: float",
            "TensorFlow differentiates it with ResizeBilinearGrad, which ferroflow does not have yet",
        ),
        (
            "ResizeNearestNeighbor",
            "resized_images: T",
            "TensorFlow differentiates it with ResizeNearestNeighborGrad, which ferroflow does not have yet",
        ),
    ]
    .into_iter()
    .map(|(name, out, no_gradient)| {
        op(name)
            .input("images: T")
            .input("size: int32")
            .output(out)
            .attr("T: type")
            .attr("align_corners: bool = false")
            .attr("half_pixel_centers: bool = false")
            .shape(resize)
            .grows()
            .gradient_unavailable(no_gradient)
            .build()
    })
    .chain([
        op("ResizeBicubic")
            .input("images: T")
            .input("size: int32")
            .output("resized_images: float")
            .attr(RESIZE_TYPES)
            .attr("align_corners: bool = false")
            .attr("half_pixel_centers: bool = false")
            .shape(resize)
            .grows()
            .gradient_unavailable(
                "TensorFlow differentiates it with ResizeBicubicGrad, which ferroflow does not have yet",
            )
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
            .gradient_unavailable(
                "TensorFlow differentiates it with ScaleAndTranslateGrad, which ferroflow does not have yet",
            )
            .build(),
    ])
    .collect()
}

/// The image types `ResizeBicubic` and `ResizeArea` take.
const RESIZE_TYPES: &str = "T: {int8, uint8, int16, uint16, int32, int64, half, float, double, bfloat16}";

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
