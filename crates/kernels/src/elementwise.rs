//! Elementwise kernels: unary maps and binary ops with NumPy broadcasting.
use ferroflow_tensor::{broadcast_dims, DType, Element, Tensor};
use rayon::prelude::*;

use crate::numeric::{Float, Num};
use crate::{invalid, Inputs, KResult, KernelContext, KernelRegistry, NodeDesc, OpKernel, Outputs};

use DType::{Double, Float as F32, Int32, Int64};

pub(crate) const FLOATS: &[DType] = &[F32, Double];
pub(crate) const NUMERIC: &[DType] = &[F32, Double, Int32, Int64];
pub(crate) const EQUALITY: &[DType] =
    &[F32, Double, Int32, Int64, DType::Bool, DType::UInt8, DType::Int8, DType::Int16];

/// Elements above which elementwise work is split across the intra-op pool.
const PARALLEL_MIN: usize = 1 << 15;

fn map_in_place<T: Element, F: Fn(T) -> T + Sync>(ctx: &KernelContext, s: &mut [T], f: F) {
    if s.len() >= PARALLEL_MIN && ctx.threads() > 1 {
        let chunk = s.len().div_ceil(ctx.threads() * 4);
        ctx.install(|| s.par_chunks_mut(chunk).for_each(|c| c.iter_mut().for_each(|v| *v = f(*v))));
    } else {
        s.iter_mut().for_each(|v| *v = f(*v));
    }
}

fn map_into<T: Element, F: Fn(T) -> T + Sync>(ctx: &KernelContext, src: &[T], dst: &mut [T], f: F) {
    if dst.len() >= PARALLEL_MIN && ctx.threads() > 1 {
        let chunk = dst.len().div_ceil(ctx.threads() * 4);
        ctx.install(|| {
            dst.par_chunks_mut(chunk).zip(src.par_chunks(chunk)).for_each(|(d, s)| {
                d.iter_mut().zip(s).for_each(|(d, s)| *d = f(*s));
            })
        });
    } else {
        dst.iter_mut().zip(src).for_each(|(d, s)| *d = f(*s));
    }
}

/// An elementwise map. `F` is usually a function item type (zero-sized), so the per-element
/// call is inlined and vectorised rather than made through a pointer.
pub(crate) struct Unary<T, F> {
    f: F,
    _t: std::marker::PhantomData<fn(T) -> T>,
}

impl<T, F> Unary<T, F> {
    pub(crate) fn new(f: F) -> Self {
        Unary { f, _t: std::marker::PhantomData }
    }
}

impl<T: Element, F: Fn(T) -> T + Send + Sync + Copy> OpKernel for Unary<T, F> {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let mut x = inputs.swap_remove(0);
        if let Some(s) = x.try_mut_slice::<T>() {
            map_in_place(ctx, s, self.f);
            outputs.push(x);
            return Ok(());
        }
        // Shared input: write a fresh buffer rather than cloning the shared one.
        let mut out = Tensor::zeros(T::DTYPE, x.dims())?;
        map_into(ctx, x.as_slice::<T>()?, out.as_mut_slice::<T>()?, self.f);
        drop(x);
        outputs.push(out);
        Ok(())
    }
}

pub(crate) fn neg<T: Num>(x: T) -> T {
    x.neg()
}
pub(crate) fn square<T: Num>(x: T) -> T {
    x.mul_w(x)
}
pub(crate) fn abs<T: Num>(x: T) -> T {
    if x < T::ZERO {
        x.neg()
    } else {
        x
    }
}
pub(crate) fn relu<T: Num>(x: T) -> T {
    if x < T::ZERO {
        T::ZERO
    } else {
        x
    }
}
pub(crate) fn sqrt<T: Float>(x: T) -> T {
    x.sqrt()
}
pub(crate) fn rsqrt<T: Float>(x: T) -> T {
    T::ONE / x.sqrt()
}
pub(crate) fn exp<T: Float>(x: T) -> T {
    x.exp()
}
pub(crate) fn log<T: Float>(x: T) -> T {
    x.ln()
}
pub(crate) fn tanh<T: Float>(x: T) -> T {
    x.tanh()
}
pub(crate) fn sigmoid<T: Float>(x: T) -> T {
    T::ONE / (T::ONE + (-x).exp())
}

macro_rules! unary_float {
    ($($fname:ident => $f:ident),*) => {$(
        fn $fname(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
            dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64],
                |T| Ok(Box::new(Unary::<T, _>::new($f::<T>)) as Box<dyn OpKernel>))
        }
    )*};
}
unary_float!(k_sqrt => sqrt, k_rsqrt => rsqrt, k_exp => exp, k_log => log, k_tanh => tanh, k_sigmoid => sigmoid);

macro_rules! unary_numeric {
    ($($fname:ident => $f:ident),*) => {$(
        fn $fname(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
            dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64, Int32 => i32, Int64 => i64],
                |T| Ok(Box::new(Unary::<T, _>::new($f::<T>)) as Box<dyn OpKernel>))
        }
    )*};
}
unary_numeric!(k_abs => abs, k_neg => neg, k_square => square, k_relu => relu);

/// Strides of `dims` laid out in `out`'s (right-aligned) index space; 0 on broadcast axes.
pub(crate) fn broadcast_strides(dims: &[usize], out: &[usize]) -> Vec<usize> {
    let mut strides = vec![0; out.len()];
    let mut s = 1;
    for i in (0..dims.len()).rev() {
        let o = i + out.len() - dims.len();
        strides[o] = if dims[i] == 1 { 0 } else { s };
        s *= dims[i];
    }
    strides
}

/// Applies `f` over the broadcast of `a` and `b` into `out` (row-major over `out_dims`).
pub(crate) fn broadcast_apply<A: Copy, B: Copy, O>(
    out_dims: &[usize],
    (a, a_dims): (&[A], &[usize]),
    (b, b_dims): (&[B], &[usize]),
    out: &mut [O],
    f: impl Fn(A, B) -> O,
) {
    if out.is_empty() {
        return;
    }
    let rank = out_dims.len();
    if rank == 0 {
        out[0] = f(a[0], b[0]);
        return;
    }
    // Fast paths (they vectorize): same-size operands, or one scalar-like operand. An
    // operand with as many elements as the output has the output's layout.
    let n = out.len();
    match (a.len() == n, b.len() == n, a.len() == 1, b.len() == 1) {
        (true, true, _, _) => {
            out.iter_mut().zip(a.iter().zip(b)).for_each(|(o, (&x, &y))| *o = f(x, y));
            return;
        }
        (true, _, _, true) => {
            let y = b[0];
            out.iter_mut().zip(a).for_each(|(o, &x)| *o = f(x, y));
            return;
        }
        (_, true, true, _) => {
            let x = a[0];
            out.iter_mut().zip(b).for_each(|(o, &y)| *o = f(x, y));
            return;
        }
        _ => {}
    }
    let sa = broadcast_strides(a_dims, out_dims);
    let sb = broadcast_strides(b_dims, out_dims);
    let inner = out_dims[rank - 1];
    let (ia, ib) = (sa[rank - 1], sb[rank - 1]);
    let mut idx = vec![0usize; rank - 1];
    let (mut oa, mut ob) = (0usize, 0usize);
    for chunk in out.chunks_mut(inner) {
        for (j, o) in chunk.iter_mut().enumerate() {
            *o = f(a[oa + j * ia], b[ob + j * ib]);
        }
        for ax in (0..rank - 1).rev() {
            idx[ax] += 1;
            oa += sa[ax];
            ob += sb[ax];
            if idx[ax] < out_dims[ax] {
                break;
            }
            oa -= sa[ax] * out_dims[ax];
            ob -= sb[ax] * out_dims[ax];
            idx[ax] = 0;
        }
    }
}

pub(crate) fn out_dims(a: &Tensor, b: &Tensor) -> KResult<Vec<usize>> {
    broadcast_dims(a.dims(), b.dims())
        .ok_or_else(|| invalid(format!("Incompatible shapes: {:?} vs. {:?}", a.dims(), b.dims())))
}

/// An elementwise binary op with broadcasting; `F` as in [`Unary`].
pub(crate) struct Binary<T, F> {
    f: F,
    _t: std::marker::PhantomData<fn(T, T) -> T>,
}

impl<T, F> Binary<T, F> {
    pub(crate) fn new(f: F) -> Self {
        Binary { f, _t: std::marker::PhantomData }
    }
}

impl<T: Element, F: Fn(T, T) -> T + Send + Sync + Copy> OpKernel for Binary<T, F> {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let b = inputs.pop().expect("two inputs");
        let mut a = inputs.pop().expect("two inputs");
        let f = self.f;
        if a.dims() == b.dims() {
            let bs = b.as_slice::<T>()?;
            let zip = |o: &mut [T], x: &[T]| {
                if o.len() >= PARALLEL_MIN && ctx.threads() > 1 {
                    let c = o.len().div_ceil(ctx.threads() * 4);
                    ctx.install(|| {
                        o.par_chunks_mut(c)
                            .zip(bs.par_chunks(c))
                            .zip(x.par_chunks(c))
                            .for_each(|((o, y), x)| o.iter_mut().zip(x).zip(y).for_each(|((o, x), y)| *o = f(*x, *y)))
                    });
                } else {
                    o.iter_mut().zip(x).zip(bs).for_each(|((o, x), y)| *o = f(*x, *y));
                }
            };
            if let Some(s) = a.try_mut_slice::<T>() {
                // In place: read and write the same element, so pass a copy-free alias via index.
                let n = s.len();
                if n >= PARALLEL_MIN && ctx.threads() > 1 {
                    let c = n.div_ceil(ctx.threads() * 4);
                    ctx.install(|| {
                        s.par_chunks_mut(c)
                            .zip(bs.par_chunks(c))
                            .for_each(|(o, y)| o.iter_mut().zip(y).for_each(|(o, y)| *o = f(*o, *y)))
                    });
                } else {
                    s.iter_mut().zip(bs).for_each(|(o, y)| *o = f(*o, *y));
                }
                outputs.push(a);
                return Ok(());
            }
            let mut out = Tensor::zeros(T::DTYPE, a.dims())?;
            zip(out.as_mut_slice::<T>()?, a.as_slice::<T>()?);
            outputs.push(out);
            return Ok(());
        }
        let dims = out_dims(&a, &b)?;
        if dims.as_slice() == a.dims() {
            if let Some(s) = a.try_mut_slice::<T>() {
                let y = b.as_slice::<T>()?;
                if let [y] = y {
                    s.iter_mut().for_each(|o| *o = f(*o, *y));
                } else {
                    let tmp = s.to_vec();
                    broadcast_apply(&dims, (&tmp, &dims), (y, b.dims()), s, f);
                }
                outputs.push(a);
                return Ok(());
            }
        }
        let mut out = Tensor::zeros(T::DTYPE, &dims)?;
        let o = out.as_mut_slice::<T>()?;
        match (a.as_slice::<T>()?, b.as_slice::<T>()?) {
            (x, [y]) if x.len() == o.len() => o.iter_mut().zip(x).for_each(|(o, x)| *o = f(*x, *y)),
            ([x], y) if y.len() == o.len() => o.iter_mut().zip(y).for_each(|(o, y)| *o = f(*x, *y)),
            (x, y) => broadcast_apply(&dims, (x, a.dims()), (y, b.dims()), o, f),
        }
        outputs.push(out);
        Ok(())
    }
}

pub(crate) fn add<T: Num>(a: T, b: T) -> T {
    a.add_w(b)
}
pub(crate) fn sub<T: Num>(a: T, b: T) -> T {
    a.sub_w(b)
}
pub(crate) fn mul<T: Num>(a: T, b: T) -> T {
    a.mul_w(b)
}
pub(crate) fn div<T: Num>(a: T, b: T) -> T {
    a.div(b)
}
pub(crate) fn maximum<T: Num>(a: T, b: T) -> T {
    if a.is_nan() || b.is_nan() {
        return if a.is_nan() { a } else { b };
    }
    if a < b {
        b
    } else {
        a
    }
}
pub(crate) fn minimum<T: Num>(a: T, b: T) -> T {
    if a.is_nan() || b.is_nan() {
        return if a.is_nan() { a } else { b };
    }
    if b < a {
        b
    } else {
        a
    }
}

macro_rules! binary_numeric {
    ($($fname:ident => $f:ident),*) => {$(
        fn $fname(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
            dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64, Int32 => i32, Int64 => i64],
                |T| Ok(Box::new(Binary::<T, _>::new($f::<T>)) as Box<dyn OpKernel>))
        }
    )*};
}
binary_numeric!(k_add => add, k_sub => sub, k_mul => mul, k_max => maximum, k_min => minimum);

fn k_div(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64], |T| Ok(Box::new(Binary::<T, _>::new(div::<T>)) as Box<dyn OpKernel>))
}

/// An elementwise comparison with broadcasting, producing bools; `F` as in [`Unary`].
pub(crate) struct Compare<T, F> {
    f: F,
    _t: std::marker::PhantomData<fn(T, T) -> bool>,
}

impl<T, F> Compare<T, F> {
    pub(crate) fn new(f: F) -> Self {
        Compare { f, _t: std::marker::PhantomData }
    }
}

impl<T: Element, F: Fn(T, T) -> bool + Send + Sync + Copy> OpKernel for Compare<T, F> {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let (a, b) = (&inputs[0], &inputs[1]);
        let dims = out_dims(a, b)?;
        let mut out = Tensor::zeros(DType::Bool, &dims)?;
        broadcast_apply(
            &dims,
            (a.as_slice::<T>()?, a.dims()),
            (b.as_slice::<T>()?, b.dims()),
            out.as_mut_slice::<bool>()?,
            self.f,
        );
        outputs.push(out);
        Ok(())
    }
}

fn equal<T: PartialEq>(a: T, b: T) -> bool {
    a == b
}

fn greater<T: PartialOrd>(a: T, b: T) -> bool {
    a > b
}

fn k_greater(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64, Int32 => i32, Int64 => i64],
        |T| Ok(Box::new(Compare::<T, _>::new(greater::<T>)) as Box<dyn OpKernel>))
}

fn k_equal(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    dispatch!(d.dtype("T")?, d.def.name,
        [Float => f32, Double => f64, Int32 => i32, Int64 => i64, Bool => bool, UInt8 => u8, Int8 => i8, Int16 => i16],
        |T| Ok(Box::new(Compare::<T, _>::new(equal::<T>)) as Box<dyn OpKernel>))
}

pub(crate) fn register(r: &mut KernelRegistry) {
    for (op, f) in [
        ("Sqrt", k_sqrt as crate::Factory),
        ("Rsqrt", k_rsqrt),
        ("Exp", k_exp),
        ("Log", k_log),
        ("Tanh", k_tanh),
        ("Sigmoid", k_sigmoid),
        ("RealDiv", k_div),
    ] {
        r.register(op, "T", FLOATS, f);
    }
    for (op, f) in [
        ("Abs", k_abs as crate::Factory),
        ("Neg", k_neg),
        ("Square", k_square),
        ("Relu", k_relu),
        ("Add", k_add),
        ("AddV2", k_add),
        ("Sub", k_sub),
        ("Mul", k_mul),
        ("Maximum", k_max),
        ("Minimum", k_min),
    ] {
        r.register(op, "T", NUMERIC, f);
    }
    r.register("Equal", "T", EQUALITY, k_equal);
    r.register("Greater", "T", NUMERIC, k_greater);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_general_case() {
        // [2,1,3] + [4,1] -> [2,4,3]
        let a: Vec<f32> = (0..6).map(|x| x as f32).collect();
        let b: Vec<f32> = (0..4).map(|x| 10.0 * x as f32).collect();
        let mut out = vec![0f32; 24];
        broadcast_apply(&[2, 4, 3], (&a, &[2, 1, 3]), (&b, &[4, 1]), &mut out, |x, y| x + y);
        for i in 0..2 {
            for j in 0..4 {
                for k in 0..3 {
                    assert_eq!(out[i * 12 + j * 3 + k], a[i * 3 + k] + b[j]);
                }
            }
        }
    }
}
