//! A small deterministic generator for tests (xorshift64), so that generated inputs and
//! mutated files are the same on every run and a failure reproduces. Not for anything that
//! needs statistical quality or unpredictability.

/// Marsaglia's xorshift64 (shifts 13, 7, 17). The state must not be zero.
#[derive(Debug, Clone)]
pub struct XorShift(pub u64);

impl XorShift {
    /// A generator whose state is `seed` spread over the word (never zero).
    pub fn seeded(seed: u64) -> XorShift {
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next 64 bits.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A value in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    /// A value in [0, 1) from the top 53 bits.
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::XorShift;

    #[test]
    fn the_sequence_is_xorshift64() {
        let mut r = XorShift(1);
        // x ^= x << 13; x ^= x >> 7; x ^= x << 17 from 1.
        assert_eq!(r.next(), 0x0000_0000_4082_2041);
        let u = r.unit();
        assert!((0.0..1.0).contains(&u));
        assert!(r.below(10) < 10);
        assert_eq!(r.below(0), 0);
    }
}
