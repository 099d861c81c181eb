//! Image resizes (NHWC).
use ferroflow_tensor::Shape;

use crate::registry::{op, OpDef};
use crate::shape_inference::InferCtx;

/// The image ops.
pub fn defs() -> Vec<OpDef> {
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
    .collect()
}

/// `[batch, size[0], size[1], channels]`.
fn resize(c: &InferCtx) -> Result<Vec<Shape>, String> {
    let size = c.shape_value(1);
    let (h, w) = match size.dims() {
        Some([h, w]) => (*h, *w),
        Some(d) => return Err(format!("size must hold 2 elements, got {}", d.len())),
        None => (None, None),
    };
    match c.inputs[0].dims() {
        Some([n, _, _, ch]) => Ok(vec![Shape::new(vec![*n, h, w, *ch])]),
        Some(d) => Err(format!("images must be 4-dimensional, got rank {}", d.len())),
        None => Ok(vec![Shape::new(vec![None, h, w, None])]),
    }
}
