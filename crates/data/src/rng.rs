//! The pipeline's random numbers: a small, fast generator (SplitMix64-seeded xoshiro256**)
//! whose streams are fixed by a seed, so a seeded pipeline is reproducible.

/// xoshiro256**.
#[derive(Clone)]
pub(crate) struct Rng([u64; 4]);

fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        let mut s = seed;
        Rng([splitmix(&mut s), splitmix(&mut s), splitmix(&mut s), splitmix(&mut s)])
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        let s = &mut self.0;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in `0..n` (Lemire's method, unbiased).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        let n = n as u64;
        loop {
            let m = (self.next_u64() as u128) * (n as u128);
            if (m as u64) >= n.wrapping_neg() % n {
                return (m >> 64) as usize;
            }
        }
    }

    /// Fisher–Yates.
    pub(crate) fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
}

/// `seed`, or a fresh one from the clock and a counter when none is given.
pub(crate) fn seed_or_random(seed: Option<u64>) -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    seed.unwrap_or_else(|| {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        let mut s = t ^ COUNTER.fetch_add(1, Ordering::Relaxed).rotate_left(32) ^ std::process::id() as u64;
        splitmix(&mut s)
    })
}

/// The seed of iteration `epoch` of a stage seeded with `seed`.
pub(crate) fn epoch_seed(seed: u64, epoch: u64) -> u64 {
    let mut s = seed ^ epoch.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    splitmix(&mut s)
}
