//! Functions and functional control flow beyond the TensorFlow fixtures: calls through
//! `PartitionedCall` and by function name, and malformed graphs that must end in an error
//! (recursion, a loop that never ends) rather than a hang or a stack overflow.
use ferroflow::prelude::*;

const HEADER: &str = r#"node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
"#;

/// `f(a) = a * a`, `g(a) = f(a) + a` (a nested call by name), `loops(a)`: a body that
/// returns its input, `always(a)`: a condition that is always true, `rec(a)` calls itself.
const LIBRARY: &str = r#"library {
  function {
    signature { name: "f" input_arg { name: "a" type: DT_FLOAT } output_arg { name: "out" type: DT_FLOAT } }
    node_def { name: "sq" op: "Mul" input: "a" input: "a" attr { key: "T" value { type: DT_FLOAT } } }
    ret { key: "out" value: "sq:z:0" }
  }
  function {
    signature { name: "g" input_arg { name: "a" type: DT_FLOAT } output_arg { name: "out" type: DT_FLOAT } }
    node_def { name: "call" op: "f" input: "a" }
    node_def { name: "sum" op: "AddV2" input: "call:out:0" input: "a" attr { key: "T" value { type: DT_FLOAT } } }
    ret { key: "out" value: "sum:z:0" }
  }
  function {
    signature { name: "always" input_arg { name: "a" type: DT_FLOAT } output_arg { name: "c" type: DT_BOOL } }
    node_def { name: "t" op: "Const" attr { key: "dtype" value { type: DT_BOOL } } attr { key: "value" value { tensor { dtype: DT_BOOL tensor_shape {} bool_val: true } } } }
    ret { key: "c" value: "t:output:0" }
  }
  function {
    signature { name: "same" input_arg { name: "a" type: DT_FLOAT } output_arg { name: "out" type: DT_FLOAT } }
    ret { key: "out" value: "a" }
  }
  function {
    signature { name: "rec" input_arg { name: "a" type: DT_FLOAT } output_arg { name: "out" type: DT_FLOAT } }
    node_def { name: "again" op: "rec" input: "a" }
    ret { key: "out" value: "again:out:0" }
  }
}
"#;

fn call(op: &str, func: &str) -> String {
    format!(
        r#"node {{ name: "call" op: "{op}" input: "x" attr {{ key: "Tin" value {{ list {{ type: DT_FLOAT }} }} }} attr {{ key: "Tout" value {{ list {{ type: DT_FLOAT }} }} }} attr {{ key: "f" value {{ func {{ name: "{func}" }} }} }} }}
"#
    )
}

fn session(nodes: &str, opts: SessionOptions) -> Result<Session, String> {
    let text = format!("{HEADER}{nodes}{LIBRARY}");
    let def: ferroflow::proto::GraphDef = ferroflow::proto::parse_text(&text, "test").map_err(|e| e.to_string())?;
    let g = ferroflow::ops::import_graph_def(&def).map_err(|e| e.to_string())?;
    Session::new(g, opts).map_err(|e| e.to_string())
}

fn run(sess: &Session, x: f32) -> Result<f32, String> {
    let r = sess.run(&[("x:0", Tensor::scalar(x))], &["call:0"], &[]).map_err(|e| e.to_string())?;
    Ok(r[0].scalar_value::<f32>().unwrap())
}

#[test]
fn partitioned_calls_and_nested_calls_by_name() {
    for op in ["PartitionedCall", "StatefulPartitionedCall"] {
        assert_eq!(run(&session(&call(op, "f"), Default::default()).unwrap(), 3.0).unwrap(), 9.0);
        assert_eq!(run(&session(&call(op, "g"), Default::default()).unwrap(), 3.0).unwrap(), 12.0);
    }
    let direct = r#"node { name: "call" op: "g" input: "x" }
"#;
    assert_eq!(run(&session(direct, Default::default()).unwrap(), 2.0).unwrap(), 6.0);
}

#[test]
fn a_function_that_calls_itself_is_an_error() {
    let e = session(&call("PartitionedCall", "rec"), Default::default()).and_then(|s| run(&s, 1.0)).unwrap_err();
    assert!(e.contains("function 'rec' calls itself"), "{e}");
}

#[test]
fn a_loop_that_never_ends_stops_at_the_iteration_limit() {
    let w = r#"node { name: "call" op: "While" input: "x" attr { key: "T" value { list { type: DT_FLOAT } } } attr { key: "cond" value { func { name: "always" } } } attr { key: "body" value { func { name: "same" } } } }
"#;
    let opts = SessionOptions::default().with_max_loop_iterations(1000);
    let e = run(&session(w, opts).unwrap(), 1.0).unwrap_err();
    assert!(e.contains("node 'call' (While)") && e.contains("1000 iterations"), "{e}");
}

#[test]
fn a_missing_function_is_named() {
    let e = session(&call("PartitionedCall", "nope"), Default::default()).and_then(|s| run(&s, 1.0)).unwrap_err();
    assert!(e.contains("no function 'nope'") && e.contains("node 'call'"), "{e}");
}

const PRED: &str = r#"node { name: "p" op: "Const" attr { key: "dtype" value { type: DT_BOOL } } attr { key: "value" value { tensor { dtype: DT_BOOL tensor_shape {} bool_val: false } } } }
node { name: "sw" op: "Switch" input: "x" input: "p" attr { key: "T" value { type: DT_FLOAT } } }
"#;

fn v1(nodes: &str, opts: SessionOptions, fetch: &str) -> Result<f32, String> {
    let text = format!("{HEADER}{PRED}{nodes}");
    let def: ferroflow::proto::GraphDef = ferroflow::proto::parse_text(&text, "test").map_err(|e| e.to_string())?;
    let g = ferroflow::ops::import_graph_def(&def).map_err(|e| e.to_string())?;
    let sess = Session::new(g, opts).map_err(|e| e.to_string())?;
    let r = sess.run(&[("x:0", Tensor::scalar(2.0f32))], &[fetch], &[]).map_err(|e| e.to_string())?;
    Ok(r[0].scalar_value::<f32>().unwrap())
}

#[test]
fn switch_and_merge_route_live_and_dead_values() {
    let merge = r#"node { name: "neg" op: "Neg" input: "sw:1" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "sq" op: "Square" input: "sw" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "m" op: "Merge" input: "neg" input: "sq" attr { key: "T" value { type: DT_FLOAT } } attr { key: "N" value { i: 2 } } }
"#;
    // pred is false: the false output (0) is live, so Square runs and Neg is dead.
    assert_eq!(v1(merge, Default::default(), "m:0").unwrap(), 4.0);
}

#[test]
fn a_merge_that_never_gets_a_live_input_is_an_error_not_a_hang() {
    let merge = r#"node { name: "m" op: "Merge" input: "sw:1" attr { key: "T" value { type: DT_FLOAT } } attr { key: "N" value { i: 1 } } }
"#;
    let e = v1(merge, Default::default(), "m:0").unwrap_err();
    assert!(e.contains("fetch 'm:0'") && e.contains("never computed"), "{e}");
}

#[test]
fn a_next_iteration_without_a_frame_is_an_error() {
    let next = r#"node { name: "ni" op: "NextIteration" input: "sw" attr { key: "T" value { type: DT_FLOAT } } }
"#;
    let e = v1(next, Default::default(), "ni:0").unwrap_err();
    assert!(e.contains("node 'ni' (NextIteration)") && e.contains("outside of any loop frame"), "{e}");
}

#[test]
fn a_v1_loop_that_never_ends_stops_at_the_iteration_limit() {
    // while (true) { v = v } in v1 form: Enter -> Merge <- NextIteration, LoopCond(true).
    let l = r#"node { name: "enter" op: "Enter" input: "x" attr { key: "T" value { type: DT_FLOAT } } attr { key: "frame_name" value { s: "loop" } } }
node { name: "merge" op: "Merge" input: "enter" input: "next" attr { key: "T" value { type: DT_FLOAT } } attr { key: "N" value { i: 2 } } }
node { name: "t" op: "Const" input: "^merge" attr { key: "dtype" value { type: DT_BOOL } } attr { key: "value" value { tensor { dtype: DT_BOOL tensor_shape {} bool_val: true } } } }
node { name: "cond" op: "LoopCond" input: "t" }
node { name: "s" op: "Switch" input: "merge" input: "cond" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "body" op: "Identity" input: "s:1" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "next" op: "NextIteration" input: "body" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "exit" op: "Exit" input: "s" attr { key: "T" value { type: DT_FLOAT } } }
"#;
    let opts = SessionOptions::default().with_max_loop_iterations(500);
    let e = v1(l, opts, "exit:0").unwrap_err();
    assert!(e.contains("node 'next' (NextIteration)") && e.contains("500 iterations"), "{e}");
}

#[test]
fn deeply_nested_function_calls_are_an_error_not_a_stack_overflow() {
    // f0 calls f1 calls ... f199: distinct functions, so no recursion, only depth.
    let n = 200;
    let mut lib = String::from("library {\n");
    for i in 0..n {
        let body = if i + 1 < n {
            format!(r#"node_def {{ name: "c" op: "f{}" input: "a" }} ret {{ key: "out" value: "c:out:0" }}"#, i + 1)
        } else {
            r#"ret { key: "out" value: "a" }"#.to_string()
        };
        lib.push_str(&format!(
            r#"function {{ signature {{ name: "f{i}" input_arg {{ name: "a" type: DT_FLOAT }} output_arg {{ name: "out" type: DT_FLOAT }} }} {body} }}
"#
        ));
    }
    lib.push_str("}\n");
    let text = format!("{HEADER}{}{lib}", call("PartitionedCall", "f0"));
    let def: ferroflow::proto::GraphDef = ferroflow::proto::parse_text(&text, "test").unwrap();
    let g = ferroflow::ops::import_graph_def(&def).unwrap();
    let e =
        Session::new(g, Default::default()).and_then(|s| s.run(&[("x:0", Tensor::scalar(1.0f32))], &["call:0"], &[]));
    let e = e.unwrap_err().to_string();
    assert!(e.contains("nested 64 calls deep") && e.contains("'f0'"), "{e}");
}
