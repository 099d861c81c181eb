//! More elementwise math: activations (Relu6, Elu, Selu, Softplus, LeakyRelu), rounding,
//! Erf, trigonometry, Pow, floor division and modulo, comparisons and logical ops.
use ferroflow_tensor::DType;

use crate::elementwise::{Binary, Compare, Unary, EQUALITY, FLOATS, NUMERIC};
use crate::numeric::{Erf, Float, Num};
use crate::{invalid, Factory, Inputs, KResult, KernelContext, KernelRegistry, NodeDesc, OpKernel, Outputs};

pub(crate) fn relu6<T: Float>(x: T) -> T {
    let six = T::from_f64(6.0);
    if x < T::ZERO {
        T::ZERO
    } else if x > six {
        six
    } else {
        x
    }
}
pub(crate) fn elu<T: Float>(x: T) -> T {
    if x < T::ZERO {
        x.exp_m1()
    } else {
        x
    }
}
pub(crate) fn selu<T: Float>(x: T) -> T {
    let scale = T::from_f64(1.050_700_987_355_480_5);
    let alpha = T::from_f64(1.673_263_242_354_377_3);
    if x < T::ZERO {
        scale * alpha * x.exp_m1()
    } else {
        scale * x
    }
}
/// TensorFlow's softplus: x above -log(eps)-2, e^x below log(eps)+2, else log1p(e^x).
pub(crate) fn softplus<T: Float>(x: T) -> T {
    let eps = if T::DTYPE == DType::Float { f32::EPSILON as f64 } else { f64::EPSILON };
    let threshold = T::from_f64(eps.ln() + 2.0);
    if x > -threshold {
        x
    } else if x < threshold {
        x.exp()
    } else {
        x.exp().ln_1p()
    }
}
fn erf<T: Float + Erf>(x: T) -> T {
    x.erf()
}
pub(crate) fn sign<T: Num>(x: T) -> T {
    if x.is_nan() {
        x
    } else if x > T::ZERO {
        T::ONE
    } else if x < T::ZERO {
        T::ONE.neg()
    } else {
        T::ZERO
    }
}
pub(crate) fn floor<T: Float>(x: T) -> T {
    x.floor()
}
pub(crate) fn ceil<T: Float>(x: T) -> T {
    x.ceil()
}
fn round<T: Float>(x: T) -> T {
    x.round_even()
}
pub(crate) fn reciprocal<T: Float>(x: T) -> T {
    T::ONE / x
}
pub(crate) fn log1p<T: Float>(x: T) -> T {
    x.ln_1p()
}
pub(crate) fn expm1<T: Float>(x: T) -> T {
    x.exp_m1()
}
pub(crate) fn sin<T: Float>(x: T) -> T {
    x.sin()
}
pub(crate) fn cos<T: Float>(x: T) -> T {
    x.cos()
}

macro_rules! float_unary {
    ($($fname:ident => $f:ident),*) => {$(
        fn $fname(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
            dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64],
                |T| Ok(Box::new(Unary::<T, _>::new($f::<T>)) as Box<dyn OpKernel>))
        }
    )*};
}
float_unary!(k_relu6 => relu6, k_elu => elu, k_selu => selu, k_softplus => softplus, k_erf => erf,
    k_floor => floor, k_ceil => ceil, k_round => round, k_reciprocal => reciprocal, k_log1p => log1p,
    k_expm1 => expm1, k_sin => sin, k_cos => cos);

fn k_sign(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64, Int32 => i32, Int64 => i64],
        |T| Ok(Box::new(Unary::<T, _>::new(sign::<T>)) as Box<dyn OpKernel>))
}

struct LeakyRelu<T> {
    alpha: T,
}
impl<T: Float> OpKernel for LeakyRelu<T> {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let mut x = inputs.swap_remove(0);
        let a = self.alpha;
        x.as_mut_slice::<T>()?.iter_mut().for_each(|v| {
            if *v < T::ZERO {
                *v = *v * a
            }
        });
        outputs.push(x);
        Ok(())
    }
}
fn k_leaky_relu(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let alpha = match d.def.attr(d.attrs, "alpha").and_then(|v| v.value.as_ref()) {
        Some(ferroflow_proto::attr_value::Value::F(f)) => *f as f64,
        _ => return Err(invalid(format!("node '{}': attr 'alpha' must be a float", d.name))),
    };
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64],
        |T| Ok(Box::new(LeakyRelu::<T> { alpha: T::from_f64(alpha) }) as Box<dyn OpKernel>))
}

pub(crate) fn squared_difference<T: Num>(a: T, b: T) -> T {
    let d = a.sub_w(b);
    d.mul_w(d)
}
fn pow_f<T: Float>(a: T, b: T) -> T {
    a.powf(b)
}
fn floor_div_f<T: Float>(a: T, b: T) -> T {
    (a / b).floor()
}
fn floor_mod_f<T: Float>(a: T, b: T) -> T {
    let r = a.rem(b);
    if r != T::ZERO && ((r < T::ZERO) != (b < T::ZERO)) {
        r + b
    } else {
        r
    }
}

/// Integer ops that need a check of the right operand before running (division by zero,
/// negative exponents), as TensorFlow's integer kernels do.
trait IntOps: Num {
    fn floor_div(a: Self, b: Self) -> Self;
    fn floor_mod(a: Self, b: Self) -> Self;
    fn pow(a: Self, b: Self) -> Self;
    fn is_negative(self) -> bool;
}
macro_rules! int_ops {
    ($($t:ty),*) => {$(
        impl IntOps for $t {
            fn floor_div(a: Self, b: Self) -> Self {
                let q = a.wrapping_div(b);
                if a.wrapping_rem(b) != 0 && ((a < 0) != (b < 0)) { q - 1 } else { q }
            }
            fn floor_mod(a: Self, b: Self) -> Self {
                let r = a.wrapping_rem(b);
                if r != 0 && ((r < 0) != (b < 0)) { r + b } else { r }
            }
            fn pow(a: Self, b: Self) -> Self {
                a.wrapping_pow(b as u32)
            }
            fn is_negative(self) -> bool { self < 0 }
        }
    )*};
}
int_ops!(i32, i64);

/// An integer binary op whose right operand must hold no zero (division) or no negative
/// value (power).
struct CheckedInt<T: IntOps> {
    inner: Binary<T, fn(T, T) -> T>,
    reject: fn(T) -> bool,
    message: &'static str,
}
impl<T: IntOps> OpKernel for CheckedInt<T> {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        if inputs[1].as_slice::<T>()?.iter().any(|&v| (self.reject)(v)) {
            return Err(invalid(self.message));
        }
        self.inner.compute(ctx, inputs, outputs)
    }
}

fn is_zero<T: Num>(v: T) -> bool {
    v == T::ZERO
}
fn is_negative<T: IntOps>(v: T) -> bool {
    v.is_negative()
}

fn float_fn<T: Float>(kind: IntKind) -> fn(T, T) -> T {
    match kind {
        IntKind::FloorDiv => floor_div_f,
        IntKind::FloorMod => floor_mod_f,
        IntKind::Pow => pow_f,
    }
}

/// FloorDiv, FloorMod and Pow: a float function, or a checked integer kernel.
fn k_int_checked_binary(d: &NodeDesc, kind: IntKind) -> KResult<Box<dyn OpKernel>> {
    match d.dtype("T")? {
        DType::Float => Ok(Box::new(Binary::<f32, _>::new(float_fn::<f32>(kind)))),
        DType::Double => Ok(Box::new(Binary::<f64, _>::new(float_fn::<f64>(kind)))),
        DType::Int32 => Ok(int_checked::<i32>(kind)),
        DType::Int64 => Ok(int_checked::<i64>(kind)),
        t => Err(invalid(format!("no {} kernel for {t}", d.def.name))),
    }
}

#[derive(Clone, Copy)]
enum IntKind {
    FloorDiv,
    FloorMod,
    Pow,
}
fn int_checked<T: IntOps>(kind: IntKind) -> Box<dyn OpKernel> {
    let kernel = match kind {
        IntKind::FloorDiv => {
            CheckedInt { inner: Binary::new(T::floor_div as fn(T, T) -> T), reject: is_zero::<T>, message: DIV_ZERO }
        }
        IntKind::FloorMod => {
            CheckedInt { inner: Binary::new(T::floor_mod as fn(T, T) -> T), reject: is_zero::<T>, message: DIV_ZERO }
        }
        IntKind::Pow => CheckedInt {
            inner: Binary::new(T::pow as fn(T, T) -> T),
            reject: is_negative::<T>,
            message: "Integers to negative integer powers are not allowed",
        },
    };
    Box::new(kernel)
}

const DIV_ZERO: &str = "Integer division by zero";

fn k_squared_difference(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64, Int32 => i32, Int64 => i64],
        |T| Ok(Box::new(Binary::<T, _>::new(squared_difference::<T>)) as Box<dyn OpKernel>))
}

fn ge<T: PartialOrd>(a: T, b: T) -> bool {
    a >= b
}
fn lt<T: PartialOrd>(a: T, b: T) -> bool {
    a < b
}
fn le<T: PartialOrd>(a: T, b: T) -> bool {
    a <= b
}
fn ne<T: PartialEq>(a: T, b: T) -> bool {
    a != b
}

/// A comparison kernel per dtype; `f` is generic (not a fn pointer) so the loop inlines and
/// vectorizes.
macro_rules! compare_kernel {
    ($d:expr, $f:ident) => {
        match $d.dtype("T")? {
            DType::Float => Ok(Box::new(Compare::new($f::<f32>)) as Box<dyn OpKernel>),
            DType::Double => Ok(Box::new(Compare::new($f::<f64>)) as Box<dyn OpKernel>),
            DType::Int32 => Ok(Box::new(Compare::new($f::<i32>)) as Box<dyn OpKernel>),
            DType::Int64 => Ok(Box::new(Compare::new($f::<i64>)) as Box<dyn OpKernel>),
            t => Err(invalid(format!("no comparison kernel for {t}"))),
        }
    };
}

fn k_not_equal(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    dispatch!(d.dtype("T")?, d.def.name,
        [Float => f32, Double => f64, Int32 => i32, Int64 => i64, Bool => bool, UInt8 => u8, Int8 => i8, Int16 => i16],
        |T| Ok(Box::new(Compare::<T, _>::new(ne::<T>)) as Box<dyn OpKernel>))
}

fn and(a: bool, b: bool) -> bool {
    a && b
}
fn or(a: bool, b: bool) -> bool {
    a || b
}
fn not(a: bool) -> bool {
    !a
}

pub(crate) fn register(r: &mut KernelRegistry) {
    let floats: [(&'static str, Factory); 13] = [
        ("Relu6", k_relu6),
        ("Elu", k_elu),
        ("Selu", k_selu),
        ("Softplus", k_softplus),
        ("Erf", k_erf),
        ("Floor", k_floor),
        ("Ceil", k_ceil),
        ("Round", k_round),
        ("Reciprocal", k_reciprocal),
        ("Log1p", k_log1p),
        ("Expm1", k_expm1),
        ("Sin", k_sin),
        ("Cos", k_cos),
    ];
    for (op, f) in floats {
        r.register(op, "T", FLOATS, f);
    }
    r.register("LeakyRelu", "T", FLOATS, k_leaky_relu);
    for (op, f) in [
        ("Sign", k_sign as Factory),
        ("SquaredDifference", k_squared_difference),
        ("FloorDiv", |d| k_int_checked_binary(d, IntKind::FloorDiv)),
        ("FloorMod", |d| k_int_checked_binary(d, IntKind::FloorMod)),
        ("Pow", |d| k_int_checked_binary(d, IntKind::Pow)),
    ] {
        r.register(op, "T", NUMERIC, f);
    }
    r.register("GreaterEqual", "T", NUMERIC, |d| compare_kernel!(d, ge));
    r.register("Less", "T", NUMERIC, |d| compare_kernel!(d, lt));
    r.register("LessEqual", "T", NUMERIC, |d| compare_kernel!(d, le));
    r.register("NotEqual", "T", EQUALITY, k_not_equal);
    r.register("LogicalAnd", "", &[], |_| Ok(Box::new(Binary::<bool, _>::new(and))));
    r.register("LogicalOr", "", &[], |_| Ok(Box::new(Binary::<bool, _>::new(or))));
    r.register("LogicalNot", "", &[], |_| Ok(Box::new(Unary::<bool, _>::new(not))));
}
