//! Convolutions and friends, NHWC: `Conv2D` (im2col + the tuned GEMM, rows split across the
//! intra-op pool), `DepthwiseConv2dNative`, `MaxPool`, `AvgPool`, their backprops, and
//! `FusedBatchNormV3`/`FusedBatchNormGradV3` (in [`batch_norm`]).
mod batch_norm;
#[cfg(target_arch = "x86_64")]
mod implicit;
mod winograd;

use ferroflow_ops::defs::conv::conv_output_size;
use ferroflow_tensor::{DType, Element, Tensor};
use rayon::prelude::*;

use crate::elementwise::{visit_unary, UnaryVisitor};
use crate::epilogue::{add_bias, Activation, RowEpilogue};
use crate::matmul::{product, product_serial, GemmElement};
use crate::numeric::Float;
use crate::packed;
use crate::{invalid, Inputs, KResult, KernelContext, KernelRegistry, NodeDesc, OpKernel, Outputs};

/// Output size and leading padding of one spatial dimension.
#[derive(Clone, Copy, Debug)]
struct Axis {
    input: usize,
    output: usize,
    window: usize,
    stride: usize,
    dilation: usize,
    pad_before: usize,
}

impl Axis {
    fn new(input: usize, window: usize, stride: usize, dilation: usize, padding: &Padding, i: usize) -> KResult<Axis> {
        let explicit = match padding {
            Padding::Explicit(p) => p[i],
            _ => (0, 0),
        };
        let name = match padding {
            Padding::Same => "SAME",
            Padding::Valid => "VALID",
            Padding::Explicit(_) => "EXPLICIT",
        };
        let output = conv_output_size(input, window, stride, dilation, name, explicit).map_err(invalid)?;
        let eff = (window - 1) * dilation + 1;
        let pad_before = match padding {
            Padding::Valid => 0,
            Padding::Same => ((output.saturating_sub(1)) * stride + eff).saturating_sub(input) / 2,
            Padding::Explicit(_) => explicit.0,
        };
        Ok(Axis { input, output, window, stride, dilation, pad_before })
    }

    /// The input position read by output `o`, window tap `k` (None in the padding).
    #[inline]
    fn source(&self, o: usize, k: usize) -> Option<usize> {
        (o * self.stride + k * self.dilation).checked_sub(self.pad_before).filter(|&p| p < self.input)
    }
}

#[derive(Clone, Debug)]
enum Padding {
    Same,
    Valid,
    Explicit([(usize, usize); 2]),
}

/// The attrs every NHWC window op shares.
#[derive(Clone, Debug)]
struct Window {
    strides: [usize; 2],
    dilations: [usize; 2],
    padding: Padding,
}

fn four(d: &NodeDesc, name: &str, default: i64) -> KResult<[usize; 2]> {
    let v = d.ints(name);
    let v = if v.is_empty() { vec![default; 4] } else { v };
    if v.len() != 4 || v.iter().any(|&x| x < 1) {
        return Err(invalid(format!("{name} must be 4 positive values, got {v:?}")));
    }
    if v[0] != 1 || v[3] != 1 {
        return Err(invalid(format!("{name} in the batch and depth dimensions must be 1, got {v:?}")));
    }
    Ok([v[1] as usize, v[2] as usize])
}

impl Window {
    fn from_node(d: &NodeDesc, dilations: bool) -> KResult<Window> {
        if d.string("data_format")? != "NHWC" {
            return Err(invalid("the CPU kernel supports only data_format NHWC"));
        }
        let padding = match d.string("padding")?.as_str() {
            "SAME" => Padding::Same,
            "VALID" => Padding::Valid,
            "EXPLICIT" => {
                let p = d.ints("explicit_paddings");
                if p.len() != 8 || p.iter().any(|&x| x < 0) {
                    return Err(invalid(format!(
                        "node '{}': explicit_paddings must be 8 non-negative values, got {p:?}",
                        d.name
                    )));
                }
                Padding::Explicit([(p[2] as usize, p[3] as usize), (p[4] as usize, p[5] as usize)])
            }
            p => return Err(invalid(format!("node '{}': unknown padding '{p}'", d.name))),
        };
        let dilations = if dilations { four(d, "dilations", 1)? } else { [1, 1] };
        Ok(Window { strides: four(d, "strides", 1)?, dilations, padding })
    }

    fn axes(&self, h: usize, w: usize, kh: usize, kw: usize) -> KResult<[Axis; 2]> {
        Ok([
            Axis::new(h, kh, self.strides[0], self.dilations[0], &self.padding, 0)?,
            Axis::new(w, kw, self.strides[1], self.dilations[1], &self.padding, 1)?,
        ])
    }
}

fn nhwc(t: &Tensor, what: &str) -> KResult<[usize; 4]> {
    match t.dims() {
        &[a, b, c, d] => Ok([a, b, c, d]),
        d => Err(invalid(format!("{what} must be 4-dimensional, got shape {d:?}"))),
    }
}

/// Copies a short run element by element (a `memcpy` call costs more than a few moves).
#[inline]
fn copy<T: Copy>(dst: &mut [T], src: &[T]) {
    if dst.len() <= 16 {
        dst.iter_mut().zip(src).for_each(|(d, s)| *d = *s);
    } else {
        dst.copy_from_slice(src);
    }
}

/// Bytes of one task's block: its im2col rows (`k` wide) and the output rows the GEMM writes
/// from them (`oc` wide). Enough rows that the GEMM runs at speed and repacks the filter rarely,
/// few enough that the im2col rows are still in cache when the GEMM reads them and the output
/// rows are still in cache when the epilogue (bias, batch norm, activation) rewrites them; and
/// memory stays bounded: one block per running task, not the whole im2col matrix. Counting only
/// the im2col rows gave a 1×1 conv with k=16, oc=96 (MobileNetV2's `block_1_expand`) 6 MB output
/// blocks that the epilogue read back from DRAM.
const BLOCK_BYTES: usize = 1 << 20;
/// The fewest output rows in a block (below this the filter's repacking per block shows).
const MIN_BLOCK_ROWS: usize = 256;
/// The fewest output rows in a block when the filter is packed once (`packed::pays`): with no
/// repacking per block, blocks of 49 rows on 2 threads (batch 1's 14×14 layers) beat the
/// whole-matrix GEMM split by columns with a separate epilogue pass: ResNet50's 14×14 1×1
/// layers 2–15% faster, MobileNetV2's batch-1 step on 2 threads 7.7 → 6.8 ms (sums of node
/// times); 7×7 layers' 13-row blocks (each reading the whole filter) stay whole.
const PACKED_MIN_BLOCK_ROWS: usize = 28;

/// What runs on each block of output rows right after the GEMM wrote it, while it is in cache:
/// the block's offset (in elements) into the output, the block, and a scratch buffer reused by
/// the thread.
pub(crate) type BlockFn<'a, T> = &'a (dyn Fn(usize, &mut [T], &mut Vec<T>) + Sync);

/// Scratch buffers (im2col blocks, Winograd matrices, epilogue scratch) shared by every
/// convolution of the process: a task takes a set and gives it back, so memory is about one
/// set per task running at once, whatever the number of convolutions in the graphs.
static SCRATCH: std::sync::Mutex<Vec<Box<dyn std::any::Any + Send>>> = std::sync::Mutex::new(Vec::new());
/// Most sets [`SCRATCH`] keeps.
const SCRATCH_SETS: usize = 16;

/// A set of scratch buffers taken from [`SCRATCH`], given back when dropped.
struct Lease<S: Default + Send + 'static> {
    bufs: S,
}

impl<S: Default + Send + 'static> Lease<S> {
    fn take() -> Lease<S> {
        let found = SCRATCH.lock().ok().and_then(|mut pool| {
            let i = pool.iter().position(|b| b.is::<S>())?;
            Some(pool.swap_remove(i))
        });
        Lease { bufs: found.and_then(|b| b.downcast::<S>().ok()).map_or_else(S::default, |b| *b) }
    }
}

impl<S: Default + Send + 'static> Drop for Lease<S> {
    fn drop(&mut self) {
        if let Ok(mut pool) = SCRATCH.lock() {
            if pool.len() < SCRATCH_SETS {
                pool.push(Box::new(std::mem::take(&mut self.bufs)));
            }
        }
    }
}

/// Fills `col` (whole rows of `kh*kw*c` taps) with the im2col rows of output pixels `r0..`:
/// the window's taps in order, zero in the padding. Every element is written.
fn im2col_rows<T: Float>(x: &[T], [_n, h, w, c]: [usize; 4], [ah, aw]: [Axis; 2], r0: usize, col: &mut [T]) {
    let (oh, ow, kh, kw) = (ah.output, aw.output, ah.window, aw.window);
    let k = kh * kw * c;
    if k == 0 {
        return;
    }
    let contiguous = aw.dilation == 1;
    let (mut b, mut y, mut xo) = (r0 / (oh * ow), (r0 / ow) % oh, r0 % ow);
    for row in col.chunks_mut(k) {
        for ky in 0..kh {
            let taps = &mut row[ky * kw * c..(ky + 1) * kw * c];
            let Some(iy) = ah.source(y, ky) else {
                taps.fill(T::ZERO);
                continue;
            };
            let line = &x[(b * h + iy) * w * c..(b * h + iy + 1) * w * c];
            // With no dilation, the in-bounds taps of a window row are adjacent pixels: one
            // copy, zeros only at the edges.
            if let (true, Some(ix), Some(_)) = (contiguous, aw.source(xo, 0), aw.source(xo, kw - 1)) {
                copy(taps, &line[ix * c..(ix + kw) * c]);
                continue;
            }
            for kx in 0..kw {
                let dst = &mut taps[kx * c..(kx + 1) * c];
                match aw.source(xo, kx) {
                    Some(ix) => copy(dst, &line[ix * c..(ix + 1) * c]),
                    None => dst.fill(T::ZERO),
                }
            }
        }
        xo += 1;
        if xo == ow {
            xo = 0;
            y += 1;
            if y == oh {
                y = 0;
                b += 1;
            }
        }
    }
}

/// `Conv2D` as GEMM: output pixels are the rows of an im2col matrix times the `[k, oc]`
/// filter. The rows go in blocks (one task per block, on the intra-op pool): a task fills its
/// block's im2col rows (none for a 1×1 stride-1 convolution: the input is the matrix), runs
/// the GEMM into the block's output rows, then the epilogue on them while they are in cache.
/// Too few rows for blocks of a useful size on every thread (64 rows; 28 with the filter
/// packed once, see [`PACKED_MIN_BLOCK_ROWS`]): one im2col matrix and the GEMM split by
/// columns.
/// An output of at least [`STREAM_OUTPUT_BYTES`] is made block by block in a cached buffer
/// and streamed to memory with non-temporal stores.
pub(crate) struct Conv2D<T> {
    window: Window,
    winograd_filter: winograd::FilterCache<T>,
    /// The filter packed for [`packed::product`] (f32 on AVX-512).
    packed_filter: packed::Derived<packed::Packed<T>>,
}

/// When a 3×3 stride-1 convolution runs as Winograd (F(2×2, 3×3) or F(4×4, 3×3): see
/// [`winograd_tile`]): at least this many channels in and out, and this many 2×2 output tiles
/// in all. Measured on ResNet50 (2-core AMD EPYC),
/// per layer: batch 1's 3×3 layers of 49–784 tiles 20–40% faster than im2col + GEMM (with
/// the phased schedule on 2 threads, see `run_winograd`), batch 32's 14×14 and 7×7 layers
/// 10–40% faster; batch 1's 7×7 layers (16 tiles, K = 4,608) no faster: their transformed
/// filter, 16/9 the filter's size, is read for only 16 tiles.
const WINOGRAD_MIN_CHANNELS: usize = 16;
const WINOGRAD_MIN_TILES: usize = 32;
/// Bytes of one Winograd block's transformed input (α² matrices of tiles × channels).
const WINOGRAD_BLOCK_BYTES: usize = 1 << 20;
/// The fewest tiles per block when the transformed filter is larger than a block (so it is
/// streamed from memory by every block's α² GEMMs): on ResNet50's 7×7×512 layers at batch
/// 32, blocks of 16 tiles took 2.5× as long as blocks of 128 or more.
const WINOGRAD_STREAMED_TILES: usize = 128;

/// Winograd's output tile side for a convolution of `n` images of `out` pixels with at least
/// `channels` channels in and out: F(4×4, 3×3) (α² = 36 GEMMs of 2.25 multiplies per output
/// instead of F(2×2)'s 16 of 4) where both the channels and the 4×4 tiles are many enough to
/// pay for its larger transforms and transformed filter (2.25× F(2×2)'s, read from memory by
/// every block), F(2×2, 3×3) otherwise. Measured per layer on ResNet50 (2-core AMD EPYC):
/// at batch 32, F(4×4) took 10–40% less time on every 3×3 layer (the 7×7×512 ones 40%); at
/// batch 1 (49–196 tiles of 4×4) as long as F(2×2); on the small CNN's 14×14 layer of 32 and
/// 64 channels it was slower. Its rounding error is a few times F(2×2)'s (more additions
/// of larger terms): ResNet50's logits differ from TensorFlow's by 3.9e-6 against 3.6e-6.
fn winograd_tile(n: usize, [oh, ow]: [usize; 2], channels: usize) -> usize {
    if channels >= 64 && n * oh.div_ceil(4) * ow.div_ceil(4) >= 48 {
        4
    } else {
        2
    }
}

impl<T: GemmElement + Float> Conv2D<T> {
    pub(crate) fn new(d: &NodeDesc) -> KResult<Conv2D<T>> {
        Ok(Conv2D {
            window: Window::from_node(d, true)?,
            winograd_filter: Default::default(),
            packed_filter: Default::default(),
        })
    }

    /// The shape of the convolution's output.
    pub(crate) fn output_dims(&self, inputs: &Inputs) -> KResult<[usize; 4]> {
        let [n, h, w, _] = nhwc(&inputs[0], "input")?;
        let [kh, kw, _, oc] = nhwc(&inputs[1], "filter")?;
        let [ah, aw] = self.window.axes(h, w, kh, kw)?;
        Ok([n, ah.output, aw.output, oc])
    }

    /// The convolution of `inputs[0]` by `inputs[1]`, with `epilogue` run on each block of
    /// output rows.
    pub(crate) fn run(&self, ctx: &KernelContext, inputs: &Inputs, epilogue: Option<BlockFn<T>>) -> KResult<Tensor> {
        Ok(self.run_into(ctx, inputs, epilogue, None)?.expect("an unpooled convolution always runs"))
    }

    /// The convolution, its epilogue, then a max pool of `[ph, pw]` windows (VALID, strides
    /// equal to the window) on each block while it is in cache: the convolution's own output
    /// is never written to memory. `None` where the algorithm's blocks cannot be whole pooled
    /// rows (the caller pools the whole output instead): only the Winograd blocks with tiles
    /// of whole windows and the direct convolution pool block by block, on outputs whose
    /// sides the window divides.
    pub(crate) fn run_pooled(
        &self,
        ctx: &KernelContext,
        inputs: &Inputs,
        epilogue: Option<BlockFn<T>>,
        pool: [usize; 2],
    ) -> KResult<Option<Tensor>> {
        self.run_into(ctx, inputs, epilogue, Some(pool))
    }

    fn run_into(
        &self,
        ctx: &KernelContext,
        inputs: &Inputs,
        epilogue: Option<BlockFn<T>>,
        pool: Option<[usize; 2]>,
    ) -> KResult<Option<Tensor>> {
        let [n, h, w, c] = nhwc(&inputs[0], "input")?;
        let [kh, kw, fc, oc] = nhwc(&inputs[1], "filter")?;
        if fc != c {
            return Err(invalid(format!(
                "input depth {c} does not match filter depth {fc} (grouped convolutions are not supported)"
            )));
        }
        let [ah, aw] = self.window.axes(h, w, kh, kw)?;
        let rows = n * ah.output * aw.output;
        let k = kh * kw * c;
        let (x, f) = (inputs[0].as_slice::<T>()?, inputs[1].as_slice::<T>()?);
        let winograd = (kh == 3
            && kw == 3
            && [ah.stride, aw.stride, ah.dilation, aw.dilation] == [1; 4]
            && c.min(oc) >= WINOGRAD_MIN_CHANNELS
            && n * ah.output.div_ceil(2) * aw.output.div_ceil(2) >= WINOGRAD_MIN_TILES)
            .then(|| winograd::Plan {
                n,
                h,
                w,
                c,
                k: oc,
                axes: [ah, aw],
                m: winograd_tile(n, [ah.output, aw.output], c.min(oc)),
            });
        let direct = (c <= DIRECT_MAX_CHANNELS && k <= DIRECT_MAX_K) || implicit_applies::<T>(c, k, oc);
        if let Some([ph, pw]) = pool {
            // Blocks of whole pooled rows: the window divides the output's sides (and
            // Winograd's tiles), and neither side is empty.
            let divides = ph > 0
                && pw > 0
                && ah.output.is_multiple_of(ph)
                && aw.output.is_multiple_of(pw)
                && rows > 0
                && oc > 0
                && match &winograd {
                    Some(p) => ah.output.is_multiple_of(p.m) && p.m.is_multiple_of(ph),
                    None => direct,
                };
            if !divides {
                return Ok(None);
            }
            let mut out = Tensor::for_overwrite(T::DTYPE, &[n, ah.output / ph, aw.output / pw, oc])?;
            let o = out.as_mut_slice::<T>()?;
            let done = match &winograd {
                Some(plan) => self.run_winograd(ctx, plan, x, &inputs[1], (o, pool), epilogue)?,
                None => {
                    self.run_direct(ctx, (x, [n, h, w, c], [ah, aw]), (f, kh, kw, oc), o, epilogue, pool);
                    true
                }
            };
            return Ok(done.then_some(out));
        }
        // Every element is written (by the GEMM, Winograd's output transform).
        let mut out = Tensor::for_overwrite(T::DTYPE, &[n, ah.output, aw.output, oc])?;
        let o = out.as_mut_slice::<T>()?;
        if rows == 0 || oc == 0 {
            return Ok(Some(out));
        }
        if let Some(plan) = winograd {
            self.run_winograd(ctx, &plan, x, &inputs[1], (o, None), epilogue)?;
            return Ok(Some(out));
        }
        if direct {
            self.run_direct(ctx, (x, [n, h, w, c], [ah, aw]), (f, kh, kw, oc), o, epilogue, None);
            return Ok(Some(out));
        }
        let pointwise = kh == 1
            && kw == 1
            && ah.stride == 1
            && aw.stride == 1
            && ah.pad_before == 0
            && aw.pad_before == 0
            && ah.output == h
            && aw.output == w;
        let threads = ctx.threads();
        let mut block = (BLOCK_BYTES / ((k + oc).max(1) * std::mem::size_of::<T>())).max(MIN_BLOCK_ROWS).min(rows);
        if threads > 1 && rows.div_ceil(block) < 2 * threads {
            block = rows.div_ceil(2 * threads);
        }
        let dims = [n, h, w, c];
        let block_pays = packed::pays::<T>(block, oc);
        let whole = threads > 1 && block < MIN_BLOCK_ROWS / 4 && !(block >= PACKED_MIN_BLOCK_ROWS && block_pays);
        let packed = (if whole { packed::pays::<T>(rows, oc) } else { block_pays })
            .then(|| self.packed_filter.get(&inputs[1], f.as_ptr(), 0, || packed::Packed::new(f, k, oc, oc, 1)));
        if whole {
            // Few rows (late layers at batch 1): the whole im2col matrix is small; the GEMM
            // splits its columns across the pool. (Blocks stay faster otherwise, even for a
            // small matrix on one thread: measured on ResNet50 at batch 1 and a small CNN, one
            // whole-matrix GEMM with a separate epilogue pass was 25–65% slower.)
            crate::check_output(T::DTYPE, &[rows, k])?;
            let mut lease = Lease::<(Vec<T>, Vec<T>)>::take();
            let a: &[T] = if pointwise {
                x
            } else {
                let col = &mut lease.bufs.0;
                col.resize(rows * k, T::ZERO);
                im2col_rows(x, dims, [ah, aw], 0, col);
                col
            };
            match &packed {
                Some(b) => packed::product(Some(ctx), rows, a, k, b, o),
                None => product(ctx, (rows, oc, k), (a, k, 1), (f, oc, 1), o),
            }
            if let Some(e) = epilogue {
                let per_task = rows.div_ceil(2 * threads) * oc;
                ctx.install(|| {
                    o.par_chunks_mut(per_task)
                        .enumerate()
                        .for_each_init(Vec::new, |scratch, (i, chunk)| e(i * per_task, chunk, scratch))
                });
            }
            return Ok(Some(out));
        }
        crate::check_output(T::DTYPE, &[block, k])?;
        let stream = std::mem::size_of_val(o) >= STREAM_OUTPUT_BYTES && streaming_pays();
        let task = |lease: &mut Lease<(Vec<T>, Vec<T>, Vec<T>)>, (i, out_rows): (usize, &mut [T])| {
            let (r0, m) = (i * block, out_rows.len() / oc);
            let (col, scratch, stage) = (&mut lease.bufs.0, &mut lease.bufs.1, &mut lease.bufs.2);
            let a: &[T] = if pointwise {
                &x[r0 * k..(r0 + m) * k]
            } else {
                col.resize(m * k, T::ZERO);
                im2col_rows(x, dims, [ah, aw], r0, &mut col[..m * k]);
                &col[..m * k]
            };
            let compute = |dst: &mut [T], scratch: &mut Vec<T>| {
                match &packed {
                    Some(b) => packed::product(None, m, a, k, b, dst),
                    None => product_serial((m, oc, k), (a, k, 1), (f, oc, 1), dst),
                }
                if let Some(e) = epilogue {
                    e(r0 * oc, dst, scratch);
                }
            };
            if stream {
                stage.resize(m * oc, T::ZERO);
                compute(&mut stage[..m * oc], scratch);
                stream_copy(out_rows, &stage[..m * oc]);
            } else {
                compute(out_rows, scratch);
            }
        };
        if threads > 1 && rows > block {
            ctx.install(|| o.par_chunks_mut(block * oc).enumerate().for_each_init(Lease::take, task));
        } else {
            let mut lease = Lease::<(Vec<T>, Vec<T>, Vec<T>)>::take();
            o.chunks_mut(block * oc).enumerate().for_each(|b| task(&mut lease, b));
        }
        Ok(Some(out))
    }
}

/// Copies `src` to `dst` with non-temporal stores where the CPU has AVX-512F (the lines go
/// to memory without being read first or kept in the caches).
fn stream_copy<T: Copy>(dst: &mut [T], src: &[T]) {
    assert_eq!(dst.len(), src.len());
    #[cfg(target_arch = "x86_64")]
    if crate::isa::has_avx512f() {
        // SAFETY: the slices have the same length in bytes; AVX-512F was detected.
        unsafe { stream_bytes(dst.as_mut_ptr() as *mut u8, src.as_ptr() as *const u8, std::mem::size_of_val(src)) };
        return;
    }
    dst.copy_from_slice(src);
}

/// # Safety
/// `dst` and `src` hold `len` bytes and do not overlap; the CPU has AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn stream_bytes(dst: *mut u8, src: *const u8, len: usize) {
    use std::arch::x86_64::*;
    let head = dst.align_offset(64).min(len);
    std::ptr::copy_nonoverlapping(src, dst, head);
    let mut at = head;
    while at + 64 <= len {
        _mm512_stream_si512(dst.add(at) as *mut __m512i, _mm512_loadu_si512(src.add(at) as *const __m512i));
        at += 64;
    }
    std::ptr::copy_nonoverlapping(src.add(at), dst.add(at), len - at);
    _mm_sfence();
}

/// Output bytes from which a convolution's blocks are made in a cached buffer and streamed to
/// the output with non-temporal stores (no read of each line before it is written, no
/// eviction of the caches' other data). Measured at batch 32 on one thread: MobileNetV2's
/// 154 MB `block_1_expand` output 30.9 -> 22.4 ms and the model 3% faster on an Intel
/// Xeon with AVX-512, but 20–40% slower on a 2-core AMD EPYC; ResNet50's 103 MB outputs (each
/// read twice after: by the next convolution and the residual join) 2% slower on the Xeon,
/// so they stay below. Only on Intel CPUs (see [`streaming_pays`]).
const STREAM_OUTPUT_BYTES: usize = 128 << 20;

/// Whether streaming large outputs ([`STREAM_OUTPUT_BYTES`]) pays on this CPU: an Intel one
/// with AVX-512F (measured faster there, slower on AMD's Zen 4).
fn streaming_pays() -> bool {
    crate::isa::intel_avx512()
}

/// Whether the implicit GEMM ([`implicit`]) runs the convolution (few input channels, a
/// large window, f32 on AVX-512F).
fn implicit_applies<T: 'static>(c: usize, k: usize, oc: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    return implicit::applies::<T>(c, k, oc);
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Direct convolution where the input has at most this many channels and a window at most
/// this many taps in all (`kh·kw·c`): a first layer on gray or RGB images. im2col + GEMM there
/// multiplies matrices of K = 9–27, too short for the GEMM's packing to pay; the small CNN's
/// 3×3 layer on 28×28×1 at batch 32 took 0.71 ms that way (20 GFLOP/s).
const DIRECT_MAX_CHANNELS: usize = 4;
const DIRECT_MAX_K: usize = 36;
/// Bytes of output per block of the direct convolution (the epilogue runs on it in cache).
const DIRECT_BLOCK_BYTES: usize = 1 << 18;

impl<T: GemmElement + Float> Conv2D<T> {
    /// The direct convolution (few input channels, see [`DIRECT_MAX_K`]): blocks of output
    /// rows, one task per block on the intra-op pool, each block's epilogue right after it.
    fn run_direct(
        &self,
        ctx: &KernelContext,
        (x, dims, axes): (&[T], [usize; 4], [Axis; 2]),
        (f, kh, kw, oc): (&[T], usize, usize, usize),
        o: &mut [T],
        epilogue: Option<BlockFn<T>>,
        pool: Option<[usize; 2]>,
    ) {
        let [ph, pw] = pool.unwrap_or([1, 1]);
        let ow = axes[1].output;
        // Output pixels (of the convolution) in all, and per block: whole groups of ph output
        // rows when pooled.
        let rows = dims[0] * axes[0].output * ow;
        let group = if pool.is_some() { ph * ow } else { 1 };
        let threads = ctx.threads();
        let mut block = (DIRECT_BLOCK_BYTES / (oc * std::mem::size_of::<T>())).clamp(1, rows);
        if threads > 1 {
            block = block.min(rows.div_ceil(2 * threads));
        }
        if threads > 1 {
            // A whole number of blocks per thread (ResNet50's first layer at batch 1 made 13
            // blocks for 2 threads).
            block = rows.div_ceil(rows.div_ceil(block).div_ceil(threads) * threads);
        }
        let block = block.div_ceil(group) * group;
        // Elements of `o` per block.
        let per_block = block * oc / (ph * pw);
        let task = |bufs: &mut (Vec<T>, Vec<T>), (i, dst): (usize, &mut [T])| {
            let (scratch, stage) = (&mut bufs.0, &mut bufs.1);
            let conv = block_target(dst, stage, pool);
            #[cfg(target_arch = "x86_64")]
            if implicit_applies::<T>(dims[3], kh * kw * dims[3], oc) {
                // SAFETY: `applies` holds only for f32: the same slices retyped.
                let (x, f, conv) = unsafe {
                    (
                        std::slice::from_raw_parts(x.as_ptr() as *const f32, x.len()),
                        std::slice::from_raw_parts(f.as_ptr() as *const f32, f.len()),
                        std::slice::from_raw_parts_mut(conv.as_mut_ptr() as *mut f32, conv.len()),
                    )
                };
                implicit::rows(x, dims, axes, f, i * block, conv);
            } else {
                direct_rows(x, dims, axes, (f, kh, kw), i * block, conv);
            }
            #[cfg(not(target_arch = "x86_64"))]
            direct_rows(x, dims, axes, (f, kh, kw), i * block, conv);
            if let Some(e) = epilogue {
                e(i * block * oc, conv, scratch);
            }
            pool_from_stage(stage, dst, ow, oc, pool);
        };
        if threads > 1 && rows > block {
            ctx.install(|| o.par_chunks_mut(per_block).enumerate().for_each_init(Default::default, task));
        } else {
            let mut bufs = Default::default();
            o.chunks_mut(per_block).enumerate().for_each(|b| task(&mut bufs, b));
        }
    }
}

/// Where a block of a convolution is made: its part of the output, or (with `pool`) the
/// stage buffer, `ph·pw` times as large, that [`pool_from_stage`] pools into that part.
fn block_target<'a, T: Float>(dst: &'a mut [T], stage: &'a mut Vec<T>, pool: Option<[usize; 2]>) -> &'a mut [T] {
    match pool {
        Some([ph, pw]) => {
            let len = dst.len() * ph * pw;
            stage.resize(len, T::ZERO);
            &mut stage[..len]
        }
        None => dst,
    }
}

/// With `pool`, max-pools the block [`block_target`] staged (rows of `ow` pixels of `k`
/// channels) into `dst`.
fn pool_from_stage<T: Float>(stage: &[T], dst: &mut [T], ow: usize, k: usize, pool: Option<[usize; 2]>) {
    if let Some([ph, pw]) = pool {
        max_pool_block(&stage[..dst.len() * ph * pw], ow, k, [ph, pw], dst);
    }
}

/// Max-pools `src` (whole groups of `ph` rows of `ow` pixels of `k` channels) by windows of
/// `ph`×`pw` pixels at strides of the window (VALID; `ow` a multiple of `pw`) into `dst`: each
/// output the first tap, then the later ones in `MaxPool`'s order (rows, then columns) with
/// its rule (a larger value or a NaN replaces), so the bits are `MaxPool`'s.
fn max_pool_block<T: Float>(src: &[T], ow: usize, k: usize, [ph, pw]: [usize; 2], dst: &mut [T]) {
    let pooled_w = ow / pw;
    let mut taps: Vec<&[T]> = Vec::with_capacity(ph * pw);
    crate::isa::widest(
        #[inline(always)]
        || {
            for (pr, row) in dst.chunks_mut(pooled_w * k).enumerate() {
                for (pc, px) in row.chunks_mut(k).enumerate() {
                    taps.clear();
                    for i in 0..ph {
                        for j in 0..pw {
                            taps.push(&src[((pr * ph + i) * ow + pc * pw + j) * k..][..k]);
                        }
                    }
                    max_of_taps(px, &taps);
                }
            }
        },
    );
}

/// `px` = the lane-wise maximum of `taps` (each at least as long as `px`) in their order: the
/// first tap, then each later one where it is larger or NaN (`MaxPool`'s rule: NaN
/// propagates), 16 lanes at a time in registers and stored once (a pixel updated in memory
/// tap by tap stalled on every load after a masked store).
#[inline(always)]
fn max_of_taps<T: Float>(px: &mut [T], taps: &[&[T]]) {
    const L: usize = 16;
    let Some((first, rest)) = taps.split_first() else { return };
    let k = px.len();
    let mut ch = 0;
    while ch + L <= k {
        let mut acc: [T; L] = first[ch..ch + L].try_into().expect("L lanes");
        for t in rest {
            let s: &[T; L] = t[ch..ch + L].try_into().expect("L lanes");
            acc = std::array::from_fn(|l| if s[l] > acc[l] || s[l].is_nan() { s[l] } else { acc[l] });
        }
        px[ch..ch + L].copy_from_slice(&acc);
        ch += L;
    }
    for c in ch..k {
        let mut v = first[c];
        for t in rest {
            if t[c] > v || t[c].is_nan() {
                v = t[c];
            }
        }
        px[c] = v;
    }
}

/// Output rows `r0..` (as many as `dst` holds, `oc` values each) of a direct convolution: each
/// output value the sum over the window's taps in the filter's order (rows, columns, input
/// channels; padding left out) of input × filter, accumulated from zero in registers, output
/// channels in blocks of 32, 16, 8 and 4, then one at a time. The taps of an output row's interior
/// pixels (whole window inside the input's columns) differ only by the pixel's input offset, so
/// they are listed once per row.
fn direct_rows<T: Float>(
    x: &[T],
    [_, h, w, c]: [usize; 4],
    [ah, aw]: [Axis; 2],
    (f, kh, kw): (&[T], usize, usize),
    r0: usize,
    dst: &mut [T],
) {
    let oc = f.len() / (kh * kw * c);
    // Interior output columns: every tap's input column exists.
    let first = (0..aw.output).find(|&ox| (0..kw).all(|kx| aw.source(ox, kx).is_some())).unwrap_or(aw.output);
    let last = (first..aw.output).take_while(|&ox| (0..kw).all(|kx| aw.source(ox, kx).is_some())).count() + first;
    crate::isa::widest(
        #[inline(always)]
        || {
            // (input offset, filter offset) per tap: of the row's interior pixels relative to
            // the pixel's first input column, or of one border pixel.
            let mut row_taps: Vec<(usize, usize)> = Vec::with_capacity(kh * kw * c);
            let mut taps: Vec<(usize, usize)> = Vec::with_capacity(kh * kw * c);
            let mut r = r0;
            let end = r0 + dst.len() / oc;
            while r < end {
                let (ox0, oy, b) = (r % aw.output, (r / aw.output) % ah.output, r / (aw.output * ah.output));
                let ox1 = (ox0 + end - r).min(aw.output);
                row_taps.clear();
                for ky in 0..kh {
                    let Some(iy) = ah.source(oy, ky) else { continue };
                    for kx in 0..kw {
                        let (xo, fo) = (((b * h + iy) * w + kx * aw.dilation) * c, (ky * kw + kx) * c * oc);
                        row_taps.extend((0..c).map(|ci| (xo + ci, fo + ci * oc)));
                    }
                }
                let mut ox = ox0;
                while ox < ox1 {
                    let at = (r - r0 + ox - ox0) * oc;
                    let shift = |ox: usize| (ox * aw.stride - aw.pad_before) * c;
                    if (first..last).contains(&ox) && ox + DIRECT_PIXELS <= last.min(ox1) {
                        let pxs = &mut dst[at..at + DIRECT_PIXELS * oc];
                        direct_pixels(pxs, x, f, &row_taps, std::array::from_fn(|j| shift(ox + j)));
                        ox += DIRECT_PIXELS;
                        continue;
                    }
                    let px = &mut dst[at..at + oc];
                    ox += 1;
                    if (first..last).contains(&(ox - 1)) {
                        tap_sums::<T, true>(px, x, f, &row_taps, shift(ox - 1));
                        continue;
                    }
                    let ox = ox - 1;
                    taps.clear();
                    for ky in 0..kh {
                        let Some(iy) = ah.source(oy, ky) else { continue };
                        for kx in 0..kw {
                            let Some(ix) = aw.source(ox, kx) else { continue };
                            let (xo, fo) = (((b * h + iy) * w + ix) * c, (ky * kw + kx) * c * oc);
                            taps.extend((0..c).map(|ci| (xo + ci, fo + ci * oc)));
                        }
                    }
                    tap_sums::<T, true>(px, x, f, &taps, 0);
                }
                r += ox1 - ox0;
            }
        },
    )
}

/// Runs `$body` for channel blocks of 32, 16, 8 and 4 lanes in turn (the const `$l` in it),
/// advancing `$cb` by a block while one fits below `$n`; the channels left (fewer than 4) are
/// the caller's. The narrow blocks are for narrow layers: a Keras CNN's first layer of 8
/// channels ran one channel at a time, 2.8 ms of its 3 ms step at batch 32.
macro_rules! lane_blocks {
    ($cb:ident < $n:expr, |$l:ident| $body:expr) => {
        lane_blocks!(@ $cb < $n, $l, $body, 32 16 8 4)
    };
    (@ $cb:ident < $n:expr, $l:ident, $body:expr, $($lanes:literal)*) => {
        $({
            const $l: usize = $lanes;
            while $cb + $l <= $n {
                $body;
                $cb += $l;
            }
        })*
    };
}

/// Pixels the direct convolution computes together (their sums are independent chains of
/// additions, in flight at once, and share each filter load).
const DIRECT_PIXELS: usize = 4;

/// `DIRECT_PIXELS` consecutive interior pixels (`pxs`, `oc` values each) of the direct
/// convolution, pixel `j`'s inputs at the taps' offsets + `shifts[j]`.
#[inline(always)]
fn direct_pixels<T: Float>(pxs: &mut [T], x: &[T], f: &[T], taps: &[(usize, usize)], shifts: [usize; DIRECT_PIXELS]) {
    let oc = pxs.len() / DIRECT_PIXELS;
    let mut cb = 0;
    lane_blocks!(cb < oc, |L| direct_block::<T, L>(pxs, x, f, taps, shifts, cb));
    for (j, &shift) in shifts.iter().enumerate() {
        for ch in cb..oc {
            let mut a = T::ZERO;
            for &(s, t) in taps {
                a = a + x[s + shift] * f[t + ch];
            }
            pxs[j * oc + ch] = a;
        }
    }
}

/// Channels `cb..cb + L` of [`direct_pixels`]' pixels: `DIRECT_PIXELS × L` sums in registers
/// (at 32 lanes, eight independent chains of additions in flight), each tap's filter vector
/// loaded once for all the pixels; the loads unchecked after one check of every tap's extent.
#[inline(always)]
fn direct_block<T: Float, const L: usize>(
    pxs: &mut [T],
    x: &[T],
    f: &[T],
    taps: &[(usize, usize)],
    shifts: [usize; DIRECT_PIXELS],
    cb: usize,
) {
    let far = shifts.iter().copied().max().unwrap_or(0);
    assert!(taps.iter().all(|&(s, t)| s + far < x.len() && t + cb + L <= f.len()), "taps inside the operands");
    let (xp, fp) = (x.as_ptr(), f.as_ptr());
    let oc = pxs.len() / DIRECT_PIXELS;
    let mut acc = [[T::ZERO; L]; DIRECT_PIXELS];
    for &(s, t) in taps {
        // SAFETY: `t + cb + L <= f.len()` and `s + shifts[j] < x.len()` (asserted above).
        let fs: [T; L] = unsafe { std::ptr::read_unaligned(fp.add(t + cb) as *const [T; L]) };
        for (a, &shift) in acc.iter_mut().zip(&shifts) {
            let xv = unsafe { *xp.add(s + shift) };
            for l in 0..L {
                a[l] = a[l] + xv * fs[l];
            }
        }
    }
    for (j, a) in acc.iter().enumerate() {
        pxs[j * oc + cb..j * oc + cb + L].copy_from_slice(a);
    }
}

impl<T: GemmElement + Float> Conv2D<T> {
    /// Winograd F(m×m, 3×3): blocks of whole tile rows (so each block's output is one
    /// contiguous range), one task per block on the intra-op pool, the epilogue on each block
    /// right after its output transform. With too few tiles for two blocks per thread,
    /// smaller blocks while each keeps [`WINOGRAD_MIN_TILES`], else phase by phase
    /// ([`winograd::phased`]): on 2 threads batch-1 ResNet50's 28×28 and 14×14 3×3 layers
    /// (49 tiles in all) took 35–45% less time than with blocks of a few tile rows, whose
    /// α² GEMMs each were tiny (measured when the `gemm` crate repacked the transformed filter
    /// per GEMM; blocks of 14 tiles were still slower with it packed once).
    /// With `pool`, `o` is the max-pooled output: each block is made in a scratch buffer
    /// and pooled from there (false, with nothing done, where the schedule is phased).
    fn run_winograd(
        &self,
        ctx: &KernelContext,
        p: &winograd::Plan,
        x: &[T],
        filter: &Tensor,
        (o, pool): (&mut [T], Option<[usize; 2]>),
        epilogue: Option<BlockFn<T>>,
    ) -> KResult<bool> {
        let (th, tw) = p.tiles();
        let total = p.n * th;
        let size = std::mem::size_of::<T>();
        let lo = if p.count() * p.c * p.k * size > WINOGRAD_BLOCK_BYTES { WINOGRAD_STREAMED_TILES } else { 16 };
        let tiles = (WINOGRAD_BLOCK_BYTES / (p.count() * p.c.max(p.k) * size)).clamp(lo, 512);
        let mut per_block = (tiles / tw).max(1);
        let threads = ctx.threads();
        let mut phased = false;
        if threads > 1 && total.div_ceil(per_block) < 2 * threads {
            // Too few tiles for two blocks per thread: smaller blocks while they keep enough
            // tiles, else phase by phase. With the transformed filter packed once, blocks of
            // 49 tiles (batch 1's 56×56 layers, F(4×4)) took 10–30% less time than phases;
            // blocks of 14 were slower.
            let even = total.div_ceil(2 * threads);
            if even * tw >= WINOGRAD_MIN_TILES {
                per_block = even;
            } else {
                phased = true;
            }
        }
        if phased && pool.is_some() {
            // Phases transform every tile at once: no blocks to pool in cache.
            return Ok(false);
        }
        // The rows of each α² product: every tile when phased, a block's otherwise.
        let rows = if phased { total * tw } else { per_block.min(total) * tw };
        let u = self.winograd_filter.get(filter, (p.c, p.k), p.m, rows)?;
        let u = &*u;
        if phased {
            let mut lease = Lease::<(winograd::Scratch<T>, Vec<T>)>::take();
            let finish = |start: usize, dst: &mut [T], scratch: &mut Vec<T>| {
                if let Some(e) = epilogue {
                    e(start, dst, scratch);
                }
            };
            ctx.install(|| winograd::phased(p, x, u, o, &mut lease.bufs.0, 2 * threads, &finish));
            return Ok(true);
        }
        // Each block's part of `o`: its output range, or (pooled: the output's sides are
        // multiples of the tile, the tile of the window) its pooled rows.
        let [ph, pw] = pool.unwrap_or([1, 1]);
        let mut blocks = Vec::with_capacity(total.div_ceil(per_block));
        let mut rest = o;
        let mut r0 = 0;
        while r0 < total {
            let r1 = (r0 + per_block).min(total);
            let (start, end) = p.output_range(r0, r1);
            let (head, tail) = std::mem::take(&mut rest).split_at_mut((end - start) / (ph * pw));
            blocks.push((r0, r1, start, head));
            rest = tail;
            r0 = r1;
        }
        let ow = p.axes[1].output;
        let task = |lease: &mut Lease<(winograd::Scratch<T>, Vec<T>, Vec<T>)>,
                    (r0, r1, start, dst): (usize, usize, usize, &mut [T])| {
            let (scratch, epi, stage) = (&mut lease.bufs.0, &mut lease.bufs.1, &mut lease.bufs.2);
            let conv = block_target(dst, stage, pool);
            winograd::block(p, x, u, (r0, r1), conv, scratch);
            if let Some(e) = epilogue {
                e(start, conv, epi);
            }
            pool_from_stage(stage, dst, ow, p.k, pool);
        };
        if threads > 1 && blocks.len() > 1 {
            ctx.install(|| blocks.into_par_iter().for_each_init(Lease::take, task));
        } else {
            let mut lease = Lease::take();
            blocks.into_iter().for_each(|b| task(&mut lease, b));
        }
        Ok(true)
    }
}

impl<T: GemmElement + Float> OpKernel for Conv2D<T> {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        outputs.push(self.run(ctx, inputs, None)?);
        Ok(())
    }
}

/// The shapes of a depthwise convolution: the NHWC input, the window, the channel multiplier
/// and the output axes.
struct Geometry {
    input: [usize; 4],
    window: [usize; 2],
    multiplier: usize,
    axes: [Axis; 2],
}

impl Window {
    /// Checks a depthwise convolution's input and filter (`[kh, kw, c, m]`) against each other.
    fn depthwise(&self, inputs: &Inputs) -> KResult<Geometry> {
        let [n, h, w, c] = nhwc(&inputs[0], "input")?;
        let [kh, kw, fc, m] = nhwc(&inputs[1], "filter")?;
        if fc != c {
            return Err(invalid(format!("input depth {c} does not match filter depth {fc}")));
        }
        Ok(Geometry { input: [n, h, w, c], window: [kh, kw], multiplier: m, axes: self.axes(h, w, kh, kw)? })
    }
}

struct Depthwise<T> {
    window: Window,
    _t: std::marker::PhantomData<T>,
}

impl<T: Float> OpKernel for Depthwise<T> {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let Geometry { input: [n, h, w, c], window: [kh, kw], multiplier: m, axes: [ah, aw] } =
            self.window.depthwise(inputs)?;
        let (oh, ow, oc) = (ah.output, aw.output, c * m);
        // One filter per channel writes every element (`depthwise_m1`); the general loop below
        // accumulates into zeros.
        let mut out = if m == 1 { Tensor::for_overwrite } else { Tensor::zeros }(T::DTYPE, &[n, oh, ow, oc])?;
        if m == 1 {
            let (x, f) = (inputs[0].as_slice::<T>()?, inputs[1].as_slice::<T>()?);
            depthwise_m1(ctx, (x, f), [n, h, w, c], [kh, kw], [ah, aw], out.as_mut_slice::<T>()?, None);
            outputs.push(out);
            return Ok(());
        }
        let (x, f) = (inputs[0].as_slice::<T>()?, inputs[1].as_slice::<T>()?);
        let row = |(r, dst): (usize, &mut [T])| {
            let (b, y) = (r / oh, r % oh);
            for xo in 0..ow {
                let px = &mut dst[xo * oc..(xo + 1) * oc];
                for ky in 0..kh {
                    let Some(iy) = ah.source(y, ky) else { continue };
                    for kx in 0..kw {
                        let Some(ix) = aw.source(xo, kx) else { continue };
                        let src = &x[((b * h + iy) * w + ix) * c..][..c];
                        let taps = &f[(ky * kw + kx) * oc..][..oc];
                        for ci in 0..c {
                            for mi in 0..m {
                                px[ci * m + mi] = px[ci * m + mi] + src[ci] * taps[ci * m + mi];
                            }
                        }
                    }
                }
            }
        };
        let o = out.as_mut_slice::<T>()?;
        if ow * oc > 0 {
            if ctx.threads() > 1 && n * oh > 1 {
                ctx.install(|| o.par_chunks_mut(ow * oc).enumerate().for_each(row));
            } else {
                o.chunks_mut(ow * oc).enumerate().for_each(row);
            }
        }
        outputs.push(out);
        Ok(())
    }
}

/// `DepthwiseConv2dNative` with one filter per channel (MobileNet's case): each output pixel's
/// channels in blocks of 32 and 16 accumulated in registers over the window's taps (in the
/// taps' order, from zero, as the general kernel does) and stored once; output rows split over
/// the intra-op pool; AVX-512 or AVX2 when the CPU has it. `epilogue` runs on each finished row while it is
/// in cache. Each row prefetches the next row's new input rows and its output a few lines at
/// a time.
fn depthwise_m1<T: Float>(
    ctx: &KernelContext,
    (x, f): (&[T], &[T]),
    [_n, h, w, c]: [usize; 4],
    [kh, kw]: [usize; 2],
    [ah, aw]: [Axis; 2],
    o: &mut [T],
    epilogue: Option<BlockFn<T>>,
) {
    let (oh, ow) = (ah.output, aw.output);
    let rows_of = |r: usize| -> Vec<(usize, usize)> {
        let (b, y) = (r / oh, r % oh);
        (0..kh).filter_map(|ky| Some((((b * h + ah.source(y, ky)?) * w) * c, ky * kw * c))).collect()
    };
    let row = |scratch: &mut Vec<T>, (r, dst): (usize, &mut [T])| {
        let rows = rows_of(r);
        // The next row's new input rows and its output, from memory while this row computes:
        // the channel blocks below read and write pixels a block apart, a stride the
        // hardware prefetchers miss (at batch 32 the rows come from DRAM).
        // Spread over the row's blocks of pixels (at once, they stall it): 10–20% off
        // MobileNetV2's 56×56×144 layer at batch 32.
        let mut ahead = crate::isa::Ahead::none();
        for (start, _) in rows_of(r + 1) {
            if rows.iter().all(|&(s, _)| s != start) {
                ahead.add(x.as_ptr().wrapping_add(start), w * c);
            }
        }
        ahead.add(dst.as_ptr().wrapping_add(dst.len()), dst.len());
        depthwise_row(dst, (x, f), &rows, (c, kw), aw, &mut ahead);
        if let Some(e) = epilogue {
            e(r * ow * c, dst, scratch);
        }
    };
    if ow * c == 0 {
        return;
    }
    if ctx.threads() > 1 && o.len() / (ow * c) > 1 {
        ctx.install(|| o.par_chunks_mut(ow * c).enumerate().for_each_init(Vec::new, row));
    } else {
        let mut scratch = Vec::new();
        o.chunks_mut(ow * c).enumerate().for_each(|r| row(&mut scratch, r));
    }
}

/// One output row of a depthwise convolution: for each pixel, `px[ch] = Σ x[s + ch] * f[t + ch]`
/// over its window's taps (input offset, filter offset), from `rows` (each window row's input
/// row offset and filter row offset, padding rows left out); AVX-512 or AVX2 where the CPU has
/// them (chosen once per row).
fn depthwise_row<T: Float>(
    dst: &mut [T],
    xf: (&[T], &[T]),
    rows: &[(usize, usize)],
    ck: (usize, usize),
    aw: Axis,
    ahead: &mut crate::isa::Ahead,
) {
    crate::isa::widest(
        #[inline(always)]
        || depthwise_row_impl(dst, xf, rows, ck, aw, ahead),
    )
}

#[inline(always)]
fn depthwise_row_impl<T: Float>(
    dst: &mut [T],
    (x, f): (&[T], &[T]),
    rows: &[(usize, usize)],
    (c, kw): (usize, usize),
    aw: Axis,
    ahead: &mut crate::isa::Ahead,
) {
    let ow = dst.len() / c.max(1);
    // The pixels whose whole window is inside the row (all but the padded edges).
    let inside = |xo: &usize| aw.source(*xo, 0).is_some() && aw.source(*xo, kw - 1).is_some();
    let lo = (0..ow).find(inside).unwrap_or(ow);
    let hi = (lo..ow).rfind(inside).map_or(lo, |xo| xo + 1);
    let fast = rows.len() == 3 && kw == 3;
    if fast && hi > lo && c > 0 {
        let ix0 = aw.source(lo, 0).expect("an inside pixel");
        let taps: [(usize, usize); 9] = std::array::from_fn(|t| {
            let ((xrow, frow), kx) = (rows[t / 3], t % 3);
            (xrow + (ix0 + kx * aw.dilation) * c, frow + kx * c)
        });
        window_sums::<T, 9>(&mut dst[lo * c..hi * c], x, f, &taps, c, aw.stride * c, ahead);
    }
    let mut taps: Vec<(usize, usize)> = Vec::with_capacity(rows.len() * kw);
    for (xo, px) in dst.chunks_exact_mut(c).enumerate() {
        if fast && (lo..hi).contains(&xo) {
            continue;
        }
        taps.clear();
        for &(xrow, frow) in rows {
            for kx in 0..kw {
                if let Some(ix) = aw.source(xo, kx) {
                    taps.push((xrow + ix * c, frow + kx * c));
                }
            }
        }
        tap_sums::<T, false>(px, x, f, &taps, 0);
    }
    ahead.advance(usize::MAX);
}

/// Consecutive output pixels of a depthwise convolution whose windows are wholly inside the
/// input (`N` taps each): pixel `i` is `Σ x[s + i * step + ch] * f[t + ch]` over `taps`
/// (input offset of pixel 0, filter offset), in the taps' order from zero, as [`tap_sums`]
/// computes it. Channels in blocks of 16, each block over all the pixels with its `N` filter
/// vectors held in registers and four pixels at a time (four independent sums in flight); a
/// block's input is the window rows' 16 channels, small enough to stay in L1 across the row.
#[inline(always)]
fn window_sums<T: Float, const N: usize>(
    dst: &mut [T],
    x: &[T],
    f: &[T],
    taps: &[(usize, usize); N],
    c: usize,
    step: usize,
    ahead: &mut crate::isa::Ahead,
) {
    const L: usize = 16;
    const P: usize = 4;
    let pixels = dst.len() / c;
    if pixels == 0 {
        return;
    }
    // `ahead`'s lines spread over the blocks of four pixels.
    let per_step = ahead.lines().div_ceil(((c / L) * (pixels / P)).max(1)).max(1);
    // Every read below is inside `x` and `f`: the checks once, not per load.
    let last = (pixels - 1) * step;
    assert!(taps.iter().all(|&(s, t)| s + last + c <= x.len() && t + c <= f.len()), "window inside the input");
    let load = |p: *const T| -> [T; L] {
        // SAFETY: callers pass pointers with L elements in bounds (asserted above).
        unsafe { std::ptr::read_unaligned(p as *const [T; L]) }
    };
    let (xp, fp) = (x.as_ptr(), f.as_ptr());
    let mut cb = 0;
    while cb + L <= c {
        // SAFETY (here and below): `taps[t].1 + cb + L <= f.len()` and
        // `taps[t].0 + i * step + cb + L <= x.len()` for every pixel `i < pixels`.
        let fv: [[T; L]; N] = std::array::from_fn(|t| load(unsafe { fp.add(taps[t].1 + cb) }));
        let mut i = 0;
        while i + P <= pixels {
            let q = unsafe { xp.add(cb + i * step) };
            let mut acc = [[T::ZERO; L]; P];
            for t in 0..N {
                let qt = unsafe { q.add(taps[t].0) };
                for (p, a) in acc.iter_mut().enumerate() {
                    let xs = load(unsafe { qt.add(p * step) });
                    for l in 0..L {
                        a[l] = a[l] + xs[l] * fv[t][l];
                    }
                }
            }
            for (p, a) in acc.iter().enumerate() {
                dst[(i + p) * c + cb..][..L].copy_from_slice(a);
            }
            ahead.advance(per_step);
            i += P;
        }
        while i < pixels {
            let mut a = [T::ZERO; L];
            for t in 0..N {
                let xs = load(unsafe { xp.add(taps[t].0 + cb + i * step) });
                for l in 0..L {
                    a[l] = a[l] + xs[l] * fv[t][l];
                }
            }
            dst[i * c + cb..][..L].copy_from_slice(&a);
            i += 1;
        }
        cb += L;
    }
    if cb < c {
        for (i, px) in dst.chunks_exact_mut(c).enumerate() {
            for ch in cb..c {
                let mut a = T::ZERO;
                for &(s, t) in taps {
                    a = a + x[s + i * step + ch] * f[t + ch];
                }
                px[ch] = a;
            }
        }
    }
}

/// One output pixel of a depthwise (`BROADCAST` false) or direct (`BROADCAST` true)
/// convolution: `px[ch] = Σ x[s + shift (+ ch)] * f[t + ch]` over `taps` (input offset, filter
/// offset), the input per channel, or one value for every output channel. Channels in blocks
/// of 32, then 16, then one by one: each block's sums are independent chains of additions (one
/// per register), so a wider block keeps more of them in flight.
#[inline(always)]
fn tap_sums<T: Float, const BROADCAST: bool>(px: &mut [T], x: &[T], f: &[T], taps: &[(usize, usize)], shift: usize) {
    let c = px.len();
    let mut cb = 0;
    lane_blocks!(cb < c, |L| tap_block::<T, L, BROADCAST>(px, x, f, taps, shift, cb));
    for ch in cb..c {
        let lane = if BROADCAST { 0 } else { ch };
        let mut a = T::ZERO;
        for &(s, t) in taps {
            a = a + x[s + shift + lane] * f[t + ch];
        }
        px[ch] = a;
    }
}

/// Channels `cb..cb + L` of one output pixel of [`tap_sums`], accumulated in registers over
/// the taps (in their order, from zero, as the general kernels do).
#[inline(always)]
fn tap_block<T: Float, const L: usize, const BROADCAST: bool>(
    px: &mut [T],
    x: &[T],
    f: &[T],
    taps: &[(usize, usize)],
    shift: usize,
    cb: usize,
) {
    let mut acc = [T::ZERO; L];
    for &(s, t) in taps {
        let fs: &[T; L] = f[t + cb..t + cb + L].try_into().expect("L lanes");
        if BROADCAST {
            let xv = x[s + shift];
            for l in 0..L {
                acc[l] = acc[l] + xv * fs[l];
            }
        } else {
            let xs: &[T; L] = x[s + shift + cb..s + shift + cb + L].try_into().expect("L lanes");
            for l in 0..L {
                acc[l] = acc[l] + xs[l] * fs[l];
            }
        }
    }
    px[cb..cb + L].copy_from_slice(&acc);
}

/// `_FusedDepthwiseConv2dElementwise`: the depthwise convolution with the node's program run
/// on each output row as soon as it is computed (one filter per channel), or on the whole
/// output after the general kernel (a channel multiplier above 1).
/// Elements per epilogue row of a fused convolution (whole pixels): the per-channel operands
/// are tiled to this length once per run.
const EPILOGUE_ROW: usize = 2048;

/// `_FusedDepthwiseConv2dElementwise`: the depthwise convolution with the program run on each
/// output row while it is in cache.
struct FusedDepthwise<T> {
    window: Window,
    epilogue: RowEpilogue<T>,
}

impl<T: Float + Element> OpKernel for FusedDepthwise<T> {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let Geometry { input: [n, h, w, c], window: [kh, kw], multiplier: m, axes: [ah, aw] } =
            self.window.depthwise(inputs)?;
        let (oh, ow, oc) = (ah.output, aw.output, c * m);
        let row_len = oc.max(1) * (EPILOGUE_ROW / oc.max(1)).max(1);
        let Some(ops) = self.epilogue.operands(&inputs[2..], &[n, oh, ow, oc], row_len)? else {
            let general = Depthwise::<T> { window: self.window.clone(), _t: Default::default() };
            let mut conv_out = Outputs::with_capacity(1);
            general.compute(ctx, inputs, &mut conv_out)?;
            return self.epilogue.finish(ctx, conv_out.pop().expect("one output"), &inputs[2..], outputs);
        };
        if m != 1 {
            let general = Depthwise::<T> { window: self.window.clone(), _t: Default::default() };
            let mut conv_inputs: Inputs = inputs[..2].to_vec();
            let mut conv_out = Outputs::with_capacity(1);
            general.compute(ctx, &mut conv_inputs, &mut conv_out)?;
            let mut out = conv_out.pop().expect("one output");
            let rows = out.as_mut_slice::<T>()?;
            let mut scratch = Vec::new();
            if ow * oc > 0 {
                for (r, row) in rows.chunks_mut(ow * oc).enumerate() {
                    self.epilogue.apply(r * ow * oc, row, &ops, &mut scratch);
                }
            }
            outputs.push(out);
            return Ok(());
        }
        // `depthwise_m1` writes every element.
        let mut out = Tensor::for_overwrite(T::DTYPE, &[n, oh, ow, oc])?;
        let (x, f) = (inputs[0].as_slice::<T>()?, inputs[1].as_slice::<T>()?);
        let apply = |start: usize, row: &mut [T], scratch: &mut Vec<T>| self.epilogue.apply(start, row, &ops, scratch);
        depthwise_m1(ctx, (x, f), [n, h, w, c], [kh, kw], [ah, aw], out.as_mut_slice::<T>()?, Some(&apply));
        outputs.push(out);
        Ok(())
    }
}

/// `_FusedConv2DElementwise`: the convolution with the program run on each block of output
/// rows right after the GEMM wrote it (frozen BatchNormalization, the activation and
/// ResNet's residual `Add` + `Relu`, in cache).
struct FusedConv<T> {
    conv: Conv2D<T>,
    epilogue: RowEpilogue<T>,
    /// The windows (`[ph, pw]`) of the max pool that follows the epilogue (attr `max_pool`).
    pool: Option<[usize; 2]>,
}

impl<T: GemmElement + Float + Element> OpKernel for FusedConv<T> {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let dims = self.conv.output_dims(inputs)?;
        let oc = dims[3].max(1);
        let row_len = oc * (EPILOGUE_ROW / oc).max(1);
        match self.epilogue.operands(&inputs[2..], &dims, row_len)? {
            Some(ops) => {
                let apply = |start: usize, block: &mut [T], scratch: &mut Vec<T>| {
                    self.epilogue.apply(start, block, &ops, scratch)
                };
                let out = match self.pool {
                    Some(pool) => match self.conv.run_pooled(ctx, inputs, Some(&apply), pool)? {
                        Some(pooled) => pooled,
                        None => max_pool_valid::<T>(&self.conv.run(ctx, inputs, Some(&apply))?, pool)?,
                    },
                    None => self.conv.run(ctx, inputs, Some(&apply))?,
                };
                outputs.push(out);
                Ok(())
            }
            None => {
                let out = self.conv.run(ctx, inputs, None)?;
                self.epilogue.finish(ctx, out, &inputs[2..], outputs)?;
                if let Some(pool) = self.pool {
                    let out = outputs.pop().expect("the epilogue's output");
                    outputs.push(max_pool_valid::<T>(&out, pool)?);
                }
                Ok(())
            }
        }
    }
}

/// `_FusedConv2D`: the convolution, with `+ bias` and the activation applied to each block of
/// output rows right after the GEMM wrote it (in cache).
struct FusedConvBias<T> {
    conv: Conv2D<T>,
    act: Activation,
}

/// Runs a [`FusedConvBias`] with a given activation.
struct ConvBias<'a, T> {
    conv: &'a Conv2D<T>,
    ctx: &'a KernelContext<'a>,
    inputs: &'a Inputs,
    b: &'a [T],
}

impl<T: Float + Element + GemmElement> UnaryVisitor<T> for ConvBias<'_, T> {
    type Out = KResult<Tensor>;
    fn visit<F: Fn(T) -> T + Copy + Send + Sync + 'static>(self, f: F) -> KResult<Tensor> {
        let b = self.b;
        self.conv.run(self.ctx, self.inputs, Some(&move |_, block: &mut [T], _: &mut Vec<T>| add_bias(block, b, f)))
    }
}

impl<T: Float + Element + GemmElement> OpKernel for FusedConvBias<T> {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let bias = inputs.swap_remove(2);
        inputs.truncate(2);
        let c = inputs[1].dims().last().copied().unwrap_or(0);
        if bias.rank() != 1 || bias.len() != c {
            return Err(invalid(format!(
                "Must provide as many biases as the last dimension of the product: {:?} vs. {:?}",
                bias.dims(),
                inputs[1].dims()
            )));
        }
        let b = bias.as_slice::<T>()?;
        let run = ConvBias { conv: &self.conv, ctx, inputs, b };
        let out = match self.act {
            Activation::None => run.visit(|x: T| x)?,
            Activation::Unary(f) => visit_unary::<T, _>(f, run)?,
            Activation::LeakyRelu(a) => {
                let alpha = T::from_f64(a);
                let leaky = move |x: T| if x < T::ZERO { x * alpha } else { x };
                self.conv.run(
                    ctx,
                    inputs,
                    Some(&move |_, block: &mut [T], _: &mut Vec<T>| add_bias(block, b, leaky)),
                )?
            }
        };
        outputs.push(out);
        Ok(())
    }
}

fn k_fused_conv2d(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let act = Activation::from_fused_ops(d)?;
    if d.string("data_format")? != "NHWC" || d.string("filter_format").unwrap_or_else(|_| "HWIO".into()) != "HWIO" {
        return Err(invalid(format!("node '{}': _FusedConv2D is supported in NHWC/HWIO layout only", d.name)));
    }
    if d.int("num_host_args").unwrap_or(0) != 0 {
        return Err(invalid(format!("node '{}': _FusedConv2D with host_args is not supported", d.name)));
    }
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64],
        |T| Ok(Box::new(FusedConvBias::<T> { conv: Conv2D::new(d)?, act }) as Box<dyn OpKernel>))
}

/// `MaxPool` of an NHWC tensor by `[ph, pw]` windows at strides of the window, VALID (rows
/// and columns past the last whole window left out): a fused convolution's pool where it
/// could not pool block by block.
fn max_pool_valid<T: Float>(t: &Tensor, [ph, pw]: [usize; 2]) -> KResult<Tensor> {
    let [n, h, w, c] = nhwc(t, "input")?;
    let (oh, ow) = (h / ph, w / pw);
    let mut out = Tensor::for_overwrite(T::DTYPE, &[n, oh, ow, c])?;
    let (x, o) = (t.as_slice::<T>()?, out.as_mut_slice::<T>()?);
    if oh * ow * c > 0 {
        for (b, dst) in o.chunks_mut(oh * ow * c).enumerate() {
            max_pool_block(&x[b * h * w * c..][..oh * ph * w * c], w, c, [ph, pw], dst);
        }
    }
    Ok(out)
}

struct Pool<T> {
    max: bool,
    ksize: [usize; 2],
    window: Window,
    _t: std::marker::PhantomData<T>,
}

impl<T: Float> OpKernel for Pool<T> {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let [n, h, w, c] = nhwc(&inputs[0], "input")?;
        let [ah, aw] = self.window.axes(h, w, self.ksize[0], self.ksize[1])?;
        let (oh, ow) = (ah.output, aw.output);
        // Every pixel is written: its first tap copied, or filled when the window is empty.
        let mut out = Tensor::for_overwrite(T::DTYPE, &[n, oh, ow, c])?;
        let x = inputs[0].as_slice::<T>()?;
        let max = self.max;
        let row = |(r, dst): (usize, &mut [T])| {
            let (b, y) = (r / oh, r % oh);
            let rows: Vec<usize> = (0..ah.window).filter_map(|ky| ah.source(y, ky)).collect();
            if max {
                // Each pixel's taps (inside the input) in order, reduced in registers.
                let mut taps: Vec<&[T]> = Vec::with_capacity(rows.len() * aw.window);
                crate::isa::widest(
                    #[inline(always)]
                    || {
                        for (xo, px) in dst.chunks_mut(c).enumerate() {
                            taps.clear();
                            for &iy in &rows {
                                for kx in 0..aw.window {
                                    if let Some(ix) = aw.source(xo, kx) {
                                        taps.push(&x[((b * h + iy) * w + ix) * c..][..c]);
                                    }
                                }
                            }
                            if taps.is_empty() {
                                px.fill(T::LOWEST);
                            } else {
                                max_of_taps(px, &taps);
                            }
                        }
                    },
                );
                return;
            }
            for xo in 0..ow {
                let px = &mut dst[xo * c..(xo + 1) * c];
                let mut first = true;
                let mut count = 0usize;
                for &iy in &rows {
                    for kx in 0..aw.window {
                        let Some(ix) = aw.source(xo, kx) else { continue };
                        count += 1;
                        let src = &x[((b * h + iy) * w + ix) * c..][..c];
                        if first {
                            pool_step(px, src, |_, s| s);
                            first = false;
                        } else {
                            pool_step(px, src, |v, s| v + s);
                        }
                    }
                }
                if first {
                    px.fill(T::ZERO);
                } else {
                    let n = T::from_f64(count as f64);
                    px.iter_mut().for_each(|v| *v = *v / n);
                }
            }
        };
        let o = out.as_mut_slice::<T>()?;
        if ow * c > 0 {
            if ctx.threads() > 1 && n * oh > 1 {
                ctx.install(|| o.par_chunks_mut(ow * c).enumerate().for_each(row));
            } else {
                o.chunks_mut(ow * c).enumerate().for_each(row);
            }
        }
        outputs.push(out);
        Ok(())
    }
}

/// `px[i] = f(px[i], src[i])` over a pixel's channels, 8 at a time as fixed-size arrays (vector
/// code, no `memcpy` call per pixel), the rest one by one.
#[inline(always)]
fn pool_step<T: Float>(px: &mut [T], src: &[T], f: impl Fn(T, T) -> T) {
    const L: usize = 8;
    let mut d = px.chunks_exact_mut(L);
    let mut s = src.chunks_exact(L);
    for (d, s) in (&mut d).zip(&mut s) {
        let (d, s): (&mut [T; L], &[T; L]) = (d.try_into().expect("L"), s.try_into().expect("L"));
        *d = std::array::from_fn(|l| f(d[l], s[l]));
    }
    for (d, &s) in d.into_remainder().iter_mut().zip(s.remainder()) {
        *d = f(*d, s);
    }
}

/// Reads a 4-element int32 shape input (`input_sizes`, `filter_sizes`, `orig_input_shape`).
fn shape4(t: &Tensor, what: &str) -> KResult<[usize; 4]> {
    let v = t.as_slice::<i32>().map_err(|e| invalid(format!("{what}: {e}")))?;
    match v {
        &[a, b, c, d] if v.iter().all(|&x| x >= 0) => Ok([a as usize, b as usize, c as usize, d as usize]),
        _ => Err(invalid(format!("{what} must be 4 non-negative sizes, got {v:?}"))),
    }
}

/// im2col of an NHWC input: one row of `kh·kw·c` taps per output pixel (zeros in padding).
fn im2col<T: Float>(x: &[T], dims: [usize; 4], axes: [Axis; 2]) -> Vec<T> {
    let k = axes[0].window * axes[1].window * dims[3];
    let mut col = vec![T::ZERO; dims[0] * axes[0].output * axes[1].output * k];
    im2col_rows(x, dims, axes, 0, &mut col);
    col
}

/// `Conv2DBackpropInput` (`filter_input == false`) and `Conv2DBackpropFilter`: the gradients
/// of `Conv2D` with respect to its input and its filter, through im2col and the GEMM.
struct ConvBackprop<T> {
    window: Window,
    wrt_filter: bool,
    _t: std::marker::PhantomData<T>,
}

impl<T: GemmElement + Float> OpKernel for ConvBackprop<T> {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let (xdims, fdims) = if self.wrt_filter {
            (nhwc(&inputs[0], "input")?, shape4(&inputs[1], "filter_sizes")?)
        } else {
            (shape4(&inputs[0], "input_sizes")?, nhwc(&inputs[1], "filter")?)
        };
        let [n, h, w, c] = xdims;
        let [kh, kw, fc, oc] = fdims;
        if fc != c {
            return Err(invalid(format!("input depth {c} does not match filter depth {fc}")));
        }
        let axes = self.window.axes(h, w, kh, kw)?;
        let (oh, ow) = (axes[0].output, axes[1].output);
        let g = &inputs[2];
        if g.dims() != [n, oh, ow, oc] {
            return Err(invalid(format!(
                "out_backprop has shape {:?}, expected [{n}, {oh}, {ow}, {oc}] for input {xdims:?} and filter {fdims:?}",
                g.dims()
            )));
        }
        let gs = g.as_slice::<T>()?;
        let (rows, k) = (n * oh * ow, kh * kw * c);
        crate::check_output(T::DTYPE, &[rows, k])?;
        if self.wrt_filter {
            // dF[k, oc] = col(x)ᵀ · g
            let col = im2col(inputs[0].as_slice::<T>()?, xdims, axes);
            let mut out = Tensor::zeros(T::DTYPE, &[kh, kw, c, oc])?;
            product(ctx, (k, oc, rows), (&col, 1, k), (gs, oc, 1), out.as_mut_slice::<T>()?);
            outputs.push(out);
        } else {
            // dcol[rows, k] = g · Fᵀ, then each tap is added back to the pixel it read.
            let f = inputs[1].as_slice::<T>()?;
            let mut dcol = vec![T::ZERO; rows * k];
            product(ctx, (rows, k, oc), (gs, oc, 1), (f, 1, oc), &mut dcol);
            let mut out = Tensor::zeros(T::DTYPE, &[n, h, w, c])?;
            let dx = out.as_mut_slice::<T>()?;
            let [ah, aw] = axes;
            let mut r = 0;
            for b in 0..n {
                for y in 0..oh {
                    for xo in 0..ow {
                        let row = &dcol[r * k..(r + 1) * k];
                        for ky in 0..kh {
                            let Some(iy) = ah.source(y, ky) else { continue };
                            for kx in 0..kw {
                                let Some(ix) = aw.source(xo, kx) else { continue };
                                let dst = &mut dx[((b * h + iy) * w + ix) * c..][..c];
                                let src = &row[(ky * kw + kx) * c..][..c];
                                dst.iter_mut().zip(src).for_each(|(d, s)| *d = *d + *s);
                            }
                        }
                        r += 1;
                    }
                }
            }
            outputs.push(out);
        }
        Ok(())
    }
}

/// `DepthwiseConv2dNativeBackpropInput` (`wrt_filter == false`) and
/// `DepthwiseConv2dNativeBackpropFilter`: the gradients of `DepthwiseConv2dNative` with
/// respect to its input (each output gradient spread back over the taps that read a pixel,
/// one task per image) and its filter (one task per window tap).
struct DepthwiseBackprop<T> {
    window: Window,
    wrt_filter: bool,
    _t: std::marker::PhantomData<T>,
}

impl<T: Float> OpKernel for DepthwiseBackprop<T> {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let (xdims, fdims) = if self.wrt_filter {
            (nhwc(&inputs[0], "input")?, shape4(&inputs[1], "filter_sizes")?)
        } else {
            (shape4(&inputs[0], "input_sizes")?, nhwc(&inputs[1], "filter")?)
        };
        let [n, h, w, c] = xdims;
        let [kh, kw, fc, m] = fdims;
        if fc != c {
            return Err(invalid(format!("input depth {c} does not match filter depth {fc}")));
        }
        let [ah, aw] = self.window.axes(h, w, kh, kw)?;
        let (oh, ow, oc) = (ah.output, aw.output, c * m);
        let g = &inputs[2];
        if g.dims() != [n, oh, ow, oc] {
            return Err(invalid(format!(
                "out_backprop has shape {:?}, expected [{n}, {oh}, {ow}, {oc}] for input {xdims:?} and filter {fdims:?}",
                g.dims()
            )));
        }
        let gs = g.as_slice::<T>()?;
        let parallel = ctx.threads() > 1;
        if self.wrt_filter {
            let x = inputs[0].as_slice::<T>()?;
            let mut out = Tensor::zeros(T::DTYPE, &[kh, kw, c, m])?;
            let tap = |(t, dst): (usize, &mut [T])| {
                let (ky, kx) = (t / kw, t % kw);
                for b in 0..n {
                    for y in 0..oh {
                        let Some(iy) = ah.source(y, ky) else { continue };
                        for xo in 0..ow {
                            let Some(ix) = aw.source(xo, kx) else { continue };
                            let src = &x[((b * h + iy) * w + ix) * c..][..c];
                            let go = &gs[((b * oh + y) * ow + xo) * oc..][..oc];
                            for ci in 0..c {
                                for mi in 0..m {
                                    dst[ci * m + mi] = dst[ci * m + mi] + src[ci] * go[ci * m + mi];
                                }
                            }
                        }
                    }
                }
            };
            let o = out.as_mut_slice::<T>()?;
            if oc > 0 {
                if parallel && kh * kw > 1 {
                    ctx.install(|| o.par_chunks_mut(oc).enumerate().for_each(tap));
                } else {
                    o.chunks_mut(oc).enumerate().for_each(tap);
                }
            }
            outputs.push(out);
        } else {
            let f = inputs[1].as_slice::<T>()?;
            let mut out = Tensor::zeros(T::DTYPE, &[n, h, w, c])?;
            let image = |(b, dx): (usize, &mut [T])| {
                for y in 0..oh {
                    for xo in 0..ow {
                        let go = &gs[((b * oh + y) * ow + xo) * oc..][..oc];
                        for ky in 0..kh {
                            let Some(iy) = ah.source(y, ky) else { continue };
                            for kx in 0..kw {
                                let Some(ix) = aw.source(xo, kx) else { continue };
                                let taps = &f[(ky * kw + kx) * oc..][..oc];
                                let dst = &mut dx[(iy * w + ix) * c..][..c];
                                for ci in 0..c {
                                    let mut acc = dst[ci];
                                    for mi in 0..m {
                                        acc = acc + go[ci * m + mi] * taps[ci * m + mi];
                                    }
                                    dst[ci] = acc;
                                }
                            }
                        }
                    }
                }
            };
            let dx = out.as_mut_slice::<T>()?;
            if h * w * c > 0 {
                if parallel && n > 1 {
                    ctx.install(|| dx.par_chunks_mut(h * w * c).enumerate().for_each(image));
                } else {
                    dx.chunks_mut(h * w * c).enumerate().for_each(image);
                }
            }
            outputs.push(out);
        }
        Ok(())
    }
}

/// `MaxPoolGrad` (each output's gradient goes to the first maximum of its window, in scan
/// order, as TensorFlow's CPU kernel) and `AvgPoolGrad` (spread evenly over the window's
/// in-bounds taps).
struct PoolGrad<T> {
    max: bool,
    ksize: [usize; 2],
    window: Window,
    _t: std::marker::PhantomData<T>,
}

impl<T: Float> OpKernel for PoolGrad<T> {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let xdims = if self.max { nhwc(&inputs[0], "orig_input")? } else { shape4(&inputs[0], "orig_input_shape")? };
        let [n, h, w, c] = xdims;
        let [ah, aw] = self.window.axes(h, w, self.ksize[0], self.ksize[1])?;
        let (oh, ow) = (ah.output, aw.output);
        let g = inputs.last().expect("grad input");
        if g.dims() != [n, oh, ow, c] {
            return Err(invalid(format!("grad has shape {:?}, expected [{n}, {oh}, {ow}, {c}]", g.dims())));
        }
        let gs = g.as_slice::<T>()?;
        let mut out = Tensor::zeros(T::DTYPE, &[n, h, w, c])?;
        let dx = out.as_mut_slice::<T>()?;
        let x = if self.max { Some(inputs[0].as_slice::<T>()?) } else { None };
        for b in 0..n {
            for y in 0..oh {
                for xo in 0..ow {
                    let taps: Vec<usize> = (0..ah.window)
                        .filter_map(|ky| ah.source(y, ky))
                        .flat_map(|iy| (0..aw.window).filter_map(move |kx| aw.source(xo, kx).map(|ix| iy * w + ix)))
                        .collect();
                    let go = &gs[((b * oh + y) * ow + xo) * c..][..c];
                    match x {
                        Some(x) => {
                            for ch in 0..c {
                                let mut best: Option<(usize, T)> = None;
                                for &p in &taps {
                                    let v = x[(b * h * w + p) * c + ch];
                                    if best.is_none_or(|(_, m)| v > m) {
                                        best = Some((p, v));
                                    }
                                }
                                if let Some((p, _)) = best {
                                    let d = &mut dx[(b * h * w + p) * c + ch];
                                    *d = *d + go[ch];
                                }
                            }
                        }
                        None if !taps.is_empty() => {
                            let inv = T::ONE / T::from_f64(taps.len() as f64);
                            for &p in &taps {
                                let dst = &mut dx[(b * h * w + p) * c..][..c];
                                dst.iter_mut().zip(go).for_each(|(d, g)| *d = *d + *g * inv);
                            }
                        }
                        None => {}
                    }
                }
            }
        }
        outputs.push(out);
        Ok(())
    }
}

fn k_conv_backprop(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let window = Window::from_node(d, true)?;
    let wrt_filter = d.def.name == "Conv2DBackpropFilter";
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64],
        |T| Ok(Box::new(ConvBackprop::<T> { window, wrt_filter, _t: Default::default() }) as Box<dyn OpKernel>))
}

fn k_pool_grad(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let window = Window::from_node(d, false)?;
    let ksize = four(d, "ksize", 1)?;
    let max = d.def.name == "MaxPoolGrad";
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64],
        |T| Ok(Box::new(PoolGrad::<T> { max, ksize, window, _t: Default::default() }) as Box<dyn OpKernel>))
}

fn k_conv2d(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64],
        |T| Ok(Box::new(Conv2D::<T>::new(d)?) as Box<dyn OpKernel>))
}

fn k_depthwise(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let window = Window::from_node(d, true)?;
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64],
        |T| Ok(Box::new(Depthwise::<T> { window, _t: Default::default() }) as Box<dyn OpKernel>))
}

/// `_FusedDepthwiseConv2dElementwise`'s kernel.
fn k_fused_depthwise(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let window = Window::from_node(d, true)?;
    let n_args = d.int("N")?;
    let n_args = usize::try_from(n_args).map_err(|_| invalid(format!("attr 'N' is {n_args}")))?;
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64],
        |T| Ok(Box::new(FusedDepthwise::<T> { window, epilogue: RowEpilogue::new(d, n_args)? }) as Box<dyn OpKernel>))
}

/// `_FusedConv2DElementwise`'s kernel.
fn k_fused_conv(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let pool = match d.ints("max_pool")[..] {
        [] => None,
        [ph, pw] if ph >= 1 && pw >= 1 => Some([ph as usize, pw as usize]),
        ref v => return Err(invalid(format!("attr 'max_pool' must be empty or 2 positive window sizes, got {v:?}"))),
    };
    let n_args = d.int("N")?;
    let n_args = usize::try_from(n_args).map_err(|_| invalid(format!("attr 'N' is {n_args}")))?;
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64],
        |T| Ok(Box::new(FusedConv::<T> { conv: Conv2D::new(d)?, epilogue: RowEpilogue::new(d, n_args)?, pool }) as Box<dyn OpKernel>))
}

fn k_depthwise_backprop(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let window = Window::from_node(d, true)?;
    let wrt_filter = d.def.name == "DepthwiseConv2dNativeBackpropFilter";
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64],
        |T| Ok(Box::new(DepthwiseBackprop::<T> { window, wrt_filter, _t: Default::default() }) as Box<dyn OpKernel>))
}

fn k_pool(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let window = Window::from_node(d, false)?;
    let ksize = four(d, "ksize", 1)?;
    let max = d.def.name == "MaxPool";
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64],
        |T| Ok(Box::new(Pool::<T> { max, ksize, window, _t: Default::default() }) as Box<dyn OpKernel>))
}

pub(crate) fn register(r: &mut KernelRegistry) {
    const F: &[DType] = &[DType::Float, DType::Double];
    r.register("Conv2D", "T", F, k_conv2d);
    r.register("DepthwiseConv2dNative", "T", F, k_depthwise);
    r.register("MaxPool", "T", F, k_pool);
    r.register("AvgPool", "T", F, k_pool);
    r.register("Conv2DBackpropInput", "T", F, k_conv_backprop);
    r.register("Conv2DBackpropFilter", "T", F, k_conv_backprop);
    r.register("MaxPoolGrad", "T", F, k_pool_grad);
    r.register("AvgPoolGrad", "T", F, k_pool_grad);
    r.register("DepthwiseConv2dNativeBackpropInput", "T", F, k_depthwise_backprop);
    r.register("DepthwiseConv2dNativeBackpropFilter", "T", F, k_depthwise_backprop);
    r.register("FusedBatchNormV3", "T", F, batch_norm::k_batch_norm);
    r.register("FusedBatchNormGradV3", "T", F, batch_norm::k_batch_norm_grad);
    r.register("_FusedConv2D", "T", F, k_fused_conv2d);
    r.register("_FusedDepthwiseConv2dElementwise", "T", F, k_fused_depthwise);
    r.register("_FusedConv2DElementwise", "T", F, k_fused_conv);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The non-temporal copy writes every element and nothing else, whatever the destination's
    /// alignment (head and tail copied plainly) and length (shorter than one vector too).
    #[test]
    fn stream_copy_copies_exactly() {
        let src: Vec<f32> = (0..1000).map(|i| i as f32 * 0.5 - 3.0).collect();
        for offset in 0..17 {
            for len in [0, 1, 15, 16, 17, 63, 64, 65, 500, 1000 - 17] {
                let mut dst = vec![f32::NAN; 1024];
                stream_copy(&mut dst[offset..offset + len], &src[..len]);
                assert!(dst[..offset].iter().all(|v| v.is_nan()), "offset {offset} len {len}: head touched");
                assert_eq!(&dst[offset..offset + len], &src[..len], "offset {offset} len {len}");
                assert!(dst[offset + len..].iter().all(|v| v.is_nan()), "offset {offset} len {len}: tail touched");
            }
        }
    }
}
