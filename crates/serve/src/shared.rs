//! What the handlers of the REST and gRPC APIs share: the models, the deadline, the limits and
//! the batcher, and running a request's work in place under the deadline.
use std::sync::Arc;
use std::time::Duration;

use ferroflow::runtime::Cancellation;
use ferroflow::status::Code;

use crate::batch::Batcher;
use crate::manager::Manager;
use crate::ApiError;

/// What the handlers of both APIs share.
pub struct Shared {
    /// The models' versions.
    pub manager: Arc<Manager>,
    /// The deadline of one request's model run.
    pub timeout: Option<Duration>,
    /// The largest request accepted, in bytes.
    pub max_body: usize,
    /// The batcher, when batching is on.
    pub batcher: Option<Batcher>,
    /// Requests whose work is running (what shutdown waits for).
    pub in_flight: std::sync::atomic::AtomicUsize,
}

/// Counts a request as in flight while it lives.
struct InFlight(Arc<Shared>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Runs a request's work `f` (parsing, converting and running all block) under the deadline:
/// the model run stops at it, and past it the answer is DEADLINE_EXCEEDED.
pub async fn blocking<T, F>(shared: &Arc<Shared>, deadline: Option<Duration>, f: F) -> Result<T, ApiError>
where
    T: Send + 'static,
    F: FnOnce(&Shared, &Cancellation, Option<Duration>) -> Result<T, ApiError> + Send + 'static,
{
    shared.in_flight.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let _in_flight = InFlight(shared.clone());
    let cancel = Cancellation::new();
    let timeout = match (shared.timeout, deadline) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    // The work runs on this worker thread, which tokio hands its other tasks off from
    // (`block_in_place`): a hop to the blocking pool and back costs more than a small model's run.
    // The run itself stops at the deadline (its RunOptions); past the deadline the answer is
    // DEADLINE_EXCEEDED whatever the work gave.
    let start = std::time::Instant::now();
    let result = tokio::task::block_in_place(|| f(shared, &cancel, timeout));
    if timeout.is_some_and(|t| start.elapsed() > t) {
        cancel.cancel();
        return Err(ApiError::coded(
            Code::DeadlineExceeded,
            "Deadline exceeded: the model run took longer than the request's deadline",
        ));
    }
    result
}
