//! The Graph IR: nodes with an op, attrs and a requested device; data inputs that name an
//! output of another node (`name:index`, `name` meaning `name:0`); control inputs (`^name`);
//! TensorFlow's unique-name rule; the function library; GraphDef import (validated) and export.
#![warn(missing_docs)]

mod error;
mod graph_def;
pub mod io;
mod names;

use std::collections::{BTreeMap, HashMap};

pub use error::{AttrError, GraphError, ShapeError, UnknownOp, UnknownOpHint};
pub use ferroflow_proto as proto;
use ferroflow_proto::{AttrValue, FullTypeDef, FunctionDefLibrary, VersionDef};
use ferroflow_tensor::DType;
pub use names::{format_output, parse_output_name};

/// The attrs of a node, keyed by name (sorted, as TensorFlow prints them).
pub type Attrs = BTreeMap<String, AttrValue>;

/// Index of a node in its [`Graph`].
pub type NodeId = usize;

/// One output of one node: what a data edge carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Output {
    /// The producing node.
    pub node: NodeId,
    /// Which of its outputs.
    pub index: usize,
}

/// The resolved input and output dtypes of a node, from its op's signature and attrs.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct NodeTypes {
    /// One dtype per data input.
    pub inputs: Vec<DType>,
    /// One dtype per output.
    pub outputs: Vec<DType>,
}

/// Resolves a node's signature. Implemented by the op registry (crate `ferroflow-ops`), which
/// lives above this crate; the graph only needs the answer.
pub trait OpSignatures {
    /// `Ok(None)` if `op` is unknown; an error if the attrs do not fit the op.
    fn resolve(&self, op: &str, attrs: &Attrs) -> Result<Option<NodeTypes>, AttrError>;

    /// What is known of an op `resolve` does not know, for the error that names it.
    fn unknown_op_hint(&self, _op: &str) -> UnknownOpHint {
        UnknownOpHint::default()
    }
}

/// A node of the graph.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// Unique name within the graph.
    pub name: String,
    /// Op type (`AddV2`, `MatMul`, ...).
    pub op: String,
    /// Requested (or, after placement, assigned) device; empty means any.
    pub device: String,
    /// Data inputs in order.
    pub inputs: Vec<Output>,
    /// Nodes that must run before this one.
    pub control_inputs: Vec<NodeId>,
    /// Attr values.
    pub attrs: Attrs,
    /// Resolved dtypes of inputs and outputs.
    pub types: NodeTypes,
    /// Names of the nodes this one came from (kept through import and export).
    pub original_node_names: Vec<String>,
    /// Names of the functions this one came from.
    pub original_func_names: Vec<String>,
    /// Experimental full type, carried through unchanged.
    pub experimental_type: Option<FullTypeDef>,
    /// Whether `experimental_debug_info` was present (even if empty) in the source GraphDef.
    pub has_debug_info: bool,
}

impl Node {
    /// Number of outputs.
    pub fn num_outputs(&self) -> usize {
        self.types.outputs.len()
    }
}

/// What [`Graph::add_node`] needs to add a node.
#[derive(Clone, Debug, Default)]
pub struct NodeSpec {
    /// The node name (must be unique; use [`Graph::unique_name`] to make one).
    pub name: String,
    /// Op type.
    pub op: String,
    /// Data inputs.
    pub inputs: Vec<Output>,
    /// Control inputs.
    pub control_inputs: Vec<NodeId>,
    /// Attrs.
    pub attrs: Attrs,
    /// Requested device.
    pub device: String,
}

/// A dataflow graph.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    nodes: Vec<Node>,
    by_name: HashMap<String, NodeId>,
    names_in_use: HashMap<String, usize>,
    /// Functions callable from this graph.
    pub library: FunctionDefLibrary,
    /// Whether the source GraphDef had a `library` field (exported again even if empty).
    pub(crate) library_present: bool,
    /// Producer/consumer versions, as in the GraphDef.
    pub versions: Option<VersionDef>,
}

/// The GraphDef producer version written by ferroflow: TensorFlow 2.21's graph version.
pub const GRAPH_DEF_VERSION: i32 = 2474;

impl Graph {
    /// An empty graph.
    pub fn new() -> Graph {
        Graph { versions: Some(VersionDef { producer: GRAPH_DEF_VERSION, ..Default::default() }), ..Default::default() }
    }

    /// All nodes, indexed by [`NodeId`].
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// One node.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id]
    }

    /// One node, mutably (attrs, device; edges are changed through the graph's methods).
    pub fn node_mut(&mut self, id: NodeId) -> &mut Node {
        &mut self.nodes[id]
    }

    /// The node with this name.
    pub fn find(&self, name: &str) -> Option<NodeId> {
        self.by_name.get(name).copied()
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True if the graph has no nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Resolves a tensor name (`x`, `x:1`) to an output of a node in this graph.
    pub fn output_by_name(&self, tensor: &str) -> Result<Output, GraphError> {
        let (name, index) = parse_output_name(tensor).ok_or_else(|| GraphError::BadTensorName(tensor.to_string()))?;
        let node = self.find(name).ok_or_else(|| GraphError::NoSuchNode(name.to_string()))?;
        let n = self.nodes[node].num_outputs();
        if index >= n {
            return Err(GraphError::NoSuchOutput {
                node: name.to_string(),
                op: self.nodes[node].op.clone(),
                outputs: n,
            });
        }
        Ok(Output { node, index })
    }

    /// The dtype of an output.
    pub fn output_type(&self, o: Output) -> DType {
        self.nodes[o.node].types.outputs[o.index]
    }

    /// The canonical name of an output (`x` for index 0 is written `x:0` here).
    pub fn output_name(&self, o: Output) -> String {
        format!("{}:{}", self.nodes[o.node].name, o.index)
    }

    /// Adds a node after checking its name, op signature, input count and input dtypes.
    pub fn add_node(&mut self, spec: NodeSpec, ops: &dyn OpSignatures) -> Result<NodeId, GraphError> {
        if self.by_name.contains_key(&spec.name) {
            return Err(GraphError::DuplicateNode(spec.name));
        }
        let types = ops
            .resolve(&spec.op, &spec.attrs)
            .map_err(|source| GraphError::BadAttrs { node: spec.name.clone(), op: spec.op.clone(), source })?
            .ok_or_else(|| {
                GraphError::UnknownOps(vec![UnknownOp {
                    op: spec.op.clone(),
                    nodes: vec![spec.name.clone()],
                    hint: ops.unknown_op_hint(&spec.op),
                }])
            })?;
        let node = Node {
            name: spec.name,
            op: spec.op,
            device: spec.device,
            inputs: spec.inputs,
            control_inputs: spec.control_inputs,
            attrs: spec.attrs,
            types,
            original_node_names: vec![],
            original_func_names: vec![],
            experimental_type: None,
            has_debug_info: false,
        };
        self.check_edges(&node)?;
        Ok(self.push(node))
    }

    fn push(&mut self, node: Node) -> NodeId {
        let id = self.nodes.len();
        self.reserve_name(&node.name);
        self.by_name.insert(node.name.clone(), id);
        self.nodes.push(node);
        id
    }

    /// Checks every node's inputs (count, output index, dtype) and that the graph has no
    /// cycle other than loop back edges: what any rewrite of the graph must keep true.
    pub fn validate(&self) -> Result<(), GraphError> {
        for node in &self.nodes {
            self.check_edges(node)?;
        }
        self.topological_order()?;
        Ok(())
    }

    /// Checks a node's inputs against the nodes they name: count, output index and dtype.
    fn check_edges(&self, node: &Node) -> Result<(), GraphError> {
        if node.inputs.len() != node.types.inputs.len() {
            return Err(GraphError::InputCount {
                node: node.name.clone(),
                op: node.op.clone(),
                expected: node.types.inputs.len(),
                got: node.inputs.len(),
            });
        }
        for (i, (input, want)) in node.inputs.iter().zip(&node.types.inputs).enumerate() {
            let src = self.nodes.get(input.node).ok_or_else(|| GraphError::MissingInput {
                node: node.name.clone(),
                input: format!("#{}", input.node),
            })?;
            let Some(&got) = src.types.outputs.get(input.index) else {
                return Err(GraphError::BadOutputIndex {
                    node: node.name.clone(),
                    input: format!("{}:{}", src.name, input.index),
                    outputs: src.num_outputs(),
                });
            };
            if got != *want {
                return Err(GraphError::InputType {
                    node: node.name.clone(),
                    op: node.op.clone(),
                    index: i,
                    input: format!("{}:{}", src.name, input.index),
                    expected: *want,
                    got,
                });
            }
        }
        for &c in &node.control_inputs {
            if c >= self.nodes.len() {
                return Err(GraphError::MissingInput { node: node.name.clone(), input: format!("^#{c}") });
            }
        }
        Ok(())
    }

    /// Removes every node whose `keep` entry is false and renumbers the rest (order kept).
    /// Control edges from removed nodes are dropped; a data edge from a removed node to a
    /// kept one is an error naming both, and the graph is left unchanged. Returns the new id
    /// of each old node.
    pub fn retain_nodes(&mut self, keep: &[bool]) -> Result<Vec<Option<NodeId>>, GraphError> {
        assert_eq!(keep.len(), self.nodes.len(), "one keep flag per node");
        let mut new_id = vec![None; self.nodes.len()];
        let mut next = 0;
        for (id, &k) in keep.iter().enumerate() {
            if k {
                new_id[id] = Some(next);
                next += 1;
            }
        }
        for (id, n) in self.nodes.iter().enumerate() {
            if !keep[id] {
                continue;
            }
            if let Some(o) = n.inputs.iter().find(|o| !keep[o.node]) {
                return Err(GraphError::MissingInput {
                    node: n.name.clone(),
                    input: format!("{} (removed, but still consumed)", self.nodes[o.node].name),
                });
            }
        }
        let old = std::mem::take(&mut self.nodes);
        self.by_name.clear();
        for (id, mut n) in old.into_iter().enumerate() {
            if !keep[id] {
                continue;
            }
            for o in &mut n.inputs {
                o.node = new_id[o.node].expect("checked above");
            }
            n.control_inputs.retain(|&c| keep[c]);
            for c in &mut n.control_inputs {
                *c = new_id[*c].expect("kept");
            }
            self.by_name.insert(n.name.clone(), self.nodes.len());
            self.nodes.push(n);
        }
        Ok(new_id)
    }

    /// Makes every node except `to` and the nodes `to` depends on read output `i` of `to`
    /// where it read output `i` of `from` (for `i < outputs`), and depend on `to` where it
    /// depended on `from`: `to` replaces `from` for its consumers (a node rewritten with more
    /// outputs). Returns how many edges moved.
    pub fn reroute(&mut self, from: NodeId, to: NodeId, outputs: usize) -> usize {
        // `to`'s ancestors keep their edges (moving them would make a cycle).
        let mut upstream = vec![false; self.nodes.len()];
        let mut stack = vec![to];
        while let Some(id) = stack.pop() {
            if !std::mem::replace(&mut upstream[id], true) {
                let n = &self.nodes[id];
                stack.extend(n.inputs.iter().map(|o| o.node).chain(n.control_inputs.iter().copied()));
            }
        }
        let mut moved = 0;
        for (id, n) in self.nodes.iter_mut().enumerate() {
            if upstream[id] {
                continue;
            }
            for o in &mut n.inputs {
                if o.node == from && o.index < outputs {
                    o.node = to;
                    moved += 1;
                }
            }
            for c in &mut n.control_inputs {
                if *c == from {
                    *c = to;
                    moved += 1;
                }
            }
        }
        moved
    }

    /// For each node, the nodes that consume its outputs or depend on it by control edge.
    pub fn consumers(&self) -> Vec<Vec<NodeId>> {
        let mut out = vec![Vec::new(); self.nodes.len()];
        for (id, n) in self.nodes.iter().enumerate() {
            for i in &n.inputs {
                out[i.node].push(id);
            }
            for &c in &n.control_inputs {
                out[c].push(id);
            }
        }
        out
    }

    /// A topological order of all nodes. Edges from `NextIteration` nodes (loop back edges)
    /// are ignored; any other cycle is an error naming its nodes.
    pub fn topological_order(&self) -> Result<Vec<NodeId>, GraphError> {
        let n = self.nodes.len();
        let mut pending = vec![0usize; n];
        let mut consumers = vec![Vec::new(); n];
        for (id, node) in self.nodes.iter().enumerate() {
            let preds = node.inputs.iter().map(|o| o.node).chain(node.control_inputs.iter().copied());
            for p in preds {
                if is_back_edge_source(&self.nodes[p].op) {
                    continue;
                }
                pending[id] += 1;
                consumers[p].push(id);
            }
        }
        let mut ready: Vec<NodeId> = (0..n).filter(|&i| pending[i] == 0).collect();
        ready.reverse();
        let mut order = Vec::with_capacity(n);
        while let Some(id) = ready.pop() {
            order.push(id);
            for &c in &consumers[id] {
                pending[c] -= 1;
                if pending[c] == 0 {
                    ready.push(c);
                }
            }
        }
        if order.len() < n {
            let mut cycle: Vec<String> =
                (0..n).filter(|&i| pending[i] > 0).map(|i| self.nodes[i].name.clone()).collect();
            cycle.truncate(20);
            return Err(GraphError::Cycle(cycle));
        }
        Ok(order)
    }
}

/// Edges out of `NextIteration` close a loop (TensorFlow's v1 `while_loop` frames): the one
/// op whose role this layer needs, for GraphDef's own rule that cycles pass through it (the
/// op registry, which knows every op's control-flow role, sits above this crate).
fn is_back_edge_source(op: &str) -> bool {
    op == "NextIteration"
}
