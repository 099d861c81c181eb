//! Elementwise math that is not a plain scalar function: `Pow`, `FloorDiv` and `FloorMod`
//! (their integer kernels check the right operand first, as TensorFlow's do) and `LeakyRelu`
//! (an attr).
use ferroflow_tensor::DType;

use crate::elementwise::{Binary, FLOATS, NUMERIC};
use crate::numeric::{Float, Num};
use crate::{invalid, Inputs, KResult, KernelContext, KernelRegistry, NodeDesc, OpKernel, Outputs};

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
        _ => return Err(invalid("attr 'alpha' must be a float")),
    };
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64],
        |T| Ok(Box::new(LeakyRelu::<T> { alpha: T::from_f64(alpha) }) as Box<dyn OpKernel>))
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

pub(crate) fn register(r: &mut KernelRegistry) {
    r.register("LeakyRelu", "T", FLOATS, k_leaky_relu);
    r.register("FloorDiv", "T", NUMERIC, |d| k_int_checked_binary(d, IntKind::FloorDiv));
    r.register("FloorMod", "T", NUMERIC, |d| k_int_checked_binary(d, IntKind::FloorMod));
    r.register("Pow", "T", NUMERIC, |d| k_int_checked_binary(d, IntKind::Pow));
}
