//! What to serve: the models (from `--model_name`/`--model_base_path` or a text-format
//! `ModelServerConfig`), their version policies and labels, and the REST server's settings.
use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::batch::BatchingParameters;
use crate::ServeError;

/// Which version directories of a model are served (TensorFlow Serving's
/// `model_version_policy`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VersionPolicy {
    /// The N highest versions (`latest { num_versions: N }`; the default is 1).
    Latest(usize),
    /// Every version (`all {}`).
    All,
    /// These versions (`specific { versions: 1 versions: 2 }`).
    Specific(Vec<i64>),
}

/// One model: its name, the directory holding its numbered versions, the version policy and
/// the labels (`stable` → 1).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ModelConfig {
    /// The name in request paths (`/v1/models/NAME`).
    pub name: String,
    /// The directory whose numbered subdirectories are the versions.
    pub base_path: PathBuf,
    /// `tensorflow` (the only platform served).
    pub platform: String,
    /// Which versions are served.
    pub policy: VersionPolicy,
    /// Version labels (`/labels/L`).
    pub labels: BTreeMap<String, i64>,
}

impl ModelConfig {
    /// Model `name` under `base_path`, latest version only, no labels.
    pub fn new(name: &str, base_path: impl Into<PathBuf>) -> ModelConfig {
        ModelConfig {
            name: name.to_string(),
            base_path: base_path.into(),
            platform: "tensorflow".into(),
            policy: VersionPolicy::Latest(1),
            labels: BTreeMap::new(),
        }
    }

    /// Sets the version policy.
    pub fn with_policy(mut self, policy: VersionPolicy) -> ModelConfig {
        self.policy = policy;
        self
    }

    /// Adds a version label.
    pub fn with_label(mut self, label: &str, version: i64) -> ModelConfig {
        self.labels.insert(label.to_string(), version);
        self
    }
}

/// The server's settings (TensorFlow Serving's flags of the same names).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ServeOptions {
    /// The models served.
    pub models: Vec<ModelConfig>,
    /// The address the REST API binds (`127.0.0.1`).
    pub host: String,
    /// The REST port (0: an ephemeral port, reported by [`crate::ServerHandle::rest_addr`];
    /// `None`: no REST API).
    pub rest_port: Option<u16>,
    /// The gRPC port (0: an ephemeral port, reported by [`crate::ServerHandle::grpc_addr`];
    /// `None`: no gRPC API).
    pub grpc_port: Option<u16>,
    /// The largest gRPC message accepted, in bytes.
    pub grpc_max_message_bytes: usize,
    /// Batching of predict requests (`--enable_batching`), with its parameters.
    pub batching: Option<BatchingParameters>,
    /// How often a failed load is retried (TensorFlow Serving's `max_num_load_retries`).
    pub max_load_retries: usize,
    /// The wait between load retries (`load_retry_interval_micros`).
    pub load_retry_interval: std::time::Duration,
    /// Worker threads of the REST server (0: the number of CPUs).
    pub num_threads: usize,
    /// The deadline of one request's model run, in milliseconds (0: none); past it, 504.
    pub timeout_ms: u64,
    /// Seconds between polls of the base paths (0: read once at start).
    pub poll_wait_seconds: u64,
    /// The largest request body accepted (after gzip decoding), in bytes.
    pub max_body_bytes: usize,
    /// The meta graph's tags (`serve`).
    pub tags: Vec<String>,
    /// Run each signature once on zeros after a load, before the version takes traffic.
    pub warmup: bool,
    /// The `--model_config_file` the models came from, reread every
    /// `config_poll_wait_seconds` when that is not 0.
    pub model_config_file: Option<PathBuf>,
    /// Seconds between rereads of `model_config_file` (0: read once).
    pub config_poll_wait_seconds: u64,
    /// Threads of each model's pool for independent ops (0: one per core).
    pub inter_op_threads: usize,
    /// Threads that split one op's work (0: one per core).
    pub intra_op_threads: usize,
}

impl Default for ServeOptions {
    fn default() -> ServeOptions {
        ServeOptions {
            models: Vec::new(),
            host: "127.0.0.1".into(),
            rest_port: Some(8501),
            grpc_port: None,
            grpc_max_message_bytes: 64 << 20,
            batching: None,
            max_load_retries: 5,
            load_retry_interval: std::time::Duration::from_secs(60),
            num_threads: 0,
            timeout_ms: 30_000,
            poll_wait_seconds: 1,
            max_body_bytes: 64 << 20,
            tags: vec!["serve".into()],
            warmup: true,
            model_config_file: None,
            config_poll_wait_seconds: 0,
            inter_op_threads: 0,
            intra_op_threads: 0,
        }
    }
}

impl ServeOptions {
    /// Defaults: no models, REST on 127.0.0.1:8501, no gRPC, no batching, 30 s deadline,
    /// polls every second, 64 MiB bodies and messages, a failed load retried 5 times a minute
    /// apart (TensorFlow Serving's defaults).
    pub fn new() -> ServeOptions {
        ServeOptions::default()
    }
    /// Adds a model.
    pub fn with_model(mut self, model: ModelConfig) -> ServeOptions {
        self.models.push(model);
        self
    }
    /// Sets the bind address.
    pub fn with_host(mut self, host: &str) -> ServeOptions {
        self.host = host.to_string();
        self
    }
    /// Sets the REST port (0: ephemeral; `None`: no REST API).
    pub fn with_rest_port(mut self, port: impl Into<Option<u16>>) -> ServeOptions {
        self.rest_port = port.into();
        self
    }
    /// Sets the gRPC port (0: ephemeral; `None`: no gRPC API).
    pub fn with_grpc_port(mut self, port: impl Into<Option<u16>>) -> ServeOptions {
        self.grpc_port = port.into();
        self
    }
    /// Sets the largest gRPC message accepted.
    pub fn with_grpc_max_message_bytes(mut self, n: usize) -> ServeOptions {
        self.grpc_max_message_bytes = n;
        self
    }
    /// Sets the retries of a failed load and the wait between them.
    pub fn with_load_retries(mut self, retries: usize, interval: std::time::Duration) -> ServeOptions {
        self.max_load_retries = retries;
        self.load_retry_interval = interval;
        self
    }
    /// Turns batching on with `params` (`None`: off).
    pub fn with_batching(mut self, params: Option<BatchingParameters>) -> ServeOptions {
        self.batching = params;
        self
    }
    /// Sets the number of worker threads.
    pub fn with_num_threads(mut self, n: usize) -> ServeOptions {
        self.num_threads = n;
        self
    }
    /// Sets the run deadline in milliseconds.
    pub fn with_timeout_ms(mut self, ms: u64) -> ServeOptions {
        self.timeout_ms = ms;
        self
    }
    /// Sets the poll interval in seconds (0: no polling after start).
    pub fn with_poll_wait_seconds(mut self, s: u64) -> ServeOptions {
        self.poll_wait_seconds = s;
        self
    }
    /// Sets the request body limit.
    pub fn with_max_body_bytes(mut self, n: usize) -> ServeOptions {
        self.max_body_bytes = n;
        self
    }
    /// Sets the meta graph tags.
    pub fn with_tags(mut self, tags: &[&str]) -> ServeOptions {
        self.tags = tags.iter().map(|t| t.to_string()).collect();
        self
    }
    /// Turns the warmup run on or off.
    pub fn with_warmup(mut self, on: bool) -> ServeOptions {
        self.warmup = on;
        self
    }
    /// Rereads `file` (a text-format `ModelServerConfig`) every `seconds` (0: never) and
    /// serves what it lists: new models are loaded, removed ones unloaded, changed version
    /// policies and labels applied. A file that does not parse is logged and the models stay.
    pub fn with_model_config_file(mut self, file: impl Into<PathBuf>, seconds: u64) -> ServeOptions {
        self.model_config_file = Some(file.into());
        self.config_poll_wait_seconds = seconds;
        self
    }
    /// Sets the models' thread pools: inter-op and intra-op threads (0: one per core).
    pub fn with_threads(mut self, inter_op: usize, intra_op: usize) -> ServeOptions {
        self.inter_op_threads = inter_op;
        self.intra_op_threads = intra_op;
        self
    }
}

/// A text-format value: a scalar token or a nested message.
#[derive(Debug)]
enum Value {
    Scalar(Scalar),
    Message(Vec<(String, Value)>),
}

#[derive(Debug)]
enum Scalar {
    Str(String),
    Word(String),
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    /// A position and its line, from which [`Parser::line`] counts on (each field asks for
    /// its line: counting from the start each time made a long file quadratic).
    seen: std::cell::Cell<(usize, usize)>,
}

fn bad(msg: String) -> ServeError {
    ServeError::Config(msg)
}

impl Parser<'_> {
    fn skip(&mut self) {
        while self.i < self.s.len() {
            match self.s[self.i] {
                b' ' | b'\t' | b'\r' | b'\n' | b',' | b';' => self.i += 1,
                b'#' => {
                    while self.i < self.s.len() && self.s[self.i] != b'\n' {
                        self.i += 1;
                    }
                }
                _ => break,
            }
        }
    }

    fn line(&self) -> usize {
        let i = self.i.min(self.s.len());
        let (mut from, mut line) = self.seen.get();
        if from > i {
            (from, line) = (0, 1);
        }
        line += self.s[from..i].iter().filter(|&&c| c == b'\n').count();
        self.seen.set((i, line));
        line
    }

    fn word(&mut self) -> Option<String> {
        let start = self.i;
        while self.i < self.s.len() && (self.s[self.i].is_ascii_alphanumeric() || b"_.-+".contains(&self.s[self.i])) {
            self.i += 1;
        }
        (self.i > start).then(|| String::from_utf8_lossy(&self.s[start..self.i]).into_owned())
    }

    fn string(&mut self, quote: u8) -> Result<String, ServeError> {
        self.i += 1;
        let mut out = Vec::new();
        while self.i < self.s.len() {
            let c = self.s[self.i];
            self.i += 1;
            if c == quote {
                return String::from_utf8(out).map_err(|_| bad(format!("line {}: string is not UTF-8", self.line())));
            }
            if c == b'\\' && self.i < self.s.len() {
                let e = self.s[self.i];
                self.i += 1;
                out.push(match e {
                    b'n' => b'\n',
                    b't' => b'\t',
                    b'r' => b'\r',
                    other => other,
                });
            } else if c == b'\n' {
                break;
            } else {
                out.push(c);
            }
        }
        Err(bad(format!("line {}: unterminated string", self.line())))
    }

    /// Fields until `end` (`}` / `>`) or the end of input.
    fn fields(&mut self, end: Option<u8>, depth: usize) -> Result<Vec<(String, Value)>, ServeError> {
        if depth > 32 {
            return Err(bad("messages nested more than 32 deep".into()));
        }
        let mut out = Vec::new();
        loop {
            self.skip();
            match (self.s.get(self.i).copied(), end) {
                (None, None) => return Ok(out),
                (None, Some(e)) => return Err(bad(format!("unexpected end of file: expected '{}'", e as char))),
                (Some(c), Some(e)) if c == e => {
                    self.i += 1;
                    return Ok(out);
                }
                _ => {}
            }
            let line = self.line();
            let name = self.word().ok_or_else(|| {
                bad(format!("line {line}: expected a field name, found '{}'", self.s[self.i] as char))
            })?;
            self.skip();
            let colon = self.s.get(self.i) == Some(&b':');
            if colon {
                self.i += 1;
                self.skip();
            }
            let value = match self.s.get(self.i).copied() {
                Some(b'{') => {
                    self.i += 1;
                    Value::Message(self.fields(Some(b'}'), depth + 1)?)
                }
                Some(b'<') => {
                    self.i += 1;
                    Value::Message(self.fields(Some(b'>'), depth + 1)?)
                }
                Some(q @ (b'"' | b'\'')) if colon => Value::Scalar(Scalar::Str(self.string(q)?)),
                _ if colon => Value::Scalar(Scalar::Word(
                    self.word().ok_or_else(|| bad(format!("line {line}: '{name}' has no value")))?,
                )),
                _ => return Err(bad(format!("line {line}: expected ':' or '{{' after '{name}'"))),
            };
            out.push((name, value));
        }
    }
}

fn message<'a>(v: &'a Value, field: &str) -> Result<&'a [(String, Value)], ServeError> {
    match v {
        Value::Message(m) => Ok(m),
        Value::Scalar(_) => Err(bad(format!("'{field}' must be a message"))),
    }
}

fn string(v: &Value, field: &str) -> Result<String, ServeError> {
    match v {
        Value::Scalar(Scalar::Str(s)) => Ok(s.clone()),
        _ => Err(bad(format!("'{field}' must be a quoted string"))),
    }
}

fn int(v: &Value, field: &str) -> Result<i64, ServeError> {
    match v {
        Value::Scalar(Scalar::Word(w)) => w.parse().map_err(|_| bad(format!("'{field}': '{w}' is not an integer"))),
        _ => Err(bad(format!("'{field}' must be an integer"))),
    }
}

fn policy(fields: &[(String, Value)]) -> Result<VersionPolicy, ServeError> {
    let mut policy = None;
    for (name, v) in fields {
        let p = match name.as_str() {
            "latest" => {
                let mut n = 1;
                for (f, x) in message(v, name)? {
                    match f.as_str() {
                        "num_versions" => n = int(x, f)?,
                        other => return Err(bad(format!("latest: unknown field '{other}'"))),
                    }
                }
                if n < 1 {
                    return Err(bad(format!("latest: num_versions must be at least 1, got {n}")));
                }
                VersionPolicy::Latest(n as usize)
            }
            "all" => {
                message(v, name)?;
                VersionPolicy::All
            }
            "specific" => {
                let mut versions = Vec::new();
                for (f, x) in message(v, name)? {
                    match f.as_str() {
                        "versions" => versions.push(int(x, f)?),
                        other => return Err(bad(format!("specific: unknown field '{other}'"))),
                    }
                }
                if versions.is_empty() {
                    return Err(bad("specific: no versions".into()));
                }
                VersionPolicy::Specific(versions)
            }
            other => return Err(bad(format!("model_version_policy: unknown field '{other}'"))),
        };
        if policy.replace(p).is_some() {
            return Err(bad("model_version_policy holds more than one policy".into()));
        }
    }
    policy.ok_or_else(|| bad("model_version_policy is empty".into()))
}

fn model(fields: &[(String, Value)]) -> Result<ModelConfig, ServeError> {
    let mut m = ModelConfig::new("", "");
    let mut has_base = false;
    for (name, v) in fields {
        match name.as_str() {
            "name" => m.name = string(v, name)?,
            "base_path" => {
                m.base_path = PathBuf::from(string(v, name)?);
                has_base = true;
            }
            "model_platform" => {
                m.platform = string(v, name)?;
                if m.platform != "tensorflow" {
                    return Err(bad(format!(
                        "model '{}': model_platform '{}' is not served (only 'tensorflow')",
                        m.name, m.platform
                    )));
                }
            }
            "model_version_policy" => m.policy = policy(message(v, name)?)?,
            "version_labels" => {
                let (mut key, mut value) = (None, None);
                for (f, x) in message(v, name)? {
                    match f.as_str() {
                        "key" => key = Some(string(x, f)?),
                        "value" => value = Some(int(x, f)?),
                        other => return Err(bad(format!("version_labels: unknown field '{other}'"))),
                    }
                }
                match (key, value) {
                    (Some(k), Some(v)) => {
                        m.labels.insert(k, v);
                    }
                    _ => return Err(bad("version_labels needs a key and a value".into())),
                }
            }
            "logging_config" => log::warn!("model config: logging_config is ignored"),
            other => return Err(bad(format!("config: unknown field '{other}'"))),
        }
    }
    if m.name.is_empty() {
        return Err(bad("a model config has no name".into()));
    }
    if !has_base {
        return Err(bad(format!("model '{}' has no base_path", m.name)));
    }
    Ok(m)
}

/// Parses a text-format `ModelServerConfig` (`model_config_list { config { name: "m"
/// base_path: "/models/m" model_platform: "tensorflow" model_version_policy { ... }
/// version_labels { key: "stable" value: 1 } } }`) into its models.
pub fn parse_model_config(text: &str) -> Result<Vec<ModelConfig>, ServeError> {
    let mut p = Parser { s: text.as_bytes(), i: 0, seen: std::cell::Cell::new((0, 1)) };
    let top = p.fields(None, 0)?;
    let mut models = Vec::new();
    for (name, v) in &top {
        match name.as_str() {
            "model_config_list" => {
                for (f, c) in message(v, name)? {
                    if f != "config" {
                        return Err(bad(format!("model_config_list: unknown field '{f}'")));
                    }
                    models.push(model(message(c, f)?)?);
                }
            }
            "custom_model_config" => return Err(bad("custom_model_config is not supported".into())),
            other => return Err(bad(format!("ModelServerConfig: unknown field '{other}'"))),
        }
    }
    distinct(models)
}

/// `models`, or an error naming a model configured twice.
fn distinct(models: Vec<ModelConfig>) -> Result<Vec<ModelConfig>, ServeError> {
    let mut names = std::collections::BTreeSet::new();
    for m in &models {
        if !names.insert(m.name.as_str()) {
            return Err(bad(format!("model '{}' is configured twice", m.name)));
        }
    }
    Ok(models)
}

/// The models of a `ModelServerConfig` message (`ModelService.HandleReloadConfigRequest`),
/// checked as [`parse_model_config`] checks a file; `None` when it holds no
/// `model_config_list`.
pub fn models_of_proto(
    config: &ferroflow::proto::serving::ModelServerConfig,
) -> Option<Result<Vec<ModelConfig>, ServeError>> {
    use ferroflow::proto::serving::file_system_storage_path_source_config::servable_version_policy::PolicyChoice;
    use ferroflow::proto::serving::model_server_config::Config;
    let Some(Config::ModelConfigList(list)) = &config.config else { return None };
    let model = |c: &ferroflow::proto::serving::ModelConfig| {
        if c.name.is_empty() {
            return Err(bad("a model config has no name".into()));
        }
        if c.base_path.is_empty() {
            return Err(bad(format!("model '{}' has no base_path", c.name)));
        }
        if !c.model_platform.is_empty() && c.model_platform != "tensorflow" {
            return Err(bad(format!(
                "model '{}': model_platform '{}' is not served (only 'tensorflow')",
                c.name, c.model_platform
            )));
        }
        let policy = match c.model_version_policy.as_ref().and_then(|p| p.policy_choice.as_ref()) {
            // num_versions 0 is the field unset: the default, 1.
            Some(PolicyChoice::Latest(l)) => VersionPolicy::Latest(l.num_versions.max(1) as usize),
            Some(PolicyChoice::All(_)) => VersionPolicy::All,
            Some(PolicyChoice::Specific(s)) if s.versions.is_empty() => {
                return Err(bad(format!("model '{}': specific: no versions", c.name)))
            }
            Some(PolicyChoice::Specific(s)) => VersionPolicy::Specific(s.versions.clone()),
            None => VersionPolicy::Latest(1),
        };
        let mut m = ModelConfig::new(&c.name, &c.base_path).with_policy(policy);
        m.labels = c.version_labels.iter().map(|(k, v)| (k.clone(), *v)).collect();
        Ok(m)
    };
    Some(list.config.iter().map(model).collect::<Result<Vec<_>, _>>().and_then(distinct))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_reference_config() {
        let text = r#"
            model_config_list { config {
              name: "m" base_path: "/models/m" model_platform: "tensorflow"
              model_version_policy { specific { versions: 1 versions: 2 } }  # comment
              version_labels { key: "stable" value: 1 }
              version_labels { key: "canary" value: 2 }
            }
            config: { name: 'n', base_path: "/models/n" model_version_policy { latest { num_versions: 2 } } }
            config < name: "o" base_path: "/o" model_version_policy { all {} } > }
        "#;
        let models = parse_model_config(text).unwrap();
        assert_eq!(models.len(), 3);
        assert_eq!(models[0].policy, VersionPolicy::Specific(vec![1, 2]));
        assert_eq!(models[0].labels["stable"], 1);
        assert_eq!(models[0].labels["canary"], 2);
        assert_eq!(models[1].policy, VersionPolicy::Latest(2));
        assert_eq!(models[1].base_path, PathBuf::from("/models/n"));
        assert_eq!(models[2].policy, VersionPolicy::All);
    }

    #[test]
    fn refuses_bad_configs() {
        for text in [
            "model_config_list { config { name: \"m\" } }",
            "model_config_list { config { base_path: \"/m\" } }",
            "model_config_list { config { name: \"m\" base_path: \"/m\" model_platform: \"onnx\" } }",
            "model_config_list { config { name: \"m\" base_path: \"/m\" model_version_policy { latest { num_versions: 0 } } } }",
            "model_config_list { config { name: \"m\" base_path: \"/m\" bogus: 1 } }",
            "model_config_list { config { name: \"m\" base_path: \"/m\"",
            "model_config_list { config { name: \"m",
        ] {
            assert!(parse_model_config(text).is_err(), "{text}");
        }
    }
}
