//! Fancy (triangle-filter) 2:1 upsampling, libjpeg-turbo's jdsample.c formulas with AVX2.
//!
//! Both C functions are the general formula with the edge sample repeated (the first output
//! of a row is `(4 * s + bias) >> shift`, which equals the sample, and likewise the last), so
//! each output pair depends only on input columns `i - 1`, `i`, `i + 1`, clamped to the row.
//! Columns with both neighbours in the row and 16 columns to spare go through AVX2, the rest
//! through the scalar formula; nothing reads past `width` input or writes past `2 * width`
//! output samples (exactly what the C functions touch).

use std::arch::x86_64::*;

/// Input columns per vector step.
const STEP: usize = 16;

/// One output row of `h2v2_fancy_upsample`: `near` is the nearest input row, `far` the next
/// nearest (above for the first output row of a pair, below for the second).
///
/// # Safety
/// AVX2 must be available; `near` and `far` must have `width` readable samples, `out`
/// `2 * width` writable ones.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn h2v2_fancy_row_avx2(width: usize, near: *const u8, far: *const u8, out: *mut u8) {
    if width == 0 {
        return;
    }
    let colsum = |i: usize| 3 * *near.add(i) as u32 + *far.add(i) as u32;
    let scalar = |i: usize| {
        let this = colsum(i);
        let last = colsum(i.saturating_sub(1));
        let next = colsum((i + 1).min(width - 1));
        *out.add(2 * i) = ((this * 3 + last + 8) >> 4) as u8;
        *out.add(2 * i + 1) = ((this * 3 + next + 7) >> 4) as u8;
    };
    scalar(0);
    let mut i = 1;
    // Reads columns i - 1 ..= i + STEP, all < width.
    while i + STEP < width {
        let load = |p: *const u8| _mm256_cvtepu8_epi16(_mm_loadu_si128(p as *const __m128i));
        let sum = |j: usize| {
            let n = load(near.add(j));
            _mm256_add_epi16(_mm256_add_epi16(n, _mm256_add_epi16(n, n)), load(far.add(j)))
        };
        let this = sum(i);
        let last = sum(i - 1);
        let next = sum(i + 1);
        let this3 = _mm256_add_epi16(this, _mm256_add_epi16(this, this));
        let even = _mm256_srli_epi16::<4>(_mm256_add_epi16(_mm256_add_epi16(this3, last), _mm256_set1_epi16(8)));
        let odd = _mm256_srli_epi16::<4>(_mm256_add_epi16(_mm256_add_epi16(this3, next), _mm256_set1_epi16(7)));
        // Little-endian words (even | odd << 8) are the bytes even0 odd0 even1 odd1 ...
        let pairs = _mm256_or_si256(even, _mm256_slli_epi16::<8>(odd));
        _mm256_storeu_si256(out.add(2 * i) as *mut __m256i, pairs);
        i += STEP;
    }
    while i < width {
        scalar(i);
        i += 1;
    }
}

/// One row of `h2v1_fancy_upsample`.
///
/// # Safety
/// AVX2 must be available; `input` must have `width` readable samples, `out` `2 * width`
/// writable ones.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn h2v1_fancy_row_avx2(width: usize, input: *const u8, out: *mut u8) {
    if width == 0 {
        return;
    }
    let at = |i: usize| *input.add(i) as u32;
    let scalar = |i: usize| {
        let this = at(i) * 3;
        *out.add(2 * i) = ((this + at(i.saturating_sub(1)) + 1) >> 2) as u8;
        *out.add(2 * i + 1) = ((this + at((i + 1).min(width - 1)) + 2) >> 2) as u8;
    };
    scalar(0);
    let mut i = 1;
    while i + STEP < width {
        let load = |j: usize| _mm256_cvtepu8_epi16(_mm_loadu_si128(input.add(j) as *const __m128i));
        let this = load(i);
        let this3 = _mm256_add_epi16(this, _mm256_add_epi16(this, this));
        let even = _mm256_srli_epi16::<2>(_mm256_add_epi16(_mm256_add_epi16(this3, load(i - 1)), _mm256_set1_epi16(1)));
        let odd = _mm256_srli_epi16::<2>(_mm256_add_epi16(_mm256_add_epi16(this3, load(i + 1)), _mm256_set1_epi16(2)));
        let pairs = _mm256_or_si256(even, _mm256_slli_epi16::<8>(odd));
        _mm256_storeu_si256(out.add(2 * i) as *mut __m256i, pairs);
        i += STEP;
    }
    while i < width {
        scalar(i);
        i += 1;
    }
}

/// jdsample.c's `h2v2_fancy_upsample` for one output row, as written there (the reference).
#[cfg(test)]
pub(super) fn h2v2_fancy_reference(near: &[u8], far: &[u8], width: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 * width);
    let cs = |i: usize| near[i] as i32 * 3 + far[i] as i32;
    let mut this = cs(0);
    let next = cs(1);
    out.push(((this * 4 + 8) >> 4) as u8);
    out.push(((this * 3 + next + 7) >> 4) as u8);
    let mut last = this;
    this = next;
    for i in 2..width {
        let next = cs(i);
        out.push(((this * 3 + last + 8) >> 4) as u8);
        out.push(((this * 3 + next + 7) >> 4) as u8);
        last = this;
        this = next;
    }
    out.push(((this * 3 + last + 8) >> 4) as u8);
    out.push(((this * 4 + 7) >> 4) as u8);
    out
}

/// jdsample.c's `h2v1_fancy_upsample` for one row, as written there (the reference).
#[cfg(test)]
pub(super) fn h2v1_fancy_reference(input: &[u8], width: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 * width);
    let v = |i: usize| input[i] as i32;
    out.push(v(0) as u8);
    out.push(((v(0) * 3 + v(1) + 2) >> 2) as u8);
    for i in 1..width - 1 {
        out.push(((v(i) * 3 + v(i - 1) + 1) >> 2) as u8);
        out.push(((v(i) * 3 + v(i + 1) + 2) >> 2) as u8);
    }
    out.push(((v(width - 1) * 3 + v(width - 2) + 1) >> 2) as u8);
    out.push(v(width - 1) as u8);
    out
}
