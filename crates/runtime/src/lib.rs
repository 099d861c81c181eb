//! The runtime: [`Session`] (feeds and fetches by tensor name), [`ExecutionPlan`] (compiled
//! once per feeds/fetches/targets signature and cached), and the parallel executor.
#![warn(missing_docs)]

mod buffers;
mod cluster;
pub mod device;
mod dynamic;
mod env;
mod error;
mod executor;
mod function_library;
mod functional;
pub mod hooks;
pub mod merge;
mod options;
pub mod partition;
pub mod placer;
mod plan;
mod rendezvous;
mod session;
pub mod support;
mod trace;

pub use error::{FunctionDefError, RendezvousError, RuntimeError};
pub use ferroflow_kernels::resource::Variable;
pub use ferroflow_kernels::step::{Cancellation, Interrupt};
pub use merge::{merge_partitions, MergeError};
pub use options::{Cluster, SessionOptions};
pub use partition::{PartitionError, Partitions};
pub use plan::ExecutionPlan;
pub use session::Session;
pub use trace::StepTrace;
