//! Running a loop compiled for the CPU's widest vectors: the build targets baseline x86-64
//! (SSE2), so kernels whose loops the compiler vectorizes are entered through [`widest`],
//! which checks the CPU once per call and runs the closure inside a function compiled for
//! AVX-512 or AVX2.
//!
//! The closure and everything it calls must be inlined into it (`#[inline(always)]`) to be
//! compiled for those features: a call that stays a call runs the baseline code.

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
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F (checked just above).
            return unsafe { avx512(f) };
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
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
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { avx2(f) };
        }
    }
    f()
}
