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

/// The checked sizes of a crop's gradient: (boxes, crop height, crop width, depth).
fn crop_grads_dims(grads: &Tensor, boxes: &Tensor, box_ind: &Tensor) -> KResult<(usize, usize, usize, usize)> {
    let &[nb, ch, cw, depth] = grads.dims() else {
        return Err(invalid(format!("grads must be 4-D, got shape {:?}", grads.dims())));
    };
    if boxes.dims() != [nb, 4] {
        return Err(invalid(format!("boxes must be [{nb}, 4] (one per crop), got shape {:?}", boxes.dims())));
    }
    if box_ind.dims() != [nb] {
        return Err(invalid(format!("box_index must be [{nb}] (one per crop), got shape {:?}", box_ind.dims())));
    }
    Ok((nb, ch, cw, depth))
}

/// Where crop row (column) `o` samples, if inside the image: (low index, high index, lerp).
#[inline]
fn sample(o: usize, lo: f32, hi: f32, image: usize, crop: usize) -> Option<(usize, usize, f32)> {
    let v = source(o, lo, hi, image, crop);
    (0.0..=(image - 1) as f32).contains(&v).then(|| (v.floor() as usize, v.ceil() as usize, v - v.floor()))
}

/// `CropAndResizeGradImage`: each crop's gradient added back onto the pixels it sampled, with
/// the sampling weights (bilinear) or onto the nearest pixel; boxes in order (they may
/// overlap), as TensorFlow's kernel.
struct CropGradImage {
    bilinear: bool,
    out: DType,
}
impl OpKernel for CropGradImage {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let (grads, boxes, box_ind, size) = (&inputs[0], &inputs[1], &inputs[2], &inputs[3]);
        let (nb, ch, cw, depth) = crop_grads_dims(grads, boxes, box_ind)?;
        let &[batch, ih, iw, id] = size.as_slice::<i32>()? else {
            return Err(invalid(format!("image_size must be a vector of 4 elements, got shape {:?}", size.dims())));
        };
        if batch <= 0 || ih <= 0 || iw <= 0 || id as usize != depth {
            return Err(invalid(format!(
                "image_size must be positive with depth {depth} (the gradient's), got [{batch}, {ih}, {iw}, {id}]"
            )));
        }
        let (batch, ih, iw) = (batch as usize, ih as usize, iw as usize);
        let dims = [batch, ih, iw, depth];
        check_output(self.out, &dims)?;
        let ind = box_ind.as_slice::<i32>()?;
        if let Some(bad) = ind.iter().find(|&&b| b < 0 || b as usize >= batch) {
            return Err(invalid(format!("box_index has values outside [0, {batch}): {bad}")));
        }
        let (g, bx) = (grads.as_slice::<f32>()?, boxes.as_slice::<f32>()?);
        let mut out = vec![0f32; batch * ih * iw * depth];
        for b in 0..nb {
            let [y1, x1, y2, x2] = [bx[b * 4], bx[b * 4 + 1], bx[b * 4 + 2], bx[b * 4 + 3]];
            let im = &mut out[ind[b] as usize * ih * iw * depth..][..ih * iw * depth];
            for y in 0..ch {
                let Some((top, bottom, yl)) = sample(y, y1, y2, ih, ch) else { continue };
                for x in 0..cw {
                    let Some((left, right, xl)) = sample(x, x1, x2, iw, cw) else { continue };
                    let gr = &g[((b * ch + y) * cw + x) * depth..][..depth];
                    let mut add = |py: usize, px: usize, w: f32| {
                        let at = (py * iw + px) * depth;
                        im[at..at + depth].iter_mut().zip(gr).for_each(|(o, v)| *o += v * w);
                    };
                    if self.bilinear {
                        add(top, left, (1.0 - yl) * (1.0 - xl));
                        add(top, right, (1.0 - yl) * xl);
                        add(bottom, left, yl * (1.0 - xl));
                        add(bottom, right, yl * xl);
                    } else {
                        let in_y = source(y, y1, y2, ih, ch).round() as usize;
                        let in_x = source(x, x1, x2, iw, cw).round() as usize;
                        add(in_y, in_x, 1.0);
                    }
                }
            }
        }
        let t = Tensor::from_vec(&dims, out)?;
        if self.out == DType::Float {
            outputs.push(t);
        } else {
            let mut a = ferroflow_graph::Attrs::new();
            a.insert("SrcT".into(), ferroflow_proto::attr::dtype(DType::Float));
            a.insert("DstT".into(), ferroflow_proto::attr::dtype(self.out));
            outputs.extend(crate::run_op("Cast", &a, vec![t], ctx)?);
        }
        Ok(())
    }
}

/// `CropAndResizeGradBoxes` (bilinear): the crops' gradient against each box's four
/// coordinates, through the image's slope between the sampled pixels (TensorFlow's
/// `CropAndResizeBackpropBoxes`).
struct CropGradBoxes<T>(std::marker::PhantomData<T>);
impl<T: Pixel> OpKernel for CropGradBoxes<T> {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let (grads, image, boxes, box_ind) = (&inputs[0], &inputs[1], &inputs[2], &inputs[3]);
        let (nb, ch, cw, depth) = crop_grads_dims(grads, boxes, box_ind)?;
        let &[batch, ih, iw, id] = image.dims() else {
            return Err(invalid(format!("image must be 4-D, got shape {:?}", image.dims())));
        };
        if ih == 0 || iw == 0 || id != depth {
            return Err(invalid(format!("image must be non-empty with depth {depth}, got shape {:?}", image.dims())));
        }
        let ind = box_ind.as_slice::<i32>()?;
        if let Some(bad) = ind.iter().find(|&&b| b < 0 || b as usize >= batch) {
            return Err(invalid(format!("box_index has values outside [0, {batch}): {bad}")));
        }
        let (g, img, bx) = (grads.as_slice::<f32>()?, image.as_slice::<T>()?, boxes.as_slice::<f32>()?);
        let mut out = vec![0f32; nb * 4];
        let ratio = |image: usize, crop: usize| if crop > 1 { (image - 1) as f32 / (crop - 1) as f32 } else { 0.0 };
        // How much crop row (column) `o`'s sample moves with the box's first and second
        // coordinate along that axis.
        let ends = |o: usize, image: usize, crop: usize, r: f32| {
            let last = (image - 1) as f32;
            if crop > 1 {
                (last - o as f32 * r, o as f32 * r)
            } else {
                (0.5 * last, 0.5 * last)
            }
        };
        let (hr, wr) = (ratio(ih, ch), ratio(iw, cw));
        // TensorFlow's box gradient scales by the ratio first (`(y2 - y1) * ratio`), the
        // forward pass after multiplying (`(y2 - y1) * (h - 1) / (crop - 1)`): a sample on a
        // pixel row in one can fall just off it in the other, where the slope jumps.
        let at = |o: usize, lo: f32, hi: f32, image: usize, crop: usize, r: f32| {
            let v = if crop > 1 {
                lo * (image - 1) as f32 + o as f32 * ((hi - lo) * r)
            } else {
                source(o, lo, hi, image, crop)
            };
            (0.0..=(image - 1) as f32).contains(&v).then(|| (v.floor() as usize, v.ceil() as usize, v - v.floor()))
        };
        for b in 0..nb {
            let [y1, x1, y2, x2] = [bx[b * 4], bx[b * 4 + 1], bx[b * 4 + 2], bx[b * 4 + 3]];
            let im = &img[ind[b] as usize * ih * iw * depth..][..ih * iw * depth];
            let px = |y: usize, x: usize, d: usize| im[(y * iw + x) * depth + d].f();
            let (mut dy1, mut dx1, mut dy2, mut dx2) = (0f32, 0f32, 0f32, 0f32);
            for y in 0..ch {
                let Some((top, bottom, yl)) = at(y, y1, y2, ih, ch, hr) else { continue };
                for x in 0..cw {
                    let Some((left, right, xl)) = at(x, x1, x2, iw, cw, wr) else { continue };
                    for d in 0..depth {
                        let (tl, tr, bl, br) =
                            (px(top, left, d), px(top, right, d), px(bottom, left, d), px(bottom, right, d));
                        let gy = (1.0 - xl) * (bl - tl) + xl * (br - tr);
                        let gx = (1.0 - yl) * (tr - tl) + yl * (br - bl);
                        let top_grad = g[((b * ch + y) * cw + x) * depth + d];
                        let (a, z) = ends(y, ih, ch, hr);
                        dy1 += top_grad * gy * a;
                        dy2 += top_grad * gy * z;
                        let (a, z) = ends(x, iw, cw, wr);
                        dx1 += top_grad * gx * a;
                        dx2 += top_grad * gx * z;
                    }
                }
            }
            out[b * 4..b * 4 + 4].copy_from_slice(&[dy1, dx1, dy2, dx2]);
        }
        outputs.push(Tensor::from_vec(&[nb, 4], out)?);
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
    r.register("CropAndResizeGradImage", "T", &[DType::Float, DType::Half, DType::Double], |d| {
        Ok(Box::new(CropGradImage { bilinear: d.string("method")? == "bilinear", out: d.dtype("T")? }))
    });
    r.register("CropAndResizeGradBoxes", "T", TYPES, |d| {
        dispatch!(d.dtype("T")?, d.def.name,
            [UInt8 => u8, UInt16 => u16, Int8 => i8, Int16 => i16, Int32 => i32, Int64 => i64, Half => ferroflow_tensor::f16, Float => f32, Double => f64],
            |T| Ok(Box::new(CropGradBoxes::<T>(Default::default())) as Box<dyn OpKernel>))
    });
}
