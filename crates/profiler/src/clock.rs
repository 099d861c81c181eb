//! Timestamps for trace events: the CPU's time-stamp counter where it is invariant (a
//! `rdtsc` is ~15 ns here, where `Instant::now` costs ~60 ns under this machine's
//! virtualisation), else a monotonic clock in ns. Ticks are turned into ns since the
//! profile's start with a scale measured across the profile itself.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

static SYSTEM_CLOCK: AtomicBool = AtomicBool::new(false);

/// Makes trace timestamps come from the system's monotonic clock even where the time-stamp
/// counter is invariant (for a machine whose TSC the kernel flags wrongly, or to compare the
/// two). Takes effect only before the first timestamp of the process is taken.
pub fn use_system_clock() {
    SYSTEM_CLOCK.store(true, Ordering::Relaxed);
}

/// Whether the time-stamp counter ticks at a constant rate across cores and sleep states.
fn tsc_usable() -> bool {
    static USABLE: OnceLock<bool> = OnceLock::new();
    *USABLE.get_or_init(|| {
        cfg!(target_arch = "x86_64")
            && !SYSTEM_CLOCK.load(Ordering::Relaxed)
            && std::fs::read_to_string("/proc/cpuinfo")
                .map(|s| {
                    let flags = s.lines().find(|l| l.starts_with("flags")).unwrap_or("");
                    flags.split_whitespace().any(|f| f == "constant_tsc")
                        && flags.split_whitespace().any(|f| f == "nonstop_tsc")
                })
                .unwrap_or(false)
    })
}

fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

/// Now, in ticks (counter cycles, or ns since the process's first use of this clock).
#[inline]
pub fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    if tsc_usable() {
        // SAFETY: rdtsc has no preconditions on x86_64.
        return unsafe { core::arch::x86_64::_rdtsc() };
    }
    origin().elapsed().as_nanos() as u64
}

/// A pair of readings of both clocks, to scale ticks into nanoseconds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Anchor {
    pub(crate) ticks: u64,
    pub(crate) at: Instant,
}

impl Anchor {
    pub(crate) fn now() -> Anchor {
        Anchor { ticks: ticks(), at: Instant::now() }
    }
}

/// Nanoseconds per tick between two anchors (1 for the ns clock); short profiles measure
/// over a few more milliseconds so the scale is not noise.
pub(crate) fn ns_per_tick_between(start: Anchor, mut end: Anchor) -> f64 {
    if !tsc_usable() {
        return 1.0;
    }
    while end.at.duration_since(start.at).as_millis() < 20 {
        std::thread::sleep(std::time::Duration::from_millis(5));
        end = Anchor::now();
    }
    let ns = end.at.duration_since(start.at).as_nanos() as f64;
    ns / (end.ticks.saturating_sub(start.ticks)).max(1) as f64
}

/// Nanoseconds per tick, measured once per process (over 10 ms, the first time it is asked
/// for); 1 for the ns clock. For converting short spans such as one traced step.
pub fn ns_per_tick() -> f64 {
    static SCALE: OnceLock<f64> = OnceLock::new();
    *SCALE.get_or_init(|| {
        if !tsc_usable() {
            return 1.0;
        }
        let start = Anchor::now();
        std::thread::sleep(std::time::Duration::from_millis(10));
        let end = Anchor::now();
        end.at.duration_since(start.at).as_nanos() as f64 / end.ticks.saturating_sub(start.ticks).max(1) as f64
    })
}
