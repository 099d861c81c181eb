//! Every input the fuzzers found a defect with, and the hostile files of known defects, run
//! again through the same function as their fuzz target: `fuzz/regressions/<target>/<file>`
//! goes to `ferroflow::fuzzing::<target>` (see `scripts/fuzz_all.sh`). None may panic; a
//! directory that names no target is an error (a renamed target must move its regressions).
use std::path::{Path, PathBuf};

fn regressions_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions")
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
    let mut ran = 0;
    for dir in sorted(&regressions_dir()) {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        // The server's targets (`ferroflow_serve::fuzzing`): its own test replays them.
        if name.starts_with("serve_") {
            continue;
        }
        assert!(dir.is_dir(), "{}: expected one directory per fuzz target", dir.display());
        let Some(target) = ferroflow::fuzzing::target(&name) else {
            let known: Vec<&str> = ferroflow::fuzzing::TARGETS.iter().map(|t| t.0).collect();
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
            ran += 1;
        }
    }
    assert!(ran > 0, "no regression inputs under {}", regressions_dir().display());
}

#[test]
fn every_target_has_a_fuzzer() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let manifest = std::fs::read_to_string(fuzz.join("Cargo.toml")).unwrap();
    for (name, _) in ferroflow::fuzzing::TARGETS {
        let source = fuzz.join("fuzz_targets").join(format!("{name}.rs"));
        let text = std::fs::read_to_string(&source).unwrap_or_else(|e| panic!("{}: {e}", source.display()));
        assert!(text.contains(&format!("ferroflow::fuzzing::{name}(")), "{}", source.display());
        assert!(manifest.contains(&format!("name = \"{name}\"")), "fuzz/Cargo.toml has no [[bin]] {name}");
    }
}
