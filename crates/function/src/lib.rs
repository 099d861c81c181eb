//! TensorFlow 2's side of ferroflow, on the same op registry, kernels, optimizer and executor
//! as graphs: [`eager`] execution of ops on concrete tensors and [`tape::GradientTape`] over
//! them (graph autodiff's gradient functions). Graph functions traced from closures and
//! AutoGraph build on it (issue 17, in progress).
pub mod eager;
pub mod tape;
pub mod traced;
pub mod variable;

pub use eager::{execute, op, Call, Eager, EagerError};
pub use tape::GradientTape;
pub use traced::{function, ConcreteFunction, Function, Value};
pub use variable::Variable;
