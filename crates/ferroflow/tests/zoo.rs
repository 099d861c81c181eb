//! The committed subset of the model zoo (issue 43; `scripts/make_zoo.py --subset` writes
//! `fixtures/zoo/`): a reduced Keras application of each family, a small model of each layer
//! kind (recurrent, attention, convolution variants, normalization/preprocessing, detection
//! post-processing, every Keras activation), frozen by TensorFlow 2.21 with TensorFlow's outputs.
//! Each runs through a Session on 1 and 2 intra-op threads with the optimizer on and off and
//! matches TensorFlow: max|Δ| ≤ 1e-4 × max(1, max|TF output|), integer outputs identical; a
//! reduced application beyond that passes only if it is as close to the float64 answer as
//! TensorFlow's float32 output is (see `ACCURACY_FACTOR`).
//!
//! Models whose ops ferroflow does not have yet are listed in `PENDING` with exactly the ops
//! they lack: each must fail to load with the unknown-op error naming exactly those ops, so
//! the entry has to be removed (and the model then has to match) once the op lands.
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use ferroflow::prelude::*;
use ferroflow::tensor::npy;

/// (model, the ops it lacks) — remove an entry once its ops land.
const PENDING: &[(&str, &[&str])] = &[];

/// (model, a part of the error it fails with) — models that load but do not run yet for a
/// reason other than a missing op; remove an entry once fixed.
const KNOWN_FAILURES: &[(&str, &str)] = &[];

const TOLERANCE: f64 = 1e-4;

/// Where a reduced application's two float32 results differ by more than the tolerance (random
/// weights amplify rounding), ferroflow passes only if its error against the exact answer (the
/// graph run by TensorFlow in float64, `<output>@float64` in the .npz) is at most this many
/// times TensorFlow's own (scripts/zoo_check.py applies the same rule).
const ACCURACY_FACTOR: f64 = 2.0;

/// Past this error of TensorFlow's own float32 output against the float64 answer the instance
/// is too ill-conditioned to compare (scripts/zoo_check.py: the same rule).
const ILL_CONDITIONED: f64 = 1e-2;

/// max |a - b| / max(1, max |exact|).
fn error_against(a: &[f64], exact: &[f64]) -> f64 {
    let scale = exact.iter().fold(1f64, |m, v| m.max(v.abs()));
    a.iter().zip(exact).map(|(x, e)| (x - e).abs()).fold(0f64, f64::max) / scale
}

fn zoo_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/zoo")
}

fn models() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(zoo_dir())
        .unwrap()
        .filter_map(|e| {
            let p = e.unwrap().path();
            (p.extension().is_some_and(|x| x == "pb")).then(|| p.file_stem().unwrap().to_string_lossy().into_owned())
        })
        .collect();
    names.sort();
    names
}

/// The op names an unknown-op error names: `unknown op(s): 'A' (node 'x'); 'B' (nodes ...)`
/// (each op is the quoted name before ` (node`, whatever else the message says).
fn unknown_ops(message: &str) -> Option<BTreeSet<String>> {
    let rest = &message[message.find("unknown op(s): ")? + "unknown op(s): ".len()..];
    let ops: BTreeSet<String> = rest
        .match_indices("' (node")
        .filter_map(|(end, _)| rest[..end].rfind('\'').map(|start| rest[start + 1..end].to_string()))
        .collect();
    (!ops.is_empty()).then_some(ops)
}

fn as_f64(t: &Tensor) -> Option<Vec<f64>> {
    match t.dtype() {
        DType::Float => Some(t.as_slice::<f32>().unwrap().iter().map(|&v| v as f64).collect()),
        DType::Double => Some(t.as_slice::<f64>().unwrap().to_vec()),
        _ => None,
    }
}

/// None if `got` matches TensorFlow's `want`, else why not; with the max |Δ| of float outputs.
fn compare(got: &Tensor, want: &Tensor) -> (f64, Option<String>) {
    if got.dims() != want.dims() {
        return (f64::INFINITY, Some(format!("shape {:?}, TensorFlow {:?}", got.dims(), want.dims())));
    }
    if got.dtype() != want.dtype() {
        return (f64::INFINITY, Some(format!("dtype {:?}, TensorFlow {:?}", got.dtype(), want.dtype())));
    }
    let (Some(g), Some(w)) = (as_f64(got), as_f64(want)) else {
        let same = got.as_bytes().unwrap() == want.as_bytes().unwrap();
        return (0.0, (!same).then(|| "values differ (exact op)".to_string()));
    };
    let mut worst = 0f64;
    let mut scale = 1f64;
    for (a, b) in g.iter().zip(&w) {
        if b.is_finite() {
            worst = worst.max((a - b).abs());
            scale = scale.max(b.abs());
        } else if !(a == b || (a.is_nan() && b.is_nan())) {
            return (f64::INFINITY, Some(format!("{a} where TensorFlow has {b}")));
        }
    }
    (worst, (worst > TOLERANCE * scale).then(|| format!("max |diff| {worst:e} > {TOLERANCE} x {scale}")))
}

/// Loads, runs and compares one model in every configuration; Err with the first failure.
fn check(name: &str) -> Result<f64, String> {
    let dir = zoo_dir();
    let graph = ferroflow::load_graph(&dir.join(format!("{name}.pb"))).map_err(|e| format!("load: {e}"))?;
    let arrays: HashMap<String, Tensor> =
        npy::read_npz(&dir.join(format!("{name}.npz"))).map_err(|e| format!("npz: {e}"))?.into_iter().collect();
    let placeholders: BTreeSet<&str> =
        graph.nodes().iter().filter(|n| n.op == "Placeholder").map(|n| n.name.as_str()).collect();
    let mut feeds = Vec::new();
    let mut fetches = Vec::new();
    for key in arrays.keys() {
        let node = key.split(':').next().unwrap();
        if key.ends_with("@float64") {
            continue;
        }
        if placeholders.contains(node) {
            feeds.push((key.as_str(), arrays[key].clone()));
        } else {
            fetches.push(key.as_str());
        }
    }
    fetches.sort();
    let mut worst = 0f64;
    for (threads, optimize) in [(1, true), (2, true), (1, false), (2, false)] {
        let mut options = SessionOptions::default().with_inter_op_threads(threads).with_intra_op_threads(threads);
        options.optimizer.enabled = optimize;
        let config = format!("{threads} thread(s), optimizer {}", if optimize { "on" } else { "off" });
        let sess = Session::new(graph.clone(), options).map_err(|e| format!("{config}: session: {e}"))?;
        let got = sess.run(&feeds, &fetches, &[]).map_err(|e| format!("{config}: run: {e}"))?;
        for (fetch, g) in fetches.iter().zip(&got) {
            let (diff, bad) = compare(g, &arrays[*fetch]);
            worst = worst.max(diff);
            let Some(why) = bad else { continue };
            if let (Some(exact), Some(ours), Some(theirs)) =
                (arrays.get(&format!("{fetch}@float64")).and_then(as_f64), as_f64(g), as_f64(&arrays[*fetch]))
            {
                let (ours, theirs) = (error_against(&ours, &exact), error_against(&theirs, &exact));
                if theirs <= ILL_CONDITIONED && ours <= TOLERANCE.max(ACCURACY_FACTOR * theirs) {
                    eprintln!("{name}: {config}: {fetch}: {why}; error vs float64 {ours:e}, TensorFlow's {theirs:e}");
                    continue;
                }
                return Err(format!("{config}: {fetch}: {why} (error vs float64 {ours:e}, TensorFlow's {theirs:e})"));
            }
            return Err(format!("{config}: {fetch}: {why}"));
        }
    }
    Ok(worst)
}

#[test]
fn the_zoo_subset_matches_tensorflow() {
    let names = models();
    assert!(names.len() >= 80, "fixtures/zoo holds {} models; regenerate with make_zoo.py --subset", names.len());
    for pending in PENDING.iter().map(|p| p.0).chain(KNOWN_FAILURES.iter().map(|p| p.0)) {
        assert!(names.iter().any(|n| n == pending), "PENDING names '{pending}', which is not in fixtures/zoo");
    }
    let mut failures = Vec::new();
    for name in &names {
        let result = check(name);
        if let Some((_, part)) = KNOWN_FAILURES.iter().find(|(p, _)| p == name) {
            match &result {
                Err(e) if e.contains(*part) => eprintln!("{name}: known failure: {e}"),
                Err(e) => failures.push(format!("{name} (known to fail with '{part}'): {e}")),
                Ok(d) => failures
                    .push(format!("{name} now runs and matches (max |diff| {d:e}): remove it from KNOWN_FAILURES")),
            }
            continue;
        }
        match PENDING.iter().find(|(p, _)| p == name) {
            Some((_, ops)) => {
                let want: BTreeSet<String> = ops.iter().map(|s| s.to_string()).collect();
                match &result {
                    Err(e) if unknown_ops(e).as_ref() == Some(&want) => eprintln!("{name}: pending on {ops:?}"),
                    Err(e) => failures.push(format!("{name} (pending on {ops:?}): {e}")),
                    Ok(d) => {
                        failures.push(format!("{name} now runs and matches (max |diff| {d:e}): remove it from PENDING"))
                    }
                }
            }
            None => match result {
                Ok(d) => eprintln!("{name}: ok, max |diff| {d:e}"),
                Err(e) => failures.push(format!("{name}: {e}")),
            },
        }
    }
    assert!(failures.is_empty(), "{} of {} models fail:\n{}", failures.len(), names.len(), failures.join("\n"));
}
