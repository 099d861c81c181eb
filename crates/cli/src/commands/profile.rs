//! `ferroflow profile`: the terminal report of a profile (ferroflow's or TensorFlow's
//! `.xplane.pb`), or of the newest capture in a TensorBoard log directory (host by host when
//! it holds several, as a distributed run's does); with two, how the second changed against
//! the first; `--chrome` also writes Chrome trace JSON.
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use ferroflow::profiler::report::{analyze, compare, Report, Stat, Verdict};
use ferroflow::profiler::xspace::read_xspace;
use ferroflow::proto::profiler::XSpace;
use serde_json::{json, Value};

/// Report a profile as TensorBoard's profile pages do: top ops, step time, input-bound verdict.
///
/// Top op types by self time, the step-time breakdown (input / compute / other), whether the step
/// is input-bound (TensorFlow's thresholds: input above 20% of the step highly, 5–20%
/// moderately) and what to change. PATH is an `.xplane.pb` (ferroflow's or TensorFlow's) or a
/// log directory (its newest capture, host by host); with two PATHs, how the second changed
/// against the first. --json prints the same as JSON (docs/CLI-JSON.md).
#[derive(Args)]
pub struct ProfileArgs {
    /// One or two `.xplane.pb` files or log directories.
    #[arg(required = true, num_args = 1..=2)]
    paths: Vec<PathBuf>,
    /// Also write the (first) profile as Chrome trace JSON, for Perfetto or chrome://tracing.
    #[arg(short = 'o', long, value_name = "OUT.json", alias = "chrome")]
    output: Option<PathBuf>,
    /// Print JSON instead of text (see docs/CLI-JSON.md).
    #[arg(long)]
    json: bool,
}

pub fn run(args: ProfileArgs) -> Result<()> {
    let (paths, chrome, json) = (&args.paths, args.output.as_deref(), args.json);
    if paths.is_empty() || paths.len() > 2 {
        bail!("give one profile (or log directory), or two to compare");
    }
    let mut reports = Vec::new();
    let mut shown = Vec::new();
    let mut written = None;
    for p in paths {
        // The newest run; a capture of several hosts (the ranks of a distributed run) is
        // reported host by host, and its first host is the one compared.
        let mut found = captures(p)?;
        let newest = found.last().and_then(|f| f.parent()).map(Path::to_path_buf);
        found.retain(|f| f.parent() == newest.as_deref());
        let mut first = None;
        for file in &found {
            let (space, report) = load(file)?;
            if json {
                let mut v = report_json(&report);
                v["path"] = json!(p.display().to_string());
                v["file"] = json!(file.display().to_string());
                shown.push(v);
            } else {
                out!("== {}", file.display());
                crate::output::print_str(&report.to_string());
                out!();
            }
            first.get_or_insert((space, report));
        }
        let (space, report) = first.expect("captures is non-empty");
        if let Some(out) = chrome {
            if reports.is_empty() {
                ferroflow::profiler::chrome::write_xspace_chrome_trace_file(&space, out)?;
                written = Some(out.display().to_string());
                if !json {
                    out!("wrote Chrome trace JSON to {} (open it in Perfetto or chrome://tracing)", out.display());
                }
            }
        }
        reports.push(report);
    }
    let comparison = match &reports[..] {
        [a, b] => Some((compare(a, b), comparison_json(a, b))),
        _ => None,
    };
    if json {
        return super::print_json(&json!({
            "profiles": shown,
            "comparison": comparison.map(|(text, mut v)| {
                v["text"] = json!(text);
                v
            }),
            "chrome_trace": written,
        }));
    }
    if let Some((text, _)) = comparison {
        out!("Second against first: {text}");
    }
    Ok(())
}

/// A report as JSON: every figure the text shows (and the full lists the text cuts short).
fn report_json(r: &Report) -> Value {
    let stats = |v: &[Stat]| -> Vec<Value> {
        v.iter().map(|s| json!({"name": s.name, "count": s.count, "self_ns": s.self_ns})).collect()
    };
    let steps: Vec<Value> = r
        .steps
        .iter()
        .map(|s| {
            json!({
                "step": s.step,
                "total_ns": s.total_ns,
                "input_ns": s.input_ns,
                "compute_ns": s.compute_ns,
                "other_ns": s.other_ns(),
            })
        })
        .collect();
    let (total, input, compute, other) = r.average();
    json!({
        "hosts": r.hosts,
        "threads": r.threads,
        "steps": steps,
        "counted_steps": r.counted_steps().len(),
        "average_step": {"total_ns": total, "input_ns": input, "compute_ns": compute, "other_ns": other},
        "input_share": r.input_share(),
        "verdict": match r.verdict {
            Verdict::NoSteps => "no_steps",
            Verdict::HighlyInputBound => "highly_input_bound",
            Verdict::ModeratelyInputBound => "moderately_input_bound",
            Verdict::NotInputBound => "not_input_bound",
        },
        "op_types": stats(&r.op_types),
        "ops": stats(&r.ops),
        "stages": stats(&r.stages),
        "recommendations": r.recommendations,
    })
}

/// The figures of `compare(a, b)`: the average step and its input wait before and after.
fn comparison_json(before: &Report, after: &Report) -> Value {
    let (b, bi, _, _) = before.average();
    let (a, ai, _, _) = after.average();
    let ratio = |x: f64, y: f64| if y > 0.0 { json!(x / y) } else { Value::Null };
    json!({
        "step_ns_before": b,
        "step_ns_after": a,
        "speedup": ratio(b, a),
        "input_share_before": ratio(bi, b),
        "input_share_after": ratio(ai, a),
        "input_ns_before": bi,
        "input_ns_after": ai,
    })
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
