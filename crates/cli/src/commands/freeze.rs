//! `ferroflow convert MODEL.meta OUT --checkpoint PREFIX --fetch NAME...`: a meta graph's
//! variables frozen into constants, as TensorFlow's `freeze_graph` /
//! `tf.compat.v1.graph_util.convert_variables_to_constants` do.
//!
//! The meta graph is imported (TF1 `VariableV2` variables become resource variables under
//! their own names), its saver restores the checkpoint into a session, and the graph is
//! pruned to what the fetches need. Then every variable left is a `Const` under the
//! variable's name holding its restored value, each read of it (`ReadVariableOp`, a TF1
//! variable's `V/read`) an `Identity` of that constant, and each node that only passes the
//! handle on (`Identity`, `Switch`, `Enter`, `Merge` of a resource) carries the value's dtype
//! instead — TensorFlow's own rewrite, so TensorFlow's `import_graph_def` runs the result.
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use ferroflow::prelude::*;
use ferroflow::proto::attr_value::{ListValue, Value};
use ferroflow::proto::{AttrValue, DataType, GraphDef, NodeDef};

use crate::load;

/// What [`freeze`] made.
pub struct Frozen {
    /// The frozen graph.
    pub graph: GraphDef,
    /// The checkpoint prefix the values came from.
    pub prefix: PathBuf,
    /// The variables made constants, by name.
    pub variables: Vec<String>,
}

/// The node name of a tensor or control input (`x:1`, `^x` → `x`).
fn node_of(t: &str) -> &str {
    let t = t.trim_start_matches('^');
    t.rsplit_once(':').filter(|(_, i)| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit())).map_or(t, |(n, _)| n)
}

/// The checkpoint a meta graph was saved with: `MODEL.meta` → `MODEL` when `MODEL.index`
/// exists.
pub fn default_checkpoint(meta: &Path) -> Option<PathBuf> {
    let prefix = meta.with_extension("");
    ferroflow::checkpoint::index_path(&prefix).is_file().then_some(prefix)
}

/// Freezes `meta`'s variables with their values in `checkpoint` (a prefix, or a directory's
/// latest checkpoint), keeping what `fetches` (tensor or node names) need.
pub fn freeze(meta: &Path, checkpoint: &Path, fetches: &[String]) -> Result<Frozen> {
    if fetches.is_empty() {
        bail!("freezing {}: give the tensors the frozen graph computes with --fetch NAME", meta.display());
    }
    let imported = ferroflow::train::meta_graph::import_meta_graph_file(meta, None, "")
        .with_context(|| format!("loading meta graph {}", meta.display()))?;
    let saver = imported.saver.ok_or_else(|| {
        anyhow::anyhow!("{}: the meta graph has no saver_def to restore the variables", meta.display())
    })?;
    let prefix = load::checkpoint_prefix(checkpoint)?;
    let sess = Session::new(imported.graph.clone(), SessionOptions::default())?;
    let report = saver.restore(&sess, &prefix)?;
    log::info!("restored {} variables from {}", report.restored.len(), prefix.display());

    let def = imported.graph.to_graph_def();
    let roots: Vec<&str> = fetches.iter().map(|f| node_of(f)).collect();
    for (f, r) in fetches.iter().zip(&roots) {
        if !def.node.iter().any(|n| n.name == *r) {
            bail!("--fetch '{f}': the meta graph {} has no node '{r}'", meta.display());
        }
    }
    let mut def = prune(def, &roots);

    // The variables the fetches need, with their restored values.
    let mut values: BTreeMap<String, Tensor> = BTreeMap::new();
    for n in def.node.iter().filter(|n| n.op == "VarHandleOp") {
        let value = sess.variable(&n.name).and_then(|v| v.read()).ok_or_else(|| {
            anyhow::anyhow!(
                "variable '{}' has no value after restoring {} (the meta graph's saver does not restore it)",
                n.name,
                prefix.display()
            )
        })?;
        values.insert(n.name.clone(), value);
    }

    // Which nodes carry a variable's handle (the variable itself, or an Identity/Switch/Enter/
    // Merge of it), and the dtype of that variable's value; found to a fixpoint.
    let mut handles: HashMap<String, i32> = values.iter().map(|(name, v)| (name.clone(), v.dtype().to_tf())).collect();
    let resource = DataType::DtResource as i32;
    loop {
        let mut grew = false;
        for n in &def.node {
            if handles.contains_key(&n.name) || !matches!(n.op.as_str(), "Identity" | "Switch" | "Enter" | "Merge") {
                continue;
            }
            if let Some(dtype) = n.input.iter().filter(|i| !i.starts_with('^')).find_map(|i| handles.get(node_of(i))) {
                handles.insert(n.name.clone(), *dtype);
                grew = true;
            }
        }
        if !grew {
            break;
        }
    }

    for n in &mut def.node {
        if let Some(value) = values.get(&n.name) {
            *n = constant(n, value);
            continue;
        }
        let handle_input = n.input.iter().filter(|i| !i.starts_with('^')).find_map(|i| handles.get(node_of(i)));
        let Some(&dtype) = handle_input else { continue };
        match n.op.as_str() {
            "ReadVariableOp" => {
                n.op = "Identity".into();
                n.attr.remove("dtype");
                n.attr.insert("T".into(), AttrValue { value: Some(Value::Type(dtype)) });
            }
            "Identity" | "Switch" | "Enter" | "Merge" => {
                if n.attr.get("T").and_then(|a| a.value.as_ref()) == Some(&Value::Type(resource)) {
                    n.attr.insert("T".into(), AttrValue { value: Some(Value::Type(dtype)) });
                    // The recorded shapes were a handle's.
                    n.attr.remove("_output_shapes");
                }
            }
            op => {
                let var = n.input.iter().find(|i| values.contains_key(node_of(i))).map_or("?", |i| node_of(i));
                bail!(
                    "node '{}' ({op}) uses a variable's handle{} other than to read it: a frozen graph has \
                     constants, not variables; fetch tensors that only read variables",
                    n.name,
                    if var == "?" { String::new() } else { format!(" ('{var}')") }
                );
            }
        }
    }
    drop_dangling_colocations(&mut def);
    keep_used_functions(&mut def);
    Ok(Frozen { graph: def, prefix, variables: values.into_keys().collect() })
}

/// A `Const` standing for variable node `var`: its name and device, `value`.
fn constant(var: &NodeDef, value: &Tensor) -> NodeDef {
    let mut attr = BTreeMap::new();
    attr.insert("dtype".to_string(), AttrValue { value: Some(Value::Type(value.dtype().to_tf())) });
    attr.insert(
        "value".to_string(),
        AttrValue { value: Some(Value::Tensor(Box::new(ferroflow::proto::convert::tensor_to_proto(value)))) },
    );
    NodeDef { name: var.name.clone(), op: "Const".into(), device: var.device.clone(), attr, ..Default::default() }
}

/// `def` with only the nodes `roots` need (data and control inputs, transitively), in their
/// order.
fn prune(mut def: GraphDef, roots: &[&str]) -> GraphDef {
    let index: HashMap<&str, usize> = def.node.iter().enumerate().map(|(i, n)| (n.name.as_str(), i)).collect();
    let mut keep = vec![false; def.node.len()];
    let mut stack: Vec<usize> = roots.iter().filter_map(|r| index.get(r).copied()).collect();
    while let Some(i) = stack.pop() {
        if std::mem::replace(&mut keep[i], true) {
            continue;
        }
        stack.extend(def.node[i].input.iter().filter_map(|x| index.get(node_of(x)).copied()));
    }
    def.node = std::mem::take(&mut def.node).into_iter().zip(keep).filter_map(|(n, k)| k.then_some(n)).collect();
    def
}

/// Removes `loc:@NODE` colocation entries naming nodes the pruned graph no longer has
/// (TensorFlow's importer rejects them).
fn drop_dangling_colocations(def: &mut GraphDef) {
    let names: BTreeSet<String> = def.node.iter().map(|n| n.name.clone()).collect();
    for n in &mut def.node {
        let Some(AttrValue { value: Some(Value::List(list)) }) = n.attr.get_mut("_class") else {
            continue;
        };
        let ListValue { s, .. } = list.as_mut();
        s.retain(|c| c.strip_prefix(b"loc:@").is_none_or(|node| names.contains(&*String::from_utf8_lossy(node))));
        if s.is_empty() {
            n.attr.remove("_class");
        }
    }
}

/// Keeps the library functions the kept nodes still call (and those they call).
fn keep_used_functions(def: &mut GraphDef) {
    let Some(library) = def.library.as_mut() else { return };
    let mut used: BTreeSet<String> = BTreeSet::new();
    let mut queue: Vec<String> = Vec::new();
    let called = |n: &NodeDef, q: &mut Vec<String>| {
        q.push(n.op.clone());
        q.extend(ferroflow::runtime::support::function_attrs(n).map(str::to_string));
    };
    for n in &def.node {
        called(n, &mut queue);
    }
    while let Some(f) = queue.pop() {
        if used.contains(&f) {
            continue;
        }
        let Some(fd) = library.function.iter().find(|x| x.signature.as_ref().is_some_and(|s| s.name == f)) else {
            continue;
        };
        used.insert(f);
        for n in &fd.node_def {
            called(n, &mut queue);
        }
    }
    library.function.retain(|f| f.signature.as_ref().is_some_and(|s| used.contains(&s.name)));
    library.gradient.retain(|g| used.contains(&g.function_name));
    if library.function.is_empty() && library.gradient.is_empty() {
        def.library = None;
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn node_names_of_inputs() {
        assert_eq!(super::node_of("a/b:1"), "a/b");
        assert_eq!(super::node_of("^a"), "a");
        assert_eq!(super::node_of("a"), "a");
        assert_eq!(super::node_of("a:"), "a:");
    }
}
