//! What can go wrong in TensorFlow 2's side: an op call (eager or traced), an AutoGraph
//! statement, a traced function's graph. Each error names the op or function, what it was
//! given and why; the cause is kept as a source.
use std::sync::Arc;

use ferroflow_graph::{AttrError, ShapeError};
use ferroflow_kernels::KernelError;
use ferroflow_ops::{BuildError, GradError};
use ferroflow_runtime::RuntimeError;
use ferroflow_tensor::TensorError;

/// An error of eager execution, tracing or AutoGraph.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum FunctionError {
    /// An op call failed: run eagerly (`inputs` are its inputs' dtypes and shapes, as
    /// `float[2, 3], float[3]`) or added to a trace (`inputs` is `(traced)`).
    #[error("{op}({inputs}): {source}")]
    Op {
        /// The op (`MatMul`), or the operation (`GradientTape::gradient`).
        op: String,
        /// Its inputs in words.
        inputs: String,
        /// Why it failed.
        source: OpError,
    },
    /// An AutoGraph statement (`if`, `while`, `for`, a return) cannot run as written.
    #[error("{function}({statement}): {reason}")]
    Statement {
        /// The function.
        function: String,
        /// The statement, as written (`while n > 1`).
        statement: String,
        /// What is wrong: the variable, the dtype or shape, what to write instead.
        reason: String,
    },
    /// A traced function's graph could not be compiled or run.
    #[error("{function}((traced)): {source}")]
    Runtime {
        /// The function.
        function: String,
        /// The session's error.
        source: Arc<RuntimeError>,
    },
}

/// Why an op call failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum OpError {
    /// The registry has no such op.
    #[error("no such op in the registry")]
    UnknownOp,
    /// The inputs or attrs do not fit the op's signature (how many, which dtypes, lists).
    #[error("{0}")]
    Signature(String),
    /// The attrs do not fit the op's signature.
    #[error(transparent)]
    Attrs(#[from] AttrError),
    /// The op's shape function rejects the inputs' shapes.
    #[error(transparent)]
    Shape(ShapeError),
    /// The kernel could not be made or failed.
    #[error(transparent)]
    Kernel(Arc<KernelError>),
    /// A tensor was not what the call needs.
    #[error(transparent)]
    Tensor(Arc<TensorError>),
    /// The node could not be added to the graph being traced.
    #[error(transparent)]
    Graph(Arc<BuildError>),
    /// Gradients could not be built.
    #[error(transparent)]
    Gradients(Arc<GradError>),
    /// A traced function could not be made or run.
    #[error(transparent)]
    Runtime(Arc<RuntimeError>),
    /// A value used where it cannot be: a symbolic value outside its trace, a concrete
    /// operation on a symbolic value, a variable updated inside a branch.
    #[error("{0}")]
    Usage(String),
}

impl From<BuildError> for OpError {
    fn from(e: BuildError) -> Self {
        OpError::Graph(Arc::new(e))
    }
}

impl From<TensorError> for OpError {
    fn from(e: TensorError) -> Self {
        OpError::Tensor(Arc::new(e))
    }
}

impl From<KernelError> for OpError {
    fn from(e: KernelError) -> Self {
        OpError::Kernel(Arc::new(e))
    }
}

impl From<GradError> for OpError {
    fn from(e: GradError) -> Self {
        OpError::Gradients(Arc::new(e))
    }
}

impl From<RuntimeError> for OpError {
    fn from(e: RuntimeError) -> Self {
        OpError::Runtime(Arc::new(e))
    }
}

impl FunctionError {
    /// An error of op `op` added to a trace.
    pub(crate) fn traced(op: &str, source: impl Into<OpError>) -> FunctionError {
        FunctionError::Op { op: op.to_string(), inputs: "(traced)".into(), source: source.into() }
    }

    /// A misuse of values by op `op` in a trace.
    pub(crate) fn usage(op: &str, reason: impl Into<String>) -> FunctionError {
        FunctionError::traced(op, OpError::Usage(reason.into()))
    }

    /// An error of AutoGraph statement `statement` of function `function`.
    pub fn statement(function: &str, statement: &str, reason: impl Into<String>) -> FunctionError {
        FunctionError::Statement {
            function: function.to_string(),
            statement: statement.to_string(),
            reason: reason.into(),
        }
    }

    /// The error of running traced function `function`'s graph.
    pub(crate) fn runtime(function: &str, e: RuntimeError) -> FunctionError {
        FunctionError::Runtime { function: function.to_string(), source: Arc::new(e) }
    }
}
