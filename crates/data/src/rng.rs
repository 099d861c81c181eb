//! The pipeline's seeds: a stage's seed, given or drawn, and the seed of each of its
//! iterations. The generator itself is [`ferroflow_tensor::rng::Rng`].
use ferroflow_tensor::rng::splitmix64;

/// `seed`, or a fresh one from the clock and a counter when none is given.
pub(crate) fn seed_or_random(seed: Option<u64>) -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    seed.unwrap_or_else(|| {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        let mut s = t ^ COUNTER.fetch_add(1, Ordering::Relaxed).rotate_left(32) ^ std::process::id() as u64;
        splitmix64(&mut s)
    })
}

/// The seed of iteration `epoch` of a stage seeded with `seed`.
pub(crate) fn epoch_seed(seed: u64, epoch: u64) -> u64 {
    let mut s = seed ^ epoch.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    splitmix64(&mut s)
}
