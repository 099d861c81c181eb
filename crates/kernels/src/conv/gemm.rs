//! `Conv2D` as im2col + GEMM, block by block across the intra-op pool with the epilogue on
//! each block in cache; the im2col rows it multiplies (also the implicit GEMM's and the
//! gradients'); and the non-temporal copy of very large outputs.
use ferroflow_tensor::Tensor;
use rayon::prelude::*;

use super::scratch::Lease;
use super::{Axis, BlockFn, Conv2D};
use crate::matmul::{product, product_serial, GemmElement};
use crate::numeric::Float;
use crate::packed;
use crate::{invalid, KResult, KernelContext};

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

/// Copies a short run element by element (a `memcpy` call costs more than a few moves).
#[inline]
fn copy<T: Copy>(dst: &mut [T], src: &[T]) {
    if dst.len() <= 16 {
        dst.iter_mut().zip(src).for_each(|(d, s)| *d = *s);
    } else {
        dst.copy_from_slice(src);
    }
}

/// Fills `col` (whole rows of `kh*kw*c` taps) with the im2col rows of output pixels `r0..`:
/// the window's taps in order, zero in the padding. Every element is written.
pub(super) fn im2col_rows<T: Float>(x: &[T], [_n, h, w, c]: [usize; 4], [ah, aw]: [Axis; 2], r0: usize, col: &mut [T]) {
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

/// im2col of an NHWC input: one row of `kh·kw·c` taps per output pixel (zeros in padding).
pub(super) fn im2col<T: Float>(x: &[T], dims: [usize; 4], axes: [Axis; 2]) -> Vec<T> {
    let k = axes[0].window * axes[1].window * dims[3];
    let mut col = vec![T::ZERO; dims[0] * axes[0].output * axes[1].output * k];
    im2col_rows(x, dims, axes, 0, &mut col);
    col
}

impl<T: GemmElement + Float> Conv2D<T> {
    /// The convolution as GEMM: output pixels are the rows of an im2col matrix times the
    /// `[k, oc]` filter. The rows go in blocks (one task per block, on the intra-op pool): a
    /// task fills its block's im2col rows (none for a 1×1 stride-1 convolution: the input is
    /// the matrix), runs the GEMM into the block's output rows, then the epilogue on them while
    /// they are in cache. Too few rows for blocks of a useful size on every thread (64 rows; 28
    /// with the filter packed once, see [`PACKED_MIN_BLOCK_ROWS`]): one im2col matrix and the
    /// GEMM split by columns. An output of at least [`STREAM_OUTPUT_BYTES`] is made block by
    /// block in a cached buffer and streamed to memory with non-temporal stores. A
    /// `prologue` (pointwise convolutions only) runs on a copy of each block of input rows, in
    /// cache, before the GEMM reads it: the input's elementwise producer (a pre-activation
    /// BatchNorm + ReLU) without its output ever written to memory.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn run_gemm(
        &self,
        ctx: &KernelContext,
        (x, [n, h, w, c], [ah, aw]): (&[T], [usize; 4], [Axis; 2]),
        (filter, kh, kw, oc): (&Tensor, usize, usize, usize),
        o: &mut [T],
        epilogue: Option<BlockFn<T>>,
        prologue: Option<BlockFn<T>>,
    ) -> KResult<()> {
        let rows = n * ah.output * aw.output;
        let k = kh * kw * c;
        let f = filter.as_slice::<T>()?;
        let pointwise = kh == 1
            && kw == 1
            && ah.stride == 1
            && aw.stride == 1
            && ah.pad_before == 0
            && aw.pad_before == 0
            && ah.output == h
            && aw.output == w;
        if prologue.is_some() && !pointwise {
            return Err(invalid("a convolution prologue needs a pointwise (1x1, stride 1, unpadded) convolution"));
        }
        let threads = ctx.threads();
        let mut block = (BLOCK_BYTES / ((k + oc).max(1) * std::mem::size_of::<T>())).max(MIN_BLOCK_ROWS).min(rows);
        if threads > 1 && rows.div_ceil(block) < 2 * threads {
            block = rows.div_ceil(2 * threads);
        }
        let dims = [n, h, w, c];
        let block_pays = packed::pays::<T>(block, oc);
        let whole = threads > 1 && block < MIN_BLOCK_ROWS / 4 && !(block >= PACKED_MIN_BLOCK_ROWS && block_pays);
        let packed = (if whole { packed::pays::<T>(rows, oc) } else { block_pays })
            .then(|| self.packed_filter.get(filter, f.as_ptr(), 0, || packed::Packed::new(f, k, oc, oc, 1)));
        if whole {
            // Few rows (late layers at batch 1): the whole im2col matrix is small; the GEMM
            // splits its columns across the pool. (Blocks stay faster otherwise, even for a
            // small matrix on one thread: measured on ResNet50 at batch 1 and a small CNN, one
            // whole-matrix GEMM with a separate epilogue pass was 25–65% slower.)
            crate::check_output(T::DTYPE, &[rows, k])?;
            let mut lease = Lease::<(Vec<T>, Vec<T>)>::take();
            let a: &[T] = if let Some(p) = prologue {
                let (col, scratch) = (&mut lease.bufs.0, &mut lease.bufs.1);
                col.clear();
                col.extend_from_slice(&x[..rows * k]);
                p(0, col, scratch);
                col
            } else if pointwise {
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
            return Ok(());
        }
        crate::check_output(T::DTYPE, &[block, k])?;
        let stream = std::mem::size_of_val(o) >= STREAM_OUTPUT_BYTES && streaming_pays();
        let task = |lease: &mut Lease<(Vec<T>, Vec<T>, Vec<T>)>, (i, out_rows): (usize, &mut [T])| {
            if ctx.stopped() {
                return;
            }
            let (r0, m) = (i * block, out_rows.len() / oc);
            let (col, scratch, stage) = (&mut lease.bufs.0, &mut lease.bufs.1, &mut lease.bufs.2);
            let a: &[T] = if let Some(p) = prologue {
                col.clear();
                col.extend_from_slice(&x[r0 * k..(r0 + m) * k]);
                p(r0 * k, col, scratch);
                col
            } else if pointwise {
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
        Ok(())
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

#[cfg(test)]
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
