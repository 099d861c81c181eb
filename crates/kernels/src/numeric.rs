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
            fn exp(self) -> Self { <$t>::exp(self) }
            fn ln(self) -> Self { <$t>::ln(self) }
            fn sqrt(self) -> Self { <$t>::sqrt(self) }
            fn tanh(self) -> Self { <$t>::tanh(self) }
            fn floor(self) -> Self { <$t>::floor(self) }
            fn ceil(self) -> Self { <$t>::ceil(self) }
            fn round_even(self) -> Self { <$t>::round_ties_even(self) }
            fn ln_1p(self) -> Self { <$t>::ln_1p(self) }
            fn exp_m1(self) -> Self { <$t>::exp_m1(self) }
            fn sin(self) -> Self { <$t>::sin(self) }
            fn cos(self) -> Self { <$t>::cos(self) }
            fn powf(self, e: Self) -> Self { <$t>::powf(self, e) }
            fn rem(self, o: Self) -> Self { self % o }
            fn from_f64(v: f64) -> Self { v as $t }
            fn to_f64(self) -> f64 { self as f64 }
            fn erf(self) -> Self { <$t as Erf>::erf(self) }
            fn erfc(self) -> Self { <$t as Erf>::erfc(self) }
        }
    )*};
}
float_num!(f32, f64);

/// libm's error functions per float type (what [`Float::erf`] and [`Float::erfc`] call).
trait Erf {
    fn erf(self) -> Self;
    fn erfc(self) -> Self;
}
impl Erf for f32 {
    fn erf(self) -> Self {
        libm::erff(self)
    }
    fn erfc(self) -> Self {
        libm::erfcf(self)
    }
}
impl Erf for f64 {
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
    /// The error function (libm's, accurate to an ulp or two).
    fn erf(self) -> Self;
    /// The complementary error function 1 - erf(x) (libm's, accurate far into the tail).
    fn erfc(self) -> Self;
    /// From an f64 constant.
    fn from_f64(v: f64) -> Self;
    /// As an f64 (exact).
    fn to_f64(self) -> f64;
}
