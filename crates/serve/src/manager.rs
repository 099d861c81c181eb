//! The models' versions: which numbered directories are served, loading (and warming up) new
//! ones before the old ones go, and finding the version a request names. A served version is an
//! `Arc<Servable>`; unloading drops the manager's reference, so a request still running keeps
//! its version alive until it finishes.
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use ferroflow::runtime::SessionOptions;
use ferroflow::tensor::{DType, Tensor};
use ferroflow::train::saved_model::SavedModel;

use crate::config::{ModelConfig, VersionPolicy};
use crate::service::{self, Servable};
use crate::{ApiError, Code, ServeOptions};

/// TensorFlow Serving's version states.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Being loaded (and warmed up).
    Loading,
    /// Taking traffic.
    Available,
    /// Unloaded, or failed to load (then with its error).
    End,
}

impl State {
    /// The name in status JSON.
    pub fn name(self) -> &'static str {
        match self {
            State::Loading => "LOADING",
            State::Available => "AVAILABLE",
            State::End => "END",
        }
    }
}

struct Entry {
    state: State,
    error: Option<(Code, String)>,
    servable: Option<Arc<Servable>>,
}

struct Model {
    /// Replaced when a reread config changes the model's policy or labels.
    config: Mutex<ModelConfig>,
    versions: Mutex<BTreeMap<i64, Entry>>,
}

impl Model {
    fn new(config: ModelConfig) -> Model {
        Model { config: Mutex::new(config), versions: Mutex::new(BTreeMap::new()) }
    }
    fn config(&self) -> MutexGuard<'_, ModelConfig> {
        self.config.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What a request asks for.
#[derive(Clone, Debug)]
pub enum Which {
    /// The highest available version.
    Latest,
    /// A version number.
    Version(i64),
    /// A label.
    Label(String),
}

/// The status of one version: (version, state, error code and message).
pub type VersionStatus = (i64, State, Option<(Code, String)>);

/// Every model's versions.
pub struct Manager {
    /// By name; replaced as a whole when the config is reread.
    models: RwLock<BTreeMap<String, Arc<Model>>>,
    tags: Vec<String>,
    warmup: bool,
    /// Retries of a failed load, and the wait between them.
    load_retries: usize,
    retry_interval: std::time::Duration,
    /// Set when the server stops: ends retry waits and the poller's sleep.
    stopping: (Mutex<bool>, std::sync::Condvar),
    /// One poll at a time (the poller thread and `poll_now`).
    polling: Mutex<()>,
    /// The sessions' thread counts.
    inter_op_threads: usize,
    intra_op_threads: usize,
}

/// The version directories under `base`: children whose names parse as non-negative int64s.
fn versions_on_disk(base: &Path) -> Vec<i64> {
    let Ok(dir) = std::fs::read_dir(base) else { return Vec::new() };
    let mut out: Vec<i64> = dir
        .flatten()
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<i64>().ok()))
        .filter(|v| *v >= 0)
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The directory of `version` (its name may have leading zeros: `00000123`).
fn version_dir(base: &Path, version: i64) -> Option<std::path::PathBuf> {
    std::fs::read_dir(base).ok()?.flatten().map(|e| e.path()).find(|p| {
        p.is_dir() && p.file_name().and_then(|n| n.to_str()).and_then(|n| n.parse::<i64>().ok()) == Some(version)
    })
}

impl Manager {
    /// A manager for the models of `options` (nothing loaded until [`Manager::poll`]).
    pub fn new(options: &ServeOptions) -> Manager {
        let models =
            RwLock::new(options.models.iter().map(|c| (c.name.clone(), Arc::new(Model::new(c.clone())))).collect());
        Manager {
            models,
            tags: options.tags.clone(),
            warmup: options.warmup,
            load_retries: options.max_load_retries,
            retry_interval: options.load_retry_interval,
            stopping: (Mutex::new(false), std::sync::Condvar::new()),
            polling: Mutex::new(()),
            inter_op_threads: options.inter_op_threads,
            intra_op_threads: options.intra_op_threads,
        }
    }

    /// The models now, by name.
    fn models(&self) -> Vec<Arc<Model>> {
        self.models.read().unwrap_or_else(|e| e.into_inner()).values().cloned().collect()
    }

    /// The models served from now on (a reread `--model_config_file`): a model of the same
    /// name and base path keeps its versions and takes the new policy and labels; a new one
    /// is added; one no longer listed is dropped, its versions unloaded as their in-flight
    /// requests finish. Then the base paths are read (as [`Manager::poll`]).
    pub fn reconfigure(&self, configs: &[ModelConfig]) {
        let dropped: Vec<Arc<Model>> = {
            let mut models = self.models.write().unwrap_or_else(|e| e.into_inner());
            let mut next = BTreeMap::new();
            for c in configs {
                let model = match models.remove(&c.name) {
                    Some(m) if m.config().base_path == c.base_path => {
                        *m.config() = c.clone();
                        m
                    }
                    _ => {
                        log::info!("model {}: serving from {}", c.name, c.base_path.display());
                        Arc::new(Model::new(c.clone()))
                    }
                };
                next.insert(c.name.clone(), model);
            }
            std::mem::replace(&mut *models, next).into_values().collect()
        };
        for m in &dropped {
            log::info!("model {} is no longer in the config: unloading it", m.config().name);
        }
        // Unloading may free models: not under the lock.
        drop(dropped);
        self.poll();
    }

    /// Sleeps up to `d`; whether the server is stopping (then at once).
    pub fn wait(&self, d: std::time::Duration) -> bool {
        let (lock, cv) = &self.stopping;
        let guard = lock.lock().unwrap_or_else(|e| e.into_inner());
        let (guard, _) = cv.wait_timeout_while(guard, d, |s| !*s).unwrap_or_else(|e| e.into_inner());
        *guard
    }

    /// Ends every [`Manager::wait`], now and later.
    pub fn stop(&self) {
        let (lock, cv) = &self.stopping;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
    }

    /// Reads every base path once: loads the versions the policies want that are not loaded
    /// (each becomes AVAILABLE after loading and warming up, or END with its error), then
    /// unloads the served versions no longer wanted. A version that failed is not retried
    /// while its directory stays.
    pub fn poll(&self) {
        let _one = self.polling.lock().unwrap_or_else(|e| e.into_inner());
        for model in self.models() {
            self.poll_model(&model);
        }
    }

    fn poll_model(&self, model: &Model) {
        let config = &model.config().clone();
        let on_disk = versions_on_disk(&config.base_path);
        if on_disk.is_empty() {
            log::warn!("No versions of servable {} found under base path {}", config.name, config.base_path.display());
        }
        {
            // A failed version whose directory went away may be retried when it comes back.
            let mut versions = model.versions.lock().unwrap_or_else(|e| e.into_inner());
            versions.retain(|v, e| !(e.state == State::End && e.error.is_some() && !on_disk.contains(v)));
        }
        // Load first (availability-preserving: the old version serves until the new one is up).
        // A version that fails to load leaves the policy's choice: the next one down is wanted
        // instead, so the version serving now keeps serving.
        let mut wanted;
        loop {
            let failed: Vec<i64> = {
                let versions = model.versions.lock().unwrap_or_else(|e| e.into_inner());
                versions.iter().filter(|(_, e)| e.state == State::End && e.error.is_some()).map(|(v, _)| *v).collect()
            };
            let candidates: Vec<i64> = on_disk.iter().copied().filter(|v| !failed.contains(v)).collect();
            wanted = match &config.policy {
                VersionPolicy::Latest(n) => candidates.iter().rev().take(*n).copied().collect::<Vec<i64>>(),
                VersionPolicy::All => candidates.clone(),
                VersionPolicy::Specific(list) => candidates.iter().copied().filter(|v| list.contains(v)).collect(),
            };
            let to_load: Vec<i64> = {
                let versions = model.versions.lock().unwrap_or_else(|e| e.into_inner());
                wanted
                    .iter()
                    .rev()
                    .copied()
                    .filter(|v| versions.get(v).is_none_or(|e| e.state != State::Available))
                    .collect()
            };
            if to_load.is_empty() {
                break;
            }
            let mut all_loaded = true;
            for v in to_load {
                all_loaded &= self.load(model, v);
            }
            if all_loaded {
                break;
            }
        }
        let mut versions = model.versions.lock().unwrap_or_else(|e| e.into_inner());
        for (v, e) in versions.iter_mut() {
            if e.state == State::Available && !wanted.contains(v) {
                log::info!("unloading servable {} version {v}", config.name);
                e.state = State::End;
                e.servable = None;
            }
        }
    }

    /// Loads one version; whether it became AVAILABLE.
    fn load(&self, model: &Model, version: i64) -> bool {
        let config = model.config().clone();
        let name = &config.name;
        {
            let mut versions = model.versions.lock().unwrap_or_else(|e| e.into_inner());
            versions.insert(version, Entry { state: State::Loading, error: None, servable: None });
        }
        log::info!("loading servable {name} version {version}");
        let mut attempt = 0;
        let result = loop {
            let result = self.try_load(&config, version);
            match result {
                Err((_, e)) if attempt < self.load_retries && version_dir(&config.base_path, version).is_some() => {
                    attempt += 1;
                    log::warn!(
                        "servable {name} version {version} failed to load: {e}; retry {attempt} of {} in {:?}",
                        self.load_retries,
                        self.retry_interval
                    );
                    if self.wait(self.retry_interval) {
                        break Err((Code::Cancelled, format!("{e} (the server stopped before the retries)")));
                    }
                }
                result => break result,
            }
        };
        let ok = result.is_ok();
        let mut versions = model.versions.lock().unwrap_or_else(|e| e.into_inner());
        let entry = match result {
            Ok(s) => {
                log::info!("servable {name} version {version} is available");
                Entry { state: State::Available, error: None, servable: Some(s) }
            }
            Err(e) => {
                log::error!("servable {name} version {version} failed to load: {}", e.1);
                Entry { state: State::End, error: Some(e), servable: None }
            }
        };
        versions.insert(version, entry);
        ok
    }

    /// One attempt at loading (and warming up) a version.
    fn try_load(&self, config: &ModelConfig, version: i64) -> Result<Arc<Servable>, (Code, String)> {
        let name = &config.name;
        let dir = version_dir(&config.base_path, version)
            .ok_or_else(|| (Code::NotFound, format!("version directory {version} vanished")))?;
        let tags: Vec<&str> = self.tags.iter().map(String::as_str).collect();
        let m = SavedModel::load(
            &dir,
            &tags,
            SessionOptions::default()
                .with_inter_op_threads(self.inter_op_threads)
                .with_intra_op_threads(self.intra_op_threads),
        )
        .map_err(|e| {
            let e = ApiError::from_error(&e);
            (e.code, e.message)
        })?;
        let servable = Arc::new(Servable { name: name.clone(), version, model: m });
        if self.warmup {
            match replay_warmup_file(&servable, &dir) {
                Ok(Some(n)) => log::info!("servable {name} version {version}: replayed {n} warmup requests"),
                Ok(None) => warm_up(&servable.model),
                Err(e) => return Err((e.code, format!("warmup: {}", e.message))),
            }
        }
        Ok(servable)
    }

    /// The models that serve nothing although versions of theirs failed to load: one line each.
    pub fn startup_failures(&self) -> Vec<String> {
        let mut out = Vec::new();
        for model in self.models() {
            let name = model.config().name.clone();
            let versions = model.versions.lock().unwrap_or_else(|e| e.into_inner());
            if versions.values().any(|e| e.state == State::Available) {
                continue;
            }
            if let Some((v, (_, message))) = versions.iter().rev().find_map(|(v, e)| e.error.as_ref().map(|x| (v, x))) {
                out.push(format!("model {name}: version {v} failed to load: {message}"));
            }
        }
        out
    }

    /// The model, or NOT_FOUND.
    fn model(&self, name: &str, which: &Which) -> Result<Arc<Model>, ApiError> {
        let models = self.models.read().unwrap_or_else(|e| e.into_inner());
        models.get(name).cloned().ok_or_else(|| not_found(name, which, None))
    }

    /// The version a label names, or INVALID_ARGUMENT.
    fn label(model: &Model, label: &str) -> Result<i64, ApiError> {
        let config = model.config();
        config
            .labels
            .get(label)
            .copied()
            .ok_or_else(|| ApiError::invalid(format!("Unrecognized servable version label: {label}")))
    }

    /// The servable a request names.
    pub fn resolve(&self, name: &str, which: &Which) -> Result<Arc<Servable>, ApiError> {
        let model = self.model(name, which)?;
        let versions = model.versions.lock().unwrap_or_else(|e| e.into_inner());
        let version = match which {
            Which::Latest => {
                return versions
                    .values()
                    .rev()
                    .find_map(|e| e.servable.clone())
                    .ok_or_else(|| not_found(name, which, None));
            }
            Which::Version(v) => *v,
            Which::Label(l) => Manager::label(&model, l)?,
        };
        versions.get(&version).and_then(|e| e.servable.clone()).ok_or_else(|| not_found(name, which, Some(version)))
    }

    /// The status of the model's versions (newest first), or of one.
    pub fn status(&self, name: &str, which: &Which) -> Result<Vec<VersionStatus>, ApiError> {
        let model = self.model(name, which)?;
        let versions = model.versions.lock().unwrap_or_else(|e| e.into_inner());
        let all: Vec<VersionStatus> = versions.iter().rev().map(|(v, e)| (*v, e.state, e.error.clone())).collect();
        let one = match which {
            Which::Latest => {
                if all.is_empty() {
                    return Err(ApiError::not_found(format!("Could not find any versions of model {name}")));
                }
                return Ok(all);
            }
            Which::Version(v) => *v,
            Which::Label(l) => Manager::label(&model, l)?,
        };
        let found: Vec<VersionStatus> = all.into_iter().filter(|s| s.0 == one).collect();
        if found.is_empty() {
            return Err(ApiError::not_found(format!("Could not find version {one} of model {name}")));
        }
        Ok(found)
    }
}

fn not_found(name: &str, which: &Which, version: Option<i64>) -> ApiError {
    ApiError::not_found(match (which, version) {
        (Which::Latest, _) => format!("Servable not found for request: Latest({name})"),
        (Which::Version(v), _) => format!("Servable not found for request: Specific({name}, {v})"),
        (Which::Label(_), Some(v)) => format!("Servable not found for request: Specific({name}, {v})"),
        (Which::Label(l), None) => format!("Servable not found for request: Label({name}, {l})"),
    })
}

/// The most records a warmup file may hold (TensorFlow Serving's limit).
pub(crate) const MAX_WARMUP_RECORDS: usize = 1000;

/// Replays `<version>/assets.extra/tf_serving_warmup_requests` (a TFRecord file of
/// `PredictionLog`s, as TensorFlow Serving reads it): each predict, classify, regress and
/// multi-inference request is run once. `None` when there is no such file; an error (which
/// fails the load) for a damaged file, an unsupported record, a failing request or more than
/// 1000 records.
fn replay_warmup_file(servable: &Arc<Servable>, dir: &Path) -> Result<Option<usize>, ApiError> {
    use ferroflow::proto::serving::prediction_log::LogType;
    use ferroflow::runtime::Cancellation;
    let path = dir.join("assets.extra").join("tf_serving_warmup_requests");
    let Ok(file) = std::fs::File::open(&path) else { return Ok(None) };
    let len = file.metadata().ok().map(|m| m.len());
    let cancel = Cancellation::new();
    let signature = |spec: &Option<ferroflow::proto::serving::ModelSpec>| {
        spec.as_ref().map(|s| s.signature_name.clone()).unwrap_or_default()
    };
    let what = path.display().to_string();
    let n = read_warmup_records(std::io::BufReader::new(file), &what, len, |log| {
        match log {
            LogType::PredictLog(l) => {
                let r = l.request.unwrap_or_default();
                let sig = signature(&r.model_spec);
                service::predict_protos(None, servable, &sig, r.inputs, &r.output_filter, None, &cancel)?;
            }
            LogType::ClassifyLog(l) => {
                let r = l.request.unwrap_or_default();
                service::infer_input(servable, &signature(&r.model_spec), r.input.as_ref(), true, None, &cancel)?;
            }
            LogType::RegressLog(l) => {
                let r = l.request.unwrap_or_default();
                service::infer_input(servable, &signature(&r.model_spec), r.input.as_ref(), false, None, &cancel)?;
            }
            LogType::MultiInferenceLog(l) => {
                let r = l.request.unwrap_or_default();
                for task in &r.tasks {
                    let classify = task.method_name == service::CLASSIFY_METHOD;
                    service::infer_input(
                        servable,
                        &signature(&task.model_spec),
                        r.input.as_ref(),
                        classify,
                        None,
                        &cancel,
                    )?;
                }
            }
        }
        Ok(())
    })?;
    Ok(Some(n))
}

/// Reads a warmup file's records (a TFRecord stream of `PredictionLog`s; `len` its size when
/// known, `what` its name in errors) and hands each record's request to `replay`, in order: the
/// number of records, or the first error (a damaged record, more than [`MAX_WARMUP_RECORDS`],
/// a record with no request, or `replay`'s). Each record's length is checked against the bytes
/// that remain and the memory limit before it is read, and its decoded size against the memory
/// limit before it is decoded.
pub(crate) fn read_warmup_records<R: std::io::Read>(
    reader: R,
    what: &str,
    len: Option<u64>,
    mut replay: impl FnMut(ferroflow::proto::serving::prediction_log::LogType) -> Result<(), ApiError>,
) -> Result<usize, ApiError> {
    use ferroflow::proto::serving::PredictionLog;
    let mut reader = ferroflow::summary::record::RecordReader::new(reader, what, len);
    let mut n = 0;
    while let Some(record) = reader.next_record().map_err(|e| ApiError::from_error(&e))? {
        n += 1;
        if n > MAX_WARMUP_RECORDS {
            return Err(ApiError::invalid(format!(
                "Number of warmup records exceeds the maximum ({MAX_WARMUP_RECORDS}) at {what}"
            )));
        }
        let log = ferroflow::proto::decode::<PredictionLog>(&record, &format!("record {n} of {what}"))
            .map_err(|e| ApiError::from_error(&e))?;
        drop(record);
        let Some(log) = log.log_type else {
            return Err(ApiError::coded(
                Code::Unimplemented,
                format!("record {n} of {what}: unsupported log type for warmup"),
            ));
        };
        replay(log)?;
    }
    Ok(n)
}

/// Runs each signature once on zeros (batch 1 where the first dimension is unknown), so the
/// first request does not pay for planning. Signatures with other unknown dimensions, unknown
/// ranks or string inputs are skipped; a failing run is logged, not fatal (zeros may be
/// outside a model's domain).
fn warm_up(model: &SavedModel) {
    for sig in model.signatures().values() {
        let mut feeds: Vec<(&str, Tensor)> = Vec::new();
        let mut feasible = true;
        for spec in &sig.inputs {
            let Some(dims) = spec.shape.dims() else {
                feasible = false;
                break;
            };
            if dims.iter().skip(1).any(Option::is_none) || matches!(spec.dtype, DType::String | DType::Variant) {
                feasible = false;
                break;
            }
            let concrete: Vec<usize> = dims.iter().map(|d| d.unwrap_or(1)).collect();
            match Tensor::zeros(spec.dtype, &concrete) {
                Ok(t) => feeds.push((spec.key.as_str(), t)),
                Err(_) => {
                    feasible = false;
                    break;
                }
            }
        }
        if !feasible {
            log::debug!("warmup: signature '{}' skipped (inputs of unknown shape or strings)", sig.name);
            continue;
        }
        if let Err(e) = model.call(&sig.name, &feeds, &[]) {
            log::warn!("warmup: signature '{}' failed on zeros: {e}", sig.name);
        }
    }
}
