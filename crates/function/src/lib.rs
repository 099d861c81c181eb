//! TensorFlow 2's side of ferroflow, on the same op registry, kernels, optimizer and executor
//! as graphs: [`eager`] execution of ops on concrete tensors, [`tape::GradientTape`] over them
//! (graph autodiff's gradient functions), eager [`Variable`]s, and [`traced`] graph functions
//! (`tf.function`) with functional control flow ([`cond`], [`while_loop`]), and the run-time
//! half of AutoGraph ([`autograph`], what `#[ferroflow::function]` expands to).
//!
//! Ops are called through the one op surface ([`ferroflow_ops::RawOps`], [`ferroflow_ops::Ops`]):
//! on tensors with the [`Eager`] target, on [`Value`]s with the [`Traced`] target.
#![warn(missing_docs)]
pub mod autograph;
mod context;
pub mod control;
pub mod eager;
mod error;
pub mod tape;
pub mod traced;
mod value;
pub mod variable;

pub use control::{cond, if_stmt, while_loop, while_stmt, Slot};
pub use eager::{execute, op, Call, Eager};
pub use error::{FunctionError, OpError};
pub use tape::GradientTape;
pub use traced::{function, ConcreteFunction, Function};
pub use value::{apply, apply_lists, Traced, Value};
pub use variable::Variable;
