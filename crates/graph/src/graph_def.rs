//! GraphDef import (validated, with every problem named) and export.
use std::collections::{BTreeMap, HashMap};

use ferroflow_proto::{node_def::ExperimentalDebugInfo, GraphDef, NodeDef};

use crate::names::{format_output, parse_output_name};
use crate::{Graph, GraphError, Node, NodeId, NodeTypes, OpSignatures, Output, UnknownOp, GRAPH_DEF_VERSION};

impl Graph {
    /// Imports a GraphDef, resolving every node against `ops`.
    ///
    /// Rejected with an error naming the node: duplicate names, unknown ops (all of them at
    /// once), inputs naming missing nodes or outputs, wrong input counts or dtypes, and
    /// cycles that are not loop back edges.
    pub fn from_graph_def(def: &GraphDef, ops: &dyn OpSignatures) -> Result<Graph, GraphError> {
        if let Some(v) = &def.versions {
            if v.min_consumer > GRAPH_DEF_VERSION {
                return Err(GraphError::Version(format!(
                    "the graph needs a consumer of version {} or newer; ferroflow consumes version {GRAPH_DEF_VERSION}",
                    v.min_consumer
                )));
            }
            if v.bad_consumers.contains(&GRAPH_DEF_VERSION) {
                return Err(GraphError::Version(format!("version {GRAPH_DEF_VERSION} is listed in bad_consumers")));
            }
        }
        let mut ids: HashMap<&str, NodeId> = HashMap::with_capacity(def.node.len());
        for (i, n) in def.node.iter().enumerate() {
            if ids.insert(n.name.as_str(), i).is_some() {
                return Err(GraphError::DuplicateNode(n.name.clone()));
            }
        }

        let mut unknown: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut types = Vec::with_capacity(def.node.len());
        for n in &def.node {
            match ops.resolve(&n.op, &n.attr) {
                Ok(Some(t)) => types.push(t),
                Ok(None) => {
                    unknown.entry(n.op.clone()).or_default().push(n.name.clone());
                    types.push(NodeTypes::default());
                }
                Err(source) => return Err(GraphError::BadAttrs { node: n.name.clone(), op: n.op.clone(), source }),
            }
        }
        if !unknown.is_empty() {
            return Err(GraphError::UnknownOps(
                unknown
                    .into_iter()
                    .map(|(op, nodes)| {
                        let hint = ops.unknown_op_hint(&op);
                        UnknownOp { op, nodes, hint }
                    })
                    .collect(),
            ));
        }

        let mut graph = Graph {
            library: def.library.clone().unwrap_or_default(),
            library_present: def.library.is_some(),
            versions: def.versions.clone(),
            ..Default::default()
        };
        let mut nodes = Vec::with_capacity(def.node.len());
        for (n, types) in def.node.iter().zip(types) {
            let (inputs, control_inputs) = resolve_inputs(n, &ids)?;
            let debug = n.experimental_debug_info.clone();
            nodes.push(Node {
                name: n.name.clone(),
                op: n.op.clone(),
                device: n.device.clone(),
                inputs,
                control_inputs,
                attrs: n.attr.clone(),
                types,
                has_debug_info: debug.is_some(),
                original_node_names: debug.as_ref().map(|d| d.original_node_names.clone()).unwrap_or_default(),
                original_func_names: debug.map(|d| d.original_func_names).unwrap_or_default(),
                experimental_type: n.experimental_type.clone(),
            });
        }
        for node in nodes {
            graph.push(node);
        }
        for node in &graph.nodes {
            graph.check_edges(node)?;
        }
        graph.topological_order()?;
        Ok(graph)
    }

    /// Exports the graph as a GraphDef (inputs written `name` for output 0, `name:N`, `^name`).
    pub fn to_graph_def(&self) -> GraphDef {
        let node = self
            .nodes
            .iter()
            .map(|n| {
                let mut input: Vec<String> =
                    n.inputs.iter().map(|o| format_output(&self.nodes[o.node].name, o.index)).collect();
                input.extend(n.control_inputs.iter().map(|&c| format!("^{}", self.nodes[c].name)));
                let has_debug =
                    n.has_debug_info || !n.original_node_names.is_empty() || !n.original_func_names.is_empty();
                NodeDef {
                    name: n.name.clone(),
                    op: n.op.clone(),
                    input,
                    device: n.device.clone(),
                    attr: n.attrs.clone(),
                    experimental_debug_info: has_debug.then(|| ExperimentalDebugInfo {
                        original_node_names: n.original_node_names.clone(),
                        original_func_names: n.original_func_names.clone(),
                    }),
                    experimental_type: n.experimental_type.clone(),
                }
            })
            .collect();
        let library = (self.library_present || self.library != Default::default()).then(|| self.library.clone());
        GraphDef { node, library, versions: self.versions.clone(), ..Default::default() }
    }
}

fn resolve_inputs(n: &NodeDef, ids: &HashMap<&str, NodeId>) -> Result<(Vec<Output>, Vec<NodeId>), GraphError> {
    let mut inputs = Vec::with_capacity(n.input.len());
    let mut controls = Vec::new();
    for s in &n.input {
        let missing = || GraphError::MissingInput { node: n.name.clone(), input: s.clone() };
        if let Some(ctrl) = s.strip_prefix('^') {
            controls.push(*ids.get(ctrl).ok_or_else(missing)?);
            continue;
        }
        if !controls.is_empty() {
            return Err(GraphError::MalformedInput {
                node: n.name.clone(),
                input: format!("{s} (data input after a control input)"),
            });
        }
        let (name, index) = parse_output_name(s)
            .ok_or_else(|| GraphError::MalformedInput { node: n.name.clone(), input: s.clone() })?;
        inputs.push(Output { node: *ids.get(name).ok_or_else(missing)?, index });
    }
    Ok((inputs, controls))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Attrs;
    use ferroflow_proto::parse_text;
    use ferroflow_tensor::DType;

    /// A tiny signature table: `C` (no inputs, one float output), `A` (two float inputs, one
    /// output), `NextIteration`/`Merge` for loop back edges.
    struct Toy;
    impl OpSignatures for Toy {
        fn resolve(&self, op: &str, _: &Attrs) -> Result<Option<NodeTypes>, crate::AttrError> {
            let f = DType::Float;
            Ok(match op {
                "C" => Some(NodeTypes { inputs: vec![], outputs: vec![f] }),
                "A" | "Merge" => Some(NodeTypes { inputs: vec![f, f], outputs: vec![f] }),
                "NextIteration" => Some(NodeTypes { inputs: vec![f], outputs: vec![f] }),
                "I" => Some(NodeTypes { inputs: vec![DType::Int32], outputs: vec![f] }),
                _ => None,
            })
        }
    }

    fn import(text: &str) -> Result<Graph, GraphError> {
        Graph::from_graph_def(&parse_text(text, "test").unwrap(), &Toy)
    }

    #[test]
    fn round_trip() {
        let text = r#"node { name: "a" op: "C" }
node { name: "b" op: "C" }
node { name: "s" op: "A" input: "a" input: "b:0" input: "^b" }"#;
        let g = import(text).unwrap();
        assert_eq!(g.node(2).inputs, vec![Output { node: 0, index: 0 }, Output { node: 1, index: 0 }]);
        let def = g.to_graph_def();
        assert_eq!(def.node[2].input, vec!["a", "b", "^b"]);
        let g2 = Graph::from_graph_def(&def, &Toy).unwrap();
        assert_eq!(g2.nodes(), g.nodes());
    }

    #[test]
    fn every_error_names_the_node() {
        let cases = [
            (r#"node { name: "a" op: "C" } node { name: "a" op: "C" }"#, "duplicate node name 'a'"),
            (
                r#"node { name: "a" op: "Foo" } node { name: "b" op: "Bar" } node { name: "c" op: "Foo" }"#,
                "unknown op(s): 'Bar' (node 'b'); 'Foo' (nodes 'a', 'c')",
            ),
            (
                r#"node { name: "s" op: "A" input: "a" input: "a" }"#,
                "node 's': input 'a' names a node that does not exist",
            ),
            (
                r#"node { name: "a" op: "C" } node { name: "s" op: "A" input: "a" }"#,
                "node 's' (A): expected 2 data input(s), got 1",
            ),
            (
                r#"node { name: "a" op: "C" } node { name: "s" op: "A" input: "a" input: "a:3" }"#,
                "input 'a:3' does not exist",
            ),
            (
                r#"node { name: "a" op: "C" } node { name: "s" op: "I" input: "a" }"#,
                "input 0 ('a:0') is float, expected int32",
            ),
            (
                r#"node { name: "a" op: "C" } node { name: "x" op: "A" input: "a" input: "y" } node { name: "y" op: "A" input: "a" input: "x" }"#,
                "cycle through node(s) 'x', 'y'",
            ),
            (
                r#"node { name: "a" op: "C" } node { name: "s" op: "A" input: "a:x" input: "a" }"#,
                "malformed input 'a:x'",
            ),
        ];
        for (text, want) in cases {
            let e = import(text).unwrap_err().to_string();
            assert!(e.contains(want), "got: {e}\nwant: {want}");
        }
    }

    #[test]
    fn loop_back_edges_are_not_cycles() {
        let text = r#"node { name: "a" op: "C" }
node { name: "m" op: "Merge" input: "a" input: "n" }
node { name: "n" op: "NextIteration" input: "m" }"#;
        assert!(import(text).is_ok());
    }

    #[test]
    fn tensor_names() {
        let g = import(r#"node { name: "a" op: "C" }"#).unwrap();
        assert_eq!(g.output_by_name("a:0").unwrap(), Output { node: 0, index: 0 });
        assert!(g.output_by_name("a:1").unwrap_err().to_string().contains("has 1 output"));
        assert!(g.output_by_name("zz:0").unwrap_err().to_string().contains("no node named 'zz'"));
    }
}
