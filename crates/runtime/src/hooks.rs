//! Session run hooks (TensorFlow's `SessionRunHook` / `MonitoredSession`): `begin` once,
//! `before_run` before each step (a hook may ask for more fetches and run options),
//! `after_run` after it (the hook sees its fetches' values and the run metadata), `end` once.
//! `PartitionGraphHook` writes every step's partition graphs to
//! `DIR/global_step_N/<device>.pbtxt`, as an Estimator hook does for TensorFlow.
use std::path::PathBuf;

use ferroflow_kernels::step::Cancellation;
use ferroflow_proto::{run_options::TraceLevel, RunMetadata, RunOptions};
use ferroflow_tensor::Tensor;

use crate::{RuntimeError, Session};

/// What a hook asks for in a step.
#[derive(Clone, Debug, Default)]
pub struct RunArgs {
    /// Extra tensors to fetch; their values come back in [`RunValues::results`].
    pub fetches: Vec<String>,
    /// Options merged into the step's (highest trace level; partition graphs if anyone asks).
    pub options: RunOptions,
}

/// What a hook sees after a step.
pub struct RunValues<'a> {
    /// The values of the hook's own fetches, in order.
    pub results: &'a [Tensor],
    /// The step's run metadata.
    pub run_metadata: &'a RunMetadata,
}

/// A hook around the steps of a [`MonitoredSession`]. Every method has a default that does
/// nothing.
pub trait SessionRunHook {
    /// Called once, before the first step.
    fn begin(&mut self, _session: &Session) -> Result<(), RuntimeError> {
        Ok(())
    }
    /// Called before each step (`step` counts from 0).
    fn before_run(&mut self, _step: u64) -> Result<RunArgs, RuntimeError> {
        Ok(RunArgs::default())
    }
    /// Called after each step with what the hook asked for.
    fn after_run(&mut self, _step: u64, _values: &RunValues) -> Result<(), RuntimeError> {
        Ok(())
    }
    /// Called once, when the session is closed.
    fn end(&mut self, _session: &Session) -> Result<(), RuntimeError> {
        Ok(())
    }
}

/// A session whose steps run its hooks.
pub struct MonitoredSession {
    session: Session,
    hooks: Vec<Box<dyn SessionRunHook>>,
    step: u64,
    /// Every step's base options (`timeout_in_ms`); hooks add tracing and partition graphs.
    base_options: RunOptions,
    /// Stops the running step from another thread.
    cancellation: Option<Cancellation>,
}

impl MonitoredSession {
    /// Wraps `session`; calls every hook's `begin`.
    pub fn new(session: Session, mut hooks: Vec<Box<dyn SessionRunHook>>) -> Result<MonitoredSession, RuntimeError> {
        for h in &mut hooks {
            h.begin(&session)?;
        }
        Ok(MonitoredSession { session, hooks, step: 0, base_options: RunOptions::default(), cancellation: None })
    }

    /// Runs every step with `timeout_in_ms` (0: none) and under `cancel`.
    pub fn with_step_limits(mut self, timeout_in_ms: i64, cancel: Option<Cancellation>) -> MonitoredSession {
        self.base_options.timeout_in_ms = timeout_in_ms;
        self.cancellation = cancel;
        self
    }

    /// The wrapped session.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The number of steps run so far.
    pub fn global_step(&self) -> u64 {
        self.step
    }

    /// Runs one step with the hooks' extra fetches and options; returns the caller's fetches.
    pub fn run(
        &mut self,
        feeds: &[(&str, Tensor)],
        fetches: &[&str],
        targets: &[&str],
    ) -> Result<Vec<Tensor>, RuntimeError> {
        let step = self.step;
        let mut all: Vec<String> = fetches.iter().map(|s| s.to_string()).collect();
        let mut options = self.base_options;
        let mut spans = Vec::with_capacity(self.hooks.len());
        for h in &mut self.hooks {
            let args = h.before_run(step)?;
            let start = all.len();
            all.extend(args.fetches);
            spans.push(start..all.len());
            options.trace_level = options.trace_level.max(args.options.trace_level);
            options.output_partition_graphs |= args.options.output_partition_graphs;
        }
        if options.trace_level < TraceLevel::NoTrace as i32 {
            options.trace_level = TraceLevel::NoTrace as i32;
        }
        let names: Vec<&str> = all.iter().map(String::as_str).collect();
        let (values, meta) = self.session.run_with(feeds, &names, targets, &options, self.cancellation.as_ref())?;
        for (h, span) in self.hooks.iter_mut().zip(spans) {
            h.after_run(step, &RunValues { results: &values[span], run_metadata: &meta })?;
        }
        self.step += 1;
        Ok(values[..fetches.len()].to_vec())
    }

    /// Calls every hook's `end` and returns the session.
    pub fn close(mut self) -> Result<Session, RuntimeError> {
        for h in &mut self.hooks {
            h.end(&self.session)?;
        }
        Ok(self.session)
    }
}

/// Writes each step's partition graphs (one per device) to
/// `DIR/global_step_N/_job_localhost_replica_0_task_0_device_CPU_0.pbtxt`, ...
pub struct PartitionGraphHook {
    dir: PathBuf,
    every: u64,
    /// The files written so far.
    pub written: Vec<PathBuf>,
}

impl PartitionGraphHook {
    /// Writes at every `every`-th step (1 = every step) under `dir`.
    pub fn new(dir: impl Into<PathBuf>, every: u64) -> PartitionGraphHook {
        PartitionGraphHook { dir: dir.into(), every: every.max(1), written: Vec::new() }
    }
}

/// A device name as a file name: `/job:localhost/.../device:CPU:0` → `_job_localhost_..._device_CPU_0`.
pub fn device_file_name(device: &str) -> String {
    device.replace(['/', ':'], "_")
}

impl SessionRunHook for PartitionGraphHook {
    fn before_run(&mut self, step: u64) -> Result<RunArgs, RuntimeError> {
        let mut args = RunArgs::default();
        args.options.output_partition_graphs = step.is_multiple_of(self.every);
        Ok(args)
    }

    fn after_run(&mut self, step: u64, values: &RunValues) -> Result<(), RuntimeError> {
        if !step.is_multiple_of(self.every) {
            return Ok(());
        }
        self.written.extend(write_partition_graphs(&self.dir, step, values.run_metadata)?);
        Ok(())
    }
}

/// Writes a step's partition graphs (`RunMetadata.partition_graphs`) to
/// `dir/global_step_<step>/<device>.pbtxt`, as [`PartitionGraphHook`] does; returns the paths.
pub fn write_partition_graphs(
    dir: &std::path::Path,
    step: u64,
    meta: &RunMetadata,
) -> Result<Vec<PathBuf>, RuntimeError> {
    let dir = dir.join(format!("global_step_{step}"));
    std::fs::create_dir_all(&dir).map_err(|source| RuntimeError::Io { path: dir.clone(), source })?;
    let mut written = Vec::with_capacity(meta.partition_graphs.len());
    for (i, g) in meta.partition_graphs.iter().enumerate() {
        let device = g.node.first().map(|n| n.device.clone()).filter(|d| !d.is_empty());
        let name = device.map_or_else(|| format!("partition_{i}"), |d| device_file_name(&d));
        let path = dir.join(format!("{name}.pbtxt"));
        ferroflow_graph::io::write_graph_def(&path, g)?;
        written.push(path);
    }
    Ok(written)
}
