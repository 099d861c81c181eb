//! Sessions run from Python: NumPy feeds, NumPy views of the fetched tensors, the GIL
//! released while a step runs, and Ctrl-C cancelling the step.
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::{Arc, RwLock};

use ferroflow::proto::{run_options::TraceLevel, RunMetadata, RunOptions};
use ferroflow::runtime::{Cancellation, RuntimeError, Session as RustSession, SessionOptions};
use ferroflow::tensor::Tensor;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::convert::{tensor_in_place, tensor_to_numpy};
use crate::errors::{invalid, to_py, CancelledError};
use crate::graph::Graph;

/// Keeps a tensor's buffer alive under the NumPy arrays that view it (their `.base`).
#[pyclass(frozen, module = "ferroflow._native")]
pub struct Buffer {
    pub(crate) tensor: Tensor,
}

#[pymethods]
impl Buffer {
    /// The bytes viewed.
    #[getter]
    fn nbytes(&self) -> usize {
        self.tensor.as_bytes().map_or(0, <[u8]>::len)
    }
}

/// A step's fetched arrays and, when traced, its `RunMetadata` bytes.
type StepResult<'py> = (Vec<Bound<'py, PyAny>>, Option<Bound<'py, PyBytes>>);

/// A session over a graph (`tf.compat.v1.Session`): steps run with the GIL released; one
/// session may be used from many Python threads at once.
#[pyclass(frozen, module = "ferroflow._native")]
pub struct Session {
    inner: RwLock<Option<Arc<RustSession>>>,
}

impl Session {
    pub(crate) fn current(&self) -> PyResult<Arc<RustSession>> {
        self.inner
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| CancelledError::new_err("the session is closed"))
    }
}

#[pymethods]
impl Session {
    /// A session over a copy of `graph` as it is now, with `inter_op_threads` and
    /// `intra_op_threads` (0: one per core) and the graph optimizer on or off.
    #[new]
    #[pyo3(signature = (graph, inter_op_threads=0, intra_op_threads=0, optimize=true))]
    fn new(
        graph: PyRef<'_, Graph>,
        inter_op_threads: usize,
        intra_op_threads: usize,
        optimize: bool,
    ) -> PyResult<Self> {
        let mut options =
            SessionOptions::default().with_inter_op_threads(inter_op_threads).with_intra_op_threads(intra_op_threads);
        options.optimizer.enabled = optimize;
        let s = RustSession::new(graph.snapshot(), options).map_err(to_py)?;
        Ok(Session { inner: RwLock::new(Some(Arc::new(s))) })
    }

    /// Takes in `graph` grown since the session was made (TensorFlow's `Session.extend`):
    /// the variables keep their values.
    fn extend(&self, graph: PyRef<'_, Graph>) -> PyResult<()> {
        let s = self.current()?;
        let next = s.extended(graph.snapshot()).map_err(to_py)?;
        *self.inner.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(next));
        Ok(())
    }

    /// Runs one step: `feeds` as `(tensor name, NumPy array)` pairs, `fetches` tensor names,
    /// `targets` node names. Returns the fetched values as NumPy arrays (views of the
    /// tensors, read-only) and, when `trace_level`, `output_partition_graphs` or a timeout is
    /// set, the step's `RunMetadata` as TensorFlow's protobuf bytes. With `interruptible`
    /// (the caller is Python's main thread) Ctrl-C cancels the step and raises
    /// `KeyboardInterrupt`.
    #[pyo3(signature = (feeds, fetches, targets, trace_level=0, timeout_in_ms=0, output_partition_graphs=false, interruptible=false))]
    #[allow(clippy::too_many_arguments)]
    fn run<'py>(
        &self,
        py: Python<'py>,
        feeds: Vec<(String, Bound<'py, PyAny>)>,
        fetches: Vec<String>,
        targets: Vec<String>,
        trace_level: i32,
        timeout_in_ms: i64,
        output_partition_graphs: bool,
        interruptible: bool,
    ) -> PyResult<StepResult<'py>> {
        let session = self.current()?;
        let mut tensors = Vec::with_capacity(feeds.len());
        for (name, value) in &feeds {
            tensors.push((name.as_str(), tensor_in_place(value).map_err(|e| invalid(format!("feed '{name}': {e}")))?));
        }
        if TraceLevel::try_from(trace_level).is_err() {
            return Err(invalid(format!("trace_level must be 0..=3, got {trace_level}")));
        }
        let options = RunOptions { trace_level, timeout_in_ms, output_partition_graphs, ..Default::default() };
        let traced = trace_level != 0 || output_partition_graphs;
        let fetch_names: Vec<&str> = fetches.iter().map(String::as_str).collect();
        let target_names: Vec<&str> = targets.iter().map(String::as_str).collect();
        let cancel = Cancellation::new();
        let step = || session.run_with(&tensors, &fetch_names, &target_names, &options, Some(&cancel));
        let result: Result<(Vec<Tensor>, RunMetadata), RuntimeError> =
            if interruptible { run_interruptibly(py, step, &cancel)? } else { py.detach(step) };
        let (outs, meta) = result.map_err(to_py)?;
        let arrays = outs.into_iter().map(|t| tensor_to_numpy(py, t)).collect::<PyResult<Vec<_>>>()?;
        let meta = traced.then(|| PyBytes::new(py, &ferroflow::proto::encode(&meta)));
        Ok((arrays, meta))
    }

    /// Closes the session: later runs raise `CancelledError`; steps running finish.
    fn close(&self) {
        *self.inner.write().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// Whether the session is closed.
    #[getter]
    fn closed(&self) -> bool {
        self.inner.read().unwrap_or_else(|p| p.into_inner()).is_none()
    }
}

/// The cancellation flag of the step the main thread is running, for [`on_sigint`].
static RUNNING: AtomicPtr<AtomicBool> = AtomicPtr::new(std::ptr::null_mut());
/// Whether SIGINT came while a main-thread step ran.
static GOT_SIGINT: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    // Async-signal-safe: atomics only.
    let flag = RUNNING.load(Ordering::Acquire);
    if !flag.is_null() {
        // SAFETY: `run_interruptibly` keeps the flag alive while it is published here.
        unsafe { (*flag).store(true, Ordering::Release) };
    }
    GOT_SIGINT.store(true, Ordering::Release);
}

/// Runs `step` inline with the GIL released and, while it runs, SIGINT cancelling it (the
/// interpreter's own handler is put back after): Ctrl-C stops the step at its next node and
/// raises `KeyboardInterrupt`. Two `sigaction` calls a step, no thread. When SIGINT is ignored
/// the step runs without the handler.
#[cfg(unix)]
fn run_interruptibly<R: Send>(py: Python<'_>, step: impl FnOnce() -> R + Send, cancel: &Cancellation) -> PyResult<R> {
    // SAFETY: plain sigaction calls; the handler only touches atomics.
    unsafe {
        let mut new: libc::sigaction = std::mem::zeroed();
        new.sa_sigaction = on_sigint as *const () as libc::sighandler_t;
        libc::sigemptyset(&mut new.sa_mask);
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGINT, std::ptr::null(), &mut old) != 0 || old.sa_sigaction == libc::SIG_IGN {
            return Ok(py.detach(step));
        }
        GOT_SIGINT.store(false, Ordering::Release);
        RUNNING.store(cancel.flag() as *const AtomicBool as *mut AtomicBool, Ordering::Release);
        libc::sigaction(libc::SIGINT, &new, std::ptr::null_mut());
        let r = py.detach(step);
        libc::sigaction(libc::SIGINT, &old, std::ptr::null_mut());
        RUNNING.store(std::ptr::null_mut(), Ordering::Release);
        if GOT_SIGINT.swap(false, Ordering::AcqRel) {
            return Err(pyo3::exceptions::PyKeyboardInterrupt::new_err(""));
        }
        Ok(r)
    }
}

#[cfg(not(unix))]
fn run_interruptibly<R: Send>(py: Python<'_>, step: impl FnOnce() -> R + Send, _: &Cancellation) -> PyResult<R> {
    Ok(py.detach(step))
}
