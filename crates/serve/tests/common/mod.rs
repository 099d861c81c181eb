//! The test model both API tests serve.
#![allow(dead_code)]
use std::path::Path;

use ferroflow::ops::{Ops, RawOps, Scope};
use ferroflow::tensor::{DType, Shape};
use ferroflow::train::saved_model::{SavedModelWriter, SignatureSpec};

/// Version `v` of the test model: `serving_default` (x float[?,3] → scores = x·W + [v, 0]),
/// `two` (a float[?,3], n int32[?] → sum = a*2, n2 = n+n), `text` (s string[?] → s_bytes and
/// s_text, both s) and `fail` (i int32[?] → gathered from a 3-vector: out of range fails).
pub fn write_model(dir: &Path, v: f32) {
    let s = Scope::new();
    let x = s.with_name("x").placeholder(DType::Float, &Shape::new(vec![None, Some(3)])).unwrap();
    let w = s.constant_from(&[3, 2], &[1.0f32, 0.0, 0.0, 1.0, 1.0, 1.0]).unwrap();
    let b = s.constant_from(&[2], &[v, 0.0f32]).unwrap();
    let xw = s.matmul(x, w, false, false).unwrap();
    let scores = s.with_name("scores").add(xw, b).unwrap();
    let a = s.with_name("a").placeholder(DType::Float, &Shape::new(vec![None, Some(3)])).unwrap();
    let n = s.with_name("n").placeholder(DType::Int32, &Shape::new(vec![None])).unwrap();
    let two = s.constant_from(&[], &[2.0f32]).unwrap();
    let sum = s.with_name("sum").mul(a, two).unwrap();
    let n2 = s.with_name("n2").add(n, n).unwrap();
    let st = s.with_name("s").placeholder(DType::String, &Shape::new(vec![None])).unwrap();
    let s_bytes = s.with_name("s_bytes").identity(st).unwrap();
    let s_text = s.with_name("s_text").identity(st).unwrap();
    let i = s.with_name("i").placeholder(DType::Int32, &Shape::new(vec![None])).unwrap();
    let params = s.constant_from(&[3], &[10.0f32, 20.0, 30.0]).unwrap();
    let axis = s.constant_from(&[], &[0i32]).unwrap();
    let gathered = s.with_name("gathered").gather_v2(params, i, axis).unwrap();
    let g = s.graph();
    let name = |o| g.output_name(o);
    SavedModelWriter::new(g.to_graph_def())
        .signature(SignatureSpec::new("serving_default", &[("x", &name(x))], &[("scores", &name(scores))]))
        .signature(SignatureSpec::new(
            "two",
            &[("a", &name(a)), ("n", &name(n))],
            &[("sum", &name(sum)), ("n2", &name(n2))],
        ))
        .signature(SignatureSpec::new(
            "text",
            &[("s", &name(st))],
            &[("s_bytes", &name(s_bytes)), ("s_text", &name(s_text))],
        ))
        .signature(SignatureSpec::new("fail", &[("i", &name(i))], &[("y", &name(gathered))]))
        .save(dir, None)
        .unwrap();
}

/// scores of x under version v.
pub fn scores(x: &[[f32; 3]], v: f32) -> Vec<[f32; 2]> {
    x.iter().map(|r| [r[0] + r[2] + v, r[1] + r[2]]).collect()
}

/// Copies a directory tree.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}
