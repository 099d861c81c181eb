//! The in-process rendezvous between partitions: a `_Send` on one device and the `_Recv` with
//! the same `tensor_name` on another. Partitions of one step run as one plan; a `_Recv` reads
//! the sent tensor through the executor's slot table (the rendezvous buffer), so it becomes
//! ready exactly when the tensor has been produced, partitions run concurrently, nothing
//! blocks a thread, and an error anywhere aborts the whole step.
use std::collections::HashMap;

use ferroflow_graph::{Graph, NodeId, Output};
use ferroflow_kernels::{Inputs, KResult, KernelContext, OpKernel, Outputs};
use ferroflow_ops::{OpRegistry, Transfer};
use ferroflow_proto::attr_value;

use crate::RuntimeError;

/// The node's end of a transfer, if it is one.
pub(crate) fn transfer(graph: &Graph, id: NodeId) -> Option<Transfer> {
    OpRegistry::global().facts(&graph.node(id).op).and_then(|f| f.transfer())
}

/// A node's `tensor_name` attr.
pub(crate) fn tensor_name(graph: &Graph, id: NodeId) -> String {
    match graph.node(id).attrs.get("tensor_name").and_then(|a| a.value.as_ref()) {
        Some(attr_value::Value::S(s)) => String::from_utf8_lossy(s).into_owned(),
        _ => String::new(),
    }
}

/// Every `_Send` of the graph by tensor name: (the send node, the tensor it sends).
pub(crate) fn sent_tensors(graph: &Graph) -> Result<HashMap<String, (NodeId, Output)>, RuntimeError> {
    let mut sent: HashMap<String, (NodeId, Output)> = HashMap::new();
    for (id, n) in graph.nodes().iter().enumerate() {
        if transfer(graph, id) != Some(Transfer::Send) {
            continue;
        }
        let name = tensor_name(graph, id);
        if let Some((other, _)) = sent.insert(name.clone(), (id, n.inputs[0])) {
            return Err(RuntimeError::Rendezvous(format!(
                "tensor_name '{name}' is sent twice: by '{}' and by '{}'",
                graph.node(other).name,
                n.name
            )));
        }
    }
    Ok(sent)
}

/// For a `_Recv`, the tensor it receives; `None` for other nodes.
pub(crate) fn recv_source(
    graph: &Graph,
    id: NodeId,
    sent: &HashMap<String, (NodeId, Output)>,
) -> Result<Option<Output>, RuntimeError> {
    if transfer(graph, id) != Some(Transfer::Recv) {
        return Ok(None);
    }
    let name = tensor_name(graph, id);
    match sent.get(&name) {
        Some(&(_, o)) => Ok(Some(o)),
        None => Err(RuntimeError::Rendezvous(format!(
            "_Recv '{}' waits for tensor_name '{name}', which no _Send sends",
            graph.node(id).name
        ))),
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
