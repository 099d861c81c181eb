//! What can stop a step before it finishes: a [`Cancellation`] another thread triggers, and
//! a deadline (`RunOptions.timeout_in_ms`). Executors check the step's [`StepControl`] before
//! each node and loops before each iteration; a kernel already running finishes first.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A handle that cancels the steps it is given to, from any thread (a Ctrl-C handler, a
/// supervisor). Clones share one flag.
#[derive(Clone, Debug, Default)]
pub struct Cancellation(Arc<AtomicBool>);

impl Cancellation {
    /// A handle not yet cancelled.
    pub fn new() -> Cancellation {
        Cancellation::default()
    }

    /// Cancels every step running with this handle (and every later one).
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// Whether [`Cancellation::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// The flag itself: storing `true` cancels, as [`Cancellation::cancel`] does. For a
    /// signal handler, which may touch an atomic but not call into the handle.
    pub fn flag(&self) -> &AtomicBool {
        &self.0
    }
}

/// Why a step stopped early.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Interrupt {
    /// Its [`Cancellation`] was triggered.
    #[error("cancelled")]
    Cancelled,
    /// It ran past its deadline.
    #[error("deadline exceeded after {timeout_ms} ms")]
    DeadlineExceeded {
        /// The step's timeout.
        timeout_ms: u64,
    },
}

/// A step's cancellation handle and deadline.
#[derive(Clone, Debug, Default)]
pub struct StepControl {
    cancel: Option<Cancellation>,
    deadline: Option<(Instant, u64)>,
}

impl StepControl {
    /// A step that stops when `cancel` is triggered (if given) or `timeout_ms` (if not 0)
    /// have passed from now.
    pub fn new(cancel: Option<Cancellation>, timeout_ms: u64) -> StepControl {
        let deadline = (timeout_ms > 0)
            .then(|| Instant::now().checked_add(Duration::from_millis(timeout_ms)).map(|d| (d, timeout_ms)))
            .flatten();
        StepControl { cancel, deadline }
    }

    /// Whether the step can stop early at all (nothing to check otherwise).
    pub fn is_bounded(&self) -> bool {
        self.cancel.is_some() || self.deadline.is_some()
    }

    /// `Err` once the step is cancelled or past its deadline.
    #[inline]
    pub fn check(&self) -> Result<(), Interrupt> {
        if self.cancel.as_ref().is_some_and(Cancellation::is_cancelled) {
            return Err(Interrupt::Cancelled);
        }
        match self.deadline {
            Some((at, timeout_ms)) if Instant::now() >= at => Err(Interrupt::DeadlineExceeded { timeout_ms }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancellation_and_deadline_stop_a_step() {
        let c = Cancellation::new();
        let step = StepControl::new(Some(c.clone()), 0);
        assert!(step.check().is_ok());
        c.cancel();
        assert_eq!(step.check(), Err(Interrupt::Cancelled));
        let step = StepControl::new(None, 1);
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(step.check(), Err(Interrupt::DeadlineExceeded { timeout_ms: 1 }));
        assert!(StepControl::default().check().is_ok() && !StepControl::default().is_bounded());
    }
}
