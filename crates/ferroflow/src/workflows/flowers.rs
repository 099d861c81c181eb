//! A flowers-like image dataset generated on the spot (stands in for TensorFlow's
//! `tf_flowers`; ferroflow downloads nothing): five class folders (`daisy`, `dandelion`,
//! `roses`, `sunflowers`, `tulips`) of photo-like JPEGs — smooth light, soft blobs,
//! multi-octave texture, an edge, sensor noise — with a flower per image whose colour and
//! petal count depend on its class, so a model can learn them.
use std::path::{Path, PathBuf};

use crate::codec::jpeg::{encode_jpeg, EncodeOptions};
use crate::data::DataError;

/// The class folders, as in `tf_flowers`.
pub const CLASSES: [&str; 5] = ["daisy", "dandelion", "roses", "sunflowers", "tulips"];

/// Petal colour (RGB) and petal count per class.
const LOOKS: [([f64; 3], usize); 5] = [
    ([235.0, 235.0, 225.0], 12),
    ([240.0, 210.0, 40.0], 20),
    ([200.0, 30.0, 50.0], 5),
    ([250.0, 190.0, 20.0], 16),
    ([220.0, 80.0, 150.0], 6),
];

/// What to generate.
#[derive(Debug, Clone)]
pub struct FlowersOptions {
    /// Images per class.
    pub per_class: usize,
    /// A fixed `(width, height)` for every image; `None`: varied sizes (320–500 × 240–375).
    pub size: Option<(usize, usize)>,
    /// The generator's seed.
    pub seed: u64,
    /// JPEG quality.
    pub quality: u8,
}

impl Default for FlowersOptions {
    fn default() -> Self {
        FlowersOptions { per_class: 40, size: None, seed: 1, quality: 90 }
    }
}

/// xorshift64* with Box–Muller normals.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * ((self.next() >> 11) as f64 / (1u64 << 53) as f64)
    }
    fn normal(&mut self, sd: f64) -> f64 {
        let u = self.uniform(1e-12, 1.0);
        let v = self.uniform(0.0, 1.0);
        sd * (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

/// One photo-like `h × w` RGB image of class `class`.
pub fn image(h: usize, w: usize, class: usize, seed: u64) -> Vec<u8> {
    let mut g = Gen(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let (hf, wf) = (h as f64, w as f64);
    let mut img = vec![0f64; h * w * 3];
    // Background light and colour.
    for y in 0..h {
        for x in 0..w {
            for c in 0..3 {
                let (xf, yf, cf) = (x as f64, y as f64, c as f64);
                img[(y * w + x) * 3 + c] = 90.0
                    + 50.0 * (xf / wf * (2.0 + cf) + cf).sin() * (yf / hf * (3.0 - cf)).cos()
                    + if c == 1 { 25.0 } else { 0.0 };
            }
        }
    }
    // Soft blobs.
    for _ in 0..4 {
        let (cy, cx, s) = (g.uniform(0.0, hf), g.uniform(0.0, wf), g.uniform(3.0, wf / 3.0));
        let a = [g.uniform(-70.0, 70.0), g.uniform(-70.0, 70.0), g.uniform(-70.0, 70.0)];
        for y in 0..h {
            for x in 0..w {
                let d = ((y as f64 - cy).powi(2) + (x as f64 - cx).powi(2)) / (2.0 * s * s);
                if d < 12.0 {
                    let e = (-d).exp();
                    for c in 0..3 {
                        img[(y * w + x) * 3 + c] += a[c] * e;
                    }
                }
            }
        }
    }
    // The flower: petals around a centre, in the class's colour.
    let (colour, petals) = LOOKS[class % LOOKS.len()];
    let (cy, cx) = (g.uniform(0.35, 0.65) * hf, g.uniform(0.35, 0.65) * wf);
    let radius = g.uniform(0.22, 0.35) * hf.min(wf);
    let turn = g.uniform(0.0, std::f64::consts::TAU);
    for y in 0..h {
        for x in 0..w {
            let (dy, dx) = (y as f64 - cy, x as f64 - cx);
            let r = (dy * dy + dx * dx).sqrt() / radius;
            if r > 1.05 {
                continue;
            }
            let angle = dy.atan2(dx) + turn;
            let petal = (angle * petals as f64 / 2.0).cos().abs().powf(0.6);
            let o = (y * w + x) * 3;
            if r < 0.22 {
                for (c, centre) in [120.0, 80.0, 20.0].iter().enumerate() {
                    img[o + c] = *centre;
                }
            } else if r < petal {
                let shade = 0.75 + 0.25 * (1.0 - r);
                for c in 0..3 {
                    img[o + c] = colour[c] * shade;
                }
            }
        }
    }
    // Multi-octave value noise, a hard edge, sensor noise.
    for octave in [4usize, 8, 16, 32] {
        let (gh, gw) = (h / octave + 2, w / octave + 2);
        let grid: Vec<f64> = (0..gh * gw * 3).map(|_| g.normal(30.0 / (octave as f64).sqrt())).collect();
        for y in 0..h {
            for x in 0..w {
                for c in 0..3 {
                    img[(y * w + x) * 3 + c] += grid[((y / octave) * gw + x / octave) * 3 + c];
                }
            }
        }
    }
    for y in 0..h {
        for x in w * 5 / 6..w {
            for c in 0..3 {
                img[(y * w + x) * 3 + c] += 25.0;
            }
        }
    }
    img.iter().map(|v| (v + g.normal(3.0)).round().clamp(0.0, 255.0) as u8).collect()
}

/// Writes the dataset under `dir` (`dir/<class>/<class>_NNNN.jpg`) and returns the files.
pub fn generate(dir: &Path, options: &FlowersOptions) -> Result<Vec<PathBuf>, DataError> {
    let mut g = Gen(options.seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1);
    let mut files = Vec::new();
    for (class, name) in CLASSES.iter().enumerate() {
        let folder = dir.join(name);
        std::fs::create_dir_all(&folder).map_err(|e| DataError::io(&folder, e))?;
        for i in 0..options.per_class {
            let (w, h) =
                options.size.unwrap_or_else(|| (g.uniform(320.0, 500.0) as usize, g.uniform(240.0, 375.0) as usize));
            let pixels = image(h, w, class, g.next());
            let opts = EncodeOptions::default().with_quality(options.quality);
            let jpeg =
                encode_jpeg(&pixels, h, w, 3, &opts).map_err(|e| DataError::io(&folder, std::io::Error::other(e)))?;
            let path = folder.join(format!("{name}_{i:04}.jpg"));
            crate::tensor::fs::write_atomic(&path, &jpeg).map_err(|e| DataError::io(&path, e))?;
            files.push(path);
        }
    }
    Ok(files)
}
