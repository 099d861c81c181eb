//! Meta graphs: TensorFlow's `MetaGraphDef` (a graph plus the saver that checkpoints it, its
//! collections and signatures), exported next to every checkpoint as `PREFIX.meta`, and
//! imported — optionally under an `import_scope` — to rebuild a model without its code
//! (`tf.compat.v1.train.import_meta_graph`).
use std::collections::BTreeMap;
use std::path::Path;

use ferroflow_graph::Graph;
use ferroflow_proto::{
    attr_value::{ListValue, Value},
    collection_def::{self, Kind},
    meta_graph_def::MetaInfoDef,
    CollectionDef, GraphDef, MetaGraphDef, SaverDef, VariableDef,
};
use prost::Message;

use crate::saver::Saver;
use crate::{Builder, Result, TrainError, Variable};

/// The collections TensorFlow 1 keeps for a training graph: `variables`,
/// `trainable_variables` and `global_step` (serialized `VariableDef`s), and whatever node
/// lists were added with [`Builder::add_to_collection`] (e.g. `train_op`).
pub fn collections(b: &Builder) -> BTreeMap<String, CollectionDef> {
    let defs = |vars: &[Variable]| CollectionDef {
        kind: Some(Kind::BytesList(collection_def::BytesList {
            value: b.scope().with_graph(|g| vars.iter().map(|v| variable_def(g, v).encode_to_vec()).collect()),
        })),
    };
    let mut out = BTreeMap::new();
    let vars = b.variables();
    if !vars.is_empty() {
        out.insert("variables".to_string(), defs(&vars));
    }
    let trainable = b.trainable_variables();
    if !trainable.is_empty() {
        out.insert("trainable_variables".to_string(), defs(&trainable));
    }
    let step: Vec<Variable> = vars.into_iter().filter(|v| v.name == "global_step").collect();
    if !step.is_empty() {
        out.insert("global_step".to_string(), defs(&step));
    }
    for (key, names) in b.collections() {
        out.insert(key, CollectionDef { kind: Some(Kind::NodeList(collection_def::NodeList { value: names })) });
    }
    out
}

/// TensorFlow's `VariableDef` of a resource variable made by [`Builder::variable`].
fn variable_def(graph: &Graph, v: &Variable) -> VariableDef {
    let init = graph.node(v.initializer);
    VariableDef {
        variable_name: format!("{}:0", v.name),
        initial_value_name: init.inputs.get(1).map(|&o| graph.output_name(o)).unwrap_or_default(),
        initializer_name: init.name.clone(),
        snapshot_name: graph.output_name(v.value),
        save_slice_info_def: None,
        is_resource: true,
        trainable: v.trainable,
        synchronization: 0,
        // get_or_create_global_step's aggregation.
        aggregation: if v.name == "global_step" { 3 } else { 0 },
    }
}

/// A `MetaGraphDef` of `graph` with a saver and collections (TensorFlow's
/// `export_meta_graph`). `meta_info_def.meta_graph_version` names the producer.
pub fn export_meta_graph(
    graph: &Graph,
    saver_def: Option<&SaverDef>,
    collections: &BTreeMap<String, CollectionDef>,
) -> MetaGraphDef {
    MetaGraphDef {
        meta_info_def: Some(MetaInfoDef {
            meta_graph_version: format!("ferroflow {}", env!("CARGO_PKG_VERSION")),
            ..Default::default()
        }),
        graph_def: Some(graph.to_graph_def()),
        saver_def: saver_def.cloned(),
        collection_def: collections.clone(),
        signature_def: BTreeMap::new(),
        asset_file_def: vec![],
        object_graph_def: None,
    }
}

/// Writes a meta graph atomically: binary (TensorFlow's default for `.meta`), or text format
/// when the path ends in `.pbtxt`/`.txt`.
pub fn write_meta_graph(path: &Path, meta: &MetaGraphDef) -> Result<()> {
    let bytes = if ferroflow_graph::io::is_text_path(path) {
        ferroflow_proto::print_text(meta).into_bytes()
    } else {
        meta.encode_to_vec()
    };
    ferroflow_tensor::fs::write_atomic(path, &bytes)?;
    Ok(())
}

/// Reads a meta graph file (binary; text format as a fallback, like TensorFlow's
/// `read_meta_graph_file`).
pub fn read_meta_graph(path: &Path) -> Result<MetaGraphDef> {
    let what = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| TrainError::file_caused(path, format!("cannot read: {e}"), e))?;
    parse_meta_graph(&bytes, &what)
}

/// Parses a meta graph file's bytes (what [`read_meta_graph`] reads): binary, or text format
/// as a fallback; `what` names the file in errors.
pub fn parse_meta_graph(bytes: &[u8], what: &str) -> Result<MetaGraphDef> {
    let what = what.to_string();
    match ferroflow_proto::decode::<MetaGraphDef>(bytes, &what) {
        Ok(m) if m.graph_def.is_some() => Ok(m),
        binary => {
            match std::str::from_utf8(bytes).ok().map(|t| ferroflow_proto::parse_text::<MetaGraphDef>(t, &what)) {
                Some(Ok(m)) if m.graph_def.is_some() => Ok(m),
                _ => Err(match binary {
                    Err(e) => TrainError::file_caused(&what, format!("not a MetaGraphDef (binary or text): {e}"), e),
                    Ok(_) => TrainError::file(&what, "not a MetaGraphDef: it has no graph_def"),
                }),
            }
        }
    }
}

/// What [`import_meta_graph`] returns: the graph (the imported nodes plus those of the graph
/// imported into), the meta graph as imported (names under the scope), and its saver.
pub struct Imported {
    /// The graph to run.
    pub graph: Graph,
    /// The meta graph with every name (graph, saver, collections) moved under the scope.
    pub meta: MetaGraphDef,
    /// The saver rebuilt from the `SaverDef`, if the meta graph has one.
    pub saver: Option<Saver>,
}

impl Imported {
    /// TensorFlow's `get_tensor_by_name`: checks that `name` (`op:index`) is an output of
    /// the imported graph and returns it.
    pub fn tensor(&self, name: &str) -> Result<ferroflow_graph::Output> {
        Ok(self.graph.output_by_name(name)?)
    }

    /// The names in a node-list collection (e.g. `train_op`), or the variable names of a
    /// `VariableDef` collection (e.g. `trainable_variables`).
    pub fn collection(&self, key: &str) -> Vec<String> {
        match self.meta.collection_def.get(key).and_then(|c| c.kind.as_ref()) {
            Some(Kind::NodeList(l)) => l.value.clone(),
            Some(Kind::BytesList(l)) => {
                l.value.iter().filter_map(|b| VariableDef::decode(b.as_slice()).ok()).map(|v| v.variable_name).collect()
            }
            _ => vec![],
        }
    }
}

/// Imports a meta graph (TensorFlow's `import_meta_graph`): its graph goes into `into` (or a
/// new graph) with every node renamed `import_scope/NAME` when a scope is given; the saver
/// and collections are renamed to match. Variables are renamed too (their `shared_name`),
/// so two models imported under different scopes keep separate values in one session —
/// TensorFlow 2.21 keeps the original `shared_name`, and two such imports share variables.
pub fn import_meta_graph(meta: &MetaGraphDef, into: Option<&Graph>, import_scope: &str) -> Result<Imported> {
    let scope = import_scope.trim_end_matches('/');
    let mut def =
        meta.graph_def.clone().ok_or_else(|| TrainError::Invalid("the meta graph has no graph_def".into()))?;
    let mut meta = meta.clone();
    if !scope.is_empty() {
        scope_graph_def(&mut def, scope);
        let s = |n: &mut String| *n = scoped(scope, n);
        if let Some(sd) = meta.saver_def.as_mut() {
            s(&mut sd.filename_tensor_name);
            s(&mut sd.save_tensor_name);
            s(&mut sd.restore_op_name);
        }
        for c in meta.collection_def.values_mut() {
            match c.kind.as_mut() {
                Some(Kind::NodeList(l)) => l.value.iter_mut().for_each(s),
                Some(Kind::BytesList(l)) => {
                    for b in &mut l.value {
                        if let Ok(mut v) = VariableDef::decode(b.as_slice()) {
                            for n in [
                                &mut v.variable_name,
                                &mut v.initial_value_name,
                                &mut v.initializer_name,
                                &mut v.snapshot_name,
                            ] {
                                if !n.is_empty() {
                                    s(n);
                                }
                            }
                            *b = v.encode_to_vec();
                        }
                    }
                }
                _ => {}
            }
        }
        for sig in meta.signature_def.values_mut() {
            for t in sig.inputs.values_mut().chain(sig.outputs.values_mut()) {
                if let Some(ferroflow_proto::tensor_info::Encoding::Name(n)) = t.encoding.as_mut() {
                    s(n);
                }
            }
        }
    }
    if let Some(base) = into {
        def = merge_graph_defs(base.to_graph_def(), def)?;
    }
    let graph = ferroflow_ops::import_graph_def(&def)?;
    meta.graph_def = Some(graph.to_graph_def());
    let saver = meta.saver_def.clone().map(|sd| Saver::from_def(sd, meta.collection_def.clone()));
    Ok(Imported { graph, meta, saver })
}

/// Reads `path` and imports it ([`read_meta_graph`] + [`import_meta_graph`]).
pub fn import_meta_graph_file(path: &Path, into: Option<&Graph>, import_scope: &str) -> Result<Imported> {
    import_meta_graph(&read_meta_graph(path)?, into, import_scope)
}

fn scoped(scope: &str, name: &str) -> String {
    match name.strip_prefix('^') {
        Some(n) => format!("^{scope}/{n}"),
        None => format!("{scope}/{name}"),
    }
}

/// True for ops whose `shared_name` names session state: the registry's (`VarHandleOp`) and
/// the TensorFlow 1 ops it runs as (`VariableV2`).
fn owns_shared_state(op: &str) -> bool {
    let reg = ferroflow_ops::OpRegistry::global();
    let op = reg.ref_form(op).map_or(op, |(runs_as, _)| runs_as);
    reg.facts(op).is_some_and(|f| f.owns_shared_state)
}

/// Moves every node of `def` under `scope/`: names, inputs, colocation attrs (`_class`:
/// `loc:@NAME`) and the `shared_name` of variables that use their node's name.
fn scope_graph_def(def: &mut GraphDef, scope: &str) {
    for n in &mut def.node {
        let old = std::mem::take(&mut n.name);
        n.name = scoped(scope, &old);
        for i in &mut n.input {
            *i = scoped(scope, i);
        }
        if let Some(Value::List(l)) = n.attr.get_mut("_class").and_then(|a| a.value.as_mut()) {
            let ListValue { s, .. } = l.as_mut();
            for v in s.iter_mut() {
                if let Some(rest) = v.strip_prefix(b"loc:@") {
                    *v = format!("loc:@{scope}/{}", String::from_utf8_lossy(rest)).into_bytes();
                }
            }
        }
        if owns_shared_state(&n.op) {
            if let Some(Value::S(s)) = n.attr.get_mut("shared_name").and_then(|a| a.value.as_mut()) {
                if !s.is_empty() {
                    *s = format!("{scope}/{}", String::from_utf8_lossy(s)).into_bytes();
                }
            }
        }
    }
}

/// `base` plus `extra`'s nodes (and functions); a node name used by both is an error, a
/// function defined by both must be the same definition.
fn merge_graph_defs(mut base: GraphDef, extra: GraphDef) -> Result<GraphDef> {
    let names: std::collections::HashSet<&str> = base.node.iter().map(|n| n.name.as_str()).collect();
    if let Some(n) = extra.node.iter().find(|n| names.contains(n.name.as_str())) {
        return Err(TrainError::Invalid(format!(
            "node '{}' is already in the graph (import under a different import_scope)",
            n.name
        )));
    }
    base.node.extend(extra.node);
    if let Some(lib) = extra.library {
        let into = base.library.get_or_insert_with(Default::default);
        for f in lib.function {
            let name = f.signature.as_ref().map(|s| s.name.clone()).unwrap_or_default();
            match into.function.iter().find(|g| g.signature.as_ref().map(|s| s.name.as_str()) == Some(name.as_str())) {
                Some(g) if *g == f => {}
                Some(_) => {
                    return Err(TrainError::Invalid(format!(
                        "function '{name}' is defined differently in the graph and in the meta graph"
                    )))
                }
                None => into.function.push(f),
            }
        }
        into.gradient.extend(lib.gradient);
    }
    Ok(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scoping_renames_inputs_colocation_and_shared_names() {
        let text = r#"
            node { name: "v" op: "VarHandleOp" attr { key: "shared_name" value { s: "v" } }
                   attr { key: "dtype" value { type: DT_FLOAT } } attr { key: "shape" value { shape {} } } }
            node { name: "r" op: "ReadVariableOp" input: "v" input: "^v" attr { key: "dtype" value { type: DT_FLOAT } }
                   attr { key: "_class" value { list { s: "loc:@v" } } } }
        "#;
        let mut def: GraphDef = ferroflow_proto::parse_text(text, "test").unwrap();
        scope_graph_def(&mut def, "a");
        assert_eq!(def.node[0].name, "a/v");
        assert_eq!(def.node[1].input, ["a/v", "^a/v"]);
        let class = def.node[1].attr["_class"].value.as_ref().unwrap();
        assert!(matches!(class, Value::List(l) if l.s == [b"loc:@a/v".to_vec()]));
        assert!(matches!(def.node[0].attr["shared_name"].value, Some(Value::S(ref s)) if s == b"a/v"));
        let twice = merge_graph_defs(def.clone(), def);
        assert!(twice.err().unwrap().to_string().contains("'a/v' is already in the graph"));
    }
}
