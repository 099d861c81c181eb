//! The runtime: [`Session`] (feeds and fetches by tensor name), [`ExecutionPlan`] (compiled
//! once per feeds/fetches/targets signature and cached), and the parallel executor.
#![warn(missing_docs)]

pub mod device;
mod dynamic;
mod env;
mod error;
mod executor;
mod functional;
pub mod hooks;
pub mod merge;
pub mod partition;
pub mod placer;
mod plan;
mod rendezvous;
mod session;
pub mod support;
mod trace;

pub use error::{RendezvousError, RuntimeError};
pub use ferroflow_kernels::resource::Variable;
pub use ferroflow_kernels::step::{Cancellation, Interrupt};
pub use merge::{merge_partitions, MergeError};
pub use partition::{PartitionError, Partitions};
pub use plan::ExecutionPlan;
pub use session::{Cluster, Session, SessionOptions};
pub use trace::StepTrace;
