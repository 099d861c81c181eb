//! The in-process rendezvous between partitions: a `_Send` on one device and the `_Recv` with
//! the same `tensor_name` on another. Partitions of one step run as one plan; a `_Recv` reads
//! the sent tensor through the executor's slot table (the rendezvous buffer), so it becomes
//! ready exactly when the tensor has been produced, partitions run concurrently, nothing
//! blocks a thread, and an error anywhere aborts the whole step.
use std::collections::HashMap;

use ferroflow_graph::{Graph, Node, NodeId, Output};
use ferroflow_kernels::{Inputs, KResult, KernelContext, OpKernel, Outputs};
use ferroflow_ops::{OpRegistry, Transfer};
use ferroflow_proto::attr_value;

use crate::error::RendezvousError;

/// The transfers of a graph, resolved once: for each `_Recv`, its `_Send` (same
/// `tensor_name`) and the tensor that `_Send` sends.
pub(crate) struct Transfers {
    by_recv: HashMap<NodeId, (NodeId, Output)>,
}

fn tensor_name(n: &Node) -> String {
    match n.attrs.get("tensor_name").and_then(|a| a.value.as_ref()) {
        Some(attr_value::Value::S(s)) => String::from_utf8_lossy(s).into_owned(),
        _ => String::new(),
    }
}

impl Transfers {
    /// Pairs every `_Recv` of `graph` with its `_Send`.
    pub(crate) fn of(graph: &Graph) -> Result<Transfers, RendezvousError> {
        let reg = OpRegistry::global();
        let end = |n: &Node| reg.facts(&n.op).and_then(|f| f.transfer());
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
            match sent.get(&tensor) {
                Some(&pair) => by_recv.insert(id, pair),
                None => return Err(RendezvousError::NoSend { recv: n.name.clone(), tensor }),
            };
        }
        Ok(Transfers { by_recv })
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
