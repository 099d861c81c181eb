//! FNV-1a, 64 bit: a hash that is the same across runs, builds and machines (unlike
//! `std`'s `DefaultHasher`), for what processes compare or files keep: the fingerprints
//! ranks exchange (graphs, variables, steps) and the keys of dataset caches.
use std::hash::Hasher;

use crate::Tensor;

/// An FNV-1a 64 hasher.
#[derive(Clone, Copy, Debug)]
pub struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a {
    /// The hash of `bytes`.
    pub fn of(bytes: &[u8]) -> u64 {
        let mut h = Fnv1a::default();
        h.write(bytes);
        h.finish()
    }

    /// Adds a tensor: its dtype, dims and contents (strings with their lengths).
    pub fn write_tensor(&mut self, t: &Tensor) {
        self.write(t.dtype().to_string().as_bytes());
        for d in t.dims() {
            self.write(&(*d as u64).to_le_bytes());
        }
        if let Ok(b) = t.as_bytes() {
            self.write(b);
        } else if let Ok(s) = t.as_strings() {
            for x in s {
                self.write(&(x.len() as u64).to_le_bytes());
                self.write(x);
            }
        }
    }
}

impl Hasher for Fnv1a {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= b as u64;
            self.0 = self.0.wrapping_mul(0x100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // FNV-1a 64's published test vectors.
        assert_eq!(Fnv1a::of(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(Fnv1a::of(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(Fnv1a::of(b"foobar"), 0x8594_4171_f739_67e8);
    }
}
