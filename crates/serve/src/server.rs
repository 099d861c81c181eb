//! The server: the tokio runtime, the listeners (REST on hyper's HTTP/1.1, gRPC on its
//! HTTP/2), graceful shutdown (stop accepting, let in-flight requests finish), and the poller
//! thread.
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tonic::codegen::Service as _;

use crate::batch::Batcher;
use crate::grpc::Api;
use crate::manager::Manager;
use crate::rest::handle;
use crate::shared::Shared;
use crate::{ServeError, ServeOptions};

/// How long, at shutdown, connections that have not sent a whole request may take to do so.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// How long a connection may take to send its request head.
const HEADER_TIMEOUT: Duration = Duration::from_secs(30);

/// Starts servers.
pub struct Server;

/// A running server: its address, and the way to stop it.
pub struct ServerHandle {
    rest_addr: Option<SocketAddr>,
    grpc_addr: Option<SocketAddr>,
    runtime: Option<tokio::runtime::Runtime>,
    stop: Option<tokio::sync::watch::Sender<bool>>,
    accept: Vec<tokio::task::JoinHandle<()>>,
    manager: Arc<Manager>,
    shared: Arc<Shared>,
    poller: Option<std::thread::JoinHandle<()>>,
    config_poller: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    /// Loads the models' served versions (waiting for each load, as TensorFlow Serving does
    /// before it opens its ports), binds `host:rest_port` and starts answering; polls the base
    /// paths every `poll_wait_seconds` in a thread of its own.
    pub fn start(options: ServeOptions) -> Result<ServerHandle, ServeError> {
        if options.models.is_empty() {
            return Err(ServeError::Config(
                "no model to serve: give --model_base_path (and --model_name) or --model_config_file".into(),
            ));
        }
        let manager = Arc::new(Manager::new(&options));
        manager.poll();
        // As TensorFlow Serving: a model whose versions on disk all failed to load stops the
        // start (a model with no versions yet is waited for by the poller).
        let failed = manager.startup_failures();
        if !failed.is_empty() {
            return Err(ServeError::Load(failed.join("; ")));
        }
        let threads = if options.num_threads == 0 {
            std::thread::available_parallelism().map_or(2, |n| n.get())
        } else {
            options.num_threads
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("ferroflow-serve")
            .enable_all()
            .build()
            .map_err(|source| ServeError::Io { what: "starting the server's threads".into(), source })?;
        if options.rest_port.is_none() && options.grpc_port.is_none() {
            return Err(ServeError::Config("neither the REST API nor gRPC has a port: nothing to serve".into()));
        }
        let bind = |port: u16, what: &str| -> Result<(tokio::net::TcpListener, SocketAddr), ServeError> {
            let bind = format!("{}:{port}", options.host);
            let std_listener = std::net::TcpListener::bind(&bind)
                .map_err(|source| ServeError::Io { what: format!("binding the {what} to {bind}"), source })?;
            std_listener
                .set_nonblocking(true)
                .map_err(|source| ServeError::Io { what: "setting up the listener".into(), source })?;
            let addr = std_listener
                .local_addr()
                .map_err(|source| ServeError::Io { what: "reading the bound address".into(), source })?;
            let _enter = runtime.enter();
            let listener = tokio::net::TcpListener::from_std(std_listener)
                .map_err(|source| ServeError::Io { what: "setting up the listener".into(), source })?;
            Ok((listener, addr))
        };
        let rest = options.rest_port.map(|p| bind(p, "REST API")).transpose()?;
        let grpc = options.grpc_port.map(|p| bind(p, "gRPC API")).transpose()?;
        let shared = Arc::new(Shared {
            manager: manager.clone(),
            timeout: (options.timeout_ms > 0).then(|| Duration::from_millis(options.timeout_ms)),
            max_body: options.max_body_bytes,
            batcher: options.batching.clone().map(Batcher::new),
            in_flight: Default::default(),
        });
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let mut accept = Vec::new();
        let (rest_addr, grpc_addr) = (rest.as_ref().map(|r| r.1), grpc.as_ref().map(|g| g.1));
        if let Some((listener, addr)) = rest {
            accept.push(runtime.spawn(accept_loop(listener, shared.clone(), None, stop_rx.clone())));
            log::info!("REST API at http://{addr}/v1/models/");
        }
        if let Some((listener, addr)) = grpc {
            let servers = Api::new(shared.clone()).servers(options.grpc_max_message_bytes);
            accept.push(runtime.spawn(accept_loop(listener, shared.clone(), Some(servers), stop_rx.clone())));
            log::info!("gRPC API (tensorflow.serving.PredictionService, ModelService) at {addr}");
        }
        let poller = (options.poll_wait_seconds > 0).then(|| {
            let manager = manager.clone();
            let wait = Duration::from_secs(options.poll_wait_seconds);
            std::thread::Builder::new()
                .name("ferroflow-serve-poll".into())
                .spawn(move || {
                    while !manager.wait(wait) {
                        manager.poll();
                    }
                })
                .expect("spawning the poller thread")
        });
        let config_poller = match &options.model_config_file {
            Some(file) if options.config_poll_wait_seconds > 0 => {
                let (manager, file) = (manager.clone(), file.clone());
                let wait = Duration::from_secs(options.config_poll_wait_seconds);
                let mut current = options.models.clone();
                Some(
                    std::thread::Builder::new()
                        .name("ferroflow-serve-config".into())
                        .spawn(move || {
                            while !manager.wait(wait) {
                                reread_config(&manager, &file, &mut current);
                            }
                        })
                        .expect("spawning the config poller thread"),
                )
            }
            _ => None,
        };
        Ok(ServerHandle {
            rest_addr,
            grpc_addr,
            runtime: Some(runtime),
            stop: Some(stop_tx),
            accept,
            manager,
            shared,
            poller,
            config_poller,
        })
    }
}

/// Rereads the model config `file`; when it lists other models or settings than `current`, the
/// manager serves those. A file that cannot be read or parsed, or lists no model, is logged and
/// changes nothing (TensorFlow Serving keeps its config then too).
fn reread_config(manager: &Manager, file: &std::path::Path, current: &mut Vec<crate::ModelConfig>) {
    let parsed = std::fs::read_to_string(file)
        .map_err(|e| e.to_string())
        .and_then(|text| crate::parse_model_config(&text).map_err(|e| e.to_string()));
    match parsed {
        Ok(models) if models.is_empty() => {
            log::error!("{}: the model config lists no models; keeping the models served", file.display());
        }
        Ok(models) if models != *current => {
            log::info!("{}: the model config changed; serving its {} model(s)", file.display(), models.len());
            manager.reconfigure(&models);
            *current = models;
        }
        Ok(_) => {}
        Err(e) => log::error!("{}: {e}; keeping the models served", file.display()),
    }
}

type GrpcServers = (
    crate::grpc::api::prediction_service_server::PredictionServiceServer<Api>,
    crate::grpc::api::model_service_server::ModelServiceServer<Api>,
);

/// Accepts connections until told to stop, then waits for the open ones to finish their
/// requests: REST (HTTP/1.1) connections, or gRPC (HTTP/2) ones when `grpc` holds the services.
async fn accept_loop(
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
    grpc: Option<GrpcServers>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let graceful = GracefulShutdown::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((s, _)) => s,
                    Err(e) => {
                        // Out of file descriptors and the like: wait, do not spin or stop.
                        log::warn!("accept: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let io = TokioIo::new(stream);
                match &grpc {
                    None => {
                        let shared = shared.clone();
                        let service = service_fn(move |req| handle(shared.clone(), req));
                        let conn = hyper::server::conn::http1::Builder::new()
                            .timer(TokioTimer::new())
                            .header_read_timeout(HEADER_TIMEOUT)
                            .serve_connection(io, service);
                        let conn = graceful.watch(conn);
                        tokio::spawn(async move {
                            if let Err(e) = conn.await {
                                log::debug!("connection: {e}");
                            }
                        });
                    }
                    Some((prediction, model)) => {
                        let (prediction, model) = (prediction.clone(), model.clone());
                        let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                            let (mut prediction, mut model) = (prediction.clone(), model.clone());
                            async move {
                                let path = req.uri().path();
                                let answer = if path.starts_with("/tensorflow.serving.PredictionService/") {
                                    prediction.call(req).await
                                } else if path.starts_with("/tensorflow.serving.ModelService/") {
                                    model.call(req).await
                                } else {
                                    let message = format!("unknown service or method: {path}");
                                    Ok(tonic::Status::unimplemented(message).into_http())
                                };
                                answer.map(too_large_is_resource_exhausted)
                            }
                        });
                        let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                            .timer(TokioTimer::new())
                            .keep_alive_interval(Some(Duration::from_secs(60)))
                            .serve_connection(io, service);
                        let conn = graceful.watch(conn);
                        tokio::spawn(async move {
                            if let Err(e) = conn.await {
                                log::debug!("gRPC connection: {e}");
                            }
                        });
                    }
                }
            }
            _ = stop.changed() => break,
        }
    }
    drop(listener);
    // Requests being run are answered; connections still sending a request (or stalled mid-way)
    // get DRAIN_GRACE to finish it, then are dropped once nothing runs, so SIGTERM is not held
    // up by a client that never sends the rest.
    let drain = graceful.shutdown();
    tokio::pin!(drain);
    let start = std::time::Instant::now();
    let mut quiet_since = start;
    loop {
        tokio::select! {
            _ = &mut drain => break,
            _ = tokio::time::sleep(Duration::from_millis(50)) => {
                // Quiet for 200 ms: the last answers are written.
                if shared.in_flight.load(std::sync::atomic::Ordering::SeqCst) > 0 {
                    quiet_since = std::time::Instant::now();
                } else if start.elapsed() >= DRAIN_GRACE && quiet_since.elapsed() >= Duration::from_millis(200) {
                    log::info!("dropping connections that did not finish sending a request");
                    break;
                }
            }
        }
    }
}

/// tonic answers a message over the size limit with OUT_OF_RANGE; gRPC servers (TensorFlow
/// Serving's among them) answer RESOURCE_EXHAUSTED.
fn too_large_is_resource_exhausted<B>(mut r: hyper::Response<B>) -> hyper::Response<B> {
    let headers = r.headers_mut();
    let too_large = headers.get("grpc-status").is_some_and(|v| v == "11")
        && headers
            .get("grpc-message")
            .and_then(|m| m.to_str().ok())
            .is_some_and(|m| m.contains("too large") || m.contains("too%20large"));
    if too_large {
        headers.insert("grpc-status", hyper::header::HeaderValue::from_static("8"));
    }
    r
}

impl ServerHandle {
    /// The REST API's bound address (the ephemeral port when started with port 0), if it is on.
    pub fn rest_addr(&self) -> Option<SocketAddr> {
        self.rest_addr
    }

    /// The gRPC API's bound address, if it is on.
    pub fn grpc_addr(&self) -> Option<SocketAddr> {
        self.grpc_addr
    }

    /// Rereads the base paths now (what the poller does every `poll_wait_seconds`); returns when
    /// the new versions are loaded and the removed ones unloaded.
    pub fn poll_now(&self) {
        self.manager.poll();
    }

    /// Serves `models` from now on (what rereading a changed `--model_config_file` does): a
    /// model of the same name and base path keeps its versions and takes the new version
    /// policy and labels, new models are loaded, models no longer listed are unloaded once their
    /// in-flight requests finish. Returns when the loads and unloads are done.
    pub fn reload_config(&self, models: &[crate::ModelConfig]) {
        self.manager.reconfigure(models);
    }

    /// What the batcher has done, when batching is on.
    pub fn batch_stats(&self) -> Option<crate::BatchStats> {
        self.shared.batcher.as_ref().map(|b| b.stats())
    }

    /// Blocks until SIGTERM or SIGINT, then shuts down as [`ServerHandle::shutdown`].
    pub fn run_until_terminated(self) {
        if let Some(rt) = &self.runtime {
            rt.block_on(terminated());
        }
        log::info!("shutting down: no new connections; finishing the requests in flight");
        let stats = self.batch_stats();
        self.shutdown();
        if let Some(s) = stats {
            log::info!(
                "batching: {} tasks ({} rows) ran in {} batches, {} padding rows",
                s.tasks,
                s.rows,
                s.batches,
                s.padding_rows
            );
        }
    }

    /// Stops accepting connections, waits for the requests in flight to be answered, stops
    /// the poller.
    pub fn shutdown(mut self) {
        self.stop_all();
    }

    fn stop_all(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(true);
        }
        if let Some(rt) = &self.runtime {
            for accept in self.accept.drain(..) {
                let _ = rt.block_on(accept);
            }
        }
        self.manager.stop();
        for p in [self.poller.take(), self.config_poller.take()].into_iter().flatten() {
            let _ = p.join();
        }
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_secs(1));
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// Resolves on SIGTERM or SIGINT (Ctrl-C).
pub async fn terminated() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
