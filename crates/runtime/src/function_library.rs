//! How plans reach the functions their nodes call (TensorFlow's `FunctionLibraryRuntime`):
//! plan building asks a [`FunctionLibraryRuntime`] to instantiate a library function for a
//! call site and gets a [`FunctionBody`] to run within the caller's steps. The session
//! implements it (a child session per body, sharing the caller's pools), so the kernels of
//! call ops never reach back into the session. A `FunctionDef` becomes an ordinary graph
//! through `ferroflow_ops::functions::function_graph`.
use ferroflow_graph::{Attrs, Node};
use ferroflow_kernels::{KResult, KernelContext};
pub(crate) use ferroflow_ops::functions::{function_graph, resolve_ref, substitute, FunctionGraph};
use ferroflow_proto::FunctionDefLibrary;
use ferroflow_tensor::Tensor;

use crate::RuntimeError;

/// Instantiates library functions for the call sites of a plan.
pub(crate) trait FunctionLibraryRuntime {
    /// Instantiates function `name` of `library` with the call's attrs, for the call site
    /// `call_site` (named in errors): a body compiled once, run by every call.
    fn instantiate(
        &self,
        call_site: &Node,
        library: &FunctionDefLibrary,
        name: &str,
        call: &Attrs,
    ) -> Result<Box<dyn FunctionBody>, RuntimeError>;

    /// The most iterations one `While` may run (0 = no limit).
    fn max_loop_iterations(&self) -> u64;
}

/// An instantiated function: arguments in, results out, within the caller's step (its
/// cancellation and deadline apply).
pub(crate) trait FunctionBody: Send + Sync {
    /// Runs the body once.
    fn run(&self, ctx: &KernelContext, args: &[Tensor]) -> KResult<Vec<Tensor>>;
}
