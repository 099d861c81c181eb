//! `ferroflow inspect`: a graph's nodes with their inferred shapes, or what TensorFlow's
//! `saved_model_cli show --all` prints of a SavedModel.
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use serde_json::{json, Value};

use crate::load;

/// Show a GraphDef's nodes, a SavedModel's signatures or a Keras model's summary.
///
/// A GraphDef's nodes with their ops, inputs, dtypes and inferred shapes; for a SavedModel
/// directory, what TensorFlow's `saved_model_cli show --all` prints (tag sets, signatures with
/// their inputs' and outputs' dtypes, shapes and tensor names, the ops, the concrete functions)
/// and the ops ferroflow cannot run, if any; for a Keras model file (.keras, Keras 2 .h5), what
/// `model.summary()` prints. With --coverage, every op type the model uses (its functions
/// included) and whether ferroflow runs and differentiates it. --json prints the same facts as
/// JSON (docs/CLI-JSON.md).
#[derive(Args)]
pub struct InspectArgs {
    /// The GraphDef (.pb, .pbtxt), SavedModel directory, or Keras model file (.keras, .h5).
    graph: PathBuf,
    /// List every op type the model uses (graph and library functions) with its node count,
    /// whether ferroflow runs it (for one it lacks: whether TensorFlow has it and the nearest
    /// op ferroflow has) and whether ferroflow differentiates it; then a summary line.
    #[arg(long)]
    coverage: bool,
    /// Print JSON instead of text: the nodes of a graph, the meta graphs of a SavedModel, the
    /// layers of a Keras model, or with --coverage the op types (see docs/CLI-JSON.md).
    #[arg(long)]
    json: bool,
}

pub fn run(args: InspectArgs) -> Result<()> {
    let path = args.graph.as_path();
    if super::keras::is_keras(path) && !args.coverage {
        return super::keras::inspect(path, args.json);
    }
    if args.coverage {
        return coverage(path, args.json);
    }
    if super::is_saved_model(path)? {
        return saved_model(path, args.json);
    }
    let g = load::graph(path)?;
    let shapes = ferroflow::ops::infer_shapes(&g)?;
    if args.json {
        let nodes: Vec<Value> = g
            .nodes()
            .iter()
            .enumerate()
            .map(|(id, n)| {
                let outputs: Vec<Value> = n
                    .types
                    .outputs
                    .iter()
                    .zip(&shapes[id])
                    .map(|(t, s)| json!({"dtype": t.to_string(), "shape": shape_json(s)}))
                    .collect();
                json!({
                    "name": n.name,
                    "op": n.op,
                    "inputs": n.inputs.iter().map(|o| g.output_name(*o)).collect::<Vec<_>>(),
                    "outputs": outputs,
                })
            })
            .collect();
        return super::print_json(&json!({
            "model": path.display().to_string(),
            "format": "graph_def",
            "nodes": g.len(),
            "functions": g.library.function.len(),
            "node_list": nodes,
        }));
    }
    out!("{}: {} nodes, {} functions", path.display(), g.len(), g.library.function.len());
    for (id, n) in g.nodes().iter().enumerate() {
        let inputs: Vec<String> = n.inputs.iter().map(|o| g.output_name(*o)).collect();
        let outs: Vec<String> = n.types.outputs.iter().zip(&shapes[id]).map(|(t, s)| format!("{t}{s}")).collect();
        out!("  {} = {}({}) -> {}", n.name, n.op, inputs.join(", "), outs.join(", "));
    }
    Ok(())
}

/// A shape as JSON: its dimensions (`null` for an unknown one), or `null` for an unknown rank.
pub(crate) fn shape_json(s: &ferroflow::tensor::Shape) -> Value {
    match s.dims() {
        Some(d) => json!(d),
        None => Value::Null,
    }
}

/// `inspect DIR` of a SavedModel: `saved_model_cli show --all`'s text, then the ops ferroflow
/// cannot run in each meta graph (all of them, or only in its save function).
fn saved_model(path: &std::path::Path, as_json: bool) -> Result<()> {
    use ferroflow::proto::tensor_info::Encoding;
    let model = ferroflow::train::saved_model_show::read_saved_model(path)?;
    let text = ferroflow::train::saved_model_show::show_all_of(&model);
    let mut metas = Vec::new();
    let mut notes = String::new();
    for meta in &model.meta_graphs {
        let tag_list = meta.meta_info_def.as_ref().map(|i| i.tags.clone()).unwrap_or_default();
        let tags = tag_list.join(", ");
        let (serving, save_only) = match &meta.graph_def {
            Some(graph) => {
                let save = ferroflow::train::saved_model::save_node(meta);
                let serving = ferroflow::runtime::support::missing_ops(graph, save.as_slice());
                let all = ferroflow::runtime::support::missing_ops(graph, &[]);
                let save_only: Vec<_> = all.into_iter().filter(|m| !serving.iter().any(|s| s.op == m.op)).collect();
                (serving, save_only)
            }
            None => (vec![], vec![]),
        };
        if !serving.is_empty() {
            notes += &format!("\nOps ferroflow cannot run in the meta graph tagged '{tags}' (loading it fails):\n");
            for m in &serving {
                notes += &format!("  {m}\n");
            }
        }
        if !save_only.is_empty() {
            let ops: Vec<&str> = save_only.iter().map(|m| m.op.as_str()).collect();
            notes += &format!(
                "\nOnly the meta graph's save function uses ops ferroflow cannot run ({}); loading and calling signatures do not need them.\n",
                ops.join(", ")
            );
        }
        if as_json {
            let tensor = |info: &ferroflow::proto::TensorInfo| {
                let dtype = ferroflow::proto::DataType::try_from(info.dtype)
                    .map_or_else(|_| info.dtype.to_string(), |d| d.as_str_name().to_string());
                let shape = match &info.tensor_shape {
                    Some(s) if !s.unknown_rank => json!(s.dim.iter().map(|d| d.size).collect::<Vec<_>>()),
                    _ => Value::Null,
                };
                let name = match &info.encoding {
                    Some(Encoding::Name(n)) => n.as_str(),
                    _ => "",
                };
                json!({"dtype": dtype, "shape": shape, "name": name})
            };
            let signatures: serde_json::Map<String, Value> = meta
                .signature_def
                .iter()
                .map(|(key, sig)| {
                    let side = |m: &std::collections::BTreeMap<String, ferroflow::proto::TensorInfo>| {
                        m.iter().map(|(k, info)| (k.clone(), tensor(info))).collect::<serde_json::Map<_, _>>()
                    };
                    (
                        key.clone(),
                        json!({"method_name": sig.method_name, "inputs": side(&sig.inputs), "outputs": side(&sig.outputs)}),
                    )
                })
                .collect();
            let missing = |ms: &[ferroflow::runtime::support::MissingOp]| -> Vec<Value> {
                ms.iter()
                    .map(|m| json!({"op": m.op, "defined": m.defined, "uses": m.uses, "places": m.places}))
                    .collect()
            };
            metas.push(json!({
                "tags": tag_list,
                "signatures": signatures,
                "ops": ferroflow::train::saved_model_show::ops_used(meta.graph_def.as_ref()),
                "unsupported_ops": missing(&serving),
                "save_only_unsupported_ops": missing(&save_only),
            }));
        }
    }
    if as_json {
        let concrete = text.split_once("\nConcrete Functions:").map(|(_, c)| c.trim_start_matches('\n'));
        return super::print_json(&json!({
            "model": path.display().to_string(),
            "format": "saved_model",
            "meta_graphs": metas,
            "concrete_functions": concrete,
            "saved_model_cli": text,
        }));
    }
    crate::output::print_str(&text);
    for line in notes.lines() {
        out!("{line}");
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
        return super::print_json(&v);
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
