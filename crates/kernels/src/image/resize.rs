//! `ResizeBilinear` and `ResizeNearestNeighbor` (NHWC), with TensorFlow's coordinate rules for
//! `align_corners` and `half_pixel_centers`; rows across the intra-op pool.
use std::mem::MaybeUninit;

use ferroflow_tensor::{DType, Tensor};

use super::sampled::{resample, transpose, widen, Taps};
use crate::{invalid, Inputs, KResult, KernelContext, KernelRegistry, NodeDesc, OpKernel, Outputs};

#[derive(Clone, Copy)]
struct Resize {
    bilinear: bool,
    align_corners: bool,
    half_pixel: bool,
}

fn scale(input: usize, output: usize, align: bool) -> f32 {
    if align && output > 1 {
        (input - 1) as f32 / (output - 1) as f32
    } else {
        input as f32 / output as f32
    }
}

/// Source coordinate, lower and upper neighbours and weight of the upper one, for bilinear.
fn lerp_axis(o: usize, scale: f32, input: usize, half_pixel: bool) -> (usize, usize, f32) {
    let x = if half_pixel { (o as f32 + 0.5) * scale - 0.5 } else { o as f32 * scale };
    let lo = x.floor();
    let low = (lo.max(0.0) as usize).min(input - 1);
    let high = (x.ceil().max(0.0) as usize).min(input - 1);
    (low, high, x - lo)
}

fn nearest_axis(o: usize, scale: f32, input: usize, align: bool, half_pixel: bool) -> usize {
    let x = if half_pixel { (o as f32 + 0.5) * scale } else { o as f32 * scale };
    let i = if align { x.round() } else { x.floor() };
    (i.max(0.0) as usize).min(input - 1)
}

/// Pixels a bilinear resize reads, widened to f32 as TensorFlow's kernel does.
trait Pixel: Copy + Send + Sync {
    fn f(self) -> f32;
    /// [`lerp_row`]'s 3/4-channel loop straight from the source pixels, where this type has
    /// a vector path; `false` when it has none (the caller widens the row first).
    fn lerp_quads(_src: &[Self], _xs: &[(usize, usize, f32)], _c: usize, _row: &mut [f32]) -> bool {
        false
    }
}
macro_rules! pixel {
    ($($t:ty),*) => {$(impl Pixel for $t { #[inline(always)] fn f(self) -> f32 { self as f32 } })*};
}
pixel!(i32, i64, f32, f64);

impl Pixel for u8 {
    #[inline(always)]
    fn f(self) -> f32 {
        self as f32
    }

    #[cfg(target_arch = "x86_64")]
    fn lerp_quads(src: &[u8], xs: &[(usize, usize, f32)], c: usize, row: &mut [f32]) -> bool {
        use std::arch::x86_64::*;
        debug_assert!(matches!(c, 3 | 4) && row.len() > (xs.len().max(1) - 1) * c + 3);
        let widen = |p: &[u8]| -> [f32; 4] { [p[0].f(), p[1].f(), p[2].f(), p.get(3).map_or(0.0, |v| v.f())] };
        let done = if crate::isa::has_avx2() {
            // SAFETY: the CPU has AVX2 (checked just above).
            unsafe { lerp_pairs_avx2(src, xs, c, row) }
        } else {
            0
        };
        for (xo, &(x0, x1, xl)) in xs.iter().enumerate().skip(done) {
            let dst = &mut row[xo * c..xo * c + 4];
            if x0.max(x1) + 4 <= src.len() {
                // SAFETY: SSE2 is part of x86_64's baseline; the two 4-byte loads lie inside
                // `src` (checked above) and the 4-float store inside `dst`, which is 4 long.
                unsafe {
                    let zero = _mm_setzero_si128();
                    let load = |p: usize| {
                        let bytes = _mm_cvtsi32_si128(src.as_ptr().add(p).cast::<i32>().read_unaligned());
                        _mm_cvtepi32_ps(_mm_unpacklo_epi16(_mm_unpacklo_epi8(bytes, zero), zero))
                    };
                    let (a, b) = (load(x0), load(x1));
                    let v = _mm_add_ps(a, _mm_mul_ps(_mm_sub_ps(b, a), _mm_set1_ps(xl)));
                    _mm_storeu_ps(dst.as_mut_ptr(), v);
                }
            } else {
                // The row's last pixel (3 channels): its fourth byte would be past the row.
                let (a, b) = (widen(&src[x0..(x0 + 4).min(src.len())]), widen(&src[x1..(x1 + 4).min(src.len())]));
                for i in 0..4 {
                    dst[i] = a[i] + (b[i] - a[i]) * xl;
                }
            }
        }
        true
    }
}

/// [`Pixel::lerp_quads`] for `u8`, two output pixels per 8-lane operation (the same
/// operations as the 4-lane path, lane for lane, so the same bits). Returns how many leading
/// output pixels it wrote; the rest (an odd last one, or one whose loads would pass the end
/// of `src`) are left to the caller.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn lerp_pairs_avx2(src: &[u8], xs: &[(usize, usize, f32)], c: usize, row: &mut [f32]) -> usize {
    use std::arch::x86_64::*;
    let (s, r) = (src.as_ptr(), row.as_mut_ptr());
    // Four bytes at `p` and at `q`, widened to eight f32 lanes.
    let load = |p: usize, q: usize| {
        let lo = s.add(p).cast::<u32>().read_unaligned() as u64;
        let hi = s.add(q).cast::<u32>().read_unaligned() as u64;
        _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((lo | hi << 32) as i64)))
    };
    let mut done = 0;
    for pair in xs.chunks_exact(2) {
        let [(a0, b0, l0), (a1, b1, l1)] = [pair[0], pair[1]];
        if a0.max(b0).max(a1).max(b1) + 4 > src.len() {
            break;
        }
        // `row` holds `xs.len() * c + 1` floats: both stores below stay inside it.
        debug_assert!((done + 1) * c + 4 <= row.len());
        let (a, b) = (load(a0, a1), load(b0, b1));
        let l = _mm256_set_m128(_mm_set1_ps(l1), _mm_set1_ps(l0));
        let v = _mm256_add_ps(a, _mm256_mul_ps(_mm256_sub_ps(b, a), l));
        if c == 4 {
            _mm256_storeu_ps(r.add(done * 4), v);
        } else {
            // The first pixel's fourth lane spills into the second's first element, which
            // the second store then overwrites.
            _mm_storeu_ps(r.add(done * c), _mm256_castps256_ps128(v));
            _mm_storeu_ps(r.add((done + 1) * c), _mm256_extractf128_ps::<1>(v));
        }
        done += 2;
    }
    done
}

/// Output rows per parallel task: each task keeps its own two interpolated source rows.
const RESIZE_ROWS_PER_TASK: usize = 16;

/// One source row interpolated horizontally: `row[xo*c + ch] = a + (b - a) * xl`, the first
/// half of TensorFlow's `compute_lerp` (the same operations in the same order). The row is
/// first widened to f32 in `wide` (`w*c + 1` long); `row` is `ow*c + 1` long. For 3 and 4
/// channels each output pixel is one 4-lane operation (for 3 channels the fourth lane
/// spills into the next pixel's first element, which that pixel then overwrites). `u8`
/// pixels skip the widening: each output pixel loads its two source pixels' bytes directly.
fn lerp_row<T: Pixel>(src: &[T], xs: &[(usize, usize, f32)], c: usize, wide: &mut [f32], row: &mut [f32]) {
    if matches!(c, 3 | 4) && T::lerp_quads(src, xs, c, row) {
        return;
    }
    for (d, s) in wide.iter_mut().zip(src) {
        *d = s.f();
    }
    let quad = |a: &[f32], b: &[f32], xl: f32| -> [f32; 4] {
        let (a, b): ([f32; 4], [f32; 4]) =
            (a[..4].try_into().unwrap_or_default(), b[..4].try_into().unwrap_or_default());
        [a[0] + (b[0] - a[0]) * xl, a[1] + (b[1] - a[1]) * xl, a[2] + (b[2] - a[2]) * xl, a[3] + (b[3] - a[3]) * xl]
    };
    match c {
        3 | 4 => {
            for (xo, &(x0, x1, xl)) in xs.iter().enumerate() {
                let o = quad(&wide[x0..x0 + 4], &wide[x1..x1 + 4], xl);
                row[xo * c..xo * c + 4].copy_from_slice(&o);
            }
        }
        _ => {
            for (o, &(x0, x1, xl)) in row.chunks_exact_mut(c).zip(xs) {
                for ch in 0..c {
                    let (l, r) = (wide[x0 + ch], wide[x1 + ch]);
                    o[ch] = l + (r - l) * xl;
                }
            }
        }
    }
}

/// Bilinear resize of NHWC `src` into `out` (`[n, oh, ow, c]`): each output row lerps two
/// horizontally interpolated source rows, which are computed once and reused by the next
/// output row when it reads the same source rows. Row blocks run on the intra-op pool.
#[allow(clippy::too_many_arguments)]
fn bilinear<T: Pixel>(
    ctx: &KernelContext,
    src: &[T],
    [h, w, c]: [usize; 3],
    ys: &[(usize, usize, f32)],
    xs: &[(usize, usize, f32)],
    out: &mut [MaybeUninit<f32>],
) {
    let (oh, row_len) = (ys.len(), xs.len() * c);
    if out.is_empty() || row_len == 0 {
        return;
    }
    // Column offsets in elements rather than pixels.
    let xs: Vec<(usize, usize, f32)> = xs.iter().map(|&(a, b, l)| (a * c, b * c, l)).collect();
    let block = |(i, rows): (usize, &mut [MaybeUninit<f32>])| {
        let (mut top, mut bottom) = (vec![0f32; row_len + 1], vec![0f32; row_len + 1]);
        let mut wide = vec![0f32; w * c + 1];
        let (mut have_top, mut have_bottom) = (usize::MAX, usize::MAX);
        for (k, o) in rows.chunks_exact_mut(row_len).enumerate() {
            let r = i * RESIZE_ROWS_PER_TASK + k;
            let (b, y) = (r / oh, r % oh);
            let (y0, y1, yl) = ys[y];
            let (s0, s1) = ((b * h + y0) * w * c, (b * h + y1) * w * c);
            if have_top != s0 {
                if have_bottom == s0 {
                    std::mem::swap(&mut top, &mut bottom);
                    std::mem::swap(&mut have_top, &mut have_bottom);
                } else {
                    lerp_row(&src[s0..s0 + w * c], &xs, c, &mut wide, &mut top);
                    have_top = s0;
                }
            }
            if have_bottom != s1 {
                lerp_row(&src[s1..s1 + w * c], &xs, c, &mut wide, &mut bottom);
                have_bottom = s1;
            }
            for ((o, &t), &bo) in o.iter_mut().zip(&top).zip(&bottom) {
                o.write(t + (bo - t) * yl);
            }
        }
    };
    let chunk = RESIZE_ROWS_PER_TASK * row_len;
    if ctx.threads() > 1 && out.len() > chunk {
        use rayon::prelude::*;
        ctx.install(|| out.par_chunks_mut(chunk).enumerate().for_each(block));
    } else {
        out.chunks_mut(chunk).enumerate().for_each(block);
    }
}

impl OpKernel for Resize {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let x = &inputs[0];
        let &[n, h, w, c] = x.dims() else {
            return Err(invalid(format!("input must be 4-dimensional, got shape {:?}", x.dims())));
        };
        let size = inputs[1].as_slice::<i32>()?;
        let &[oh, ow] = size else { return Err(invalid(format!("size must be a vector of 2 elements, got {size:?}"))) };
        if oh <= 0 || ow <= 0 || h == 0 || w == 0 {
            return Err(invalid(format!("output size {size:?} and input size [{h}, {w}] must be positive")));
        }
        let (oh, ow) = (oh as usize, ow as usize);
        crate::check_output(if self.bilinear { DType::Float } else { x.dtype() }, &[n, oh, ow, c])?;
        let (sy, sx) = (scale(h, oh, self.align_corners), scale(w, ow, self.align_corners));
        let at = |b: usize, y: usize, xx: usize| ((b * h + y) * w + xx) * c;
        if self.bilinear {
            let ys: Vec<_> = (0..oh).map(|y| lerp_axis(y, sy, h, self.half_pixel)).collect();
            let xs: Vec<_> = (0..ow).map(|xo| lerp_axis(xo, sx, w, self.half_pixel)).collect();
            let hwc = [h, w, c];
            let fill = |o: &mut [MaybeUninit<f32>]| match x.dtype() {
                DType::Float => x.as_slice::<f32>().map(|s| bilinear(ctx, s, hwc, &ys, &xs, o)),
                DType::Double => x.as_slice::<f64>().map(|s| bilinear(ctx, s, hwc, &ys, &xs, o)),
                DType::Int32 => x.as_slice::<i32>().map(|s| bilinear(ctx, s, hwc, &ys, &xs, o)),
                DType::Int64 => x.as_slice::<i64>().map(|s| bilinear(ctx, s, hwc, &ys, &xs, o)),
                _ => x.as_slice::<u8>().map(|s| bilinear(ctx, s, hwc, &ys, &xs, o)),
            };
            if !matches!(x.dtype(), DType::Float | DType::Double | DType::Int32 | DType::Int64 | DType::UInt8) {
                return Err(invalid(format!("resize is not defined for {} images", x.dtype())));
            }
            let mut filled = Ok(());
            // SAFETY: `bilinear` writes every output element (each row of every image, see
            // there); the dtype was checked above, so `as_slice` cannot fail and skip it —
            // and if it did, the tensor is dropped unread below.
            let out = unsafe { Tensor::from_uninit::<f32>(&[n, oh, ow, c], |o| filled = fill(o)) }?;
            filled?;
            outputs.push(out);
        } else {
            let size = x.dtype().size().ok_or_else(|| invalid(format!("resize is not defined for {}", x.dtype())))?;
            let bytes = x.as_bytes()?;
            let mut out = Vec::with_capacity(n * oh * ow * c * size);
            for b in 0..n {
                for y in 0..oh {
                    let iy = nearest_axis(y, sy, h, self.align_corners, self.half_pixel);
                    for xo in 0..ow {
                        let ix = nearest_axis(xo, sx, w, self.align_corners, self.half_pixel);
                        let p = at(b, iy, ix) * size;
                        out.extend_from_slice(&bytes[p..p + c * size]);
                    }
                }
            }
            outputs.push(Tensor::from_bytes(x.dtype(), &[n, oh, ow, c], &out)?);
        }
        Ok(())
    }
}

/// `ResizeBilinearGrad` (grads, original image) and `ResizeNearestNeighborGrad` (grads, the
/// original size): the gradient spread back over the pixels the forward resize read, with its
/// weights (the forward taps transposed), in the original image's type (bilinear) or the
/// gradient's (nearest).
struct ResizeGrad(Resize);

impl OpKernel for ResizeGrad {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let g = &inputs[0];
        let &[n, oh, ow, c] = g.dims() else {
            return Err(invalid(format!("grads must be 4-dimensional, got shape {:?}", g.dims())));
        };
        let (h, w, out_type) = if self.0.bilinear {
            match inputs[1].dims() {
                &[xn, h, w, xc] if (xn, xc) == (n, c) => (h, w, inputs[1].dtype()),
                d => return Err(invalid(format!("original_image must be [{n}, h, w, {c}], got shape {d:?}"))),
            }
        } else {
            match inputs[1].as_slice::<i32>()? {
                &[h, w] if h > 0 && w > 0 => (h as usize, w as usize, g.dtype()),
                s => return Err(invalid(format!("size must be 2 positive sizes, got {s:?}"))),
            }
        };
        if h == 0 || w == 0 || oh == 0 || ow == 0 {
            return Err(invalid(format!("the original [{h}, {w}] and resized [{oh}, {ow}] sizes must be positive")));
        }
        // The size may come from the user: the output is checked before it is allocated.
        crate::check_output(out_type, &[n, h, w, c])?;
        let Resize { bilinear, align_corners, half_pixel } = self.0;
        let axis = |input: usize, output: usize| -> Taps {
            let s = scale(input, output, align_corners);
            (0..output)
                .map(|o| {
                    if bilinear {
                        let (lo, hi, t) = lerp_axis(o, s, input, half_pixel);
                        vec![(lo, 1.0 - t), (hi, t)]
                    } else {
                        vec![(nearest_axis(o, s, input, align_corners, half_pixel), 1.0)]
                    }
                })
                .collect()
        };
        let (ys, xs) = (transpose(&axis(h, oh), h), transpose(&axis(w, ow), w));
        let out = resample(ctx, &widen(g)?, [n, oh, ow, c], &ys, &xs);
        let dims = [n, h, w, c];
        outputs.push(match out_type {
            DType::Float => Tensor::from_vec(&dims, out)?,
            DType::Double => Tensor::from_vec(&dims, out.into_iter().map(f64::from).collect())?,
            d => return Err(invalid(format!("resize gradients of {d} images are not supported (float, double)"))),
        });
        Ok(())
    }
}

fn k_resize(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let r = Resize {
        bilinear: d.def.name.starts_with("ResizeBilinear"),
        align_corners: d.bool("align_corners")?,
        half_pixel: d.bool("half_pixel_centers")?,
    };
    if r.align_corners && r.half_pixel {
        return Err(invalid("half_pixel_centers and align_corners cannot both be true"));
    }
    Ok(if d.def.name.ends_with("Grad") { Box::new(ResizeGrad(r)) } else { Box::new(r) })
}

pub(super) fn register(r: &mut KernelRegistry) {
    const T: &[DType] = &[DType::Float, DType::Double, DType::Int32, DType::Int64, DType::UInt8];
    r.register("ResizeBilinear", "T", T, k_resize);
    r.register("ResizeNearestNeighbor", "T", T, k_resize);
    r.register("ResizeBilinearGrad", "T", &[DType::Float, DType::Double], k_resize);
    r.register("ResizeNearestNeighborGrad", "T", &[DType::Float, DType::Double], k_resize);
}
