//! TensorFlow's exception classes (`tf.errors`): one `OpError` and a subclass per status
//! code, each raised with the same one-line message the CLI prints; which class an error is
//! comes from the error's chain of causes ([`code`]).
use std::error::Error as StdError;

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
create_exception!(ferroflow.errors, UnauthenticatedError, OpError, "No valid credentials for the operation.");
create_exception!(ferroflow.errors, DataLossError, OpError, "Data is corrupt or lost (a damaged checkpoint).");

pub(crate) use ferroflow::status::{code_of as code, Code};

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
        Code::AlreadyExists => AlreadyExistsError::new_err(message),
        Code::PermissionDenied => PermissionDeniedError::new_err(message),
        Code::Aborted => AbortedError::new_err(message),
        Code::Internal => InternalError::new_err(message),
        Code::Unavailable => UnavailableError::new_err(message),
        Code::Unauthenticated => UnauthenticatedError::new_err(message),
        _ => UnknownError::new_err(message),
    }
}

/// The Python exception for a ferroflow error: its class from [`code`], its message the
/// error's one line (with its causes, as the CLI prints them).
pub(crate) fn to_py<E: StdError + 'static>(e: E) -> PyErr {
    raise(code(&e), ferroflow::status::one_line(&e))
}

/// An `InvalidArgumentError` with `message`.
pub(crate) fn invalid(message: impl Into<String>) -> PyErr {
    InvalidArgumentError::new_err(message.into())
}
