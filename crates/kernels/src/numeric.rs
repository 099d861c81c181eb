//! Numeric traits over the element types kernels are generic in.
use ferroflow_tensor::Element;

/// Types with arithmetic.
pub trait Num:
    Element + PartialOrd + std::ops::Add<Output = Self> + std::ops::Sub<Output = Self> + std::ops::Mul<Output = Self>
{
    /// Additive identity.
    const ZERO: Self;
    /// Multiplicative identity.
    const ONE: Self;
    /// The smallest value (-inf for floats), the identity of `max`.
    const LOWEST: Self;
    /// The largest value (+inf for floats), the identity of `min`.
    const HIGHEST: Self;
    /// Addition (wrapping for integers, as TensorFlow's kernels do).
    fn add_w(self, o: Self) -> Self;
    /// Subtraction (wrapping for integers).
    fn sub_w(self, o: Self) -> Self;
    /// Multiplication (wrapping for integers).
    fn mul_w(self, o: Self) -> Self;
    /// Division; for integers an error on zero is the caller's job.
    fn div(self, o: Self) -> Self;
    /// Negation (wrapping for integers).
    fn neg(self) -> Self;
    /// From an element count (for means).
    fn from_usize(n: usize) -> Self;
    /// True for NaN.
    fn is_nan(self) -> bool {
        false
    }
}

macro_rules! int_num {
    ($($t:ty),*) => {$(
        impl Num for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            const LOWEST: Self = <$t>::MIN;
            const HIGHEST: Self = <$t>::MAX;
            fn add_w(self, o: Self) -> Self { self.wrapping_add(o) }
            fn sub_w(self, o: Self) -> Self { self.wrapping_sub(o) }
            fn mul_w(self, o: Self) -> Self { self.wrapping_mul(o) }
            fn div(self, o: Self) -> Self { self.wrapping_div(o) }
            fn neg(self) -> Self { self.wrapping_neg() }
            fn from_usize(n: usize) -> Self { n as $t }
        }
    )*};
}
int_num!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! float_num {
    ($($t:ty),*) => {$(
        impl Num for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const LOWEST: Self = <$t>::NEG_INFINITY;
            const HIGHEST: Self = <$t>::INFINITY;
            fn add_w(self, o: Self) -> Self { self + o }
            fn sub_w(self, o: Self) -> Self { self - o }
            fn mul_w(self, o: Self) -> Self { self * o }
            fn div(self, o: Self) -> Self { self / o }
            fn neg(self) -> Self { -self }
            fn from_usize(n: usize) -> Self { n as $t }
            fn is_nan(self) -> bool { <$t>::is_nan(self) }
        }
        impl Float for $t {
            #[inline(always)]
            fn exp(self) -> Self { <$t as Transcendental>::exp(self) }
            #[inline(always)]
            fn ln(self) -> Self { <$t as Transcendental>::ln(self) }
            fn sqrt(self) -> Self { <$t>::sqrt(self) }
            #[inline(always)]
            fn tanh(self) -> Self { <$t as Transcendental>::tanh(self) }
            #[inline(always)]
            fn sigmoid(self) -> Self { <$t as Transcendental>::sigmoid(self) }
            fn floor(self) -> Self { <$t>::floor(self) }
            fn ceil(self) -> Self { <$t>::ceil(self) }
            fn round_even(self) -> Self { <$t>::round_ties_even(self) }
            #[inline(always)]
            fn ln_1p(self) -> Self { <$t as Transcendental>::ln_1p(self) }
            fn exp_m1(self) -> Self { <$t>::exp_m1(self) }
            fn sin(self) -> Self { <$t>::sin(self) }
            fn cos(self) -> Self { <$t>::cos(self) }
            fn powf(self, e: Self) -> Self { <$t>::powf(self, e) }
            fn rem(self, o: Self) -> Self { self % o }
            fn from_f64(v: f64) -> Self { v as $t }
            fn to_f64(self) -> f64 { self as f64 }
            #[inline(always)]
            fn erf(self) -> Self { <$t as Transcendental>::erf(self) }
            #[inline(always)]
            fn erfc(self) -> Self { <$t as Transcendental>::erfc(self) }
        }
    )*};
}
float_num!(f32, f64);

/// The transcendental functions per float type: float32's are `vmath`'s (they vectorize),
/// float64's the standard library's and libm's.
trait Transcendental {
    fn exp(self) -> Self;
    fn ln(self) -> Self;
    fn ln_1p(self) -> Self;
    fn tanh(self) -> Self;
    fn sigmoid(self) -> Self;
    fn erf(self) -> Self;
    fn erfc(self) -> Self;
}
impl Transcendental for f32 {
    #[inline(always)]
    fn exp(self) -> Self {
        crate::vmath::exp(self)
    }
    #[inline(always)]
    fn ln(self) -> Self {
        crate::vmath::log(self)
    }
    #[inline(always)]
    fn ln_1p(self) -> Self {
        crate::vmath::log1p(self)
    }
    #[inline(always)]
    fn tanh(self) -> Self {
        crate::vmath::tanh(self)
    }
    #[inline(always)]
    fn sigmoid(self) -> Self {
        crate::vmath::sigmoid(self)
    }
    #[inline(always)]
    fn erf(self) -> Self {
        crate::vmath::erf(self)
    }
    #[inline(always)]
    fn erfc(self) -> Self {
        crate::vmath::erfc(self)
    }
}
impl Transcendental for f64 {
    fn exp(self) -> Self {
        f64::exp(self)
    }
    fn ln(self) -> Self {
        f64::ln(self)
    }
    fn ln_1p(self) -> Self {
        f64::ln_1p(self)
    }
    fn tanh(self) -> Self {
        f64::tanh(self)
    }
    fn sigmoid(self) -> Self {
        1.0 / (1.0 + (-self).exp())
    }
    fn erf(self) -> Self {
        libm::erf(self)
    }
    fn erfc(self) -> Self {
        libm::erfc(self)
    }
}

/// Floating-point element types.
pub trait Float: Num + std::ops::Div<Output = Self> + std::ops::Neg<Output = Self> {
    /// e^x.
    fn exp(self) -> Self;
    /// Natural log.
    fn ln(self) -> Self;
    /// Square root.
    fn sqrt(self) -> Self;
    /// Hyperbolic tangent.
    fn tanh(self) -> Self;
    /// The logistic function 1 / (1 + e^-x).
    fn sigmoid(self) -> Self;
    /// Round down.
    fn floor(self) -> Self;
    /// Round up.
    fn ceil(self) -> Self;
    /// Round half to even (TensorFlow's `Round`).
    fn round_even(self) -> Self;
    /// ln(1 + x).
    fn ln_1p(self) -> Self;
    /// e^x - 1.
    fn exp_m1(self) -> Self;
    /// Sine.
    fn sin(self) -> Self;
    /// Cosine.
    fn cos(self) -> Self;
    /// x^e.
    fn powf(self, e: Self) -> Self;
    /// C `fmod`.
    fn rem(self, o: Self) -> Self;
    /// The error function (accurate to a few ulp).
    fn erf(self) -> Self;
    /// The complementary error function 1 - erf(x) (accurate far into the tail).
    fn erfc(self) -> Self;
    /// From an f64 constant.
    fn from_f64(v: f64) -> Self;
    /// As an f64 (exact).
    fn to_f64(self) -> f64;
}
