//! `MatMul` and `BatchMatMulV2` through the `gemm` crate (runtime-dispatched SIMD;
//! transposes via strides).
use ferroflow_tensor::{DType, Tensor};

use crate::indexing::strides_of;
use crate::numeric::Num;
use crate::{invalid, Inputs, KResult, KernelContext, KernelRegistry, NodeDesc, OpKernel, Outputs, SendPtr};

/// Multiply-adds below which a product stays on one thread (threading costs more).
const PARALLEL_MIN_FLOPS: usize = 1 << 18;

/// The most multiply-adds one part of a product has when its step can be stopped (about
/// 10–30 ms of one core).
const STOPPABLE_FLOPS: usize = 1 << 27;

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
        // `product` writes every element (zeros when k = 0).
        let mut out = Tensor::for_overwrite(T::DTYPE, &[m, n])?;
        let (x, y) = (a.as_slice::<T>()?, b.as_slice::<T>()?);
        // Row/column strides of the logical [m,k] and [k,n] operands.
        let (a_rs, a_cs) = if self.transpose_a { (1, m) } else { (k, 1) };
        let (b_rs, b_cs) = if self.transpose_b { (1, k) } else { (n, 1) };
        product(ctx, (m, n, k), (x, a_rs, a_cs), (y, b_rs, b_cs), out.as_mut_slice::<T>()?);
        // A product cut short by its step's deadline or cancellation is not an output.
        if let Some(step) = ctx.step {
            step.check()?;
        }
        outputs.push(out);
        Ok(())
    }
}

/// `o[m×n] = a[m×k] · b[k×n]` where `a[i,p]` is `a[i*a_rs + p*a_cs]` and `b[p,j]` is
/// `b[p*b_rs + j*b_cs]` (so transposes are free). Float types go through the tuned `gemm`
/// crate, on the intra-op pool for large products; integers use a plain loop.
pub(crate) fn product<T: GemmElement>(
    ctx: &KernelContext,
    dims: (usize, usize, usize),
    a: (&[T], usize, usize),
    b: (&[T], usize, usize),
    o: &mut [T],
) {
    product_on(Some(ctx), dims, a, b, o)
}

/// [`product`] on the calling thread (for callers that split the work themselves).
pub(crate) fn product_serial<T: GemmElement>(
    dims: (usize, usize, usize),
    a: (&[T], usize, usize),
    b: (&[T], usize, usize),
    o: &mut [T],
) {
    product_on(None, dims, a, b, o)
}

fn product_on<T: GemmElement>(
    ctx: Option<&KernelContext>,
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
        let threads = match ctx {
            Some(ctx) if m * n * k >= PARALLEL_MIN_FLOPS => ctx.threads(),
            _ => 1,
        };
        let (xp, yp, op) = (SendPtr(x.as_ptr() as *mut T), SendPtr(y.as_ptr() as *mut T), SendPtr(o.as_mut_ptr()));
        // One `gemm` call on the block of rows [i0, i0+h) and columns [j0, j0+w) of the output.
        let block = |i0: usize, h: usize, j0: usize, w: usize| {
            // SAFETY: the operands cover m*k and k*n elements with exactly these strides
            // (checked above from the tensors' shapes) and the block lies inside them; the
            // output block is written only by this call (blocks are disjoint), and the output
            // is a fresh buffer that aliases no input.
            unsafe {
                gemm::gemm(
                    h,
                    w,
                    k,
                    op.get().add(i0 * n + j0),
                    1,
                    n as isize,
                    false,
                    xp.get().add(i0 * a_rs),
                    a_cs as isize,
                    a_rs as isize,
                    yp.get().add(j0 * b_cs),
                    b_cs as isize,
                    b_rs as isize,
                    T::ZERO,
                    T::ONE,
                    false,
                    false,
                    false,
                    gemm::Parallelism::None,
                )
            }
        };
        // Under a deadline or cancellation, a large product is cut into parts of at most
        // STOPPABLE_FLOPS, and parts not yet started are skipped once the step stops (the
        // kernel then fails with the step's interruption): stopping takes one part's time.
        let bounded = ctx.and_then(|c| c.step).is_some_and(|s| s.is_bounded());
        let stoppable = if bounded { (m * n * k).div_ceil(STOPPABLE_FLOPS) } else { 1 };
        if let (true, Some(ctx)) = (threads > 1 || stoppable > 1, ctx) {
            // Split the output into blocks along its longer side (columns in multiples of 16
            // to keep whole micro-kernel tiles), a few per thread so that the calling thread,
            // which starts at once, takes more of them than a pool thread that wakes late:
            // measured faster than the gemm crate's own threading for the skinny products of
            // training steps.
            let by_cols = n >= m;
            let len = if by_cols { n } else { m };
            let parts = (threads * 2).max(stoppable);
            let step = if by_cols { len.div_ceil(parts).div_ceil(16) * 16 } else { len.div_ceil(parts) };
            ctx.for_each_part(len.div_ceil(step), |b| {
                if ctx.stopped() {
                    return;
                }
                let (start, size) = (b * step, step.min(len - b * step));
                if by_cols {
                    block(0, m, start, size)
                } else {
                    block(start, size, 0, n)
                }
            });
        } else {
            block(0, m, 0, n);
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

struct BatchMatMul<T> {
    adj_x: bool,
    adj_y: bool,
    _t: std::marker::PhantomData<T>,
}
impl<T: GemmElement> OpKernel for BatchMatMul<T> {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let (a, b) = (&inputs[0], &inputs[1]);
        if a.rank() < 2 || b.rank() < 2 {
            return Err(invalid(format!("In[0] and In[1] must have rank >= 2, got {:?} and {:?}", a.dims(), b.dims())));
        }
        let (ad, bd) = (a.dims(), b.dims());
        let (ab, bb) = (&ad[..ad.len() - 2], &bd[..bd.len() - 2]);
        let batch = ferroflow_tensor::broadcast_dims(ab, bb).ok_or_else(|| {
            invalid(format!("In[0] and In[1] must have compatible batch dimensions: {ad:?} vs. {bd:?}"))
        })?;
        let (ar, ac) = (ad[ad.len() - 2], ad[ad.len() - 1]);
        let (br, bc) = (bd[bd.len() - 2], bd[bd.len() - 1]);
        let (m, k) = if self.adj_x { (ac, ar) } else { (ar, ac) };
        let (k2, n) = if self.adj_y { (bc, br) } else { (br, bc) };
        if k != k2 {
            return Err(invalid(format!("Matrix size-incompatible: In[0]: {ad:?}, In[1]: {bd:?}")));
        }
        let mut dims = batch.clone();
        dims.extend([m, n]);
        let mut out = Tensor::zeros(T::DTYPE, &dims)?;
        let (x, y) = (a.as_slice::<T>()?, b.as_slice::<T>()?);
        let o = out.as_mut_slice::<T>()?;
        let (sa, sb) = (strides_of(ab), strides_of(bb));
        let nb: usize = batch.iter().product();
        let bst = strides_of(&batch);
        for i in 0..nb {
            let coord: Vec<usize> = bst.iter().zip(&batch).map(|(&s, &d)| (i / s) % d).collect();
            let pick = |dims: &[usize], st: &[usize]| -> usize {
                dims.iter()
                    .enumerate()
                    .map(|(j, &d)| (if d == 1 { 0 } else { coord[coord.len() - dims.len() + j] }) * st[j])
                    .sum()
            };
            let (ia, ib) = (pick(ab, &sa), pick(bb, &sb));
            let (a_rs, a_cs) = if self.adj_x { (1, ac) } else { (ac, 1) };
            let (b_rs, b_cs) = if self.adj_y { (1, bc) } else { (bc, 1) };
            product(
                ctx,
                (m, n, k),
                (&x[ia * ar * ac..(ia + 1) * ar * ac], a_rs, a_cs),
                (&y[ib * br * bc..(ib + 1) * br * bc], b_rs, b_cs),
                &mut o[i * m * n..(i + 1) * m * n],
            );
        }
        outputs.push(out);
        Ok(())
    }
}

fn k_batch_matmul(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let (adj_x, adj_y) = (d.bool("adj_x")?, d.bool("adj_y")?);
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64, Int32 => i32, Int64 => i64],
        |T| Ok(Box::new(BatchMatMul::<T> { adj_x, adj_y, _t: Default::default() }) as Box<dyn OpKernel>))
}

pub(crate) fn register(r: &mut KernelRegistry) {
    r.register("MatMul", "T", &[DType::Float, DType::Double, DType::Int32, DType::Int64], k_matmul);
    r.register("_MklMatMul", "T", &[DType::Float, DType::Double], k_matmul);
    r.register("BatchMatMulV2", "T", &[DType::Float, DType::Double, DType::Int32, DType::Int64], k_batch_matmul);
}
