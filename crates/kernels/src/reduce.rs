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
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
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
                walk.fold(x.as_slice::<f32>()?, &mut wide, |a, b| a + b as f64);
                if let Reduction::Mean = self.kind {
                    let count: usize = dims.iter().zip(&reduced).filter(|(_, r)| **r).map(|(d, _)| *d).product();
                    wide.iter_mut().for_each(|v| *v /= count as f64);
                }
                let out: Vec<f32> = wide.into_iter().map(|v| v as f32).collect();
                outputs.push(Tensor::from_vec(&out_dims, out)?);
                return Ok(());
            }
            match self.kind {
                Reduction::Sum | Reduction::Mean => walk.fold(src, &mut acc, |a, b| a.add_w(b)),
                Reduction::Prod => walk.fold(src, &mut acc, |a, b| a.mul_w(b)),
                Reduction::Max => walk.fold(src, &mut acc, |a, b| if b > a || b.is_nan() { b } else { a }),
                Reduction::Min => walk.fold(src, &mut acc, |a, b| if b < a || b.is_nan() { b } else { a }),
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
    /// `acc[k] = f(acc[k], v)` for every input value `v` in order, `k` its output element: the
    /// same order for every caller, so the same bits. `f` is inlined (a call per element cost
    /// MobileNetV2's global average pool 2 ns an element); a row whose last axis is kept
    /// runs along the output row.
    fn fold<T: Copy, A: Copy>(&self, src: &[T], acc: &mut [A], f: impl Fn(A, T) -> A + Copy) {
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
                acc[o..o + row.len()].iter_mut().zip(row).for_each(|(a, v)| *a = f(*a, *v));
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

impl<T: Float> OpKernel for Softmax<T> {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
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
        for row in x.as_mut_slice::<T>()?.chunks_mut(n) {
            let max = row.iter().copied().fold(T::LOWEST, |a, b| if b > a { b } else { a });
            let mut sum = T::ZERO;
            for v in row.iter_mut() {
                *v = *v - max;
                sum = sum + v.exp();
            }
            if log {
                let ls = sum.ln();
                row.iter_mut().for_each(|v| *v = *v - ls);
            } else {
                row.iter_mut().for_each(|v| *v = v.exp() / sum);
            }
        }
        outputs.push(x);
        Ok(())
    }
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
