//! TensorFlow 2's side of ferroflow, on the same op registry, kernels, optimizer and executor
//! as graphs: [`eager`] execution of ops on concrete tensors, [`tape::GradientTape`] over them
//! (graph autodiff's gradient functions), eager [`Variable`]s, and [`traced`] graph functions
//! (`tf.function`) with functional control flow ([`cond`], [`while_loop`]). The AutoGraph
//! proc-macro will build on those (issue 17, in progress).
pub mod eager;
pub mod tape;
pub mod traced;
pub mod variable;

pub use eager::{execute, op, Call, Eager, EagerError};
pub use tape::GradientTape;
pub use traced::{cond, function, while_loop, ConcreteFunction, Function, Value};
pub use variable::Variable;
