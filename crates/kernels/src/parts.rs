//! Splitting a kernel's work into parts that the calling thread runs too.
//!
//! A kernel called from a thread outside the intra-op pool (the executor runs small steps on
//! the session's caller) would, through `ThreadPool::install`, hand all its work to the pool
//! and sleep until a pool thread wakes it: two wake-ups per kernel, each 30–45 us on this
//! machine kind (a VM), as long as the kernel itself. [`for_each_part`] instead posts helper
//! jobs and has the caller claim parts from a shared counter at once; helpers that wake in
//! time claim the rest. The caller never sleeps, and a kernel is never slower than on one
//! thread by more than the cost of posting the jobs: parts no helper has claimed, the caller
//! runs itself.
use std::any::Any;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// A thread pool of `threads` threads named `ferroflow-<name>-<i>`, each holding the
/// allocation limit `memory_limit` (0: the default; see `ferroflow_tensor::limit`): how
/// sessions make their inter- and intra-op pools and eager execution its own.
pub fn thread_pool(
    threads: usize,
    name: &'static str,
    memory_limit: usize,
) -> Result<rayon::ThreadPool, rayon::ThreadPoolBuildError> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(move |i| format!("ferroflow-{name}-{i}"))
        .start_handler(move |_| ferroflow_tensor::limit::set_thread_limit(memory_limit))
        .build()
}

/// The work shared by the caller and its helpers.
struct Shared {
    /// The next part to claim (claims past `parts` find nothing).
    next: AtomicUsize,
    /// Parts finished (or abandoned to a panic).
    done: AtomicUsize,
    parts: usize,
    /// The caller's closure, its lifetime erased: it is called only for a claimed part, and
    /// the caller does not return until every claimed part is done (see [`for_each_part`]).
    f: *const (dyn Fn(usize) + Sync),
    /// A part's panic, re-raised on the caller.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
}

// SAFETY: `f` points to a `Sync` closure that outlives every call made through it (see the
// field's comment); the other fields are thread-safe.
unsafe impl Send for Shared {}
// SAFETY: as above.
unsafe impl Sync for Shared {}

impl Shared {
    /// Claims and runs parts until none is left.
    fn work(&self) {
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.parts {
                return;
            }
            // SAFETY: part `i` is claimed and not done, so the caller is still waiting in
            // `for_each_part` and the closure is alive.
            let f = unsafe { &*self.f };
            if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(i))) {
                self.panic.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(p);
            }
            self.done.fetch_add(1, Ordering::Release);
        }
    }
}

/// Runs `f(0) .. f(parts - 1)`, each once, on the calling thread and on up to
/// `pool.current_num_threads() - 1` helper jobs posted to `pool`; returns when all are done.
/// The same from a thread of `pool` itself: rayon's own split would have that thread wait
/// (and sleep) for a sleeping thread to wake and steal its other half.
pub(crate) fn for_each_part(pool: &rayon::ThreadPool, parts: usize, f: &(dyn Fn(usize) + Sync)) {
    let threads = pool.current_num_threads();
    if parts <= 1 || threads <= 1 {
        (0..parts).for_each(f);
        return;
    }
    // SAFETY (of the transmute): only the lifetime is erased; see `Shared::f`.
    let f: *const (dyn Fn(usize) + Sync + 'static) =
        unsafe { std::mem::transmute::<*const (dyn Fn(usize) + Sync + '_), _>(f as *const _) };
    let shared =
        Arc::new(Shared { next: AtomicUsize::new(0), done: AtomicUsize::new(0), parts, f, panic: Mutex::new(None) });
    for _ in 1..threads.min(parts) {
        let s = shared.clone();
        pool.spawn(move || s.work());
    }
    shared.work();
    // Every part is claimed; wait for those a helper is still running (a part's time at most).
    let mut spins = 0u32;
    while shared.done.load(Ordering::Acquire) < parts {
        spins += 1;
        if spins < 1 << 14 {
            std::hint::spin_loop();
        } else {
            // The helper may be off its core (more threads than cores): let it run.
            std::thread::yield_now();
        }
    }
    let panic = shared.panic.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(p) = panic {
        std::panic::resume_unwind(p);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn every_part_runs_once_from_outside_and_inside_the_pool() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        for parts in [0, 1, 2, 3, 17, 100] {
            let hits: Vec<AtomicUsize> = (0..parts).map(|_| AtomicUsize::new(0)).collect();
            super::for_each_part(&pool, parts, &|i| {
                hits[i].fetch_add(1, Ordering::Relaxed);
            });
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1), "{parts} parts from outside");
            pool.install(|| {
                super::for_each_part(&pool, parts, &|i| {
                    hits[i].fetch_add(1, Ordering::Relaxed);
                })
            });
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 2), "{parts} parts from inside");
        }
    }

    #[test]
    fn chunks_cover_the_slice_once_in_order_of_their_index() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let ctx = crate::KernelContext { intra_op: Some(&pool), resources: None, step: None };
        for (n, chunk) in [(0, 4), (1, 4), (10, 3), (4096, 1000), (100_000, 8192), (7, 0)] {
            let mut v = vec![0usize; n];
            ctx.for_each_chunk_mut(&mut v, chunk, |i, c| {
                for (j, e) in c.iter_mut().enumerate() {
                    *e += i * chunk.max(1) + j + 1;
                }
            });
            assert!(v.iter().enumerate().all(|(k, &e)| e == k + 1), "{n} elements in chunks of {chunk}");
        }
    }

    #[test]
    fn a_panicking_part_reaches_the_caller() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let done = AtomicUsize::new(0);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            super::for_each_part(&pool, 8, &|i| {
                if i == 5 {
                    panic!("part 5 failed");
                }
                done.fetch_add(1, Ordering::Relaxed);
            })
        }));
        let msg = r.expect_err("the panic is re-raised");
        assert_eq!(msg.downcast_ref::<&str>(), Some(&"part 5 failed"));
        assert_eq!(done.load(Ordering::Relaxed), 7, "the other parts still ran");
    }
}
