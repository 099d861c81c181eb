//! TensorFlow's status codes (`tensorflow.error.Code`) and the code of any ferroflow error:
//! what Python's exception classes and the server's gRPC and HTTP answers are chosen by.
use std::error::Error as StdError;

use ferroflow_checkpoint::CheckpointError;
use ferroflow_graph::GraphError;
use ferroflow_kernels::KernelError;
use ferroflow_runtime::{Interrupt, RuntimeError};
use ferroflow_tensor::TensorError;

/// A TensorFlow status code; the discriminant is TensorFlow's (and gRPC's) number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Code {
    /// Not an error.
    Ok = 0,
    /// The operation was cancelled.
    Cancelled = 1,
    /// An error of no other class.
    Unknown = 2,
    /// An argument, a feed, a graph or a file is not what was expected.
    InvalidArgument = 3,
    /// A deadline passed.
    DeadlineExceeded = 4,
    /// Something named does not exist.
    NotFound = 5,
    /// What was to be created exists.
    AlreadyExists = 6,
    /// Not permitted.
    PermissionDenied = 7,
    /// Memory or another resource ran out.
    ResourceExhausted = 8,
    /// The system is not in a state for the operation.
    FailedPrecondition = 9,
    /// Aborted (a conflict).
    Aborted = 10,
    /// Past the end of a range or an input.
    OutOfRange = 11,
    /// Not supported.
    Unimplemented = 12,
    /// An internal invariant was broken.
    Internal = 13,
    /// A service is unavailable (try again).
    Unavailable = 14,
    /// Data is corrupt or lost.
    DataLoss = 15,
    /// No valid credentials.
    Unauthenticated = 16,
}

impl Code {
    /// TensorFlow's (and gRPC's) number.
    pub fn value(self) -> i32 {
        self as i32
    }

    /// The code of a number (`Unknown` for one TensorFlow does not define).
    pub fn from_value(v: i32) -> Code {
        use Code::*;
        [
            Ok,
            Cancelled,
            Unknown,
            InvalidArgument,
            DeadlineExceeded,
            NotFound,
            AlreadyExists,
            PermissionDenied,
            ResourceExhausted,
            FailedPrecondition,
            Aborted,
            OutOfRange,
            Unimplemented,
            Internal,
            Unavailable,
            DataLoss,
            Unauthenticated,
        ]
        .get(usize::try_from(v).unwrap_or(usize::MAX))
        .copied()
        .unwrap_or(Unknown)
    }

    /// TensorFlow's name: `INVALID_ARGUMENT`.
    pub fn name(self) -> &'static str {
        use Code::*;
        match self {
            Ok => "OK",
            Cancelled => "CANCELLED",
            Unknown => "UNKNOWN",
            InvalidArgument => "INVALID_ARGUMENT",
            DeadlineExceeded => "DEADLINE_EXCEEDED",
            NotFound => "NOT_FOUND",
            AlreadyExists => "ALREADY_EXISTS",
            PermissionDenied => "PERMISSION_DENIED",
            ResourceExhausted => "RESOURCE_EXHAUSTED",
            FailedPrecondition => "FAILED_PRECONDITION",
            Aborted => "ABORTED",
            OutOfRange => "OUT_OF_RANGE",
            Unimplemented => "UNIMPLEMENTED",
            Internal => "INTERNAL",
            Unavailable => "UNAVAILABLE",
            DataLoss => "DATA_LOSS",
            Unauthenticated => "UNAUTHENTICATED",
        }
    }

    /// The HTTP status TensorFlow Serving's REST API answers an error of this code with.
    pub fn http_status(self) -> u16 {
        use Code::*;
        match self {
            Ok => 200,
            InvalidArgument | FailedPrecondition | OutOfRange => 400,
            NotFound => 404,
            DeadlineExceeded => 504,
            Unavailable => 503,
            ResourceExhausted => 429,
            Unimplemented => 501,
            PermissionDenied => 403,
            Unauthenticated => 401,
            AlreadyExists | Aborted => 409,
            Cancelled => 499,
            Unknown | Internal | DataLoss => 500,
        }
    }
}

/// The status code of an error: the first cause in its chain that says one; an error no
/// cause classifies is an invalid argument (what most of ferroflow's refusals are).
pub fn code_of(e: &(dyn StdError + 'static)) -> Code {
    let mut cur: Option<&(dyn StdError + 'static)> = Some(e);
    while let Some(e) = cur {
        if let Some(c) = own_code(e) {
            return c;
        }
        cur = e.source();
    }
    Code::InvalidArgument
}

/// An error and its causes on one line (`a: b: c`), a cause left out where the message
/// already says it: what the CLI prints, Python raises and the server answers.
pub fn one_line(e: &(dyn StdError + 'static)) -> String {
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
    message
}

fn own_code(e: &(dyn StdError + 'static)) -> Option<Code> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip() {
        for v in 0..=16 {
            assert_eq!(Code::from_value(v).value(), v);
        }
        assert_eq!(Code::from_value(99), Code::Unknown);
        assert_eq!(Code::from_value(-1), Code::Unknown);
        assert_eq!(Code::FailedPrecondition.name(), "FAILED_PRECONDITION");
        assert_eq!(Code::FailedPrecondition.http_status(), 400);
    }

    #[test]
    fn chains_are_read() {
        let e = RuntimeError::NoSuchTensor {
            what: "fetch",
            name: "x:0".into(),
            source: Box::new(GraphError::NoSuchNode("x".into())),
        };
        assert_eq!(code_of(&e), Code::NotFound);
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "gone");
        assert_eq!(code_of(&io), Code::NotFound);
    }
}
