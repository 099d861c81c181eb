//! ferroflow's profiler: trace collection into per-thread buffers while a profile runs, and
//! what to do with it — TensorFlow's XSpace (`.xplane.pb`, for TensorBoard's profile
//! plugin), Chrome trace JSON (Perfetto), and a terminal report (top ops by self time, the
//! step-time breakdown, the input-bound verdict and recommendations).
//!
//! Recording sites: the executor (one `name:Type` event per op), the input pipeline (one
//! `Iterator::Root::...` event per stage `next`), sessions (`Session::run`), training loops
//! (steps, `IteratorGetNext`), the saver. Off, each site costs one relaxed load.
//!
//! ```
//! use ferroflow_profiler as profiler;
//! let _only_one = profiler::exclusive();
//! profiler::start(&Default::default()).unwrap();
//! {
//!     let _step = profiler::step("train", 0);
//!     let _op = profiler::span_kind("dense/MatMul:MatMul", profiler::Kind::Op, 0);
//! }
//! let p = profiler::stop().unwrap();
//! let space = profiler::xspace::to_xspace(&p, "host");
//! let report = profiler::report::analyze(&space).unwrap();
//! assert_eq!(report.steps.len(), 1);
//! assert_eq!(report.op_types[0].name, "MatMul");
//! ```
#![warn(missing_docs)]
use std::path::{Path, PathBuf};

pub mod chrome;
pub mod clock;
mod collect;
pub mod report;
pub mod wire;
pub mod xspace;

pub use collect::{
    current_run, enabled, enter_run, exclusive, intern, new_run_id, record, run_scope, set_current_run, span,
    span_kind, start, step, stop, EnterRun, Event, Kind, LazyName, NameId, Profile, ProfilerOptions, RunScope, Span,
    ThreadTrace,
};

/// An error of the profiler.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProfileError {
    /// `start` while a profile runs.
    #[error("a profile is already running (one at a time per process)")]
    AlreadyRunning,
    /// `stop` without a running profile.
    #[error("no profile is running")]
    NotRunning,
    /// A file could not be read or a directory made.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// A file could not be written.
    #[error("{}: cannot write: {reason}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A file that is not a valid XSpace.
    #[error("{}: not a valid XSpace ({len} bytes){}: {reason}", path.display(),
        at.as_ref().map(|(o, w)| format!(", damaged at byte offset {o}: {w}")).unwrap_or_default())]
    Decode {
        /// The file.
        path: PathBuf,
        /// Its size.
        len: u64,
        /// Where the framing first breaks, and how.
        at: Option<(u64, String)>,
        /// The decoder's reason.
        reason: String,
    },
    /// An XSpace without what the analysis needs.
    #[error("{0}")]
    Invalid(String),
    /// A file whose decoded form would not fit the memory limit.
    #[error(transparent)]
    Proto(#[from] ferroflow_proto::ProtoError),
}

impl ProfileError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> ProfileError {
        ProfileError::Io { path: path.to_path_buf(), source }
    }
}
