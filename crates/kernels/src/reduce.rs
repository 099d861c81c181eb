//! Reductions (`Sum`, `Mean`, `Max`, `Min`, `Prod`), `ArgMax`, `Softmax`, `LogSoftmax`.
use ferroflow_tensor::{DType, Element, Tensor};

use crate::numeric::{Float, Num};
use crate::{invalid, Inputs, KResult, KernelContext, KernelRegistry, NodeDesc, OpKernel, Outputs};

/// Reads an axis tensor (int32/int64, scalar or vector) as i64s.
pub(crate) fn axis_values(t: &Tensor) -> KResult<Vec<i64>> {
    match t.dtype() {
        DType::Int32 => Ok(t.as_slice::<i32>()?.iter().map(|&v| v as i64).collect()),
        DType::Int64 => Ok(t.as_slice::<i64>()?.to_vec()),
        d => Err(invalid(format!("axis must be int32 or int64, got {d}"))),
    }
}

/// Normalises a possibly negative axis against `rank`.
pub(crate) fn norm_axis(a: i64, rank: usize) -> KResult<usize> {
    let r = rank as i64;
    if a < -r || a >= r {
        return Err(invalid(format!("Invalid reduction dimension ({a} for input with {rank} dimension(s))")));
    }
    Ok(if a < 0 { (a + r) as usize } else { a as usize })
}

#[derive(Clone, Copy)]
enum Reduction {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
}

struct Reduce<T> {
    kind: Reduction,
    keep_dims: bool,
    _t: std::marker::PhantomData<T>,
}

impl<T: Num> OpKernel for Reduce<T> {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let x = &inputs[0];
        let dims = x.dims();
        let mut reduced = vec![false; dims.len()];
        for a in axis_values(&inputs[1])? {
            reduced[norm_axis(a, dims.len())?] = true;
        }
        let init = match self.kind {
            Reduction::Sum | Reduction::Mean => T::ZERO,
            Reduction::Prod => T::ONE,
            Reduction::Max => T::LOWEST,
            Reduction::Min => T::HIGHEST,
        };
        let full: Vec<usize> = dims.iter().zip(&reduced).map(|(&d, &r)| if r { 1 } else { d }).collect();
        let out_dims: Vec<usize> = if self.keep_dims {
            full.clone()
        } else {
            dims.iter().zip(&reduced).filter(|(_, r)| !**r).map(|(d, _)| *d).collect()
        };
        if full.as_slice() == dims {
            // Nothing is reduced (no axes, or only size-1 axes): the values pass through
            // unchanged (as TensorFlow's reshape-only reduction; keeps -0.0 and NaN payloads).
            let x = std::mem::replace(&mut inputs[0], Tensor::scalar(0u8));
            outputs.push(x.reshaped(&out_dims)?);
            return Ok(());
        }
        let out_len: usize = full.iter().product();
        let mut acc = vec![init; out_len];
        let src = x.as_slice::<T>()?;
        if !src.is_empty() {
            // Stride of each input axis in the output (0 on reduced axes).
            let mut ostride = vec![0usize; dims.len()];
            let mut s = 1;
            for i in (0..dims.len()).rev() {
                ostride[i] = if reduced[i] { 0 } else { s };
                s *= full[i];
            }
            let walk = Walk { dims, ostride: &ostride };
            if matches!(self.kind, Reduction::Sum | Reduction::Mean) && T::DTYPE == DType::Float {
                // float32 sums accumulate in float64 and round once: a long sum (a global
                // average pool over 112×112, a layer norm's moments) in float32 loses up to
                // n ulps; TensorFlow's tree reduction loses ~log n, this loses none.
                let mut wide = vec![0f64; out_len];
                walk.fold_split(ctx, x.as_slice::<f32>()?, &mut wide, (0.0, |a, b| a + b as f64, |a, b| a + b));
                if let Reduction::Mean = self.kind {
                    let count: usize = dims.iter().zip(&reduced).filter(|(_, r)| **r).map(|(d, _)| *d).product();
                    wide.iter_mut().for_each(|v| *v /= count as f64);
                }
                let out: Vec<f32> = wide.into_iter().map(|v| v as f32).collect();
                outputs.push(Tensor::from_vec(&out_dims, out)?);
                return Ok(());
            }
            match self.kind {
                Reduction::Sum | Reduction::Mean => {
                    let add = |a: T, b: T| a.add_w(b);
                    walk.fold_split(ctx, src, &mut acc, (init, add, add))
                }
                Reduction::Prod => {
                    let mul = |a: T, b: T| a.mul_w(b);
                    walk.fold_split(ctx, src, &mut acc, (init, mul, mul))
                }
                Reduction::Max => {
                    let max = |a: T, b: T| if b > a || b.is_nan() { b } else { a };
                    walk.fold_split(ctx, src, &mut acc, (init, max, max))
                }
                Reduction::Min => {
                    let min = |a: T, b: T| if b < a || b.is_nan() { b } else { a };
                    walk.fold_split(ctx, src, &mut acc, (init, min, min))
                }
            }
        }
        if let Reduction::Mean = self.kind {
            let count: usize = dims.iter().zip(&reduced).filter(|(_, r)| **r).map(|(d, _)| *d).product();
            let c = T::from_usize(count);
            if count > 0 || T::DTYPE.is_float() {
                acc.iter_mut().for_each(|v| *v = v.div(c));
            }
        }
        outputs.push(Tensor::from_vec(&out_dims, acc)?);
        Ok(())
    }
}

/// The input's elements in order, each folded into its output element (`ostride`: each input
/// axis's stride in the output, 0 on reduced axes).
struct Walk<'a> {
    dims: &'a [usize],
    ostride: &'a [usize],
}

impl Walk<'_> {
    /// [`Walk::fold`], split across the intra-op pool by the first axis when it is kept and
    /// the input is large (each task folds whole slices of it into its own outputs, in the
    /// same order: the same bits as on one thread).
    fn fold_split<T: Copy + Sync, A: Copy + Send + Sync>(
        &self,
        ctx: &KernelContext,
        src: &[T],
        acc: &mut [A],
        (init, f, combine): (A, impl Fn(A, T) -> A + Copy + Sync, impl Fn(A, A) -> A + Copy + Sync),
    ) {
        let first = self.dims.first().copied().unwrap_or(1);
        if self.ostride.first().is_some_and(|&s| s > 0) && first > 1 && src.len() >= 1 << 16 && ctx.threads() > 1 {
            let per = first.div_ceil(ctx.threads() * 2);
            let (in_rows, out_rows) = (src.len() / first, acc.len() / first);
            ctx.for_each_chunk_mut(acc, per * out_rows, |i, out| {
                let rows = out.len() / out_rows;
                let mut dims = self.dims.to_vec();
                dims[0] = rows;
                let part = Walk { dims: &dims, ostride: self.ostride };
                part.fold(&src[i * per * in_rows..(i * per + rows) * in_rows], out, (init, f, combine));
            });
        } else {
            self.fold(src, acc, (init, f, combine));
        }
    }

    /// `acc[k] = f(acc[k], v)` for every input value `v` in order, `k` its output element: the
    /// same order for every caller, so the same bits. `f` is inlined (a call per element cost
    /// MobileNetV2's global average pool 2 ns an element); a row whose last axis is kept
    /// runs along the output row.
    fn fold<T: Copy, A: Copy>(
        &self,
        src: &[T],
        acc: &mut [A],
        fold: (A, impl Fn(A, T) -> A + Copy, impl Fn(A, A) -> A + Copy),
    ) {
        crate::isa::widest(
            #[inline(always)]
            || self.fold_rows(src, acc, fold),
        )
    }

    /// A row whose last axis is reduced folds in [`LANES`] lanes first (`init` is the fold's
    /// identity, `combine` joins two partial results).
    #[inline(always)]
    fn fold_rows<T: Copy, A: Copy>(
        &self,
        src: &[T],
        acc: &mut [A],
        (init, f, combine): (A, impl Fn(A, T) -> A + Copy, impl Fn(A, A) -> A + Copy),
    ) {
        let (dims, ostride) = (self.dims, self.ostride);
        if dims.is_empty() {
            acc[0] = f(acc[0], src[0]);
            return;
        }
        let rank = dims.len();
        let inner = dims[rank - 1];
        let istep = ostride[rank - 1];
        let mut idx = vec![0usize; rank - 1];
        let mut o = 0usize;
        for row in src.chunks(inner) {
            if istep == 1 {
                let out = &mut acc[o..o + row.len()];
                for j in 0..out.len() {
                    out[j] = f(out[j], row[j]);
                }
            } else if istep == 0 {
                acc[o] = combine(acc[o], lanes_fold(row, init, f, combine));
            } else {
                for (j, v) in row.iter().enumerate() {
                    let k = o + j * istep;
                    acc[k] = f(acc[k], *v);
                }
            }
            for ax in (0..rank - 1).rev() {
                idx[ax] += 1;
                o += ostride[ax];
                if idx[ax] < dims[ax] {
                    break;
                }
                o -= ostride[ax] * dims[ax];
                idx[ax] = 0;
            }
        }
    }
}

/// `All`/`Any`: min/max over the bools viewed as 0/1 bytes.
struct BoolReduce(Reduce<u8>);
impl OpKernel for BoolReduce {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let x = &inputs[0];
        inputs[0] = Tensor::from_bytes(DType::UInt8, x.dims(), x.as_bytes()?)?;
        self.0.compute(ctx, inputs, outputs)?;
        let r = outputs.pop().expect("one output");
        outputs.push(Tensor::from_bytes(DType::Bool, r.dims(), r.as_bytes()?)?);
        Ok(())
    }
}

fn make_reduce<T: Num>(kind: Reduction, d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    Ok(Box::new(Reduce::<T> { kind, keep_dims: d.bool("keep_dims")?, _t: Default::default() }))
}

fn reduce_factory(kind: Reduction, d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    match d.dtype("T")? {
        DType::Float => make_reduce::<f32>(kind, d),
        DType::Double => make_reduce::<f64>(kind, d),
        DType::Int32 => make_reduce::<i32>(kind, d),
        DType::Int64 => make_reduce::<i64>(kind, d),
        t => Err(invalid(format!("no reduction kernel for {t}"))),
    }
}

struct ArgMax<T, I> {
    /// ArgMin when true.
    min: bool,
    _t: std::marker::PhantomData<(T, I)>,
}

impl<T: Num, I: Element + TryFrom<usize>> OpKernel for ArgMax<T, I> {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let x = &inputs[0];
        let axes = axis_values(&inputs[1])?;
        let [a] = axes[..] else {
            return Err(invalid("dimension must be a scalar"));
        };
        let dims = x.dims();
        let axis = norm_axis(a, dims.len())?;
        let n = dims[axis];
        if n == 0 {
            return Err(invalid(format!("Reduction axis {axis} is empty in shape {dims:?}")));
        }
        let outer: usize = dims[..axis].iter().product();
        let inner: usize = dims[axis + 1..].iter().product();
        let src = x.as_slice::<T>()?;
        let mut out = Vec::with_capacity(outer * inner);
        for o in 0..outer {
            for i in 0..inner {
                let base = o * n * inner + i;
                let mut best = 0;
                for j in 1..n {
                    let (v, b) = (src[base + j * inner], src[base + best * inner]);
                    if (!self.min && v > b) || (self.min && v < b) {
                        best = j;
                    }
                }
                out.push(I::try_from(best).map_err(|_| invalid("index does not fit the output type"))?);
            }
        }
        let out_dims: Vec<usize> = dims.iter().enumerate().filter(|(i, _)| *i != axis).map(|(_, d)| *d).collect();
        outputs.push(Tensor::from_vec(&out_dims, out)?);
        Ok(())
    }
}

fn argmax_for<T: Num>(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let min = d.def.name == "ArgMin";
    match d.dtype("output_type")? {
        DType::Int32 => Ok(Box::new(ArgMax::<T, i32> { min, _t: Default::default() })),
        DType::Int64 => Ok(Box::new(ArgMax::<T, i64> { min, _t: Default::default() })),
        t => Err(invalid(format!("ArgMax output_type {t} is not supported"))),
    }
}

fn k_argmax(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    match d.dtype("T")? {
        DType::Float => argmax_for::<f32>(d),
        DType::Double => argmax_for::<f64>(d),
        DType::Int32 => argmax_for::<i32>(d),
        DType::Int64 => argmax_for::<i64>(d),
        t => Err(invalid(format!("no ArgMax kernel for {t}"))),
    }
}

struct Softmax<T> {
    log: bool,
    _t: std::marker::PhantomData<T>,
}

impl<T: Float + Send + Sync> OpKernel for Softmax<T> {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let mut x = inputs.swap_remove(0);
        if x.rank() < 1 {
            return Err(invalid(format!("logits must have rank >= 1, got shape {:?}", x.dims())));
        }
        let n = *x.dims().last().expect("rank >= 1");
        if n == 0 || x.is_empty() {
            outputs.push(x);
            return Ok(());
        }
        let log = self.log;
        let v = x.as_mut_slice::<T>()?;
        let rows = v.len() / n;
        if v.len() >= 1 << 15 && ctx.threads() > 1 && rows > 1 {
            let per = rows.div_ceil(ctx.threads() * 4);
            ctx.for_each_chunk_mut(v, per * n, |_, part| softmax_rows(part, n, log));
        } else {
            softmax_rows(v, n, log);
        }
        outputs.push(x);
        Ok(())
    }
}

/// Lanes of the row reductions: independent accumulators the compiler keeps in one vector
/// register (a single accumulator is a chain of dependent adds, one element per add's latency).
const LANES: usize = 16;

/// Softmax (or log-softmax) in place over each `n`-long row of `v`: the row's maximum, then
/// `e^(x - max)` and its sum in one pass, then the division (or `x - max - ln sum`). Sums and
/// maxima run in [`LANES`] lanes, combined in a fixed order: the same bits on any thread count.
fn softmax_rows<T: Float>(v: &mut [T], n: usize, log: bool) {
    crate::isa::widest(
        #[inline(always)]
        || {
            for row in v.chunks_mut(n) {
                let larger = |a: T, b: T| if b > a { b } else { a };
                let max = lanes_fold(row, T::LOWEST, larger, larger);
                if log {
                    for x in row.iter_mut() {
                        *x = *x - max;
                    }
                    let sum = lanes_fold(row, T::ZERO, |a, b| a + b.exp(), |a, b| a + b);
                    let ls = sum.ln();
                    for x in row.iter_mut() {
                        *x = *x - ls;
                    }
                } else {
                    for x in row.iter_mut() {
                        *x = (*x - max).exp();
                    }
                    let sum = lanes_fold(row, T::ZERO, |a, b| a + b, |a, b| a + b);
                    for x in row.iter_mut() {
                        *x = *x / sum;
                    }
                }
            }
        },
    )
}

/// `f` folded over `row` in [`LANES`] interleaved lanes from `init` (the fold's identity),
/// then the lanes combined in order.
#[inline(always)]
fn lanes_fold<T: Copy, A: Copy>(row: &[T], init: A, f: impl Fn(A, T) -> A + Copy, combine: impl Fn(A, A) -> A) -> A {
    let mut acc = [init; LANES];
    let mut chunks = row.chunks_exact(LANES);
    for c in &mut chunks {
        for j in 0..LANES {
            acc[j] = f(acc[j], c[j]);
        }
    }
    for (j, &x) in chunks.remainder().iter().enumerate() {
        acc[j] = f(acc[j], x);
    }
    acc.iter().skip(1).fold(acc[0], |a, &b| combine(a, b))
}

fn k_softmax_impl(d: &NodeDesc, log: bool) -> KResult<Box<dyn OpKernel>> {
    match d.dtype("T")? {
        DType::Float => Ok(Box::new(Softmax::<f32> { log, _t: Default::default() })),
        DType::Double => Ok(Box::new(Softmax::<f64> { log, _t: Default::default() })),
        t => Err(invalid(format!("no softmax kernel for {t}"))),
    }
}

pub(crate) fn register(r: &mut KernelRegistry) {
    const NUMERIC: &[DType] = &[DType::Float, DType::Double, DType::Int32, DType::Int64];
    r.register("Sum", "T", NUMERIC, |d| reduce_factory(Reduction::Sum, d));
    r.register("Mean", "T", NUMERIC, |d| reduce_factory(Reduction::Mean, d));
    r.register("Max", "T", NUMERIC, |d| reduce_factory(Reduction::Max, d));
    r.register("Min", "T", NUMERIC, |d| reduce_factory(Reduction::Min, d));
    r.register("Prod", "T", NUMERIC, |d| reduce_factory(Reduction::Prod, d));
    r.register("ArgMax", "T", NUMERIC, k_argmax);
    r.register("ArgMin", "T", NUMERIC, k_argmax);
    r.register("All", "", &[], |d| {
        Ok(Box::new(BoolReduce(Reduce::<u8> {
            kind: Reduction::Min,
            keep_dims: d.bool("keep_dims")?,
            _t: Default::default(),
        })))
    });
    r.register("Any", "", &[], |d| {
        Ok(Box::new(BoolReduce(Reduce::<u8> {
            kind: Reduction::Max,
            keep_dims: d.bool("keep_dims")?,
            _t: Default::default(),
        })))
    });
    r.register("Softmax", "T", &[DType::Float, DType::Double], |d| k_softmax_impl(d, false));
    r.register("LogSoftmax", "T", &[DType::Float, DType::Double], |d| k_softmax_impl(d, true));
}
