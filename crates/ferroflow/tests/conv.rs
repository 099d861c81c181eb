//! `Conv2D`'s algorithms against a direct convolution in f64: Winograd F(2×2, 3×3) (3×3,
//! stride 1, 16 or more channels each way, 32 tiles or more) and F(4×4, 3×3) (64 or more
//! channels, 48 4×4 tiles or more), in blocks of tile rows and phase by phase when two threads
//! get too few tiles for blocks; im2col blocks and the pointwise path, with SAME, VALID and
//! explicit padding, odd sizes (partial tiles), one and two intra-op threads, and batches
//! spanning several blocks. Winograd's rounding error scales with its whole tile's inputs, so
//! each output's tolerance is set by the largest |x·w| sum within a tile's reach of it.
use ferroflow::prelude::*;
use ferroflow::proto::attr;

/// `[n, h, w, c]` ⊛ `[kh, kw, c, k]` in f64, with the padding's leading amounts and the output
/// size given; also the sum of |x·w| per output (the rounding scale).
#[allow(clippy::too_many_arguments)]
fn direct(
    x: &[f32],
    [n, h, w, c]: [usize; 4],
    f: &[f32],
    [kh, kw, k]: [usize; 3],
    stride: usize,
    (pt, pl): (usize, usize),
    (oh, ow): (usize, usize),
) -> (Vec<f64>, Vec<f64>) {
    let mut out = vec![0f64; n * oh * ow * k];
    let mut mag = vec![0f64; n * oh * ow * k];
    for b in 0..n {
        for y in 0..oh {
            for xo in 0..ow {
                for ky in 0..kh {
                    let Some(iy) = (y * stride + ky).checked_sub(pt).filter(|&v| v < h) else { continue };
                    for kx in 0..kw {
                        let Some(ix) = (xo * stride + kx).checked_sub(pl).filter(|&v| v < w) else { continue };
                        for ci in 0..c {
                            let xv = x[((b * h + iy) * w + ix) * c + ci] as f64;
                            for ko in 0..k {
                                let p = xv * f[((ky * kw + kx) * c + ci) * k + ko] as f64;
                                let o = ((b * oh + y) * ow + xo) * k + ko;
                                out[o] += p;
                                mag[o] += p.abs();
                            }
                        }
                    }
                }
            }
        }
    }
    (out, mag)
}

#[test]
fn conv2d_matches_a_direct_convolution_on_every_path() {
    // (input [n, h, w, c], filter [kh, kw, k], stride, padding, leading pads, output size)
    type Case = ([usize; 4], [usize; 3], usize, &'static str, Vec<i64>, (usize, usize), (usize, usize));
    let cases: Vec<Case> = vec![
        // Winograd in blocks (many tiles).
        ([8, 32, 31, 16], [3, 3, 24], 1, "SAME", vec![], (1, 1), (32, 31)),
        ([5, 46, 46, 16], [3, 3, 16], 1, "VALID", vec![], (0, 0), (44, 44)),
        ([9, 30, 29, 16], [3, 3, 16], 1, "EXPLICIT", vec![0, 0, 2, 1, 0, 3, 0, 0], (2, 0), (31, 30)),
        // Channels that end in a partial 16-lane step both ways (20 in, 24 out).
        ([4, 12, 13, 20], [3, 3, 24], 1, "SAME", vec![], (1, 1), (12, 13)),
        // Winograd phase by phase on 2 threads (36 and 42 tiles).
        ([3, 5, 6, 16], [3, 3, 16], 1, "EXPLICIT", vec![0, 0, 2, 1, 0, 3, 0, 0], (2, 0), (6, 7)),
        ([1, 13, 11, 32], [3, 3, 24], 1, "SAME", vec![], (1, 1), (13, 11)),
        // F(4×4, 3×3): blocks on 1 thread, phase by phase on 2 (128 and 90 tiles, partial ones
        // at the edges); with a transformed filter larger than a block (blocks of 128 tiles:
        // two, the second partial).
        ([2, 30, 29, 64], [3, 3, 72], 1, "SAME", vec![], (1, 1), (30, 29)),
        ([3, 21, 17, 64], [3, 3, 64], 1, "EXPLICIT", vec![0, 0, 2, 1, 0, 3, 0, 0], (2, 0), (22, 18)),
        ([17, 16, 8, 128], [3, 3, 128], 1, "SAME", vec![], (1, 1), (16, 8)),
        // im2col + GEMM.
        ([1, 5, 6, 16], [3, 3, 16], 1, "EXPLICIT", vec![0, 0, 2, 1, 0, 3, 0, 0], (2, 0), (6, 7)),
        ([40, 6, 5, 8], [3, 3, 20], 1, "SAME", vec![], (1, 1), (6, 5)),
        ([2, 9, 7, 8], [3, 3, 24], 1, "SAME", vec![], (1, 1), (9, 7)),
        ([2, 9, 7, 16], [3, 3, 24], 2, "SAME", vec![], (1, 1), (5, 4)),
        ([30, 9, 7, 12], [1, 1, 20], 1, "VALID", vec![], (0, 0), (9, 7)),
        // Direct (few input channels): the small CNN's first layer (several blocks; runs of
        // 4 interior pixels, border pixels, a block starting mid-row on 2 threads); stride 2
        // with 40 outputs (16-channel blocks and single channels); a 5×3 window with
        // uneven explicit padding; 17 outputs on VALID.
        ([32, 28, 28, 1], [3, 3, 32], 1, "SAME", vec![], (1, 1), (28, 28)),
        ([3, 17, 15, 3], [3, 3, 40], 2, "SAME", vec![], (1, 1), (9, 8)),
        ([2, 9, 11, 2], [5, 3, 20], 1, "EXPLICIT", vec![0, 0, 2, 1, 0, 3, 0, 0], (2, 0), (8, 12)),
        ([4, 10, 10, 4], [3, 3, 17], 1, "VALID", vec![], (0, 0), (8, 8)),
        // Implicit GEMM (few input channels, more than 36 taps, 16–64 outputs): ResNet's
        // first layer (7×7 stride 2, 64 outputs, SAME), 48 outputs with uneven explicit
        // padding, 16 outputs on VALID with stride 2, 32 outputs on a single channel.
        ([2, 23, 21, 3], [7, 7, 64], 2, "SAME", vec![], (3, 3), (12, 11)),
        ([3, 15, 17, 2], [5, 5, 48], 1, "EXPLICIT", vec![0, 0, 2, 1, 0, 3, 0, 0], (2, 0), (14, 16)),
        ([2, 11, 10, 4], [4, 4, 16], 2, "VALID", vec![], (0, 0), (4, 4)),
        ([2, 10, 12, 1], [7, 7, 32], 1, "SAME", vec![], (3, 3), (10, 12)),
    ];
    for ([n, h, w, c], [kh, kw, k], stride, padding, explicit, pads, (oh, ow)) in cases {
        let xv: Vec<f32> = (0..n * h * w * c).map(|i| ((i * 7919) % 1000) as f32 / 250.0 - 2.0).collect();
        let fv: Vec<f32> = (0..kh * kw * c * k).map(|i| ((i * 104_729) % 997) as f32 / 500.0 - 1.0).collect();
        let s = Scope::new();
        let x = s.with_name("x").placeholder(DType::Float, &Shape::unknown()).unwrap();
        let f = s.constant(&Tensor::from_vec(&[kh, kw, c, k], fv.clone()).unwrap()).unwrap();
        let mut a = ferroflow::graph::Attrs::new();
        a.insert("T".into(), attr::dtype(DType::Float));
        a.insert("strides".into(), attr::ints(&[1, stride as i64, stride as i64, 1]));
        a.insert("padding".into(), attr::string(padding));
        if !explicit.is_empty() {
            a.insert("explicit_paddings".into(), attr::ints(&explicit));
        }
        let y = Output { node: s.add_op("Conv2D", "conv", &[x, f], &[], a).unwrap(), index: 0 };
        let g = s.graph();
        let fetch = g.output_name(y);
        let (want, mag) = direct(&xv, [n, h, w, c], &fv, [kh, kw, k], stride, pads, (oh, ow));
        // The largest scale within 3 pixels each way (any 4×4 tile holding the output).
        let mut local = vec![0f64; mag.len()];
        for b in 0..n {
            for y in 0..oh {
                for xo in 0..ow {
                    for ko in 0..k {
                        let mut m = 0f64;
                        for yy in y.saturating_sub(3)..(y + 4).min(oh) {
                            for xx in xo.saturating_sub(3)..(xo + 4).min(ow) {
                                m = m.max(mag[((b * oh + yy) * ow + xx) * k + ko]);
                            }
                        }
                        local[((b * oh + y) * ow + xo) * k + ko] = m;
                    }
                }
            }
        }
        for threads in [1, 2] {
            let opts = SessionOptions::default().with_inter_op_threads(1).with_intra_op_threads(threads);
            let sess = Session::new(g.clone(), opts).unwrap();
            let feed = Tensor::from_vec(&[n, h, w, c], xv.clone()).unwrap();
            let got = sess.run(&[("x:0", feed)], &[fetch.as_str()], &[]).unwrap().remove(0);
            let what = format!("{n}x{h}x{w}x{c} * {kh}x{kw}x{k} stride {stride} {padding}, {threads} thread(s)");
            assert_eq!(got.dims(), [n, oh, ow, k], "{what}");
            for (i, (&g, (&r, &m))) in got.as_slice::<f32>().unwrap().iter().zip(want.iter().zip(&local)).enumerate() {
                assert!((g as f64 - r).abs() <= 1e-5 * m + 1e-6, "{what}: output {i}: {g} vs {r} (scale {m})");
            }
        }
    }
}
