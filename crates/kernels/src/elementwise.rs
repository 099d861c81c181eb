//! Elementwise kernels: unary maps and binary ops with NumPy broadcasting, for every op the
//! registry declares elementwise (`ferroflow_ops::UnaryFn` / `BinaryFn`). Each scalar function
//! is named once, in [`scalar_fns!`]'s table below; the standalone kernels, the
//! `_FusedElementwise` program steps and the fused contraction epilogues are all made from it.
use ferroflow_ops::{BinaryFn, Elementwise, OpRegistry, UnaryFn};
use ferroflow_tensor::{broadcast_dims, DType, Element, Tensor};

use crate::numeric::{Float, Num};
use crate::{invalid, Inputs, KResult, KernelContext, KernelRegistry, NodeDesc, OpKernel, Outputs};

use DType::{Double, Float as F32, Int32, Int64};

pub(crate) const FLOATS: &[DType] = &[F32, Double];
pub(crate) const NUMERIC: &[DType] = &[F32, Double, Int32, Int64];

/// Elements above which elementwise work is split across the intra-op pool.
const PARALLEL_MIN: usize = 1 << 15;

// `f` is copied into each task (a call through `&f` was not inlined, and its loop not
// compiled for the widest vectors).
fn map_in_place<T: Element, F: Fn(T) -> T + Sync + Copy>(ctx: &KernelContext, s: &mut [T], f: F) {
    if s.len() >= PARALLEL_MIN && ctx.threads() > 1 {
        let chunk = s.len().div_ceil(ctx.threads() * 4);
        ctx.for_each_chunk_mut(s, chunk, |_, c| crate::isa::map_in_place(c, f));
    } else {
        crate::isa::map_in_place(s, f);
    }
}

fn map_into<T: Element, F: Fn(T) -> T + Sync + Copy>(ctx: &KernelContext, src: &[T], dst: &mut [T], f: F) {
    if dst.len() >= PARALLEL_MIN && ctx.threads() > 1 {
        let chunk = dst.len().div_ceil(ctx.threads() * 4);
        ctx.for_each_chunk_mut(dst, chunk, |i, d| {
            let s = &src[i * chunk..];
            crate::isa::map(d, s, f);
        });
    } else {
        crate::isa::map(dst, src, f);
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
        if let ([x], []) = (inputs.as_mut_slice(), outputs.as_slice()) {
            if let Some(s) = x.try_mut_slice::<T>() {
                // In place, and the vectors swapped: the tensor itself does not move.
                map_in_place(ctx, s, self.f);
                std::mem::swap(inputs, outputs);
                return Ok(());
            }
        }
        let mut x = inputs.swap_remove(0);
        if let Some(s) = x.try_mut_slice::<T>() {
            map_in_place(ctx, s, self.f);
            outputs.push(x);
            return Ok(());
        }
        // Shared input: write a fresh buffer rather than cloning the shared one.
        let mut out = Tensor::for_overwrite(T::DTYPE, x.dims())?;
        map_into(ctx, x.as_slice::<T>()?, out.as_mut_slice::<T>()?, self.f);
        drop(x);
        outputs.push(out);
        Ok(())
    }
}

// The scalar functions. Fused kernels call these same functions, so fused and unfused
// results are bit-identical.

#[inline(always)]
pub(crate) fn neg<T: Num>(x: T) -> T {
    x.neg()
}
#[inline(always)]
pub(crate) fn square<T: Num>(x: T) -> T {
    x.mul_w(x)
}
#[inline(always)]
pub(crate) fn abs<T: Num>(x: T) -> T {
    if x < T::ZERO {
        x.neg()
    } else {
        x
    }
}
#[inline(always)]
pub(crate) fn relu<T: Num>(x: T) -> T {
    if x < T::ZERO {
        T::ZERO
    } else {
        x
    }
}
#[inline(always)]
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
#[inline(always)]
fn sqrt<T: Float>(x: T) -> T {
    x.sqrt()
}
#[inline(always)]
fn rsqrt<T: Float>(x: T) -> T {
    T::ONE / x.sqrt()
}
#[inline(always)]
fn exp<T: Float>(x: T) -> T {
    x.exp()
}
#[inline(always)]
fn log<T: Float>(x: T) -> T {
    x.ln()
}
#[inline(always)]
fn tanh<T: Float>(x: T) -> T {
    x.tanh()
}
#[inline(always)]
fn sigmoid<T: Float>(x: T) -> T {
    x.sigmoid()
}
#[inline(always)]
fn relu6<T: Float>(x: T) -> T {
    let six = T::from_f64(6.0);
    if x < T::ZERO {
        T::ZERO
    } else if x > six {
        six
    } else {
        x
    }
}
#[inline(always)]
fn elu<T: Float>(x: T) -> T {
    if x < T::ZERO {
        x.exp_m1()
    } else {
        x
    }
}
#[inline(always)]
fn selu<T: Float>(x: T) -> T {
    let scale = T::from_f64(1.050_700_987_355_480_5);
    let alpha = T::from_f64(1.673_263_242_354_377_3);
    if x < T::ZERO {
        scale * alpha * x.exp_m1()
    } else {
        scale * x
    }
}
/// TensorFlow's softplus: x above -log(eps)-2, e^x below log(eps)+2, else log1p(e^x). Every
/// branch is computed and one selected, so the loop vectorizes.
#[inline(always)]
pub(crate) fn softplus<T: Float>(x: T) -> T {
    // ln(ε) + 2 for float32 and float64.
    let threshold =
        T::from_f64(if T::DTYPE == DType::Float { -13.942_385_152_878_742 } else { -34.043_653_389_117_15 });
    let e = x.exp();
    let l = e.ln_1p();
    let below = if x < threshold { e } else { l };
    if x > -threshold {
        x
    } else {
        below
    }
}
/// TensorFlow's softsign: `x / (|x| + 1)`.
#[inline(always)]
fn softsign<T: Float>(x: T) -> T {
    x / (abs(x) + T::ONE)
}
#[inline(always)]
fn erf<T: Float>(x: T) -> T {
    x.erf()
}
#[inline(always)]
fn erfc<T: Float>(x: T) -> T {
    x.erfc()
}
#[inline(always)]
fn floor<T: Float>(x: T) -> T {
    x.floor()
}
#[inline(always)]
fn ceil<T: Float>(x: T) -> T {
    x.ceil()
}
#[inline(always)]
fn round<T: Float>(x: T) -> T {
    x.round_even()
}
#[inline(always)]
fn reciprocal<T: Float>(x: T) -> T {
    T::ONE / x
}
#[inline(always)]
fn log1p<T: Float>(x: T) -> T {
    x.ln_1p()
}
#[inline(always)]
fn expm1<T: Float>(x: T) -> T {
    x.exp_m1()
}
#[inline(always)]
fn sin<T: Float>(x: T) -> T {
    x.sin()
}
#[inline(always)]
fn cos<T: Float>(x: T) -> T {
    x.cos()
}

#[inline(always)]
pub(crate) fn add<T: Num>(a: T, b: T) -> T {
    a.add_w(b)
}
#[inline(always)]
pub(crate) fn sub<T: Num>(a: T, b: T) -> T {
    a.sub_w(b)
}
#[inline(always)]
pub(crate) fn mul<T: Num>(a: T, b: T) -> T {
    a.mul_w(b)
}
#[inline(always)]
fn div<T: Num>(a: T, b: T) -> T {
    a.div(b)
}
#[inline(always)]
fn maximum<T: Num>(a: T, b: T) -> T {
    if a.is_nan() || b.is_nan() {
        return if a.is_nan() { a } else { b };
    }
    if a < b {
        b
    } else {
        a
    }
}
#[inline(always)]
fn minimum<T: Num>(a: T, b: T) -> T {
    if a.is_nan() || b.is_nan() {
        return if a.is_nan() { a } else { b };
    }
    if b < a {
        b
    } else {
        a
    }
}
#[inline(always)]
fn squared_difference<T: Num>(a: T, b: T) -> T {
    let d = a.sub_w(b);
    d.mul_w(d)
}
/// TensorFlow's xdivy: `x` itself where it is ±0, else `x / y`.
#[inline(always)]
fn xdivy<T: Float>(x: T, y: T) -> T {
    if x == T::ZERO {
        x
    } else {
        x / y
    }
}
/// TensorFlow's div_no_nan: 0 where `y` is 0, else `x / y`.
#[inline(always)]
fn div_no_nan<T: Float>(x: T, y: T) -> T {
    if y == T::ZERO {
        T::ZERO
    } else {
        x / y
    }
}
/// TensorFlow's xlogy: `x` itself where it is ±0, else `x * log(y)`.
#[inline(always)]
fn xlogy<T: Float>(x: T, y: T) -> T {
    if x == T::ZERO {
        x
    } else {
        x * y.ln()
    }
}

/// Something made from a unary scalar function, generic over which one (so each use is
/// monomorphised per function and its loops inline and vectorise).
pub(crate) trait UnaryVisitor<T> {
    /// What is made.
    type Out;
    /// Makes it from `f`.
    fn visit<F: Fn(T) -> T + Copy + Send + Sync + 'static>(self, f: F) -> Self::Out;
}

/// Something made from a binary scalar function; see [`UnaryVisitor`].
pub(crate) trait BinaryVisitor<T> {
    /// What is made.
    type Out;
    /// Makes it from `f`.
    fn visit<F: Fn(T, T) -> T + Copy + Send + Sync + 'static>(self, f: F) -> Self::Out;
}

/// The one table of elementwise scalar functions: for each `UnaryFn`/`BinaryFn` variant its
/// function (handed to visitors as an `#[inline(always)]` closure that calls it: a function
/// item is called through a shim the compiler may keep as a call, and a loop that calls it is
/// then not vectorized), grouped by the dtypes its kernel runs on (`numeric`: floats and integers;
/// `float`: floats only). Generates the dtype lists and the visitor dispatch.
macro_rules! scalar_fns {
    (
        unary numeric { $($un:ident => $uf:ident),* $(,)? }
        unary float { $($ufv:ident => $uff:ident),* $(,)? }
        binary numeric { $($bn:ident => $bf:ident),* $(,)? }
        binary float { $($bfv:ident => $bff:ident),* $(,)? }
    ) => {
        /// The dtypes a unary elementwise op has kernels for.
        pub(crate) fn unary_dtypes(f: UnaryFn) -> &'static [DType] {
            match f {
                $(UnaryFn::$un => NUMERIC,)*
                $(UnaryFn::$ufv => FLOATS,)*
            }
        }
        /// The dtypes a binary elementwise op has kernels for.
        pub(crate) fn binary_dtypes(f: BinaryFn) -> &'static [DType] {
            match f {
                $(BinaryFn::$bn => NUMERIC,)*
                $(BinaryFn::$bfv => FLOATS,)*
            }
        }
        /// Calls `v` with the scalar function of `f` for a float type.
        pub(crate) fn visit_unary<T: Float + Element, V: UnaryVisitor<T>>(f: UnaryFn, v: V) -> V::Out {
            match f {
                $(UnaryFn::$un => v.visit(#[inline(always)] |x| $uf::<T>(x)),)*
                $(UnaryFn::$ufv => v.visit(#[inline(always)] |x| $uff::<T>(x)),)*
            }
        }
        /// Calls `v` with the scalar function of `f` for an integer type, if `f` has one.
        fn visit_unary_int<T: Num + Element, V: UnaryVisitor<T>>(f: UnaryFn, v: V) -> Option<V::Out> {
            match f {
                $(UnaryFn::$un => Some(v.visit(#[inline(always)] |x| $uf::<T>(x))),)*
                _ => None,
            }
        }
        /// Calls `v` with the scalar function of `f` for a float type.
        pub(crate) fn visit_binary<T: Float + Element, V: BinaryVisitor<T>>(f: BinaryFn, v: V) -> V::Out {
            match f {
                $(BinaryFn::$bn => v.visit(#[inline(always)] |x, y| $bf::<T>(x, y)),)*
                $(BinaryFn::$bfv => v.visit(#[inline(always)] |x, y| $bff::<T>(x, y)),)*
            }
        }
        /// Calls `v` with the scalar function of `f` for an integer type, if `f` has one.
        fn visit_binary_int<T: Num + Element, V: BinaryVisitor<T>>(f: BinaryFn, v: V) -> Option<V::Out> {
            match f {
                $(BinaryFn::$bn => Some(v.visit(#[inline(always)] |x, y| $bf::<T>(x, y))),)*
                _ => None,
            }
        }
    };
}

scalar_fns! {
    unary numeric { Abs => abs, Neg => neg, Square => square, Relu => relu, Sign => sign }
    unary float {
        Sqrt => sqrt, Rsqrt => rsqrt, Exp => exp, Log => log, Tanh => tanh, Sigmoid => sigmoid,
        Relu6 => relu6, Elu => elu, Selu => selu, Softplus => softplus, Softsign => softsign, Erf => erf,
        Erfc => erfc,        Floor => floor, Ceil => ceil, Round => round, Reciprocal => reciprocal, Log1p => log1p,
        Expm1 => expm1, Sin => sin, Cos => cos,
    }
    binary numeric {
        Add => add, Sub => sub, Mul => mul, Maximum => maximum, Minimum => minimum,
        SquaredDifference => squared_difference,
    }
    binary float { RealDiv => div, Xlogy => xlogy, Xdivy => xdivy, DivNoNan => div_no_nan }
}
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

/// The broadcast of two operands over an output shape, walked as rows: adjacent axes are
/// merged where both operands are laid out alike across them (`[N,H,W,C] × [N,1,1,C]` is
/// `[N, H·W, C]`, `[N,H,W,C] + [C]` is `[N·H·W, C]`), so the last axis is as long as it can be
/// and along it each operand either walks its elements (stride 1) or repeats one (stride 0):
/// every row is one loop the compiler vectorizes.
pub(crate) struct Broadcast {
    /// The merged axes before the last, with each operand's strides along them.
    outer: Vec<(usize, usize, usize)>,
    /// The last axis's length and the operands' strides along it (0 or 1).
    inner: usize,
    ia: usize,
    ib: usize,
}

impl Broadcast {
    pub(crate) fn new(out: &[usize], a: &[usize], b: &[usize]) -> Broadcast {
        let (sa, sb) = (broadcast_strides(a, out), broadcast_strides(b, out));
        let mut axes: Vec<(usize, usize, usize)> = Vec::with_capacity(out.len());
        for i in (0..out.len()).filter(|&i| out[i] != 1) {
            match axes.last_mut() {
                // Axis i continues the previous one for both operands: one axis.
                Some(last) if last.1 == sa[i] * out[i] && last.2 == sb[i] * out[i] => {
                    *last = (last.0 * out[i], sa[i], sb[i]);
                }
                _ => axes.push((out[i], sa[i], sb[i])),
            }
        }
        let (inner, ia, ib) = axes.pop().unwrap_or((1, 0, 0));
        Broadcast { outer: axes, inner, ia, ib }
    }

    /// Rows of `inner` elements in the output.
    fn rows(&self) -> usize {
        self.outer.iter().map(|a| a.0).product()
    }

    /// The operands' offsets at the start of row `r`.
    fn offsets(&self, mut r: usize) -> (usize, usize) {
        let (mut oa, mut ob) = (0, 0);
        for &(d, sa, sb) in self.outer.iter().rev() {
            oa += (r % d) * sa;
            ob += (r % d) * sb;
            r /= d;
        }
        (oa, ob)
    }

    /// Calls `row(r, oa, ob)` for rows `first..first + count`, in order.
    #[inline(always)]
    fn walk(&self, first: usize, count: usize, mut row: impl FnMut(usize, usize, usize)) {
        let rank = self.outer.len();
        let mut idx = vec![0usize; rank];
        let mut r = first;
        for (ax, &(d, _, _)) in self.outer.iter().enumerate().rev() {
            idx[ax] = r % d;
            r /= d;
        }
        let (mut oa, mut ob) = self.offsets(first);
        for k in 0..count {
            row(first + k, oa, ob);
            for ax in (0..rank).rev() {
                let (d, sa, sb) = self.outer[ax];
                idx[ax] += 1;
                oa += sa;
                ob += sb;
                if idx[ax] < d {
                    break;
                }
                oa -= sa * d;
                ob -= sb * d;
                idx[ax] = 0;
            }
        }
    }

    /// Rows per task when `n` output elements are split over the pool (0: run on this thread).
    fn rows_per_task(&self, ctx: &KernelContext, n: usize) -> usize {
        if n >= PARALLEL_MIN && ctx.threads() > 1 {
            self.rows().div_ceil(ctx.threads() * 4).max(1)
        } else {
            0
        }
    }

    /// `out = f(a, b)` over the broadcast, split across the pool when large.
    pub(crate) fn apply<A, B, O, F>(&self, ctx: &KernelContext, a: &[A], b: &[B], out: &mut [O], f: F)
    where
        A: Copy + Sync,
        B: Copy + Sync,
        O: Send,
        F: Fn(A, B) -> O + Sync + Copy,
    {
        if out.is_empty() {
            return;
        }
        let inner = self.inner;
        let run = |first: usize, chunk: &mut [O]| {
            crate::isa::widest(
                #[inline(always)]
                || {
                    self.walk(first, chunk.len() / inner.max(1), |r, oa, ob| {
                        let o = &mut chunk[(r - first) * inner..(r - first + 1) * inner];
                        row(o, &a[oa..], self.ia, &b[ob..], self.ib, f)
                    })
                },
            )
        };
        match self.rows_per_task(ctx, out.len()) {
            0 => run(0, out),
            per => ctx.for_each_chunk_mut(out, per * inner, |i, chunk| run(i * per, chunk)),
        }
    }

    /// `out = f(out, b)` over the broadcast, where `out` is the first operand (it has the
    /// output's shape), split across the pool when large.
    pub(crate) fn apply_in_place<T, B, F>(&self, ctx: &KernelContext, out: &mut [T], b: &[B], f: F)
    where
        T: Copy + Send,
        B: Copy + Sync,
        F: Fn(T, B) -> T + Sync + Copy,
    {
        if out.is_empty() {
            return;
        }
        let inner = self.inner;
        let run = |first: usize, chunk: &mut [T]| {
            crate::isa::widest(
                #[inline(always)]
                || {
                    self.walk(first, chunk.len() / inner.max(1), |r, _, ob| {
                        let o = &mut chunk[(r - first) * inner..(r - first + 1) * inner];
                        if self.ib == 1 {
                            let b = &b[ob..ob + inner];
                            for i in 0..inner {
                                o[i] = f(o[i], b[i]);
                            }
                        } else {
                            let y = b[ob];
                            for v in o.iter_mut() {
                                *v = f(*v, y);
                            }
                        }
                    })
                },
            )
        };
        match self.rows_per_task(ctx, out.len()) {
            0 => run(0, out),
            per => ctx.for_each_chunk_mut(out, per * inner, |i, chunk| run(i * per, chunk)),
        }
    }
}

/// One row of a broadcast: each operand walked (stride 1) or repeated (stride 0).
#[inline(always)]
fn row<A: Copy, B: Copy, O>(o: &mut [O], a: &[A], ia: usize, b: &[B], ib: usize, f: impl Fn(A, B) -> O) {
    let n = o.len();
    match (ia, ib) {
        (1, 1) => {
            let (a, b) = (&a[..n], &b[..n]);
            for i in 0..n {
                o[i] = f(a[i], b[i]);
            }
        }
        (1, _) => {
            let (a, y) = (&a[..n], b[0]);
            for i in 0..n {
                o[i] = f(a[i], y);
            }
        }
        (_, 1) => {
            let (x, b) = (a[0], &b[..n]);
            for i in 0..n {
                o[i] = f(x, b[i]);
            }
        }
        _ => {
            let (x, y) = (a[0], b[0]);
            for v in o.iter_mut() {
                *v = f(x, y);
            }
        }
    }
}

/// Applies `f` over the broadcast of `a` and `b` into `out` (row-major over `out_dims`), on
/// this thread.
pub(crate) fn broadcast_apply<A: Copy + Sync, B: Copy + Sync, O: Send>(
    out_dims: &[usize],
    (a, a_dims): (&[A], &[usize]),
    (b, b_dims): (&[B], &[usize]),
    out: &mut [O],
    f: impl Fn(A, B) -> O + Sync + Copy,
) {
    let serial = KernelContext { intra_op: None, resources: None, step: None };
    Broadcast::new(out_dims, a_dims, b_dims).apply(&serial, a, b, out, f);
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
                    ctx.for_each_chunk_mut(o, c, |i, o| zip_into(o, &x[i * c..], &bs[i * c..], f));
                } else {
                    zip_into(o, x, bs, f);
                }
            };
            if let Some(s) = a.try_mut_slice::<T>() {
                // In place: read and write the same element, so pass a copy-free alias via index.
                let n = s.len();
                if n >= PARALLEL_MIN && ctx.threads() > 1 {
                    let c = n.div_ceil(ctx.threads() * 4);
                    ctx.for_each_chunk_mut(s, c, |i, o| zip_in_place(o, &bs[i * c..], f));
                } else {
                    zip_in_place(s, bs, f);
                }
                outputs.push(a);
                return Ok(());
            }
            let mut out = Tensor::for_overwrite(T::DTYPE, a.dims())?;
            zip(out.as_mut_slice::<T>()?, a.as_slice::<T>()?);
            outputs.push(out);
            return Ok(());
        }
        let dims = out_dims(&a, &b)?;
        if dims.as_slice() == a.dims() {
            if let Some(s) = a.try_mut_slice::<T>() {
                let y = b.as_slice::<T>()?;
                if let &[y] = y {
                    map_in_place(ctx, s, move |o| f(o, y));
                } else {
                    Broadcast::new(&dims, &dims, b.dims()).apply_in_place(ctx, s, y, f);
                }
                outputs.push(a);
                return Ok(());
            }
        }
        // Every element is written below.
        let mut out = Tensor::for_overwrite(T::DTYPE, &dims)?;
        let o = out.as_mut_slice::<T>()?;
        match (a.as_slice::<T>()?, b.as_slice::<T>()?) {
            (x, &[y]) if x.len() == o.len() => map_into(ctx, x, o, move |x| f(x, y)),
            (&[x], y) if y.len() == o.len() => map_into(ctx, y, o, move |y| f(x, y)),
            (x, y) => Broadcast::new(&dims, a.dims(), b.dims()).apply(ctx, x, y, o, f),
        }
        outputs.push(out);
        Ok(())
    }
}

/// `o[i] = f(x[i], y[i])`, compiled for the CPU's widest vectors.
#[inline(always)]
fn zip_into<T: Copy, F: Fn(T, T) -> T>(o: &mut [T], x: &[T], y: &[T], f: F) {
    crate::isa::zip(o, x, y, f)
}

/// `o[i] = f(o[i], y[i])`, compiled for the CPU's widest vectors.
#[inline(always)]
fn zip_in_place<T: Copy, F: Fn(T, T) -> T>(o: &mut [T], y: &[T], f: F) {
    crate::isa::zip_in_place(o, y, f)
}

/// Makes the standalone kernel of an elementwise op.
struct MakeKernel;

impl<T: Element> UnaryVisitor<T> for MakeKernel {
    type Out = Box<dyn OpKernel>;
    fn visit<F: Fn(T) -> T + Copy + Send + Sync + 'static>(self, f: F) -> Box<dyn OpKernel> {
        Box::new(Unary::<T, F>::new(f))
    }
}

impl<T: Element> BinaryVisitor<T> for MakeKernel {
    type Out = Box<dyn OpKernel>;
    fn visit<F: Fn(T, T) -> T + Copy + Send + Sync + 'static>(self, f: F) -> Box<dyn OpKernel> {
        Box::new(Binary::<T, F>::new(f))
    }
}

/// The kernel of any op the registry declares elementwise, for its `T`.
fn elementwise_kernel(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let t = d.dtype("T")?;
    let kernel = match d.def.facts.elementwise {
        Some(Elementwise::Unary(f)) => match t {
            DType::Float => Some(visit_unary::<f32, _>(f, MakeKernel)),
            DType::Double => Some(visit_unary::<f64, _>(f, MakeKernel)),
            DType::Int32 => visit_unary_int::<i32, _>(f, MakeKernel),
            DType::Int64 => visit_unary_int::<i64, _>(f, MakeKernel),
            _ => None,
        },
        Some(Elementwise::Binary(f)) => match t {
            DType::Float => Some(visit_binary::<f32, _>(f, MakeKernel)),
            DType::Double => Some(visit_binary::<f64, _>(f, MakeKernel)),
            DType::Int32 => visit_binary_int::<i32, _>(f, MakeKernel),
            DType::Int64 => visit_binary_int::<i64, _>(f, MakeKernel),
            _ => None,
        },
        None => None,
    };
    kernel.ok_or_else(|| invalid(format!("no kernel for {} with T={t}", d.def.name)))
}

/// The dtypes an elementwise op has kernels for.
pub(crate) fn dtypes(e: Elementwise) -> &'static [DType] {
    match e {
        Elementwise::Unary(f) => unary_dtypes(f),
        Elementwise::Binary(f) => binary_dtypes(f),
    }
}

/// Registers a kernel for every elementwise op of the op registry.
pub(crate) fn register(r: &mut KernelRegistry) {
    for def in OpRegistry::global().defs() {
        if let Some(e) = def.facts.elementwise {
            r.register(&def.name, "T", dtypes(e), elementwise_kernel);
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    /// The broadcast by its definition: every output index mapped to each operand's.
    fn naive(out: &[usize], a: (&[f32], &[usize]), b: (&[f32], &[usize])) -> Vec<f32> {
        let n: usize = out.iter().product();
        let index = |dims: &[usize], mut i: usize| {
            let mut k = 0;
            let mut stride = 1;
            for ax in (0..out.len()).rev() {
                let c = i % out[ax];
                i /= out[ax];
                if let Some(at) = (ax + dims.len()).checked_sub(out.len()) {
                    if dims[at] != 1 {
                        k += c * stride;
                    }
                    stride *= dims[at];
                }
            }
            k
        };
        (0..n).map(|i| a.0[index(a.1, i)] * 10.0 + b.0[index(b.1, i)]).collect()
    }

    #[test]
    fn broadcast_rows_match_the_definition_for_every_shape_class() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let parallel = KernelContext { intra_op: Some(&pool), resources: None, step: None };
        let serial = KernelContext { intra_op: None, resources: None, step: None };
        let cases: &[(&[usize], &[usize])] = &[
            (&[32, 14, 14, 64], &[32, 1, 1, 64]), // squeeze-and-excite
            (&[8, 30, 30, 40], &[40]),            // per channel
            (&[8, 40, 30, 30], &[1, 40, 1, 1]),   // per channel, NCHW
            (&[64, 1000], &[64, 1]),              // per row (softmax's max and sum)
            (&[1, 7, 1], &[5, 1, 3]),             // both sides grow
            (&[3, 1, 4, 1, 5], &[2, 1, 1, 5]),
            (&[200, 300], &[1, 1]),
            (&[1], &[4, 3]),
            (&[2, 0, 3], &[3]),
        ];
        for &(ad, bd) in cases {
            let out = broadcast_dims(ad, bd).unwrap();
            let a: Vec<f32> = (0..ad.iter().product()).map(|i| (i % 97) as f32).collect();
            let b: Vec<f32> = (0..bd.iter().product()).map(|i| (i % 89) as f32 * 0.5).collect();
            let want = naive(&out, (&a, ad), (&b, bd));
            let f = |x: f32, y: f32| x * 10.0 + y;
            for ctx in [&serial, &parallel] {
                let mut got = vec![0.0; want.len()];
                Broadcast::new(&out, ad, bd).apply(ctx, &a, &b, &mut got, f);
                assert_eq!(got, want, "{ad:?} with {bd:?}");
                if out == ad {
                    let mut in_place = a.clone();
                    Broadcast::new(&out, ad, bd).apply_in_place(ctx, &mut in_place, &b, f);
                    assert_eq!(in_place, want, "{ad:?} with {bd:?}, in place");
                }
            }
        }
    }

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
