//! TensorFlow 2's side of ferroflow, on the same op registry, kernels, optimizer and executor
//! as graphs: [`eager`] execution of ops on concrete tensors, [`tape::GradientTape`] over them
//! (graph autodiff's gradient functions), eager [`Variable`]s, and [`traced`] graph functions
//! (`tf.function`) with functional control flow ([`cond`], [`while_loop`]), and the run-time
//! half of AutoGraph ([`autograph`], what `#[ferroflow::function]` expands to).
pub mod autograph;
pub mod control;
pub mod eager;
pub mod tape;
pub mod traced;
pub mod variable;

pub use control::{cond, if_stmt, python_dtype, while_loop, while_stmt, Slot};
pub use eager::{execute, op, Call, Eager, EagerError};
pub use tape::GradientTape;
pub use traced::{function, ConcreteFunction, Function, Value};
pub use variable::Variable;
