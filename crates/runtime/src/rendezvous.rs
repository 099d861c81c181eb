//! The in-process rendezvous between partitions: a `_Send` on one device and the `_Recv` with
//! the same `tensor_name` on another. Partitions of one step run as one plan; a `_Recv` reads
//! the sent tensor through the executor's slot table (the rendezvous buffer), so it becomes
//! ready exactly when the tensor has been produced, partitions run concurrently, nothing
//! blocks a thread, and an error anywhere aborts the whole step.
//!
//! Between the tasks of a cluster (`SessionOptions::cluster`: MPI ranks), a `_Send` and its
//! `_Recv` run in different processes: [`RemoteSend`] sends the tensor as one point-to-point
//! message of `ferroflow_collective::world()` to the receiving task's rank, and [`RemoteRecv`]
//! waits for it (polling the step's cancellation and deadline). The message's tag is the
//! transfer's index among the graph's cross-task `tensor_name`s in sorted order, the same on
//! every rank because every rank places and partitions the same graph the same way.
use std::collections::HashMap;

use ferroflow_graph::{Graph, Node, NodeId, Output};
use ferroflow_kernels::{Inputs, KResult, KernelContext, KernelError, OpKernel, Outputs};
use ferroflow_ops::{OpRegistry, Transfer};
use ferroflow_proto::attr::AttrMap;
use ferroflow_proto::attr_value;
use ferroflow_tensor::{DType, Tensor};

use crate::device::task_of;
use crate::error::RendezvousError;
use crate::options::Cluster;
use crate::RuntimeError;

/// The transfers of a graph, resolved once: for each `_Recv`, its `_Send` (same
/// `tensor_name`) and the tensor that `_Send` sends.
pub(crate) struct Transfers {
    by_recv: HashMap<NodeId, (NodeId, Output)>,
    /// In a cluster: each cross-task transfer's `tensor_name` and its message tag.
    remote: HashMap<String, u32>,
}

fn tensor_name(n: &Node) -> String {
    n.attrs.string_attr("tensor_name").unwrap_or_default()
}

/// The task a transfer's other end runs on, seen from node `n` (a `_Send` or `_Recv`).
pub(crate) fn peer_task(n: &Node, end: Transfer) -> usize {
    task_of(&n.attrs.string_attr(if end == Transfer::Send { "recv_device" } else { "send_device" }).unwrap_or_default())
}

impl Transfers {
    /// Pairs every `_Recv` of `graph` with its `_Send`; in a cluster, transfers whose ends
    /// are on different tasks are not paired but numbered (their tags).
    pub(crate) fn of(graph: &Graph, cluster: Option<Cluster>) -> Result<Transfers, RendezvousError> {
        let reg = OpRegistry::global();
        let end = |n: &Node| reg.facts(&n.op).and_then(|f| f.transfer());
        let mut remote: Vec<String> = Vec::new();
        if cluster.is_some() {
            for n in graph.nodes() {
                if end(n) == Some(Transfer::Send)
                    && task_of(&n.attrs.string_attr("recv_device").unwrap_or_default()) != task_of(&n.device)
                {
                    remote.push(tensor_name(n));
                }
            }
        }
        remote.sort();
        let remote: HashMap<String, u32> = remote.into_iter().enumerate().map(|(i, t)| (t, i as u32 + 1)).collect();
        let mut sent: HashMap<String, (NodeId, Output)> = HashMap::new();
        for (id, n) in graph.nodes().iter().enumerate() {
            if end(n) != Some(Transfer::Send) {
                continue;
            }
            let tensor = tensor_name(n);
            if let Some((other, _)) = sent.insert(tensor.clone(), (id, n.inputs[0])) {
                return Err(RendezvousError::SentTwice {
                    tensor,
                    first: graph.node(other).name.clone(),
                    second: n.name.clone(),
                });
            }
        }
        let mut by_recv = HashMap::new();
        for (id, n) in graph.nodes().iter().enumerate() {
            if end(n) != Some(Transfer::Recv) {
                continue;
            }
            let tensor = tensor_name(n);
            if remote.contains_key(&tensor) {
                continue;
            }
            match sent.get(&tensor) {
                Some(&pair) => by_recv.insert(id, pair),
                None => return Err(RendezvousError::NoSend { recv: n.name.clone(), tensor }),
            };
        }
        Ok(Transfers { by_recv, remote })
    }

    /// For a `_Send` or `_Recv` of a cross-task transfer in a cluster: its kernel, which
    /// sends to or receives from the other task's rank.
    pub(crate) fn remote_kernel(&self, n: &Node, end: Transfer) -> Result<Option<Box<dyn OpKernel>>, RuntimeError> {
        let Some(&tag) = self.remote.get(&tensor_name(n)) else { return Ok(None) };
        let peer = peer_task(n, end);
        Ok(Some(match end {
            Transfer::Send => Box::new(RemoteSend { peer, tag }),
            _ => {
                let dtype = match n.attrs.attr_value("tensor_type") {
                    Some(attr_value::Value::Type(t)) => DType::from_tf(*t).ok(),
                    _ => None,
                };
                let dtype = dtype.ok_or_else(|| RuntimeError::Kernel {
                    node: n.name.clone(),
                    op: n.op.clone(),
                    source: Box::new(KernelError::InvalidArgument("_Recv needs a tensor_type attr".into())),
                })?;
                Box::new(RemoteRecv { peer, tag, dtype })
            }
        }))
    }

    /// For a `_Recv`: its `_Send` and the tensor sent.
    pub(crate) fn of_recv(&self, id: NodeId) -> Option<(NodeId, Output)> {
        self.by_recv.get(&id).copied()
    }
}

/// `_Send`: hands its input to the rendezvous (the executor's slot already holds it).
pub(crate) struct Send;

impl OpKernel for Send {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, _: &mut Outputs) -> KResult<()> {
        inputs.clear();
        Ok(())
    }
}

/// `_Recv`: outputs the tensor its `_Send` sent.
pub(crate) struct Recv;

impl OpKernel for Recv {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        outputs.push(inputs.pop().expect("the plan gives a _Recv its sent tensor"));
        Ok(())
    }
}

/// What a remote transfer polls while it waits: the step's cancellation and deadline.
fn stop_reason<'a>(ctx: &'a KernelContext<'a>) -> impl Fn() -> Option<String> + 'a {
    move || ctx.step.and_then(|s| s.check().err()).map(|i| i.to_string())
}

/// The wire form of a tensor: dtype (u32), rank (u32), dims (u64 each), then its bytes.
fn encode(t: &Tensor) -> KResult<Vec<u8>> {
    let bytes = t.as_bytes()?;
    let mut m = Vec::with_capacity(8 + 8 * t.rank() + bytes.len());
    m.extend_from_slice(&(t.dtype().to_tf() as u32).to_le_bytes());
    m.extend_from_slice(&(t.rank() as u32).to_le_bytes());
    for &d in t.dims() {
        m.extend_from_slice(&(d as u64).to_le_bytes());
    }
    m.extend_from_slice(bytes);
    Ok(m)
}

fn decode(m: &[u8], want: DType, peer: usize) -> KResult<Tensor> {
    let bad = |what: String| KernelError::InvalidArgument(format!("message from rank {peer}: {what}"));
    let word = |at: usize| m.get(at..at + 4).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")));
    let (dtype, rank) = (word(0), word(4));
    let (Some(dtype), Some(rank)) = (dtype, rank) else { return Err(bad(format!("{} bytes, no header", m.len()))) };
    if DType::from_tf(dtype as i32).ok() != Some(want) {
        return Err(bad(format!("dtype {dtype}, expected {want}")));
    }
    let rank = rank as usize;
    let body = 8usize.checked_add(rank.checked_mul(8).ok_or_else(|| bad(format!("rank {rank}")))?);
    let body = body.filter(|&b| b <= m.len()).ok_or_else(|| bad(format!("rank {rank} in {} bytes", m.len())))?;
    let dims: Vec<usize> =
        (0..rank).map(|i| u64::from_le_bytes(m[8 + 8 * i..16 + 8 * i].try_into().expect("8 bytes")) as usize).collect();
    Tensor::from_bytes(want, &dims, &m[body..]).map_err(|e| bad(e.to_string()))
}

/// `_Send` to another task: the tensor, as one message to that task's rank.
pub(crate) struct RemoteSend {
    peer: usize,
    tag: u32,
}

impl OpKernel for RemoteSend {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, _: &mut Outputs) -> KResult<()> {
        let message = encode(&inputs[0])?;
        inputs.clear();
        let world = ferroflow_collective::world();
        world
            .send(self.peer, self.tag, &message, &stop_reason(ctx))
            .map_err(|e| KernelError::InvalidArgument(format!("sending to task {}: {e}", self.peer)))
    }
}

/// `_Recv` from another task: waits for the message of that task's `_Send`.
pub(crate) struct RemoteRecv {
    peer: usize,
    tag: u32,
    dtype: DType,
}

impl OpKernel for RemoteRecv {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        inputs.clear();
        let world = ferroflow_collective::world();
        let message = world
            .recv(self.peer, self.tag, &stop_reason(ctx))
            .map_err(|e| KernelError::InvalidArgument(format!("receiving from task {}: {e}", self.peer)))?;
        outputs.push(decode(&message, self.dtype, self.peer)?);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{decode, encode};
    use ferroflow_tensor::{DType, Tensor};

    /// A message from another rank round-trips, and a damaged one is an error naming the
    /// rank and what is wrong: never a panic, never an allocation its bytes do not back.
    #[test]
    fn remote_tensor_messages_round_trip_and_damaged_ones_are_errors() {
        let t = Tensor::from_vec(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let m = encode(&t).unwrap();
        let back = decode(&m, DType::Float, 1).unwrap();
        assert_eq!((back.dims(), back.as_slice::<f32>().unwrap()), (t.dims(), t.as_slice::<f32>().unwrap()));
        let scalar = encode(&Tensor::scalar(7i64)).unwrap();
        assert_eq!(decode(&scalar, DType::Int64, 1).unwrap().scalar_value::<i64>().unwrap(), 7);

        let mut huge_rank = m.clone();
        huge_rank[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        let mut huge_dim = m.clone();
        huge_dim[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        let cases: Vec<(Vec<u8>, DType, &str)> = vec![
            (Vec::new(), DType::Float, "no header"),
            (m[..6].to_vec(), DType::Float, "no header"),
            (m.clone(), DType::Int32, "expected int32"),
            (huge_rank, DType::Float, "rank 4294967295"),
            (m[..20].to_vec(), DType::Float, "rank 2 in 20 bytes"),
            (huge_dim, DType::Float, ""),
            (m[..m.len() - 1].to_vec(), DType::Float, ""),
        ];
        for (bytes, dtype, says) in cases {
            let e = decode(&bytes, dtype, 3).unwrap_err().to_string();
            assert!(e.contains("message from rank 3") && e.contains(says), "{e}");
        }
    }
}
