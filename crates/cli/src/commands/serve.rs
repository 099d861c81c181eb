//! `ferroflow serve`: TensorFlow Serving's REST and gRPC APIs over SavedModel version directories.
use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use ferroflow_serve::{
    parse_batching_parameters, parse_model_config, BatchingParameters, ModelConfig, ServeOptions, Server,
};

/// Serve SavedModels over TensorFlow Serving's REST and gRPC APIs (a drop-in for
/// tensorflow_model_server).
///
/// MODEL_BASE_PATH holds numbered version directories (1/, 2/, ...), each a SavedModel; the
/// newest is served, and the directory is polled: a new version is loaded and warmed up before
/// it takes traffic, a removed one is unloaded once its requests finish. REST:
/// POST /v1/models/NAME[/versions/V|/labels/L]:predict (:classify, :regress),
/// GET /v1/models/NAME[/versions/V] and .../metadata, with TensorFlow Serving's JSON. gRPC on
/// --port: tensorflow.serving.PredictionService (Predict, Classify, Regress, MultiInference,
/// GetModelMetadata) and ModelService (GetModelStatus, HandleReloadConfigRequest).
/// --enable_batching merges concurrent predict requests along the batch dimension.
/// TensorFlow Serving's flags are spelled as it
/// spells them (--model_name; --model-name also works); its other flags are accepted and
/// ignored with a warning. SIGTERM or Ctrl-C: stop accepting, finish the requests in flight,
/// exit 0.
#[derive(Args)]
pub struct ServeArgs {
    /// The model's name in request paths (ignored with --model_config_file).
    #[arg(long = "model_name", alias = "model-name", value_name = "NAME", default_value = "default")]
    model_name: String,
    /// The directory of the model's numbered versions (without the version).
    #[arg(long = "model_base_path", alias = "model-base-path", value_name = "DIR")]
    model_base_path: Option<PathBuf>,
    /// A text-format ModelServerConfig: model_config_list { config { name, base_path,
    /// model_platform, model_version_policy, version_labels } ... }.
    #[arg(long = "model_config_file", alias = "model-config-file", value_name = "FILE")]
    model_config_file: Option<PathBuf>,
    /// Seconds between rereads of --model_config_file (0: read once). A changed file is
    /// served: new models loaded, removed ones unloaded, policies and labels applied; one that
    /// does not parse is logged and changes nothing.
    #[arg(
        long = "model_config_file_poll_wait_seconds",
        alias = "model-config-file-poll-wait-seconds",
        value_name = "N",
        default_value_t = 0
    )]
    model_config_file_poll_wait_seconds: u64,
    /// Threads of each model's pool for independent ops (0: one per core).
    #[arg(
        long = "tensorflow_inter_op_parallelism",
        alias = "tensorflow-inter-op-parallelism",
        value_name = "N",
        default_value_t = 0
    )]
    tensorflow_inter_op_parallelism: usize,
    /// Threads that split one op's work (0: one per core).
    #[arg(
        long = "tensorflow_intra_op_parallelism",
        alias = "tensorflow-intra-op-parallelism",
        value_name = "N",
        default_value_t = 0
    )]
    tensorflow_intra_op_parallelism: usize,
    /// The REST API's port (0: off; TensorFlow Serving's default is 0, ferroflow's is 8501).
    #[arg(long = "rest_api_port", alias = "rest-api-port", value_name = "PORT", default_value_t = 8501)]
    rest_api_port: u16,
    /// The address the REST API binds.
    #[arg(long = "rest_api_host", alias = "rest-api-host", value_name = "HOST", default_value = "127.0.0.1")]
    rest_api_host: String,
    /// The gRPC port (0: off).
    #[arg(long, value_name = "PORT", default_value_t = 8500)]
    port: u16,
    /// The largest gRPC request message, in bytes (larger ones get RESOURCE_EXHAUSTED).
    #[arg(long = "grpc_max_message_bytes", alias = "grpc-max-message-bytes", value_name = "BYTES", default_value_t = 64 << 20)]
    grpc_max_message_bytes: usize,
    /// Merge concurrent predict requests to one signature into batches.
    #[arg(long = "enable_batching", alias = "enable-batching", num_args = 0..=1, default_missing_value = "true", value_name = "BOOL", default_value_t = false, action = clap::ArgAction::Set)]
    enable_batching: bool,
    /// A text-format BatchingParameters file (max_batch_size { value: 32 } ...); needs
    /// --enable_batching.
    #[arg(long = "batching_parameters_file", alias = "batching-parameters-file", value_name = "FILE")]
    batching_parameters_file: Option<PathBuf>,
    /// The REST server's threads (0: the number of CPUs).
    #[arg(long = "rest_api_num_threads", alias = "rest-api-num-threads", value_name = "N", default_value_t = 0)]
    rest_api_num_threads: usize,
    /// The deadline of one request's model run in ms (0: none); past it the answer is 504.
    #[arg(
        long = "rest_api_timeout_in_ms",
        alias = "rest-api-timeout-in-ms",
        value_name = "MS",
        default_value_t = 30000
    )]
    rest_api_timeout_in_ms: u64,
    /// The largest request body, in bytes (after gzip); larger ones get 413.
    #[arg(long = "rest_api_max_body_bytes", alias = "rest-api-max-body-bytes", value_name = "BYTES", default_value_t = 64 << 20)]
    rest_api_max_body_bytes: usize,
    /// Seconds between polls of the base paths for new or removed versions (0: read once).
    #[arg(
        long = "file_system_poll_wait_seconds",
        alias = "file-system-poll-wait-seconds",
        value_name = "N",
        default_value_t = 1
    )]
    file_system_poll_wait_seconds: u64,
    /// How often a version that fails to load is retried before it is reported END.
    #[arg(long = "max_num_load_retries", alias = "max-num-load-retries", value_name = "N", default_value_t = 5)]
    max_num_load_retries: usize,
    /// The wait between load retries, in microseconds.
    #[arg(
        long = "load_retry_interval_micros",
        alias = "load-retry-interval-micros",
        value_name = "US",
        default_value_t = 60_000_000
    )]
    load_retry_interval_micros: u64,
    /// The meta graph's tags, comma-separated.
    #[arg(long = "saved_model_tags", alias = "saved-model-tags", value_name = "TAGS", default_value = "serve")]
    saved_model_tags: String,
}

/// TensorFlow Serving's flags that ferroflow accepts and ignores (bools may be bare).
const IGNORED_BOOL: &[&str] = &[
    "enable_model_warmup",
    "rest_api_enable_cors_support",
    "flush_filesystem_caches",
    "enable_signature_method_name_check",
    "xla_cpu_compilation_enabled",
    "allow_version_labels_for_unavailable_models",
    "remove_unused_fields_from_bundle_metagraph",
    "prefer_tflite_model",
    "use_tflite_model",
    "enable_profiler",
    "skip_initialize_tpu",
];
const IGNORED_VALUE: &[&str] = &[
    "tensorflow_session_parallelism",
    "grpc_channel_arguments",
    "grpc_max_threads",
    "grpc_socket_path",
    "per_process_gpu_memory_fraction",
    "monitoring_config_file",
    "ssl_config_file",
    "platform_config_file",
    "num_load_threads",
    "num_unload_threads",
    "tensorflow_session_config_file",
    "thread_pool_factory_config_file",
    "mixed_precision",
];

/// Drops TensorFlow Serving's flags that `serve` does not implement from the command line
/// (printing a warning for each), so that a deployment's command line runs unchanged.
pub fn drop_ignored_flags(args: Vec<OsString>) -> Vec<OsString> {
    let is_serve = args.iter().skip(1).find(|a| !a.to_string_lossy().starts_with('-')).is_some_and(|a| a == "serve");
    if !is_serve {
        return args;
    }
    let mut out = Vec::with_capacity(args.len());
    let mut iter = args.into_iter().peekable();
    while let Some(arg) = iter.next() {
        let text = arg.to_string_lossy().into_owned();
        let Some(flag) = text.strip_prefix("--") else {
            out.push(arg);
            continue;
        };
        let (name, has_value) = match flag.split_once('=') {
            Some((n, _)) => (n.replace('-', "_"), true),
            None => (flag.replace('-', "_"), false),
        };
        if IGNORED_BOOL.contains(&name.as_str()) {
            eprintln!("warning: --{name} is not implemented by ferroflow serve; ignored");
        } else if IGNORED_VALUE.contains(&name.as_str()) {
            if !has_value {
                iter.next();
            }
            eprintln!("warning: --{name} is not implemented by ferroflow serve; ignored");
        } else {
            out.push(arg);
        }
    }
    out
}

pub fn run(args: ServeArgs) -> Result<()> {
    let models = match (&args.model_config_file, &args.model_base_path) {
        (Some(file), _) => {
            if args.model_base_path.is_some() {
                log::warn!("--model_base_path is ignored with --model_config_file");
            }
            let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
            parse_model_config(&text).with_context(|| file.display().to_string())?
        }
        (None, Some(base)) => vec![ModelConfig::new(&args.model_name, base.clone())],
        (None, None) => bail!("give --model_base_path DIR (and --model_name NAME) or --model_config_file FILE"),
    };
    if models.is_empty() {
        bail!("the model config lists no models");
    }
    if args.rest_api_port == 0 && args.port == 0 {
        bail!("--rest_api_port=0 and --port=0: neither the REST API nor gRPC is on, so there is nothing to serve");
    }
    if args.port != 0 && args.port == args.rest_api_port {
        bail!("--port and --rest_api_port must differ ({})", args.port);
    }
    let batching = match (&args.batching_parameters_file, args.enable_batching) {
        (Some(_), false) => bail!("--batching_parameters_file needs --enable_batching"),
        (Some(file), true) => {
            let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
            Some(parse_batching_parameters(&text).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?)
        }
        (None, true) => Some(BatchingParameters::default()),
        (None, false) => None,
    };
    let tags: Vec<&str> = args.saved_model_tags.split(',').map(str::trim).filter(|t| !t.is_empty()).collect();
    let mut options = ServeOptions::new()
        .with_host(&args.rest_api_host)
        .with_rest_port((args.rest_api_port != 0).then_some(args.rest_api_port))
        .with_grpc_port((args.port != 0).then_some(args.port))
        .with_grpc_max_message_bytes(args.grpc_max_message_bytes)
        .with_batching(batching)
        .with_load_retries(args.max_num_load_retries, std::time::Duration::from_micros(args.load_retry_interval_micros))
        .with_num_threads(args.rest_api_num_threads)
        .with_timeout_ms(args.rest_api_timeout_in_ms)
        .with_max_body_bytes(args.rest_api_max_body_bytes)
        .with_poll_wait_seconds(args.file_system_poll_wait_seconds)
        .with_threads(args.tensorflow_inter_op_parallelism, args.tensorflow_intra_op_parallelism)
        .with_tags(&tags);
    if let Some(file) = &args.model_config_file {
        options = options.with_model_config_file(file, args.model_config_file_poll_wait_seconds);
    } else if args.model_config_file_poll_wait_seconds > 0 {
        log::warn!("--model_config_file_poll_wait_seconds is ignored without --model_config_file");
    }
    for m in models {
        options = options.with_model(m);
    }
    let server = Server::start(options)?;
    if let Some(addr) = server.rest_addr() {
        out!("serving REST API at http://{addr}/v1/models/");
    }
    if let Some(addr) = server.grpc_addr() {
        out!("serving gRPC API at {addr}");
    }
    server.run_until_terminated();
    out!("stopped");
    Ok(())
}
