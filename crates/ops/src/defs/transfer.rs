//! Cross-device transfers, made by the partitioner: `_Send` on the producing device and
//! `_Recv` (same `tensor_name`) on the consuming one. No kernels: the runtime's rendezvous
//! (`ferroflow-runtime`'s `rendezvous.rs`) hands the tensor over.
use crate::facts::Transfer;
use crate::registry::{op, OpBuilder, OpDef};
use crate::shape_inference as s;

fn transfer(b: OpBuilder, end: Transfer) -> OpBuilder {
    b.attr("tensor_name: string")
        .attr("send_device: string")
        .attr("send_device_incarnation: int")
        .attr("recv_device: string")
        .attr("client_terminated: bool = false")
        .stateful()
        .transfer(end)
        .gradient_unavailable(
            "made by the partitioner after gradients are built (TensorFlow registers no gradient either)",
        )
}

/// The transfer ops.
pub fn defs() -> Vec<OpDef> {
    vec![
        transfer(op("_Send").input("tensor: T").attr("T: type"), Transfer::Send).shape(s::no_outputs).build(),
        transfer(op("_Recv").output("tensor: tensor_type").attr("tensor_type: type"), Transfer::Recv).build(),
    ]
}
