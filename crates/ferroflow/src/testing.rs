//! Comparing ferroflow's outputs with TensorFlow's: the fixture manifest and a tolerance
//! check shared by the test suites, the CLI demo and the comparison scripts.
use std::path::Path;

use ferroflow_tensor::{DType, Tensor};

/// One fixture listed in `fixtures/tf/MANIFEST`.
#[derive(Clone, Debug)]
pub struct Fixture {
    /// Base name: `NAME.pb`, `NAME.pbtxt`, `NAME.inputs.npz`, `NAME.expected.npz`.
    pub name: String,
    /// Relative tolerance for floating-point outputs.
    pub rtol: f64,
    /// Absolute tolerance for floating-point outputs.
    pub atol: f64,
    /// The op types the graph contains.
    pub ops: Vec<String>,
}

/// Reads a fixture manifest: lines `name rtol atol op...`, `#` comments.
pub fn read_manifest(path: &Path) -> Result<Vec<Fixture>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut parts = line.split_whitespace();
        let bad = || format!("{}:{}: expected 'name rtol atol ops...'", path.display(), i + 1);
        let name = parts.next().ok_or_else(bad)?.to_string();
        let rtol = parts.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
        let atol = parts.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
        out.push(Fixture { name, rtol, atol, ops: parts.map(String::from).collect() });
    }
    Ok(out)
}

fn as_f64(t: &Tensor) -> Option<Vec<f64>> {
    Some(match t.dtype() {
        DType::Float => t.as_slice::<f32>().ok()?.iter().map(|&v| v as f64).collect(),
        DType::Double => t.as_slice::<f64>().ok()?.to_vec(),
        _ => return None,
    })
}

/// How a tensor differs from what was expected (dtype, shape, or the first element off by
/// more than the tolerance).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct Mismatch(pub String);

/// Checks `got` against `want`: same dtype and shape; floats within `atol + rtol * |want|`
/// (NaN matches NaN, infinities must match exactly); everything else bit-equal. Returns the
/// largest absolute error seen on success.
pub fn compare(got: &Tensor, want: &Tensor, rtol: f64, atol: f64) -> Result<f64, Mismatch> {
    if got.dtype() != want.dtype() {
        return Err(Mismatch(format!("dtype {} != expected {}", got.dtype(), want.dtype())));
    }
    if got.dims() != want.dims() {
        return Err(Mismatch(format!("shape {:?} != expected {:?}", got.dims(), want.dims())));
    }
    let (Some(g), Some(w)) = (as_f64(got), as_f64(want)) else {
        return if got == want {
            Ok(0.0)
        } else {
            Err(Mismatch(format!("values {} != expected {}", got.preview(8), want.preview(8))))
        };
    };
    let mut max_err = 0f64;
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        if a.is_nan() && b.is_nan() {
            continue;
        }
        if b.is_infinite() || a.is_infinite() {
            if a != b {
                return Err(Mismatch(format!("element {i}: {a} != expected {b}")));
            }
            continue;
        }
        let err = (a - b).abs();
        if err.is_nan() || err > atol + rtol * b.abs() {
            return Err(Mismatch(format!(
                "element {i}: {a} differs from expected {b} by {err:e} (rtol {rtol}, atol {atol})"
            )));
        }
        max_err = max_err.max(err);
    }
    Ok(max_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare_catches_differences() {
        let a = Tensor::from_vec(&[2], vec![1.0f32, f32::NAN]).unwrap();
        let b = Tensor::from_vec(&[2], vec![1.0f32 + 1e-7, f32::NAN]).unwrap();
        assert!(compare(&a, &b, 1e-5, 1e-6).is_ok());
        let c = Tensor::from_vec(&[2], vec![1.1f32, f32::NAN]).unwrap();
        assert!(compare(&a, &c, 1e-5, 1e-6).is_err());
        assert!(compare(&a, &Tensor::from_vec(&[2], vec![1.0f64, 0.0]).unwrap(), 1.0, 1.0).is_err());
        assert!(compare(&Tensor::scalar(1i32), &Tensor::scalar(2i32), 1.0, 1.0).is_err());
    }
}

/// Benchmark graphs for executor overhead, built the same way here and in TensorFlow by
/// `scripts/bench_executor.py`.
pub mod graphs {
    use crate::prelude::*;

    /// `x` (a fed scalar) through a chain of `n` `Square` ops: no parallelism, pure
    /// per-op dispatch cost. Returns the graph and the fetch name.
    pub fn chain(n: usize) -> (Graph, String) {
        let s = Scope::new();
        let mut v = s.with_name("x").placeholder(DType::Float, &Shape::scalar()).expect("placeholder");
        for _ in 0..n {
            v = s.unary("Square", v).expect("square");
        }
        let g = s.graph();
        let fetch = g.output_name(v);
        (g, fetch)
    }

    /// `n` independent `Square` ops on the fed scalar `x`, stacked by one `Pack`: the
    /// executor's cost of fanning out and joining. Returns the graph and the fetch name.
    pub fn wide(n: usize) -> (Graph, String) {
        let s = Scope::new();
        let x = s.with_name("x").placeholder(DType::Float, &Shape::scalar()).expect("placeholder");
        let outs: Vec<Output> = (0..n).map(|_| s.unary("Square", x).expect("square")).collect();
        let packed = s.pack_with(&outs, ferroflow::ops::attrs::Pack::new().axis(0)).expect("pack");
        let g = s.graph();
        let fetch = g.output_name(packed);
        (g, fetch)
    }

    /// An unrolled layered network of `layers` layers (the graph `scripts/bench_optimizer.py`
    /// builds in TensorFlow): per layer a MatMul with a constant weight, a bias from a
    /// constant subgraph `(a + b) * c`, BiasAdd, two identical scaled copies (a shared
    /// subexpression), their sum, Relu, two Identities and `Neg(Neg(.))`. 17 nodes a layer.
    pub fn layered(layers: usize, width: usize) -> (Graph, String) {
        let s = Scope::new();
        let x = s.with_name("x").placeholder(DType::Float, &Shape::new(vec![None, Some(width)])).expect("x");
        let mut h = x;
        let mut seed = 1u32;
        let mut next = move || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (seed >> 8) as f32 / (1u32 << 24) as f32 - 0.5
        };
        for i in 0..layers {
            let l = s.name_scope(&format!("layer{i}"));
            let mut vec = |n: usize| Tensor::from_vec(&[n], (0..n).map(|_| next()).collect()).expect("vector");
            let w = l.constant(&vec(width * width).reshaped(&[width, width]).expect("w")).expect("w");
            let a = l.constant(&vec(width)).expect("a");
            let b = l.constant(&vec(width)).expect("b");
            let c = l.constant(&Tensor::from_vec(&[width], vec![0.5f32; width]).expect("c")).expect("c");
            let bias = l.mul(l.add_v2(a, b).expect("add"), c).expect("mul");
            let z = l.bias_add(l.matmul(h, w, false, false).expect("matmul"), bias).expect("bias");
            let sc = l.scalar(0.25f32).expect("s");
            let d1 = l.mul(z, sc).expect("d1");
            let d2 = l.mul(z, sc).expect("d2");
            let r = l.relu(l.add_v2(d1, d2).expect("sum")).expect("relu");
            let r = l.identity(l.identity(r).expect("id")).expect("id");
            h = l.unary("Neg", l.unary("Neg", r).expect("neg")).expect("neg");
        }
        let out = s.with_name("out").identity(h).expect("out");
        let g = s.graph();
        let fetch = g.output_name(out);
        (g, fetch)
    }

    /// A dense network `sizes[0] -> sizes[1] -> ... `: MatMul + BiasAdd per layer, then the
    /// activation `act` (`"relu"`, or `"gelu"` = tanh-approximated GELU, an elementwise chain)
    /// on hidden layers and Softmax at the end. Input `x:0` is `[batch, sizes[0]]`.
    pub fn mlp(sizes: &[usize], act: &str) -> (Graph, String) {
        let s = Scope::new();
        let x = s.with_name("x").placeholder(DType::Float, &Shape::new(vec![None, Some(sizes[0])])).expect("x");
        let mut h = x;
        let mut seed = 7u32;
        let mut next = move || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            ((seed >> 8) as f32 / (1u32 << 24) as f32 - 0.5) * 0.1
        };
        for (i, pair) in sizes.windows(2).enumerate() {
            let (n_in, n_out) = (pair[0], pair[1]);
            let l = s.name_scope(&format!("dense{i}"));
            let w = Tensor::from_vec(&[n_in, n_out], (0..n_in * n_out).map(|_| next()).collect()).expect("w");
            let b = Tensor::from_vec(&[n_out], (0..n_out).map(|_| next()).collect()).expect("b");
            let w = l.constant(&w).expect("w");
            let b = l.constant(&b).expect("b");
            let z = l.bias_add(l.matmul(h, w, false, false).expect("matmul"), b).expect("bias");
            h = if i + 2 == sizes.len() {
                s.softmax(z).expect("softmax")
            } else if act == "gelu" {
                // 0.5 * z * (1 + tanh(0.7978845608 * (z + 0.044715 * z^3)))
                let k = |v: f32| l.scalar(v).expect("scalar");
                let z3 = l.mul(l.unary("Square", z).expect("sq"), z).expect("z3");
                let inner =
                    l.mul(k(0.797_884_6), l.add_v2(z, l.mul(k(0.044_715), z3).expect("m")).expect("a")).expect("m");
                let t = l.add_v2(k(1.0), l.unary("Tanh", inner).expect("tanh")).expect("a");
                l.mul(l.mul(k(0.5), z).expect("m"), t).expect("gelu")
            } else {
                l.relu(z).expect("relu")
            };
        }
        let g = s.graph();
        let fetch = g.output_name(h);
        (g, fetch)
    }
}

/// This process's peak resident set (`VmHWM` of `/proc/self/status`) in MB; `None` where
/// the file is not there (not Linux). The benchmarks print it as `peak_rss_mb=`.
pub fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: f64 = status.lines().find(|l| l.starts_with("VmHWM:"))?.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// Minor page faults of this process so far (`/proc/self/stat`'s `minflt`; `None` where the
/// system has no such file): fresh memory touched for the first time. A step that reuses
/// memory kept from the previous one takes almost none.
pub fn minor_page_faults() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count from after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(7)?.parse().ok()
}

/// Seconds per call of `f`: `warmup` untimed calls, then the median of 7 samples of `iters`
/// calls each (the examples' timing loop).
pub fn median_secs_per_call(warmup: usize, iters: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..warmup {
        f();
    }
    let iters = iters.max(1);
    let mut samples: Vec<f64> = (0..7)
        .map(|_| {
            let t = std::time::Instant::now();
            for _ in 0..iters {
                f();
            }
            t.elapsed().as_secs_f64() / iters as f64
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[3]
}
