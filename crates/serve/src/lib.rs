//! `ferroflow serve`: TensorFlow Serving's REST API over ferroflow's SavedModels.
//!
//! [`Server::start`] loads each model's served versions (numbered directories under its base
//! path, chosen by its [`VersionPolicy`]), binds the REST port and answers
//! `POST /v1/models/NAME[/versions/V | /labels/L]:predict`, `GET /v1/models/NAME[/versions/V]`
//! (status) and `GET .../metadata` with TensorFlow Serving's JSON and status codes. A poller
//! thread rereads the base paths; a new version is loaded and warmed up before it takes
//! traffic, a removed one is dropped once its in-flight requests finish. No request can take
//! the server down: each failure is an `{"error": ...}` answer.
#![warn(missing_docs)]
mod config;
mod json;
mod manager;
mod rest;
mod server;

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
    /// Binding the port or starting the runtime failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// An error answered to a request: TensorFlow's code and the message.
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    pub status: u16,
    pub message: String,
}

impl ApiError {
    pub fn new(status: u16, message: impl Into<String>) -> ApiError {
        ApiError { status, message: message.into() }
    }
    /// INVALID_ARGUMENT: 400.
    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(400, message)
    }
    /// NOT_FOUND: 404.
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(404, message)
    }
    /// INTERNAL: 500.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(500, message)
    }
}
