//! Transfers, made by the partitioner: `_Send` on the producing device and `_Recv` (same
//! `tensor_name`) on the consuming one (`_HostSend`/`_HostRecv` are TensorFlow's forms for
//! tensors kept in host memory); and the client's ends as TensorFlow's partition graphs show
//! them, `_Arg` (a feed) and `_Retval` (a fetch). No kernels: the runtime's rendezvous
//! (`ferroflow-runtime`'s `rendezvous.rs`) hands tensors over; `_Arg`/`_Retval` appear only in
//! reported partition graphs, which `merge_partitions` turns back into placeholders and fetches.
use crate::facts::Transfer;
use crate::registry::{op, OpBuilder, OpDef};
use crate::shape_inference as s;

const AFTER_GRADIENTS: &str =
    "made by the partitioner after gradients are built (TensorFlow registers no gradient either)";

fn rendezvous(b: OpBuilder, end: Transfer) -> OpBuilder {
    b.attr("tensor_name: string")
        .attr("send_device: string")
        .attr("send_device_incarnation: int")
        .attr("recv_device: string")
        .attr("client_terminated: bool = false")
        .stateful()
        .transfer(end)
        .gradient_unavailable(AFTER_GRADIENTS)
}

/// The transfer ops.
pub fn defs() -> Vec<OpDef> {
    let mut v = Vec::new();
    for (send, recv) in [("_Send", "_Recv"), ("_HostSend", "_HostRecv")] {
        v.push(rendezvous(op(send).input("tensor: T").attr("T: type"), Transfer::Send).shape(s::no_outputs).build());
        v.push(rendezvous(op(recv).output("tensor: tensor_type").attr("tensor_type: type"), Transfer::Recv).build());
    }
    v.push(
        op("_Arg")
            .output("output: T")
            .attr("T: type")
            .attr("index: int >= 0")
            .stateful()
            .transfer(Transfer::Arg)
            .gradient_unavailable(AFTER_GRADIENTS)
            .build(),
    );
    v.push(
        op("_Retval")
            .input("input: T")
            .attr("T: type")
            .attr("index: int >= 0")
            .stateful()
            .shape(s::no_outputs)
            .transfer(Transfer::Retval)
            .gradient_unavailable(AFTER_GRADIENTS)
            .build(),
    );
    v
}
