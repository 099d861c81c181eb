//! `Select`, `SelectV2` (any dtype, copying element bytes) and `AddN`.
use ferroflow_tensor::{broadcast_dims, DType, Tensor};

use crate::elementwise::{broadcast_strides, NUMERIC};
use crate::numeric::Num;
use crate::{check_output, invalid, Inputs, KResult, KernelContext, KernelRegistry, OpKernel, Outputs};

/// For every element of `out_dims` (row-major), the offset of the matching element of an
/// input of `dims` broadcast to it.
fn broadcast_offsets(dims: &[usize], out_dims: &[usize]) -> Vec<usize> {
    let strides = broadcast_strides(dims, out_dims);
    let n: usize = out_dims.iter().product();
    let mut out = Vec::with_capacity(n);
    let mut idx = vec![0usize; out_dims.len()];
    let mut off = 0usize;
    for _ in 0..n {
        out.push(off);
        for ax in (0..out_dims.len()).rev() {
            idx[ax] += 1;
            off += strides[ax];
            if idx[ax] < out_dims[ax] {
                break;
            }
            off -= strides[ax] * out_dims[ax];
            idx[ax] = 0;
        }
    }
    out
}

/// Builds the output by picking, for each output element, element `ti[i]` of `t` or `ei[i]`
/// of `e` according to `pick[i]`.
fn gather_pick(t: &Tensor, e: &Tensor, dims: &[usize], choose: impl Fn(usize) -> (bool, usize)) -> KResult<Tensor> {
    let n = check_output(t.dtype(), dims)?;
    if t.dtype() == DType::String {
        let (ts, es) = (t.as_strings()?, e.as_strings()?);
        let v = (0..n).map(|i| {
            let (from_t, j) = choose(i);
            if from_t {
                ts[j].clone()
            } else {
                es[j].clone()
            }
        });
        return Ok(Tensor::from_strings(dims, v.collect())?);
    }
    let size = t.dtype().size().ok_or_else(|| invalid(format!("Select is not defined for {}", t.dtype())))?;
    let (tb, eb) = (t.as_bytes()?, e.as_bytes()?);
    Ok(Tensor::from_fill(t.dtype(), dims, |out| {
        for (i, o) in out.chunks_exact_mut(size).enumerate() {
            let (from_t, j) = choose(i);
            let src = if from_t { tb } else { eb };
            o.copy_from_slice(&src[j * size..(j + 1) * size]);
        }
    })?)
}

struct SelectV2;
impl OpKernel for SelectV2 {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let (c, t, e) = (&inputs[0], &inputs[1], &inputs[2]);
        let incompatible = || {
            invalid(format!("condition {:?}, then {:?} and else {:?} do not broadcast", c.dims(), t.dims(), e.dims()))
        };
        let te = broadcast_dims(t.dims(), e.dims()).ok_or_else(incompatible)?;
        let dims = broadcast_dims(c.dims(), &te).ok_or_else(incompatible)?;
        // Three offset tables of one usize per output element, then the output.
        check_output(DType::Int64, &[&[3], dims.as_slice()].concat())?;
        let (co, to, eo) = (
            broadcast_offsets(c.dims(), &dims),
            broadcast_offsets(t.dims(), &dims),
            broadcast_offsets(e.dims(), &dims),
        );
        let cond = c.as_slice::<bool>()?;
        let out = gather_pick(t, e, &dims, |i| if cond[co[i]] { (true, to[i]) } else { (false, eo[i]) })?;
        outputs.push(out);
        Ok(())
    }
}

struct Select;
impl OpKernel for Select {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let (c, t, e) = (&inputs[0], &inputs[1], &inputs[2]);
        if t.dims() != e.dims() {
            return Err(invalid(format!(
                "'then' and 'else' must have the same size, but received: {:?} vs. {:?}",
                t.dims(),
                e.dims()
            )));
        }
        let cond = c.as_slice::<bool>()?;
        let out = if c.dims() == t.dims() {
            gather_pick(t, e, t.dims(), |i| (cond[i], i))?
        } else if c.rank() == 1 && t.rank() >= 1 && c.len() == t.dims()[0] {
            let row = t.len() / t.dims()[0].max(1);
            gather_pick(t, e, t.dims(), |i| (cond[i / row.max(1)], i))?
        } else {
            return Err(invalid(format!(
                "condition must have the shape of 'then' or be a vector over its first dimension; got {:?} and {:?}",
                c.dims(),
                t.dims()
            )));
        };
        outputs.push(out);
        Ok(())
    }
}

struct AddN<T>(std::marker::PhantomData<T>);
impl<T: Num> OpKernel for AddN<T> {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let dims = inputs[0].dims().to_vec();
        if let Some(bad) = inputs.iter().find(|t| t.dims() != dims.as_slice()) {
            return Err(invalid(format!(
                "Inputs to operation AddN must have the same size and shape; got {dims:?} and {:?}",
                bad.dims()
            )));
        }
        let rest: Vec<Tensor> = inputs.drain(1..).collect();
        let mut acc = inputs.swap_remove(0);
        let a = acc.as_mut_slice::<T>()?;
        for t in &rest {
            a.iter_mut().zip(t.as_slice::<T>()?).for_each(|(x, y)| *x = x.add_w(*y));
        }
        outputs.push(acc);
        Ok(())
    }
}

pub(crate) fn register(r: &mut KernelRegistry) {
    r.register("Select", "", &[], |_| Ok(Box::new(Select)));
    r.register("SelectV2", "", &[], |_| Ok(Box::new(SelectV2)));
    r.register("AddN", "T", NUMERIC, |d| {
        dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64, Int32 => i32, Int64 => i64],
            |T| Ok(Box::new(AddN::<T>(Default::default())) as Box<dyn OpKernel>))
    });
}
