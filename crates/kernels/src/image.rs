//! Image kernels: `ResizeBilinear` and `ResizeNearestNeighbor` (NHWC), with TensorFlow's
//! coordinate rules for `align_corners` and `half_pixel_centers`; files and image codecs —
//! `ReadFile`, `WriteFile`, `DecodeJpeg`, `DecodePng`, `DecodeImage`, `EncodeJpeg`,
//! `EncodePng`, `ExtractJpegShape` (pixels identical to TensorFlow's, see `ferroflow-codec`) —
//! and the augmentation ops `AdjustContrastv2` and `ReverseV2` (flips). Every image size is
//! checked against the memory limit from the file's header before anything image-sized is
//! allocated.
use std::mem::MaybeUninit;
use std::path::Path;

use ferroflow_codec::jpeg::{self, DctMethod, DecodeOptions, DensityUnit, EncodeOptions, JpegFormat};
use ferroflow_codec::png::{self, PngDecodeOptions, PngDtype, PngPixels};
use ferroflow_codec::Format;
use ferroflow_tensor::{DType, Tensor};

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

fn k_resize(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let r = Resize {
        bilinear: d.def.name == "ResizeBilinear",
        align_corners: d.bool("align_corners")?,
        half_pixel: d.bool("half_pixel_centers")?,
    };
    if r.align_corners && r.half_pixel {
        return Err(invalid("half_pixel_centers and align_corners cannot both be true"));
    }
    Ok(Box::new(r))
}

pub(crate) fn register(r: &mut KernelRegistry) {
    register_codecs(r);
    const T: &[DType] = &[DType::Float, DType::Double, DType::Int32, DType::Int64, DType::UInt8];
    r.register("ResizeBilinear", "T", T, k_resize);
    r.register("ResizeNearestNeighbor", "T", T, k_resize);
}

/// The bytes of a scalar string input.
fn scalar_bytes<'a>(t: &'a Tensor, what: &str) -> KResult<&'a [u8]> {
    let s = t.as_strings()?;
    if t.rank() != 0 || s.len() != 1 {
        return Err(invalid(format!("{what} must be a scalar string, got shape {:?}", t.dims())));
    }
    Ok(&s[0])
}

fn path_of(t: &Tensor) -> KResult<String> {
    let b = scalar_bytes(t, "filename")?;
    String::from_utf8(b.to_vec()).map_err(|_| invalid("filename is not UTF-8"))
}

fn string_scalar(bytes: Vec<u8>) -> KResult<Tensor> {
    Ok(Tensor::from_strings(&[], vec![bytes])?)
}

struct ReadFile;
impl OpKernel for ReadFile {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let path = path_of(&inputs[0])?;
        outputs.push(string_scalar(read_file(Path::new(&path))?)?);
        Ok(())
    }
}

/// A whole file, its size checked against the memory limit first.
pub fn read_file(path: &Path) -> KResult<Vec<u8>> {
    use std::io::Read;
    let shown = path.display();
    let mut f = std::fs::File::open(path).map_err(|e| invalid(format!("{shown}: {e}")))?;
    let len = f.metadata().map_err(|e| invalid(format!("{shown}: {e}")))?.len();
    if f.metadata().is_ok_and(|m| m.is_dir()) {
        return Err(invalid(format!("{shown}: is a directory")));
    }
    ferroflow_tensor::limit::check(len as usize, || format!("contents of {shown}"))?;
    let mut out = Vec::with_capacity(len as usize);
    f.by_ref().take(len).read_to_end(&mut out).map_err(|e| invalid(format!("{shown}: {e}")))?;
    Ok(out)
}

struct WriteFile;
impl OpKernel for WriteFile {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, _: &mut Outputs) -> KResult<()> {
        let path = path_of(&inputs[0])?;
        let contents = scalar_bytes(&inputs[1], "contents")?;
        let path = Path::new(&path);
        // As TensorFlow: the directory is created when missing.
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| invalid(format!("{}: {e}", dir.display())))?;
        }
        ferroflow_tensor::fs::write_atomic(path, contents)?;
        Ok(())
    }
}

/// `DecodeJpeg`'s attrs.
fn jpeg_options(d: &NodeDesc) -> KResult<DecodeOptions> {
    let channels = d.int("channels")?;
    let ratio = d.int("ratio")?;
    Ok(DecodeOptions {
        channels: u8::try_from(channels).map_err(|_| invalid(format!("channels must be 0, 1 or 3, got {channels}")))?,
        ratio: u8::try_from(ratio).map_err(|_| invalid(format!("ratio must be 1, 2, 4 or 8, got {ratio}")))?,
        fancy_upscaling: d.bool("fancy_upscaling")?,
        try_recover_truncated: d.bool("try_recover_truncated")?,
        acceptable_fraction: d.float("acceptable_fraction")?,
        dct_method: DctMethod::from_tf(&d.string("dct_method")?).map_err(invalid)?,
        max_bytes: 0,
    })
}

/// Decodes a JPEG into a `uint8` `[height, width, channels]` tensor under the memory limit.
pub fn decode_jpeg(bytes: &[u8], opts: &DecodeOptions) -> KResult<Tensor> {
    let opts = DecodeOptions { max_bytes: ferroflow_tensor::limit::current(), ..opts.clone() };
    let make = |shape: [usize; 3]| Tensor::zeros(DType::UInt8, &shape).map(PixelTensor).map_err(|e| e.to_string());
    let (PixelTensor(t), _) = jpeg::decode_jpeg_into(bytes, &opts, make).map_err(invalid)?;
    Ok(t)
}

/// A fresh uint8 tensor the JPEG decoder writes its pixels into (no copy afterwards).
struct PixelTensor(Tensor);
impl jpeg::PixelBuffer for PixelTensor {
    fn pixels(&mut self) -> &mut [u8] {
        // A fresh tensor is its buffer's only owner, so this never copies; a dtype mismatch
        // cannot happen (made as uint8), and an empty slice would be refused by the decoder.
        self.0.as_mut_slice::<u8>().unwrap_or_default()
    }
}

struct DecodeJpeg(DecodeOptions);
impl OpKernel for DecodeJpeg {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        outputs.push(decode_jpeg(scalar_bytes(&inputs[0], "contents")?, &self.0)?);
        Ok(())
    }
}

/// Decodes a PNG into a `dtype` (uint8 or uint16) `[height, width, channels]` tensor.
pub fn decode_png(bytes: &[u8], channels: u8, dtype: DType) -> KResult<Tensor> {
    let opts = PngDecodeOptions {
        channels,
        dtype: if dtype == DType::UInt16 { PngDtype::U16 } else { PngDtype::U8 },
        max_bytes: ferroflow_tensor::limit::current(),
    };
    let (pixels, shape) = png::decode_png(bytes, &opts).map_err(invalid)?;
    Ok(match pixels {
        PngPixels::U8(v) => Tensor::from_vec(&shape, v)?,
        PngPixels::U16(v) => Tensor::from_vec(&shape, v)?,
    })
}

fn channels_attr(d: &NodeDesc, allowed: &[i64]) -> KResult<u8> {
    let c = d.int("channels")?;
    if !allowed.contains(&c) {
        return Err(invalid(format!("channels must be one of {allowed:?}, got {c}")));
    }
    Ok(c as u8)
}

struct DecodePng(u8, DType);
impl OpKernel for DecodePng {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        outputs.push(decode_png(scalar_bytes(&inputs[0], "contents")?, self.0, self.1)?);
        Ok(())
    }
}

/// `tf.io.decode_image`: JPEG or PNG by signature, then converted to `dtype` as
/// `convert_image_dtype` does (uint8 → uint16 ×257, → float32 scaled to [0, 1]).
pub fn decode_image(bytes: &[u8], channels: u8, dtype: DType) -> KResult<Tensor> {
    let decoded = match ferroflow_codec::sniff(bytes) {
        Some(Format::Jpeg) => {
            if channels == 4 {
                return Err(invalid("channels=4 is not supported for JPEG images"));
            }
            decode_jpeg(bytes, &DecodeOptions { channels, ..Default::default() })?
        }
        Some(Format::Png) => {
            decode_png(bytes, channels, if dtype == DType::UInt8 { DType::UInt8 } else { DType::UInt16 })?
        }
        Some(f) => return Err(invalid(format!("{f:?} images are not supported yet (JPEG and PNG are)"))),
        None => {
            let head: Vec<String> = bytes.iter().take(4).map(|b| format!("{b:02x}")).collect();
            return Err(invalid(format!(
                "unknown image file format: starts with {}; one of JPEG, PNG, GIF, BMP is required",
                head.join(" ")
            )));
        }
    };
    convert_image_dtype(&decoded, dtype)
}

/// `tf.image.convert_image_dtype` between the integer image types and float32.
fn convert_image_dtype(t: &Tensor, to: DType) -> KResult<Tensor> {
    if t.dtype() == to {
        return Ok(t.clone());
    }
    match (t.dtype(), to) {
        (DType::UInt8, DType::UInt16) => {
            Ok(Tensor::from_vec(t.dims(), t.as_slice::<u8>()?.iter().map(|&v| v as u16 * 257).collect())?)
        }
        (DType::UInt8, DType::Float) => {
            let scale = 1.0f32 / 255.0;
            Ok(Tensor::from_vec(t.dims(), t.as_slice::<u8>()?.iter().map(|&v| v as f32 * scale).collect())?)
        }
        (DType::UInt16, DType::Float) => {
            let scale = 1.0f32 / 65535.0;
            Ok(Tensor::from_vec(t.dims(), t.as_slice::<u16>()?.iter().map(|&v| v as f32 * scale).collect())?)
        }
        (from, to) => Err(invalid(format!("cannot convert a {from} image to {to}"))),
    }
}

struct DecodeImage(u8, DType);
impl OpKernel for DecodeImage {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        outputs.push(decode_image(scalar_bytes(&inputs[0], "contents")?, self.0, self.1)?);
        Ok(())
    }
}

struct ExtractJpegShape(DType);
impl OpKernel for ExtractJpegShape {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let s = jpeg::jpeg_shape(scalar_bytes(&inputs[0], "contents")?).map_err(invalid)?;
        outputs.push(match self.0 {
            DType::Int64 => Tensor::from_vec(&[3], s.iter().map(|&v| v as i64).collect())?,
            _ => Tensor::from_vec(&[3], s.iter().map(|&v| v as i32).collect())?,
        });
        Ok(())
    }
}

/// The `[height, width, channels]` of an image input.
fn hwc(t: &Tensor) -> KResult<(usize, usize, usize)> {
    match *t.dims() {
        [h, w, c] => Ok((h, w, c)),
        ref d => Err(invalid(format!("image must be 3-dimensional [height, width, channels], got shape {d:?}"))),
    }
}

struct EncodeJpeg(EncodeOptions);
impl OpKernel for EncodeJpeg {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let (h, w, c) = hwc(&inputs[0])?;
        let bytes = jpeg::encode_jpeg(inputs[0].as_slice::<u8>()?, h, w, c, &self.0).map_err(invalid)?;
        outputs.push(string_scalar(bytes)?);
        Ok(())
    }
}

fn k_encode_jpeg(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let quality = d.int("quality")?;
    let density = |name: &str| -> KResult<u16> {
        let v = d.int(name)?;
        u16::try_from(v).map_err(|_| invalid(format!("{name} must be in 0..=65535, got {v}")))
    };
    Ok(Box::new(EncodeJpeg(EncodeOptions {
        format: match d.string("format")?.as_str() {
            "" => JpegFormat::Auto,
            "grayscale" => JpegFormat::Grayscale,
            "rgb" => JpegFormat::Rgb,
            f => return Err(invalid(format!("format must be '', 'grayscale' or 'rgb', got '{f}'"))),
        },
        quality: u8::try_from(quality)
            .ok()
            .filter(|q| *q <= 100)
            .ok_or_else(|| invalid(format!("quality must be in [0, 100], got {quality}")))?,
        progressive: d.bool("progressive")?,
        optimize_size: d.bool("optimize_size")?,
        chroma_downsampling: d.bool("chroma_downsampling")?,
        density_unit: match d.string("density_unit")?.as_str() {
            "cm" => DensityUnit::Centimeter,
            _ => DensityUnit::Inch,
        },
        x_density: density("x_density")?,
        y_density: density("y_density")?,
        xmp_metadata: d.string("xmp_metadata")?.into_bytes(),
    })))
}

struct EncodePng(i32);
impl OpKernel for EncodePng {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let (h, w, c) = hwc(&inputs[0])?;
        let pixels = match inputs[0].dtype() {
            DType::UInt16 => PngPixels::U16(inputs[0].as_slice::<u16>()?.to_vec()),
            _ => PngPixels::U8(inputs[0].as_slice::<u8>()?.to_vec()),
        };
        outputs.push(string_scalar(png::encode_png(&pixels, h, w, c, self.0).map_err(invalid)?)?);
        Ok(())
    }
}

/// `(x - mean) * factor + mean` per image and channel, the mean over height and width.
struct AdjustContrast;
impl OpKernel for AdjustContrast {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let x = &inputs[0];
        let factor = inputs[1]
            .scalar_value::<f32>()
            .map_err(|_| invalid(format!("contrast_factor must be a scalar, got shape {:?}", inputs[1].dims())))?;
        let dims = x.dims();
        if dims.len() < 3 {
            return Err(invalid(format!("images must be at least 3-dimensional, got shape {dims:?}")));
        }
        let (h, w, c) = (dims[dims.len() - 3], dims[dims.len() - 2], dims[dims.len() - 1]);
        let per_image = h * w * c;
        let src = x.as_slice::<f32>()?;
        let mut out = src.to_vec();
        if per_image > 0 {
            for img in out.chunks_exact_mut(per_image) {
                for ch in 0..c {
                    let sum: f32 = img.iter().skip(ch).step_by(c).sum();
                    let mean = sum / (h * w) as f32;
                    for v in img.iter_mut().skip(ch).step_by(c) {
                        *v = (*v - mean) * factor + mean;
                    }
                }
            }
        }
        outputs.push(Tensor::from_vec(dims, out)?);
        Ok(())
    }
}

/// Reverses the given axes.
struct Reverse;
impl OpKernel for Reverse {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let x = &inputs[0];
        let rank = x.rank() as i64;
        let axes: Vec<i64> = match inputs[1].dtype() {
            DType::Int64 => inputs[1].as_slice::<i64>()?.to_vec(),
            _ => inputs[1].as_slice::<i32>()?.iter().map(|&a| a as i64).collect(),
        };
        let mut flip = vec![false; x.rank()];
        for &a in &axes {
            let k = if a < 0 { a + rank } else { a };
            if !(0..rank).contains(&k) {
                return Err(invalid(format!("axis {a} is out of range for a tensor of rank {rank}")));
            }
            if std::mem::replace(&mut flip[k as usize], true) {
                return Err(invalid(format!("axis {a} is given twice")));
            }
        }
        let dims = x.dims();
        let n = x.len();
        let mut strides = vec![1usize; dims.len()];
        for i in (0..dims.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * dims[i + 1];
        }
        let source = |mut o: usize| {
            let mut s = 0;
            for k in 0..dims.len() {
                let i = o / strides[k];
                o %= strides[k];
                s += if flip[k] { dims[k] - 1 - i } else { i } * strides[k];
            }
            s
        };
        if x.dtype() == DType::String {
            let src = x.as_strings()?;
            outputs.push(Tensor::from_strings(dims, (0..n).map(|o| src[source(o)].clone()).collect())?);
            return Ok(());
        }
        let size = x.dtype().size().ok_or_else(|| invalid(format!("ReverseV2 is not defined for {}", x.dtype())))?;
        crate::check_output(x.dtype(), dims)?;
        let src = x.as_bytes()?;
        outputs.push(Tensor::from_fill(x.dtype(), dims, |out| {
            for (o, chunk) in out.chunks_exact_mut(size).enumerate() {
                let s = source(o);
                chunk.copy_from_slice(&src[s * size..(s + 1) * size]);
            }
        })?);
        Ok(())
    }
}

fn register_codecs(r: &mut KernelRegistry) {
    r.register("ReadFile", "", &[], |_| Ok(Box::new(ReadFile)));
    r.register("WriteFile", "", &[], |_| Ok(Box::new(WriteFile)));
    r.register("DecodeJpeg", "", &[], |d| Ok(Box::new(DecodeJpeg(jpeg_options(d)?))));
    r.register("DecodePng", "dtype", &[DType::UInt8, DType::UInt16], |d| {
        Ok(Box::new(DecodePng(channels_attr(d, &[0, 1, 3, 4])?, d.dtype("dtype")?)))
    });
    r.register("DecodeImage", "dtype", &[DType::UInt8, DType::UInt16, DType::Float], |d| {
        Ok(Box::new(DecodeImage(channels_attr(d, &[0, 1, 3, 4])?, d.dtype("dtype")?)))
    });
    r.register("ExtractJpegShape", "output_type", &[DType::Int32, DType::Int64], |d| {
        Ok(Box::new(ExtractJpegShape(d.dtype("output_type")?)))
    });
    r.register("EncodeJpeg", "", &[], k_encode_jpeg);
    r.register("EncodePng", "T", &[DType::UInt8, DType::UInt16], |d| {
        let c = d.int("compression")?;
        if !(-1..=9).contains(&c) {
            return Err(invalid(format!("compression must be in [-1, 9], got {c}")));
        }
        Ok(Box::new(EncodePng(c as i32)))
    });
    r.register("AdjustContrastv2", "T", &[DType::Float], |_| Ok(Box::new(AdjustContrast)));
    r.register("ReverseV2", "", &[], |_| Ok(Box::new(Reverse)));
}
