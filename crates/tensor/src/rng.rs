//! ferroflow's one generator for its own random choices: the input pipeline's shuffles and
//! random augmentations, `Model::fit`'s epoch order, and the inputs and file mutations tests
//! generate. It is xoshiro256** seeded through SplitMix64: small, fast, and fixed by its seed
//! on every machine, so a seeded pipeline or test reproduces. TensorFlow's own random ops
//! (Philox, bit-compatible with TensorFlow) live with their kernels; nothing here is for
//! cryptography.

/// One step of SplitMix64: advances `state` and returns the next output. It spreads a seed
/// over the generator's state and derives per-epoch seeds from a base seed.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// xoshiro256** (Blackman and Vigna), its state filled by SplitMix64 from a seed.
#[derive(Debug, Clone)]
pub struct Rng([u64; 4]);

impl Rng {
    /// The generator whose stream `seed` fixes.
    pub fn new(seed: u64) -> Rng {
        let mut s = seed;
        Rng([splitmix64(&mut s), splitmix64(&mut s), splitmix64(&mut s), splitmix64(&mut s)])
    }

    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
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

    /// Uniform in `0..n`, without modulo bias (Lemire's method); 0 when `n` is 0.
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        let n = n as u64;
        loop {
            let m = (self.next_u64() as u128) * (n as u128);
            if (m as u64) >= n.wrapping_neg() % n {
                return (m >> 64) as usize;
            }
        }
    }

    /// Uniform in [0, 1), from the top 53 bits.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Puts `v` in uniformly random order (Fisher–Yates).
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{splitmix64, Rng};

    #[test]
    fn splitmix64_matches_the_reference() {
        // Vigna's splitmix64.c from state 0.
        let mut s = 0;
        let got: Vec<u64> = (0..4).map(|_| splitmix64(&mut s)).collect();
        assert_eq!(got, [0xe220_a839_7b1d_cdaf, 0x6e78_9e6a_a1b9_65f4, 0x06c4_5d18_8009_454f, 0xf88b_b8a8_724c_81ec]);
    }

    #[test]
    fn xoshiro256starstar_matches_the_reference() {
        // Blackman and Vigna's xoshiro256starstar.c from state [1, 2, 3, 4] (the vector
        // rand_xoshiro checks too).
        let mut r = Rng([1, 2, 3, 4]);
        let got: Vec<u64> = (0..10).map(|_| r.next_u64()).collect();
        assert_eq!(
            got,
            [
                11520,
                0,
                1509978240,
                1215971899390074240,
                1216172134540287360,
                607988272756665600,
                16172922978634559625,
                8476171486693032832,
                10595114339597558777,
                2904607092377533576
            ]
        );
    }

    #[test]
    fn below_unit_and_shuffle_stay_in_range() {
        let mut r = Rng::new(7);
        assert_eq!(r.below(0), 0);
        let mut counts = [0usize; 3];
        for _ in 0..3000 {
            counts[r.below(3)] += 1;
        }
        assert!(counts.iter().all(|&c| (800..1200).contains(&c)), "{counts:?}");
        assert!((0..1000).map(|_| r.unit()).all(|u| (0.0..1.0).contains(&u)));
        let mut v: Vec<usize> = (0..100).collect();
        r.shuffle(&mut v);
        assert_ne!(v, (0..100).collect::<Vec<_>>());
        v.sort_unstable();
        assert_eq!(v, (0..100).collect::<Vec<_>>());
    }
}
