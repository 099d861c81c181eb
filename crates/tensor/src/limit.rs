//! The memory limit that every tensor allocation whose size comes from data is checked
//! against before anything is allocated: a crafted shape, a fed `multiples` or a zip member's
//! declared size then fails with [`TensorError::ResourceExhausted`] (the size asked for and the
//! limit) instead of aborting the process or driving it out of memory.
//!
//! The limit is per thread, so each session sets its own on the threads that run its steps
//! ([`set_thread_limit`] in its pools, [`scoped`] around a step on the calling thread); code
//! outside a session gets [`default_limit`], a large fraction of the machine's memory.
use std::cell::Cell;
use std::sync::OnceLock;

use crate::TensorError;

thread_local! {
    /// This thread's limit in bytes; 0 means the default.
    static LIMIT: Cell<usize> = const { Cell::new(0) };
}

/// Physical memory in bytes, when the system says.
fn physical_memory() -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sysconf only reads system configuration.
        let (pages, page) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
        if pages > 0 && page > 0 {
            return (pages as usize).checked_mul(page as usize);
        }
    }
    None
}

/// The process's address-space limit (`ulimit -v`), when it has one.
fn address_space_limit() -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: getrlimit writes the struct it is given.
        if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut r) } == 0 && r.rlim_cur != libc::RLIM_INFINITY {
            return usize::try_from(r.rlim_cur).ok();
        }
    }
    None
}

/// The limit outside a session: 3/4 of physical memory (16 GiB where that is unknown), and
/// at most half of an address-space limit (the rest is code, stacks and other tensors).
pub fn default_limit() -> usize {
    static DEFAULT: OnceLock<usize> = OnceLock::new();
    *DEFAULT.get_or_init(|| {
        let physical = physical_memory().map_or(16 << 30, |m| m / 4 * 3);
        address_space_limit().map_or(physical, |a| physical.min(a / 2))
    })
}

/// The limit in force on this thread.
pub fn current() -> usize {
    match LIMIT.with(Cell::get) {
        0 => default_limit(),
        n => n,
    }
}

/// Sets this thread's limit (0: the default) for as long as it lives (a pool's start handler).
pub fn set_thread_limit(bytes: usize) {
    LIMIT.with(|l| l.set(bytes));
}

/// Restores the previous limit when dropped.
pub struct Scope {
    previous: usize,
}

impl Drop for Scope {
    fn drop(&mut self) {
        LIMIT.with(|l| l.set(self.previous));
    }
}

/// Sets this thread's limit until the returned guard drops (0: leave it as it is).
pub fn scoped(bytes: usize) -> Scope {
    let previous = LIMIT.with(Cell::get);
    if bytes != 0 {
        LIMIT.with(|l| l.set(bytes));
    }
    Scope { previous }
}

/// Allocations this small are not checked (the executor's scalars and small tensors, most of
/// its allocations, skip the thread-local lookup); no useful limit is below it.
pub const ALWAYS_ALLOWED: usize = 4096;

/// Checks that `bytes` fit the limit; `what` describes the allocation for the error
/// (`float tensor of shape [65536, 65536]`).
#[inline]
pub fn check(bytes: usize, what: impl FnOnce() -> String) -> Result<(), TensorError> {
    if bytes <= ALWAYS_ALLOWED {
        return Ok(());
    }
    let limit = current();
    if bytes > limit {
        return Err(TensorError::ResourceExhausted { what: what(), bytes, limit });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scoped_limits_nest_and_restore() {
        let outer = current();
        {
            let _a = scoped(10_000);
            assert_eq!(current(), 10_000);
            assert!(check(10_000, String::new).is_ok());
            let e = check(10_001, || "x".into()).unwrap_err().to_string();
            assert!(e.contains("10001 bytes") && e.contains("10000"), "{e}");
            {
                let _b = scoped(0);
                assert_eq!(current(), 10_000, "0 keeps the limit in force");
            }
            let _c = scoped(100);
            assert!(check(ALWAYS_ALLOWED, String::new).is_ok(), "small allocations are not checked");
            assert!(check(ALWAYS_ALLOWED + 1, String::new).is_err());
        }
        assert_eq!(current(), outer);
    }
}
