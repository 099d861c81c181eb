//! TensorFlow 1's reference variables, run as resource variables.
//!
//! A TF1 graph made with ref variables (`tf.compat.v1.disable_v2_behavior()`, or TensorFlow
//! 1 itself) holds `VariableV2` nodes whose output is a *reference* to the variable's buffer:
//! ops declared with `Ref(T)` inputs (`Assign`, `ApplyAdam`, ...) update the variable through
//! it, and every other consumer reads the value at the moment it runs. ferroflow has one kind
//! of variable, so [`lower_ref_variables`] rewrites such a GraphDef, keeping every node name:
//!
//! - `VariableV2 V` → `VarHandleOp V` (same `container`/`shared_name`, dtype and shape);
//! - ops taking refs → their resource forms (`Assign` → `AssignVariableOp`, `AssignAdd` →
//!   `AssignAddVariableOp`, `ApplyAdam` → `ResourceApplyAdam`, `IsVariableInitialized` →
//!   `VarIsInitializedOp`, ...), fed the handle;
//! - `Identity` of a ref (the `V/read` node) → `ReadVariableOp` of the handle;
//! - any other consumer of a ref gets a `ReadVariableOp` (named `CONSUMER/ref_read_N`) with the
//!   consumer's control inputs, so it reads when the consumer would have.
//!
//! The output of an `Assign` (or `Apply*`) is a ref to the variable after the update: its value
//! consumers read the variable with a control dependency on the update. Refs through control
//! flow (`RefSwitch`, `RefEnter`, ...) and scatter ops are reported by node name.
use ferroflow_proto::attr::AttrMap;
use std::collections::{HashMap, HashSet};

use ferroflow_graph::GraphError;
use ferroflow_proto::{attr_value::Value, AttrValue, GraphDef, NodeDef};

use crate::OpRegistry;

/// True for TensorFlow 1's variable ops (the ref forms of `VarHandleOp`).
fn is_variable(op: &str) -> bool {
    OpRegistry::global().ref_form(op).is_some_and(|(resource_op, _)| resource_op == "VarHandleOp")
}

/// For an op with ref inputs (`Assign`, `ApplyAdam`, ...): the resource op that runs it and
/// how many leading inputs are refs.
fn ref_inputs(op: &str) -> Option<(&'static str, usize)> {
    OpRegistry::global().ref_form(op).filter(|&(_, refs)| refs > 0)
}

/// True when the graph has TF1 ref variables that [`lower_ref_variables`] would rewrite.
pub fn has_ref_variables(def: &GraphDef) -> bool {
    def.node.iter().any(|n| is_variable(&n.op))
}

/// Where a ref tensor points: the handle tensor of its variable, the variable's dtype (a
/// `DataType` number), and the update whose result it is (a control dependency for readers).
#[derive(Clone)]
struct RefTo {
    handle: String,
    dtype: i32,
    after: Option<String>,
}

fn tensor_key(input: &str) -> String {
    match input.rsplit_once(':') {
        Some((n, i)) if i.chars().all(|c| c.is_ascii_digit()) && !i.is_empty() => format!("{n}:{i}"),
        _ => format!("{input}:0"),
    }
}

fn type_attr(t: i32) -> AttrValue {
    AttrValue { value: Some(Value::Type(t)) }
}

/// Rewrites TF1 ref variables into resource variables (see the module docs). A graph without
/// `VariableV2` nodes is returned unchanged.
pub fn lower_ref_variables(def: &GraphDef) -> Result<GraphDef, GraphError> {
    if !has_ref_variables(def) {
        return Ok(def.clone());
    }
    let bad =
        |n: &NodeDef, why: String| GraphError::BadAttrs { node: n.name.clone(), op: n.op.clone(), source: why.into() };
    // Which tensors are refs, found to a fixpoint (an Assign's output is a ref if its input is).
    let mut refs: HashMap<String, RefTo> = HashMap::new();
    for n in &def.node {
        if is_variable(&n.op) {
            let dtype = match n.attr.attr_value("dtype") {
                Some(Value::Type(t)) => *t,
                _ => return Err(bad(n, "a variable needs a 'dtype' attr".into())),
            };
            refs.insert(format!("{}:0", n.name), RefTo { handle: format!("{}:0", n.name), dtype, after: None });
        }
    }
    loop {
        let mut grew = false;
        for n in &def.node {
            // An update's output is a ref to the variable it updated (when it has an output).
            let Some((resource_op, _)) = ref_inputs(&n.op) else { continue };
            let out = format!("{}:0", n.name);
            let updates = OpRegistry::global().get(resource_op).is_some_and(|d| d.outputs.is_empty());
            if !updates || refs.contains_key(&out) {
                continue;
            }
            if let Some(r) = n.input.first().and_then(|i| refs.get(&tensor_key(i))) {
                let to = RefTo { after: Some(n.name.clone()), ..r.clone() };
                refs.insert(out, to);
                grew = true;
            }
        }
        if !grew {
            break;
        }
    }
    let mut names: HashSet<String> = def.node.iter().map(|n| n.name.clone()).collect();
    let mut out = GraphDef { node: Vec::with_capacity(def.node.len()), ..def.clone() };
    for n in &def.node {
        let mut n = n.clone();
        if is_variable(&n.op) {
            n.op = "VarHandleOp".into();
            n.attr.retain(|k, _| {
                matches!(k.as_str(), "dtype" | "shape" | "container" | "shared_name") || k.starts_with('_')
            });
            out.node.push(n);
            continue;
        }
        if n.op.starts_with("Ref") || n.op.starts_with("Scatter") {
            if let Some(i) = n.input.iter().find(|i| refs.contains_key(&tensor_key(i))) {
                return Err(bad(
                    &n,
                    format!("ref variable '{i}' flows into {}, which ferroflow does not run on ref variables", n.op),
                ));
            }
        }
        let ref_form = ref_inputs(&n.op);
        let control: Vec<String> = n.input.iter().filter(|i| i.starts_with('^')).cloned().collect();
        if let Some((resource_op, k)) = ref_form {
            for i in 0..k {
                let Some(r) = n.input.get(i).and_then(|s| refs.get(&tensor_key(s))).cloned() else {
                    return Err(bad(&n, format!("input {i} must be a ref variable (a VariableV2 output)")));
                };
                n.input[i] = r.handle.clone();
                if let Some(a) = r.after {
                    n.input.push(format!("^{a}"));
                }
            }
            // The resource op's attrs: a ref op's `T` is the variable's `dtype` there.
            let def = OpRegistry::global().get(resource_op).expect("ref forms name registered ops");
            if def.attr_def("dtype").is_some() && def.attr_def("T").is_none() {
                if let Some(t) = n.attr.remove("T") {
                    n.attr.insert("dtype".into(), t);
                }
            }
            n.attr.retain(|k, _| k.starts_with('_') || def.attr_def(k).is_some());
            n.op = resource_op.into();
        } else if n.op == "Identity" && n.input.first().is_some_and(|i| refs.contains_key(&tensor_key(i))) {
            // `V/read`: the read itself.
            let r = refs[&tensor_key(&n.input[0])].clone();
            n.op = "ReadVariableOp".into();
            n.input[0] = r.handle;
            if let Some(a) = r.after {
                n.input.push(format!("^{a}"));
            }
            n.attr.retain(|k, _| k.starts_with('_'));
            n.attr.insert("dtype".into(), type_attr(r.dtype));
            out.node.push(n);
            continue;
        }
        // Any other data input that is a ref: read it where the consumer runs.
        let first_value = ref_form.map_or(0, |(_, k)| k);
        let mut reads = Vec::new();
        for idx in first_value..n.input.len() {
            let input = n.input[idx].clone();
            if input.starts_with('^') {
                continue;
            }
            let Some(r) = refs.get(&tensor_key(&input)).cloned() else { continue };
            let mut k = reads.len();
            let mut name = format!("{}/ref_read_{k}", n.name);
            while names.contains(&name) {
                k += 1;
                name = format!("{}/ref_read_{k}", n.name);
            }
            names.insert(name.clone());
            let mut inputs = vec![r.handle.clone()];
            inputs.extend(control.iter().cloned());
            if let Some(a) = r.after {
                inputs.push(format!("^{a}"));
            }
            let mut attr = std::collections::BTreeMap::new();
            attr.insert("dtype".to_string(), type_attr(r.dtype));
            reads.push(NodeDef {
                name: name.clone(),
                op: "ReadVariableOp".into(),
                input: inputs,
                device: n.device.clone(),
                attr,
                ..Default::default()
            });
            n.input[idx] = name;
        }
        out.node.extend(reads);
        out.node.push(n);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tf1_variable_becomes_a_resource_variable() {
        let text = r#"
            node { name: "v" op: "VariableV2" attr { key: "dtype" value { type: DT_FLOAT } }
                   attr { key: "shape" value { shape { dim { size: 2 } } } }
                   attr { key: "container" value { s: "" } } attr { key: "shared_name" value { s: "" } } }
            node { name: "init" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
                   attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } } float_val: 1 } } } }
            node { name: "v/Assign" op: "Assign" input: "v" input: "init" attr { key: "T" value { type: DT_FLOAT } }
                   attr { key: "validate_shape" value { b: true } } attr { key: "use_locking" value { b: true } } }
            node { name: "v/read" op: "Identity" input: "v" attr { key: "T" value { type: DT_FLOAT } } }
            node { name: "twice" op: "AddV2" input: "v/Assign" input: "v" attr { key: "T" value { type: DT_FLOAT } } }
            node { name: "ok" op: "IsVariableInitialized" input: "v" attr { key: "dtype" value { type: DT_FLOAT } } }
        "#;
        let def: GraphDef = ferroflow_proto::parse_text(text, "test").unwrap();
        let g = lower_ref_variables(&def).unwrap();
        let by = |name: &str| g.node.iter().find(|n| n.name == name).unwrap().clone();
        assert_eq!(by("v").op, "VarHandleOp");
        let assign = by("v/Assign");
        assert_eq!((assign.op.as_str(), assign.input.clone()), ("AssignVariableOp", vec!["v:0".into(), "init".into()]));
        assert!(assign.attr.contains_key("dtype") && !assign.attr.contains_key("T"));
        assert_eq!(by("v/read").op, "ReadVariableOp");
        // The Assign's output is the variable after the assignment; the plain ref is a read.
        let twice = by("twice");
        assert_eq!(twice.input, ["twice/ref_read_0", "twice/ref_read_1"]);
        assert_eq!(by("twice/ref_read_0").input, ["v:0", "^v/Assign"]);
        assert_eq!(by("twice/ref_read_1").input, ["v:0"]);
        assert_eq!(by("ok").op, "VarIsInitializedOp");
        crate::import_graph_def(&g).unwrap();

        // Refs through control flow, and ref ops fed something else, are named errors.
        let mut bad = def.clone();
        bad.node.push(NodeDef {
            name: "sw".into(),
            op: "RefSwitch".into(),
            input: vec!["v".into(), "p".into()],
            ..Default::default()
        });
        let e = lower_ref_variables(&bad).unwrap_err().to_string();
        assert!(e.contains("'sw'") && e.contains("RefSwitch"), "{e}");
        let mut bad = def;
        bad.node.push(NodeDef {
            name: "a2".into(),
            op: "Assign".into(),
            input: vec!["init".into(), "init".into()],
            ..Default::default()
        });
        let e = lower_ref_variables(&bad).unwrap_err().to_string();
        assert!(e.contains("'a2'") && e.contains("must be a ref variable"), "{e}");
    }
}
