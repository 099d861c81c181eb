//! `ferroflow optimize`: the graph optimizer run on a graph for its fetches, with what each
//! pass did.
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use ferroflow::prelude::*;
use serde_json::json;

use crate::load;

/// Optimize a GraphDef with Grappler's passes and report what each pass did.
///
/// Runs ferroflow's graph optimizer — TensorFlow's Grappler passes: pruning, common subexpression
/// elimination, constant folding, arithmetic simplification, MatMul/Conv2D + BiasAdd + activation
/// fusion, elementwise fusion, dependency optimization — on a GraphDef for the given fetches,
/// prints a table of what each pass did (with --report, every change by node name) and writes the
/// optimized GraphDef. --json prints the report as JSON (docs/CLI-JSON.md).
#[derive(Args)]
pub struct OptimizeArgs {
    /// The graph file (.pb or .pbtxt).
    graph: PathBuf,
    /// A tensor that will be fetched (repeatable; its node keeps its name).
    #[arg(long = "fetch", value_name = "NAME", required = true)]
    fetches: Vec<String>,
    /// A tensor that will be fed (repeatable; never treated as constant).
    #[arg(long = "feed", value_name = "NAME")]
    feeds: Vec<String>,
    /// A node that will be run as a target (repeatable).
    #[arg(long = "target", value_name = "NODE")]
    targets: Vec<String>,
    /// Write the optimized graph here (.pbtxt as text, otherwise binary).
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    output: Option<PathBuf>,
    /// Print every change by node name after the per-pass table.
    #[arg(long)]
    report: bool,
    /// Print the report as JSON (every pass with every change by node name; see
    /// docs/CLI-JSON.md).
    #[arg(long)]
    json: bool,
    /// Write the graph after each pass to DIR/NN_round<R>_<pass>.pbtxt.
    #[arg(long, value_name = "DIR")]
    dump_dir: Option<PathBuf>,
    /// Also allow rewrites that change floating-point results (x/c -> x*(1/c), ...).
    #[arg(long)]
    inexact_float_rewrites: bool,
    /// Skip a pass by name (repeatable).
    #[arg(long = "disable", value_name = "PASS")]
    disabled: Vec<String>,
}

pub fn run(args: OptimizeArgs) -> Result<()> {
    let OptimizeArgs {
        graph,
        fetches,
        feeds,
        targets,
        output,
        report: details,
        json,
        dump_dir,
        inexact_float_rewrites,
        disabled,
    } = args;
    let item = ferroflow::optimize::Item { feeds, fetches: fetches.clone(), targets, keep: vec![] };
    let options = ferroflow::optimize::OptimizerOptions::default()
        .with_inexact_float_rewrites(inexact_float_rewrites)
        .with_disabled_passes(disabled)
        .with_fail_on_pass_error(false);
    let (output, dump_dir) = (output.as_deref(), dump_dir.as_deref());
    const PASSES: &[&str] = &[
        "pruning",
        "common_subexpression_elimination",
        "constant_folding",
        "arithmetic_simplification",
        "contraction_fusion",
        "elementwise_fusion",
        "dependency_optimizer",
    ];
    for d in &options.disabled_passes {
        if !PASSES.contains(&d.as_str()) {
            bail!("--disable '{d}': no such pass (passes: {})", PASSES.join(", "));
        }
    }
    let g = load::graph(&graph)?;
    if let Some(dir) = dump_dir {
        std::fs::create_dir_all(dir).with_context(|| format!("creating --dump-dir {}", dir.display()))?;
    }
    let mut step = 0;
    let mut dump = |round: usize,
                    pass: &str,
                    graph: &Graph|
     -> std::result::Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let Some(dir) = dump_dir else { return Ok(()) };
        let file = dir.join(format!("{step:02}_round{round}_{pass}.pbtxt"));
        step += 1;
        Ok(ferroflow::graph::io::write_graph_def(&file, &graph.to_graph_def())?)
    };
    let optimized = ferroflow::optimize::MetaOptimizer::new(options).optimize_with_dump(&g, &item, &mut dump)?;
    let report = &optimized.report;
    if let Some(out) = output {
        ferroflow::graph::io::write_graph_def(out, &optimized.graph.to_graph_def())?;
    }
    if json {
        let mut v = report_json(report);
        v["graph"] = json!(graph.display().to_string());
        v["fetches"] = json!(fetches);
        v["output"] = json!(output.map(|o| o.display().to_string()));
        v["dump_dir"] = json!(dump_dir.map(|d| d.display().to_string()));
        return super::print_json(&v);
    }
    out!("{}", if details { report.details() } else { report.table() }.trim_end());
    if let Some(out) = output {
        out!("wrote {} ({} nodes)", out.display(), optimized.graph.len());
    }
    if let Some(dir) = dump_dir {
        out!("wrote the graph after each pass to {}", dir.display());
    }
    Ok(())
}

/// The optimizer's report as JSON: the totals and every pass with every change.
fn report_json(r: &ferroflow::optimize::Report) -> serde_json::Value {
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    let passes: Vec<serde_json::Value> = r
        .passes
        .iter()
        .map(|p| {
            json!({
                "round": p.round,
                "pass": p.pass,
                "nodes_before": p.nodes_before,
                "nodes_after": p.nodes_after,
                "removed": p.removed,
                "added": p.added,
                "folded": p.folded,
                "merged": p.merged.iter().map(|(node, into)| json!({"node": node, "into": into})).collect::<Vec<_>>(),
                "fused": p
                    .fused
                    .iter()
                    .map(|(node, absorbed, op)| json!({"node": node, "op": op, "absorbed": absorbed}))
                    .collect::<Vec<_>>(),
                "rewritten": p.rewritten.iter().map(|(node, what)| json!({"node": node, "what": what})).collect::<Vec<_>>(),
                "control_edges_removed": p.control_edges_removed,
                "time_ms": ms(p.time),
                "timed_out": p.timed_out,
                "error": p.error,
            })
        })
        .collect();
    json!({
        "nodes_before": r.nodes_before,
        "nodes_after": r.nodes_after,
        "rounds": r.rounds,
        "time_ms": ms(r.time),
        "passes": passes,
    })
}
