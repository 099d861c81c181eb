//! `ferroflow inspect`: a graph's nodes with their inferred shapes, or what TensorFlow's
//! `saved_model_cli show --all` prints of a SavedModel.
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::load;

/// List a graph's nodes with their ops, inputs, dtypes and inferred shapes; for a SavedModel
/// directory, what TensorFlow's `saved_model_cli show --all` prints (tag sets, signatures
/// with their inputs' and outputs' dtypes, shapes and tensor names, the ops, the concrete
/// functions) and the ops ferroflow cannot run, if any.
#[derive(Args)]
pub struct InspectArgs {
    /// The graph file, or a SavedModel directory.
    graph: PathBuf,
}

pub fn run(args: InspectArgs) -> Result<()> {
    let path = args.graph.as_path();
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
