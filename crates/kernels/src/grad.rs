//! Kernels of TensorFlow's gradient helper ops: `ReluGrad`, `Relu6Grad`, `SoftsignGrad`,
//! `SigmoidGrad`, `TanhGrad`, `BiasAddGrad`, `BroadcastGradientArgs`, `BroadcastTo`,
//! `UnsortedSegmentSum`, `DynamicStitch`.
use ferroflow_tensor::{broadcast_dims, DType, Element, Tensor};

use crate::elementwise::{broadcast_apply, FLOATS};
use crate::numeric::{Float, Num};
use crate::{invalid, Inputs, KResult, KernelContext, KernelRegistry, NodeDesc, OpKernel, Outputs};

/// `out = f(a, b)` elementwise over two same-shaped inputs.
struct Zip<T, F> {
    f: F,
    what: String,
    _t: std::marker::PhantomData<T>,
}

impl<T: Element + Num, F: Fn(T, T) -> T + Send + Sync> OpKernel for Zip<T, F> {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let b = inputs.pop().expect("two inputs");
        let mut a = inputs.pop().expect("two inputs");
        if a.dims() != b.dims() {
            return Err(invalid(format!(
                "{}: inputs must have the same shape: {:?} vs {:?}",
                self.what,
                a.dims(),
                b.dims()
            )));
        }
        let bs = b.as_slice::<T>()?;
        let v = a.as_mut_slice::<T>()?;
        v.iter_mut().zip(bs).for_each(|(x, y)| *x = (self.f)(*x, *y));
        outputs.push(a);
        Ok(())
    }
}

fn relu_grad<T: Num>(g: T, x: T) -> T {
    if x > T::ZERO {
        g
    } else {
        T::ZERO
    }
}
fn relu6_grad<T: Float>(g: T, x: T) -> T {
    if x > T::ZERO && x < T::from_f64(6.0) {
        g
    } else {
        T::ZERO
    }
}
fn sigmoid_grad<T: Float>(y: T, dy: T) -> T {
    dy * y * (T::ONE - y)
}
fn tanh_grad<T: Float>(y: T, dy: T) -> T {
    dy * (T::ONE - y * y)
}

/// TensorFlow's `SoftsignGrad`: `g / (1 + |x|)²`.
fn softsign_grad<T: Float>(g: T, x: T) -> T {
    let d = crate::elementwise::abs(x) + T::ONE;
    g / (d * d)
}

macro_rules! zip_factory {
    ($($name:ident => $f:ident),*) => {$(
        fn $name(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
            let what = d.def.name.clone();
            dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64],
                |T| Ok(Box::new(Zip::<T, _> { f: $f::<T>, what, _t: Default::default() }) as Box<dyn OpKernel>))
        }
    )*};
}
zip_factory!(k_relu_grad => relu_grad, k_relu6_grad => relu6_grad, k_sigmoid_grad => sigmoid_grad,
    k_tanh_grad => tanh_grad, k_softsign_grad => softsign_grad);

/// `BiasAddGrad`: the sum of the gradient over every axis but the channel axis.
struct BiasAddGrad<T> {
    nchw: bool,
    _t: std::marker::PhantomData<T>,
}

impl<T: Element + Num> OpKernel for BiasAddGrad<T> {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let g = &inputs[0];
        let dims = g.dims();
        if dims.len() < 2 {
            return Err(invalid(format!("BiasAddGrad: input must be at least 2-D, got {dims:?}")));
        }
        let axis = if self.nchw { 1 } else { dims.len() - 1 };
        let c = dims[axis];
        let inner: usize = dims[axis + 1..].iter().product();
        let mut out = vec![T::ZERO; c];
        if inner == 1 && c > 0 {
            // Channels last: sum rows into the output vector (vectorizes).
            for row in g.as_slice::<T>()?.chunks_exact(c) {
                out.iter_mut().zip(row).for_each(|(o, v)| *o = o.add_w(*v));
            }
            outputs.push(Tensor::from_vec(&[c], out)?);
            return Ok(());
        }
        for (i, chunk) in g.as_slice::<T>()?.chunks(inner.max(1)).enumerate() {
            let ch = i % c.max(1);
            for v in chunk {
                out[ch] = out[ch].add_w(*v);
            }
        }
        outputs.push(Tensor::from_vec(&[c], out)?);
        Ok(())
    }
}

fn k_bias_add_grad(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let nchw = d.string("data_format").is_ok_and(|f| f == "NCHW");
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64],
        |T| Ok(Box::new(BiasAddGrad::<T> { nchw, _t: Default::default() }) as Box<dyn OpKernel>))
}

fn shape_values(t: &Tensor) -> KResult<Vec<i64>> {
    match t.dtype() {
        DType::Int32 => Ok(t.as_slice::<i32>()?.iter().map(|&v| v as i64).collect()),
        DType::Int64 => Ok(t.as_slice::<i64>()?.to_vec()),
        d => Err(invalid(format!("shape tensors must be int32 or int64, got {d}"))),
    }
}

fn ints_like(values: Vec<i64>, like: DType) -> KResult<Tensor> {
    let n = values.len();
    Ok(match like {
        DType::Int64 => Tensor::from_vec(&[n], values)?,
        _ => Tensor::from_vec(&[n], values.into_iter().map(|v| v as i32).collect())?,
    })
}

/// `BroadcastGradientArgs(s0, s1)`: the axes each operand's gradient must be summed over.
struct BroadcastGradientArgs;

impl OpKernel for BroadcastGradientArgs {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let (a, b) = (shape_values(&inputs[0])?, shape_values(&inputs[1])?);
        let rank = a.len().max(b.len());
        let pad = |s: &[i64]| -> Vec<i64> { std::iter::repeat_n(1, rank - s.len()).chain(s.iter().copied()).collect() };
        let (pa, pb) = (pad(&a), pad(&b));
        let (mut ra, mut rb) = (Vec::new(), Vec::new());
        for i in 0..rank {
            let (x, y) = (pa[i], pb[i]);
            if x != y && x != 1 && y != 1 {
                return Err(invalid(format!("Incompatible shapes: {a:?} vs. {b:?}")));
            }
            // Reduce where this operand has size 1 (it was broadcast, or both are 1, where
            // TensorFlow reduces both).
            if x == 1 {
                ra.push(i as i64);
            }
            if y == 1 {
                rb.push(i as i64);
            }
        }
        let like = inputs[0].dtype();
        outputs.push(ints_like(ra, like)?);
        outputs.push(ints_like(rb, like)?);
        Ok(())
    }
}

/// `BroadcastTo(input, shape)`.
struct BroadcastTo<T>(std::marker::PhantomData<T>);

impl<T: Element + Copy> OpKernel for BroadcastTo<T> {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let shape: Vec<usize> = shape_values(&inputs[1])?
            .into_iter()
            .map(|d| usize::try_from(d).map_err(|_| invalid(format!("BroadcastTo: negative dimension {d}"))))
            .collect::<KResult<_>>()?;
        let x = &inputs[0];
        let dims = broadcast_dims(x.dims(), &shape)
            .filter(|d| *d == shape)
            .ok_or_else(|| invalid(format!("BroadcastTo: {:?} cannot be broadcast to {shape:?}", x.dims())))?;
        let mut out = Tensor::zeros(T::DTYPE, &dims)?;
        let xs = x.as_slice::<T>()?;
        broadcast_apply(&dims, (xs, x.dims()), (xs, x.dims()), out.as_mut_slice::<T>()?, |a, _| a);
        outputs.push(out);
        Ok(())
    }
}

fn k_broadcast_to(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64, Int32 => i32, Int64 => i64, Bool => bool],
        |T| Ok(Box::new(BroadcastTo::<T>(Default::default())) as Box<dyn OpKernel>))
}

/// `DynamicStitch(indices…, data…)`: `merged[indices[i][j], …] = data[i][j, …]`.
struct DynamicStitch<T>(std::marker::PhantomData<T>);

impl<T: Element + Copy + Default> OpKernel for DynamicStitch<T> {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let n = inputs.len() / 2;
        let (indices, data) = inputs.split_at(n);
        let mut max = -1i64;
        let mut inner: Option<Vec<usize>> = None;
        for (idx, d) in indices.iter().zip(data) {
            let r = idx.rank();
            if d.rank() < r || d.dims()[..r] != *idx.dims() {
                return Err(invalid(format!(
                    "data shape {:?} must start with its indices' shape {:?}",
                    d.dims(),
                    idx.dims()
                )));
            }
            let rest = d.dims()[r..].to_vec();
            if inner.as_ref().is_some_and(|i| *i != rest) {
                return Err(invalid("all data must have the same trailing shape".to_string()));
            }
            inner = Some(rest);
            for &v in idx.as_slice::<i32>()? {
                if v < 0 {
                    return Err(invalid(format!("negative index {v}")));
                }
                max = max.max(v as i64);
            }
        }
        let inner = inner.unwrap_or_default();
        let width: usize = inner.iter().product();
        let rows = (max + 1) as usize;
        let mut dims = vec![rows];
        dims.extend(&inner);
        let mut out = Tensor::zeros(T::DTYPE, &dims)?;
        let o = out.as_mut_slice::<T>()?;
        for (idx, d) in indices.iter().zip(data) {
            let src = d.as_slice::<T>()?;
            for (j, &v) in idx.as_slice::<i32>()?.iter().enumerate() {
                let v = v as usize;
                o[v * width..(v + 1) * width].copy_from_slice(&src[j * width..(j + 1) * width]);
            }
        }
        outputs.push(out);
        Ok(())
    }
}

/// `UnsortedSegmentSum(data, segment_ids, num_segments)`: `out[ids[i], …] += data[i, …]`.
struct UnsortedSegmentSum<T>(std::marker::PhantomData<T>);

impl<T: Element + Num> OpKernel for UnsortedSegmentSum<T> {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let (data, ids, n) = (&inputs[0], &inputs[1], &inputs[2]);
        let n =
            shape_values(n)?.first().copied().ok_or_else(|| invalid("num_segments must be a scalar".to_string()))?;
        let n = usize::try_from(n).map_err(|_| invalid(format!("num_segments must be non-negative, got {n}")))?;
        let r = ids.rank();
        if data.rank() < r || data.dims()[..r] != *ids.dims() {
            return Err(invalid(format!(
                "data shape {:?} must start with segment_ids shape {:?}",
                data.dims(),
                ids.dims()
            )));
        }
        let inner = &data.dims()[r..];
        let width: usize = inner.iter().product();
        let mut dims = vec![n];
        dims.extend_from_slice(inner);
        let mut out = Tensor::zeros(T::DTYPE, &dims)?;
        let o = out.as_mut_slice::<T>()?;
        let src = data.as_slice::<T>()?;
        for (i, id) in shape_values(ids)?.into_iter().enumerate() {
            if id < 0 {
                continue; // TensorFlow drops negative ids
            }
            let id = id as usize;
            if id >= n {
                return Err(invalid(format!("segment id {id} is out of range [0, {n})")));
            }
            for (a, b) in o[id * width..(id + 1) * width].iter_mut().zip(&src[i * width..(i + 1) * width]) {
                *a = a.add_w(*b);
            }
        }
        outputs.push(out);
        Ok(())
    }
}

fn k_unsorted_segment_sum(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64, Int32 => i32, Int64 => i64],
        |T| Ok(Box::new(UnsortedSegmentSum::<T>(Default::default())) as Box<dyn OpKernel>))
}

fn k_dynamic_stitch(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64, Int32 => i32, Int64 => i64],
        |T| Ok(Box::new(DynamicStitch::<T>(Default::default())) as Box<dyn OpKernel>))
}

pub(crate) fn register(r: &mut KernelRegistry) {
    r.register(
        "UnsortedSegmentSum",
        "T",
        &[DType::Float, DType::Double, DType::Int32, DType::Int64],
        k_unsorted_segment_sum,
    );
    r.register("DynamicStitch", "T", &[DType::Float, DType::Double, DType::Int32, DType::Int64], k_dynamic_stitch);
    r.register("ReluGrad", "T", FLOATS, k_relu_grad);
    r.register("Relu6Grad", "T", FLOATS, k_relu6_grad);
    r.register("SoftsignGrad", "T", FLOATS, k_softsign_grad);
    r.register("SigmoidGrad", "T", FLOATS, k_sigmoid_grad);
    r.register("TanhGrad", "T", FLOATS, k_tanh_grad);
    r.register("BiasAddGrad", "T", FLOATS, k_bias_add_grad);
    r.register("BroadcastGradientArgs", "", &[], |_| Ok(Box::new(BroadcastGradientArgs)));
    r.register(
        "BroadcastTo",
        "T",
        &[DType::Float, DType::Double, DType::Int32, DType::Int64, DType::Bool],
        k_broadcast_to,
    );
}
