//! Trace collection. One profile at a time, process-wide (TensorFlow's rule too). While it
//! runs, each thread that records gets its own buffer for this profile; an event is written
//! into the thread's buffer and published with one release store — no lock, no allocation
//! on the hot path. Stopping the profile reads every buffer's published events.
//!
//! Off, recording is one relaxed load and a branch ([`enabled`]); spans do not read the
//! clock. Names are interned once into [`NameId`]s, so an event is 16 plain bytes: its start
//! tick, its duration in ticks and its name and kind. The argument (a run id for ops, the
//! step number for steps) changes rarely on a thread, so it is a record of its own written
//! only when it changes; a duration past `u32::MAX` ticks (over a second) takes a second
//! record. Half the bytes of a 32-byte event: a 2,000-op step writes 32 KiB of trace.
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::clock::{self, Anchor};
use crate::ProfileError;

/// An interned event name.
pub type NameId = u32;

/// What an event is; it decides how the exporters and the report treat it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
#[non_exhaustive]
pub enum Kind {
    /// One executed op (`name:Type`).
    Op,
    /// One training or run step; `arg` is the step number.
    Step,
    /// A region of framework work (`Session::run`, `Saver::save`, ...).
    Region,
    /// Waiting for the input pipeline's next element inside a step (`IteratorGetNext`).
    Input,
    /// One `next` of an input-pipeline stage (`Iterator::Root::Prefetch::...`).
    Stage,
}

impl Kind {
    fn from_code(c: u32) -> Option<Kind> {
        Some(match c {
            0 => Kind::Op,
            1 => Kind::Step,
            2 => Kind::Region,
            3 => Kind::Input,
            4 => Kind::Stage,
            _ => return None,
        })
    }
}

/// One 16-byte record of a thread buffer: an event (`start` tick, `dur` ticks, `tag` = name
/// in the low 24 bits and kind code above), or a record that sets the argument of the events
/// after it (code [`SET_ARG`], the argument in `start`), or the full duration of the event
/// before it (code [`LONG`], in `start`, when `dur` is `u32::MAX`).
#[derive(Clone, Copy)]
#[repr(C)]
pub(crate) struct RawEvent {
    start: u64,
    dur: u32,
    tag: u32,
}

const SET_ARG: u32 = 0xFE;
const LONG: u32 = 0xFF;
/// Names past 24 bits (16 M interned names) are recorded as this one (shown as `?`).
const NAME_MASK: u32 = (1 << 24) - 1;

/// An event as recorded (ticks), before the profile's scale turns it into [`Event`].
#[derive(Clone, Copy)]
struct Decoded {
    start: u64,
    end: u64,
    arg: i64,
    name: NameId,
    kind: Kind,
}

/// One recorded event, in ns since the profile's start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Event {
    /// Interned name ([`Profile::name`]).
    pub name: NameId,
    /// What it is.
    pub kind: Kind,
    /// Start, ns since the profile started.
    pub start_ns: u64,
    /// Duration in ns.
    pub duration_ns: u64,
    /// The step number for [`Kind::Step`]; 0 otherwise.
    pub arg: i64,
}

impl Event {
    /// End, ns since the profile started.
    pub fn end_ns(&self) -> u64 {
        self.start_ns + self.duration_ns
    }
}

/// The events of one thread.
#[derive(Debug, Clone)]
pub struct ThreadTrace {
    /// A small id, unique in the process.
    pub id: u32,
    /// The thread's name (`main`, `ferroflow-inter-op-1`, ...).
    pub name: String,
    /// Its events, in the order they ended.
    pub events: Vec<Event>,
}

/// A finished profile.
#[derive(Debug, Clone)]
pub struct Profile {
    /// When it started, ns since the Unix epoch.
    pub start_unix_ns: i64,
    /// How long it ran, in ns.
    pub duration_ns: u64,
    /// Every thread that recorded.
    pub threads: Vec<ThreadTrace>,
    /// Events not recorded because the event budget was spent.
    pub dropped: u64,
    names: Vec<Arc<str>>,
}

impl Profile {
    /// The name of an interned id.
    pub fn name(&self, id: NameId) -> &str {
        self.names.get(id as usize).map_or("?", |s| s)
    }

    /// Every event with its thread, in no particular order.
    pub fn events(&self) -> impl Iterator<Item = (&ThreadTrace, &Event)> {
        self.threads.iter().flat_map(|t| t.events.iter().map(move |e| (t, e)))
    }
}

/// What a profile may use.
///
/// `#[non_exhaustive]`: other crates build a `ProfilerOptions` from `ProfilerOptions::default()` and its
/// `with_*` setters, so fields can be added without breaking them.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ProfilerOptions {
    /// Most events kept (16-byte records; a change of a thread's run or step argument takes
    /// one more): threads reserve buffers from this budget, and once
    /// it is spent, further events are counted as dropped.
    pub max_events: usize,
}

impl ProfilerOptions {
    /// Sets [`ProfilerOptions::max_events`].
    pub fn with_max_events(mut self, max_events: usize) -> Self {
        self.max_events = max_events;
        self
    }
}

impl Default for ProfilerOptions {
    fn default() -> Self {
        ProfilerOptions { max_events: 4 << 20 }
    }
}

/// Events per thread buffer (one 2 MiB block with its header: a tensor buffer, so a huge page
/// where the kernel allows and recycled by the large-block cache between profiles); a thread
/// that fills one gets another.
const BUFFER_EVENTS: usize = ((2 << 20) - ferroflow_tensor::buffer::ALIGNMENT) / std::mem::size_of::<RawEvent>();

struct ThreadBuf {
    thread: u32,
    /// Room for `cap` records; only this handle exists.
    events: ferroflow_tensor::buffer::Buffer,
    cap: usize,
    len: AtomicUsize,
    /// The argument the last `SET_ARG` record set (owner thread only).
    arg: Cell<i64>,
}

// SAFETY: only the owning thread writes records (and touches `arg`), each slot at most once,
// strictly before publishing it through `len` (Release); readers read only slots below `len`
// (Acquire). The bytes are reached through raw pointers only (no reference to them is made).
unsafe impl Sync for ThreadBuf {}
unsafe impl Send for ThreadBuf {}

impl ThreadBuf {
    fn slots(&self) -> *mut RawEvent {
        // The buffer's data is 64-byte aligned, enough for RawEvent.
        self.events.as_ptr() as *mut RawEvent
    }

    /// Appends an event (owner thread only): a `SET_ARG` record first when `arg` differs from
    /// the buffer's current one, a `LONG` record after it for a duration past `u32::MAX`
    /// ticks. False when it does not fit.
    #[inline]
    fn push(&self, name: NameId, kind: Kind, start: u64, end: u64, arg: i64) -> bool {
        let n = self.len.load(Ordering::Relaxed);
        let dur = end.saturating_sub(start);
        let new_arg = arg != self.arg.get();
        let need = 1 + usize::from(new_arg) + usize::from(dur >= u64::from(u32::MAX));
        if n + need > self.cap {
            return false;
        }
        let slots = self.slots();
        let mut i = n;
        let mut put = |r: RawEvent| {
            // SAFETY: i < n + need <= cap lies inside the buffer; unpublished slots are
            // touched by no reader, and only this thread writes.
            unsafe { slots.add(i).write(r) };
            i += 1;
        };
        if new_arg {
            put(RawEvent { start: arg as u64, dur: 0, tag: SET_ARG << 24 });
            self.arg.set(arg);
        }
        let tag = name.min(NAME_MASK) | (kind as u32) << 24;
        put(RawEvent { start, dur: dur.min(u64::from(u32::MAX)) as u32, tag });
        if dur >= u64::from(u32::MAX) {
            put(RawEvent { start: dur, dur: 0, tag: LONG << 24 });
        }
        self.len.store(n + need, Ordering::Release);
        true
    }

    /// The published events, decoded.
    fn published(&self) -> Vec<Decoded> {
        let n = self.len.load(Ordering::Acquire);
        // SAFETY: records below `len` were fully written before `len` was released.
        let raw: Vec<RawEvent> = (0..n).map(|i| unsafe { self.slots().add(i).read() }).collect();
        let mut out = Vec::with_capacity(raw.len());
        let mut arg = 0i64;
        let mut i = 0;
        while i < raw.len() {
            let r = raw[i];
            i += 1;
            let code = r.tag >> 24;
            if code == SET_ARG {
                arg = r.start as i64;
                continue;
            }
            let Some(kind) = Kind::from_code(code) else { continue };
            let mut dur = u64::from(r.dur);
            if r.dur == u32::MAX && raw.get(i).is_some_and(|x| x.tag >> 24 == LONG) {
                dur = raw[i].start;
                i += 1;
            }
            let name = r.tag & NAME_MASK;
            out.push(Decoded { start: r.start, end: r.start.saturating_add(dur), arg, name, kind });
        }
        out
    }
}

struct Session {
    generation: u64,
    start: Anchor,
    start_unix_ns: i64,
    buffers: Vec<Arc<ThreadBuf>>,
    /// Events still allowed.
    budget: usize,
}

static ENABLED: AtomicBool = AtomicBool::new(false);
static GENERATION: AtomicU64 = AtomicU64::new(0);
static DROPPED: AtomicU64 = AtomicU64::new(0);
static SESSION: Mutex<Option<Session>> = Mutex::new(None);

fn session() -> std::sync::MutexGuard<'static, Option<Session>> {
    SESSION.lock().unwrap_or_else(|p| p.into_inner())
}

/// This thread's buffer for the profile of a generation (None: refused). Dropping it (at
/// thread exit) clears the fast path's pointer to it.
struct Local(u64, Option<Arc<ThreadBuf>>);

impl Drop for Local {
    fn drop(&mut self) {
        let _ = FAST.try_with(|f| f.set((0, std::ptr::null())));
    }
}

thread_local! {
    static LOCAL: RefCell<Local> = const { RefCell::new(Local(0, None)) };
    /// The recording fast path's copy of `LOCAL`: its generation and buffer, as a plain
    /// pointer in a thread-local without a destructor (one load, no lazy-init check). Valid
    /// while `LOCAL` holds that buffer: only this thread changes either, together.
    static FAST: Cell<(u64, *const ThreadBuf)> = const { Cell::new((0, std::ptr::null())) };
    static THREAD: (u32, Arc<str>) = {
        static NEXT: AtomicU32 = AtomicU32::new(1);
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = std::thread::current().name().map_or_else(|| format!("thread-{id}"), str::to_string);
        (id, name.into())
    };
}

fn thread_names() -> &'static Mutex<HashMap<u32, Arc<str>>> {
    static NAMES: OnceLock<Mutex<HashMap<u32, Arc<str>>>> = OnceLock::new();
    NAMES.get_or_init(Default::default)
}

/// Whether a profile is being recorded.
#[inline]
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

struct Names {
    list: Vec<Arc<str>>,
    index: HashMap<Arc<str>, NameId>,
}

fn names() -> &'static RwLock<Names> {
    static NAMES: OnceLock<RwLock<Names>> = OnceLock::new();
    NAMES.get_or_init(|| RwLock::new(Names { list: Vec::new(), index: HashMap::new() }))
}

/// The id of `name`, interning it on first use (names live as long as the process).
pub fn intern(name: &str) -> NameId {
    if let Some(&id) = names().read().unwrap_or_else(|p| p.into_inner()).index.get(name) {
        return id;
    }
    let mut n = names().write().unwrap_or_else(|p| p.into_inner());
    if let Some(&id) = n.index.get(name) {
        return id;
    }
    let id = n.list.len() as NameId;
    let s: Arc<str> = name.into();
    n.list.push(s.clone());
    n.index.insert(s, id);
    id
}

/// Records one event that ran from `start` to `end` (both from [`clock::ticks`]) on this
/// thread; nothing when no profile is running.
#[inline]
pub fn record(name: NameId, kind: Kind, start: u64, end: u64, arg: i64) {
    if !enabled() {
        return;
    }
    let (generation, buf) = FAST.with(Cell::get);
    // SAFETY: a non-null FAST pointer is the buffer this thread's LOCAL holds (see FAST).
    if buf.is_null()
        || generation != GENERATION.load(Ordering::Acquire)
        || !unsafe { &*buf }.push(name, kind, start, end, arg)
    {
        record_on(name, kind, start, end, arg);
    }
}

#[cold]
fn new_buffer(generation: u64) -> Option<Arc<ThreadBuf>> {
    let mut guard = session();
    let s = guard.as_mut().filter(|s| s.generation == generation)?;
    if s.budget == 0 {
        return None;
    }
    let n = BUFFER_EVENTS.min(s.budget);
    s.budget -= n;
    let (thread, name) = THREAD.with(|t| t.clone());
    thread_names().lock().unwrap_or_else(|p| p.into_inner()).insert(thread, name);
    let events = ferroflow_tensor::buffer::Buffer::try_zeroed(n * std::mem::size_of::<RawEvent>()).ok()?;
    let buf = Arc::new(ThreadBuf { thread, events, cap: n, len: AtomicUsize::new(0), arg: Cell::new(0) });
    s.buffers.push(buf.clone());
    Some(buf)
}

#[cold]
fn record_on(name: NameId, kind: Kind, start: u64, end: u64, arg: i64) {
    let _ = LOCAL.try_with(|local| {
        let mut local = local.borrow_mut();
        let generation = GENERATION.load(Ordering::Acquire);
        if local.0 != generation {
            local.0 = generation;
            local.1 = new_buffer(generation);
        }
        let pushed = match &local.1 {
            Some(b) => {
                b.push(name, kind, start, end, arg) || {
                    local.1 = new_buffer(generation);
                    local.1.as_ref().is_some_and(|b| b.push(name, kind, start, end, arg))
                }
            }
            None => false,
        };
        let fast = local.1.as_ref().map_or(std::ptr::null(), Arc::as_ptr);
        FAST.with(|f| f.set((generation, fast)));
        if !pushed {
            DROPPED.fetch_add(1, Ordering::Relaxed);
        }
    });
}

/// Starts the process's profile.
pub fn start(options: &ProfilerOptions) -> Result<(), ProfileError> {
    let mut guard = session();
    if guard.is_some() {
        return Err(ProfileError::AlreadyRunning);
    }
    let start_unix_ns = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64);
    let generation = GENERATION.fetch_add(1, Ordering::AcqRel) + 1;
    DROPPED.store(0, Ordering::Relaxed);
    *guard = Some(Session {
        generation,
        start: Anchor::now(),
        start_unix_ns,
        buffers: Vec::new(),
        budget: options.max_events,
    });
    ENABLED.store(true, Ordering::Release);
    Ok(())
}

/// Stops the profile and returns what it recorded.
pub fn stop() -> Result<Profile, ProfileError> {
    let end = Anchor::now();
    let s = {
        let mut guard = session();
        ENABLED.store(false, Ordering::Release);
        guard.take().ok_or(ProfileError::NotRunning)?
    };
    // A new generation makes every thread drop its buffer for this profile on next use.
    GENERATION.fetch_add(1, Ordering::AcqRel);
    let scale = clock::ns_per_tick_between(s.start, end);
    let ns = |t: u64| (t.saturating_sub(s.start.ticks) as f64 * scale) as u64;
    let mut by_thread: std::collections::BTreeMap<u32, Vec<Event>> = Default::default();
    for b in &s.buffers {
        let events = by_thread.entry(b.thread).or_default();
        events.extend(b.published().into_iter().map(|r| {
            let start_ns = ns(r.start);
            Event { name: r.name, kind: r.kind, start_ns, duration_ns: ns(r.end).saturating_sub(start_ns), arg: r.arg }
        }));
    }
    let thread_names = thread_names().lock().unwrap_or_else(|p| p.into_inner()).clone();
    let threads = by_thread
        .into_iter()
        .map(|(id, events)| {
            let name = thread_names.get(&id).map_or_else(|| format!("thread-{id}"), |n| n.to_string());
            ThreadTrace { id, name, events }
        })
        .collect();
    let names = names().read().unwrap_or_else(|p| p.into_inner()).list.clone();
    Ok(Profile {
        start_unix_ns: s.start_unix_ns,
        duration_ns: ns(end.ticks).max(end.at.duration_since(s.start.at).as_nanos() as u64),
        threads,
        dropped: DROPPED.swap(0, Ordering::Relaxed),
        names,
    })
}

/// A traced region: recorded from its creation to its drop, when a profile is running at
/// its creation (otherwise it costs one load and reads no clock).
#[must_use = "a span records when it is dropped"]
pub struct Span {
    name: NameId,
    kind: Kind,
    arg: i64,
    start: u64,
}

impl Span {
    /// A span of an interned name.
    #[inline]
    pub fn with_id(name: NameId, kind: Kind, arg: i64) -> Option<Span> {
        enabled().then(|| Span { name, kind, arg, start: clock::ticks() })
    }
}

impl Span {
    /// Drops the span without recording it (the region turned out not to happen).
    pub fn cancel(self) {
        std::mem::forget(self);
    }
}

impl Drop for Span {
    fn drop(&mut self) {
        record(self.name, self.kind, self.start, clock::ticks(), self.arg);
    }
}

/// A [`Kind::Region`] span named `name` (interned only when a profile is running).
#[inline]
pub fn span(name: &str) -> Option<Span> {
    enabled().then(|| Span { name: intern(name), kind: Kind::Region, arg: 0, start: clock::ticks() })
}

/// A span of `kind` named `name`.
#[inline]
pub fn span_kind(name: &str, kind: Kind, arg: i64) -> Option<Span> {
    enabled().then(|| Span { name: intern(name), kind, arg, start: clock::ticks() })
}

/// A step span: `name` (`train`, no `/`) with step number `step`, which TensorBoard's
/// overview page counts as a step.
#[inline]
pub fn step(name: &str, step: i64) -> Option<Span> {
    span_kind(name, Kind::Step, step)
}

/// A name interned once, on first use while profiling (for spans on hot paths).
#[derive(Default)]
pub struct LazyName(OnceLock<NameId>);

impl LazyName {
    /// A name not interned yet.
    pub const fn new() -> LazyName {
        LazyName(OnceLock::new())
    }

    /// The id, interning `name()` the first time.
    pub fn get(&self, name: impl FnOnce() -> String) -> NameId {
        *self.0.get_or_init(|| intern(&name()))
    }
}

/// Serialises tests (and users) that start and stop the process-wide profile.
pub fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

thread_local! {
    static CURRENT_RUN: std::cell::Cell<i64> = const { std::cell::Cell::new(0) };
}

/// A new id for one session run (op events carry it, so the XSpace export can link a
/// step to the threads that ran its ops).
pub fn new_run_id() -> i64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed) as i64
}

/// The run this thread is working for (0: none): set around kernels while profiling, so
/// function bodies run from them join their caller's run.
#[inline]
pub fn current_run() -> i64 {
    CURRENT_RUN.try_with(|c| c.get()).unwrap_or(0)
}

/// Sets this thread's current run and returns the previous one.
#[inline]
pub fn set_current_run(run: i64) -> i64 {
    CURRENT_RUN.try_with(|c| c.replace(run)).unwrap_or(0)
}

/// An outermost session run while a profile runs: a [`Kind::Region`] event whose `arg` is
/// a new run id, which is this thread's current run until the scope ends (the executor tags
/// the run's op events with it, on whichever threads they run).
#[must_use = "the run is recorded when the scope is dropped"]
pub struct RunScope {
    caller: i64,
    _span: Span,
}

impl Drop for RunScope {
    fn drop(&mut self) {
        set_current_run(self.caller);
    }
}

/// A [`RunScope`] named `name` (e.g. `Session::run`), or `None` when no profile runs or this
/// thread already works for a run (a function body run from a kernel).
#[inline]
pub fn run_scope(name: &LazyName, describe: fn() -> String) -> Option<RunScope> {
    if !enabled() || current_run() != 0 {
        return None;
    }
    let run = new_run_id();
    let caller = set_current_run(run);
    Some(RunScope {
        caller,
        _span: Span { name: name.get(describe), kind: Kind::Region, arg: run, start: clock::ticks() },
    })
}

/// This thread's current run, restored to the caller's when dropped.
#[must_use = "the run is this thread's current one only while the guard lives"]
pub struct EnterRun(i64);

impl Drop for EnterRun {
    fn drop(&mut self) {
        set_current_run(self.0);
    }
}

/// Makes `run` this thread's current run until the guard drops (executor threads enter the
/// run they work for, so function bodies their kernels run join it).
#[inline]
pub fn enter_run(run: i64) -> EnterRun {
    EnterRun(set_current_run(run))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sixteen_byte_records_keep_arguments_and_long_durations() {
        let _only = exclusive();
        assert_eq!(std::mem::size_of::<RawEvent>(), 16);
        start(&ProfilerOptions { max_events: 100 }).unwrap();
        let (op, step) = (intern("test/a:Op"), intern("step"));
        let t = clock::ticks();
        record(op, Kind::Op, t, t + 10, 7);
        record(op, Kind::Op, t + 10, t + 30, 7);
        record(step, Kind::Step, t, t + (1u64 << 40), 3);
        record(op, Kind::Op, t + 40, t + 41, 7);
        let p = stop().unwrap();
        let events: Vec<&Event> = p.events().map(|(_, e)| e).collect();
        assert_eq!(events.len(), 4);
        let args: Vec<i64> = events.iter().map(|e| e.arg).collect();
        assert_eq!(args, [7, 7, 3, 7]);
        let kinds: Vec<Kind> = events.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, [Kind::Op, Kind::Op, Kind::Step, Kind::Op]);
        assert_eq!(p.name(events[2].name), "step");
        // 2^40 ticks is past u32::MAX: the second record carries it.
        let long = events[2].duration_ns as f64;
        let want = (1u64 << 40) as f64 * clock::ns_per_tick();
        assert!((long / want - 1.0).abs() < 0.05, "{long} ns for {want}");
        assert!(events[1].start_ns >= events[0].start_ns && events[0].duration_ns < 1000);
    }
}
