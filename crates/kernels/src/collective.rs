//! Collective kernels: `CollectiveReduceV2` (all-reduce, `final_op` `Div` for the mean),
//! `CollectiveGatherV2` (all-gather along dimension 0) and `CollectiveBcastSendV2` /
//! `CollectiveBcastRecvV2` (broadcast from the rank that runs the send), through
//! `ferroflow_collective::world()`: MPI's world under `mpirun` (with `ferroflow-mpi`), one
//! rank otherwise (every collective is then the identity). The group is the whole world;
//! `group_size` must equal its size.
//!
//! A kernel blocks its thread until every rank has joined the collective. The distributed
//! optimizer chains its collectives with control edges so every rank issues them in the same
//! order (MPI's rule for collectives on one communicator).
use ferroflow_collective::{self as collective, Communicator, Elem, ReduceOp};
use ferroflow_tensor::{DType, Element, Tensor};

use crate::reduce::axis_values;
use crate::{invalid, Inputs, KResult, KernelContext, KernelError, KernelRegistry, NodeDesc, OpKernel, Outputs};

fn failed(e: collective::CollectiveError) -> KernelError {
    invalid(e.to_string())
}

/// The world, after checking the node's `group_size` (input 1) against it.
fn world_for(inputs: &Inputs) -> KResult<std::sync::Arc<dyn Communicator>> {
    let world = collective::world();
    let size = inputs
        .get(1)
        .ok_or_else(|| invalid("missing group_size"))?
        .scalar_value::<i32>()
        .map_err(|_| invalid("group_size must be a scalar int32"))?;
    if usize::try_from(size).ok() != Some(world.size()) {
        return Err(invalid(format!(
            "group_size {size} does not match the world's {} rank(s) ({} backend): a collective's group is the \
             whole world (mpirun -np N runs N ranks)",
            world.size(),
            world.backend()
        )));
    }
    Ok(world)
}

/// The tensor's elements, writable (copied first if shared).
fn elements<T: Element + Elem>(t: &mut Tensor) -> KResult<&mut [T]> {
    Ok(t.as_mut_slice::<T>()?)
}

struct Reduce {
    op: ReduceOp,
    mean: bool,
    dtype: DType,
}

impl Reduce {
    /// All-reduces `t` in place; with `final_op` Div, divides by `ranks` (the world's size,
    /// as `T`) after: one division per element, a loop the compiler vectorizes.
    fn run<T: Element + Elem + std::ops::Div<Output = T>>(
        &self,
        world: &dyn Communicator,
        t: &mut Tensor,
        ranks: T,
    ) -> KResult<()> {
        let v = elements::<T>(t)?;
        collective::all_reduce(world, v, self.op).map_err(failed)?;
        if self.mean && world.size() > 1 {
            for x in v.iter_mut() {
                *x = *x / ranks;
            }
        }
        Ok(())
    }
}

impl OpKernel for Reduce {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let world = world_for(inputs)?;
        let n = world.size();
        let mut t = inputs.swap_remove(0);
        inputs.clear();
        match self.dtype {
            DType::Float => self.run::<f32>(&*world, &mut t, n as f32)?,
            DType::Double => self.run::<f64>(&*world, &mut t, n as f64)?,
            DType::Int32 => self.run::<i32>(&*world, &mut t, n as i32)?,
            DType::Int64 => self.run::<i64>(&*world, &mut t, n as i64)?,
            d => return Err(invalid(format!("CollectiveReduceV2 has no kernel for T={d}"))),
        }
        outputs.push(t);
        Ok(())
    }
}

struct Gather;

impl OpKernel for Gather {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let world = world_for(inputs)?;
        let t = &inputs[0];
        if t.rank() == 0 {
            return Err(invalid(
                "CollectiveGatherV2 needs an input of rank 1 or more (it concatenates along dimension 0)",
            ));
        }
        // Every rank must send the same number of bytes; agree on it first so a mismatch
        // fails everywhere instead of leaving some ranks waiting.
        let len = t.as_bytes()?.len() as i64;
        let mut agreed = [len, -len];
        collective::all_reduce(&*world, &mut agreed, ReduceOp::Max).map_err(failed)?;
        if agreed[0] != -agreed[1] {
            return Err(invalid(format!(
                "CollectiveGatherV2: ranks gather different sizes ({} to {} bytes; this rank {len}): every rank's \
                 input must have the same shape",
                -agreed[1], agreed[0]
            )));
        }
        let mut dims = t.dims().to_vec();
        dims[0] *= world.size();
        let mut out = Tensor::zeros(t.dtype(), &dims)?;
        let bytes = out.as_mut_bytes()?;
        world.all_gather(t.as_bytes()?, bytes).map_err(failed)?;
        inputs.clear();
        outputs.push(out);
        Ok(())
    }
}

/// Agrees on the broadcast's root (the one rank that sends) and size: every rank joins the
/// same all-reduce, so a missing or second sender, or receivers expecting another size,
/// fail on every rank.
fn agree_root(world: &dyn Communicator, sending: bool, len: usize) -> KResult<usize> {
    let rank = world.rank() as i64;
    let len = len as i64;
    let mut v = if sending { [rank, -rank, len, -len] } else { [-1, i64::MIN + 1, len, -len] };
    collective::all_reduce(world, &mut v, ReduceOp::Max).map_err(failed)?;
    let (first, last) = (-v[1], v[0]);
    if last < 0 {
        return Err(invalid("broadcast: no rank runs CollectiveBcastSendV2 for this collective"));
    }
    if first != last {
        return Err(invalid(format!("broadcast: ranks {first} and {last} both run CollectiveBcastSendV2")));
    }
    if v[2] != -v[3] {
        return Err(invalid(format!(
            "broadcast: ranks disagree on its size ({} to {} bytes; this rank {len}): the receivers' shape and T must \
             match the sender's",
            -v[3], v[2]
        )));
    }
    Ok(last as usize)
}

struct BcastSend;

impl OpKernel for BcastSend {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let world = world_for(inputs)?;
        let mut t = inputs.swap_remove(0);
        inputs.clear();
        let root = agree_root(&*world, true, t.as_bytes()?.len())?;
        world.broadcast(t.as_mut_bytes()?, root).map_err(failed)?;
        outputs.push(t);
        Ok(())
    }
}

struct BcastRecv(DType);

impl OpKernel for BcastRecv {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let world = world_for(inputs)?;
        let dims = axis_values(&inputs[3]).map_err(|_| invalid("shape must be a 1-D int32 or int64 tensor"))?;
        let dims: Vec<usize> = (dims.iter().map(|&d| usize::try_from(d)))
            .collect::<Result<_, _>>()
            .map_err(|_| invalid(format!("shape {dims:?} has a negative dimension")))?;
        let mut t = Tensor::zeros(self.0, &dims)?;
        let root = agree_root(&*world, false, t.as_bytes()?.len())?;
        world.broadcast(t.as_mut_bytes()?, root).map_err(failed)?;
        inputs.clear();
        outputs.push(t);
        Ok(())
    }
}

const REDUCED: &[DType] = &[DType::Float, DType::Double, DType::Int32, DType::Int64];
const GATHERED: &[DType] = &[DType::Float, DType::Half, DType::Double, DType::Int32, DType::Int64];
const SENT: &[DType] = &[DType::Bool, DType::Float, DType::Half, DType::Double, DType::Int32, DType::Int64];

fn k_reduce(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let merge = d.string("merge_op")?;
    let op = ReduceOp::from_tf(&merge)
        .ok_or_else(|| invalid(format!("merge_op '{merge}': expected Min, Max, Mul or Add")))?;
    let mean = match d.string("final_op")?.as_str() {
        "Id" => false,
        "Div" => true,
        other => return Err(invalid(format!("final_op '{other}': expected Id or Div"))),
    };
    Ok(Box::new(Reduce { op, mean, dtype: d.dtype("T")? }))
}

pub(crate) fn register(r: &mut KernelRegistry) {
    r.register("CollectiveReduceV2", "T", REDUCED, k_reduce);
    r.register("CollectiveGatherV2", "T", GATHERED, |_| Ok(Box::new(Gather)));
    r.register("CollectiveBcastSendV2", "T", SENT, |_| Ok(Box::new(BcastSend)));
    r.register("CollectiveBcastRecvV2", "T", SENT, |d| Ok(Box::new(BcastRecv(d.dtype("T")?))));
}
