//! `ferroflow run`: a GraphDef, a meta graph restored from a checkpoint, or a SavedModel's
//! signature, run once; the fetched tensors printed and saved, the step's partition graphs,
//! run metadata and profile recorded on request. Under `mpirun` every rank runs its task's
//! partitions ([`cluster`]).
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use ferroflow::prelude::*;
use ferroflow::proto::RunOptions;
use ferroflow::runtime::Cancellation;
use ferroflow::tensor::npy;

use crate::{interrupt, load};

mod cluster;

/// Run a GraphDef, a meta graph with its checkpoint, a SavedModel or a Keras model.
///
/// Runs a GraphDef (.pb binary or .pbtxt text), a TF1 meta graph (.meta, with --checkpoint to
/// restore its variables first, as `tf.train.import_meta_graph` + `saver.restore`), a SavedModel
/// signature or a Keras model file (.keras, .h5) once, as `session.run` does, and prints the
/// fetched tensors (dtype, shape, first values) or saves them with -o OUT.npz.
#[derive(Args)]
pub struct RunArgs {
    /// The graph file (.pb, .pbtxt, or a TensorFlow/ferroflow .meta), a SavedModel
    /// directory (then feeds and fetches are the signature's input and output keys, and
    /// every output is fetched when no --fetch is given), or a Keras model file (.keras, or
    /// a Keras 2 .h5) run in inference mode on --inputs (arrays named as the model's inputs,
    /// or the one array of a one-input model), its outputs saved under the model's output
    /// names.
    graph: PathBuf,
    /// With a SavedModel: the signature to call.
    #[arg(long, value_name = "NAME", default_value = "serving_default")]
    signature: String,
    /// With a SavedModel: a tag of the meta graph to load (repeatable; default `serve`).
    #[arg(long = "tag", value_name = "TAG")]
    tags: Vec<String>,
    /// With a .meta graph: restore the variables from this checkpoint prefix (or the
    /// latest checkpoint of this directory) through the meta graph's saver.
    #[arg(long, value_name = "PREFIX")]
    checkpoint: Option<PathBuf>,
    /// An .npz whose arrays are fed by name (keys are tensor names such as `x:0`).
    #[arg(long)]
    inputs: Option<PathBuf>,
    /// Feed one tensor from an .npy file: NAME=FILE.npy (repeatable).
    #[arg(long = "feed", value_name = "NAME=FILE.npy")]
    feeds: Vec<String>,
    /// A tensor to fetch, e.g. `Identity:0` (repeatable, at least one unless --target).
    #[arg(long = "fetch", value_name = "NAME")]
    fetches: Vec<String>,
    /// A node to run without fetching its outputs (repeatable).
    #[arg(long = "target", value_name = "NODE")]
    targets: Vec<String>,
    /// Write the fetched tensors to this .npz, each under its fetch name as given.
    #[arg(short = 'o', long, value_name = "OUT.npz")]
    output: Option<PathBuf>,
    /// Threads running independent nodes (0 = one per core).
    #[arg(long, default_value_t = 0)]
    inter_op_threads: usize,
    /// Threads one large kernel may use (0 = one per core).
    #[arg(long, default_value_t = 0)]
    intra_op_threads: usize,
    /// Fail a step whose `While` loop runs more iterations than this (0 = no limit).
    #[arg(long, default_value_t = 0)]
    max_loop_iterations: u64,
    /// Run the graph as written, without the graph optimizer.
    #[arg(long)]
    no_optimize: bool,
    /// Number of CPU devices (nodes are placed by their requested devices and each device
    /// runs its partition, joined by _Send/_Recv).
    #[arg(long, default_value_t = 1)]
    cpu_devices: usize,
    /// Write the step's partition graphs to DIR/global_step_0/<device>.pbtxt (under
    /// mpirun: every task's, gathered by rank 0).
    #[arg(long, value_name = "DIR")]
    partition_graphs: Option<PathBuf>,
    /// Trace the step (FULL_TRACE) and write a TensorBoard log directory DIR: the graph
    /// the devices ran (their partitions merged) and the step's RunMetadata (tag
    /// 'step_0'), so TensorBoard's Graphs tab shows each node's device and compute time
    /// (under mpirun: every task's, gathered by rank 0).
    #[arg(long, value_name = "DIR")]
    run_metadata: Option<PathBuf>,
    /// Profile the step (one `run` step: its ops on their threads) into the log directory
    /// DIR (DIR/plugins/profile/<run>/<host>.xplane.pb, for TensorBoard's profile plugin
    /// and `ferroflow profile`) and print the report.
    #[arg(long, value_name = "DIR")]
    profile: Option<PathBuf>,
    /// Fail the step with a deadline-exceeded error (naming the nodes still running) once
    /// it has run this long (TensorFlow's RunOptions.timeout_in_ms; 0 = no deadline).
    /// Ctrl-C stops a running step the same way (exit status 130).
    #[arg(long, value_name = "MS", default_value_t = 0)]
    timeout_ms: u64,
    /// The most bytes one tensor allocation may ask for; a larger one fails its node with
    /// a resource-exhausted error (0 = 3/4 of physical memory, less under `ulimit -v`).
    #[arg(long, value_name = "BYTES", default_value_t = 0)]
    memory_limit: usize,
    /// The most scans a progressive JPEG may have (DecodeJpeg fails naming the count; 0 = no
    /// limit). Real files have about ten; thousands make a small file decode for seconds.
    #[arg(long, value_name = "N", default_value_t = ferroflow::codec::jpeg::DEFAULT_MAX_SCANS)]
    jpeg_max_scans: u32,
}

pub fn run(args: RunArgs) -> Result<()> {
    ferroflow::codec::jpeg::set_default_max_scans(args.jpeg_max_scans);
    let mut opts = SessionOptions::default()
        .with_inter_op_threads(args.inter_op_threads)
        .with_intra_op_threads(args.intra_op_threads)
        .with_max_loop_iterations(args.max_loop_iterations)
        .with_cpu_devices(args.cpu_devices)
        .with_memory_limit_bytes(args.memory_limit);
    opts.optimizer.enabled = !args.no_optimize;
    if super::keras::is_keras(&args.graph) {
        return super::keras::run(&args.graph, args.inputs.as_deref(), args.output.as_deref(), opts);
    }
    let cancel = interrupt::interrupt_on_ctrl_c();
    if ferroflow_mpi::launched_size().is_some_and(|n| n > 1) {
        // One task of a cluster started by mpirun.
        cluster::run_cluster(&args, opts, cancel)
    } else if super::is_saved_model(&args.graph)? {
        run_saved_model(&args, opts)
    } else {
        run_graph(&args, opts, cancel)
    }
}

impl RunArgs {
    /// `--timeout-ms` as RunOptions' `timeout_in_ms`.
    fn timeout_in_ms(&self) -> Result<i64> {
        let ms = self.timeout_ms;
        i64::try_from(ms).map_err(|_| anyhow::anyhow!("--timeout-ms {ms}: expected at most {} milliseconds", i64::MAX))
    }

    /// The step's RunOptions for what it records (`--partition-graphs`, `--run-metadata`).
    fn run_options(&self, timeout_in_ms: i64) -> RunOptions {
        let mut options = RunOptions { timeout_in_ms, ..Default::default() };
        options.output_partition_graphs = self.partition_graphs.is_some() || self.run_metadata.is_some();
        if self.run_metadata.is_some() {
            options.trace_level = ferroflow::proto::run_options::TraceLevel::FullTrace as i32;
        }
        options
    }

    /// Writes what `--partition-graphs` and `--run-metadata` asked of the step's metadata.
    fn write_records(&self, meta: &ferroflow::proto::RunMetadata) -> Result<()> {
        if let Some(dir) = &self.partition_graphs {
            let written = ferroflow::runtime::hooks::write_partition_graphs(dir, 0, meta)?;
            out!("wrote {} partition graph(s) to {}", written.len(), dir.join("global_step_0").display());
        }
        if let Some(dir) = &self.run_metadata {
            let merged = ferroflow::runtime::merge_partitions(&meta.partition_graphs)?;
            let mut w = ferroflow::summary::EventWriter::create(dir)?;
            w.add_graph(&merged, 0)?;
            w.add_run_metadata("step_0", meta, 0)?;
            let nodes: usize = meta.step_stats.iter().flat_map(|s| &s.dev_stats).map(|d| d.node_stats.len()).sum();
            let devices = meta.step_stats.as_ref().map_or(0, |s| s.dev_stats.len());
            out!(
                "wrote the step's run metadata ({nodes} node stats on {devices} device(s)) and graph to {}: tensorboard --logdir {}",
                w.path().display(),
                dir.display()
            );
        }
        Ok(())
    }

    /// `--output`: the fetched tensors, each under its fetch name as given.
    fn write_output(&self, results: Vec<Tensor>) -> Result<()> {
        if let Some(out) = &self.output {
            let arrays: Vec<(String, Tensor)> = self.fetches.iter().cloned().zip(results).collect();
            npy::write_npz(out, &arrays)?;
            out!("wrote {} tensor(s) to {}", arrays.len(), out.display());
        }
        Ok(())
    }
}

pub(crate) fn print_tensor(name: &str, t: &Tensor) {
    out!("{name}: {} {:?} {}", t.dtype(), t.dims(), t.preview(10));
}

/// `ferroflow run DIR` for a SavedModel: loads it, feeds the signature's inputs by key (from
/// --inputs keys and --feed KEY=FILE.npy), prints (and writes) its outputs by key.
fn run_saved_model(args: &RunArgs, opts: SessionOptions) -> Result<()> {
    let tags: Vec<&str> =
        if args.tags.is_empty() { vec!["serve"] } else { args.tags.iter().map(String::as_str).collect() };
    let model = ferroflow::train::saved_model::SavedModel::load(&args.graph, &tags, opts)?;
    let given = load::feeds(args.inputs.as_deref(), &args.feeds)?;
    let given: Vec<(&str, Tensor)> = given.iter().map(|(k, t)| (k.as_str(), t.clone())).collect();
    let fetches: Vec<&str> = args.fetches.iter().map(String::as_str).collect();
    let results = model.call(&args.signature, &given, &fetches)?;
    for (key, t) in &results {
        print_tensor(key, t);
    }
    if let Some(out) = &args.output {
        let arrays: Vec<(String, Tensor)> = results.into_iter().collect();
        npy::write_npz(out, &arrays)?;
        out!("wrote {} tensor(s) to {}", arrays.len(), out.display());
    }
    Ok(())
}

/// `ferroflow run GRAPH` in one process.
fn run_graph(args: &RunArgs, opts: SessionOptions, cancel: Option<Cancellation>) -> Result<()> {
    let timeout_in_ms = args.timeout_in_ms()?;
    let (graph, fetches, targets) = (&args.graph, &args.fetches, &args.targets);
    if fetches.is_empty() && targets.is_empty() {
        bail!("nothing to run: give at least one --fetch NAME or --target NODE");
    }
    let is_meta = graph.extension().is_some_and(|e| e == "meta");
    let (g, saver) = if is_meta {
        let imported = ferroflow::train::meta_graph::import_meta_graph_file(graph, None, "")
            .with_context(|| format!("loading meta graph {}", graph.display()))?;
        (imported.graph, imported.saver)
    } else {
        (load::graph(graph)?, None)
    };
    let feeds = load::feeds(args.inputs.as_deref(), &args.feeds)?;
    let sess = Session::new(g, opts)?;
    if let Some(ckpt) = &args.checkpoint {
        if !is_meta {
            bail!("--checkpoint needs a .meta graph (its SaverDef says how to restore); got {}", graph.display());
        }
        let saver = saver.ok_or_else(|| anyhow::anyhow!("{}: the meta graph has no saver_def", graph.display()))?;
        let prefix = load::checkpoint_prefix(ckpt)?;
        let report = saver.restore(&sess, &prefix)?;
        if !crate::logging::quiet() {
            eprintln!("restored {} variables from {}", report.restored.len(), prefix.display());
        }
    }
    let feed_refs: Vec<(&str, Tensor)> = feeds.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let fetch_refs: Vec<&str> = fetches.iter().map(String::as_str).collect();
    let target_refs: Vec<&str> = targets.iter().map(String::as_str).collect();
    if let Some(dir) = &args.profile {
        ferroflow::train::profile::check_writable(dir)?;
        ferroflow::profiler::start(&Default::default())?;
    }
    let step = ferroflow::profiler::step("run", 0);
    let options = args.run_options(timeout_in_ms);
    let (results, meta) = sess.run_with(&feed_refs, &fetch_refs, &target_refs, &options, cancel.as_ref())?;
    drop(step);
    args.write_records(&meta)?;
    for (name, t) in fetches.iter().zip(&results) {
        print_tensor(name, t);
    }
    if let Some(dir) = &args.profile {
        let p = ferroflow::profiler::stop()?;
        let path = ferroflow::profiler::xspace::write_to_logdir(&p, dir)?;
        out!("wrote the profile to {}", path.display());
        crate::output::print_str(
            &ferroflow::profiler::report::analyze(&ferroflow::profiler::xspace::to_xspace(&p, "localhost"))?
                .to_string(),
        );
    }
    args.write_output(results)
}
