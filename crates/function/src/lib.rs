//! TensorFlow 2's side of ferroflow, on the same op registry, kernels, optimizer and executor
//! as graphs: [`eager`] execution of ops on concrete tensors. Graph functions traced from
//! closures, GradientTape and AutoGraph build on it (issue 17, in progress).
pub mod eager;

pub use eager::{execute, op, Call, Eager, EagerError};
