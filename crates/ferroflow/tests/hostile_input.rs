//! Corrupted files never panic: thousands of truncations and byte mutations of real
//! TensorFlow files go through the parsers, GraphDef import and shape inference, and each ends
//! in `Ok` or a clean error.
use std::path::Path;

use ferroflow::tensor::npy;

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tf").join(name)).unwrap()
}

use ferroflow::tensor::rng::Rng;

fn mutations(original: &[u8], count: usize, seed: u64) -> impl Iterator<Item = Vec<u8>> + '_ {
    let mut rng = Rng::new(seed);
    (0..count).map(move |i| {
        let mut b = original.to_vec();
        if i % 4 == 0 {
            b.truncate(rng.below(original.len()));
        } else {
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(b.len());
                b[at] = rng.next_u64() as u8;
            }
        }
        b
    })
}

#[test]
fn mutated_graph_defs_never_panic() {
    for name in ["mlp.pb", "array_ops.pb", "edge.pb"] {
        let original = fixture(name);
        for bytes in mutations(&original, 1500, 0x9E3779B97F4A7C15) {
            if let Ok(def) = ferroflow::proto::decode::<ferroflow::proto::GraphDef>(&bytes, name) {
                let _ = ferroflow::ops::import_graph_def(&def);
            }
        }
    }
}

#[test]
fn mutated_text_graph_defs_never_panic() {
    let original = fixture("mlp.pbtxt");
    for bytes in mutations(&original, 600, 0xD1B54A32D192ED03) {
        let text = String::from_utf8_lossy(&bytes);
        if let Ok(def) = ferroflow::proto::parse_text::<ferroflow::proto::GraphDef>(&text, "mlp.pbtxt") {
            let _ = ferroflow::ops::import_graph_def(&def);
        }
    }
}

#[test]
fn mutated_npy_and_npz_never_panic() {
    let npz = fixture("array_ops.inputs.npz");
    for bytes in mutations(&npz, 1500, 0x94D049BB133111EB) {
        let _ = npy::read_npz_from(std::io::Cursor::new(bytes), "x.npz");
    }
    let members =
        npy::read_npz(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tf/array_ops.inputs.npz")).unwrap();
    let one = npy::write_npy_bytes(&members[0].1).unwrap();
    for bytes in mutations(&one, 3000, 0xBF58476D1CE4E5B9) {
        let _ = npy::read_npy_bytes(&bytes, "x.npy");
    }
}

#[test]
fn mutated_graphs_never_panic_the_optimizer() {
    use ferroflow::optimize::{Item, MetaOptimizer, OptimizerOptions};
    for name in ["mlp.pb", "grappler/cnn.pb", "control_flow_v1.pb"] {
        let original = fixture(name);
        for bytes in mutations(&original, 300, 0xA0761D6478BD642F) {
            let Ok(def) = ferroflow::proto::decode::<ferroflow::proto::GraphDef>(&bytes, name) else { continue };
            let Ok(graph) = ferroflow::ops::import_graph_def(&def) else { continue };
            // Fetch whatever Identity nodes survived the mutation.
            let fetches: Vec<String> =
                graph.nodes().iter().filter(|n| n.op == "Identity").map(|n| format!("{}:0", n.name)).collect();
            let item = Item { fetches, ..Default::default() };
            for fail in [false, true] {
                let opts = OptimizerOptions::default().with_fail_on_pass_error(fail);
                let _ = MetaOptimizer::new(opts).optimize(&graph, &item);
            }
        }
    }
}

#[test]
fn malformed_fused_ops_are_errors_naming_the_node() {
    use ferroflow::prelude::*;
    let graph = |node: &str| {
        let text = format!(
            r#"node {{ name: "x" op: "Placeholder" attr {{ key: "dtype" value {{ type: DT_FLOAT }} }} }}
               node {{ name: "w" op: "Placeholder" attr {{ key: "dtype" value {{ type: DT_FLOAT }} }} }}
               node {{ name: "b" op: "Placeholder" attr {{ key: "dtype" value {{ type: DT_FLOAT }} }} }}
               {node}"#
        );
        let def: ferroflow::proto::GraphDef = ferroflow::proto::parse_text(&text, "test").unwrap();
        ferroflow::ops::import_graph_def(&def).unwrap()
    };
    let t = r#"attr { key: "T" value { type: DT_FLOAT } }"#;
    let cases = [
        (
            format!(
                r#"node {{ name: "f" op: "_FusedMatMul" input: "x" input: "w" input: "b" {t}
                   attr {{ key: "num_args" value {{ i: 1 }} }}
                   attr {{ key: "fused_ops" value {{ list {{ s: "BiasAdd" s: "Gelu" }} }} }} }}"#
            ),
            "is not supported",
        ),
        (
            format!(
                r#"node {{ name: "f" op: "_FusedElementwise" input: "x" input: "w" {t}
                   attr {{ key: "N" value {{ i: 2 }} }}
                   attr {{ key: "program" value {{ list {{ s: "Frobnicate a0 a1" }} }} }} }}"#
            ),
            "not a fusible elementwise op",
        ),
        (
            format!(
                r#"node {{ name: "f" op: "_FusedElementwise" input: "x" input: "w" {t}
                   attr {{ key: "N" value {{ i: 2 }} }}
                   attr {{ key: "program" value {{ list {{ s: "AddV2 a0 r3" }} }} }} }}"#
            ),
            "out of range",
        ),
        (
            format!(
                r#"node {{ name: "f" op: "_FusedElementwise" input: "x" input: "w" {t}
                   attr {{ key: "N" value {{ i: 2 }} }}
                   attr {{ key: "program" value {{ list {{ }} }} }} }}"#
            ),
            "non-empty 'program'",
        ),
    ];
    for (node, want) in cases {
        let sess = Session::new(graph(&node), SessionOptions::default()).unwrap();
        let x = Tensor::from_vec(&[2, 2], vec![1.0f32; 4]).unwrap();
        let b = Tensor::from_vec(&[2], vec![1.0f32; 2]).unwrap();
        let e = sess
            .run(&[("x:0", x.clone()), ("w:0", x), ("b:0", b)], &["f:0"], &[])
            .expect_err("malformed fused op must fail")
            .to_string();
        assert!(e.contains("'f'") && e.contains(want), "{e}");
    }
}
