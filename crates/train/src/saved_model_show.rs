//! What `saved_model_cli show --all` prints for a SavedModel directory, built from the files
//! alone (TensorFlow's tool loads the model in Python for its last section; ferroflow reads
//! the same facts from the object graph): every meta graph by tag set, its signatures with
//! each input and output's dtype, shape and tensor name, the ops its graph uses, and the
//! concrete functions of the root object's `tf.function`s with their input signatures.
//!
//! The one difference is the op set: Python prints a `set` in hash order, ferroflow sorted.
use ferroflow_proto::attr::AttrMap;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::path::Path;

use ferroflow_proto::{
    attr_value, structured_value::Kind, tensor_info::Encoding, DataType, GraphDef, MetaGraphDef, SavedObjectGraph,
    SignatureDef, StructuredValue, TensorInfo, TensorShapeProto,
};

use crate::{Result, TrainError};

/// Reads and parses `DIR/saved_model.pb`.
pub fn read_saved_model(dir: &Path) -> Result<ferroflow_proto::SavedModel> {
    let pb = dir.join("saved_model.pb");
    let bytes = std::fs::read(&pb).map_err(|e| {
        TrainError::file_caused(dir, format!("not a SavedModel directory: cannot read saved_model.pb ({e})"), e)
    })?;
    ferroflow_proto::decode(&bytes, &pb.display().to_string())
        .map_err(|e| TrainError::file_caused(&pb, format!("not a SavedModel: {e}"), e))
}

/// `saved_model_cli show --all --dir DIR`'s text.
pub fn show_all(dir: &Path) -> Result<String> {
    Ok(show_all_of(&read_saved_model(dir)?))
}

/// [`show_all`] of a parsed SavedModel.
pub fn show_all_of(model: &ferroflow_proto::SavedModel) -> String {
    let mut out = String::new();
    let tags = |m: &MetaGraphDef| m.meta_info_def.as_ref().map(|i| i.tags.clone()).unwrap_or_default();
    let mut metas: Vec<&MetaGraphDef> = model.meta_graphs.iter().collect();
    metas.sort_by_key(|m| tags(m));
    for meta in metas {
        let t = tags(meta);
        let _ = writeln!(out, "\nMetaGraphDef with tag-set: '{}' contains the following SignatureDefs:", t.join(", "));
        for (key, sig) in &meta.signature_def {
            let _ = writeln!(out, "\nsignature_def['{key}']:");
            signature(&mut out, sig);
        }
        let ops: Vec<String> = ops_used(meta.graph_def.as_ref()).into_iter().map(|o| format!("'{o}'")).collect();
        let quoted: Vec<String> = t.iter().map(|t| format!("'{t}'")).collect();
        let set = if ops.is_empty() { "set()".to_string() } else { format!("{{{}}}", ops.join(", ")) };
        let _ = writeln!(out, "The MetaGraph with tag set [{}] contains the following ops: {set}", quoted.join(", "));
    }
    if let Some(graph) = model.meta_graphs.iter().find_map(|m| m.object_graph_def.as_ref()) {
        out.push_str("\nConcrete Functions:");
        concrete_functions(&mut out, graph);
    }
    out
}

fn signature(out: &mut String, sig: &SignatureDef) {
    out.push_str("  The given SavedModel SignatureDef contains the following input(s):\n");
    for (k, info) in &sig.inputs {
        let _ = writeln!(out, "    inputs['{k}'] tensor_info:");
        tensor_info(out, info);
    }
    out.push_str("  The given SavedModel SignatureDef contains the following output(s):\n");
    for (k, info) in &sig.outputs {
        let _ = writeln!(out, "    outputs['{k}'] tensor_info:");
        tensor_info(out, info);
    }
    let _ = writeln!(out, "  Method name is: {}", sig.method_name);
}

fn tensor_info(out: &mut String, info: &TensorInfo) {
    let dtype = DataType::try_from(info.dtype).map_or_else(|_| info.dtype.to_string(), |d| d.as_str_name().to_string());
    let shape = match &info.tensor_shape {
        Some(s) if !s.unknown_rank => {
            format!("({})", s.dim.iter().map(|d| d.size.to_string()).collect::<Vec<_>>().join(", "))
        }
        _ => "unknown_rank".to_string(),
    };
    let name = match &info.encoding {
        Some(Encoding::Name(n)) => n.as_str(),
        _ => "",
    };
    let _ = write!(out, "        dtype: {dtype}\n        shape: {shape}\n        name: {name}\n");
}

/// TensorFlow's `ops_used_by_graph_def`: the ops of the graph's nodes and of the library
/// functions they call as ops or through a `(Stateful)PartitionedCall`'s `f` (not through
/// other function attrs such as a `While`'s body, as TensorFlow's does not), without the
/// function names themselves.
pub fn ops_used(graph: Option<&GraphDef>) -> BTreeSet<String> {
    let Some(graph) = graph else { return BTreeSet::new() };
    let library: BTreeMap<&str, &ferroflow_proto::FunctionDef> = graph
        .library
        .iter()
        .flat_map(|l| &l.function)
        .filter_map(|f| Some((f.signature.as_ref()?.name.as_str(), f)))
        .collect();
    let mut used: BTreeSet<String> = BTreeSet::new();
    let mut queue: Vec<&ferroflow_proto::FunctionDef> = Vec::new();
    let mut nodes: Vec<&ferroflow_proto::NodeDef> = graph.node.iter().collect();
    loop {
        for n in nodes.drain(..) {
            let mut ops = vec![n.op.as_str()];
            if n.op == "PartitionedCall" || n.op == "StatefulPartitionedCall" {
                if let Some(attr_value::Value::Func(f)) = n.attr.attr_value("f") {
                    ops.push(&f.name);
                }
            }
            for op in ops {
                if !used.contains(op) {
                    queue.extend(library.get(op));
                }
                used.insert(op.to_string());
            }
        }
        match queue.pop() {
            Some(f) => nodes.extend(&f.node_def),
            None => break,
        }
    }
    used.retain(|op| !library.contains_key(op.as_str()));
    used
}

/// The root object's children that are functions, sorted by name, each with its concrete
/// functions' input signatures.
fn concrete_functions(out: &mut String, graph: &SavedObjectGraph) {
    use ferroflow_proto::saved_object::Kind as Object;
    let Some(root) = graph.nodes.first() else { return };
    let mut children: Vec<(&str, i32)> = root.children.iter().map(|c| (c.local_name.as_str(), c.node_id)).collect();
    children.sort();
    for (name, id) in children {
        let Some(node) = usize::try_from(id).ok().and_then(|i| graph.nodes.get(i)) else { continue };
        let mut names: Vec<&str> = match &node.kind {
            Some(Object::Function(f)) => f.concrete_functions.iter().map(String::as_str).collect(),
            Some(Object::BareConcreteFunction(b)) => vec![b.concrete_function_name.as_str()],
            _ => continue,
        };
        let _ = write!(out, "\n  Function Name: '{name}'\n");
        names.sort_unstable();
        for (i, cf) in names.iter().enumerate() {
            let signature = graph.concrete_functions.get(*cf).and_then(|c| c.canonicalized_input_signature.as_ref());
            let (args, kwargs) = match signature.and_then(|s| s.kind.as_ref()) {
                Some(Kind::TupleValue(t)) if t.values.len() == 2 => (Some(&t.values[0]), Some(&t.values[1])),
                _ => (None, None),
            };
            let args: Vec<&StructuredValue> = match args.and_then(|a| a.kind.as_ref()) {
                Some(Kind::TupleValue(t)) => t.values.iter().collect(),
                Some(Kind::ListValue(t)) => t.values.iter().collect(),
                _ => {
                    // A bare concrete function without a structured signature: its keywords.
                    match &node.kind {
                        Some(Object::BareConcreteFunction(b)) if !b.argument_keywords.is_empty() => {
                            let _ = write!(out, "    Option #{}\n      Callable with:\n", i + 1);
                            for (j, k) in b.argument_keywords.iter().enumerate() {
                                let _ = write!(out, "        Argument #{}\n          {k}\n", j + 1);
                            }
                        }
                        _ => {}
                    }
                    continue;
                }
            };
            if !args.is_empty() {
                let _ = write!(out, "    Option #{}\n      Callable with:\n", i + 1);
                print_args(out, args.iter().map(|a| (None, *a)), "Argument");
            }
            if let Some(Kind::DictValue(d)) = kwargs.and_then(|k| k.kind.as_ref()) {
                if !d.fields.is_empty() {
                    // TensorFlow enumerates the dict: its keys.
                    for (j, k) in d.fields.keys().enumerate() {
                        let _ = write!(out, "        Named Argument #{}\n          {k}\n", j + 1);
                    }
                }
            }
        }
    }
}

fn print_args<'a>(out: &mut String, args: impl Iterator<Item = (Option<&'a str>, &'a StructuredValue)>, what: &str) {
    for (j, (_, a)) in args.enumerate() {
        let _ = writeln!(out, "        {what} #{}", j + 1);
        match a.kind.as_ref() {
            Some(Kind::TensorSpecValue(s)) => {
                let _ = writeln!(out, "          {}: {}", s.name, tensor_spec_repr(&s.name, s.shape.as_ref(), s.dtype));
            }
            Some(Kind::StringValue(s)) => {
                let _ = writeln!(out, "          {s}");
            }
            Some(Kind::ListValue(l)) => sequence(out, "list", &l.values),
            Some(Kind::TupleValue(l)) => sequence(out, "tuple", &l.values),
            Some(Kind::DictValue(d)) => {
                let items: Vec<String> = d.fields.iter().map(|(k, v)| format!("'{k}': {}", quoted_str(v))).collect();
                let _ = writeln!(out, "          DType: dict\n          Value: {{{}\u{8}\u{8}}}", tail(&items));
            }
            other => {
                let (ty, value) = python_scalar(other);
                let _ = writeln!(out, "          DType: {ty}\n          Value: {value}");
            }
        }
    }
}

/// Python prints each item followed by `, ` and then two backspaces before the bracket.
fn tail(items: &[String]) -> String {
    items.iter().map(|i| format!("{i}, ")).collect()
}

fn sequence(out: &mut String, ty: &str, values: &[StructuredValue]) {
    let items: Vec<String> = values.iter().map(quoted_str).collect();
    let _ = writeln!(out, "          DType: {ty}\n          Value: [{}\u{8}\u{8}]", tail(&items));
}

/// `str(value)`, with quotes around strings (saved_model_cli's `_maybe_add_quotes`).
fn quoted_str(v: &StructuredValue) -> String {
    match v.kind.as_ref() {
        Some(Kind::StringValue(s)) => format!("'{s}'"),
        other => python_str(other),
    }
}

fn python_str(v: Option<&Kind>) -> String {
    match v {
        Some(Kind::TensorSpecValue(s)) => tensor_spec_repr(&s.name, s.shape.as_ref(), s.dtype),
        Some(Kind::ListValue(l)) => format!("[{}]", l.values.iter().map(python_repr).collect::<Vec<_>>().join(", ")),
        Some(Kind::TupleValue(l)) => match l.values.len() {
            1 => format!("({},)", python_repr(&l.values[0])),
            _ => format!("({})", l.values.iter().map(python_repr).collect::<Vec<_>>().join(", ")),
        },
        Some(Kind::DictValue(d)) => format!(
            "{{{}}}",
            d.fields.iter().map(|(k, v)| format!("'{k}': {}", python_repr(v))).collect::<Vec<_>>().join(", ")
        ),
        other => python_scalar(other).1,
    }
}

fn python_repr(v: &StructuredValue) -> String {
    match v.kind.as_ref() {
        Some(Kind::StringValue(s)) => format!("'{s}'"),
        other => python_str(other),
    }
}

fn python_scalar(v: Option<&Kind>) -> (&'static str, String) {
    match v {
        Some(Kind::BoolValue(b)) => ("bool", if *b { "True" } else { "False" }.into()),
        Some(Kind::Int64Value(i)) => ("int", i.to_string()),
        Some(Kind::Float64Value(f)) => ("float", python_float(*f)),
        Some(Kind::StringValue(s)) => ("str", s.clone()),
        Some(Kind::TensorDtypeValue(d)) => ("DType", format!("<dtype: '{}'>", python_dtype(*d))),
        Some(Kind::TensorShapeValue(s)) => ("TensorShape", shape_str(Some(s))),
        None | Some(Kind::NoneValue(_)) => ("NoneType", "None".into()),
        Some(_) => ("object", "?".into()),
    }
}

fn python_float(f: f64) -> String {
    if f.is_finite() && f == f.trunc() && f.abs() < 1e16 {
        format!("{f:.1}")
    } else {
        format!("{f}")
    }
}

/// `TensorShape.__str__`: `(None, 4)`, `(3,)`, `()`, `<unknown>`.
fn shape_str(s: Option<&TensorShapeProto>) -> String {
    match s {
        Some(s) if !s.unknown_rank => {
            let d: Vec<String> =
                s.dim.iter().map(|d| if d.size < 0 { "None".into() } else { d.size.to_string() }).collect();
            match d.len() {
                1 => format!("({},)", d[0]),
                _ => format!("({})", d.join(", ")),
            }
        }
        _ => "<unknown>".into(),
    }
}

/// `TensorSpec.__repr__`.
fn tensor_spec_repr(name: &str, shape: Option<&TensorShapeProto>, dtype: i32) -> String {
    let name = if name.is_empty() { "None".to_string() } else { format!("'{name}'") };
    format!("TensorSpec(shape={}, dtype=tf.{}, name={name})", shape_str(shape), python_dtype(dtype))
}

/// Python's dtype names (`tf.float32`).
fn python_dtype(d: i32) -> String {
    // Ref dtypes (`DT_FLOAT_REF` = 101) keep their own names.
    match ferroflow_tensor::DType::from_tf(d).ok().filter(|_| d < 100) {
        Some(d) => d.python_name().to_string(),
        None => match DataType::try_from(d) {
            Ok(t) => t.as_str_name().trim_start_matches("DT_").to_lowercase(),
            Err(_) => format!("dtype_{d}"),
        },
    }
}
