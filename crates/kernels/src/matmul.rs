//! `MatMul` through the `gemm` crate (runtime-dispatched SIMD; transposes via strides).
use ferroflow_tensor::{DType, Tensor};

use crate::numeric::Num;
use crate::{invalid, Inputs, KResult, KernelContext, KernelRegistry, NodeDesc, OpKernel, Outputs};

/// Multiply-adds below which a product stays on one thread (threading costs more).
const PARALLEL_MIN_FLOPS: usize = 1 << 18;

struct MatMul<T> {
    transpose_a: bool,
    transpose_b: bool,
    _t: std::marker::PhantomData<T>,
}

/// Element types the tuned GEMM handles.
pub(crate) trait GemmElement: Num {
    const TUNED: bool;
}
impl GemmElement for f32 {
    const TUNED: bool = true;
}
impl GemmElement for f64 {
    const TUNED: bool = true;
}
impl GemmElement for i32 {
    const TUNED: bool = false;
}
impl GemmElement for i64 {
    const TUNED: bool = false;
}

impl<T: GemmElement + 'static> OpKernel for MatMul<T> {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let (a, b) = (&inputs[0], &inputs[1]);
        if a.rank() != 2 || b.rank() != 2 {
            return Err(invalid(format!(
                "In[0] and In[1] must be matrices, got shapes {:?} and {:?}",
                a.dims(),
                b.dims()
            )));
        }
        let (ad, bd) = (a.dims(), b.dims());
        let (m, ka) = if self.transpose_a { (ad[1], ad[0]) } else { (ad[0], ad[1]) };
        let (kb, n) = if self.transpose_b { (bd[1], bd[0]) } else { (bd[0], bd[1]) };
        if ka != kb {
            return Err(invalid(format!(
                "Matrix size-incompatible: In[0]: {ad:?}, In[1]: {bd:?} (transpose_a={}, transpose_b={})",
                self.transpose_a, self.transpose_b
            )));
        }
        let k = ka;
        let mut out = Tensor::zeros(T::DTYPE, &[m, n])?;
        let (x, y) = (a.as_slice::<T>()?, b.as_slice::<T>()?);
        // Row/column strides of the logical [m,k] and [k,n] operands.
        let (a_rs, a_cs) = if self.transpose_a { (1, m) } else { (k, 1) };
        let (b_rs, b_cs) = if self.transpose_b { (1, k) } else { (n, 1) };
        product(ctx, (m, n, k), (x, a_rs, a_cs), (y, b_rs, b_cs), out.as_mut_slice::<T>()?);
        outputs.push(out);
        Ok(())
    }
}

/// `o[m×n] = a[m×k] · b[k×n]` where `a[i,p]` is `a[i*a_rs + p*a_cs]` and `b[p,j]` is
/// `b[p*b_rs + j*b_cs]` (so transposes are free). Float types go through the tuned `gemm`
/// crate, on the intra-op pool for large products; integers use a plain loop.
pub(crate) fn product<T: GemmElement>(
    ctx: &KernelContext,
    (m, n, k): (usize, usize, usize),
    (x, a_rs, a_cs): (&[T], usize, usize),
    (y, b_rs, b_cs): (&[T], usize, usize),
    o: &mut [T],
) {
    if m == 0 || n == 0 {
        return;
    }
    let extent = |rows: usize, rs: usize, cols: usize, cs: usize| (rows.max(1) - 1) * rs + (cols.max(1) - 1) * cs + 1;
    assert!(o.len() >= m * n, "output too small for the product");
    if k == 0 {
        o[..m * n].iter_mut().for_each(|v| *v = T::ZERO);
        return;
    }
    assert!(x.len() >= extent(m, a_rs, k, a_cs) && y.len() >= extent(k, b_rs, n, b_cs), "operands too small");
    if T::TUNED {
        let threads = if m * n * k >= PARALLEL_MIN_FLOPS { ctx.threads() } else { 1 };
        let par = if threads > 1 { gemm::Parallelism::Rayon(threads) } else { gemm::Parallelism::None };
        let mut run = || {
            // SAFETY: the pointers cover m*k, k*n and m*n elements laid out with exactly the
            // strides passed (checked above from the tensors' shapes); `o` is exclusively
            // borrowed and does not alias the inputs (it is a fresh buffer).
            unsafe {
                gemm::gemm(
                    m,
                    n,
                    k,
                    o.as_mut_ptr(),
                    1,
                    n as isize,
                    false,
                    x.as_ptr(),
                    a_cs as isize,
                    a_rs as isize,
                    y.as_ptr(),
                    b_cs as isize,
                    b_rs as isize,
                    T::ZERO,
                    T::ONE,
                    false,
                    false,
                    false,
                    par,
                )
            }
        };
        if threads > 1 {
            ctx.install(run);
        } else {
            run();
        }
    } else {
        for i in 0..m {
            for j in 0..n {
                let mut acc = T::ZERO;
                for p in 0..k {
                    acc = acc.add_w(x[i * a_rs + p * a_cs].mul_w(y[p * b_rs + j * b_cs]));
                }
                o[i * n + j] = acc;
            }
        }
    }
}

fn make<T: GemmElement + 'static>(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    Ok(Box::new(MatMul::<T> {
        transpose_a: d.bool("transpose_a")?,
        transpose_b: d.bool("transpose_b")?,
        _t: Default::default(),
    }))
}

pub(crate) fn k_matmul(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    match d.dtype("T")? {
        DType::Float => make::<f32>(d),
        DType::Double => make::<f64>(d),
        DType::Int32 => make::<i32>(d),
        DType::Int64 => make::<i64>(d),
        t => Err(invalid(format!("no MatMul kernel for {t}"))),
    }
}

pub(crate) fn register(r: &mut KernelRegistry) {
    r.register("MatMul", "T", &[DType::Float, DType::Double, DType::Int32, DType::Int64], k_matmul);
    r.register("_MklMatMul", "T", &[DType::Float, DType::Double], k_matmul);
}
