//! Implicit GEMM for convolutions of few input channels and large windows (ResNet's first
//! layer: 7×7, stride 2, 3 → 64 channels, K = 147): each output pixel's window is read from
//! the input in place through one table of tap offsets, instead of being copied into an
//! im2col row first (at K = 147 the copies, 7 runs of 21 floats per pixel, and the `gemm`
//! crate's packing of them took about a third of the layer). f32 on AVX-512F, output
//! channels a multiple of 16 up to 64: a tile of 6 pixels × all output channels (up to 24
//! accumulators) takes one broadcast per pixel and one filter row per tap, and each output
//! is one chain of fused multiply-adds over the taps in the filter's order, from zero — as
//! the GEMM computes an im2col row times the filter. Pixels whose window leaves the input
//! (the borders) get an im2col row of their own (zeros in the padding) and the same kernel.
use std::arch::x86_64::*;

use super::gemm::im2col_rows;
use super::Axis;

/// Pixels per tile.
const MR: usize = 6;

/// Whether [`rows`] runs a convolution of `c` input channels, a window of `k` taps in all
/// and `oc` output channels of element type `T` on this CPU.
pub(super) fn applies<T: 'static>(c: usize, k: usize, oc: usize) -> bool {
    crate::packed::available::<T>() && c <= 4 && k > 36 && k <= 1024 && oc.is_multiple_of(16) && (16..=64).contains(&oc)
}

/// Output pixels `r0..` (as many as `dst` holds, `oc` values each) of the convolution of
/// `x` (`[n, h, w, c]`) by `f` (`[kh, kw, c, oc]`, row-major: `k` rows of `oc`), where
/// [`applies`] holds.
pub(super) fn rows(x: &[f32], [_, h, w, c]: [usize; 4], [ah, aw]: [Axis; 2], f: &[f32], r0: usize, dst: &mut [f32]) {
    let (kh, kw) = (ah.window, aw.window);
    let k = kh * kw * c;
    let oc = f.len() / k;
    assert!(applies::<f32>(c, k, oc) && dst.len().is_multiple_of(oc));
    // The taps' offsets from a pixel's window origin (its first tap), filter order.
    let mut off = Vec::with_capacity(k);
    for ky in 0..kh {
        for kx in 0..kw {
            off.extend((0..c).map(|ci| (ky * ah.dilation * w + kx * aw.dilation) * c + ci));
        }
    }
    let identity: Vec<usize> = (0..k).collect();
    // Interior output columns: every tap's input column exists.
    let inside = |ox: usize| (0..kw).all(|kx| aw.source(ox, kx).is_some());
    let first = (0..aw.output).find(|&ox| inside(ox)).unwrap_or(aw.output);
    let last = (first..aw.output).take_while(|&ox| inside(ox)).count() + first;
    let mut col = vec![0f32; MR * k];
    let end = r0 + dst.len() / oc;
    let mut r = r0;
    while r < end {
        let (ox0, oy, b) = (r % aw.output, (r / aw.output) % ah.output, r / (aw.output * ah.output));
        let ox1 = (ox0 + end - r).min(aw.output);
        let full_rows = (0..kh).all(|ky| ah.source(oy, ky).is_some());
        let mut ox = ox0;
        while ox < ox1 {
            let at = (r - r0 + ox - ox0) * oc;
            if full_rows && (first..last).contains(&ox) {
                // Interior pixels: windows read in place.
                let n = MR.min(last.min(ox1) - ox);
                let iy = oy * ah.stride - ah.pad_before;
                let origin = |j: usize| ((b * h + iy) * w + (ox + j) * aw.stride - aw.pad_before) * c;
                // Every tap of these windows lies in `x` (interior rows and columns).
                assert!(origin(n - 1) + off[k - 1] < x.len());
                let bases: [*const f32; MR] = std::array::from_fn(|j| x[origin(j.min(n - 1))..].as_ptr());
                // SAFETY: AVX-512F (`applies`); every base + offset is inside `x` (asserted
                // for the last window; the others start earlier), `f` holds k × oc and
                // `dst[at..]` n pixels of oc.
                unsafe { tile(bases, &off, f.as_ptr(), oc, dst[at..at + n * oc].as_mut_ptr(), n) };
                ox += n;
            } else {
                // Border pixels (up to the next interior one): im2col rows with zeros.
                let mut n = 1;
                while n < MR && ox + n < ox1 && !(full_rows && (first..last).contains(&(ox + n))) {
                    n += 1;
                }
                let rows = &mut col[..n * k];
                im2col_rows(x, [0, h, w, c], [ah, aw], (b * ah.output + oy) * aw.output + ox, rows);
                let bases: [*const f32; MR] = std::array::from_fn(|j| rows[j.min(n - 1) * k..].as_ptr());
                // SAFETY: as above, the bases are the n im2col rows of k values.
                unsafe { tile(bases, &identity, f.as_ptr(), oc, dst[at..at + n * oc].as_mut_ptr(), n) };
                ox += n;
            }
        }
        r += ox1 - ox0;
    }
}

/// `n` ≤ [`MR`] output pixels: pixel `j`'s tap `p` is `bases[j][off[p]]`.
///
/// # Safety
/// The CPU must have AVX-512F; every `bases[j] + off[p]` readable, `f` valid for
/// `off.len() × oc` reads, `out` for `n × oc` writes; `oc` a multiple of 16 up to 64.
#[target_feature(enable = "avx512f")]
unsafe fn tile(bases: [*const f32; MR], off: &[usize], f: *const f32, oc: usize, out: *mut f32, n: usize) {
    // SAFETY: the caller's contract.
    unsafe {
        match oc / 16 {
            4 => tile_n::<4>(bases, off, f, out, n),
            3 => tile_n::<3>(bases, off, f, out, n),
            2 => tile_n::<2>(bases, off, f, out, n),
            _ => tile_n::<1>(bases, off, f, out, n),
        }
    }
}

#[inline(always)]
unsafe fn tile_n<const NV: usize>(bases: [*const f32; MR], off: &[usize], f: *const f32, out: *mut f32, n: usize) {
    let oc = NV * 16;
    // SAFETY (this block): the caller's contract.
    unsafe {
        let mut acc = [[_mm512_setzero_ps(); NV]; MR];
        for (p, &o) in off.iter().enumerate() {
            let w: [__m512; NV] = std::array::from_fn(|v| _mm512_loadu_ps(f.add(p * oc + v * 16)));
            for j in 0..MR {
                let a = _mm512_set1_ps(*bases[j].add(o));
                for v in 0..NV {
                    acc[j][v] = _mm512_fmadd_ps(a, w[v], acc[j][v]);
                }
            }
        }
        for (j, row) in acc.iter().enumerate().take(n) {
            for (v, a) in row.iter().enumerate() {
                _mm512_storeu_ps(out.add(j * oc + v * 16), *a);
            }
        }
    }
}
