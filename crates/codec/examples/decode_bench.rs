//! Single-thread JPEG decode throughput with `tf.io.decode_jpeg`'s defaults (IFAST IDCT, fancy
//! upsampling, RGB), over every `.jpg` in a directory.
//!
//! ```text
//! cargo run --release -p ferroflow-codec --example decode_bench -- DIR [PASSES]
//! ```
//!
//! Prints the median of PASSES passes (default 9) over all files, after one warm-up pass. Pin it
//! to one core (`taskset -c 1`) for stable numbers. To compare with libjpeg-turbo's portable C,
//! build the same example with `RUSTFLAGS="--cfg ferroflow_portable_jpeg"` (every `jsimd_can_*`
//! then answers 0) in another target directory.
//!
//! The reference input is 600 photo-like 500x375 4:2:0 JPEGs written by TF's
//! `encode_jpeg(quality=90)` from `scripts/fixture_images.py`'s `photo()`:
//!
//! ```text
//! .venv/bin/python -c 'import sys; sys.path.insert(0, "scripts"); import tensorflow as tf
//! from fixture_images import photo
//! for i in range(600):
//!     open(f"/tmp/jpeg600/{i:03}.jpg", "wb").write(tf.io.encode_jpeg(photo(375, 500, i), quality=90).numpy())'
//! ```

use ferroflow_codec::jpeg::{decode_jpeg, DecodeOptions};
use std::hint::black_box;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(dir) = args.first() else {
        eprintln!("usage: decode_bench DIR [PASSES]");
        std::process::exit(2);
    };
    let passes: usize = args.get(1).map_or(9, |p| p.parse().expect("PASSES must be a number")).max(1);
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x.eq_ignore_ascii_case("jpg")))
        .collect();
    files.sort();
    let data: Vec<Vec<u8>> = files.iter().map(|p| std::fs::read(p).unwrap()).collect();
    assert!(!data.is_empty(), "no .jpg files in {dir}");

    let opts = DecodeOptions::default();
    let mut pixels = 0u64;
    for d in &data {
        let (px, shape) = decode_jpeg(d, &opts).expect("decode");
        pixels += (shape[0] * shape[1]) as u64;
        black_box(px);
    }
    let mut times: Vec<f64> = (0..passes)
        .map(|_| {
            let t = Instant::now();
            for d in &data {
                black_box(decode_jpeg(black_box(d), &opts).expect("decode"));
            }
            t.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    let median = times[passes / 2];
    println!("{}", ferroflow_codec::simd_report());
    println!(
        "{} files, {:.1} MP: median of {passes} passes {:.3} s (min {:.3}, max {:.3}): {:.0} img/s, {:.1} MP/s",
        data.len(),
        pixels as f64 / 1e6,
        median,
        times[0],
        times[passes - 1],
        data.len() as f64 / median,
        pixels as f64 / 1e6 / median
    );
}
