//! Merging partition graphs back into one graph (what one does by hand with TensorFlow's):
//! each `_Recv` is replaced by the tensor its matching `_Send` (same `tensor_name`) sends, the
//! pairs are dropped, and the client plumbing is undone — `_Arg` feeds become placeholders with
//! the original feed names, `_Retval` fetches and client-terminated `_Send`s go, and
//! client-terminated `_Recv`s (older TensorFlow's feeds) become placeholders. The merged graph
//! runs with the original feed and fetch names. Works on TensorFlow's partitions and ferroflow's.
use std::collections::{BTreeMap, HashMap, HashSet};

use ferroflow_graph::{format_output, parse_output_name};
use ferroflow_ops::{OpRegistry, Transfer};
use ferroflow_proto::attr::AttrMap;
use ferroflow_proto::{attr_value, AttrValue, GraphDef, NodeDef};

/// A problem with a set of partition graphs.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MergeError {
    /// A `_Recv` whose tensor no `_Send` sends.
    #[error("_Recv '{node}' in partition {partition} receives tensor_name '{tensor}', which no _Send sends")]
    UnmatchedRecv {
        /// The `_Recv` node.
        node: String,
        /// Its partition (0-based, in the order given).
        partition: usize,
        /// Its `tensor_name`.
        tensor: String,
    },
    /// Two `_Send`s of one tensor name.
    #[error("tensor_name '{tensor}' is sent twice: by '{first}' and by '{second}'")]
    DuplicateSend {
        /// The tensor name.
        tensor: String,
        /// One sender.
        first: String,
        /// The other.
        second: String,
    },
    /// Two partitions define one node name (other than plumbing).
    #[error("node '{0}' is defined in two partitions")]
    DuplicateNode(String),
    /// A node is malformed (missing attr, bad input).
    #[error("node '{node}': {reason}")]
    BadNode {
        /// The node.
        node: String,
        /// What is wrong.
        reason: String,
    },
}

/// `_arg_<node>_<index>_<arg>` (TensorFlow's call-frame feed) → (`node`, `index`).
fn arg_feed(name: &str) -> Option<(String, usize)> {
    let rest = name.strip_prefix("_arg_")?;
    let (rest, _arg) = rest.rsplit_once('_')?;
    let (node, index) = rest.rsplit_once('_')?;
    Some((node.to_string(), index.parse().ok()?))
}

fn placeholder(name: &str, from: &NodeDef, dtype_attr: &str) -> Result<NodeDef, MergeError> {
    let dtype = from.attr.get(dtype_attr).cloned().ok_or_else(|| MergeError::BadNode {
        node: from.name.clone(),
        reason: format!("missing attr '{dtype_attr}'"),
    })?;
    let mut attr = BTreeMap::new();
    attr.insert("dtype".to_string(), dtype);
    if let Some(shape) = from.attr.get("_shape").or_else(|| from.attr.get("shape")) {
        attr.insert("shape".to_string(), shape.clone());
    } else {
        attr.insert(
            "shape".to_string(),
            AttrValue {
                value: Some(attr_value::Value::Shape(Box::new(ferroflow_proto::TensorShapeProto {
                    unknown_rank: true,
                    ..Default::default()
                }))),
            },
        );
    }
    Ok(NodeDef {
        name: name.to_string(),
        op: "Placeholder".into(),
        device: from.device.clone(),
        attr,
        ..Default::default()
    })
}

/// The op's end of a transfer (the registry's `_Send`, `_HostSend`, `_Recv`, `_HostRecv`,
/// `_Arg`, `_Retval`).
fn transfer(op: &str) -> Option<Transfer> {
    OpRegistry::global().facts(op).and_then(|f| f.transfer())
}

/// Merges partition graphs into one GraphDef.
pub fn merge_partitions(parts: &[GraphDef]) -> Result<GraphDef, MergeError> {
    // Every _Send, by tensor name: what it sends (its data input).
    let mut sends: HashMap<String, (String, String)> = HashMap::new();
    for p in parts {
        for n in p.node.iter().filter(|n| transfer(&n.op) == Some(Transfer::Send)) {
            let tensor = n.attr.string_attr("tensor_name").ok_or_else(|| MergeError::BadNode {
                node: n.name.clone(),
                reason: "a _Send needs a 'tensor_name' attr".into(),
            })?;
            let input = n.input.iter().find(|i| !i.starts_with('^')).cloned().ok_or_else(|| MergeError::BadNode {
                node: n.name.clone(),
                reason: "a _Send needs a data input".into(),
            })?;
            if let Some((first, _)) = sends.insert(tensor.clone(), (n.name.clone(), input)) {
                return Err(MergeError::DuplicateSend { tensor, first, second: n.name.clone() });
            }
        }
    }
    // Replacements for node names that go away: a _Recv stands for what its _Send sends; a
    // feed _Arg for the placeholder that takes its original name.
    let mut replace: HashMap<String, String> = HashMap::new();
    let mut dropped: HashSet<String> = HashSet::new();
    let mut added: Vec<NodeDef> = Vec::new();
    for (pi, p) in parts.iter().enumerate() {
        for n in &p.node {
            match transfer(&n.op) {
                Some(Transfer::Recv) => {
                    let tensor = n.attr.string_attr("tensor_name").unwrap_or_default();
                    if n.attr.bool_attr("client_terminated").unwrap_or(false) {
                        // Older TensorFlow's feed: the tensor name is the feed ("x:0").
                        let (node, index) = parse_output_name(&tensor).ok_or_else(|| MergeError::BadNode {
                            node: n.name.clone(),
                            reason: format!("client-terminated _Recv of '{tensor}' is not a tensor name"),
                        })?;
                        if index != 0 {
                            return Err(MergeError::BadNode {
                                node: n.name.clone(),
                                reason: format!("feeds of output {index} cannot become a placeholder"),
                            });
                        }
                        added.push(placeholder(node, n, "tensor_type")?);
                        replace.insert(n.name.clone(), node.to_string());
                    } else {
                        let (_, input) = sends.get(&tensor).ok_or_else(|| MergeError::UnmatchedRecv {
                            node: n.name.clone(),
                            partition: pi,
                            tensor: tensor.clone(),
                        })?;
                        replace.insert(n.name.clone(), input.clone());
                    }
                    dropped.insert(n.name.clone());
                }
                Some(Transfer::Send | Transfer::Retval) => {
                    dropped.insert(n.name.clone());
                }
                Some(Transfer::Arg) => {
                    let (node, index) = arg_feed(&n.name).ok_or_else(|| MergeError::BadNode {
                        node: n.name.clone(),
                        reason: "an _Arg feed is named _arg_<node>_<output>_<index>".into(),
                    })?;
                    if index != 0 {
                        return Err(MergeError::BadNode {
                            node: n.name.clone(),
                            reason: format!("feeds of output {index} cannot become a placeholder"),
                        });
                    }
                    added.push(placeholder(&node, n, "T")?);
                    replace.insert(n.name.clone(), node);
                    dropped.insert(n.name.clone());
                }
                _ => {}
            }
        }
    }
    // Resolves an input string through the replacements (a _Send may send a _Recv's output).
    let resolve = |input: &str| -> Result<String, MergeError> {
        let (control, body) = match input.strip_prefix('^') {
            Some(b) => (true, b),
            None => (false, input),
        };
        let (mut node, mut index) =
            parse_output_name(body).map(|(n, i)| (n.to_string(), i)).unwrap_or((body.into(), 0));
        let mut hops = 0;
        while let Some(to) = replace.get(&node) {
            let (n, i) = parse_output_name(to).map(|(n, i)| (n.to_string(), i)).unwrap_or((to.clone(), 0));
            // _Recv and _Arg have one output: the reference becomes the sent tensor.
            node = n;
            index = i;
            hops += 1;
            if hops > replace.len() {
                return Err(MergeError::BadNode { node, reason: "_Send/_Recv pairs form a cycle".into() });
            }
        }
        Ok(if control { format!("^{node}") } else { format_output(&node, index) })
    };
    let mut out = GraphDef { versions: parts.iter().find_map(|p| p.versions.clone()), ..Default::default() };
    let mut names: HashSet<String> = HashSet::new();
    let mut library = ferroflow_proto::FunctionDefLibrary::default();
    for p in parts {
        if let Some(lib) = &p.library {
            for f in &lib.function {
                let name = f.signature.as_ref().map(|s| s.name.clone()).unwrap_or_default();
                if !library
                    .function
                    .iter()
                    .any(|g| g.signature.as_ref().map(|s| s.name.as_str()) == Some(name.as_str()))
                {
                    library.function.push(f.clone());
                }
            }
        }
    }
    for n in added.into_iter().chain(parts.iter().flat_map(|p| p.node.iter().cloned())) {
        if dropped.contains(&n.name) && n.op != "Placeholder" {
            continue;
        }
        if !names.insert(n.name.clone()) {
            // The same feed may be received in several partitions.
            if n.op == "Placeholder" {
                continue;
            }
            return Err(MergeError::DuplicateNode(n.name));
        }
        let mut n = n;
        let mut inputs = Vec::with_capacity(n.input.len());
        let mut controls = Vec::new();
        for i in &n.input {
            let r = resolve(i)?;
            if r.starts_with('^') {
                if !controls.contains(&r) {
                    controls.push(r);
                }
            } else {
                inputs.push(r);
            }
        }
        // A control edge on something that is also a data input says nothing more.
        controls.retain(|c| !inputs.iter().any(|i| parse_output_name(i).map(|(n, _)| n) == Some(&c[1..])));
        inputs.extend(controls);
        n.input = inputs;
        out.node.push(n);
    }
    if !library.function.is_empty() {
        out.library = Some(library);
    }
    Ok(out)
}
