//! AUTOTUNE: stages whose parallelism or buffer size is `AUTOTUNE` get a [`Knob`] that
//! a simple, explainable model sets while the pipeline runs:
//!
//! - a parallel stage (map, interleave) needs `ceil(t_work / t_demand)` workers, where
//!   `t_work` is the measured time to produce one element and `t_demand` the time its consumer
//!   spends on one element (between two requests), capped by the CPU budget;
//! - a prefetch buffer grows by one while its consumer finds it empty although the producer
//!   keeps up on average (bursty demand), and never past the RAM budget.
//!
//! Knobs live on the dataset, not on an iterator, so epoch 2 starts from epoch 1's choices
//! (tf.data re-tunes from scratch on each new iterator, which is why its speed swings between
//! epochs). Every change is a line in the stage's history and, unless silenced, on stderr.
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Pass as a parallelism or buffer size to let the pipeline choose (tf.data's value).
pub const AUTOTUNE: i64 = -1;

/// Elements between two tuning decisions of a stage.
const WINDOW: u64 = 16;

/// What the tuner may use.
///
/// `#[non_exhaustive]`: other crates build a `Budget` from `Budget::default()` and its
/// `with_*` setters, so fields can be added without breaking them.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Budget {
    /// Threads a parallel stage may use at most (default: the machine's cores).
    pub cpu: usize,
    /// Bytes all prefetch buffers may hold together (default: 1/4 of physical memory).
    pub ram_bytes: u64,
    /// Log each tuning change (at info level through the `log` facade, target
    /// `ferroflow_data::autotune`; whether it appears is the logger's choice).
    pub log: bool,
}

impl Budget {
    /// Sets [`Budget::cpu`].
    pub fn with_cpu(mut self, cpu: usize) -> Self {
        self.cpu = cpu;
        self
    }

    /// Sets [`Budget::ram_bytes`].
    pub fn with_ram_bytes(mut self, ram_bytes: u64) -> Self {
        self.ram_bytes = ram_bytes;
        self
    }

    /// Sets [`Budget::log`].
    pub fn with_log(mut self, log: bool) -> Self {
        self.log = log;
        self
    }
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            cpu: std::thread::available_parallelism().map_or(1, |n| n.get()),
            ram_bytes: physical_memory() / 4,
            log: true,
        }
    }
}

fn physical_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("MemTotal:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(8 << 30, |kb| kb * 1024)
}

/// The kind of value a knob sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KnobKind {
    /// Worker threads of a parallel map or interleave.
    Parallelism,
    /// Elements a prefetch buffer may hold.
    BufferSize,
}

impl std::fmt::Display for KnobKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            KnobKind::Parallelism => "parallelism",
            KnobKind::BufferSize => "buffer_size",
        })
    }
}

/// One tuned choice, as reported by [`crate::Dataset::autotune_report`].
#[derive(Debug, Clone)]
pub struct TunedStage {
    /// The stage (`Iterator::Root::Prefetch`).
    pub stage: String,
    /// What is tuned.
    pub kind: KnobKind,
    /// The value now.
    pub value: usize,
    /// Why (the measurements behind the last change, or why nothing changed).
    pub reason: String,
    /// Every change, oldest first: `(from, to, reason)`.
    pub history: Vec<(usize, usize, String)>,
}

/// A tunable value and the measurements that drive it.
pub(crate) struct Knob {
    pub(crate) kind: KnobKind,
    value: AtomicUsize,
    max: AtomicUsize,
    tuned: bool,
    stage: Mutex<String>,
    reason: Mutex<String>,
    history: Mutex<Vec<(usize, usize, String)>>,
    /// Nanoseconds of producer work and elements produced (this window).
    work_ns: AtomicU64,
    produced: AtomicU64,
    /// Nanoseconds the consumer spent between requests, and waiting inside them.
    demand_ns: AtomicU64,
    wait_ns: AtomicU64,
    requests: AtomicU64,
    /// Bytes of the last element (for the RAM budget).
    element_bytes: AtomicU64,
    log: AtomicBool,
}

impl Knob {
    /// A knob starting at `start`; fixed (never tuned) unless `tuned`.
    pub(crate) fn new(kind: KnobKind, start: usize, max: usize, tuned: bool) -> Arc<Knob> {
        Arc::new(Knob {
            kind,
            value: AtomicUsize::new(start.max(1)),
            max: AtomicUsize::new(max.max(1)),
            tuned,
            stage: Mutex::new(String::new()),
            reason: Mutex::new(if tuned { "not measured yet".into() } else { "set by the pipeline".into() }),
            history: Mutex::new(Vec::new()),
            work_ns: AtomicU64::new(0),
            produced: AtomicU64::new(0),
            demand_ns: AtomicU64::new(0),
            wait_ns: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            element_bytes: AtomicU64::new(0),
            log: AtomicBool::new(false),
        })
    }

    /// The value to use now.
    pub(crate) fn get(&self) -> usize {
        self.value.load(Ordering::Relaxed)
    }

    /// Names the stage and applies the budget (called when an iterator is made).
    pub(crate) fn attach(&self, stage: &str, budget: &Budget) {
        *self.stage.lock().unwrap_or_else(|p| p.into_inner()) = stage.to_string();
        self.log.store(budget.log, Ordering::Relaxed);
        if self.tuned && self.kind == KnobKind::Parallelism {
            self.max.store(budget.cpu.max(1), Ordering::Relaxed);
            if self.get() > budget.cpu.max(1) {
                self.value.store(budget.cpu.max(1), Ordering::Relaxed);
            }
        }
    }

    /// Sets the upper bound (a prefetch buffer's share of the RAM budget, in elements).
    pub(crate) fn set_max(&self, max: usize) {
        self.max.store(max.max(1), Ordering::Relaxed);
    }

    pub(crate) fn record_work(&self, d: Duration, bytes: u64) {
        self.work_ns.fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
        self.produced.fetch_add(1, Ordering::Relaxed);
        if bytes > 0 {
            self.element_bytes.store(bytes, Ordering::Relaxed);
        }
    }

    /// One consumer request: `demand` since the previous request returned, `wait` inside it.
    pub(crate) fn record_request(&self, demand: Duration, wait: Duration) {
        self.demand_ns.fetch_add(demand.as_nanos() as u64, Ordering::Relaxed);
        self.wait_ns.fetch_add(wait.as_nanos() as u64, Ordering::Relaxed);
        let n = self.requests.fetch_add(1, Ordering::Relaxed) + 1;
        if self.tuned && n >= WINDOW {
            self.decide();
        }
    }

    pub(crate) fn element_bytes(&self) -> u64 {
        self.element_bytes.load(Ordering::Relaxed)
    }

    /// One tuning decision from the window's measurements; resets the window.
    fn decide(&self) {
        let requests = self.requests.swap(0, Ordering::Relaxed).max(1);
        let produced = self.produced.swap(0, Ordering::Relaxed);
        let work = self.work_ns.swap(0, Ordering::Relaxed);
        let demand = self.demand_ns.swap(0, Ordering::Relaxed);
        let wait = self.wait_ns.swap(0, Ordering::Relaxed);
        if produced == 0 {
            return;
        }
        let t_work = work as f64 / produced as f64;
        let t_demand = (demand as f64 / requests as f64).max(1.0);
        let waited = wait as f64 / (wait + demand).max(1) as f64;
        let old = self.get();
        let max = self.max.load(Ordering::Relaxed);
        let ms = |ns: f64| ns / 1e6;
        let (new, reason) = match self.kind {
            KnobKind::Parallelism => {
                let need = (t_work / t_demand).ceil().max(1.0) as usize;
                let new = need.min(max);
                let demand = if t_demand < 10_000.0 {
                    "the consumer takes elements as fast as they come".to_string()
                } else {
                    format!("the consumer asks every {:.2} ms", ms(t_demand))
                };
                let why = if need > max {
                    format!(
                        "an element takes {:.2} ms and {demand}: more workers would help, the CPU budget allows {max}",
                        ms(t_work)
                    )
                } else {
                    format!("an element takes {:.2} ms and {demand}: {need} worker(s) needed", ms(t_work))
                };
                // Hysteresis: drop by one at a time, and only when clearly over-provisioned.
                let new = if new < old {
                    if need + 1 < old {
                        old - 1
                    } else {
                        old
                    }
                } else {
                    new
                };
                (new, why)
            }
            KnobKind::BufferSize => {
                let bytes = self.element_bytes().max(1);
                if waited > 0.02 && t_work <= t_demand * 1.1 && old < max {
                    (old + 1, format!(
                        "the consumer waited {:.0}% of the time although the producer keeps up on average ({:.2} ms vs {:.2} ms per element); {} elements of {} KiB fit the RAM budget",
                        waited * 100.0, ms(t_work), ms(t_demand), max, bytes / 1024
                    ))
                } else if waited > 0.02 && t_work > t_demand * 1.1 {
                    (old, format!(
                        "the producer is the bottleneck ({:.2} ms per element vs {:.2} ms of consumer work): a bigger buffer would not help; speed up the stages before it",
                        ms(t_work), ms(t_demand)
                    ))
                } else {
                    (old, format!("the consumer rarely waits ({:.1}% of the time)", waited * 100.0))
                }
            }
        };
        *self.reason.lock().unwrap_or_else(|p| p.into_inner()) = reason.clone();
        if new != old {
            self.value.store(new, Ordering::Relaxed);
            let stage = self.stage.lock().unwrap_or_else(|p| p.into_inner()).clone();
            if self.log.load(Ordering::Relaxed) {
                log::info!("autotune {stage}: {} {old} -> {new} ({reason})", self.kind);
            }
            self.history.lock().unwrap_or_else(|p| p.into_inner()).push((old, new, reason));
        }
    }

    pub(crate) fn report(&self) -> TunedStage {
        TunedStage {
            stage: self.stage.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            kind: self.kind,
            value: self.get(),
            reason: self.reason.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            history: self.history.lock().unwrap_or_else(|p| p.into_inner()).clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallelism_follows_work_over_demand_within_the_budget() {
        let k = Knob::new(KnobKind::Parallelism, 1, 8, true);
        k.attach("Iterator::Root::ParallelMap", &Budget { cpu: 3, ram_bytes: 1 << 30, log: false });
        for _ in 0..WINDOW {
            k.record_work(Duration::from_millis(4), 100);
            k.record_request(Duration::from_millis(1), Duration::ZERO);
        }
        assert_eq!(k.get(), 3, "needs 4, capped at the CPU budget of 3");
        let r = k.report();
        assert_eq!(r.history.len(), 1);
        assert!(r.reason.contains("the CPU budget allows 3"), "{}", r.reason);
    }

    #[test]
    fn a_buffer_grows_only_when_the_producer_keeps_up() {
        let k = Knob::new(KnobKind::BufferSize, 1, 4, true);
        for _ in 0..WINDOW {
            k.record_work(Duration::from_millis(5), 100);
            k.record_request(Duration::from_millis(1), Duration::from_millis(4));
        }
        assert_eq!(k.get(), 1, "a slow producer is not helped by a bigger buffer");
        assert!(k.report().reason.contains("bottleneck"));
        for _ in 0..WINDOW {
            k.record_work(Duration::from_millis(1), 100);
            k.record_request(Duration::from_millis(2), Duration::from_millis(1));
        }
        assert_eq!(k.get(), 2);
    }
}
