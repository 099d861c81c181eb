//! Corrupted files never panic: thousands of truncations and byte mutations of real
//! TensorFlow files go through the parsers, GraphDef import and shape inference, and each ends
//! in `Ok` or a clean error.
use std::path::Path;

use ferroflow::tensor::npy;

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tf").join(name)).unwrap()
}

/// A small deterministic generator (xorshift), so failures reproduce.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn mutations(original: &[u8], count: usize, seed: u64) -> impl Iterator<Item = Vec<u8>> + '_ {
    let mut rng = Rng(seed);
    (0..count).map(move |i| {
        let mut b = original.to_vec();
        if i % 4 == 0 {
            b.truncate(rng.below(original.len()));
        } else {
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(b.len());
                b[at] = rng.next() as u8;
            }
        }
        b
    })
}

#[test]
fn mutated_graph_defs_never_panic() {
    for name in ["mlp.pb", "array_ops.pb", "edge.pb"] {
        let original = fixture(name);
        for bytes in mutations(&original, 1500, 0x9E3779B97F4A7C15) {
            if let Ok(def) = ferroflow::proto::decode::<ferroflow::proto::GraphDef>(&bytes, name) {
                let _ = ferroflow::ops::import_graph_def(&def);
            }
        }
    }
}

#[test]
fn mutated_text_graph_defs_never_panic() {
    let original = fixture("mlp.pbtxt");
    for bytes in mutations(&original, 600, 0xD1B54A32D192ED03) {
        let text = String::from_utf8_lossy(&bytes);
        if let Ok(def) = ferroflow::proto::parse_text::<ferroflow::proto::GraphDef>(&text, "mlp.pbtxt") {
            let _ = ferroflow::ops::import_graph_def(&def);
        }
    }
}

#[test]
fn mutated_npy_and_npz_never_panic() {
    let npz = fixture("array_ops.inputs.npz");
    for bytes in mutations(&npz, 1500, 0x94D049BB133111EB) {
        let _ = npy::read_npz_from(std::io::Cursor::new(bytes), "x.npz");
    }
    let members =
        npy::read_npz(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tf/array_ops.inputs.npz")).unwrap();
    let one = npy::write_npy_bytes(&members[0].1).unwrap();
    for bytes in mutations(&one, 3000, 0xBF58476D1CE4E5B9) {
        let _ = npy::read_npy_bytes(&bytes, "x.npy");
    }
}
