//! Every input the server's fuzzers found a defect with, and the hostile inputs of known
//! defects, run again through the same function as their fuzz target:
//! `fuzz/regressions/serve_<target>/<file>` goes to `ferroflow_serve::fuzzing::serve_<target>`
//! (see `scripts/fuzz_all.sh`; the facade's own test replays the other directories). None may
//! panic; a `serve_` directory that names no target is an error.
use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

fn sorted(dir: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    paths
}

#[test]
fn every_regression_input_is_an_error_or_ok_not_a_panic() {
    let mut ran = std::collections::BTreeMap::new();
    for dir in sorted(&fuzz_dir().join("regressions")) {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with("serve_") {
            continue;
        }
        assert!(dir.is_dir(), "{}: expected one directory per fuzz target", dir.display());
        let Some(target) = ferroflow_serve::fuzzing::target(&name) else {
            let known: Vec<&str> = ferroflow_serve::fuzzing::TARGETS.iter().map(|t| t.0).collect();
            panic!("{}: no fuzz target named '{name}' (targets: {known:?})", dir.display());
        };
        for file in sorted(&dir) {
            let data = std::fs::read(&file).unwrap();
            let start = std::time::Instant::now();
            let outcome = std::panic::catch_unwind(|| target(&data));
            assert!(outcome.is_ok(), "{}: the {name} reader panicked", file.display());
            // libFuzzer's per-input timeout is 10 s (optimised, with ASan); a debug-build test
            // gets a little longer.
            let took = start.elapsed();
            assert!(took.as_secs() < 20, "{}: took {took:?}", file.display());
            *ran.entry(name.clone()).or_insert(0) += 1;
        }
    }
    for (name, _) in ferroflow_serve::fuzzing::TARGETS {
        assert!(ran.contains_key(*name), "no regression inputs for {name} under fuzz/regressions/{name}/");
    }
}

#[test]
fn every_target_has_a_fuzzer() {
    let fuzz = fuzz_dir();
    let manifest = std::fs::read_to_string(fuzz.join("Cargo.toml")).unwrap();
    for (name, _) in ferroflow_serve::fuzzing::TARGETS {
        assert!(name.starts_with("serve_"), "{name}: the server's targets are named serve_*");
        let source = fuzz.join("fuzz_targets").join(format!("{name}.rs"));
        let text = std::fs::read_to_string(&source).unwrap_or_else(|e| panic!("{}: {e}", source.display()));
        assert!(text.contains(&format!("ferroflow_serve::fuzzing::{name}(")), "{}", source.display());
        assert!(manifest.contains(&format!("name = \"{name}\"")), "fuzz/Cargo.toml has no [[bin]] {name}");
    }
}
