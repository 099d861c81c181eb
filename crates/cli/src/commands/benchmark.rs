//! `ferroflow benchmark`: a graph's latency over repeated runs (TensorFlow's
//! benchmark_model), with the time per op type on request.
use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;
use ferroflow::prelude::*;
use ferroflow::proto::RunOptions;
use serde_json::{json, Value};

use crate::load;

/// Time a GraphDef's runs, as TensorFlow's benchmark_model does.
///
/// Loads the graph once, runs it --warmup times, then --runs times, and prints the per-run
/// latency; the last line is `median_ms=<v> min_ms=<v> max_ms=<v> peak_rss_mb=<v>
/// page_faults_per_run=<v>` (minor page faults per timed run: memory touched for the first
/// time). With --profile, also the time per op type and the slowest nodes (from RunMetadata step
/// stats of FULL_TRACE runs after the timed ones). --json prints the same figures as JSON
/// (docs/CLI-JSON.md).
#[derive(Args)]
pub struct BenchmarkArgs {
    /// The graph file (.pb or .pbtxt).
    graph: PathBuf,
    /// Feeds: an .npz keyed by tensor name.
    #[arg(long, value_name = "FEEDS.npz")]
    inputs: Option<PathBuf>,
    /// A feed: NAME=FILE.npy (repeatable).
    #[arg(long, value_name = "NAME=FILE.npy")]
    feed: Vec<String>,
    /// Tensors to fetch (repeatable).
    #[arg(long, value_name = "NAME", required = true)]
    fetch: Vec<String>,
    /// Timed runs.
    #[arg(long, default_value_t = 20)]
    runs: usize,
    /// Untimed runs first.
    #[arg(long, default_value_t = 3)]
    warmup: usize,
    /// Threads running independent nodes (0 = one per core).
    #[arg(long, default_value_t = 0)]
    inter_op_threads: usize,
    /// Threads one large kernel may use (0 = one per core).
    #[arg(long, default_value_t = 0)]
    intra_op_threads: usize,
    /// Run the graph as written (no optimizer).
    #[arg(long)]
    no_optimize: bool,
    /// Also print the time per op type and the slowest nodes.
    #[arg(long)]
    profile: bool,
    /// How many of the slowest nodes --profile lists.
    #[arg(long, default_value_t = 25, value_name = "N")]
    top: usize,
    /// Print JSON instead of text (see docs/CLI-JSON.md).
    #[arg(long)]
    json: bool,
}

pub fn run(args: BenchmarkArgs) -> Result<()> {
    let BenchmarkArgs {
        graph,
        inputs,
        feed: feeds,
        fetch: fetches,
        runs,
        warmup,
        inter_op_threads,
        intra_op_threads,
        no_optimize,
        profile,
        top,
        json,
    } = args;
    let mut options =
        SessionOptions::default().with_inter_op_threads(inter_op_threads).with_intra_op_threads(intra_op_threads);
    options.optimizer.enabled = !no_optimize;
    let profile = profile.then_some(top);
    if runs == 0 {
        bail!("--runs 0: expected at least one timed run");
    }
    let g = load::graph(&graph)?;
    let feeds = load::feeds(inputs.as_deref(), &feeds)?;
    let sess = Session::new(g, options)?;
    let names: Vec<&str> = feeds.iter().map(|(n, _)| n.as_str()).collect();
    let fetch_refs: Vec<&str> = fetches.iter().map(String::as_str).collect();
    let plan = sess.plan(&names, &fetch_refs, &[])?;
    let values: Vec<Tensor> = feeds.iter().map(|(_, t)| t.clone()).collect();
    for _ in 0..warmup {
        sess.run_plan(&plan, &values)?;
    }
    let mut ms = Vec::with_capacity(runs);
    let faults_before = ferroflow::testing::minor_page_faults();
    for _ in 0..runs {
        let start = std::time::Instant::now();
        sess.run_plan(&plan, &values)?;
        ms.push(start.elapsed().as_secs_f64() * 1e3);
    }
    let faults = faults_before.zip(ferroflow::testing::minor_page_faults()).map(|(a, b)| b.saturating_sub(a));
    let mean = ms.iter().sum::<f64>() / ms.len() as f64;
    ms.sort_by(f64::total_cmp);
    let header = format!(
        "{}: {} nodes ({} after optimization), {runs} runs after {warmup} warm-up, mean {mean:.3} ms",
        graph.display(),
        sess.graph().len(),
        plan.graph().len()
    );
    if !json {
        out!("{header}");
    }
    let mut profiled = None;
    if let Some(top) = profile {
        let traced = runs.clamp(1, 10);
        let options = RunOptions {
            trace_level: ferroflow::proto::run_options::TraceLevel::FullTrace as i32,
            ..Default::default()
        };
        let mut by_op: std::collections::BTreeMap<String, (f64, usize)> = std::collections::BTreeMap::new();
        let mut by_node: std::collections::HashMap<String, (f64, String)> = std::collections::HashMap::new();
        for _ in 0..traced {
            let (_, meta) = sess.run_plan_with_options(&plan, &values, &options)?;
            for dev in meta.step_stats.iter().flat_map(|s| &s.dev_stats) {
                for n in &dev.node_stats {
                    let op = plan.graph().find(&n.node_name).map_or("?", |id| plan.graph().node(id).op.as_str());
                    let e = by_op.entry(op.to_string()).or_default();
                    let t = (n.op_end_rel_nanos - n.op_start_rel_nanos).max(0) as f64 / 1e6;
                    e.0 += t;
                    e.1 += 1;
                    let shape = n
                        .output
                        .first()
                        .and_then(|o| o.tensor_description.as_ref()?.shape.as_ref())
                        .map(|s| format!("{:?}", s.dim.iter().map(|d| d.size).collect::<Vec<_>>()))
                        .unwrap_or_default();
                    let e = by_node.entry(n.node_name.clone()).or_insert_with(|| (0.0, format!("{op} {shape}")));
                    e.0 += t;
                }
            }
        }
        let total: f64 = by_op.values().map(|v| v.0).sum();
        let mut rows: Vec<(String, f64, usize)> = by_op.into_iter().map(|(k, (t, n))| (k, t, n)).collect();
        rows.sort_by(|a, b| b.1.total_cmp(&a.1));
        let mut nodes: Vec<(String, f64, String)> = by_node.into_iter().map(|(k, (t, what))| (k, t, what)).collect();
        nodes.sort_by(|a, b| b.1.total_cmp(&a.1));
        nodes.truncate(top);
        let share = |t: f64| 100.0 * t / total.max(1e-12);
        let per_run = |t: f64| t / traced as f64;
        if json {
            let ops: Vec<Value> = rows
                .iter()
                .map(|(op, t, n)| json!({"op": op, "ms_per_run": per_run(*t), "share_pct": share(*t), "nodes": n / traced}))
                .collect();
            let slowest: Vec<Value> = nodes
                .iter()
                .map(|(name, t, what)| {
                    let (op, shape) = what.split_once(' ').unwrap_or((what.as_str(), ""));
                    let shape: Value = serde_json::from_str(shape).unwrap_or(Value::Null);
                    json!({"node": name, "ms_per_run": per_run(*t), "share_pct": share(*t), "op": op, "shape": shape})
                })
                .collect();
            profiled = Some(json!({"traced_runs": traced, "op_types": ops, "slowest_nodes": slowest}));
        } else {
            out!("time per op type, mean of {traced} traced runs (op time summed over threads):");
            out!("  {:<28} {:>10} {:>7} {:>6}", "op", "ms/run", "share", "nodes");
            for (op, t, n) in rows {
                out!("  {op:<28} {:>10.3} {:>6.1}% {:>6}", per_run(t), share(t), n / traced);
            }
            out!("slowest nodes (ms/run, share, op and first output's shape):");
            for (name, t, what) in &nodes {
                out!("  {name:<40} {:>10.3} {:>6.1}%  {what}", per_run(*t), share(*t));
            }
        }
    }
    let (median, min, max) = (ms[ms.len() / 2], ms[0], ms[ms.len() - 1]);
    let peak_rss_mb = ferroflow::testing::peak_rss_mb().unwrap_or(0.0);
    let faults_per_run = faults.map(|f| f as f64 / runs as f64);
    if json {
        return super::print_json(&json!({
            "graph": graph.display().to_string(),
            "nodes": sess.graph().len(),
            "nodes_optimized": plan.graph().len(),
            "runs": runs,
            "warmup": warmup,
            "mean_ms": mean,
            "median_ms": median,
            "min_ms": min,
            "max_ms": max,
            "run_ms": ms,
            "peak_rss_mb": peak_rss_mb,
            "page_faults_per_run": faults_per_run,
            "profile": profiled,
        }));
    }
    out!(
        "median_ms={median:.3} min_ms={min:.3} max_ms={max:.3} peak_rss_mb={peak_rss_mb:.1} page_faults_per_run={:.0}",
        faults_per_run.unwrap_or(f64::NAN)
    );
    Ok(())
}
