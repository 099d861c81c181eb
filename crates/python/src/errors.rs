//! TensorFlow's exception classes (`tf.errors`): one `OpError` and a subclass per status
//! code, each raised with the same one-line message the CLI prints; which class an error is
//! comes from the error's chain of causes ([`code`]).
use std::error::Error as StdError;

use ferroflow::runtime::{Interrupt, RuntimeError};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::PyErr;

create_exception!(
    ferroflow.errors,
    OpError,
    PyException,
    "An error a graph, a step or a file gave (TensorFlow's `tf.errors.OpError`)."
);
create_exception!(ferroflow.errors, CancelledError, OpError, "A step was cancelled (Ctrl-C, or `Session.close`).");
create_exception!(ferroflow.errors, UnknownError, OpError, "An error of no other class.");
create_exception!(
    ferroflow.errors,
    InvalidArgumentError,
    OpError,
    "An argument, a feed, a graph or a file is not what was expected."
);
create_exception!(ferroflow.errors, DeadlineExceededError, OpError, "A step ran past its `RunOptions.timeout_in_ms`.");
create_exception!(ferroflow.errors, NotFoundError, OpError, "A tensor, node, file or checkpoint entry does not exist.");
create_exception!(ferroflow.errors, AlreadyExistsError, OpError, "What was to be created exists.");
create_exception!(ferroflow.errors, PermissionDeniedError, OpError, "The operation is not permitted.");
create_exception!(
    ferroflow.errors,
    ResourceExhaustedError,
    OpError,
    "Memory or another resource ran out (a tensor too large)."
);
create_exception!(
    ferroflow.errors,
    FailedPreconditionError,
    OpError,
    "The system is not in a state for the operation (an uninitialized variable)."
);
create_exception!(ferroflow.errors, AbortedError, OpError, "The operation was aborted.");
create_exception!(ferroflow.errors, OutOfRangeError, OpError, "An iterator or input ran past its end.");
create_exception!(ferroflow.errors, UnimplementedError, OpError, "The operation, kernel or dtype is not supported.");
create_exception!(ferroflow.errors, InternalError, OpError, "An internal invariant was broken.");
create_exception!(ferroflow.errors, UnavailableError, OpError, "A service is unavailable.");
create_exception!(ferroflow.errors, DataLossError, OpError, "Data is corrupt or lost (a damaged checkpoint).");

/// TensorFlow's status codes that ferroflow's errors map to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Code {
    Cancelled,
    InvalidArgument,
    DeadlineExceeded,
    NotFound,
    ResourceExhausted,
    FailedPrecondition,
    OutOfRange,
    Unimplemented,
    DataLoss,
    Unknown,
}

/// The status code of an error: the first cause in its chain that says one.
pub(crate) fn code(e: &(dyn StdError + 'static)) -> Code {
    let mut cur: Option<&(dyn StdError + 'static)> = Some(e);
    while let Some(e) = cur {
        if let Some(c) = own_code(e) {
            return c;
        }
        cur = e.source();
    }
    Code::InvalidArgument
}

fn own_code(e: &(dyn StdError + 'static)) -> Option<Code> {
    use ferroflow::checkpoint::CheckpointError;
    use ferroflow::graph::GraphError;
    use ferroflow::kernels::KernelError;
    use ferroflow::tensor::TensorError;
    if let Some(r) = e.downcast_ref::<RuntimeError>() {
        if r.is_out_of_range() {
            return Some(Code::OutOfRange);
        }
        return match r {
            RuntimeError::Interrupted { interrupt: Interrupt::Cancelled, .. } => Some(Code::Cancelled),
            RuntimeError::Interrupted { interrupt: Interrupt::DeadlineExceeded { .. }, .. } => {
                Some(Code::DeadlineExceeded)
            }
            RuntimeError::NoSuchTensor { .. } => Some(Code::NotFound),
            RuntimeError::FedTwice { .. }
            | RuntimeError::FeedDType { .. }
            | RuntimeError::FeedShape { .. }
            | RuntimeError::FeedCount { .. } => Some(Code::InvalidArgument),
            _ => None,
        };
    }
    if let Some(k) = e.downcast_ref::<KernelError>() {
        return match k {
            KernelError::NoKernel { .. } => Some(Code::Unimplemented),
            KernelError::OutOfRange(_) => Some(Code::OutOfRange),
            KernelError::InvalidArgument(m) if m.contains("uninitialized") => Some(Code::FailedPrecondition),
            KernelError::InvalidArgument(_) => Some(Code::InvalidArgument),
            KernelError::Interrupted(Interrupt::Cancelled) => Some(Code::Cancelled),
            KernelError::Interrupted(Interrupt::DeadlineExceeded { .. }) => Some(Code::DeadlineExceeded),
            _ => None,
        };
    }
    if let Some(t) = e.downcast_ref::<TensorError>() {
        return match t {
            TensorError::TooLarge(_) | TensorError::SystemRefused { .. } | TensorError::ResourceExhausted { .. } => {
                Some(Code::ResourceExhausted)
            }
            TensorError::UnsupportedDType(_) => Some(Code::Unimplemented),
            _ => Some(Code::InvalidArgument),
        };
    }
    if let Some(g) = e.downcast_ref::<GraphError>() {
        return match g {
            GraphError::NoSuchNode(..) | GraphError::NoSuchOutput { .. } => Some(Code::NotFound),
            GraphError::UnknownOps(_) => Some(Code::Unimplemented),
            _ => None,
        };
    }
    if let Some(c) = e.downcast_ref::<CheckpointError>() {
        return match c {
            CheckpointError::NotFound { .. } => Some(Code::NotFound),
            CheckpointError::Corrupt { .. } => Some(Code::DataLoss),
            _ => None,
        };
    }
    if let Some(io) = e.downcast_ref::<std::io::Error>() {
        return Some(match io.kind() {
            std::io::ErrorKind::NotFound => Code::NotFound,
            std::io::ErrorKind::OutOfMemory => Code::ResourceExhausted,
            _ => Code::Unknown,
        });
    }
    None
}

/// The exception of `code` with `message`.
pub(crate) fn raise(code: Code, message: String) -> PyErr {
    match code {
        Code::Cancelled => CancelledError::new_err(message),
        Code::InvalidArgument => InvalidArgumentError::new_err(message),
        Code::DeadlineExceeded => DeadlineExceededError::new_err(message),
        Code::NotFound => NotFoundError::new_err(message),
        Code::ResourceExhausted => ResourceExhaustedError::new_err(message),
        Code::FailedPrecondition => FailedPreconditionError::new_err(message),
        Code::OutOfRange => OutOfRangeError::new_err(message),
        Code::Unimplemented => UnimplementedError::new_err(message),
        Code::DataLoss => DataLossError::new_err(message),
        Code::Unknown => UnknownError::new_err(message),
    }
}

/// The Python exception for a ferroflow error: its class from [`code`], its message the
/// error's one line (with its causes, as the CLI prints them).
pub(crate) fn to_py<E: StdError + 'static>(e: E) -> PyErr {
    let mut message = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let m = c.to_string();
        if !message.contains(&m) {
            message.push_str(": ");
            message.push_str(&m);
        }
        cur = c.source();
    }
    raise(code(&e), message)
}

/// An `InvalidArgumentError` with `message`.
pub(crate) fn invalid(message: impl Into<String>) -> PyErr {
    InvalidArgumentError::new_err(message.into())
}
