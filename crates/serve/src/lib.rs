//! `ferroflow serve`: TensorFlow Serving's REST and gRPC APIs over ferroflow's SavedModels.
//!
//! [`Server::start`] loads each model's served versions (numbered directories under its base
//! path, chosen by its [`VersionPolicy`]), binds the REST and gRPC ports and answers
//! `POST /v1/models/NAME[/versions/V | /labels/L]:predict` (and `:classify`, `:regress`),
//! `GET /v1/models/NAME[/versions/V]` (status) and `GET .../metadata` with TensorFlow Serving's
//! JSON and status codes, and `tensorflow.serving.PredictionService` / `ModelService` over gRPC
//! ([`grpc`]). With batching on, concurrent predict requests to one signature are merged along
//! the batch dimension and split back. A poller
//! thread rereads the base paths; a new version is loaded and warmed up before it takes
//! traffic, a removed one is dropped once its in-flight requests finish. No request can take
//! the server down: each failure is an `{"error": ...}` answer.
#![warn(missing_docs)]
mod batch;
mod config;
mod examples;
/// The readers of request bytes and config files as fuzz targets (not a supported API).
#[doc(hidden)]
pub mod fuzzing;
pub mod grpc;
pub mod json;
mod manager;
mod rest;
mod server;
mod service;
mod shared;

use ferroflow::status::{code_of, one_line, Code};

pub use batch::{parse_batching_parameters, BatchStats, BatchingParameters};
pub use config::{parse_model_config, ModelConfig, ServeOptions, VersionPolicy};
pub use json::format_float;
pub use server::{terminated, Server, ServerHandle};

/// Starting or configuring the server failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// A bad model config (file or flags).
    #[error("model config: {0}")]
    Config(String),
    /// A model could not be loaded at start.
    #[error("{0}")]
    Load(String),
    /// Binding the port or starting the runtime failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// An error answered to a request: TensorFlow's status code, the HTTP status the REST API
/// answers with (TensorFlow Serving's mapping, or a transport status such as 413) and the message.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// The HTTP status of a REST answer.
    pub status: u16,
    /// TensorFlow's status code (gRPC's).
    pub code: Code,
    /// What went wrong, as the answer words it.
    pub message: String,
}

impl ApiError {
    /// An error of an HTTP status (its code the one TensorFlow Serving maps to it).
    pub fn new(status: u16, message: impl Into<String>) -> ApiError {
        let code = match status {
            400 => Code::InvalidArgument,
            401 => Code::Unauthenticated,
            403 => Code::PermissionDenied,
            404 => Code::NotFound,
            408 | 504 => Code::DeadlineExceeded,
            409 => Code::Aborted,
            413 | 429 => Code::ResourceExhausted,
            499 => Code::Cancelled,
            501 => Code::Unimplemented,
            503 => Code::Unavailable,
            500 => Code::Internal,
            _ => Code::Unknown,
        };
        ApiError { status, code, message: message.into() }
    }
    /// An error of a status code (its HTTP status TensorFlow Serving's).
    pub fn coded(code: Code, message: impl Into<String>) -> ApiError {
        ApiError { status: code.http_status(), code, message: message.into() }
    }
    /// A ferroflow error: its code from its chain of causes, its message the chain on one line.
    pub fn from_error(e: &(dyn std::error::Error + 'static)) -> ApiError {
        ApiError::coded(code_of(e), one_line(e))
    }
    /// INVALID_ARGUMENT: 400.
    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::coded(Code::InvalidArgument, message)
    }
    /// FAILED_PRECONDITION: 400.
    pub fn precondition(message: impl Into<String>) -> ApiError {
        ApiError::coded(Code::FailedPrecondition, message)
    }
    /// NOT_FOUND: 404.
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::coded(Code::NotFound, message)
    }
    /// INTERNAL: 500.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::coded(Code::Internal, message)
    }
}
