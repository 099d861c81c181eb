//! `ferroflow inspect`: a graph's nodes with their inferred shapes, or what TensorFlow's
//! `saved_model_cli show --all` prints of a SavedModel.
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::load;

/// List a graph's nodes with their ops, inputs, dtypes and inferred shapes; for a Keras model
/// file (.keras, Keras 2 .h5), what `model.summary()` prints; for a SavedModel
/// directory, what TensorFlow's `saved_model_cli show --all` prints (tag sets, signatures
/// with their inputs' and outputs' dtypes, shapes and tensor names, the ops, the concrete
/// functions) and the ops ferroflow cannot run, if any. With --coverage, every op type the
/// model uses (its functions included) and whether ferroflow runs and differentiates it.
#[derive(Args)]
pub struct InspectArgs {
    /// The graph file, a SavedModel directory, or a Keras model file.
    graph: PathBuf,
    /// List every op type the model uses (graph and library functions) with its node count,
    /// whether ferroflow runs it (for one it lacks: whether TensorFlow has it and the nearest
    /// op ferroflow has) and whether ferroflow differentiates it; then a summary line.
    #[arg(long)]
    coverage: bool,
    /// With --coverage: print JSON (`{"model", "nodes", "ops": [{"op", "uses", "runs",
    /// "in_tensorflow", "nearest", "gradient"}], ...}`).
    #[arg(long, requires = "coverage")]
    json: bool,
}

pub fn run(args: InspectArgs) -> Result<()> {
    let path = args.graph.as_path();
    if super::keras::is_keras(path) && !args.coverage {
        return super::keras::inspect(path);
    }
    if args.coverage {
        return coverage(path, args.json);
    }
    if super::is_saved_model(path)? {
        let model = ferroflow::train::saved_model_show::read_saved_model(path)?;
        let text = ferroflow::train::saved_model_show::show_all_of(&model);
        let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes());
        for meta in &model.meta_graphs {
            let Some(graph) = &meta.graph_def else { continue };
            let tags = meta.meta_info_def.as_ref().map(|i| i.tags.join(", ")).unwrap_or_default();
            let save = ferroflow::train::saved_model::save_node(meta);
            let serving = ferroflow::runtime::support::missing_ops(graph, save.as_slice());
            let all = ferroflow::runtime::support::missing_ops(graph, &[]);
            if !serving.is_empty() {
                out!("\nOps ferroflow cannot run in the meta graph tagged '{tags}' (loading it fails):");
                for m in &serving {
                    out!("  {m}");
                }
            }
            let save_only: Vec<_> = all.iter().filter(|m| !serving.iter().any(|s| s.op == m.op)).collect();
            if !save_only.is_empty() {
                let ops: Vec<&str> = save_only.iter().map(|m| m.op.as_str()).collect();
                out!(
                    "\nOnly the meta graph's save function uses ops ferroflow cannot run ({}); loading and calling signatures do not need them.",
                    ops.join(", ")
                );
            }
        }
        return Ok(());
    }
    let g = load::graph(path)?;
    let shapes = ferroflow::ops::infer_shapes(&g)?;
    out!("{}: {} nodes, {} functions", path.display(), g.len(), g.library.function.len());
    for (id, n) in g.nodes().iter().enumerate() {
        let inputs: Vec<String> = n.inputs.iter().map(|o| g.output_name(*o)).collect();
        let outs: Vec<String> = n.types.outputs.iter().zip(&shapes[id]).map(|(t, s)| format!("{t}{s}")).collect();
        out!("  {} = {}({}) -> {}", n.name, n.op, inputs.join(", "), outs.join(", "));
    }
    Ok(())
}

/// `inspect --coverage`: the op types of a graph file or of a SavedModel's serving meta graph
/// (its save and restore nodes left out), each with its count and whether ferroflow runs and
/// differentiates it.
fn coverage(path: &std::path::Path, json: bool) -> Result<()> {
    use ferroflow::ops::facts::Gradient;
    use ferroflow::ops::OpRegistry;
    let def = if super::is_saved_model(path)? {
        let model = ferroflow::train::saved_model_show::read_saved_model(path)?;
        let meta = model
            .meta_graphs
            .iter()
            .find(|m| m.meta_info_def.as_ref().is_some_and(|i| i.tags.iter().any(|t| t == "serve")))
            .or_else(|| model.meta_graphs.first())
            .ok_or_else(|| anyhow::anyhow!("{}: the SavedModel has no meta graph", path.display()))?;
        let save = ferroflow::train::saved_model::save_node(meta);
        let mut def = meta.graph_def.clone().unwrap_or_default();
        def.node.retain(|n| save != Some(n.name.as_str()));
        def
    } else {
        // Read, not imported: importing rejects the unknown ops this lists.
        ferroflow::graph::io::read_graph_def(path)?
    };
    let uses = ferroflow::runtime::support::op_uses(&def, &[]);
    let reg = OpRegistry::global();
    let nodes: usize = uses.iter().map(|u| u.uses).sum();
    let gradient = |op: &str| -> &'static str {
        match reg.get(op).and_then(|d| d.facts.gradient) {
            Some(Gradient::Function(_) | Gradient::ThroughFunctions) => "yes",
            Some(Gradient::NotDifferentiable(_)) => "not differentiable",
            Some(Gradient::Unavailable(_)) => "not implemented",
            None if reg.get(op).is_some() => "undeclared",
            None => "-",
        }
    };
    let runs = uses.iter().filter(|u| u.runs).count();
    let differentiable: Vec<&str> =
        uses.iter().map(|u| gradient(&u.op)).filter(|g| *g != "not differentiable").collect();
    let differentiates = differentiable.iter().filter(|g| **g == "yes").count();
    if json {
        let ops: Vec<serde_json::Value> = uses
            .iter()
            .map(|u| {
                serde_json::json!({
                    "op": u.op,
                    "uses": u.uses,
                    "runs": u.runs,
                    "in_tensorflow": ferroflow::ops::tensorflow_has_op(&u.op),
                    "nearest": if u.defined { None } else { reg.nearest(&u.op) },
                    "gradient": gradient(&u.op),
                })
            })
            .collect();
        let v = serde_json::json!({
            "model": path.display().to_string(),
            "nodes": nodes,
            "op_types": uses.len(),
            "runs": runs,
            "differentiable": differentiable.len(),
            "differentiates": differentiates,
            "ops": ops,
        });
        out!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    out!("{:<40} {:>6}  {:<58} gradient", "op", "nodes", "runs");
    for u in &uses {
        let run = if u.runs {
            "yes".to_string()
        } else if u.defined {
            "no: defined, but no CPU kernel".to_string()
        } else {
            let tf = if ferroflow::ops::tensorflow_has_op(&u.op) { "TensorFlow has it" } else { "not a TensorFlow op" };
            match reg.nearest(&u.op) {
                Some(n) => format!("no: {tf}; nearest ferroflow op '{n}'"),
                None => format!("no: {tf}"),
            }
        };
        out!("{:<40} {:>6}  {:<58} {}", u.op, u.uses, run, gradient(&u.op));
    }
    out!(
        "{}: {nodes} nodes, {} op types; ferroflow runs {runs} of {} op types and differentiates {differentiates} of the {} differentiable ones",
        path.display(),
        uses.len(),
        uses.len(),
        differentiable.len()
    );
    Ok(())
}
