//! Stateful random ops: `RandomUniform`, `RandomStandardNormal`, `TruncatedNormal`.
//!
//! Numbers come from Philox4x32-10 (the counter-based generator TensorFlow uses), keyed by
//! the op's `seed`; `seed2` selects the counter stream. Each op's generator state lives in
//! the session's [`ResourceMgr`](crate::resource::ResourceMgr) under the node's name, so a
//! node continues its sequence across steps and across the session's plans; with both seeds
//! 0 the key is drawn from the clock (non-deterministic, as in TensorFlow). The streams are
//! not bit-identical to TensorFlow's; the distributions are the same (tested statistically).
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use ferroflow_tensor::{DType, Tensor};

use crate::resource::RandomState;
use crate::{invalid, Inputs, KResult, KernelContext, KernelRegistry, NodeDesc, OpKernel, Outputs};

/// One Philox4x32-10 block.
pub fn philox(key: [u32; 2], ctr: [u32; 4]) -> [u32; 4] {
    const M0: u64 = 0xD251_1F53;
    const M1: u64 = 0xCD9E_8D57;
    const W0: u32 = 0x9E37_79B9;
    const W1: u32 = 0xBB67_AE85;
    let (mut k, mut c) = (key, ctr);
    for _ in 0..10 {
        let p0 = M0 * c[0] as u64;
        let p1 = M1 * c[2] as u64;
        c = [(p1 >> 32) as u32 ^ c[1] ^ k[0], p1 as u32, (p0 >> 32) as u32 ^ c[3] ^ k[1], p0 as u32];
        k = [k[0].wrapping_add(W0), k[1].wrapping_add(W1)];
    }
    c
}

/// Lanes of [`philox_lanes`]: two AVX-512 registers per counter word, so two independent
/// chains of rounds hide the multiplies' latency.
const LANES: usize = 32;

/// `LANES` Philox blocks at counters `base + 0 .. base + LANES` (low 64 bits; high 64 bits
/// `stream`): with AVX-512 in registers, else lane-parallel so the compiler vectorizes the
/// rounds (AVX2 when the CPU has it, checked at run time).
fn philox_lanes(key: [u32; 2], base: u64, stream: u64) -> [[u32; 4]; LANES] {
    #[cfg(target_arch = "x86_64")]
    if crate::isa::has_avx512f() {
        // SAFETY: the CPU supports AVX-512F (checked just above).
        return unsafe { philox_lanes_avx512(key, base, stream) };
    }
    crate::isa::avx2(
        #[inline(always)]
        || philox_lanes_impl(key, base, stream),
    )
}

/// [`philox_lanes_impl`] in AVX-512 registers: 16 blocks per register, the 32x32->64-bit
/// products of even and odd lanes taken separately (`vpmuludq`) and their halves blended
/// back, then the words transposed to block order. The same arithmetic, so the same bits.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn philox_lanes_avx512(key: [u32; 2], base: u64, stream: u64) -> [[u32; 4]; LANES] {
    use std::arch::x86_64::*;
    const G: usize = LANES / 16;
    const ODD: __mmask16 = 0xAAAA;
    // High and low 32 bits of `a * m` in each 32-bit lane.
    #[inline(always)]
    unsafe fn mulhilo(a: __m512i, m: __m512i) -> (__m512i, __m512i) {
        let even = _mm512_mul_epu32(a, m);
        let odd = _mm512_mul_epu32(_mm512_srli_epi64::<32>(a), m);
        let hi = _mm512_mask_blend_epi32(ODD, _mm512_srli_epi64::<32>(even), odd);
        let lo = _mm512_mask_blend_epi32(ODD, even, _mm512_slli_epi64::<32>(odd));
        (hi, lo)
    }
    let iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    let (blo, bhi) = (_mm512_set1_epi32(base as u32 as i32), _mm512_set1_epi32((base >> 32) as u32 as i32));
    // The four counter words of each group of 16 blocks.
    let mut c = [[_mm512_setzero_si512(); 4]; G];
    for (g, w) in c.iter_mut().enumerate() {
        let idx = _mm512_add_epi32(iota, _mm512_set1_epi32(16 * g as i32));
        let lo = _mm512_add_epi32(blo, idx);
        // The low word wrapped: carry into the high one.
        let carry = _mm512_cmplt_epu32_mask(lo, idx);
        *w = [
            lo,
            _mm512_mask_add_epi32(bhi, carry, bhi, _mm512_set1_epi32(1)),
            _mm512_set1_epi32(stream as u32 as i32),
            _mm512_set1_epi32((stream >> 32) as u32 as i32),
        ];
    }
    let m0 = _mm512_set1_epi32(0xD251_1F53u32 as i32);
    let m1 = _mm512_set1_epi32(0xCD9E_8D57u32 as i32);
    let (mut k0, mut k1) = (key[0], key[1]);
    for _ in 0..10 {
        let (vk0, vk1) = (_mm512_set1_epi32(k0 as i32), _mm512_set1_epi32(k1 as i32));
        for w in c.iter_mut() {
            let (hi0, lo0) = mulhilo(w[0], m0);
            let (hi1, lo1) = mulhilo(w[2], m1);
            // Three-way XOR (truth table 0x96).
            *w = [
                _mm512_ternarylogic_epi32::<0x96>(hi1, w[1], vk0),
                lo1,
                _mm512_ternarylogic_epi32::<0x96>(hi0, w[3], vk1),
                lo0,
            ];
        }
        k0 = k0.wrapping_add(0x9E37_79B9);
        k1 = k1.wrapping_add(0xBB67_AE85);
    }
    let mut out = [[0u32; 4]; LANES];
    for (g, w) in c.iter().enumerate() {
        // Word j of block l is lane l of w[j]: a 4x16 transpose. Per 128-bit lane i, u_k holds
        // block 4i + k; then the 128-bit lanes are transposed.
        let t0 = _mm512_unpacklo_epi32(w[0], w[1]);
        let t1 = _mm512_unpackhi_epi32(w[0], w[1]);
        let t2 = _mm512_unpacklo_epi32(w[2], w[3]);
        let t3 = _mm512_unpackhi_epi32(w[2], w[3]);
        let u0 = _mm512_unpacklo_epi64(t0, t2);
        let u1 = _mm512_unpackhi_epi64(t0, t2);
        let u2 = _mm512_unpacklo_epi64(t1, t3);
        let u3 = _mm512_unpackhi_epi64(t1, t3);
        let v0 = _mm512_shuffle_i32x4::<0b01_00_01_00>(u0, u1);
        let v1 = _mm512_shuffle_i32x4::<0b11_10_11_10>(u0, u1);
        let v2 = _mm512_shuffle_i32x4::<0b01_00_01_00>(u2, u3);
        let v3 = _mm512_shuffle_i32x4::<0b11_10_11_10>(u2, u3);
        let dst = out[16 * g..].as_mut_ptr() as *mut __m512i;
        // SAFETY: `out` has 16 blocks (four registers) from block 16g; unaligned stores.
        _mm512_storeu_si512(dst, _mm512_shuffle_i32x4::<0b10_00_10_00>(v0, v2));
        _mm512_storeu_si512(dst.add(1), _mm512_shuffle_i32x4::<0b11_01_11_01>(v0, v2));
        _mm512_storeu_si512(dst.add(2), _mm512_shuffle_i32x4::<0b10_00_10_00>(v1, v3));
        _mm512_storeu_si512(dst.add(3), _mm512_shuffle_i32x4::<0b11_01_11_01>(v1, v3));
    }
    out
}

#[inline(always)]
fn philox_lanes_impl(key: [u32; 2], base: u64, stream: u64) -> [[u32; 4]; LANES] {
    const M0: u64 = 0xD251_1F53;
    const M1: u64 = 0xCD9E_8D57;
    let mut c0 = [0u32; LANES];
    let mut c1 = [0u32; LANES];
    for l in 0..LANES {
        let c = base.wrapping_add(l as u64);
        c0[l] = c as u32;
        c1[l] = (c >> 32) as u32;
    }
    let mut c2 = [stream as u32; LANES];
    let mut c3 = [(stream >> 32) as u32; LANES];
    let (mut k0, mut k1) = (key[0], key[1]);
    for _ in 0..10 {
        for l in 0..LANES {
            let p0 = M0 * c0[l] as u64;
            let p1 = M1 * c2[l] as u64;
            let n0 = (p1 >> 32) as u32 ^ c1[l] ^ k0;
            let n2 = (p0 >> 32) as u32 ^ c3[l] ^ k1;
            c1[l] = p1 as u32;
            c3[l] = p0 as u32;
            c0[l] = n0;
            c2[l] = n2;
        }
        k0 = k0.wrapping_add(0x9E37_79B9);
        k1 = k1.wrapping_add(0xBB67_AE85);
    }
    let mut out = [[0u32; 4]; LANES];
    for l in 0..LANES {
        out[l] = [c0[l], c1[l], c2[l], c3[l]];
    }
    out
}

/// A stream of 32-bit words from a Philox key and counter.
struct Bits<'a> {
    state: &'a mut RandomState,
    buf: [u32; 4],
    used: usize,
}

impl Bits<'_> {
    fn next(&mut self) -> u32 {
        if self.used == 4 {
            let c = self.state.counter;
            let s = self.state.stream;
            self.buf = philox(self.state.key, [c as u32, (c >> 32) as u32, s as u32, (s >> 32) as u32]);
            self.state.counter = c.wrapping_add(1);
            self.used = 0;
        }
        self.used += 1;
        self.buf[self.used - 1]
    }
    fn uniform_f64(&mut self) -> f64 {
        let (a, b) = (self.next(), self.next());
        unit_f64(a, b)
    }
    /// A pair of independent standard normals (Box–Muller).
    fn normal_pair(&mut self) -> (f64, f64) {
        let u1 = 1.0 - self.uniform_f64(); // (0, 1]: ln is finite
        let u2 = self.uniform_f64();
        let r = (-2.0 * u1.ln()).sqrt();
        let t = std::f64::consts::TAU * u2;
        (r * t.cos(), r * t.sin())
    }
}

/// A fresh state for seeds `(seed, seed2)`; both 0 draws the key from the clock.
pub fn random_state(seed: i64, seed2: i64) -> RandomState {
    let (seed, seed2) = if seed == 0 && seed2 == 0 {
        static NONCE: AtomicU64 = AtomicU64::new(0);
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        let n = NONCE.fetch_add(1, Ordering::Relaxed);
        let mix = philox([t as u32, (t >> 32) as u32], [n as u32, (n >> 32) as u32, 0x5eed, 0]);
        (((mix[0] as u64) << 32 | mix[1] as u64) as i64, ((mix[2] as u64) << 32 | mix[3] as u64) as i64)
    } else {
        (seed, seed2)
    };
    RandomState { key: [seed as u32, (seed as u64 >> 32) as u32], counter: 0, stream: seed2 as u64 }
}

#[derive(Clone, Copy, PartialEq)]
enum Dist {
    Uniform,
    Normal,
    Truncated,
}

struct RandomOp {
    node: String,
    dist: Dist,
    dtype: DType,
    seeds: (i64, i64),
    /// State when run without a session (eager calls).
    local: Mutex<Option<RandomState>>,
}

/// Reads a shape vector input (int32 or int64), rejecting negative dims and sizes past 2^31
/// elements before anything is allocated.
pub(crate) fn shape_input(t: &Tensor, node: &str) -> KResult<Vec<usize>> {
    let dims: Vec<i64> = match t.dtype() {
        DType::Int32 => t.as_slice::<i32>()?.iter().map(|&d| d as i64).collect(),
        DType::Int64 => t.as_slice::<i64>()?.to_vec(),
        d => return Err(invalid(format!("node '{node}': shape must be int32 or int64, got {d}"))),
    };
    if t.rank() > 1 {
        return Err(invalid(format!("node '{node}': shape must be a vector, got rank {}", t.rank())));
    }
    let mut n: u64 = 1;
    let mut out = Vec::with_capacity(dims.len());
    for &d in &dims {
        if d < 0 {
            return Err(invalid(format!("node '{node}': shape {dims:?} has a negative dimension")));
        }
        n = n.saturating_mul(d as u64);
        out.push(d as usize);
    }
    if n > 1 << 31 {
        return Err(invalid(format!("node '{node}': shape {dims:?} has {n} elements, more than 2^31")));
    }
    Ok(out)
}

/// Uniform in [0, 1) from one word (24 random bits, exact in f32).
#[inline(always)]
fn unit_f32(w: u32) -> f32 {
    (w >> 8) as f32 * (1.0 / (1u32 << 24) as f32)
}

/// Uniform in [0, 1) from two words (53 random bits).
#[inline(always)]
fn unit_f64(a: u32, b: u32) -> f64 {
    ((((a >> 5) as u64) << 26) | (b >> 6) as u64) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Two standard normals from one Philox block (Box–Muller).
#[inline(always)]
fn normal_pair(w: [u32; 4]) -> (f64, f64) {
    let u1 = 1.0 - unit_f64(w[0], w[1]); // (0, 1]: ln is finite
    let u2 = unit_f64(w[2], w[3]);
    let r = (-2.0 * u1.ln()).sqrt();
    let t = std::f64::consts::TAU * u2;
    (r * t.cos(), r * t.sin())
}

/// Values below which a fill runs on one thread (about 20 us of Philox with AVX-512): above,
/// the calling thread starts on the chunks at once and pool threads join as they wake.
const PARALLEL_MIN: usize = 32 * 1024;

/// Fills `out` where value `j` depends only on Philox block `base + j / per_block`: the
/// stream is the same however the work is split, so chunks run in parallel.
fn fill_blocks<T: Send>(
    ctx: &KernelContext,
    out: &mut [T],
    per_block: usize,
    key: [u32; 2],
    base: u64,
    stream: u64,
    f: impl Fn(&[[u32; 4]; LANES], &mut [T]) + Sync,
) {
    // `f` gets a whole lane group (LANES blocks, `per_block · LANES` values, fewer at the end)
    // so its conversion loop runs over many values at once and vectorizes.
    let group = per_block * LANES;
    let run = |start: usize, chunk: &mut [T]| {
        let first = (start / per_block) as u64;
        crate::isa::widest(|| {
            for (g, values) in chunk.chunks_mut(group).enumerate() {
                f(&philox_lanes(key, base.wrapping_add(first + (g * LANES) as u64), stream), values);
            }
        })
    };
    let threads = ctx.threads();
    if out.len() >= PARALLEL_MIN && threads > 1 {
        // A few chunks per thread, whole lane groups (each starts at a block boundary).
        let chunk = out.len().div_ceil(threads * 4).div_ceil(group) * group;
        ctx.for_each_chunk_mut(out, chunk, |i, c| run(i * chunk, c));
    } else {
        run(0, out);
    }
}

impl RandomOp {
    fn fill(&self, ctx: &KernelContext, state: &mut RandomState, dims: &[usize]) -> KResult<Tensor> {
        // Truncated normals are drawn as f64 first.
        let n = crate::check_output(if self.dist == Dist::Truncated { DType::Double } else { self.dtype }, dims)?;
        let (key, base, stream) = (state.key, state.counter, state.stream);
        macro_rules! blocks {
            ($t:ty, $per:expr, $f:expr) => {{
                // Written in place into the output's buffer (no second copy); every value is
                // written, so the buffer is not zeroed first.
                let mut t = Tensor::for_overwrite(<$t as ferroflow_tensor::Element>::DTYPE, dims)?;
                fill_blocks(ctx, t.as_mut_slice::<$t>()?, $per, key, base, stream, $f);
                state.counter = base.wrapping_add(n.div_ceil($per) as u64);
                t
            }};
        }
        Ok(match (self.dist, self.dtype) {
            (Dist::Uniform, DType::Float) => blocks!(f32, 4, |b: &[[u32; 4]; LANES], o: &mut [f32]| {
                o.iter_mut().zip(b.as_flattened()).for_each(|(o, &w)| *o = unit_f32(w))
            }),
            (Dist::Uniform, _) => blocks!(f64, 2, |b: &[[u32; 4]; LANES], o: &mut [f64]| {
                o.iter_mut().zip(b.as_flattened().chunks_exact(2)).for_each(|(o, w)| *o = unit_f64(w[0], w[1]))
            }),
            (Dist::Normal, DType::Float) => blocks!(f32, 2, |b: &[[u32; 4]; LANES], o: &mut [f32]| {
                o.iter_mut()
                    .zip(b.iter().flat_map(|&w| <[f64; 2]>::from(normal_pair(w))))
                    .for_each(|(o, v)| *o = v as f32)
            }),
            (Dist::Normal, _) => blocks!(f64, 2, |b: &[[u32; 4]; LANES], o: &mut [f64]| {
                o.iter_mut().zip(b.iter().flat_map(|&w| <[f64; 2]>::from(normal_pair(w)))).for_each(|(o, v)| *o = v)
            }),
            (Dist::Truncated, dtype) => {
                // Rejection sampling: sequential (initializers only).
                let mut bits = Bits { state, buf: [0; 4], used: 4 };
                let mut vals = Vec::with_capacity(n);
                while vals.len() < n {
                    let (a, b) = bits.normal_pair();
                    for z in [a, b] {
                        if z.abs() < 2.0 && vals.len() < n {
                            vals.push(z);
                        }
                    }
                }
                match dtype {
                    DType::Float => Tensor::from_vec(dims, vals.into_iter().map(|v| v as f32).collect::<Vec<f32>>())?,
                    _ => Tensor::from_vec(dims, vals)?,
                }
            }
        })
    }
}

impl OpKernel for RandomOp {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let dims = shape_input(&inputs[0], &self.node)?;
        let t = match ctx.resources {
            Some(r) => {
                let st = r.random_state(&self.node, || random_state(self.seeds.0, self.seeds.1));
                let mut g = st.lock().unwrap_or_else(|p| p.into_inner());
                self.fill(ctx, &mut g, &dims)?
            }
            None => {
                let mut g = self.local.lock().unwrap_or_else(|p| p.into_inner());
                let st = g.get_or_insert_with(|| random_state(self.seeds.0, self.seeds.1));
                self.fill(ctx, st, &dims)?
            }
        };
        outputs.push(t);
        Ok(())
    }
}

fn factory(d: &NodeDesc, dist: Dist) -> KResult<Box<dyn OpKernel>> {
    let dtype = d.dtype("dtype")?;
    if !matches!(dtype, DType::Float | DType::Double) {
        return Err(invalid(format!("node '{}': random ops produce float or double, not {dtype}", d.name)));
    }
    Ok(Box::new(RandomOp {
        node: d.name.to_string(),
        dist,
        dtype,
        seeds: (d.int("seed")?, d.int("seed2")?),
        local: Mutex::new(None),
    }))
}
fn k_uniform(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    factory(d, Dist::Uniform)
}
fn k_normal(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    factory(d, Dist::Normal)
}
fn k_truncated(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    factory(d, Dist::Truncated)
}

pub(crate) fn register(r: &mut KernelRegistry) {
    use crate::elementwise::FLOATS;
    r.register("RandomUniform", "dtype", FLOATS, k_uniform);
    r.register("RandomStandardNormal", "dtype", FLOATS, k_normal);
    r.register("TruncatedNormal", "dtype", FLOATS, k_truncated);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lane_parallel_philox_matches_the_scalar_one() {
        // Counters that carry into the high word inside a lane group, and that wrap around.
        for base in [0, 5, 0xFFFF_FFF0, 0x1_FFFF_FFE1, u64::MAX - 3] {
            let s = 0x1234_5678_9abcu64;
            let mut ways = vec![philox_lanes([7, 9], base, s), philox_lanes_impl([7, 9], base, s)];
            #[cfg(target_arch = "x86_64")]
            if crate::isa::has_avx512f() {
                // SAFETY: the CPU supports AVX-512F (checked just above).
                ways.push(unsafe { philox_lanes_avx512([7, 9], base, s) });
            }
            for lanes in ways {
                for (l, got) in lanes.iter().enumerate() {
                    let c = base.wrapping_add(l as u64);
                    let want = philox([7, 9], [c as u32, (c >> 32) as u32, s as u32, (s >> 32) as u32]);
                    assert_eq!(*got, want, "base {base:#x}, lane {l}");
                }
            }
        }
    }

    #[test]
    fn philox_matches_the_published_known_answer() {
        // Random123's kat_vectors for philox4x32-10: all-zero and all-ones inputs.
        assert_eq!(philox([0, 0], [0, 0, 0, 0]), [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]);
        assert_eq!(philox([0xffffffff, 0xffffffff], [0xffffffff; 4]), [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd]);
    }
}
