//! `SoftmaxCrossEntropyWithLogits` and `SparseSoftmaxCrossEntropyWithLogits`: per-row loss
//! `logsumexp(x) − Σ labels·x` computed stably (max subtracted first), and the backprop
//! `softmax(x) − labels`, as TensorFlow's kernels return both.
use ferroflow_tensor::{DType, Element, Tensor};

use crate::numeric::Float;
use crate::{invalid, Inputs, KResult, KernelContext, KernelRegistry, NodeDesc, OpKernel, Outputs};

/// Fills `loss[r]` and `back[r, :]` for one row from logits and a label distribution.
fn row<T: Float>(x: &[T], labels: impl Fn(usize) -> T, back: &mut [T]) -> T {
    let m = x.iter().copied().fold(T::from_f64(f64::NEG_INFINITY), |a, b| if b > a { b } else { a });
    let mut sum = T::ZERO;
    for (b, &v) in back.iter_mut().zip(x) {
        *b = (v - m).exp();
        sum = sum + *b;
    }
    let lse = sum.ln() + m;
    let mut loss = T::ZERO;
    for (j, (b, &v)) in back.iter_mut().zip(x).enumerate() {
        let l = labels(j);
        loss = loss + l * (lse - v);
        *b = *b / sum - l;
    }
    loss
}

fn rows(features: &Tensor, what: &str) -> KResult<(usize, usize)> {
    match features.dims() {
        [b, c] => Ok((*b, *c)),
        d => Err(invalid(format!("{what}: logits must be 2-dimensional [batch, classes], got {d:?}"))),
    }
}

struct Dense<T>(std::marker::PhantomData<T>);

impl<T: Float + Element> OpKernel for Dense<T> {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let (x, labels) = (&inputs[0], &inputs[1]);
        let (b, c) = rows(x, "SoftmaxCrossEntropyWithLogits")?;
        if labels.dims() != x.dims() {
            return Err(invalid(format!(
                "logits and labels must be the same size: logits {:?}, labels {:?}",
                x.dims(),
                labels.dims()
            )));
        }
        let (xs, ls) = (x.as_slice::<T>()?, labels.as_slice::<T>()?);
        let mut loss = vec![T::ZERO; b];
        let mut back = Tensor::zeros(T::DTYPE, &[b, c])?;
        let bs = back.as_mut_slice::<T>()?;
        for r in 0..b {
            loss[r] = row(&xs[r * c..(r + 1) * c], |j| ls[r * c + j], &mut bs[r * c..(r + 1) * c]);
        }
        outputs.push(Tensor::from_vec(&[b], loss)?);
        outputs.push(back);
        Ok(())
    }
}

struct Sparse<T>(std::marker::PhantomData<T>);

impl<T: Float + Element> OpKernel for Sparse<T> {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let (x, labels) = (&inputs[0], &inputs[1]);
        let (b, c) = rows(x, "SparseSoftmaxCrossEntropyWithLogits")?;
        if labels.dims() != [b] {
            return Err(invalid(format!(
                "labels must be 1-D with the logits' batch size {b}, got shape {:?}",
                labels.dims()
            )));
        }
        let ids: Vec<i64> = match labels.dtype() {
            DType::Int32 => labels.as_slice::<i32>()?.iter().map(|&v| v as i64).collect(),
            DType::Int64 => labels.as_slice::<i64>()?.to_vec(),
            d => return Err(invalid(format!("labels must be int32 or int64, got {d}"))),
        };
        if let Some((r, &bad)) = ids.iter().enumerate().find(|(_, &v)| v < 0 || v >= c as i64) {
            return Err(invalid(format!(
                "Received a label value of {bad} (row {r}) which is outside the valid range of [0, {c})"
            )));
        }
        let xs = x.as_slice::<T>()?;
        let mut loss = vec![T::ZERO; b];
        let mut back = Tensor::zeros(T::DTYPE, &[b, c])?;
        let bs = back.as_mut_slice::<T>()?;
        for r in 0..b {
            let id = ids[r] as usize;
            loss[r] =
                row(&xs[r * c..(r + 1) * c], |j| if j == id { T::ONE } else { T::ZERO }, &mut bs[r * c..(r + 1) * c]);
        }
        outputs.push(Tensor::from_vec(&[b], loss)?);
        outputs.push(back);
        Ok(())
    }
}

fn k_dense(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64],
        |T| Ok(Box::new(Dense::<T>(Default::default())) as Box<dyn OpKernel>))
}

fn k_sparse(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64],
        |T| Ok(Box::new(Sparse::<T>(Default::default())) as Box<dyn OpKernel>))
}

pub(crate) fn register(r: &mut KernelRegistry) {
    r.register("SoftmaxCrossEntropyWithLogits", "T", crate::elementwise::FLOATS, k_dense);
    r.register("SparseSoftmaxCrossEntropyWithLogits", "T", crate::elementwise::FLOATS, k_sparse);
}
