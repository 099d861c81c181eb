//! Scratch buffers (im2col blocks, Winograd matrices, epilogue scratch) shared by every
//! convolution of the process: a task takes a set of buffers and gives it back, so memory is
//! about one set per task running at once, whatever the number of convolutions in the graphs.

/// The sets of buffers given back, of any types.
static SCRATCH: std::sync::Mutex<Vec<Box<dyn std::any::Any + Send>>> = std::sync::Mutex::new(Vec::new());
/// Most sets [`SCRATCH`] keeps.
const SCRATCH_SETS: usize = 16;

/// A set of scratch buffers taken from [`SCRATCH`], given back when dropped.
pub(super) struct Lease<S: Default + Send + 'static> {
    pub(super) bufs: S,
}

impl<S: Default + Send + 'static> Lease<S> {
    /// A set of buffers of type `S` from the pool, or a new one.
    pub(super) fn take() -> Lease<S> {
        let found = SCRATCH.lock().ok().and_then(|mut pool| {
            let i = pool.iter().position(|b| b.is::<S>())?;
            Some(pool.swap_remove(i))
        });
        Lease { bufs: found.and_then(|b| b.downcast::<S>().ok()).map_or_else(S::default, |b| *b) }
    }
}

impl<S: Default + Send + 'static> Drop for Lease<S> {
    fn drop(&mut self) {
        if let Ok(mut pool) = SCRATCH.lock() {
            if pool.len() < SCRATCH_SETS {
                pool.push(Box::new(std::mem::take(&mut self.bufs)));
            }
        }
    }
}
