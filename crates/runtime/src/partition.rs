//! Partitioning a placed graph into one graph per device, joined by `_Send`/`_Recv` pairs with
//! TensorFlow's attrs (`tensor_name`, `send_device`, `send_device_incarnation`, `recv_device`,
//! `client_terminated`, `T` / `tensor_type`) and naming (`<src>/_<k>` for the send, the next
//! number for the receive; one pair per (tensor, receiving device)). A control edge across
//! devices becomes a dummy constant sent under the source's control, as in TensorFlow.
//!
//! The work is done on the Graph IR: the transfer nodes are added to the placed graph and the
//! cross-device edges rewired to them, so the result is the union of the partitions, ready to
//! plan (with the shapes of the new nodes appended to the placed graph's), and each device's
//! partition is that graph's nodes on the device. The partitions that run keep fed
//! placeholders and fetched nodes as they are; the ones reported in `RunMetadata`
//! (`with_client_plumbing`) show feeds and fetches as TensorFlow 2 does, as `_Arg` and
//! `_Retval` nodes (`merge_partitions` undoes both).
use std::collections::{BTreeMap, HashMap};

use ferroflow_graph::{format_output, Graph, GraphError, NodeId, NodeSpec, Output};
use ferroflow_ops::OpRegistry;
use ferroflow_proto::{attr, convert, GraphDef, NodeDef};
use ferroflow_tensor::{DType, Shape, Tensor};

use crate::device::DeviceSet;

/// Why a graph cannot be partitioned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PartitionError {
    /// TensorFlow 1 control flow (frames cannot span devices here yet).
    #[error("node '{node}' ({op}): graphs with TensorFlow 1 control flow cannot be partitioned across devices yet")]
    ControlFlow {
        /// The node.
        node: String,
        /// Its op.
        op: String,
    },
    /// A node placed on a device the session does not have.
    #[error("node '{node}' is placed on '{device}', which is not a device of this session")]
    UnknownDevice {
        /// The node.
        node: String,
        /// Its device.
        device: String,
    },
    /// Adding a transfer node failed.
    #[error(transparent)]
    Graph(#[from] GraphError),
}

/// A placed graph cut into per-device partitions.
pub struct Partitions {
    /// The union of the partitions: the placed graph, every cross-device edge replaced by a
    /// `_Send`/`_Recv` pair (new nodes after the original ones).
    pub graph: Graph,
    /// Static shapes of `graph`'s outputs (the placed graph's, then the transfer nodes').
    pub shapes: Vec<Vec<Shape>>,
    /// The devices that hold nodes, in device order, each with its nodes in graph order.
    pub devices: Vec<(String, Vec<NodeId>)>,
}

impl Partitions {
    /// Each device's partition as a GraphDef (as `RunMetadata.partition_graphs` holds them).
    pub fn graph_defs(&self) -> Vec<(String, GraphDef)> {
        let def = self.graph.to_graph_def();
        let library = def.library.clone().filter(|l| !l.function.is_empty());
        let mut nodes: Vec<Option<NodeDef>> = def.node.into_iter().map(Some).collect();
        self.devices
            .iter()
            .map(|(device, ids)| {
                let node = ids.iter().filter_map(|&id| nodes[id].take()).collect();
                let g =
                    GraphDef { node, library: library.clone(), versions: def.versions.clone(), ..Default::default() };
                (device.clone(), g)
            })
            .collect()
    }
}

/// What crosses devices: a tensor, or a control edge from a node.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Sent {
    Data(Output),
    Control(NodeId),
}

/// Partitions a placed graph (every node's device one of `devices`); `shapes` are its static
/// shapes, which come back extended to the transfer nodes.
pub fn partition(
    mut graph: Graph,
    mut shapes: Vec<Vec<Shape>>,
    devices: &DeviceSet,
) -> Result<Partitions, PartitionError> {
    let reg = OpRegistry::global();
    if let Some(n) = graph.nodes().iter().find(|n| reg.is_control_flow(&n.op)) {
        return Err(PartitionError::ControlFlow { node: n.name.clone(), op: n.op.clone() });
    }
    let incarnation: HashMap<String, u64> =
        devices.devices().iter().map(|d| (d.name().to_string(), d.incarnation())).collect();
    if let Some(n) = graph.nodes().iter().find(|n| !incarnation.contains_key(n.device.as_str())) {
        return Err(PartitionError::UnknownDevice { node: n.name.clone(), device: n.device.clone() });
    }
    let original = graph.len();
    let mut counter = 0usize;
    let mut edges = 0usize;
    // (what is sent, receiving device) -> the _Recv.
    let mut received: HashMap<(Sent, String), NodeId> = HashMap::new();
    for id in 0..original {
        let dst = graph.node(id).device.clone();
        let data: Vec<Sent> = graph.node(id).inputs.iter().map(|&o| Sent::Data(o)).collect();
        let control: Vec<Sent> = graph.node(id).control_inputs.iter().map(|&c| Sent::Control(c)).collect();
        for (slot, sent) in data.into_iter().chain(control).enumerate() {
            let src = match sent {
                Sent::Data(o) => o.node,
                Sent::Control(c) => c,
            };
            if graph.node(src).device == dst {
                continue;
            }
            let recv = match received.get(&(sent, dst.clone())) {
                Some(&r) => r,
                None => {
                    let r = transfer(&mut graph, &mut shapes, sent, &dst, &incarnation, &mut counter, &mut edges)?;
                    received.insert((sent, dst.clone()), r);
                    r
                }
            };
            let n = graph.node_mut(id);
            match sent {
                Sent::Data(_) => n.inputs[slot] = Output { node: recv, index: 0 },
                Sent::Control(_) => n.control_inputs[slot - n.inputs.len()] = recv,
            }
        }
    }
    let mut by_device: BTreeMap<String, Vec<NodeId>> = BTreeMap::new();
    for (id, n) in graph.nodes().iter().enumerate() {
        by_device.entry(n.device.clone()).or_default().push(id);
    }
    Ok(Partitions { graph, shapes, devices: by_device.into_iter().collect() })
}

/// Adds the `_Send` (and, for a control edge, the dummy constant it sends) on the source's
/// device and the `_Recv` on `dst`; returns the `_Recv`.
fn transfer(
    graph: &mut Graph,
    shapes: &mut Vec<Vec<Shape>>,
    sent: Sent,
    dst: &str,
    incarnation: &HashMap<String, u64>,
    counter: &mut usize,
    edges: &mut usize,
) -> Result<NodeId, PartitionError> {
    let reg = OpRegistry::global();
    let src = match sent {
        Sent::Data(o) => o.node,
        Sent::Control(c) => c,
    };
    let (src_name, src_dev) = (graph.node(src).name.clone(), graph.node(src).device.clone());
    let mut next_name = |graph: &Graph| loop {
        let name = format!("{src_name}/_{counter}");
        *counter += 1;
        if graph.find(&name).is_none() {
            return name;
        }
    };
    let tensor_name = format!("edge_{edges}_{src_name}");
    *edges += 1;
    let (tensor, dtype, shape) = match sent {
        Sent::Data(o) => {
            let shape = shapes[o.node].get(o.index).cloned().unwrap_or_else(Shape::unknown);
            (o, graph.output_type(o), shape)
        }
        Sent::Control(c) => {
            // A dummy constant on the source device, run after the source.
            let mut spec = NodeSpec {
                name: next_name(graph),
                op: "Const".into(),
                control_inputs: vec![c],
                device: src_dev.clone(),
                ..Default::default()
            };
            spec.attrs.insert("dtype".into(), attr::dtype(DType::Float));
            spec.attrs.insert("value".into(), attr::tensor(convert::tensor_to_proto(&Tensor::scalar(0.0f32))));
            let k = graph.add_node(spec, reg)?;
            shapes.push(vec![Shape::scalar()]);
            (Output { node: k, index: 0 }, DType::Float, Shape::scalar())
        }
    };
    let common = |spec: &mut NodeSpec| {
        spec.attrs.insert("tensor_name".into(), attr::string(&tensor_name));
        spec.attrs.insert("send_device".into(), attr::string(&src_dev));
        spec.attrs.insert("send_device_incarnation".into(), attr::int(incarnation[&src_dev] as i64));
        spec.attrs.insert("recv_device".into(), attr::string(dst));
        spec.attrs.insert("client_terminated".into(), attr::boolean(false));
    };
    let mut send = NodeSpec {
        name: next_name(graph),
        op: "_Send".into(),
        inputs: vec![tensor],
        device: src_dev.clone(),
        ..Default::default()
    };
    common(&mut send);
    send.attrs.insert("T".into(), attr::dtype(dtype));
    graph.add_node(send, reg)?;
    shapes.push(vec![]);
    let mut recv =
        NodeSpec { name: next_name(graph), op: "_Recv".into(), device: dst.to_string(), ..Default::default() };
    common(&mut recv);
    recv.attrs.insert("tensor_type".into(), attr::dtype(dtype));
    let r = graph.add_node(recv, reg)?;
    shapes.push(vec![shape]);
    Ok(r)
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
            let mut attrs = BTreeMap::new();
            if let Some(t) = ph.attr.get("dtype") {
                attrs.insert("T".to_string(), t.clone());
            }
            attrs.insert("index".to_string(), attr::int(k as i64));
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
                NodeDef { name: arg.clone(), op: "_Arg".into(), device: ph.device, attr: attrs, ..Default::default() },
            );
            args.insert(node.to_string(), arg.clone());
        }
    }
    for (k, fetch) in fetches.iter().enumerate() {
        let Some((node, index)) = ferroflow_graph::parse_output_name(fetch) else { continue };
        let Ok(o) = graph.output_by_name(fetch) else { continue };
        let dtype = graph.output_type(o);
        let input = match args.get(node) {
            Some(arg) => arg.clone(),
            None => format_output(node, index),
        };
        let source = args.get(node).map_or(node, String::as_str);
        for (_, g) in &mut out {
            let Some(src) = g.node.iter().find(|n| n.name == source) else { continue };
            let device = src.device.clone();
            let mut attrs = BTreeMap::new();
            attrs.insert("T".to_string(), attr::dtype(dtype));
            attrs.insert("index".to_string(), attr::int(k as i64));
            g.node.push(NodeDef {
                name: format!("_retval_{node}_{index}_{k}"),
                op: "_Retval".into(),
                input: vec![input.clone()],
                device,
                attr: attrs,
                ..Default::default()
            });
        }
    }
    out
}
