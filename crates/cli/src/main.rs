//! `ferroflow`: run, convert and inspect TensorFlow graphs; run the demo.
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use ferroflow::prelude::*;
use ferroflow::proto::RunOptions;
use ferroflow::runtime::Cancellation;
use ferroflow::tensor::npy;

/// `println!` that ignores a closed stdout (e.g. piped into `head`) instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

mod distributed;
mod ops;
mod pipeline;
mod profile;

#[derive(Parser)]
#[command(name = "ferroflow", version, about = "A TensorFlow-class dataflow system in Rust")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a GraphDef (.pb binary or .pbtxt text) or a meta graph (.meta, with
    /// --checkpoint to restore its variables first) and print or save the fetched tensors.
    Run {
        /// The graph file (.pb, .pbtxt, or a TensorFlow/ferroflow .meta), or a SavedModel
        /// directory (then feeds and fetches are the signature's input and output keys, and
        /// every output is fetched when no --fetch is given).
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
        #[arg(long)]
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
    },
    /// Optimize a graph for the given fetches and print what each pass did.
    Optimize {
        /// The graph file (.pb or .pbtxt).
        graph: PathBuf,
        /// A tensor that will be fetched (repeatable; its node keeps its name).
        #[arg(long = "fetch", value_name = "NAME", required = true)]
        fetches: Vec<String>,
        /// A tensor that will be fed (repeatable; never treated as constant).
        #[arg(long = "feed", value_name = "NAME")]
        feeds: Vec<String>,
        /// A node that will be run as a target (repeatable).
        #[arg(long = "target", value_name = "NODE")]
        targets: Vec<String>,
        /// Write the optimized graph here (.pbtxt as text, otherwise binary).
        #[arg(short = 'o', long = "output")]
        output: Option<PathBuf>,
        /// Print every change by node name after the per-pass table.
        #[arg(long)]
        report: bool,
        /// Write the graph after each pass to DIR/NN_round<R>_<pass>.pbtxt.
        #[arg(long, value_name = "DIR")]
        dump_dir: Option<PathBuf>,
        /// Also allow rewrites that change floating-point results (x/c -> x*(1/c), ...).
        #[arg(long)]
        inexact_float_rewrites: bool,
        /// Skip a pass by name (repeatable).
        #[arg(long = "disable", value_name = "PASS")]
        disabled: Vec<String>,
    },
    /// Merge partition graphs (ferroflow's or TensorFlow's RunMetadata.partition_graphs) into
    /// one graph that runs with the original feed and fetch names.
    MergePartitions {
        /// The partition graphs (.pb or .pbtxt), one per device.
        #[arg(required = true)]
        partitions: Vec<PathBuf>,
        /// The merged graph (.pbtxt as text, otherwise binary).
        #[arg(short = 'o', long = "output")]
        output: PathBuf,
    },
    /// Write a GraphDef (.pb or .pbtxt; merged partitions or any TensorFlow graph) as a
    /// TensorBoard run: LOGDIR/RUN/events.out.tfevents.<time>.<host> with a graph event.
    Tensorboard {
        /// The graph file.
        graph: PathBuf,
        /// The TensorBoard log directory (`tensorboard --logdir LOGDIR`).
        #[arg(long)]
        logdir: PathBuf,
        /// The run (a subdirectory of LOGDIR); default: the graph file's stem.
        #[arg(long)]
        run: Option<String>,
    },
    /// Import a GraphDef (validating it) and write it back: .pbtxt as text, otherwise binary.
    Convert {
        /// Input graph (.pb or .pbtxt), or a SavedModel directory (one signature is frozen:
        /// calls inlined, variables made constants, inputs and outputs named by their keys).
        input: PathBuf,
        /// Output graph (.pb or .pbtxt).
        output: PathBuf,
        /// With a SavedModel: the signature to freeze.
        #[arg(long, default_value = "serving_default")]
        signature: String,
        /// With a SavedModel: a tag of the meta graph to load (repeatable; default `serve`).
        #[arg(long = "tag", value_name = "TAG")]
        tags: Vec<String>,
    },
    /// List a graph's nodes with their ops, inputs, dtypes and inferred shapes; for a SavedModel
    /// directory, what TensorFlow's `saved_model_cli show --all` prints (tag sets, signatures
    /// with their inputs' and outputs' dtypes, shapes and tensor names, the ops, the concrete
    /// functions) and the ops ferroflow cannot run, if any.
    Inspect {
        /// The graph file, or a SavedModel directory.
        graph: PathBuf,
    },
    /// List a checkpoint's tensors (name, dtype, shape), or print their values: like
    /// TensorFlow's inspect_checkpoint. PREFIX may be a directory (its latest checkpoint).
    InspectCheckpoint {
        /// The checkpoint prefix (`model.ckpt-5000`, without `.index`) or its directory.
        prefix: PathBuf,
        /// Print this tensor's values.
        #[arg(long, value_name = "NAME")]
        tensor: Option<String>,
        /// Print every tensor's values.
        #[arg(long)]
        all: bool,
        /// Values printed per tensor (0 = all).
        #[arg(long, default_value_t = 20)]
        max_values: usize,
    },
    /// Train mnist_training's MLP (dropout, dense+relu 256x2, softmax, Adam 1e-3, batch 100,
    /// global_step) in a session on MNIST IDX files, then run `accuracy:0` on the test split by
    /// tensor names; prints `test_accuracy=<value>` last.
    Mnist {
        /// Training steps (batches of 100).
        #[arg(long, default_value_t = 3000)]
        steps: u64,
        /// Directory with train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz],
        /// t10k-images-idx3-ubyte[.gz], t10k-labels-idx1-ubyte[.gz] (default: the bundled
        /// 8,000/2,000-digit sample; full MNIST works too).
        #[arg(long)]
        data: Option<PathBuf>,
        /// Graph-level random seed (initializers, dropout, shuffling).
        #[arg(long, default_value_t = 1)]
        seed: i64,
        /// Threads one large kernel may use (0 = one per core).
        #[arg(long, default_value_t = 0)]
        intra_op_threads: usize,
        /// Threads running independent nodes (0 = one per core).
        #[arg(long, default_value_t = 0)]
        inter_op_threads: usize,
        /// Save the trained model with a TF1 Saver: SAVE-STEP.{index,data-00000-of-00001,meta}
        /// and SAVE's directory's `checkpoint` file.
        #[arg(long, value_name = "PREFIX")]
        save: Option<PathBuf>,
        /// Export the trained model as a SavedModel that TensorFlow loads (`serving_default`:
        /// `inputs` → `predictions`; `ferroflow run DIR` and `ferroflow inspect DIR` read it).
        #[arg(long, value_name = "DIR")]
        saved_model: Option<PathBuf>,
        /// TensorBoard log directory (Keras's TensorBoard callback: loss every 100 batches and
        /// per epoch, weight histograms, the graph, and the profile of --profile-batch).
        #[arg(long, value_name = "DIR")]
        logdir: Option<PathBuf>,
        /// With --logdir: the batches to profile ('A,B', 1-based; empty for none).
        #[arg(long, value_name = "A,B", default_value = "", requires = "logdir")]
        profile_batch: String,
        /// Data-parallel over MPI (`mpirun -np N ferroflow mnist --distributed`, a build with
        /// `--features mpi`): rank 0's initial variables are broadcast, each batch of 100 is
        /// split across the ranks, gradients are averaged (fused all-reduce); every rank prints
        /// its test accuracy and a checksum of its variables; only rank 0 writes --save,
        /// --saved-model and --logdir. Alone (no mpirun) it is a 1-rank world.
        #[arg(long)]
        distributed: bool,
        /// Examples per step; with --distributed, the global batch, split across the ranks.
        #[arg(long, default_value_t = 100, value_name = "N")]
        batch: usize,
        /// Dropout rate of the input and hidden layers (0 turns dropout off, which makes a
        /// distributed run comparable with one process step by step).
        #[arg(long, default_value_t = 0.2, value_name = "RATE")]
        dropout: f64,
    },
    /// All-reduce bandwidth of ferroflow's collective against raw MPI_Allreduce on the same
    /// buffer sizes (`mpirun -np N ferroflow allreduce-bench`, a build with --features mpi);
    /// rank 0 prints one row per size: milliseconds and GB/s (bytes / time) of each, their
    /// ratio, and the CollectiveReduceV2 op run by a session.
    AllreduceBench {
        /// Buffer sizes in MB (1e6 bytes of f32), comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "4,16,64,200")]
        mb: Vec<f64>,
        /// Timed runs per size (the median is reported).
        #[arg(long, default_value_t = 10)]
        runs: usize,
        /// Rank 0 arrives this many microseconds after the others (a busy wait after the
        /// barrier), as in a training step where one rank's backprop ends later; times are
        /// then rank 0's own (the last to arrive): what the all-reduce costs once all are in.
        #[arg(long, value_name = "US", default_value_t = 0)]
        skew_us: u64,
    },
    /// List the op registry: every op with its family, CPU kernel dtypes and gradient; with an
    /// OP, that op's inputs, outputs, attrs with defaults, kernels, gradient and facts.
    Ops {
        /// One op, e.g. `Relu6`.
        op: Option<String>,
        /// Print JSON (one object for an OP, an array for all).
        #[arg(long)]
        json: bool,
    },
    /// Run input_pipeline over a directory of class folders of JPEGs: file list →
    /// map(read_file → decode_jpeg → resize) → batch → prefetch; prints `class_names=[...]`,
    /// images/s per epoch and what AUTOTUNE chose. With --logdir it trains a small CNN from
    /// the pipeline instead, profiles --profile-batch and prints the profile's report.
    Pipeline(pipeline::PipelineArgs),
    /// The terminal report of a profile: top ops by self time, the step-time breakdown
    /// (input / compute / other), whether the step is input-bound (TensorFlow's thresholds:
    /// input above 20% of the step highly, 5–20% moderately) and what to change. PATH is an
    /// `.xplane.pb` (ferroflow's or TensorFlow's) or a log directory (its newest capture, host by host);
    /// with two PATHs, how the second changed against the first.
    Profile {
        /// One or two `.xplane.pb` files or log directories.
        #[arg(required = true, num_args = 1..=2)]
        paths: Vec<PathBuf>,
        /// Also write the (first) profile as Chrome trace JSON, for Perfetto or chrome://tracing.
        #[arg(long, value_name = "OUT.json")]
        chrome: Option<PathBuf>,
    },
    /// Generate a flowers-like dataset: five class folders (daisy, dandelion, roses,
    /// sunflowers, tulips) of photo-like JPEGs, for the input_pipeline workflow and its models.
    Flowers {
        /// Where to write the class folders.
        dir: PathBuf,
        /// Images per class.
        #[arg(long, default_value_t = 40)]
        per_class: usize,
        /// One size for every image, WIDTHxHEIGHT (default: varied, 320–500 × 240–375).
        #[arg(long, value_name = "WxH")]
        size: Option<String>,
        /// Generator seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Also write the images as a TFRecord file of `tf.train.Example`s (`image/encoded`:
        /// the JPEG bytes, `image/class/label`: int64, `image/filename`), as TensorFlow's
        /// image datasets store them.
        #[arg(long, value_name = "FILE")]
        tfrecord: Option<PathBuf>,
    },
    /// Time a graph (TensorFlow's benchmark_model): load it once, run it --warmup times, then
    /// --runs times, and print the per-run latency; the last line is `median_ms=<v> min_ms=<v>
    /// max_ms=<v> peak_rss_mb=<v>`. With --profile, also the time per op type and the slowest
    /// nodes (from step stats of the same runs, traced after the timed ones).
    Benchmark {
        /// The graph file (.pb or .pbtxt).
        graph: PathBuf,
        /// Feeds: an .npz keyed by tensor name.
        #[arg(long, value_name = "FEEDS.npz")]
        inputs: Option<PathBuf>,
        /// A feed: NAME=FILE.npy (repeatable).
        #[arg(long, value_name = "NAME=FILE.npy")]
        feed: Vec<String>,
        /// Tensors to fetch (repeatable).
        #[arg(long, value_name = "NAME", required = true)]
        fetch: Vec<String>,
        /// Timed runs.
        #[arg(long, default_value_t = 20)]
        runs: usize,
        /// Untimed runs first.
        #[arg(long, default_value_t = 3)]
        warmup: usize,
        /// Threads running independent nodes (0 = one per core).
        #[arg(long, default_value_t = 0)]
        inter_op_threads: usize,
        /// Threads one large kernel may use (0 = one per core).
        #[arg(long, default_value_t = 0)]
        intra_op_threads: usize,
        /// Run the graph as written (no optimizer).
        #[arg(long)]
        no_optimize: bool,
        /// Also print the time per op type and the slowest nodes.
        #[arg(long)]
        profile: bool,
        /// How many of the slowest nodes --profile lists.
        #[arg(long, default_value_t = 25, value_name = "N")]
        top: usize,
    },
    /// Run the demo: what_runs' graph built with the Rust API and optimized; what_runs on two
    /// CPU devices end to end (partition graphs written, merged, a TensorBoard log directory);
    /// a bundled TensorFlow MLP; mnist_training's MNIST model trained for 3,000 steps, saved with
    /// a Saver and restored from its .meta under an import_scope in a fresh session;
    /// input_pipeline and EfficientNet-style training; traced_functions.
    Demo {
        /// Where the demo writes its files.
        #[arg(long, default_value = "ferroflow-demo")]
        out: PathBuf,
        /// Training steps of the mnist_training part.
        #[arg(long, default_value_t = 3000)]
        mnist_steps: u64,
        /// Epochs of input_pipeline's EfficientNet-style model (0 skips the training).
        #[arg(long, default_value_t = 12)]
        effnet_epochs: usize,
        /// A TensorBoard log directory: mnist_training's training (scalars, histograms, graph
        /// and the profile of --profile-batch) goes to LOGDIR/mnist_training, and
        /// input_pipeline's bottleneck hunt — a small CNN trained from the flowers pipeline as it
        /// is, then with prefetch and a parallel map, each profiled and reported — to
        /// LOGDIR/input_pipeline_serial and LOGDIR/input_pipeline_prefetch.
        #[arg(long)]
        logdir: Option<PathBuf>,
        /// With --logdir: the batches to profile ('A,B', 1-based, Keras's profile_batch).
        #[arg(long, value_name = "A,B", default_value = "3,8", requires = "logdir")]
        profile_batch: String,
    },
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run {
            graph,
            signature,
            tags,
            checkpoint,
            inputs,
            feeds,
            fetches,
            targets,
            output,
            inter_op_threads,
            intra_op_threads,
            max_loop_iterations,
            no_optimize,
            cpu_devices,
            partition_graphs,
            run_metadata,
            profile,
            timeout_ms,
            memory_limit,
        } => {
            let mut opts = SessionOptions {
                inter_op_threads,
                intra_op_threads,
                max_loop_iterations,
                cpu_devices,
                memory_limit_bytes: memory_limit,
                ..Default::default()
            };
            opts.optimizer.enabled = !no_optimize;
            let records =
                Records { partition_graphs: partition_graphs.as_deref(), run_metadata: run_metadata.as_deref() };
            let limits = StepLimits { timeout_ms, cancel: interrupt_on_ctrl_c() };
            if ferroflow_mpi::launched_size().is_some_and(|n| n > 1) {
                // One task of a cluster started by mpirun.
                let files = RunFiles {
                    checkpoint: checkpoint.as_deref(),
                    inputs: inputs.as_deref(),
                    output: output.as_deref(),
                    profile: profile.as_deref(),
                };
                let names = Names { feeds: &feeds, fetches: &fetches, targets: &targets };
                distributed::run_cluster(&graph, files, names, opts, records, limits)
            } else if graph.join("saved_model.pb").is_file() {
                let tags: Vec<&str> =
                    if tags.is_empty() { vec!["serve"] } else { tags.iter().map(String::as_str).collect() };
                let call = SignatureCall { signature: &signature, tags: &tags, fetches: &fetches };
                run_saved_model(&graph, call, inputs.as_deref(), &feeds, output.as_deref(), opts)
            } else {
                let names = Names { feeds: &feeds, fetches: &fetches, targets: &targets };
                let files = RunFiles {
                    checkpoint: checkpoint.as_deref(),
                    inputs: inputs.as_deref(),
                    output: output.as_deref(),
                    profile: profile.as_deref(),
                };
                run(&graph, files, names, opts, records, limits)
            }
        }
        Command::Optimize {
            graph,
            fetches,
            feeds,
            targets,
            output,
            report,
            dump_dir,
            inexact_float_rewrites,
            disabled,
        } => {
            let item = ferroflow::optimize::Item { feeds, fetches, targets, keep: vec![] };
            let options = ferroflow::optimize::OptimizerOptions {
                inexact_float_rewrites,
                disabled_passes: disabled,
                fail_on_pass_error: false,
                ..Default::default()
            };
            optimize(&graph, &item, options, output.as_deref(), report, dump_dir.as_deref())
        }
        Command::MergePartitions { partitions, output } => merge_partitions(&partitions, &output),
        Command::Tensorboard { graph, logdir, run } => tensorboard(&graph, &logdir, run.as_deref()),
        Command::Convert { input, output, signature, tags } => {
            if input.join("saved_model.pb").is_file() {
                freeze_saved_model(&input, &output, &signature, &tags)
            } else {
                convert(&input, &output)
            }
        }
        Command::Inspect { graph } => inspect(&graph),
        Command::InspectCheckpoint { prefix, tensor, all, max_values } => {
            inspect_checkpoint(&prefix, tensor.as_deref(), all, max_values)
        }
        Command::Mnist {
            steps,
            data,
            seed,
            intra_op_threads,
            inter_op_threads,
            save,
            saved_model,
            logdir,
            profile_batch,
            distributed,
            dropout,
            batch,
        } => {
            let options = SessionOptions { intra_op_threads, inter_op_threads, ..Default::default() };
            let tb = logdir.as_deref().map(|d| (d, profile_batch.as_str()));
            let outputs = ferroflow::workflows::mnist_training::Outputs {
                save: save.as_deref(),
                saved_model: saved_model.as_deref(),
                tensorboard: tb,
            };
            let config = ferroflow::workflows::mnist_training::Config {
                dropout_rate: dropout,
                distributed,
                batch_size: batch,
                ..Default::default()
            };
            if !(0.0..1.0).contains(&dropout) {
                Err(anyhow::anyhow!("--dropout {dropout}: expected a rate in [0, 1)"))
            } else if distributed {
                distributed::run_in_world(|| mnist(data.as_deref(), steps, seed, options, outputs, &config))
            } else {
                mnist(data.as_deref(), steps, seed, options, outputs, &config)
            }
        }
        Command::AllreduceBench { mb, runs, skew_us } => distributed::allreduce_bench(&mb, runs, skew_us),
        Command::Ops { op, json } => ops::ops(op.as_deref(), json),
        Command::Pipeline(args) => pipeline::pipeline(&args),
        Command::Profile { paths, chrome } => profile::profile(&paths, chrome.as_deref()),
        Command::Flowers { dir, per_class, size, seed, tfrecord } => {
            pipeline::make_flowers(&dir, per_class, size.as_deref(), seed, tfrecord.as_deref())
        }
        Command::Benchmark {
            graph,
            inputs,
            feed,
            fetch,
            runs,
            warmup,
            inter_op_threads,
            intra_op_threads,
            no_optimize,
            profile,
            top,
        } => {
            let mut options = SessionOptions { inter_op_threads, intra_op_threads, ..Default::default() };
            options.optimizer.enabled = !no_optimize;
            benchmark(&graph, inputs.as_deref(), &feed, &fetch, (runs, warmup), options, profile.then_some(top))
        }
        Command::Demo { out, mnist_steps, effnet_epochs, logdir, profile_batch } => {
            let tensorboard = logdir.as_deref().map(|d| (d, profile_batch.as_str()));
            let options =
                ferroflow::workflows::demo::DemoOptions { out_dir: &out, mnist_steps, effnet_epochs, tensorboard };
            ferroflow::workflows::demo::run(&mut std::io::stdout(), &options).map_err(Into::into)
        }
    };
    if let Err(e) = result {
        eprintln!("error: {}", one_line(&e));
        let cancelled = CTRL_C.get().is_some_and(Cancellation::is_cancelled);
        std::process::exit(if cancelled { EXIT_INTERRUPTED } else { 1 });
    }
}

/// The exit status after Ctrl-C (128 + SIGINT, as shells report it).
const EXIT_INTERRUPTED: i32 = 130;

/// The cancellation Ctrl-C triggers, once `run` has installed its handler.
static CTRL_C: std::sync::OnceLock<Cancellation> = std::sync::OnceLock::new();

/// A cancellation that the first Ctrl-C triggers (the running step stops cleanly and its
/// error names the nodes it was running); a second Ctrl-C exits at once. `None` where the
/// handler cannot be installed (the default Ctrl-C behaviour stays).
fn interrupt_on_ctrl_c() -> Option<Cancellation> {
    let cancel = CTRL_C.get_or_init(Cancellation::new).clone();
    let handler = cancel.clone();
    let installed = ctrlc::set_handler(move || {
        if handler.is_cancelled() {
            std::process::exit(EXIT_INTERRUPTED);
        }
        eprintln!("interrupted: stopping the step (Ctrl-C again to exit at once)");
        handler.cancel();
    });
    installed.is_ok().then_some(cancel)
}

/// What may stop `run`'s step early.
struct StepLimits {
    /// RunOptions.timeout_in_ms (0 = none).
    timeout_ms: u64,
    /// Ctrl-C's cancellation.
    cancel: Option<Cancellation>,
}

/// The error and its causes on one line, skipping causes whose text the line already holds
/// (library errors often print their source inline).
fn one_line(e: &anyhow::Error) -> String {
    let mut msg = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if msg.contains(&text) {
            continue;
        }
        if !msg.is_empty() {
            msg.push_str(": ");
        }
        msg.push_str(&text);
    }
    msg.replace('\n', " ")
}

fn load(path: &Path) -> Result<Graph> {
    ferroflow::load_graph(path).with_context(|| format!("loading graph {}", path.display()))
}

fn read_feeds(inputs: Option<&Path>, feeds: &[String]) -> Result<Vec<(String, Tensor)>> {
    let mut out = Vec::new();
    if let Some(p) = inputs {
        out.extend(npy::read_npz(p)?);
    }
    for f in feeds {
        let Some((name, file)) = f.split_once('=') else {
            bail!("--feed '{f}': expected NAME=FILE.npy");
        };
        out.push((name.to_string(), npy::read_npy(Path::new(file))?));
    }
    Ok(out)
}

/// What to call in a SavedModel.
struct SignatureCall<'a> {
    signature: &'a str,
    tags: &'a [&'a str],
    fetches: &'a [String],
}

/// `ferroflow run DIR` for a SavedModel: loads it, feeds the signature's inputs by key (from
/// --inputs keys and --feed KEY=FILE.npy), prints (and writes) its outputs by key.
fn run_saved_model(
    dir: &Path,
    call: SignatureCall,
    inputs: Option<&Path>,
    feeds: &[String],
    output: Option<&Path>,
    opts: SessionOptions,
) -> Result<()> {
    let model = ferroflow::train::saved_model::SavedModel::load(dir, call.tags, opts)?;
    let given = read_feeds(inputs, feeds)?;
    let given: Vec<(&str, Tensor)> = given.iter().map(|(k, t)| (k.as_str(), t.clone())).collect();
    let fetches: Vec<&str> = call.fetches.iter().map(String::as_str).collect();
    let results = model.call(call.signature, &given, &fetches)?;
    for (key, t) in &results {
        print_tensor(key, t);
    }
    if let Some(out) = output {
        let arrays: Vec<(String, Tensor)> = results.into_iter().collect();
        npy::write_npz(out, &arrays)?;
        out!("wrote {} tensor(s) to {}", arrays.len(), out.display());
    }
    Ok(())
}

fn print_tensor(name: &str, t: &Tensor) {
    out!("{name}: {} {:?} {}", t.dtype(), t.dims(), t.preview(10));
}

/// The tensor and node names of a `run`.
struct Names<'a> {
    feeds: &'a [String],
    fetches: &'a [String],
    targets: &'a [String],
}

/// The files a `run` reads and writes besides the graph.
/// What `run` records of its step besides the fetches.
#[derive(Clone, Copy)]
struct Records<'a> {
    /// `--partition-graphs DIR`.
    partition_graphs: Option<&'a Path>,
    /// `--run-metadata DIR`.
    run_metadata: Option<&'a Path>,
}

impl Records<'_> {
    /// The step's RunOptions for these records.
    fn options(&self, timeout_in_ms: i64) -> RunOptions {
        let mut options = RunOptions { timeout_in_ms, ..Default::default() };
        options.output_partition_graphs = self.partition_graphs.is_some() || self.run_metadata.is_some();
        if self.run_metadata.is_some() {
            options.trace_level = ferroflow::proto::run_options::TraceLevel::FullTrace as i32;
        }
        options
    }

    /// Writes what was asked of the step's metadata.
    fn write(&self, meta: &ferroflow::proto::RunMetadata) -> Result<()> {
        if let Some(dir) = self.partition_graphs {
            let written = ferroflow::runtime::hooks::write_partition_graphs(dir, 0, meta)?;
            out!("wrote {} partition graph(s) to {}", written.len(), dir.join("global_step_0").display());
        }
        if let Some(dir) = self.run_metadata {
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
}

/// `run` reads this with `--timeout-ms`: RunOptions' `timeout_in_ms`.
fn timeout_in_ms(timeout_ms: u64) -> Result<i64> {
    i64::try_from(timeout_ms)
        .map_err(|_| anyhow::anyhow!("--timeout-ms {timeout_ms}: expected at most {} milliseconds", i64::MAX))
}

struct RunFiles<'a> {
    checkpoint: Option<&'a Path>,
    inputs: Option<&'a Path>,
    output: Option<&'a Path>,
    profile: Option<&'a Path>,
}

/// A checkpoint prefix, or the latest checkpoint named by a directory's `checkpoint` file.
fn checkpoint_prefix(path: &Path) -> Result<PathBuf> {
    if path.is_dir() {
        return ferroflow::train::saver::latest_checkpoint(path)?.ok_or_else(|| {
            anyhow::anyhow!("{}: no checkpoint (no 'checkpoint' file naming an existing .index)", path.display())
        });
    }
    Ok(path.to_path_buf())
}

fn run(
    graph: &Path,
    RunFiles { checkpoint, inputs, output, profile }: RunFiles,
    Names { feeds, fetches, targets }: Names,
    opts: SessionOptions,
    records: Records,
    StepLimits { timeout_ms, cancel }: StepLimits,
) -> Result<()> {
    let timeout_in_ms = timeout_in_ms(timeout_ms)?;
    if fetches.is_empty() && targets.is_empty() {
        bail!("nothing to run: give at least one --fetch NAME or --target NODE");
    }
    let is_meta = graph.extension().is_some_and(|e| e == "meta");
    let (g, saver) = if is_meta {
        let imported = ferroflow::train::meta_graph::import_meta_graph_file(graph, None, "")
            .with_context(|| format!("loading meta graph {}", graph.display()))?;
        (imported.graph, imported.saver)
    } else {
        (load(graph)?, None)
    };
    let feeds = read_feeds(inputs, feeds)?;
    let sess = Session::new(g, opts)?;
    if let Some(ckpt) = checkpoint {
        if !is_meta {
            bail!("--checkpoint needs a .meta graph (its SaverDef says how to restore); got {}", graph.display());
        }
        let saver = saver.ok_or_else(|| anyhow::anyhow!("{}: the meta graph has no saver_def", graph.display()))?;
        let prefix = checkpoint_prefix(ckpt)?;
        let report = saver.restore(&sess, &prefix)?;
        eprintln!("restored {} variables from {}", report.restored.len(), prefix.display());
    }
    let feed_refs: Vec<(&str, Tensor)> = feeds.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let fetch_refs: Vec<&str> = fetches.iter().map(String::as_str).collect();
    let target_refs: Vec<&str> = targets.iter().map(String::as_str).collect();
    if let Some(dir) = profile {
        ferroflow::train::profile::check_writable(dir)?;
        ferroflow::profiler::start(&Default::default())?;
    }
    let step = ferroflow::profiler::step("run", 0);
    let options = records.options(timeout_in_ms);
    let (results, meta) = sess.run_with(&feed_refs, &fetch_refs, &target_refs, &options, cancel.as_ref())?;
    drop(step);
    records.write(&meta)?;
    for (name, t) in fetches.iter().zip(&results) {
        print_tensor(name, t);
    }
    if let Some(dir) = profile {
        let p = ferroflow::profiler::stop()?;
        let path = ferroflow::profiler::xspace::write_to_logdir(&p, dir)?;
        out!("wrote the profile to {}", path.display());
        print!("{}", ferroflow::profiler::report::analyze(&ferroflow::profiler::xspace::to_xspace(&p, "localhost"))?);
    }
    if let Some(out) = output {
        let arrays: Vec<(String, Tensor)> = fetches.iter().cloned().zip(results).collect();
        npy::write_npz(out, &arrays)?;
        out!("wrote {} tensor(s) to {}", arrays.len(), out.display());
    }
    Ok(())
}

fn optimize(
    path: &Path,
    item: &ferroflow::optimize::Item,
    options: ferroflow::optimize::OptimizerOptions,
    output: Option<&Path>,
    details: bool,
    dump_dir: Option<&Path>,
) -> Result<()> {
    const PASSES: &[&str] = &[
        "pruning",
        "common_subexpression_elimination",
        "constant_folding",
        "arithmetic_simplification",
        "contraction_fusion",
        "elementwise_fusion",
        "dependency_optimizer",
    ];
    for d in &options.disabled_passes {
        if !PASSES.contains(&d.as_str()) {
            bail!("--disable '{d}': no such pass (passes: {})", PASSES.join(", "));
        }
    }
    let g = load(path)?;
    if let Some(dir) = dump_dir {
        std::fs::create_dir_all(dir).with_context(|| format!("creating --dump-dir {}", dir.display()))?;
    }
    let mut step = 0;
    let mut dump = |round: usize, pass: &str, graph: &Graph| -> std::result::Result<(), String> {
        let Some(dir) = dump_dir else { return Ok(()) };
        let file = dir.join(format!("{step:02}_round{round}_{pass}.pbtxt"));
        step += 1;
        ferroflow::graph::io::write_graph_def(&file, &graph.to_graph_def()).map_err(|e| e.to_string())
    };
    let optimized = ferroflow::optimize::MetaOptimizer::new(options).optimize_with_dump(&g, item, &mut dump)?;
    let report = &optimized.report;
    out!("{}", if details { report.details() } else { report.table() }.trim_end());
    if let Some(out) = output {
        ferroflow::graph::io::write_graph_def(out, &optimized.graph.to_graph_def())?;
        out!("wrote {} ({} nodes)", out.display(), optimized.graph.len());
    }
    if let Some(dir) = dump_dir {
        out!("wrote the graph after each pass to {}", dir.display());
    }
    Ok(())
}

fn merge_partitions(partitions: &[PathBuf], output: &Path) -> Result<()> {
    let defs = partitions
        .iter()
        .map(|p| ferroflow::graph::io::read_graph_def(p).with_context(|| format!("reading {}", p.display())))
        .collect::<Result<Vec<_>>>()?;
    let merged = ferroflow::runtime::merge_partitions(&defs)?;
    ferroflow::graph::io::write_graph_def(output, &merged)?;
    let total: usize = defs.iter().map(|d| d.node.len()).sum();
    out!("merged {} partitions ({total} nodes) into {} ({} nodes)", defs.len(), output.display(), merged.node.len());
    Ok(())
}

fn tensorboard(graph: &Path, logdir: &Path, run: Option<&str>) -> Result<()> {
    // Any GraphDef TensorBoard can show: read, not imported (partition graphs hold _Send/_Recv,
    // TensorFlow graphs may hold ops ferroflow does not run).
    let def = ferroflow::graph::io::read_graph_def(graph)?;
    let run = match run {
        Some(r) => r.to_string(),
        None => graph.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "run".into()),
    };
    if run.is_empty() || run.contains("..") || Path::new(&run).is_absolute() {
        bail!("--run '{run}': expected a run name (a subdirectory of --logdir)");
    }
    let mut w = ferroflow::summary::EventWriter::create(&logdir.join(&run))?;
    w.add_graph(&def, 0)?;
    out!(
        "wrote {} ({} nodes) as run '{run}': tensorboard --logdir {}",
        w.path().display(),
        def.node.len(),
        logdir.display()
    );
    Ok(())
}

fn convert(input: &Path, output: &Path) -> Result<()> {
    let g = load(input)?;
    validate(&g).with_context(|| format!("validating {}", input.display()))?;
    ferroflow::graph::io::write_graph_def(output, &g.to_graph_def())?;
    out!("{}: {} nodes -> {}", input.display(), g.len(), output.display());
    Ok(())
}

/// `ferroflow convert DIR frozen.pb --signature NAME`: one signature of a SavedModel frozen
/// into a GraphDef, validated (imported, shapes inferred) before it is written.
fn freeze_saved_model(dir: &Path, output: &Path, signature: &str, tags: &[String]) -> Result<()> {
    let tags: Vec<&str> = if tags.is_empty() { vec!["serve"] } else { tags.iter().map(String::as_str).collect() };
    let model = ferroflow::train::saved_model::SavedModel::load(dir, &tags, SessionOptions::default())?;
    let frozen = model.freeze(signature)?;
    let g = ferroflow::ops::import_graph_def(&frozen)
        .with_context(|| format!("the frozen signature '{signature}' does not import"))?;
    validate(&g)?;
    ferroflow::graph::io::write_graph_def(output, &frozen)?;
    let sig = model.signature(signature)?;
    let list = |specs: &[ferroflow::train::saved_model::TensorSpec]| {
        specs.iter().map(|s| format!("{}:0 ({}{})", s.key, s.dtype, s.shape)).collect::<Vec<_>>().join(", ")
    };
    out!(
        "{}: signature '{signature}' frozen into {} nodes, {} functions -> {}",
        dir.display(),
        frozen.node.len(),
        frozen.library.as_ref().map_or(0, |l| l.function.len()),
        output.display()
    );
    out!("  feed  {}", list(&sig.inputs));
    out!("  fetch {}", list(&sig.outputs));
    Ok(())
}

/// What `convert` checks past import (which checks ops, inputs and types): every node's shape
/// function accepts it, and every tensor-valued attr (a `Const`'s value) decodes to a tensor of
/// its declared dtype and shape.
fn validate(g: &Graph) -> Result<()> {
    use ferroflow::proto::attr_value::Value;
    ferroflow::ops::infer_shapes(g)?;
    for n in g.nodes() {
        for (name, attr) in &n.attrs {
            let Some(Value::Tensor(t)) = &attr.value else { continue };
            let value = ferroflow::proto::convert::tensor_from_proto(t)
                .map_err(|e| anyhow::anyhow!("node '{}' ({}): attr '{name}': {e}", n.name, n.op))?;
            if let Some(Value::Type(want)) = n.attrs.get("dtype").and_then(|d| d.value.as_ref()) {
                if n.op == "Const" && value.dtype().to_tf() != *want {
                    bail!("node '{}' (Const): value is {} but attr 'dtype' says otherwise", n.name, value.dtype());
                }
            }
        }
    }
    Ok(())
}

fn inspect(path: &Path) -> Result<()> {
    if path.join("saved_model.pb").is_file() {
        let model = ferroflow::train::saved_model_show::read_saved_model(path)?;
        let text = ferroflow::train::saved_model_show::show_all_of(&model);
        let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes());
        for meta in &model.meta_graphs {
            let Some(graph) = &meta.graph_def else { continue };
            let tags = meta.meta_info_def.as_ref().map(|i| i.tags.join(", ")).unwrap_or_default();
            let save = ferroflow::train::saved_model::save_node(meta);
            let serving = ferroflow::runtime::support::missing_ops(graph, save.as_slice());
            let all = ferroflow::runtime::support::missing_ops(graph, &[]);
            if !serving.is_empty() {
                out!("\nOps ferroflow cannot run in the meta graph tagged '{tags}' (loading it fails):");
                for m in &serving {
                    out!("  {m}");
                }
            }
            let save_only: Vec<_> = all.iter().filter(|m| !serving.iter().any(|s| s.op == m.op)).collect();
            if !save_only.is_empty() {
                let ops: Vec<&str> = save_only.iter().map(|m| m.op.as_str()).collect();
                out!(
                    "\nOnly the meta graph's save function uses ops ferroflow cannot run ({}); loading and calling signatures do not need them.",
                    ops.join(", ")
                );
            }
        }
        return Ok(());
    }
    let g = load(path)?;
    let shapes = ferroflow::ops::infer_shapes(&g)?;
    out!("{}: {} nodes, {} functions", path.display(), g.len(), g.library.function.len());
    for (id, n) in g.nodes().iter().enumerate() {
        let inputs: Vec<String> = n.inputs.iter().map(|o| g.output_name(*o)).collect();
        let outs: Vec<String> = n.types.outputs.iter().zip(&shapes[id]).map(|(t, s)| format!("{t}{s}")).collect();
        out!("  {} = {}({}) -> {}", n.name, n.op, inputs.join(", "), outs.join(", "));
    }
    Ok(())
}

fn mnist(
    data: Option<&Path>,
    steps: u64,
    seed: i64,
    options: SessionOptions,
    outputs: ferroflow::workflows::mnist_training::Outputs,
    config: &ferroflow::workflows::mnist_training::Config,
) -> Result<()> {
    let data = data.map_or_else(ferroflow::train::mnist::bundled_dir, Path::to_path_buf);
    let world = ferroflow::collective::world();
    let (rank, ranks) = if config.distributed { (world.rank(), world.size()) } else { (0, 1) };
    if config.distributed {
        out!(
            "rank {rank} of {ranks} ({} world): training the MNIST MLP data-parallel for {steps} steps of {} digits \
             ({} per rank) on {}",
            world.backend(),
            config.batch_size,
            config.batch_size / ranks.max(1),
            data.display()
        );
    } else {
        out!("training the MNIST MLP for {steps} steps on {} (loss every 500 steps on stderr)", data.display());
    }
    if config.batch_size == 0 {
        bail!("--batch 0: expected at least one example per step");
    }
    let r = ferroflow::workflows::mnist_training::train_config(&data, steps, seed, options, 500, outputs, config)
        .map_err(|e| anyhow::anyhow!("mnist_training: {e}"))?;
    if config.distributed {
        out!(
            "rank={rank} ranks={ranks} steps={} global_step={} ({:.0} steps/s) variables_fnv1a={:016x} test_accuracy={:.4}",
            r.steps,
            r.global_step,
            r.steps_per_sec,
            r.checksum,
            r.test_accuracy
        );
        if let Some(c) = &r.checkpoint {
            out!("rank 0 saved {}.{{index,data-00000-of-00001,meta}}", c.display());
        }
        return Ok(());
    }
    out!("{}", r.summary(&outputs));
    Ok(())
}

/// `ferroflow benchmark`.
fn benchmark(
    graph: &Path,
    inputs: Option<&Path>,
    feeds: &[String],
    fetches: &[String],
    (runs, warmup): (usize, usize),
    options: SessionOptions,
    profile: Option<usize>,
) -> Result<()> {
    if runs == 0 {
        bail!("--runs 0: expected at least one timed run");
    }
    let g = load(graph)?;
    let feeds = read_feeds(inputs, feeds)?;
    let sess = Session::new(g, options)?;
    let names: Vec<&str> = feeds.iter().map(|(n, _)| n.as_str()).collect();
    let fetch_refs: Vec<&str> = fetches.iter().map(String::as_str).collect();
    let plan = sess.plan(&names, &fetch_refs, &[])?;
    let values: Vec<Tensor> = feeds.iter().map(|(_, t)| t.clone()).collect();
    for _ in 0..warmup {
        sess.run_plan(&plan, &values)?;
    }
    let mut ms = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = std::time::Instant::now();
        sess.run_plan(&plan, &values)?;
        ms.push(start.elapsed().as_secs_f64() * 1e3);
    }
    let mean = ms.iter().sum::<f64>() / ms.len() as f64;
    ms.sort_by(f64::total_cmp);
    out!(
        "{}: {} nodes ({} after optimization), {runs} runs after {warmup} warm-up, mean {mean:.3} ms",
        graph.display(),
        sess.graph().len(),
        plan.graph().len()
    );
    if let Some(top) = profile {
        let traced = runs.clamp(1, 10);
        let options = RunOptions {
            trace_level: ferroflow::proto::run_options::TraceLevel::FullTrace as i32,
            ..Default::default()
        };
        let mut by_op: std::collections::BTreeMap<String, (f64, usize)> = std::collections::BTreeMap::new();
        let mut by_node: std::collections::HashMap<String, (f64, String)> = std::collections::HashMap::new();
        for _ in 0..traced {
            let (_, meta) = sess.run_plan_with_options(&plan, &values, &options)?;
            for dev in meta.step_stats.iter().flat_map(|s| &s.dev_stats) {
                for n in &dev.node_stats {
                    let op = plan.graph().find(&n.node_name).map_or("?", |id| plan.graph().node(id).op.as_str());
                    let e = by_op.entry(op.to_string()).or_default();
                    let t = (n.op_end_rel_nanos - n.op_start_rel_nanos).max(0) as f64 / 1e6;
                    e.0 += t;
                    e.1 += 1;
                    let shape = n
                        .output
                        .first()
                        .and_then(|o| o.tensor_description.as_ref()?.shape.as_ref())
                        .map(|s| format!("{:?}", s.dim.iter().map(|d| d.size).collect::<Vec<_>>()))
                        .unwrap_or_default();
                    let e = by_node.entry(n.node_name.clone()).or_insert_with(|| (0.0, format!("{op} {shape}")));
                    e.0 += t;
                }
            }
        }
        let total: f64 = by_op.values().map(|v| v.0).sum();
        let mut rows: Vec<(String, f64, usize)> = by_op.into_iter().map(|(k, (t, n))| (k, t, n)).collect();
        rows.sort_by(|a, b| b.1.total_cmp(&a.1));
        out!("time per op type, mean of {traced} traced runs (op time summed over threads):");
        out!("  {:<28} {:>10} {:>7} {:>6}", "op", "ms/run", "share", "nodes");
        for (op, t, n) in rows {
            out!("  {op:<28} {:>10.3} {:>6.1}% {:>6}", t / traced as f64, 100.0 * t / total.max(1e-12), n / traced);
        }
        let mut nodes: Vec<(String, f64, String)> = by_node.into_iter().map(|(k, (t, what))| (k, t, what)).collect();
        nodes.sort_by(|a, b| b.1.total_cmp(&a.1));
        out!("slowest nodes (ms/run, share, op and first output's shape):");
        for (name, t, what) in nodes.iter().take(top) {
            out!("  {name:<40} {:>10.3} {:>6.1}%  {what}", t / traced as f64, 100.0 * t / total.max(1e-12));
        }
    }
    out!(
        "median_ms={:.3} min_ms={:.3} max_ms={:.3} peak_rss_mb={:.1}",
        ms[ms.len() / 2],
        ms[0],
        ms[ms.len() - 1],
        ferroflow::testing::peak_rss_mb().unwrap_or(0.0)
    );
    Ok(())
}

fn inspect_checkpoint(prefix: &Path, tensor: Option<&str>, all: bool, max_values: usize) -> Result<()> {
    let prefix = checkpoint_prefix(prefix)?;
    let reader = ferroflow::checkpoint::BundleReader::open(&prefix)?;
    let limit = if max_values == 0 { usize::MAX } else { max_values };
    let describe = |name: &str, e: &ferroflow::proto::BundleEntryProto| -> String {
        let (dtype, dims) = ferroflow::checkpoint::entry_signature(e);
        format!("{name} ({dtype}) {dims:?}")
    };
    if let Some(name) = tensor {
        let e = reader.entries().get(name).ok_or_else(|| {
            let names: Vec<&String> = reader.entries().keys().collect();
            anyhow::anyhow!("{}: no tensor named '{name}'; it has {names:?}", prefix.display())
        })?;
        out!("{}", describe(name, e));
        out!("{}", reader.read(name)?.preview(limit));
        return Ok(());
    }
    let mut bytes = 0i64;
    for (name, e) in reader.entries() {
        out!("{}", describe(name, e));
        if all {
            out!("  {}", reader.read(name)?.preview(limit));
        }
        bytes += e.size;
    }
    out!("{} tensors, {bytes} bytes of data ({})", reader.entries().len(), prefix.display());
    Ok(())
}
