//! The registry's signatures against TensorFlow's own `OpDef`s (`fixtures/tf/op_defs.pb`,
//! written by `scripts/make_fixtures.py tf_op_defs` from TensorFlow's op registry): for every
//! op both define, the input and output argument names, and every attr's name, type and
//! default. Defaults matter beyond style: SavedModels and `.meta` files are written with
//! `stripped_default_attrs`, so a node carries only the attrs that differ from TensorFlow's
//! defaults and ours must supply the rest.
use std::path::Path;

use ferroflow_ops::OpRegistry;
use ferroflow_proto::{attr_value::Value, AttrValue, OpList};

fn tf_ops() -> OpList {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tf/op_defs.pb");
    let bytes = std::fs::read(&path).unwrap();
    ferroflow_proto::decode(&bytes, "op_defs.pb").unwrap()
}

/// An attr value as TensorFlow's text format would show it, for the report.
fn show(v: &Option<AttrValue>) -> String {
    match v.as_ref().and_then(|v| v.value.as_ref()) {
        None => "none".into(),
        Some(v) => format!("{v:?}"),
    }
}

/// Defaults are equal when their values are; an empty list equals a missing list.
fn same_default(a: &Option<AttrValue>, b: &Option<AttrValue>) -> bool {
    let norm = |v: &Option<AttrValue>| -> Option<Value> {
        match v.as_ref().and_then(|v| v.value.clone()) {
            Some(Value::List(l)) if *l == Default::default() => Some(Value::List(Box::default())),
            x => x,
        }
    };
    norm(a) == norm(b)
}

#[test]
fn the_registry_agrees_with_tensorflow_s_op_defs() {
    let tf = tf_ops();
    let registry = OpRegistry::global();
    let mut problems = Vec::new();
    let mut compared = 0;
    for def in registry.defs() {
        let Some(t) = tf.op.iter().find(|o| o.name == def.name) else {
            continue; // ferroflow's own ops (fused kernels and the like)
        };
        compared += 1;
        let ours: Vec<&str> = def.inputs.iter().map(|a| a.name.as_str()).collect();
        let theirs: Vec<&str> = t.input_arg.iter().map(|a| a.name.as_str()).collect();
        if ours != theirs {
            problems.push(format!("{}: inputs {ours:?}, TensorFlow's {theirs:?}", def.name));
        }
        let ours: Vec<&str> = def.outputs.iter().map(|a| a.name.as_str()).collect();
        let theirs: Vec<&str> = t.output_arg.iter().map(|a| a.name.as_str()).collect();
        if ours != theirs {
            problems.push(format!("{}: outputs {ours:?}, TensorFlow's {theirs:?}", def.name));
        }
        for a in &t.attr {
            let Some(o) = def.attr_def(&a.name) else {
                problems.push(format!(
                    "{}: no attr '{}' ({}, default {})",
                    def.name,
                    a.name,
                    a.r#type,
                    show(&a.default_value)
                ));
                continue;
            };
            if o.ty != a.r#type {
                problems.push(format!("{}: attr '{}' is {}, TensorFlow's is {}", def.name, a.name, o.ty, a.r#type));
            }
            if !same_default(&o.default, &a.default_value) {
                problems.push(format!(
                    "{}: attr '{}' default {}, TensorFlow's {}",
                    def.name,
                    a.name,
                    show(&o.default),
                    show(&a.default_value)
                ));
            }
        }
        for o in &def.attrs {
            if !t.attr.iter().any(|a| a.name == o.name) {
                problems.push(format!("{}: attr '{}' is not one of TensorFlow's", def.name, o.name));
            }
        }
    }
    assert!(compared > 150, "only {compared} ops compared");
    assert!(problems.is_empty(), "{} differences from TensorFlow:\n{}", problems.len(), problems.join("\n"));
}

/// `src/tf_op_names.txt` (what an unknown-op error says TensorFlow has) lists exactly the ops
/// of `op_defs.pb`, sorted; a difference rewrites it (run the test again).
#[test]
fn the_tensorflow_op_name_list_matches_op_defs() {
    let mut names: Vec<String> = tf_ops().op.into_iter().map(|o| o.name).collect();
    names.sort();
    let text: String = names.iter().map(|n| format!("{n}\n")).collect();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/tf_op_names.txt");
    if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
        std::fs::write(&path, &text).unwrap();
        panic!("{} was out of date and has been rewritten; run the test again", path.display());
    }
    assert!(ferroflow_ops::tensorflow_has_op("Erfc") && !ferroflow_ops::tensorflow_has_op("NotAnOp"));
    assert_eq!(OpRegistry::global().nearest("Relux"), Some("Relu"));
    assert_eq!(OpRegistry::global().nearest("NotAnOpAtAll"), None);
}
