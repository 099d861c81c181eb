//! Partitioning a placed graph into one graph per device, joined by `_Send`/`_Recv` pairs with
//! TensorFlow's attrs (`tensor_name`, `send_device`, `send_device_incarnation`, `recv_device`,
//! `client_terminated`, `T` / `tensor_type`) and naming (`<src>/_<k>` for the send, the next
//! number for the receive; one pair per (tensor, receiving device)). A control edge across
//! devices becomes a dummy constant sent under the source's control, as in TensorFlow. The
//! partitions that run keep fed placeholders and fetched nodes as they are; the ones reported
//! in `RunMetadata` (`with_client_plumbing`) show feeds and fetches as TensorFlow 2 does, as
//! `_Arg` and `_Retval` nodes (`merge_partitions` undoes both).
use std::collections::{BTreeMap, HashMap};

use ferroflow_graph::{format_output, Graph};
use ferroflow_proto::{attr_value, AttrValue, GraphDef, NodeDef};

use crate::device::DeviceSet;

fn s(v: &str) -> AttrValue {
    AttrValue { value: Some(attr_value::Value::S(v.as_bytes().to_vec())) }
}

fn i(v: i64) -> AttrValue {
    AttrValue { value: Some(attr_value::Value::I(v)) }
}

fn b(v: bool) -> AttrValue {
    AttrValue { value: Some(attr_value::Value::B(v)) }
}

fn ty(v: i32) -> AttrValue {
    AttrValue { value: Some(attr_value::Value::Type(v)) }
}

/// The partitions of a placed graph: (device name, its GraphDef), in device order.
pub fn partition(graph: &Graph, devices: &DeviceSet) -> Result<Vec<(String, GraphDef)>, String> {
    if let Some(n) = graph.nodes().iter().find(|n| ferroflow_ops::OpRegistry::global().is_control_flow(&n.op)) {
        return Err(format!(
            "node '{}' ({}): graphs with TensorFlow 1 control flow cannot be partitioned across devices yet",
            n.name, n.op
        ));
    }
    let incarnation: HashMap<String, u64> =
        devices.devices().iter().map(|d| (d.name().to_string(), d.incarnation())).collect();
    let def = graph.to_graph_def();
    let mut parts: BTreeMap<String, Vec<NodeDef>> = BTreeMap::new();
    for d in devices.devices() {
        parts.insert(d.name().to_string(), Vec::new());
    }
    let device_of: HashMap<&str, &str> = def.node.iter().map(|n| (n.name.as_str(), n.device.as_str())).collect();
    for n in &def.node {
        if !incarnation.contains_key(&n.device) {
            return Err(format!(
                "node '{}' is placed on '{}', which is not a device of this session",
                n.name, n.device
            ));
        }
    }
    let mut counter = 0usize;
    let mut edge = 0usize;
    let mut next_name = |base: &str, graph_names: &dyn Fn(&str) -> bool| loop {
        let name = format!("{base}/_{counter}");
        counter += 1;
        if !graph_names(&name) {
            return name;
        }
    };
    let taken = |name: &str| device_of.contains_key(name);
    // (sent tensor, receiving device) -> the _Recv's name.
    let mut received: HashMap<(String, String), String> = HashMap::new();
    let mut new_nodes: Vec<(String, NodeDef)> = Vec::new();
    let mut rewritten: Vec<NodeDef> = Vec::with_capacity(def.node.len());
    for n in &def.node {
        let mut n = n.clone();
        let dst = n.device.clone();
        let mut inputs = Vec::with_capacity(n.input.len());
        for input in &n.input {
            let control = input.starts_with('^');
            let body = input.trim_start_matches('^');
            let (src, index) = ferroflow_graph::parse_output_name(body)
                .ok_or_else(|| format!("node '{}': bad input '{input}'", n.name))?;
            let src_dev = device_of.get(src).copied().unwrap_or_default().to_string();
            if src_dev == dst {
                inputs.push(input.clone());
                continue;
            }
            let key = (if control { format!("^{src}") } else { format_output(src, index) }, dst.clone());
            let recv = match received.get(&key) {
                Some(r) => r.clone(),
                None => {
                    let tensor_name = format!("edge_{edge}_{src}");
                    edge += 1;
                    let (sent, dtype) = if control {
                        // A dummy constant on the source device, run after the source.
                        let name = next_name(src, &taken);
                        let mut attr = BTreeMap::new();
                        attr.insert("dtype".to_string(), ty(1));
                        attr.insert(
                            "value".to_string(),
                            AttrValue {
                                value: Some(attr_value::Value::Tensor(Box::new(ferroflow_proto::TensorProto {
                                    dtype: 1,
                                    tensor_shape: Some(Default::default()),
                                    float_val: vec![0.0],
                                    ..Default::default()
                                }))),
                            },
                        );
                        new_nodes.push((
                            src_dev.clone(),
                            NodeDef {
                                name: name.clone(),
                                op: "Const".into(),
                                input: vec![format!("^{src}")],
                                device: src_dev.clone(),
                                attr,
                                ..Default::default()
                            },
                        ));
                        (name, 1)
                    } else {
                        let id = graph.find(src).ok_or_else(|| format!("node '{}': no input node '{src}'", n.name))?;
                        let dtype = graph
                            .node(id)
                            .types
                            .outputs
                            .get(index)
                            .copied()
                            .ok_or_else(|| format!("node '{}': '{src}' has no output {index}", n.name))?;
                        (format_output(src, index), dtype.to_tf())
                    };
                    let common = |attr: &mut BTreeMap<String, AttrValue>| {
                        attr.insert("tensor_name".into(), s(&tensor_name));
                        attr.insert("send_device".into(), s(&src_dev));
                        attr.insert("send_device_incarnation".into(), i(incarnation[&src_dev] as i64));
                        attr.insert("recv_device".into(), s(&dst));
                        attr.insert("client_terminated".into(), b(false));
                    };
                    let mut send_attr = BTreeMap::new();
                    common(&mut send_attr);
                    send_attr.insert("T".into(), ty(dtype));
                    let send_name = next_name(src, &taken);
                    new_nodes.push((
                        src_dev.clone(),
                        NodeDef {
                            name: send_name,
                            op: "_Send".into(),
                            input: vec![sent],
                            device: src_dev.clone(),
                            attr: send_attr,
                            ..Default::default()
                        },
                    ));
                    let mut recv_attr = BTreeMap::new();
                    common(&mut recv_attr);
                    recv_attr.insert("tensor_type".into(), ty(dtype));
                    let recv_name = next_name(src, &taken);
                    new_nodes.push((
                        dst.clone(),
                        NodeDef {
                            name: recv_name.clone(),
                            op: "_Recv".into(),
                            device: dst.clone(),
                            attr: recv_attr,
                            ..Default::default()
                        },
                    ));
                    received.insert(key, recv_name.clone());
                    recv_name
                }
            };
            inputs.push(if control { format!("^{recv}") } else { recv });
        }
        // Data inputs first, then control inputs (GraphDef's rule).
        inputs.sort_by_key(|x| x.starts_with('^'));
        n.input = inputs;
        rewritten.push(n);
    }
    for n in rewritten {
        parts.get_mut(&n.device).expect("checked above").push(n);
    }
    for (dev, n) in new_nodes {
        parts.get_mut(&dev).expect("a device of the session").push(n);
    }
    Ok(parts
        .into_iter()
        .filter(|(_, nodes)| !nodes.is_empty())
        .map(|(dev, node)| {
            let library = def.library.clone().filter(|l| !l.function.is_empty());
            (dev, GraphDef { node, library, versions: def.versions.clone(), ..Default::default() })
        })
        .collect())
}

/// The union of partitions: one GraphDef holding every partition's nodes (what one plan runs).
pub fn union(parts: &[(String, GraphDef)]) -> GraphDef {
    let mut out = GraphDef::default();
    for (_, p) in parts {
        out.node.extend(p.node.iter().cloned());
        if out.versions.is_none() {
            out.versions = p.versions.clone();
        }
        if out.library.is_none() {
            out.library = p.library.clone();
        }
    }
    out
}

/// The partitions as TensorFlow reports them in `RunMetadata.partition_graphs`: each fed
/// placeholder replaced by an `_Arg` node `_arg_<node>_<output>_<i>` (attrs `T`, `index`), and
/// each fetch read by a `_Retval` node `_retval_<node>_<output>_<i>` (attrs `T`, `index`) in
/// the fetched node's partition. (`merge_partitions` undoes both.) `graph` is the graph the
/// partitions came from (for dtypes).
pub fn with_client_plumbing(
    parts: &[(String, GraphDef)],
    graph: &Graph,
    feeds: &[&str],
    fetches: &[&str],
) -> Vec<(String, GraphDef)> {
    let mut out: Vec<(String, GraphDef)> = parts.to_vec();
    let mut args: HashMap<String, String> = HashMap::new();
    for (k, feed) in feeds.iter().enumerate() {
        let Some((node, 0)) = ferroflow_graph::parse_output_name(feed) else { continue };
        for (_, g) in &mut out {
            let Some(pos) = g.node.iter().position(|n| n.name == node && n.op == "Placeholder") else { continue };
            let arg = format!("_arg_{node}_0_{k}");
            let ph = g.node.remove(pos);
            let mut attr = BTreeMap::new();
            if let Some(t) = ph.attr.get("dtype") {
                attr.insert("T".to_string(), t.clone());
            }
            attr.insert("index".to_string(), i(k as i64));
            for n in &mut g.node {
                for input in &mut n.input {
                    if input == node || *input == format!("{node}:0") {
                        input.clone_from(&arg);
                    } else if *input == format!("^{node}") {
                        *input = format!("^{arg}");
                    }
                }
            }
            g.node.insert(
                pos,
                NodeDef { name: arg.clone(), op: "_Arg".into(), device: ph.device, attr, ..Default::default() },
            );
            args.insert(node.to_string(), arg.clone());
        }
    }
    for (k, fetch) in fetches.iter().enumerate() {
        let Some((node, index)) = ferroflow_graph::parse_output_name(fetch) else { continue };
        let Ok(o) = graph.output_by_name(fetch) else { continue };
        let dtype = graph.output_type(o).to_tf();
        let input = match args.get(node) {
            Some(arg) => arg.clone(),
            None => format_output(node, index),
        };
        let source = args.get(node).map_or(node, String::as_str);
        for (_, g) in &mut out {
            let Some(src) = g.node.iter().find(|n| n.name == source) else { continue };
            let device = src.device.clone();
            let mut attr = BTreeMap::new();
            attr.insert("T".to_string(), ty(dtype));
            attr.insert("index".to_string(), i(k as i64));
            g.node.push(NodeDef {
                name: format!("_retval_{node}_{index}_{k}"),
                op: "_Retval".into(),
                input: vec![input.clone()],
                device,
                attr,
                ..Default::default()
            });
        }
    }
    out
}
