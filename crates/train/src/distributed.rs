//! Data-parallel training across the ranks of `ferroflow_collective::world()` (MPI under
//! `mpirun`, one rank otherwise), as Horovod does it: every rank trains the same graph on its
//! own shard of each global batch; a [`DistributedOptimizer`] averages the gradients across
//! ranks before the wrapped optimizer applies them; [`Broadcast`] copies rank 0's initial
//! variables to every rank; [`checksum`] lets ranks compare their variables.
//!
//! Gradients are fused (Horovod's tensor fusion): consecutive gradients, in the order
//! backprop produces them (last layer first), are flattened and concatenated into buffers of
//! up to [`DistributedOptimizer::fusion_threshold_bytes`], and each buffer is one
//! `CollectiveReduceV2` (`merge_op` `Add`, `final_op` `Div`: the mean). The buffers are graph
//! nodes, so the executor reduces a buffer as soon as its gradients exist, while backprop goes
//! on computing the earlier layers' gradients on other threads. Each buffer's reduction has a
//! control edge from the previous one, so every rank issues them in the same order. The
//! all-reduce gives every rank the same bits (see `ferroflow-mpi`), and every rank applies the
//! same update, so the replicas stay bitwise identical.
use std::hash::Hasher;

use ferroflow_collective as collective;
use ferroflow_graph::{Attrs, NodeId, Output};
use ferroflow_proto::attr;
use ferroflow_runtime::Session;
use ferroflow_tensor::hash::Fnv1a;
use ferroflow_tensor::{DType, Shape, Tensor};

use crate::optimizers::Optimizer;
use crate::{Builder, Result, TrainError, Variable};
use ferroflow_ops::{Ops, RawOps};

/// Horovod's default fusion threshold (`HOROVOD_FUSION_THRESHOLD`): 64 MiB.
pub const DEFAULT_FUSION_THRESHOLD: usize = 64 << 20;

/// An optimizer whose gradients are averaged across the world's ranks before they are
/// applied (Horovod's `DistributedOptimizer`).
#[derive(Clone, Debug)]
pub struct DistributedOptimizer {
    /// The optimizer that applies the averaged gradients.
    pub optimizer: Optimizer,
    /// Most bytes of gradients reduced as one buffer (0: one buffer per gradient).
    pub fusion_threshold_bytes: usize,
    /// The number of ranks the graph is built for (`group_size`); the world's size by
    /// default. A graph built for N ranks fails at its first step in a world of another size.
    pub ranks: usize,
}

impl DistributedOptimizer {
    /// Wraps `optimizer` for the current world, with Horovod's default fusion threshold.
    pub fn new(optimizer: Optimizer) -> DistributedOptimizer {
        DistributedOptimizer {
            optimizer,
            fusion_threshold_bytes: DEFAULT_FUSION_THRESHOLD,
            ranks: collective::world().size(),
        }
    }

    /// The wrapped optimizer's gradients, each replaced by its mean across ranks.
    pub fn compute_gradients(
        &self,
        b: &Builder,
        loss: Output,
        var_list: Option<&[Variable]>,
    ) -> Result<Vec<(Option<Output>, Variable)>> {
        let mut gv = self.optimizer.compute_gradients(b, loss, var_list)?;
        let s = b.scope().name_scope("DistributedOptimizer");
        let group_size = s.name_scope("group").with_name("group_size").scalar(self.ranks as i32)?;
        let group_key = s.name_scope("group").with_name("group_key").scalar(1i32)?;
        // Buffers in the order backprop finishes the gradients: the last variables' first.
        let order: Vec<usize> = (0..gv.len()).rev().filter(|&i| gv[i].0.is_some()).collect();
        let mut buckets: Vec<Vec<usize>> = Vec::new();
        let mut bytes = 0;
        for i in order {
            let v = &gv[i].1;
            let size = v.shape.iter().product::<usize>() * v.dtype.size().unwrap_or(4);
            let fits = buckets
                .last()
                .is_some_and(|last| gv[last[0]].1.dtype == v.dtype && bytes + size <= self.fusion_threshold_bytes);
            if fits {
                buckets.last_mut().expect("checked").push(i);
                bytes += size;
            } else {
                buckets.push(vec![i]);
                bytes = size;
            }
        }
        let mut previous: Option<NodeId> = None;
        for (k, bucket) in buckets.iter().enumerate() {
            let bs = s.name_scope(&format!("fusion_{k}"));
            let grads: Vec<Output> = bucket.iter().map(|&i| gv[i].0.expect("filtered")).collect();
            let sizes: Vec<i64> = bucket.iter().map(|&i| gv[i].1.shape.iter().product::<usize>() as i64).collect();
            let flat: Vec<Output> =
                grads.iter().map(|&g| bs.reshape(g, &[-1])).collect::<std::result::Result<_, _>>()?;
            let fused = if flat.len() == 1 { flat[0] } else { bs.concat_v2(&flat, 0i32)? };
            let dtype = gv[bucket[0]].1.dtype;
            let instance_key = bs.with_name("instance_key").scalar(k as i32 + 1)?;
            let mut a = Attrs::new();
            a.insert("T".into(), attr::dtype(dtype));
            a.insert("merge_op".into(), attr::string("Add"));
            a.insert("final_op".into(), attr::string("Div"));
            a.insert("Nordering_token".into(), attr::int(0));
            let control: Vec<NodeId> = previous.into_iter().collect();
            let reduced = bs.add_op(
                "CollectiveReduceV2",
                "CollectiveReduceV2",
                &[fused, group_size, group_key, instance_key],
                &control,
                a,
            )?;
            previous = Some(reduced);
            let reduced = Output { node: reduced, index: 0 };
            let parts: Vec<Output> = if bucket.len() == 1 {
                vec![reduced]
            } else {
                let splits = bs.constant_from(&[sizes.len()], &sizes)?;
                let axis = bs.scalar(0i32)?;
                let mut a = Attrs::new();
                a.insert("T".into(), attr::dtype(dtype));
                a.insert("Tlen".into(), attr::dtype(DType::Int64));
                a.insert("num_split".into(), attr::int(bucket.len() as i64));
                let split = bs.add_op("SplitV", "SplitV", &[reduced, splits, axis], &[], a)?;
                (0..bucket.len()).map(|i| Output { node: split, index: i }).collect()
            };
            for (&i, part) in bucket.iter().zip(parts) {
                let dims: Vec<i32> = gv[i].1.shape.iter().map(|&d| d as i32).collect();
                gv[i].0 = Some(bs.reshape(part, &dims)?);
            }
        }
        Ok(gv)
    }

    /// [`DistributedOptimizer::compute_gradients`], then the wrapped optimizer's
    /// `apply_gradients`: the train op.
    pub fn minimize(
        &self,
        b: &Builder,
        loss: Output,
        var_list: Option<&[Variable]>,
        global_step: Option<&Variable>,
    ) -> Result<NodeId> {
        let gv = self.compute_gradients(b, loss, var_list)?;
        self.optimizer.apply_gradients(b, &gv, global_step)
    }
}

/// Copies every variable's value from one rank to all (Horovod's
/// `broadcast_global_variables`): built into the graph before the session is made (a
/// placeholder and an `AssignVariableOp` per variable), run after the variables are
/// initialized. The graph is the same on every rank.
pub struct Broadcast {
    /// Per variable: its read and its placeholder.
    vars: Vec<(String, String)>,
    assign: String,
}

impl Broadcast {
    /// Adds the assignments for `b`'s variables (all of them: slots and `global_step` too).
    pub fn new(b: &Builder) -> Result<Broadcast> {
        let s = b.scope().name_scope("broadcast_variables");
        let mut vars = Vec::new();
        let mut assigns = Vec::new();
        for v in b.variables() {
            let shape = Shape::new(v.shape.iter().map(|&d| Some(d)).collect());
            let value = s.placeholder(v.dtype, &shape)?;
            let mut a = Attrs::new();
            a.insert("dtype".into(), attr::dtype(v.dtype));
            assigns.push(s.add_op("AssignVariableOp", "Assign", &[v.handle, value], &[], a)?);
            vars.push(s.with_graph(|g| (g.output_name(v.value), g.output_name(value))));
        }
        let assign = s.with_name("assign").group(&assigns)?;
        Ok(Broadcast { vars, assign: s.with_graph(|g| g.node(assign).name.clone()) })
    }

    /// Checks that every rank runs the same graph ([`same_graph`]), then reads every variable
    /// on `root`, sends the values to every rank, and assigns them there (on `root` too,
    /// which changes nothing). Every rank must call it, before the first training step.
    pub fn run(&self, sess: &Session, root: usize) -> Result<()> {
        same_graph(sess)?;
        let world = collective::world();
        let names: Vec<&str> = self.vars.iter().map(|(r, _)| r.as_str()).collect();
        let mut values = sess.run(&[], &names, &[])?;
        for t in &mut values {
            world
                .broadcast(t.as_mut_bytes()?, root)
                .map_err(|source| TrainError::Collective { context: "broadcast_variables".into(), source })?;
        }
        let feeds: Vec<(&str, Tensor)> = self.vars.iter().map(|(_, p)| p.as_str()).zip(values).collect();
        sess.run(&feeds, &[], &[self.assign.as_str()])?;
        Ok(())
    }
}

/// Step 0's check that every rank built the same graph: the FNV-1a 64 fingerprint of the
/// session's `GraphDef` bytes, gathered from every rank. Ranks whose graphs differ (other
/// code, flags or world size) would issue different collectives and wait on each other
/// forever; instead every rank fails with the same error naming the ranks that differ.
pub fn same_graph(sess: &Session) -> Result<()> {
    let world = collective::world();
    let bytes = ferroflow_proto::encode(&sess.graph().to_graph_def());
    let mine = Fnv1a::of(&bytes);
    let mut all = vec![0i64; world.size()];
    collective::all_gather(&*world, &[mine as i64], &mut all)
        .map_err(|source| TrainError::Collective { context: "comparing the ranks' graphs".into(), source })?;
    if let Some(other) = all.iter().position(|&f| f != all[0]) {
        let shown: Vec<String> = all.iter().enumerate().map(|(r, f)| format!("rank {r}: {:016x}", *f as u64)).collect();
        return Err(TrainError::Invalid(format!(
            "the ranks run different graphs (rank 0 and rank {other} differ; fingerprints {}): every rank must build \
             the same model with the same options",
            shown.join(", ")
        )));
    }
    Ok(())
}

/// The reads of `b`'s variables (`<name>/Read/ReadVariableOp:0`), in creation order.
pub fn variable_reads(b: &Builder) -> Vec<String> {
    let vars = b.variables();
    b.scope().with_graph(|g| vars.iter().map(|v| g.output_name(v.value)).collect())
}

/// FNV-1a 64 over the bytes of the tensors `reads` (variable reads, [`variable_reads`]), in
/// order: equal on ranks whose variables are bitwise identical.
pub fn checksum(sess: &Session, reads: &[String]) -> Result<u64> {
    let refs: Vec<&str> = reads.iter().map(String::as_str).collect();
    let mut h = Fnv1a::default();
    for t in sess.run(&[], &refs, &[])? {
        h.write(t.as_bytes()?);
    }
    Ok(h.finish())
}
