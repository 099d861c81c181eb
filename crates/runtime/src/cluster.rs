//! A step run by every task of a cluster (`SessionOptions::cluster`: MPI ranks): checking the
//! graph's devices against the cluster, restricting the step to this task's partitions, the
//! step's fingerprint, and what the ranks exchange before and after each step.
use ferroflow_graph::{Graph, NodeId};
use ferroflow_ops::{OpRegistry, Transfer};
use ferroflow_proto::RunMetadata;
use ferroflow_tensor::hash::Fnv1a;
use std::hash::Hasher;

use crate::device::{task_of, DeviceName};
use crate::options::Cluster;
use crate::placer::PlacementError;
use crate::plan::{ExecutionPlan, Signature};
use crate::rendezvous::peer_task;
use crate::RuntimeError;

/// A node asking for a task the cluster does not have is an error naming the node, the
/// device and the world's size (before placement, whose error would not say why).
pub(crate) fn check_tasks(graph: &Graph, cluster: Cluster) -> Result<(), RuntimeError> {
    for n in graph.nodes() {
        let Ok(d) = DeviceName::parse(&n.device) else { continue };
        if let Some(t) = d.task.filter(|&t| t as usize >= cluster.tasks) {
            return Err(PlacementError {
                node: n.name.clone(),
                reason: format!(
                    "it asks for device '{}' (task {t}), but the cluster has {} task(s): ranks 0..{} of mpirun -np {}",
                    n.device,
                    cluster.tasks,
                    cluster.tasks - 1,
                    cluster.tasks
                ),
            }
            .into());
        }
    }
    Ok(())
}

/// Restricts a cluster step to this task's partitions. Every rank is given the whole step's
/// signature; its fetches are returned by task 0 (the client's, as in TensorFlow, where the
/// master runs there), so they must be on task 0 and other tasks fetch nothing. Targets on
/// other tasks are theirs to run, and every `_Send` of this task to another is a target
/// (what the other tasks wait for).
pub(crate) fn restrict_to_task(graph: &Graph, sig: &mut Signature, cluster: Cluster) -> Result<(), RuntimeError> {
    let local = |id: NodeId| task_of(&graph.node(id).device) == cluster.task;
    if let Some((name, o)) = sig.fetches.iter().find(|(_, o)| task_of(&graph.node(o.node).device) != 0) {
        return Err(PlacementError {
            node: graph.node(o.node).name.clone(),
            reason: format!(
                "fetch '{name}' is on task {} ({}), but a cluster step's fetches are returned by task 0 (rank 0): \
                 place the fetched node on /job:worker/task:0, or fetch an Identity of it placed there",
                task_of(&graph.node(o.node).device),
                graph.node(o.node).device,
            ),
        }
        .into());
    }
    if cluster.task != 0 {
        sig.fetches.clear();
    }
    sig.targets.retain(|&t| local(t));
    let reg = OpRegistry::global();
    for (id, n) in graph.nodes().iter().enumerate() {
        let send = reg.facts(&n.op).and_then(|f| f.transfer()) == Some(Transfer::Send);
        if send && local(id) && peer_task(n, Transfer::Send) != cluster.task && !sig.targets.contains(&id) {
            sig.targets.push(id);
        }
    }
    Ok(())
}

/// What every rank must run: the FNV-1a 64 hash of the signature's names and every task's
/// partition graphs (by device).
pub(crate) fn fingerprint(names: &[&str], partitions: &[(String, ferroflow_proto::GraphDef)]) -> u64 {
    let mut h = Fnv1a::default();
    for name in names {
        h.write(name.as_bytes());
        h.write(&[0]);
    }
    for (device, def) in partitions {
        h.write(device.as_bytes());
        h.write(&ferroflow_proto::encode(def));
    }
    h.finish()
}

/// What a step is asked to record.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Record {
    pub trace: bool,
    pub partitions: bool,
}

/// Before a cluster step, every rank all-gathers the plan's fingerprint (the signature and
/// every task's partition graphs) and what it asks the step to record. Ranks about to run
/// different steps all fail here, naming the ranks, instead of waiting forever on transfers
/// that will not come; what any rank asks for, every rank records, so that rank 0 can gather
/// it. Outside a cluster: what was asked.
pub(crate) fn cluster_begin(plan: &ExecutionPlan, want: Record) -> Result<Record, RuntimeError> {
    let Some((cluster, fingerprint)) = plan.cluster else { return Ok(want) };
    let world = ferroflow_collective::world();
    if world.size() != cluster.tasks {
        return Err(RuntimeError::Cluster(format!(
            "the session's cluster has {} task(s), but this process's world has {} rank(s) (start it with mpirun -np {})",
            cluster.tasks,
            world.size(),
            cluster.tasks
        )));
    }
    let mine = [fingerprint as i64, want.trace as i64, want.partitions as i64];
    let mut all = vec![0i64; 3 * cluster.tasks];
    ferroflow_collective::all_gather(&*world, &mine, &mut all)
        .map_err(|e| RuntimeError::Cluster(format!("starting the step ({}): {e}", plan.step_name)))?;
    let ranks: Vec<&[i64]> = all.chunks(3).collect();
    if let Some(other) = ranks.iter().position(|w| w[0] != ranks[0][0]) {
        let shown: Vec<String> =
            ranks.iter().enumerate().map(|(r, w)| format!("rank {r}: {:016x}", w[0] as u64)).collect();
        return Err(RuntimeError::Cluster(format!(
            "the ranks run different steps (rank 0 and rank {other} differ; fingerprints {}; this is rank {}, {}): \
             every rank must run the same graph with the same feeds, fetches and targets, step by step",
            shown.join(", "),
            cluster.task,
            plan.step_name
        )));
    }
    Ok(Record { trace: ranks.iter().any(|w| w[1] != 0), partitions: ranks.iter().any(|w| w[2] != 0) })
}

/// After a cluster step that recorded anything: rank 0 receives every rank's `RunMetadata`
/// and merges them, each task's step stats (`dev_stats`, named by device) and partition
/// graphs in rank order; other ranks keep their own. Outside a cluster: `meta`.
pub(crate) fn cluster_end(plan: &ExecutionPlan, meta: RunMetadata) -> Result<RunMetadata, RuntimeError> {
    let Some((cluster, _)) = plan.cluster else { return Ok(meta) };
    let world = ferroflow_collective::world();
    let all = ferroflow_collective::all_gather_varied(&*world, &ferroflow_proto::encode(&meta))
        .map_err(|e| RuntimeError::Cluster(format!("gathering the step's run metadata: {e}")))?;
    if cluster.task != 0 {
        return Ok(meta);
    }
    let mut merged = RunMetadata::default();
    for (rank, bytes) in all.iter().enumerate() {
        let part: RunMetadata = ferroflow_proto::decode(bytes, "RunMetadata")
            .map_err(|e| RuntimeError::Cluster(format!("the run metadata of rank {rank}: {e}")))?;
        if let Some(stats) = part.step_stats {
            merged.step_stats.get_or_insert_with(Default::default).dev_stats.extend(stats.dev_stats);
        }
        merged.partition_graphs.extend(part.partition_graphs);
    }
    Ok(merged)
}
