//! `CropAndResize` (NHWC): each box of the image sampled on a `crop_height x crop_width` grid,
//! bilinear or nearest, with TensorFlow's coordinate arithmetic (boxes may flip or reach
//! outside the image; samples outside take `extrapolation_value`); boxes across the
//! intra-op pool.
use ferroflow_tensor::{DType, Tensor};

use crate::{check_output, invalid, Inputs, KResult, KernelContext, KernelRegistry, NodeDesc, OpKernel, Outputs};

/// Pixels `CropAndResize` reads, widened to f32 as TensorFlow's kernel does.
trait Pixel: ferroflow_tensor::Element + Copy + Send + Sync {
    fn f(self) -> f32;
}
macro_rules! pixel {
    ($($t:ty),*) => {$(impl Pixel for $t { #[inline(always)] fn f(self) -> f32 { self as f32 } })*};
}
pixel!(u8, u16, i8, i16, i32, i64, f32, f64);
impl Pixel for ferroflow_tensor::f16 {
    #[inline(always)]
    fn f(self) -> f32 {
        self.to_f32()
    }
}

struct CropAndResize<T> {
    bilinear: bool,
    extrapolation: f32,
    _t: std::marker::PhantomData<T>,
}

/// Where output row (or column) `o` of a box samples the image: TensorFlow's `in_y`.
#[inline]
fn source(o: usize, lo: f32, hi: f32, image: usize, crop: usize) -> f32 {
    let last = (image - 1) as f32;
    if crop > 1 {
        let scale = (hi - lo) * last / (crop - 1) as f32;
        lo * last + o as f32 * scale
    } else {
        // TensorFlow computes the centre with a double `0.5`.
        (0.5 * (lo as f64 + hi as f64) * (image - 1) as f64) as f32
    }
}

impl<T: Pixel> OpKernel for CropAndResize<T> {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let (image, boxes, box_ind, crop_size) = (&inputs[0], &inputs[1], &inputs[2], &inputs[3]);
        let &[batch, ih, iw, depth] = image.dims() else {
            return Err(invalid(format!("image must be 4-D, got shape {:?}", image.dims())));
        };
        if ih == 0 || iw == 0 {
            return Err(invalid(format!("image dimensions must be positive, got shape {:?}", image.dims())));
        }
        let nb = match boxes.dims() {
            &[n, 4] => n,
            d => return Err(invalid(format!("boxes must be 2-D [num_boxes, 4], got shape {d:?}"))),
        };
        if box_ind.dims() != [nb] {
            return Err(invalid(format!("box_index must be [{nb}] (one per box), got shape {:?}", box_ind.dims())));
        }
        let size = crop_size.as_slice::<i32>()?;
        let &[ch, cw] = size else {
            return Err(invalid(format!("crop_size must be a vector of 2 elements, got shape {:?}", crop_size.dims())));
        };
        if ch <= 0 || cw <= 0 {
            return Err(invalid(format!("crop dimensions must be positive, got {ch}x{cw}")));
        }
        let (ch, cw) = (ch as usize, cw as usize);
        let ind = box_ind.as_slice::<i32>()?;
        if let Some(bad) = ind.iter().find(|&&b| b < 0 || b as usize >= batch) {
            return Err(invalid(format!("box_index has values outside [0, {batch}): {bad}")));
        }
        let dims = [nb, ch, cw, depth];
        check_output(DType::Float, &dims)?;
        let (img, bx) = (image.as_slice::<T>()?, boxes.as_slice::<f32>()?);
        let (bilinear, extra) = (self.bilinear, self.extrapolation);
        let mut out = vec![0f32; nb * ch * cw * depth];
        let per_box = ch * cw * depth;
        if per_box > 0 {
            ctx.for_each_chunk_mut(&mut out, per_box, |b, crop| {
                if ctx.stopped() {
                    return;
                }
                let [y1, x1, y2, x2] = [bx[b * 4], bx[b * 4 + 1], bx[b * 4 + 2], bx[b * 4 + 3]];
                let im = &img[ind[b] as usize * ih * iw * depth..][..ih * iw * depth];
                let px = |y: usize, x: usize| &im[(y * iw + x) * depth..(y * iw + x + 1) * depth];
                let xs: Vec<f32> = (0..cw).map(|x| source(x, x1, x2, iw, cw)).collect();
                for (y, row) in crop.chunks_exact_mut(cw * depth).enumerate() {
                    let in_y = source(y, y1, y2, ih, ch);
                    if !(0.0..=(ih - 1) as f32).contains(&in_y) {
                        row.fill(extra);
                        continue;
                    }
                    let (top, bottom) = (in_y.floor() as usize, in_y.ceil() as usize);
                    let y_lerp = in_y - in_y.floor();
                    for (&in_x, o) in xs.iter().zip(row.chunks_exact_mut(depth)) {
                        if !(0.0..=(iw - 1) as f32).contains(&in_x) {
                            o.fill(extra);
                            continue;
                        }
                        if bilinear {
                            let (left, right) = (in_x.floor() as usize, in_x.ceil() as usize);
                            let x_lerp = in_x - in_x.floor();
                            let (tl, tr, bl, br) = (px(top, left), px(top, right), px(bottom, left), px(bottom, right));
                            for d in 0..depth {
                                let t = tl[d].f() + (tr[d].f() - tl[d].f()) * x_lerp;
                                let bo = bl[d].f() + (br[d].f() - bl[d].f()) * x_lerp;
                                o[d] = t + (bo - t) * y_lerp;
                            }
                        } else {
                            let p = px(in_y.round() as usize, in_x.round() as usize);
                            o.iter_mut().zip(p).for_each(|(o, v)| *o = v.f());
                        }
                    }
                }
            });
        }
        outputs.push(Tensor::from_vec(&dims, out)?);
        Ok(())
    }
}

fn k_crop(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let bilinear = match d.string("method")?.as_str() {
        "bilinear" => true,
        "nearest" => false,
        m => return Err(invalid(format!("method '{m}' is not supported (supported: 'bilinear', 'nearest')"))),
    };
    let extrapolation = d.float("extrapolation_value")?;
    dispatch!(d.dtype("T")?, d.def.name,
        [UInt8 => u8, UInt16 => u16, Int8 => i8, Int16 => i16, Int32 => i32, Int64 => i64, Half => ferroflow_tensor::f16, Float => f32, Double => f64],
        |T| Ok(Box::new(CropAndResize::<T> { bilinear, extrapolation, _t: Default::default() }) as Box<dyn OpKernel>))
}

pub(crate) fn register(r: &mut KernelRegistry) {
    const TYPES: &[DType] = &[
        DType::UInt8,
        DType::UInt16,
        DType::Int8,
        DType::Int16,
        DType::Int32,
        DType::Int64,
        DType::Half,
        DType::Float,
        DType::Double,
    ];
    r.register("CropAndResize", "T", TYPES, k_crop);
}
