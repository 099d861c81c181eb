//! `ferroflow profile`: the terminal report of a profile (ferroflow's or TensorFlow's
//! `.xplane.pb`), or of the newest capture in a TensorBoard log directory (host by host when
//! it holds several, as a distributed run's does); with two, how the second changed against
//! the first; `--chrome` also writes Chrome trace JSON.
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use ferroflow::profiler::report::{analyze, compare, Report};
use ferroflow::profiler::xspace::read_xspace;
use ferroflow::proto::profiler::XSpace;

/// The terminal report of a profile: top ops by self time, the step-time breakdown
/// (input / compute / other), whether the step is input-bound (TensorFlow's thresholds:
/// input above 20% of the step highly, 5–20% moderately) and what to change. PATH is an
/// `.xplane.pb` (ferroflow's or TensorFlow's) or a log directory (its newest capture, host by host);
/// with two PATHs, how the second changed against the first.
#[derive(Args)]
pub struct ProfileArgs {
    /// One or two `.xplane.pb` files or log directories.
    #[arg(required = true, num_args = 1..=2)]
    paths: Vec<PathBuf>,
    /// Also write the (first) profile as Chrome trace JSON, for Perfetto or chrome://tracing.
    #[arg(long, value_name = "OUT.json")]
    chrome: Option<PathBuf>,
}

pub fn run(args: ProfileArgs) -> Result<()> {
    let (paths, chrome) = (&args.paths, args.chrome.as_deref());
    if paths.is_empty() || paths.len() > 2 {
        bail!("give one profile (or log directory), or two to compare");
    }
    let mut reports = Vec::new();
    for p in paths {
        // The newest run; a capture of several hosts (the ranks of a distributed run) is
        // reported host by host, and its first host is the one compared.
        let mut found = captures(p)?;
        let newest = found.last().and_then(|f| f.parent()).map(Path::to_path_buf);
        found.retain(|f| f.parent() == newest.as_deref());
        let mut first = None;
        for file in &found {
            let (space, report) = load(file)?;
            println!("== {}", file.display());
            print!("{report}");
            println!();
            first.get_or_insert((space, report));
        }
        let (space, report) = first.expect("captures is non-empty");
        if let Some(out) = chrome {
            if reports.is_empty() {
                ferroflow::profiler::chrome::write_xspace_chrome_trace_file(&space, out)?;
                println!("wrote Chrome trace JSON to {} (open it in Perfetto or chrome://tracing)", out.display());
            }
        }
        reports.push(report);
    }
    if let [a, b] = &reports[..] {
        println!("Second against first: {}", compare(a, b));
    }
    Ok(())
}

/// The `.xplane.pb` files under `path`: the file itself, or every capture below a log
/// directory (`**/plugins/profile/<run>/*.xplane.pb`), newest run last.
fn captures(path: &Path) -> Result<Vec<PathBuf>> {
    if path.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    if !path.is_dir() {
        bail!("{}: no such file or directory (expected an .xplane.pb file or a log directory)", path.display());
    }
    let mut found = Vec::new();
    let mut stack = vec![path.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))?;
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().ends_with(".xplane.pb") {
                found.push(p);
            }
        }
    }
    if found.is_empty() {
        bail!(
            "{}: no .xplane.pb under it (profiles are written to LOGDIR/plugins/profile/<run>/<host>.xplane.pb)",
            path.display()
        );
    }
    // Run directories are named by time: sort by run, then path.
    found.sort_by_key(|p| (p.parent().and_then(|r| r.file_name()).map(|n| n.to_os_string()), p.clone()));
    Ok(found)
}

fn load(path: &Path) -> Result<(XSpace, Report)> {
    let space = read_xspace(path)?;
    let report = analyze(&space).with_context(|| format!("{}", path.display()))?;
    Ok((space, report))
}
