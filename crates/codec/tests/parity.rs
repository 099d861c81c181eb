//! Byte-for-byte parity with TensorFlow 2.21 on the fixtures written by `scripts/make_codec_fixtures.py`.
//!
//! Each manifest line is `<codec> <input> key=value ... -> <expected>`, where the expected file is TF's output
//! (.npy), TF's error (.err: we must fail too) or TF's encoded bytes (.jpg).

use ferroflow_codec::jpeg::{self, DctMethod, DecodeOptions, DensityUnit, EncodeOptions, JpegFormat};
use ferroflow_codec::png::{self, PngDecodeOptions, PngDtype, PngPixels};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    // CODEC_FIXTURES points the test at another directory written by the fixture script.
    std::env::var_os("CODEC_FIXTURES")
        .map_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/codec"), PathBuf::from)
}

/// An array TensorFlow wrote: shape, numpy dtype descriptor and raw little-endian bytes.
struct Npy {
    shape: Vec<usize>,
    descr: String,
    data: Vec<u8>,
}

fn read_npy(path: &Path) -> Npy {
    let t = ferroflow_tensor::npy::read_npy(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let descr = match t.dtype() {
        ferroflow_tensor::DType::UInt8 => "|u1",
        ferroflow_tensor::DType::UInt16 => "<u2",
        ferroflow_tensor::DType::Int32 => "<i4",
        d => panic!("{}: unexpected dtype {d}", path.display()),
    };
    Npy { shape: t.dims().to_vec(), descr: descr.into(), data: t.as_bytes().unwrap().to_vec() }
}

/// The fields are read through `Debug`, in the report.
#[allow(dead_code)]
#[derive(Debug)]
enum Outcome {
    Identical,
    /// Both failed, as expected.
    BothFail,
    Differs {
        max: u32,
        pct: f64,
    },
    Mismatch(String),
}

fn compare(expected: &Npy, shape: &[usize], got: &[u8], elem: usize) -> Outcome {
    if expected.shape != shape {
        return Outcome::Mismatch(format!("shape {:?} vs TF {:?}", shape, expected.shape));
    }
    if expected.data == got {
        return Outcome::Identical;
    }
    let vals = |d: &[u8]| -> Vec<u32> {
        if elem == 1 {
            d.iter().map(|&v| v as u32).collect()
        } else {
            d.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]]) as u32).collect()
        }
    };
    let (a, b) = (vals(&expected.data), vals(got));
    let n_diff = a.iter().zip(&b).filter(|(x, y)| x != y).count();
    let max = a.iter().zip(&b).map(|(x, y)| x.abs_diff(*y)).max().unwrap_or(0);
    Outcome::Differs { max, pct: 100.0 * n_diff as f64 / a.len().max(1) as f64 }
}

fn outcome<T>(
    expected: &Path,
    result: Result<T, ferroflow_codec::CodecError>,
    check: impl FnOnce(&Npy, T) -> Outcome,
) -> Outcome {
    let expect_err = expected.extension().is_some_and(|e| e == "err");
    match (result, expect_err) {
        (Err(_), true) => Outcome::BothFail,
        (Err(e), false) => Outcome::Mismatch(format!("we fail: {e}")),
        (Ok(_), true) => {
            Outcome::Mismatch(format!("TF fails ({}), we succeed", std::fs::read_to_string(expected).unwrap()))
        }
        (Ok(v), false) => check(&read_npy(expected), v),
    }
}

fn flag(p: &HashMap<&str, &str>, key: &str, default: bool) -> bool {
    p.get(key).map_or(default, |v| *v == "1")
}

fn run_case(codec: &str, input: &Path, p: &HashMap<&str, &str>, expected: &Path) -> Outcome {
    let bytes = std::fs::read(input).unwrap();
    match codec {
        "jpeg" => {
            let opts = DecodeOptions::default()
                .with_channels(p.get("channels").map_or(0, |v| v.parse().unwrap()))
                .with_ratio(p.get("ratio").map_or(1, |v| v.parse().unwrap()))
                .with_fancy_upscaling(flag(p, "fancy", true))
                .with_try_recover_truncated(flag(p, "recover", false))
                .with_acceptable_fraction(p.get("fraction").map_or(1.0, |v| v.parse().unwrap()))
                .with_dct_method(DctMethod::from_tf(p.get("dct").copied().unwrap_or("")).unwrap());
            outcome(expected, jpeg::decode_jpeg(&bytes, &opts), |npy, (px, shape)| compare(npy, &shape, &px, 1))
        }
        "jpeg_shape" => outcome(expected, jpeg::jpeg_shape(&bytes), |npy, shape| {
            let want: Vec<usize> =
                npy.data.chunks_exact(4).map(|c| i32::from_le_bytes(c.try_into().unwrap()) as usize).collect();
            if want == shape {
                Outcome::Identical
            } else {
                Outcome::Mismatch(format!("{shape:?} vs TF {want:?}"))
            }
        }),
        "png" => {
            let dtype = if p["dtype"] == "u16" { PngDtype::U16 } else { PngDtype::U8 };
            let opts = PngDecodeOptions::default().with_channels(p["channels"].parse().unwrap()).with_dtype(dtype);
            let elem = if dtype == PngDtype::U16 { 2 } else { 1 };
            outcome(expected, png::decode_png(&bytes, &opts), |npy, (px, shape)| {
                assert_eq!(npy.descr, if elem == 2 { "<u2" } else { "|u1" });
                let px = match px {
                    PngPixels::U8(v) => v,
                    PngPixels::U16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                };
                compare(npy, &shape, &px, elem)
            })
        }
        "jpeg_encode" => {
            let npy = read_npy(input);
            let opts = encode_options(p);
            let ours = match jpeg::encode_jpeg(&npy.data, npy.shape[0], npy.shape[1], npy.shape[2], &opts) {
                Ok(v) => v,
                Err(e) => return Outcome::Mismatch(format!("encode failed: {e}")),
            };
            let tf = std::fs::read(expected).unwrap();
            if ours == tf {
                return Outcome::Identical;
            }
            // Not byte-identical: at least require the same decoded pixels.
            let d = DecodeOptions::default();
            let (a, _) = jpeg::decode_jpeg(&ours, &d).unwrap();
            let (b, _) = jpeg::decode_jpeg(&tf, &d).unwrap();
            let max = a.iter().zip(&b).map(|(x, y)| x.abs_diff(*y)).max().unwrap_or(0);
            Outcome::Mismatch(format!("bytes differ ({} vs TF {}), decoded max diff {max}", ours.len(), tf.len()))
        }
        other => panic!("unknown codec {other}"),
    }
}

fn encode_options(p: &HashMap<&str, &str>) -> EncodeOptions {
    let d = EncodeOptions::default();
    EncodeOptions::default()
        .with_format(match p.get("format").copied() {
            Some("grayscale") => JpegFormat::Grayscale,
            Some("rgb") => JpegFormat::Rgb,
            _ => JpegFormat::Auto,
        })
        .with_quality(p.get("quality").map_or(d.quality, |v| v.parse().unwrap()))
        .with_progressive(flag(p, "progressive", d.progressive))
        .with_optimize_size(flag(p, "optimize_size", d.optimize_size))
        .with_chroma_downsampling(flag(p, "chroma_downsampling", d.chroma_downsampling))
        .with_density_unit(if p.get("density_unit") == Some(&"cm") {
            DensityUnit::Centimeter
        } else {
            DensityUnit::Inch
        })
        .with_x_density(p.get("x_density").map_or(d.x_density, |v| v.parse().unwrap()))
        .with_y_density(p.get("y_density").map_or(d.y_density, |v| v.parse().unwrap()))
        .with_xmp_metadata(p.get("xmp_metadata").map_or(Vec::new(), |v| v.as_bytes().to_vec()))
}

#[test]
fn tensorflow_parity() {
    let dir = fixtures();
    let manifest = std::fs::read_to_string(dir.join("manifest.txt")).expect("run make_fixtures.py first");
    let (mut ok, mut bad) = (0, Vec::new());
    let mut report = String::new();
    for line in manifest.lines().filter(|l| !l.trim().is_empty()) {
        let (lhs, expected) = line.split_once(" -> ").unwrap();
        let mut parts = lhs.split_whitespace();
        let (codec, input) = (parts.next().unwrap(), parts.next().unwrap());
        let params: HashMap<&str, &str> = parts.map(|kv| kv.split_once('=').unwrap()).collect();
        let result = run_case(codec, &dir.join(input), &params, &dir.join(expected));
        report.push_str(&format!(
            "{:<12} {:<30} {:<55} {:?}\n",
            codec,
            input,
            lhs.splitn(3, ' ').nth(2).unwrap_or(""),
            result
        ));
        match result {
            Outcome::Identical | Outcome::BothFail => ok += 1,
            _ => bad.push(line.to_string()),
        }
    }
    let out = std::env::temp_dir().join("ferroflow_codec_parity_report.txt");
    std::fs::write(&out, &report).unwrap();
    println!("{ok} identical, {} different; full matrix in {}", bad.len(), out.display());
    assert!(bad.is_empty(), "{} cases differ from TF:\n{}", bad.len(), bad.join("\n"));
}
