//! The one place kernels choose an instruction set. The build targets baseline x86-64 (SSE2),
//! so kernels whose loops the compiler vectorizes are entered through [`widest`] or [`avx2`],
//! which check the CPU once per call and run the closure inside a function compiled for
//! AVX-512 or AVX2; kernels written with intrinsics ask [`has_avx512f`], [`has_avx2`] or
//! [`intel_avx512`] before calling them.
//!
//! The closure and everything it calls must be inlined into it (`#[inline(always)]`) to be
//! compiled for those features: a call that stays a call runs the baseline code.

/// Whether the CPU has AVX-512F (false off x86-64). The standard library caches what it read
/// from the CPU: a call is one atomic load.
#[inline]
pub(crate) fn has_avx512f() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("avx512f");
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Whether the CPU has AVX2 (false off x86-64); cached as [`has_avx512f`].
#[inline]
pub(crate) fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("avx2");
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Whether the CPU has AVX2 and FMA (false off x86-64); cached as [`has_avx512f`].
#[inline]
pub(crate) fn has_avx2_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma");
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Whether the CPU is an Intel one with AVX-512F: for choices measured to pay on Intel's
/// cores and to cost on AMD's with the same instructions (non-temporal stores of large
/// convolution outputs). The vendor is read once.
pub(crate) fn intel_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static INTEL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *INTEL.get_or_init(|| {
            // `__cpuid` is a safe function from Rust 1.94 and unsafe before it (the declared
            // rust-version is older); leaf 0 exists on every x86-64 CPU.
            #[allow(unused_unsafe)]
            // SAFETY: CPUID leaf 0 is defined on every x86-64 processor.
            let id = unsafe { std::arch::x86_64::__cpuid(0) };
            let vendor = [id.ebx, id.edx, id.ecx].map(u32::to_le_bytes).concat();
            vendor == b"GenuineIntel"
        }) && has_avx512f()
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Runs `f` compiled for AVX-512F where the CPU has it, else AVX2 + FMA, else the baseline.
#[inline(always)]
pub(crate) fn widest<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f")]
        unsafe fn avx512<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        if has_avx512f() {
            // SAFETY: the CPU supports AVX-512F (checked just above).
            return unsafe { avx512(f) };
        }
        if has_avx2_fma() {
            // SAFETY: the CPU supports AVX2 and FMA (checked just above).
            return unsafe { avx2(f) };
        }
    }
    f()
}

/// Runs `f` compiled for AVX2 where the CPU has it, else the baseline: for kernels whose steps
/// are 8 lanes of f32 (one AVX2 register), which gain nothing from AVX-512.
#[inline(always)]
pub(crate) fn avx2<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2")]
        unsafe fn avx2<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        if has_avx2() {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { avx2(f) };
        }
    }
    f()
}

/// Asks the CPU to bring the cache line at `p` into its caches ahead of use (`prefetcht0`;
/// a hint: it never faults, so `p` may point anywhere).
#[inline(always)]
fn prefetch_line(p: *const u8) {
    // SAFETY: prefetching is a hint with no architectural effect; it never faults, whatever
    // the address (callers form it with wrapping arithmetic).
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Cache lines to bring in ahead of use a few at a time, spread over a loop (a burst of
/// prefetches fills the CPU's miss queue and stalls the loop it should overlap with).
pub(crate) struct Ahead {
    ranges: [(*const u8, usize); 4],
    len: usize,
    /// The next range and the byte offset in it.
    at: (usize, usize),
}

impl Ahead {
    /// Nothing to bring in.
    pub(crate) fn none() -> Ahead {
        Ahead { ranges: [(std::ptr::null(), 0); 4], len: 0, at: (0, 0) }
    }

    /// Adds `n` elements from `p` (ignored beyond four ranges).
    pub(crate) fn add<T>(&mut self, p: *const T, n: usize) {
        if self.len < self.ranges.len() && n > 0 {
            self.ranges[self.len] = (p as *const u8, n * std::mem::size_of::<T>());
            self.len += 1;
        }
    }

    /// Total cache lines in the ranges.
    pub(crate) fn lines(&self) -> usize {
        self.ranges[..self.len].iter().map(|r| r.1.div_ceil(64)).sum()
    }

    /// Prefetches the next `lines` lines.
    #[inline(always)]
    pub(crate) fn advance(&mut self, mut lines: usize) {
        while lines > 0 && self.at.0 < self.len {
            let (p, bytes) = self.ranges[self.at.0];
            if self.at.1 >= bytes {
                self.at = (self.at.0 + 1, 0);
                continue;
            }
            prefetch_line(p.wrapping_add(self.at.1));
            self.at.1 += 64;
            lines -= 1;
        }
    }
}

// Loops over slices compiled for the widest vectors. Two things keep a loop inside the
// function [`widest`] compiles for AVX-512: the closure it runs is `#[inline(always)]` (a
// large closure body, as a transcendental function makes, is otherwise called, and compiled
// for the baseline), and the loop is an index loop (an iterator's `for_each` is a `fold` the
// compiler may leave as a call, compiled for the baseline too). Measured: erf over 16k
// floats in cache, 1.7 ns an element this way against 3.5 through `iter().zip().for_each`.

/// `dst[i] = f(src[i])`.
#[inline(always)]
pub(crate) fn map<A: Copy, O>(dst: &mut [O], src: &[A], f: impl Fn(A) -> O) {
    widest(
        #[inline(always)]
        || {
            let n = dst.len().min(src.len());
            let (dst, src) = (&mut dst[..n], &src[..n]);
            for i in 0..n {
                dst[i] = f(src[i]);
            }
        },
    )
}

/// `dst[i] = f(dst[i])`.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // an index loop on purpose (see above)
pub(crate) fn map_in_place<T: Copy>(dst: &mut [T], f: impl Fn(T) -> T) {
    widest(
        #[inline(always)]
        || {
            for i in 0..dst.len() {
                dst[i] = f(dst[i]);
            }
        },
    )
}

/// `dst[i] = f(a[i], b[i])`.
#[inline(always)]
pub(crate) fn zip<A: Copy, B: Copy, O>(dst: &mut [O], a: &[A], b: &[B], f: impl Fn(A, B) -> O) {
    widest(
        #[inline(always)]
        || {
            let n = dst.len().min(a.len()).min(b.len());
            let (dst, a, b) = (&mut dst[..n], &a[..n], &b[..n]);
            for i in 0..n {
                dst[i] = f(a[i], b[i]);
            }
        },
    )
}

/// `dst[i] = f(dst[i], b[i])`.
#[inline(always)]
pub(crate) fn zip_in_place<T: Copy, B: Copy>(dst: &mut [T], b: &[B], f: impl Fn(T, B) -> T) {
    widest(
        #[inline(always)]
        || {
            let n = dst.len().min(b.len());
            let (dst, b) = (&mut dst[..n], &b[..n]);
            for i in 0..n {
                dst[i] = f(dst[i], b[i]);
            }
        },
    )
}
