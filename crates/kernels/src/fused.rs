//! The fused kernels of matrix products and elementwise chains made by the optimizer's
//! remapper: `_FusedMatMul` (the product, then `+ bias` and the activation in one pass over the
//! output) and `_FusedElementwise` (a chain of elementwise ops evaluated block by block, one
//! pass over memory). The epilogues themselves, shared with the fused convolutions, live in
//! the crate's `epilogue` module.
use ferroflow_tensor::{DType, Element};

use crate::elementwise::{visit_unary, UnaryVisitor};
use crate::epilogue::{add_bias, Activation, Program, PARALLEL_MIN};
use crate::numeric::Float;
use crate::{invalid, Inputs, KResult, KernelContext, KernelRegistry, NodeDesc, OpKernel, Outputs};

/// A MatMul (`_FusedMatMul`) followed by `+ bias` over the last axis and an activation,
/// applied to each output row right after the contraction.
struct FusedContraction<T> {
    inner: Box<dyn OpKernel>,
    act: Activation,
    _t: std::marker::PhantomData<T>,
}

impl<T: Float + Element> OpKernel for FusedContraction<T> {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let bias = inputs.swap_remove(2);
        inputs.truncate(2);
        self.inner.compute(ctx, inputs, outputs)?;
        let out = outputs.last_mut().expect("the contraction pushed its output");
        let c = *out.dims().last().unwrap_or(&0);
        if bias.rank() != 1 || bias.len() != c {
            return Err(invalid(format!(
                "Must provide as many biases as the last dimension of the product: {:?} vs. {:?}",
                bias.dims(),
                out.dims()
            )));
        }
        let b = bias.as_slice::<T>()?;
        let alpha = match self.act {
            Activation::LeakyRelu(a) => T::from_f64(a),
            _ => T::ZERO,
        };
        let v = out.as_mut_slice::<T>()?;
        if c == 0 {
            return Ok(());
        }
        // One monomorphic loop per activation (a function item), so it inlines and vectorises.
        match self.act {
            Activation::None => bias_act(ctx, v, b, |x: T| x),
            Activation::Unary(f) => visit_unary::<T, _>(f, BiasAct { ctx, v, b }),
            Activation::LeakyRelu(_) => bias_act(ctx, v, b, move |x: T| if x < T::ZERO { x * alpha } else { x }),
        }
        Ok(())
    }
}

/// `bias_act` with a given activation.
struct BiasAct<'a, T> {
    ctx: &'a KernelContext<'a>,
    v: &'a mut [T],
    b: &'a [T],
}

impl<T: Float + Element> UnaryVisitor<T> for BiasAct<'_, T> {
    type Out = ();
    fn visit<F: Fn(T) -> T + Copy + Send + Sync + 'static>(self, f: F) {
        bias_act(self.ctx, self.v, self.b, f)
    }
}

/// `v[r, j] = f(v[r, j] + b[j])` over rows of `b.len()`, split across the pool when large.
fn bias_act<T: Float + Element>(ctx: &KernelContext, v: &mut [T], b: &[T], f: impl Fn(T) -> T + Sync + Copy) {
    let c = b.len();
    if v.len() >= PARALLEL_MIN && ctx.threads() > 1 {
        let per_task = (v.len() / c).div_ceil(ctx.threads() * 4).max(1);
        ctx.for_each_chunk_mut(v, per_task * c, |_, rows| add_bias(rows, b, f));
    } else {
        add_bias(v, b, f);
    }
}

fn k_fused_matmul(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let act = Activation::from_fused_ops(d)?;
    let inner = crate::matmul::k_matmul(d)?;
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64],
        |T| Ok(Box::new(FusedContraction::<T> { inner, act, _t: Default::default() }) as Box<dyn OpKernel>))
}

/// `_FusedElementwise`: the node's program over all its inputs.
struct FusedElementwise<T>(Program<T>);

impl<T: Float + Element> OpKernel for FusedElementwise<T> {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        self.0.run(ctx, inputs, outputs)
    }
}

fn fused_elementwise<T: Float + Element>(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    Ok(Box::new(FusedElementwise(Program::<T>::new(d, d.types.inputs.len())?)))
}

fn k_fused_elementwise(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    match d.dtype("T")? {
        DType::Float => fused_elementwise::<f32>(d),
        DType::Double => fused_elementwise::<f64>(d),
        t => Err(invalid(format!("no kernel for {} with T={t}", d.def.name))),
    }
}

pub(crate) fn register(r: &mut KernelRegistry) {
    r.register("_FusedMatMul", "T", &[DType::Float, DType::Double], k_fused_matmul);
    r.register("_FusedElementwise", "T", &[DType::Float, DType::Double], k_fused_elementwise);
}
