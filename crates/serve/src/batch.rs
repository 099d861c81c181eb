//! Request batching, as TensorFlow Serving's `--enable_batching` (its `BasicBatchScheduler`
//! under a `BatchingSession`).
//!
//! Each [`Batcher::submit`] call is one *task*: a set of input tensors that share their 0th
//! dimension (the task's size, in rows). Tasks go to a queue chosen by the caller's key (one
//! per model version, signature and input/output names). A queue appends tasks to its open
//! batch while they fit; the batch closes when it is full or when its first task has waited
//! `batch_timeout_micros`, and one of the batch threads (shared by all queues, taken round
//! robin) concatenates the tasks' inputs, runs the model once and hands each task its rows of
//! every output. The caller's thread blocks until its answer is back.
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ferroflow::tensor::{DType, Tensor};

use crate::ApiError;

/// TensorFlow Serving's `BatchingParameters` (the `--batching_parameters_file`), with its
/// defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchingParameters {
    /// The largest task accepted, in rows (TF Serving's `input_batch_size_limit`), and without
    /// large batch splitting also the largest batch. Default 1000.
    pub max_batch_size: usize,
    /// How long a batch that is not full waits for more tasks, counted from its first task,
    /// in microseconds; 0 runs it as soon as a batch thread is free. Default 0.
    pub batch_timeout_micros: u64,
    /// The most batches a queue holds (the open one included, the running ones not); a task
    /// that would need more is refused with 503. Default 10.
    pub max_enqueued_batches: usize,
    /// Batch threads, shared by all queues. Default: the machine's parallelism.
    pub num_batch_threads: usize,
    /// Sizes batches are padded up to (empty: no padding). Strictly increasing; the last must
    /// equal the largest batch ([`BatchingParameters::execution_batch_size`]).
    pub allowed_batch_sizes: Vec<usize>,
    /// Pads each input in its non-batch dimensions to the batch's largest, instead of
    /// refusing tasks whose shapes differ. Default false.
    pub pad_variable_length_inputs: bool,
    /// Splits a task that does not fit the open batch into pieces that fill it and the next
    /// ones (of at most `max_execution_batch_size` rows each). Default false.
    pub enable_large_batch_splitting: bool,
    /// The largest batch when `enable_large_batch_splitting` is set (at most
    /// `max_batch_size`); ignored otherwise. Default: `max_batch_size`.
    pub max_execution_batch_size: usize,
}

impl Default for BatchingParameters {
    fn default() -> BatchingParameters {
        BatchingParameters {
            max_batch_size: 1000,
            batch_timeout_micros: 0,
            max_enqueued_batches: 10,
            num_batch_threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            allowed_batch_sizes: Vec::new(),
            pad_variable_length_inputs: false,
            enable_large_batch_splitting: false,
            max_execution_batch_size: 1000,
        }
    }
}

impl BatchingParameters {
    /// The most rows one batch (one run of the model) holds: `max_execution_batch_size` with
    /// large batch splitting, `max_batch_size` without.
    pub fn execution_batch_size(&self) -> usize {
        if self.enable_large_batch_splitting {
            self.max_execution_batch_size
        } else {
            self.max_batch_size
        }
    }

    /// Checks the parameters as TensorFlow Serving does when it creates the scheduler; the
    /// error says what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_batch_size == 0 {
            return Err("max_batch_size must be positive; was 0".into());
        }
        if self.max_enqueued_batches == 0 {
            return Err("max_enqueued_batches must be positive; was 0".into());
        }
        if self.num_batch_threads == 0 {
            return Err("num_batch_threads must be positive; was 0".into());
        }
        if self.enable_large_batch_splitting {
            if self.max_execution_batch_size == 0 {
                return Err("max_execution_batch_size must be positive; was 0".into());
            }
            if self.max_execution_batch_size > self.max_batch_size {
                return Err(format!(
                    "when enable_large_batch_splitting is true, max_batch_size ({}) must be greater than or \
                     equal to max_execution_batch_size ({})",
                    self.max_batch_size, self.max_execution_batch_size
                ));
            }
        }
        let sizes = &self.allowed_batch_sizes;
        if let Some(&last) = sizes.last() {
            if sizes[0] == 0 {
                return Err("allowed_batch_sizes entries must be positive".into());
            }
            if sizes.windows(2).any(|w| w[1] <= w[0]) {
                return Err(format!("allowed_batch_sizes entries must be monotonically increasing; got {sizes:?}"));
            }
            let limit = self.execution_batch_size();
            if last != limit {
                let what =
                    if self.enable_large_batch_splitting { "max_execution_batch_size" } else { "max_batch_size" };
                return Err(format!(
                    "last entry in allowed_batch_sizes must match {what}; last entry was {last}; expected {limit}"
                ));
            }
        }
        Ok(())
    }

    /// The parameters with every invalid value replaced by a usable one (for
    /// [`Batcher::new`], which cannot fail).
    fn sanitized(mut self) -> BatchingParameters {
        if let Err(e) = self.validate() {
            log::error!("invalid batching parameters ({e}); using the nearest valid ones");
            self.max_batch_size = self.max_batch_size.max(1);
            self.max_enqueued_batches = self.max_enqueued_batches.max(1);
            self.num_batch_threads = self.num_batch_threads.max(1);
            self.max_execution_batch_size = self.max_execution_batch_size.clamp(1, self.max_batch_size);
            if self.validate().is_err() {
                self.allowed_batch_sizes.clear();
            }
        }
        self
    }
}

/// How a `BatchingParameters` field is written in text format.
#[derive(Clone, Copy, PartialEq)]
enum FieldKind {
    /// A `google.protobuf.Int64Value`: `name { value: 8 }`.
    WrappedInt,
    /// A `google.protobuf.BoolValue`.
    WrappedBool,
    /// A `google.protobuf.StringValue`.
    WrappedString,
    /// `repeated int64`: `name: 8` (repeatable) or `name: [8, 16]`.
    RepeatedInt,
    /// A plain `bool`: `name: true`.
    Bool,
}

fn field_kind(name: &str) -> Option<FieldKind> {
    Some(match name {
        "max_batch_size"
        | "batch_timeout_micros"
        | "max_enqueued_batches"
        | "num_batch_threads"
        | "max_execution_batch_size" => FieldKind::WrappedInt,
        "enable_large_batch_splitting" => FieldKind::WrappedBool,
        "thread_pool_name" | "batch_padding_policy" => FieldKind::WrappedString,
        "allowed_batch_sizes" => FieldKind::RepeatedInt,
        "pad_variable_length_inputs" => FieldKind::Bool,
        _ => return None,
    })
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Number(String),
    Str(String),
    Sym(char),
}

impl std::fmt::Display for Tok {
    /// The token as an error quotes it: a long one cut to its first 60 characters (a string's
    /// escaped, so a string of control characters would grow tenfold).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cut = |s: &str| match s.char_indices().nth(60) {
            Some((i, _)) => (s[..i].to_string(), "..."),
            None => (s.to_string(), ""),
        };
        match self {
            Tok::Ident(s) | Tok::Number(s) => {
                let (s, more) = cut(s);
                write!(f, "`{s}`{more}")
            }
            Tok::Str(s) => {
                let (s, more) = cut(s);
                write!(f, "{s:?}{more}")
            }
            Tok::Sym(c) => write!(f, "`{c}`"),
        }
    }
}

/// Splits protobuf text format into tokens, each with its line (1-based).
fn tokenize(text: &str) -> Result<Vec<(Tok, usize)>, String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    let mut line = 1;
    while let Some(&c) = chars.peek() {
        match c {
            '\n' => {
                line += 1;
                chars.next();
            }
            c if c.is_whitespace() => {
                chars.next();
            }
            '#' => {
                while chars.peek().is_some_and(|&c| c != '\n') {
                    chars.next();
                }
            }
            '{' | '}' | '<' | '>' | '[' | ']' | ':' | ',' | ';' => {
                chars.next();
                out.push((Tok::Sym(c), line));
            }
            '"' | '\'' => {
                chars.next();
                let start = line;
                let mut s = String::new();
                loop {
                    match chars.next() {
                        None | Some('\n') => return Err(format!("line {start}: unterminated string")),
                        Some(q) if q == c => break,
                        Some('\\') => match chars.next() {
                            Some('n') => s.push('\n'),
                            Some('t') => s.push('\t'),
                            Some('r') => s.push('\r'),
                            Some(e) => s.push(e),
                            None => return Err(format!("line {start}: unterminated string")),
                        },
                        Some(ch) => s.push(ch),
                    }
                }
                out.push((Tok::Str(s), start));
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let mut s = String::new();
                while let Some(&c) = chars.peek().filter(|c| c.is_ascii_alphanumeric() || **c == '_') {
                    s.push(c);
                    chars.next();
                }
                out.push((Tok::Ident(s), line));
            }
            c if c.is_ascii_digit() || c == '-' || c == '+' || c == '.' => {
                let mut s = String::new();
                s.push(c);
                chars.next();
                while let Some(&c) = chars.peek().filter(|c| c.is_ascii_alphanumeric() || **c == '.' || **c == '_') {
                    s.push(c);
                    chars.next();
                }
                out.push((Tok::Number(s), line));
            }
            c => return Err(format!("line {line}: unexpected character {c:?}")),
        }
    }
    Ok(out)
}

/// A value of a scalar field.
enum Scalar {
    Int(i128),
    Bool(bool),
    Str(String),
}

struct TextParser {
    toks: Vec<(Tok, usize)>,
    pos: usize,
}

impl TextParser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|(t, _)| t)
    }

    /// The line of the next token (or of the last one, at the end).
    fn line(&self) -> usize {
        self.toks.get(self.pos).or(self.toks.last()).map_or(1, |(_, l)| *l)
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).map(|(t, _)| t.clone());
        self.pos += 1;
        t
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(&Tok::Sym(c)) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char, field: &str) -> Result<(), String> {
        let line = self.line();
        match self.next() {
            Some(Tok::Sym(s)) if s == c => Ok(()),
            Some(t) => Err(format!("line {line}: expected `{c}` in field `{field}`, found {t}")),
            None => Err(format!("line {line}: expected `{c}` in field `{field}`, found the end of the file")),
        }
    }

    /// Skips an optional `,` or `;` after a field.
    fn separator(&mut self) {
        if !self.eat(',') {
            self.eat(';');
        }
    }

    /// A scalar of `kind` for `field`: an integer (decimal, 0x hex or 0 octal), a bool or
    /// one or more adjacent strings.
    fn scalar(&mut self, field: &str, kind: FieldKind) -> Result<Scalar, String> {
        let line = self.line();
        let tok = self.next();
        let bad = |what: &str, tok: Option<&Tok>| match tok {
            Some(t) => format!("line {line}: field `{field}` expects {what}, found {t}"),
            None => format!("line {line}: field `{field}` expects {what}, found the end of the file"),
        };
        match kind {
            FieldKind::WrappedInt | FieldKind::RepeatedInt => match &tok {
                Some(Tok::Number(s)) => parse_int(s).map(Scalar::Int).ok_or_else(|| bad("an integer", tok.as_ref())),
                _ => Err(bad("an integer", tok.as_ref())),
            },
            FieldKind::WrappedBool | FieldKind::Bool => {
                let value = match &tok {
                    Some(Tok::Ident(s)) => match s.as_str() {
                        "true" | "True" | "t" => Some(true),
                        "false" | "False" | "f" => Some(false),
                        _ => None,
                    },
                    Some(Tok::Number(s)) if s == "1" => Some(true),
                    Some(Tok::Number(s)) if s == "0" => Some(false),
                    _ => None,
                };
                value.map(Scalar::Bool).ok_or_else(|| bad("true or false", tok.as_ref()))
            }
            FieldKind::WrappedString => match tok {
                Some(Tok::Str(mut s)) => {
                    while let Some(Tok::Str(more)) = self.peek() {
                        s.push_str(more);
                        self.pos += 1;
                    }
                    Ok(Scalar::Str(s))
                }
                tok => Err(bad("a string", tok.as_ref())),
            },
        }
    }

    /// The body of a wrapper message after its `{` or `<`: `value: X` at most once, then the
    /// closing bracket. An empty body is the type's default.
    fn wrapper(&mut self, field: &str, kind: FieldKind, close: char) -> Result<Scalar, String> {
        let mut value = None;
        loop {
            let line = self.line();
            match self.next() {
                Some(Tok::Sym(c)) if c == close => break,
                Some(Tok::Ident(name)) if name == "value" => {
                    if value.is_some() {
                        return Err(format!("line {line}: `value` of field `{field}` is specified more than once"));
                    }
                    self.expect(':', field)?;
                    value = Some(self.scalar(field, kind)?);
                    self.separator();
                }
                Some(Tok::Ident(name)) => {
                    return Err(format!(
                        "line {line}: unknown field `{name}` inside `{field}` (only `value` is allowed)"
                    ))
                }
                Some(t) => {
                    return Err(format!(
                        "line {line}: expected `value: ...` or `{close}` in field `{field}`, found {t}"
                    ))
                }
                None => return Err(format!("line {line}: field `{field}` is not closed with `{close}`")),
            }
        }
        Ok(value.unwrap_or(match kind {
            FieldKind::WrappedBool | FieldKind::Bool => Scalar::Bool(false),
            FieldKind::WrappedString => Scalar::Str(String::new()),
            _ => Scalar::Int(0),
        }))
    }
}

fn parse_int(s: &str) -> Option<i128> {
    let (neg, digits) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if digits.is_empty() || digits.starts_with(['+', '-']) {
        return None;
    }
    let value = if let Some(hex) = digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
        i128::from_str_radix(hex, 16).ok()?
    } else if digits.len() > 1 && digits.starts_with('0') {
        i128::from_str_radix(&digits[1..], 8).ok()?
    } else {
        digits.parse::<i128>().ok()?
    };
    Some(if neg { -value } else { value })
}

/// Parses the text-format `BatchingParameters` of `--batching_parameters_file`, e.g.
///
/// ```text
/// max_batch_size { value: 32 }
/// batch_timeout_micros { value: 1000 }
/// num_batch_threads { value: 4 }
/// allowed_batch_sizes: [8, 16, 32]
/// ```
///
/// Fields left out keep their defaults; `max_execution_batch_size` defaults to
/// `max_batch_size`. `thread_pool_name` is accepted and ignored, as is `batch_padding_policy`
/// when it is `PAD_UP` (the only policy implemented). Unknown fields, malformed values and
/// invalid combinations ([`BatchingParameters::validate`]) are errors naming the field and
/// line.
pub fn parse_batching_parameters(text: &str) -> Result<BatchingParameters, String> {
    let mut p = TextParser { toks: tokenize(text)?, pos: 0 };
    let mut params = BatchingParameters::default();
    let mut execution_size_set = false;
    let mut seen: Vec<String> = Vec::new();
    while p.peek().is_some() {
        let line = p.line();
        let name = match p.next() {
            Some(Tok::Ident(name)) => name,
            Some(t) => return Err(format!("line {line}: expected a field name, found {t}")),
            None => break,
        };
        let kind =
            field_kind(&name).ok_or_else(|| format!("line {line}: unknown field `{name}` in BatchingParameters"))?;
        if kind != FieldKind::RepeatedInt {
            if seen.contains(&name) {
                return Err(format!("line {line}: field `{name}` is specified more than once"));
            }
            seen.push(name.clone());
        }
        let colon = p.eat(':');
        let value = match kind {
            FieldKind::WrappedInt | FieldKind::WrappedBool | FieldKind::WrappedString => {
                let close = if p.eat('{') {
                    '}'
                } else if p.eat('<') {
                    '>'
                } else {
                    return Err(format!(
                        "line {line}: field `{name}` is a wrapper message: write it as `{name} {{ value: ... }}`"
                    ));
                };
                p.wrapper(&name, kind, close)?
            }
            FieldKind::RepeatedInt | FieldKind::Bool => {
                if !colon {
                    let example = if kind == FieldKind::Bool { "true" } else { "8" };
                    return Err(format!(
                        "line {line}: field `{name}` is a plain value: write it as `{name}: {example}`"
                    ));
                }
                if kind == FieldKind::RepeatedInt && p.eat('[') {
                    if !p.eat(']') {
                        loop {
                            let line = p.line();
                            match p.scalar(&name, kind)? {
                                Scalar::Int(v) => params.allowed_batch_sizes.push(to_usize(&name, line, v)?),
                                _ => unreachable!("an integer field yields integers"),
                            }
                            if p.eat(']') {
                                break;
                            }
                            p.expect(',', &name)?;
                        }
                    }
                    p.separator();
                    continue;
                }
                p.scalar(&name, kind)?
            }
        };
        p.separator();
        match (name.as_str(), value) {
            ("max_batch_size", Scalar::Int(v)) => params.max_batch_size = to_usize(&name, line, v)?,
            ("batch_timeout_micros", Scalar::Int(v)) => {
                params.batch_timeout_micros = u64::try_from(v)
                    .map_err(|_| format!("line {line}: field `{name}` must be non-negative; was {v}"))?
            }
            ("max_enqueued_batches", Scalar::Int(v)) => params.max_enqueued_batches = to_usize(&name, line, v)?,
            ("num_batch_threads", Scalar::Int(v)) => params.num_batch_threads = to_usize(&name, line, v)?,
            ("max_execution_batch_size", Scalar::Int(v)) => {
                params.max_execution_batch_size = to_usize(&name, line, v)?;
                execution_size_set = true;
            }
            ("allowed_batch_sizes", Scalar::Int(v)) => params.allowed_batch_sizes.push(to_usize(&name, line, v)?),
            ("enable_large_batch_splitting", Scalar::Bool(b)) => params.enable_large_batch_splitting = b,
            ("pad_variable_length_inputs", Scalar::Bool(b)) => params.pad_variable_length_inputs = b,
            ("thread_pool_name", Scalar::Str(_)) => {}
            ("batch_padding_policy", Scalar::Str(s)) => {
                if !s.is_empty() && s != "PAD_UP" {
                    return Err(format!(
                        "line {line}: batch_padding_policy {s:?} is not supported (only \"PAD_UP\" is)"
                    ));
                }
            }
            _ => unreachable!("field_kind and the value types agree"),
        }
    }
    if !execution_size_set {
        params.max_execution_batch_size = params.max_batch_size;
    }
    params.validate()?;
    Ok(params)
}

fn to_usize(field: &str, line: usize, v: i128) -> Result<usize, String> {
    usize::try_from(v).map_err(|_| format!("line {line}: field `{field}` must be a non-negative integer; was {v}"))
}

/// The function a queue runs on each batch: the merged inputs in, the batch's outputs (each
/// with the batch's rows in dimension 0) out.
pub type RunFn = Arc<dyn Fn(Vec<(String, Tensor)>) -> Result<Vec<(String, Tensor)>, ApiError> + Send + Sync>;

/// Counters of a [`Batcher`] since it started, for logs and metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BatchStats {
    /// Batches run (calls of a queue's run function, failed ones included).
    pub batches: u64,
    /// Tasks in those batches; a task split over several batches counts once per piece.
    pub tasks: u64,
    /// Rows of the tasks in those batches (padding not included).
    pub rows: u64,
    /// Rows added to reach an allowed batch size.
    pub padding_rows: u64,
}

/// Batches concurrent requests: one queue per key, `num_batch_threads` threads shared by all
/// queues. See the [module documentation](self).
pub struct Batcher {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

struct Shared {
    params: BatchingParameters,
    /// The most rows in one batch.
    execution_size: usize,
    timeout: Duration,
    state: Mutex<State>,
    /// Wakes batch threads: a batch may have become ready, or a new deadline begun.
    work: Condvar,
    batches: AtomicU64,
    tasks: AtomicU64,
    rows: AtomicU64,
    padding_rows: AtomicU64,
}

struct State {
    queues: Vec<Queue>,
    /// The queue the next round-robin scan starts at.
    next: usize,
    shutdown: bool,
}

struct Queue {
    key: String,
    run: RunFn,
    /// Closed batches waiting for a thread, then the open one (the back).
    batches: VecDeque<Batch>,
    /// Batches of this queue now running.
    running: usize,
}

struct Batch {
    pieces: Vec<Piece>,
    /// Rows in the batch.
    size: usize,
    /// When its first task arrived.
    opened: Instant,
}

/// A task, or one piece of a task split over several batches: rows `start..start + len` of
/// the task's inputs.
struct Piece {
    inputs: Arc<Vec<(String, Tensor)>>,
    start: usize,
    len: usize,
    /// The piece is the whole task.
    whole: bool,
    index: usize,
    task: Arc<TaskState>,
    answered: bool,
}

/// Where a task's pieces leave their outputs, and its caller waits.
struct TaskState {
    inner: Mutex<TaskInner>,
    done: Condvar,
}

struct TaskInner {
    pending: usize,
    parts: Vec<Option<Vec<(String, Tensor)>>>,
    error: Option<ApiError>,
}

/// Locks `m`, ignoring poisoning (no lock is held while user code runs; the state stays
/// consistent).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl TaskState {
    fn record(&self, index: usize, result: Result<Vec<(String, Tensor)>, ApiError>) {
        let mut inner = lock(&self.inner);
        match result {
            Ok(outputs) => inner.parts[index] = Some(outputs),
            Err(e) => {
                if inner.error.is_none() {
                    inner.error = Some(e);
                }
            }
        }
        inner.pending -= 1;
        if inner.pending == 0 {
            self.done.notify_all();
        }
    }

    /// Waits for every piece; the outputs of each piece, in order.
    fn wait(&self) -> Result<Vec<Vec<(String, Tensor)>>, ApiError> {
        let mut inner = lock(&self.inner);
        while inner.pending > 0 {
            inner = self.done.wait(inner).unwrap_or_else(|e| e.into_inner());
        }
        if let Some(e) = inner.error.take() {
            return Err(e);
        }
        inner
            .parts
            .iter_mut()
            .map(|p| p.take().ok_or_else(|| ApiError::internal("a batch lost a task's outputs")))
            .collect()
    }
}

impl Piece {
    fn finish(mut self, result: Result<Vec<(String, Tensor)>, ApiError>) {
        self.answered = true;
        self.task.record(self.index, result);
    }
}

impl Drop for Piece {
    /// A piece dropped unanswered (a batch lost to a bug) still answers its caller.
    fn drop(&mut self) {
        if !self.answered {
            self.task.record(
                self.index,
                Err(ApiError::internal("the batch holding this request was dropped before it ran")),
            );
        }
    }
}

impl Queue {
    /// Takes the batch to run next, if one is ready: a closed batch, or the open one when it
    /// is full, its timeout has passed or the batcher is shutting down.
    fn take_ready(&mut self, now: Instant, shared: &Shared, shutdown: bool) -> Option<Batch> {
        let ready = self.batches.len() >= 2
            || self.batches.front().is_some_and(|b| {
                shutdown
                    || b.size >= shared.execution_size
                    || b.opened.checked_add(shared.timeout).is_none_or(|deadline| now >= deadline)
            });
        if ready {
            self.running += 1;
            self.batches.pop_front()
        } else {
            None
        }
    }

    /// When the open batch's timeout runs out.
    fn deadline(&self, timeout: Duration) -> Option<Instant> {
        self.batches.front().and_then(|b| b.opened.checked_add(timeout))
    }
}

impl Batcher {
    /// Starts `params.num_batch_threads` batch threads shared by all queues. Invalid
    /// parameters (see [`BatchingParameters::validate`]) are logged and replaced by the
    /// nearest valid ones.
    pub fn new(params: BatchingParameters) -> Batcher {
        let params = params.sanitized();
        let shared = Arc::new(Shared {
            execution_size: params.execution_batch_size(),
            timeout: Duration::from_micros(params.batch_timeout_micros),
            state: Mutex::new(State { queues: Vec::new(), next: 0, shutdown: false }),
            work: Condvar::new(),
            batches: AtomicU64::new(0),
            tasks: AtomicU64::new(0),
            rows: AtomicU64::new(0),
            padding_rows: AtomicU64::new(0),
            params,
        });
        let threads = (0..shared.params.num_batch_threads)
            .map(|i| {
                let shared = Arc::clone(&shared);
                std::thread::Builder::new()
                    .name(format!("batch-{i}"))
                    .spawn(move || batch_thread(&shared))
                    .expect("spawning a batch thread")
            })
            .collect();
        Batcher { shared, threads }
    }

    /// Submits one task (its inputs, keyed by input name) to the queue `key`, created on
    /// first use with `run` (later calls' `run` is not used while the queue exists; a queue
    /// with nothing queued or running is dropped, with its `run`). Blocks until the task's
    /// batch has run and returns the task's rows of each output.
    ///
    /// Errors: 400 for inputs that cannot be batched or a task larger than `max_batch_size`;
    /// 503 when the queue is full; for the batch: 400 for inputs whose shapes do not agree,
    /// 500 for outputs that cannot be split back, a panic in `run` and `run`'s own errors.
    pub fn submit(
        &self,
        key: &str,
        run: &RunFn,
        inputs: Vec<(String, Tensor)>,
    ) -> Result<Vec<(String, Tensor)>, ApiError> {
        let shared = &*self.shared;
        let size = task_size(&inputs)?;
        if size > shared.params.max_batch_size {
            return Err(ApiError::invalid(format!(
                "Task size {size} is larger than maximum input batch size {}",
                shared.params.max_batch_size
            )));
        }
        let inputs = Arc::new(inputs);
        let task;
        {
            let mut state = lock(&shared.state);
            let index = match state.queues.iter().position(|q| q.key == key) {
                Some(i) => i,
                None => {
                    state.queues.push(Queue {
                        key: key.to_string(),
                        run: Arc::clone(run),
                        batches: VecDeque::new(),
                        running: 0,
                    });
                    state.queues.len() - 1
                }
            };
            let queue = &mut state.queues[index];
            let sizes = match piece_sizes(queue, size, shared) {
                Ok(sizes) => sizes,
                Err(e) => {
                    if queue.batches.is_empty() && queue.running == 0 {
                        let removed = state.queues.remove(index);
                        if state.next > index {
                            state.next -= 1;
                        }
                        drop(state);
                        drop(removed);
                    }
                    return Err(e);
                }
            };
            task = Arc::new(TaskState {
                inner: Mutex::new(TaskInner { pending: sizes.len(), parts: vec![None; sizes.len()], error: None }),
                done: Condvar::new(),
            });
            let now = Instant::now();
            let mut start = 0;
            for (i, &len) in sizes.iter().enumerate() {
                if queue.batches.back().is_none_or(|b| b.size + len > shared.execution_size) {
                    queue.batches.push_back(Batch { pieces: Vec::new(), size: 0, opened: now });
                }
                let batch = queue.batches.back_mut().expect("a batch was just ensured");
                batch.pieces.push(Piece {
                    inputs: Arc::clone(&inputs),
                    start,
                    len,
                    whole: sizes.len() == 1,
                    index: i,
                    task: Arc::clone(&task),
                    answered: false,
                });
                batch.size += len;
                start += len;
            }
        }
        drop(inputs);
        shared.work.notify_one();
        let mut parts = task.wait()?;
        if parts.len() == 1 {
            return Ok(parts.pop().expect("one part"));
        }
        join_parts(parts)
    }

    /// Counters since the batcher started.
    pub fn stats(&self) -> BatchStats {
        let s = &self.shared;
        BatchStats {
            batches: s.batches.load(Ordering::Relaxed),
            tasks: s.tasks.load(Ordering::Relaxed),
            rows: s.rows.load(Ordering::Relaxed),
            padding_rows: s.padding_rows.load(Ordering::Relaxed),
        }
    }
}

impl Drop for Batcher {
    /// Runs the batches still queued, then stops and joins the batch threads.
    fn drop(&mut self) {
        lock(&self.shared.state).shutdown = true;
        self.shared.work.notify_all();
        for thread in self.threads.drain(..) {
            if thread.join().is_err() {
                log::error!("a batch thread panicked");
            }
        }
    }
}

/// The size of a task: the 0th dimension its inputs share.
fn task_size(inputs: &[(String, Tensor)]) -> Result<usize, ApiError> {
    let Some((first_name, first)) = inputs.first() else {
        return Err(ApiError::invalid("Batching Run() must have at least one input tensor"));
    };
    let mut size = None;
    for (name, t) in inputs {
        if t.rank() == 0 {
            return Err(ApiError::invalid(format!(
                "Batching Run() input tensors must have at least one dimension; input '{name}' is a scalar"
            )));
        }
        if t.dtype().size().is_none() && t.dtype() != DType::String {
            return Err(ApiError::invalid(format!(
                "input '{name}' has dtype {}, which cannot be batched",
                t.dtype().name()
            )));
        }
        match size {
            None => size = Some(t.dims()[0]),
            Some(s) if s != t.dims()[0] => {
                return Err(ApiError::invalid(format!(
                    "Batching Run() input tensors must have equal 0th-dimension size; input '{first_name}' has shape \
                     {:?} and input '{name}' has shape {:?}",
                    first.dims(),
                    t.dims()
                )))
            }
            Some(_) => {}
        }
    }
    Ok(size.unwrap_or(0))
}

/// The pieces a task of `size` rows goes into `queue` as (one unless it is split), or 503
/// when the queue has no room for it.
fn piece_sizes(queue: &Queue, size: usize, shared: &Shared) -> Result<Vec<usize>, ApiError> {
    let limit = shared.execution_size;
    let max_batches = shared.params.max_enqueued_batches;
    let open = queue.batches.back().map_or(0, |b| b.size);
    let room = limit.saturating_sub(open);
    if shared.params.enable_large_batch_splitting {
        // An absent open batch counts as an empty one, as in TF Serving's queue.
        let batches = queue.batches.len().max(1);
        let capacity = max_batches.saturating_sub(batches).saturating_mul(limit).saturating_add(room);
        if size > capacity {
            return Err(ApiError::new(
                503,
                format!(
                    "The batch scheduling queue to which this task was submitted is full; task size is {size} but \
                     scheduling capacity is only {capacity} (num_enqueued_batches={batches}, \
                     max_enqueued_batches={max_batches}, open_batch_size={open}, max_execution_batch_size={limit})"
                ),
            ));
        }
        if size <= room {
            return Ok(vec![size]);
        }
        let mut sizes = Vec::new();
        if room > 0 {
            sizes.push(room);
        }
        let mut left = size - room;
        while left > 0 {
            sizes.push(left.min(limit));
            left -= left.min(limit);
        }
        return Ok(sizes);
    }
    if !queue.batches.is_empty() && open + size > limit && queue.batches.len() >= max_batches {
        return Err(ApiError::new(
            503,
            format!(
                "The batch scheduling queue to which this task was submitted is full; currently {} batches enqueued \
                 and max_enqueued_batches is {max_batches}",
                queue.batches.len()
            ),
        ));
    }
    Ok(vec![size])
}

/// A batch thread: runs batches until the batcher shuts down. Model runs are already guarded;
/// should the scheduling itself panic, the thread logs it and carries on.
fn batch_thread(shared: &Shared) {
    while let Err(payload) = catch_unwind(AssertUnwindSafe(|| batch_loop(shared))) {
        log::error!("a batch thread panicked ({}); restarting it", panic_message(&*payload));
    }
}

fn batch_loop(shared: &Shared) {
    let mut state = lock(&shared.state);
    loop {
        let now = Instant::now();
        let count = state.queues.len();
        let mut taken = None;
        for k in 0..count {
            let i = (state.next + k) % count;
            let shutdown = state.shutdown;
            if let Some(batch) = state.queues[i].take_ready(now, shared, shutdown) {
                state.next = (i + 1) % count;
                taken = Some((state.queues[i].key.clone(), Arc::clone(&state.queues[i].run), batch));
                break;
            }
        }
        if let Some((key, run, batch)) = taken {
            if state.queues.iter().any(|q| !q.batches.is_empty()) {
                // More work, or a new deadline to watch: pass it on to an idle thread.
                shared.work.notify_one();
            }
            drop(state);
            shared.process(&run, batch);
            drop(run);
            state = lock(&shared.state);
            if let Some(i) = state.queues.iter().position(|q| q.key == key) {
                let queue = &mut state.queues[i];
                queue.running = queue.running.saturating_sub(1);
                if queue.batches.is_empty() && queue.running == 0 {
                    let removed = state.queues.remove(i);
                    if state.next > i {
                        state.next -= 1;
                    }
                    // Dropping the run function may free a model: not under the lock.
                    drop(state);
                    drop(removed);
                    state = lock(&shared.state);
                }
            }
            continue;
        }
        if state.shutdown && state.queues.iter().all(|q| q.batches.is_empty()) {
            return;
        }
        let deadline = state.queues.iter().filter_map(|q| q.deadline(shared.timeout)).min();
        state = match deadline {
            Some(deadline) => {
                shared
                    .work
                    .wait_timeout(state, deadline.saturating_duration_since(now))
                    .unwrap_or_else(|e| e.into_inner())
                    .0
            }
            None => shared.work.wait(state).unwrap_or_else(|e| e.into_inner()),
        };
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

/// The smallest allowed batch size that holds `size` rows (`size` itself without allowed
/// sizes, or for an empty batch, which has no row to pad with).
fn padded_size(allowed: &[usize], size: usize) -> usize {
    if size == 0 {
        return 0;
    }
    allowed.iter().copied().find(|&s| s >= size).unwrap_or(size)
}

impl Shared {
    /// Runs one batch and answers each of its pieces, whatever happens.
    fn process(&self, run: &RunFn, batch: Batch) {
        let Batch { mut pieces, size, .. } = batch;
        let result =
            catch_unwind(AssertUnwindSafe(|| self.run_batch(run, &mut pieces, size))).unwrap_or_else(|payload| {
                let message = panic_message(&*payload);
                log::error!("a batched model run panicked: {message}");
                Err(ApiError::internal(format!("the model run panicked: {message}")))
            });
        match result {
            Ok(outputs) => {
                for (piece, out) in pieces.into_iter().zip(outputs) {
                    piece.finish(Ok(out));
                }
            }
            Err(e) => {
                for piece in pieces {
                    piece.finish(Err(e.clone()));
                }
            }
        }
    }

    /// Merges the pieces' inputs, runs `run` and splits its outputs: each piece's outputs.
    fn run_batch(
        &self,
        run: &RunFn,
        pieces: &mut [Piece],
        size: usize,
    ) -> Result<Vec<Vec<(String, Tensor)>>, ApiError> {
        let padded = padded_size(&self.params.allowed_batch_sizes, size);
        let padding = padded - size;
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.tasks.fetch_add(pieces.len() as u64, Ordering::Relaxed);
        self.rows.fetch_add(size as u64, Ordering::Relaxed);
        self.padding_rows.fetch_add(padding as u64, Ordering::Relaxed);
        log::debug!("running a batch of {} task(s), {size} row(s) + {padding} padding", pieces.len());
        let merged = if pieces.len() == 1 && padding == 0 && pieces[0].whole {
            // One whole task: its tensors as they are.
            let inputs = std::mem::take(&mut pieces[0].inputs);
            Arc::try_unwrap(inputs).unwrap_or_else(|shared| (*shared).clone())
        } else {
            self.merge_inputs(pieces, padding)?
        };
        let outputs = run(merged)?;
        for (name, t) in &outputs {
            if t.rank() == 0 {
                return Err(ApiError::internal(format!("Batched output tensor has 0 dimensions (output '{name}')")));
            }
            if t.dims()[0] != padded {
                return Err(ApiError::internal(format!(
                    "Batched output tensor's 0th dimension does not equal the sum of the 0th dimension sizes of the \
                     input tensors: output '{name}' has shape {:?} for a batch of {padded}",
                    t.dims()
                )));
            }
        }
        if pieces.len() == 1 && padding == 0 {
            return Ok(vec![outputs]);
        }
        let mut start = 0;
        let mut split = Vec::with_capacity(pieces.len());
        for piece in pieces.iter() {
            let rows = outputs
                .iter()
                .map(|(name, t)| {
                    slice_rows(t, start, piece.len)
                        .map(|t| (name.clone(), t))
                        .map_err(|e| ApiError::internal(format!("splitting batched output '{name}': {e}")))
                })
                .collect::<Result<Vec<_>, _>>()?;
            split.push(rows);
            start += piece.len;
        }
        Ok(split)
    }

    /// Concatenates each input over the pieces (padded as configured), in the order of the
    /// first piece's inputs.
    fn merge_inputs(&self, pieces: &[Piece], padding: usize) -> Result<Vec<(String, Tensor)>, ApiError> {
        let first = &pieces[0].inputs;
        let mut merged = Vec::with_capacity(first.len());
        for (name, t0) in first.iter() {
            let mut segments = Vec::with_capacity(pieces.len());
            for piece in pieces {
                if piece.inputs.len() != first.len() {
                    return Err(ApiError::internal("One or more tasks does not conform to batch signature"));
                }
                let t = piece.inputs.iter().find(|(n, _)| n == name).map(|(_, t)| t).ok_or_else(|| {
                    ApiError::internal(format!(
                        "One or more tasks does not conform to batch signature (input '{name}' is missing)"
                    ))
                })?;
                if t.dtype() != t0.dtype() {
                    return Err(ApiError::invalid(format!(
                        "Tensors with name '{name}' from different tasks have different dtypes: {} and {}",
                        t0.dtype().name(),
                        t.dtype().name()
                    )));
                }
                segments.push(Segment { t: t.clone(), start: piece.start, len: piece.len });
            }
            if self.params.pad_variable_length_inputs {
                pad_segments(name, &mut segments)?;
            } else if let Some(s) = segments.iter().find(|s| s.t.dims()[1..] != t0.dims()[1..]) {
                return Err(ApiError::invalid(format!(
                    "Tensors with name '{name}' from different tasks have different shapes and padding is turned off \
                     ({:?} and {:?}). Set pad_variable_length_inputs to true, or ensure that all tensors with the \
                     same name have equal dimensions starting with the first dim.",
                    t0.dims(),
                    s.t.dims()
                )));
            }
            let tensor = concat_rows(&segments, padding)
                .map_err(|e| ApiError::internal(format!("concatenating input '{name}' for the batch: {e}")))?;
            merged.push((name.clone(), tensor));
        }
        Ok(merged)
    }
}

/// Rows `start..start + len` of `t`.
#[derive(Clone)]
struct Segment {
    t: Tensor,
    start: usize,
    len: usize,
}

/// Pads every segment in its non-batch dimensions to the largest among them, with the
/// segment's first element (as TF Serving does).
fn pad_segments(name: &str, segments: &mut [Segment]) -> Result<(), ApiError> {
    let rank = segments[0].t.rank();
    if let Some(s) = segments.iter().find(|s| s.t.rank() != rank) {
        return Err(ApiError::invalid(format!(
            "Tensors with name '{name}' from different tasks have different ranks ({:?} and {:?}), so they cannot \
             be padded to one shape",
            segments[0].t.dims(),
            s.t.dims()
        )));
    }
    let mut max = segments[0].t.dims()[1..].to_vec();
    for s in segments.iter() {
        for (m, &d) in max.iter_mut().zip(&s.t.dims()[1..]) {
            *m = (*m).max(d);
        }
    }
    for s in segments.iter_mut() {
        if s.t.dims()[1..] != max[..] {
            let padded = pad_rows(&s.t, s.start, s.len, &max).map_err(|e| match e {
                PadError::Empty => ApiError::invalid(format!(
                    "Got empty tensor in batch of non-empty tensors (input '{name}' of shape {:?})",
                    s.t.dims()
                )),
                PadError::Tensor(e) => ApiError::internal(format!("padding input '{name}': {e}")),
            })?;
            *s = Segment { t: padded, start: 0, len: s.len };
        }
    }
    Ok(())
}

enum PadError {
    /// The tensor has no element to pad with.
    Empty,
    Tensor(String),
}

/// Rows `start..start + len` of `t`, padded in dimensions 1.. to `inner` with the first
/// element of those rows.
fn pad_rows(t: &Tensor, start: usize, len: usize, inner: &[usize]) -> Result<Tensor, PadError> {
    let in_inner = &t.dims()[1..];
    let in_row: usize = in_inner.iter().product();
    let out_row: usize = inner.iter().product();
    let mut dims = vec![len];
    dims.extend_from_slice(inner);
    if len * out_row == 0 {
        return Tensor::zeros(t.dtype(), &dims).map_err(|e| PadError::Tensor(e.to_string()));
    }
    if len * in_row == 0 {
        return Err(PadError::Empty);
    }
    // Runs of the innermost dimension: (input element offset, output element offset), each
    // `last` elements long.
    let k = in_inner.len();
    let last = in_inner[k - 1];
    let mut out_strides = vec![1usize; k];
    for j in (0..k - 1).rev() {
        out_strides[j] = out_strides[j + 1] * inner[j + 1];
    }
    let runs_per_row = in_row / last;
    let mut runs = Vec::with_capacity(len * runs_per_row);
    for r in 0..len {
        let mut index = vec![0usize; k - 1];
        for q in 0..runs_per_row {
            let dst = r * out_row + index.iter().zip(&out_strides).map(|(i, s)| i * s).sum::<usize>();
            runs.push(((start + r) * in_row + q * last, dst));
            for j in (0..k - 1).rev() {
                index[j] += 1;
                if index[j] < in_inner[j] {
                    break;
                }
                index[j] = 0;
            }
        }
    }
    match t.dtype() {
        DType::String => {
            let src = t.as_strings().map_err(|e| PadError::Tensor(e.to_string()))?;
            let fill = src[start * in_row].clone();
            let mut out = vec![fill; len * out_row];
            for &(from, to) in &runs {
                out[to..to + last].clone_from_slice(&src[from..from + last]);
            }
            Tensor::from_strings(&dims, out).map_err(|e| PadError::Tensor(e.to_string()))
        }
        dtype => {
            let es =
                dtype.size().ok_or_else(|| PadError::Tensor(format!("dtype {} cannot be padded", dtype.name())))?;
            let src = t.as_bytes().map_err(|e| PadError::Tensor(e.to_string()))?;
            let fill = &src[start * in_row * es..(start * in_row + 1) * es];
            Tensor::from_fill(dtype, &dims, |out| {
                for chunk in out.chunks_exact_mut(es) {
                    chunk.copy_from_slice(fill);
                }
                for &(from, to) in &runs {
                    out[to * es..(to + last) * es].copy_from_slice(&src[from * es..(from + last) * es]);
                }
            })
            .map_err(|e| PadError::Tensor(e.to_string()))
        }
    }
}

/// The segments' rows one after another, then `padding` copies of the last non-empty
/// segment's first row. The segments share dtype and non-batch dimensions.
fn concat_rows(segments: &[Segment], padding: usize) -> Result<Tensor, String> {
    let t0 = &segments[0].t;
    let inner = &t0.dims()[1..];
    if let Some(s) = segments.iter().find(|s| &s.t.dims()[1..] != inner || s.t.dtype() != t0.dtype()) {
        return Err(format!(
            "{} {:?} and {} {:?} do not concatenate",
            t0.dtype().name(),
            t0.dims(),
            s.t.dtype().name(),
            s.t.dims()
        ));
    }
    let row: usize = inner.iter().product();
    let rows: usize = segments.iter().map(|s| s.len).sum();
    let source = segments.iter().rev().find(|s| s.len > 0);
    if padding > 0 && source.is_none() {
        return Err("no row to pad the batch with".into());
    }
    let mut dims = vec![rows + padding];
    dims.extend_from_slice(inner);
    if t0.dtype() == DType::String {
        let mut out = Vec::with_capacity((rows + padding) * row);
        for s in segments {
            let strings = s.t.as_strings().map_err(|e| e.to_string())?;
            out.extend_from_slice(&strings[s.start * row..(s.start + s.len) * row]);
        }
        if let Some(s) = source.filter(|_| padding > 0) {
            let strings = s.t.as_strings().map_err(|e| e.to_string())?;
            let first = &strings[s.start * row..(s.start + 1) * row];
            for _ in 0..padding {
                out.extend_from_slice(first);
            }
        }
        return Tensor::from_strings(&dims, out).map_err(|e| e.to_string());
    }
    let es = t0.dtype().size().ok_or_else(|| format!("dtype {} cannot be batched", t0.dtype().name()))?;
    let rb = row * es;
    let mut parts: Vec<&[u8]> = Vec::with_capacity(segments.len() + padding);
    for s in segments {
        let bytes = s.t.as_bytes().map_err(|e| e.to_string())?;
        parts.push(&bytes[s.start * rb..(s.start + s.len) * rb]);
    }
    if let Some(s) = source.filter(|_| padding > 0) {
        let bytes = s.t.as_bytes().map_err(|e| e.to_string())?;
        let first = &bytes[s.start * rb..(s.start + 1) * rb];
        parts.extend(std::iter::repeat_n(first, padding));
    }
    Tensor::from_parts(t0.dtype(), &dims, &parts).map_err(|e| e.to_string())
}

/// Rows `start..start + len` of `t` (`t` itself when that is all of it).
fn slice_rows(t: &Tensor, start: usize, len: usize) -> Result<Tensor, String> {
    if start == 0 && len == t.dims()[0] {
        return Ok(t.clone());
    }
    concat_rows(&[Segment { t: t.clone(), start, len }], 0)
}

/// Joins the outputs of a split task's pieces, in order.
fn join_parts(parts: Vec<Vec<(String, Tensor)>>) -> Result<Vec<(String, Tensor)>, ApiError> {
    let mut joined = Vec::with_capacity(parts[0].len());
    for (name, _) in &parts[0] {
        let segments = parts
            .iter()
            .map(|p| {
                let t = p.iter().find(|(n, _)| n == name).map(|(_, t)| t).ok_or_else(|| {
                    ApiError::internal(format!("output '{name}' is missing from a piece of a split request"))
                })?;
                Ok(Segment { t: t.clone(), start: 0, len: t.dims()[0] })
            })
            .collect::<Result<Vec<_>, ApiError>>()?;
        let t = concat_rows(&segments, 0).map_err(|e| {
            ApiError::internal(format!("joining output '{name}' of the pieces of a split request: {e}"))
        })?;
        joined.push((name.clone(), t));
    }
    Ok(joined)
}

#[cfg(test)]
mod tests {
    use std::sync::Barrier;

    use super::*;

    fn params(max: usize, timeout_ms: u64, threads: usize) -> BatchingParameters {
        BatchingParameters {
            max_batch_size: max,
            max_execution_batch_size: max,
            batch_timeout_micros: timeout_ms * 1000,
            num_batch_threads: threads,
            ..BatchingParameters::default()
        }
    }

    fn input<'a>(inputs: &'a [(String, Tensor)], name: &str) -> &'a Tensor {
        &inputs.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no input {name}")).1
    }

    /// y = 2 * x, and `id` echoed; records each batch's size.
    fn doubler(sizes: &Arc<Mutex<Vec<usize>>>) -> RunFn {
        let sizes = Arc::clone(sizes);
        Arc::new(move |inputs| {
            let x = input(&inputs, "x").clone();
            let id = input(&inputs, "id").clone();
            sizes.lock().unwrap().push(x.dims()[0]);
            let y: Vec<f32> = x.as_slice::<f32>().unwrap().iter().map(|v| v * 2.0).collect();
            Ok(vec![("y".into(), Tensor::from_vec(x.dims(), y).unwrap()), ("id".into(), id)])
        })
    }

    /// A task whose rows are `ids`: x row = [id, id + 0.5], id = the id.
    fn task(ids: &[i64]) -> Vec<(String, Tensor)> {
        let x: Vec<f32> = ids.iter().flat_map(|&i| [i as f32, i as f32 + 0.5]).collect();
        vec![
            ("x".into(), Tensor::from_vec(&[ids.len(), 2], x).unwrap()),
            ("id".into(), Tensor::from_vec(&[ids.len()], ids.to_vec()).unwrap()),
        ]
    }

    /// Checks that `out` is exactly the doubler's answer for `ids`.
    fn check(out: &[(String, Tensor)], ids: &[i64]) {
        let y = input(out, "y");
        let want: Vec<f32> = ids.iter().flat_map(|&i| [2.0 * i as f32, 2.0 * i as f32 + 1.0]).collect();
        assert_eq!(y.dims(), &[ids.len(), 2]);
        assert_eq!(y.as_slice::<f32>().unwrap(), &want[..]);
        assert_eq!(input(out, "id").as_slice::<i64>().unwrap(), ids);
    }

    fn wait_until(what: &str, cond: impl Fn() -> bool) {
        let start = Instant::now();
        while !cond() {
            assert!(start.elapsed() < Duration::from_secs(10), "timed out waiting until {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Rows queued (not running) in the queue `key`.
    fn queued_rows(b: &Batcher, key: &str) -> usize {
        let state = lock(&b.shared.state);
        state.queues.iter().filter(|q| q.key == key).flat_map(|q| q.batches.iter()).map(|b| b.size).sum()
    }

    #[test]
    fn concurrent_tasks_are_merged_and_each_gets_its_rows() {
        let batcher = Batcher::new(params(8, 50, 2));
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let run = doubler(&sizes);
        let barrier = Barrier::new(8);
        std::thread::scope(|s| {
            for i in 0..8i64 {
                let (batcher, run, barrier) = (&batcher, &run, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    let out = batcher.submit("m", run, task(&[i])).unwrap();
                    check(&out, &[i]);
                });
            }
        });
        let stats = batcher.stats();
        assert!(stats.batches < 8, "{stats:?}");
        assert_eq!((stats.tasks, stats.rows, stats.padding_rows), (8, 8, 0));
        assert_eq!(sizes.lock().unwrap().iter().sum::<usize>(), 8);
    }

    #[test]
    fn a_lone_task_passes_through_without_copies() {
        let batcher = Batcher::new(params(8, 0, 1));
        let seen = Arc::new(Mutex::new(0usize));
        let seen2 = Arc::clone(&seen);
        let run: RunFn = Arc::new(move |inputs| {
            *seen2.lock().unwrap() = input(&inputs, "x").as_bytes().unwrap().as_ptr() as usize;
            Ok(vec![("y".into(), input(&inputs, "x").clone())])
        });
        let inputs = task(&[1, 2, 3]);
        let ptr = inputs[0].1.as_bytes().unwrap().as_ptr() as usize;
        let out = batcher.submit("m", &run, inputs).unwrap();
        assert_eq!(*seen.lock().unwrap(), ptr);
        assert_eq!(out[0].1.as_bytes().unwrap().as_ptr() as usize, ptr);
    }

    #[test]
    fn batches_are_padded_to_allowed_sizes() {
        let p = BatchingParameters { allowed_batch_sizes: vec![2, 4, 8], ..params(8, 0, 1) };
        let batcher = Batcher::new(p);
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let saw = Arc::new(Mutex::new(Vec::new()));
        let (inner, saw2) = (doubler(&sizes), Arc::clone(&saw));
        let run: RunFn = Arc::new(move |inputs| {
            *saw2.lock().unwrap() = input(&inputs, "id").as_slice::<i64>().unwrap().to_vec();
            inner(inputs)
        });
        let out = batcher.submit("m", &run, task(&[7, 8, 9])).unwrap();
        check(&out, &[7, 8, 9]);
        assert_eq!(*saw.lock().unwrap(), vec![7, 8, 9, 7]);
        let stats = batcher.stats();
        assert_eq!((stats.batches, stats.rows, stats.padding_rows), (1, 3, 1));
    }

    /// Two one-row tasks that land in one batch (max 2, long timeout, so it runs when full).
    fn pair(
        p: BatchingParameters,
        run: &RunFn,
        a: Vec<(String, Tensor)>,
        b: Vec<(String, Tensor)>,
    ) -> [Result<Vec<(String, Tensor)>, ApiError>; 2] {
        let batcher = Batcher::new(p);
        std::thread::scope(|s| {
            let first = s.spawn(|| batcher.submit("m", run, a));
            wait_until("the first task is queued", || queued_rows(&batcher, "m") == 1);
            let second = batcher.submit("m", run, b);
            [first.join().unwrap(), second]
        })
    }

    fn echo() -> RunFn {
        Arc::new(|inputs| Ok(inputs.into_iter().map(|(n, t)| (format!("{n}_out"), t)).collect()))
    }

    #[test]
    fn variable_length_inputs_are_padded_with_the_first_element() {
        let p = BatchingParameters { pad_variable_length_inputs: true, ..params(2, 5000, 1) };
        let shapes = Arc::new(Mutex::new(Vec::new()));
        let shapes2 = Arc::clone(&shapes);
        let inner = echo();
        let run: RunFn = Arc::new(move |inputs| {
            shapes2.lock().unwrap().push(inputs[0].1.dims().to_vec());
            inner(inputs)
        });
        let a = vec![("x".to_string(), Tensor::from_vec(&[1, 2], vec![1i32, 2]).unwrap())];
        let b = vec![("x".to_string(), Tensor::from_vec(&[1, 3], vec![5i32, 6, 7]).unwrap())];
        let [a, b] = pair(p, &run, a, b);
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_eq!(*shapes.lock().unwrap(), vec![vec![2, 3]]);
        assert_eq!(a[0].1.dims(), &[1, 3]);
        assert_eq!(a[0].1.as_slice::<i32>().unwrap(), &[1, 2, 1]);
        assert_eq!(b[0].1.as_slice::<i32>().unwrap(), &[5, 6, 7]);
    }

    #[test]
    fn padding_inner_dimensions_of_higher_rank_and_string_tensors() {
        let t = Tensor::from_vec(&[3, 2, 2], (0..12).collect::<Vec<i16>>()).unwrap();
        // Rows 1..3 padded to [2, 3, 3], with the first element of row 1 (4).
        let p = pad_rows(&t, 1, 2, &[3, 3]).ok().unwrap();
        assert_eq!(p.dims(), &[2, 3, 3]);
        #[rustfmt::skip]
        let want: [i16; 18] = [4, 5, 4, 6, 7, 4, 4, 4, 4,
                               8, 9, 4, 10, 11, 4, 4, 4, 4];
        assert_eq!(p.as_slice::<i16>().unwrap(), &want);
        let s = Tensor::from_strings(&[1, 2], vec![b"a".to_vec(), b"b".to_vec()]).unwrap();
        let p = pad_rows(&s, 0, 1, &[4]).ok().unwrap();
        assert_eq!(p.as_strings().unwrap(), &[b"a".to_vec(), b"b".to_vec(), b"a".to_vec(), b"a".to_vec()]);
        let empty = Tensor::from_vec(&[1, 0], Vec::<f32>::new()).unwrap();
        assert!(matches!(pad_rows(&empty, 0, 1, &[2]), Err(PadError::Empty)));
    }

    #[test]
    fn mismatched_shapes_fail_every_task_of_the_batch() {
        let a = vec![("x".to_string(), Tensor::from_vec(&[1, 2], vec![1f32, 2.]).unwrap())];
        let b = vec![("x".to_string(), Tensor::from_vec(&[1, 3], vec![1f32, 2., 3.]).unwrap())];
        for r in pair(params(2, 5000, 1), &echo(), a, b) {
            let e = r.unwrap_err();
            assert_eq!(e.status, 400);
            assert!(e.message.contains("'x'") && e.message.contains("[1, 2]") && e.message.contains("[1, 3]"), "{e:?}");
        }
    }

    #[test]
    fn oversize_tasks_are_refused_or_split() {
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let run = doubler(&sizes);
        let batcher = Batcher::new(params(4, 0, 1));
        let e = batcher.submit("m", &run, task(&[1, 2, 3, 4, 5])).unwrap_err();
        assert_eq!((e.status, e.message.as_str()), (400, "Task size 5 is larger than maximum input batch size 4"));
        drop(batcher);

        let p =
            BatchingParameters { enable_large_batch_splitting: true, max_execution_batch_size: 2, ..params(5, 0, 1) };
        let batcher = Batcher::new(p);
        let e = batcher.submit("m", &run, task(&[1, 2, 3, 4, 5, 6])).unwrap_err();
        assert_eq!(e.status, 400);
        let out = batcher.submit("m", &run, task(&[1, 2, 3, 4, 5])).unwrap();
        check(&out, &[1, 2, 3, 4, 5]);
        assert_eq!(*sizes.lock().unwrap(), vec![2, 2, 1]);
        assert_eq!(batcher.stats().tasks, 3);
    }

    #[test]
    fn a_split_task_first_fills_the_open_batch() {
        let p = BatchingParameters {
            enable_large_batch_splitting: true,
            max_execution_batch_size: 3,
            ..params(8, 5000, 1)
        };
        let batcher = Batcher::new(p);
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let run = doubler(&sizes);
        std::thread::scope(|s| {
            let first = s.spawn(|| batcher.submit("m", &run, task(&[100, 101])));
            wait_until("the first task is queued", || queued_rows(&batcher, "m") == 2);
            let ids: Vec<i64> = (0..7).collect();
            check(&batcher.submit("m", &run, task(&ids)).unwrap(), &ids);
            check(&first.join().unwrap().unwrap(), &[100, 101]);
        });
        assert_eq!(*sizes.lock().unwrap(), vec![3, 3, 3]);
    }

    #[test]
    fn a_full_queue_refuses_with_503() {
        let p = BatchingParameters { max_enqueued_batches: 1, ..params(2, 5000, 1) };
        let batcher = Batcher::new(p);
        let (entered_tx, entered) = std::sync::mpsc::channel::<()>();
        let gate = Arc::new(Mutex::new(()));
        let held = gate.lock().unwrap();
        let (gate2, entered_tx) = (Arc::clone(&gate), Mutex::new(entered_tx));
        let run: RunFn = Arc::new(move |inputs| {
            entered_tx.lock().unwrap().send(()).unwrap();
            drop(gate2.lock().unwrap());
            Ok(inputs)
        });
        std::thread::scope(|s| {
            let a = s.spawn(|| batcher.submit("m", &run, task(&[1, 2])));
            entered.recv().unwrap(); // a's (full) batch is running and blocked
            let b = s.spawn(|| batcher.submit("m", &run, task(&[3, 4])));
            wait_until("b is queued", || queued_rows(&batcher, "m") == 2);
            let e = batcher.submit("m", &run, task(&[5])).unwrap_err();
            assert_eq!(e.status, 503);
            assert!(e.message.starts_with("The batch scheduling queue to which this task was submitted is full"));
            drop(held);
            assert!(a.join().unwrap().is_ok());
            assert!(b.join().unwrap().is_ok());
        });
    }

    #[test]
    fn run_errors_reach_every_task() {
        let run: RunFn = Arc::new(|_| Err(ApiError::new(409, "boom")));
        for r in pair(params(2, 5000, 1), &run, task(&[1]), task(&[2])) {
            let e = r.unwrap_err();
            assert_eq!((e.status, e.message.as_str()), (409, "boom"));
        }
    }

    #[test]
    fn a_panicking_run_answers_500_and_keeps_its_thread() {
        let batcher = Batcher::new(params(4, 0, 1));
        let run: RunFn = Arc::new(|inputs| {
            assert!(input(&inputs, "id").as_slice::<i64>().unwrap()[0] >= 0, "negative id");
            Ok(inputs)
        });
        let e = batcher.submit("m", &run, task(&[-1])).unwrap_err();
        assert_eq!(e.status, 500);
        assert!(e.message.contains("panicked") && e.message.contains("negative id"), "{e:?}");
        assert!(batcher.submit("m", &run, task(&[1])).is_ok());
    }

    #[test]
    fn string_and_bool_tensors_are_batched() {
        let run: RunFn = Arc::new(|inputs| {
            let s = input(&inputs, "s");
            let out: Vec<Vec<u8>> = s.as_strings().unwrap().iter().map(|v| [v.as_slice(), b"!"].concat()).collect();
            Ok(vec![
                ("s".into(), Tensor::from_strings(s.dims(), out).unwrap()),
                ("b".into(), input(&inputs, "b").clone()),
            ])
        });
        let strings = |v: &str, b: bool| {
            vec![
                ("s".to_string(), Tensor::from_strings(&[1, 2], vec![v.into(), v.repeat(2).into()]).unwrap()),
                ("b".to_string(), Tensor::from_vec(&[1], vec![b]).unwrap()),
            ]
        };
        let [a, b] = pair(params(2, 5000, 1), &run, strings("a", true), strings("bc", false));
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_eq!(input(&a, "s").as_strings().unwrap(), &[b"a!".to_vec(), b"aa!".to_vec()]);
        assert_eq!(input(&b, "s").as_strings().unwrap(), &[b"bc!".to_vec(), b"bcbc!".to_vec()]);
        assert_eq!(input(&a, "b").as_slice::<bool>().unwrap(), &[true]);
        assert_eq!(input(&b, "b").as_slice::<bool>().unwrap(), &[false]);
    }

    #[test]
    fn outputs_that_cannot_be_split_are_500() {
        let batcher = Batcher::new(params(4, 0, 1));
        let scalar: RunFn = Arc::new(|_| Ok(vec![("y".into(), Tensor::scalar(1f32))]));
        let e = batcher.submit("a", &scalar, task(&[1])).unwrap_err();
        assert_eq!(e.status, 500);
        assert!(e.message.contains("Batched output tensor has 0 dimensions") && e.message.contains("'y'"));
        let short: RunFn = Arc::new(|_| Ok(vec![("y".into(), Tensor::from_vec(&[1], vec![1f32]).unwrap())]));
        let e = batcher.submit("b", &short, task(&[1, 2])).unwrap_err();
        assert_eq!(e.status, 500);
        assert!(e.message.contains("0th dimension does not equal") && e.message.contains("'y'"));
    }

    #[test]
    fn unbatchable_inputs_are_400() {
        let batcher = Batcher::new(params(4, 0, 1));
        let run = echo();
        let cases = [
            (vec![], "at least one input tensor"),
            (vec![("x".to_string(), Tensor::scalar(1f32))], "at least one dimension"),
            (
                vec![
                    ("x".to_string(), Tensor::from_vec(&[2], vec![1f32, 2.]).unwrap()),
                    ("z".to_string(), Tensor::from_vec(&[3], vec![1f32, 2., 3.]).unwrap()),
                ],
                "must have equal 0th-dimension size",
            ),
        ];
        for (inputs, message) in cases {
            let e = batcher.submit("m", &run, inputs).unwrap_err();
            assert_eq!(e.status, 400);
            assert!(e.message.contains(message), "{e:?}");
        }
        assert!(lock(&batcher.shared.state).queues.is_empty());
    }

    #[test]
    fn empty_tasks_and_idle_queues() {
        let batcher = Batcher::new(params(4, 0, 2));
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let run = doubler(&sizes);
        let out = batcher.submit("m", &run, task(&[])).unwrap();
        check(&out, &[]);
        // The queue, and with it its clone of the run function, goes once idle.
        wait_until("the idle queue is dropped", || Arc::strong_count(&run) == 1);
        assert!(lock(&batcher.shared.state).queues.is_empty());
    }

    #[test]
    fn the_batcher_is_shared_between_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Batcher>();
        send_sync::<BatchingParameters>();
    }

    #[test]
    fn parses_a_batching_parameters_file() {
        let text = r#"
            # TF Serving batching config
            max_batch_size { value: 32 }
            batch_timeout_micros { value: 1000 }
            max_enqueued_batches: < value: 0x10 >
            num_batch_threads { value: 3 }
            thread_pool_name { value: "batch" "_threads" }
            allowed_batch_sizes: 8
            allowed_batch_sizes: [16, 32];
            pad_variable_length_inputs: true
        "#;
        let p = parse_batching_parameters(text).unwrap();
        let want = BatchingParameters {
            max_batch_size: 32,
            batch_timeout_micros: 1000,
            max_enqueued_batches: 16,
            num_batch_threads: 3,
            allowed_batch_sizes: vec![8, 16, 32],
            pad_variable_length_inputs: true,
            enable_large_batch_splitting: false,
            max_execution_batch_size: 32,
        };
        assert_eq!(p, want);
        let p = parse_batching_parameters(
            "max_batch_size { value: 64 } enable_large_batch_splitting { value: true }\n\
             max_execution_batch_size { value: 16 } allowed_batch_sizes: [4, 16]",
        )
        .unwrap();
        assert_eq!((p.max_batch_size, p.max_execution_batch_size, p.execution_batch_size()), (64, 16, 16));
        assert_eq!(parse_batching_parameters("# nothing\n").unwrap(), BatchingParameters::default());
    }

    #[test]
    fn rejects_bad_batching_parameters() {
        let err = |text: &str| parse_batching_parameters(text).unwrap_err();
        let e = err("max_batch_size { value: 8 }\n\nmax_batch_sise { value: 4 }");
        assert!(e.contains("line 3") && e.contains("max_batch_sise"), "{e}");
        let e = err("max_batch_size { value: 32 }\nallowed_batch_sizes: [8, 8, 32]");
        assert!(e.contains("monotonically increasing"), "{e}");
        let e = err("max_batch_size { value: 32 }\nallowed_batch_sizes: [8, 16]");
        assert!(e.contains("must match max_batch_size"), "{e}");
        let e = err("max_batch_size: 32");
        assert!(e.contains("line 1") && e.contains("max_batch_size { value: ... }"), "{e}");
        let e = err("batch_timeout_micros { value: -1 }");
        assert!(e.contains("batch_timeout_micros") && e.contains("non-negative"), "{e}");
        let e = err("max_batch_size { value: 0 }");
        assert!(e.contains("max_batch_size must be positive"), "{e}");
        let e = err("num_batch_threads { value: 2 }\nnum_batch_threads { value: 3 }");
        assert!(e.contains("line 2") && e.contains("more than once"), "{e}");
        let e = err("max_batch_size { value: 1.5 }");
        assert!(e.contains("max_batch_size") && e.contains("integer"), "{e}");
        let e = err("max_batch_size { value: 8 ");
        assert!(e.contains("not closed"), "{e}");
        let e = err("enable_large_batch_splitting { value: true }\nmax_execution_batch_size { value: 2000 }");
        assert!(e.contains("max_execution_batch_size"), "{e}");
        let e = err("pad_variable_length_inputs { value: true }");
        assert!(e.contains("pad_variable_length_inputs: true"), "{e}");
    }
}
