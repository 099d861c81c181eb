//! `ferroflow convert`: a graph imported, validated and written back (text or binary), a
//! SavedModel's signature or a meta graph with its checkpoint frozen into a GraphDef, or a
//! Keras model file written back.
use ferroflow::proto::attr::AttrMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use ferroflow::prelude::*;

use crate::load;

/// Convert a model: GraphDef text/binary, freeze a .meta + checkpoint or a SavedModel.
///
/// A GraphDef (.pb, .pbtxt) is imported, validated and written back (.pbtxt as text, otherwise
/// binary). A TF1 meta graph (.meta) with its checkpoint is frozen as TensorFlow's `freeze_graph`
/// and `convert_variables_to_constants` freeze it: each variable the --fetch tensors need becomes
/// a Const holding its checkpointed value, each read of it an Identity, and everything the
/// fetches do not need is pruned. A SavedModel signature is frozen as
/// `convert_variables_to_constants_v2` freezes it. A Keras model file (.keras, .h5) is built and
/// written back as OUT.keras or OUT.weights.h5.
#[derive(Args)]
pub struct ConvertArgs {
    /// The input: a GraphDef (.pb or .pbtxt), a meta graph (.meta, with --fetch), a SavedModel
    /// directory (one signature is frozen: calls inlined, variables made constants, inputs and
    /// outputs named by their keys), or a Keras model file (.keras, .h5).
    input: PathBuf,
    /// The output GraphDef (.pb or .pbtxt), or for a Keras model OUT.keras or OUT.weights.h5
    /// (or give it as -o OUT).
    #[arg(value_name = "OUT", required_unless_present = "output")]
    out: Option<PathBuf>,
    /// The output file (the same as the positional OUT).
    #[arg(short = 'o', long, value_name = "OUT", conflicts_with = "out")]
    output: Option<PathBuf>,
    /// With a .meta: the checkpoint whose values the variables take (a prefix such as
    /// `model.ckpt-200`, or a directory: its latest checkpoint; default: the checkpoint the
    /// .meta was saved with, MODEL without `.meta`).
    #[arg(long, value_name = "PREFIX|DIR")]
    checkpoint: Option<PathBuf>,
    /// With a .meta: a tensor (or node) the frozen graph computes, e.g. `out_layer/Softmax:0`
    /// (repeatable; everything none of them needs is pruned).
    #[arg(long = "fetch", value_name = "NAME")]
    fetches: Vec<String>,
    /// With a Keras model: read its weights from this file first (.weights.h5 or a Keras
    /// 2 .h5; layers matched as Keras's load_weights matches them).
    #[arg(long, value_name = "FILE")]
    weights: Option<PathBuf>,
    /// With a SavedModel: the signature to freeze.
    #[arg(long, value_name = "NAME", default_value = "serving_default")]
    signature: String,
    /// With a SavedModel: a tag of the meta graph to load (repeatable; default `serve`).
    #[arg(long = "tag", value_name = "TAG")]
    tags: Vec<String>,
}

pub fn run(args: ConvertArgs) -> Result<()> {
    let output = args.output.clone().or_else(|| args.out.clone()).context("give the output file (OUT or -o OUT)")?;
    let is_meta = args.input.extension().is_some_and(|e| e == "meta");
    if !is_meta && (args.checkpoint.is_some() || !args.fetches.is_empty()) {
        bail!("--checkpoint and --fetch freeze a meta graph (.meta), not {}", args.input.display());
    }
    if super::keras::is_keras(&args.input) {
        return super::keras::convert(&args.input, &output, args.weights.as_deref());
    }
    if args.weights.is_some() {
        bail!("--weights applies to a Keras model file (.keras or .h5), not {}", args.input.display());
    }
    if is_meta {
        freeze_meta_graph(&args.input, args.checkpoint.as_deref(), &args.fetches, &output)
    } else if super::is_saved_model(&args.input)? {
        freeze_saved_model(&args.input, &output, &args.signature, &args.tags)
    } else {
        convert(&args.input, &output)
    }
}

/// `ferroflow convert MODEL.meta OUT --checkpoint PREFIX --fetch NAME...`: the meta graph's
/// variables frozen into constants ([`super::freeze`]), validated before it is written.
fn freeze_meta_graph(meta: &Path, checkpoint: Option<&Path>, fetches: &[String], output: &Path) -> Result<()> {
    let checkpoint = match checkpoint {
        Some(c) => c.to_path_buf(),
        None => super::freeze::default_checkpoint(meta).with_context(|| {
            format!(
                "{}: give the checkpoint with --checkpoint PREFIX|DIR (no checkpoint beside the .meta)",
                meta.display()
            )
        })?,
    };
    let frozen = super::freeze::freeze(meta, &checkpoint, fetches)?;
    let g = ferroflow::ops::import_graph_def(&frozen.graph).context("the frozen graph does not import")?;
    validate(&g)?;
    ferroflow::graph::io::write_graph_def(output, &frozen.graph)?;
    out!(
        "{}: {} variables from {} frozen into {} nodes -> {}",
        meta.display(),
        frozen.variables.len(),
        frozen.prefix.display(),
        frozen.graph.node.len(),
        output.display()
    );
    let feeds: Vec<String> = frozen
        .graph
        .node
        .iter()
        .filter(|n| matches!(n.op.as_str(), "Placeholder" | "PlaceholderWithDefault"))
        .map(|n| format!("{}:0", n.name))
        .collect();
    out!("  feed  {}", if feeds.is_empty() { "none".to_string() } else { feeds.join(", ") });
    out!("  fetch {}", fetches.join(", "));
    Ok(())
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
