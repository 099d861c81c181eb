//! `ferroflow convert`: a graph imported, validated and written back (text or binary), or a
//! SavedModel's signature frozen into a GraphDef.
use ferroflow::proto::attr::AttrMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use ferroflow::prelude::*;

use crate::load;

/// Import a GraphDef (validating it) and write it back: .pbtxt as text, otherwise binary.
/// A Keras model file is built and written back through ferroflow's writer: OUT.keras
/// (a Keras 3 archive) or OUT.weights.h5 (its weights).
#[derive(Args)]
pub struct ConvertArgs {
    /// Input graph (.pb or .pbtxt), a SavedModel directory (one signature is frozen:
    /// calls inlined, variables made constants, inputs and outputs named by their keys), or
    /// a Keras model file (.keras, .h5).
    input: PathBuf,
    /// Output graph (.pb or .pbtxt), or for a Keras model OUT.keras or OUT.weights.h5.
    output: PathBuf,
    /// With a Keras model: read its weights from this file first (.weights.h5 or a Keras
    /// 2 .h5; layers matched as Keras's load_weights matches them).
    #[arg(long, value_name = "FILE")]
    weights: Option<PathBuf>,
    /// With a SavedModel: the signature to freeze.
    #[arg(long, default_value = "serving_default")]
    signature: String,
    /// With a SavedModel: a tag of the meta graph to load (repeatable; default `serve`).
    #[arg(long = "tag", value_name = "TAG")]
    tags: Vec<String>,
}

pub fn run(args: ConvertArgs) -> Result<()> {
    if super::keras::is_keras(&args.input) {
        return super::keras::convert(&args.input, &args.output, args.weights.as_deref());
    }
    if args.weights.is_some() {
        bail!("--weights applies to a Keras model file (.keras or .h5), not {}", args.input.display());
    }
    if super::is_saved_model(&args.input)? {
        freeze_saved_model(&args.input, &args.output, &args.signature, &args.tags)
    } else {
        convert(&args.input, &args.output)
    }
}

fn convert(input: &Path, output: &Path) -> Result<()> {
    let g = load::graph(input)?;
    validate(&g).with_context(|| format!("validating {}", input.display()))?;
    ferroflow::graph::io::write_graph_def(output, &g.to_graph_def())?;
    out!("{}: {} nodes -> {}", input.display(), g.len(), output.display());
    Ok(())
}

/// `ferroflow convert DIR frozen.pb --signature NAME`: one signature of a SavedModel frozen
/// into a GraphDef, validated (imported, shapes inferred) before it is written.
fn freeze_saved_model(dir: &Path, output: &Path, signature: &str, tags: &[String]) -> Result<()> {
    let tags: Vec<&str> = if tags.is_empty() { vec!["serve"] } else { tags.iter().map(String::as_str).collect() };
    let model = ferroflow::train::saved_model::SavedModel::load(dir, &tags, SessionOptions::default())?;
    let frozen = model.freeze(signature)?;
    let g = ferroflow::ops::import_graph_def(&frozen)
        .with_context(|| format!("the frozen signature '{signature}' does not import"))?;
    validate(&g)?;
    ferroflow::graph::io::write_graph_def(output, &frozen)?;
    let sig = model.signature(signature)?;
    let list = |specs: &[ferroflow::train::saved_model::TensorSpec]| {
        specs.iter().map(|s| format!("{}:0 ({}{})", s.key, s.dtype, s.shape)).collect::<Vec<_>>().join(", ")
    };
    out!(
        "{}: signature '{signature}' frozen into {} nodes, {} functions -> {}",
        dir.display(),
        frozen.node.len(),
        frozen.library.as_ref().map_or(0, |l| l.function.len()),
        output.display()
    );
    out!("  feed  {}", list(&sig.inputs));
    out!("  fetch {}", list(&sig.outputs));
    Ok(())
}

/// What `convert` checks past import (which checks ops, inputs and types): every node's shape
/// function accepts it, and every tensor-valued attr (a `Const`'s value) decodes to a tensor of
/// its declared dtype and shape.
fn validate(g: &Graph) -> Result<()> {
    use ferroflow::proto::attr_value::Value;
    ferroflow::ops::infer_shapes(g)?;
    for n in g.nodes() {
        for (name, attr) in &n.attrs {
            let Some(Value::Tensor(t)) = &attr.value else { continue };
            let value = ferroflow::proto::convert::tensor_from_proto(t)
                .map_err(|e| anyhow::anyhow!("node '{}' ({}): attr '{name}': {e}", n.name, n.op))?;
            if let Some(Value::Type(want)) = n.attrs.attr_value("dtype") {
                if n.op == "Const" && value.dtype().to_tf() != *want {
                    bail!("node '{}' (Const): value is {} but attr 'dtype' says otherwise", n.name, value.dtype());
                }
            }
        }
    }
    Ok(())
}
