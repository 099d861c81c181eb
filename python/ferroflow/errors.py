"""TensorFlow's exception classes (``tf.errors``): every error ferroflow raises is an
``OpError`` subclass chosen by its status code, with the CLI's one-line message."""
from ferroflow._native import (  # noqa: F401
    AbortedError,
    AlreadyExistsError,
    CancelledError,
    DataLossError,
    DeadlineExceededError,
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    OpError,
    OutOfRangeError,
    PermissionDeniedError,
    ResourceExhaustedError,
    UnauthenticatedError,
    UnavailableError,
    UnimplementedError,
    UnknownError,
)

__all__ = [
    "OpError", "CancelledError", "UnknownError", "InvalidArgumentError", "DeadlineExceededError",
    "NotFoundError", "AlreadyExistsError", "PermissionDeniedError", "ResourceExhaustedError",
    "FailedPreconditionError", "AbortedError", "OutOfRangeError", "UnimplementedError",
    "InternalError", "UnavailableError", "DataLossError", "UnauthenticatedError",
]
