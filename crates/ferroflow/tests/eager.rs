//! Every TensorFlow kernel fixture run eagerly, op by op: each node of the fixture's graph is
//! one eager call (`function::eager::execute` with the node's attrs) on the values its inputs
//! computed, and the fetched values match TensorFlow's outputs within the fixture's
//! tolerances. Graphs whose nodes the executor runs itself (TF1 control flow, function calls)
//! are the graph side's business and are listed as skipped.
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ferroflow::function::eager;
use ferroflow::ops::{Execution, OpRegistry};
use ferroflow::tensor::{npy, Tensor};
use ferroflow::testing::{compare, read_manifest};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tf")
}

/// Runs fixture `name` eagerly; `Err` says why it cannot run op by op.
fn run_eagerly(name: &str, fetches: &[String]) -> Result<Vec<Tensor>, String> {
    let bytes = std::fs::read(fixtures().join(format!("{name}.pb"))).unwrap();
    let def: ferroflow::proto::GraphDef = ferroflow::proto::decode(&bytes, name).unwrap();
    let g = ferroflow::ops::import_graph_def(&def).unwrap();
    let feeds: HashMap<String, Tensor> =
        npy::read_npz(&fixtures().join(format!("{name}.inputs.npz"))).unwrap().into_iter().collect();
    for n in g.nodes() {
        let facts = OpRegistry::global().facts(&n.op).ok_or_else(|| format!("{}: a function call", n.name))?;
        if facts.execution != Execution::Kernel {
            return Err(format!("{} is {} ({:?})", n.name, n.op, facts.execution));
        }
    }
    let mut values: HashMap<(usize, usize), Tensor> = HashMap::new();
    for id in g.topological_order().unwrap() {
        let n = g.node(id);
        let fed: Vec<Tensor> =
            (0..n.num_outputs()).map_while(|i| feeds.get(&format!("{}:{i}", n.name)).cloned()).collect();
        let outputs = if !fed.is_empty() {
            fed
        } else {
            let inputs: Vec<&Tensor> = n.inputs.iter().map(|o| &values[&(o.node, o.index)]).collect();
            eager::execute(&n.op, &n.attrs, &inputs).map_err(|e| format!("node {}: {e}", n.name))?
        };
        for (i, t) in outputs.into_iter().enumerate() {
            values.insert((id, i), t);
        }
    }
    Ok(fetches
        .iter()
        .map(|f| {
            let (node, index) = f.rsplit_once(':').unwrap();
            values[&(g.find(node).unwrap(), index.parse::<usize>().unwrap())].clone()
        })
        .collect())
}

#[test]
fn every_kernel_fixture_runs_eagerly_op_by_op_and_matches_tensorflow() {
    let (mut ran, mut skipped) = (Vec::new(), Vec::new());
    for fx in read_manifest(&fixtures().join("MANIFEST")).unwrap() {
        let expected = npy::read_npz(&fixtures().join(format!("{}.expected.npz", fx.name))).unwrap();
        let fetches: Vec<String> = expected.iter().map(|(n, _)| n.clone()).collect();
        match run_eagerly(&fx.name, &fetches) {
            Ok(got) => {
                for ((name, want), got) in expected.iter().zip(&got) {
                    compare(got, want, fx.rtol, fx.atol).unwrap_or_else(|e| panic!("{} {name}: {e}", fx.name));
                }
                ran.push(fx.name);
            }
            Err(why) if why.contains("Call") || why.contains("ControlFlow") || why.contains("function call") => {
                skipped.push(format!("{}: {why}", fx.name))
            }
            Err(why) => panic!("{}: {why}", fx.name),
        }
    }
    eprintln!("ran eagerly: {ran:?}\nskipped (the executor runs these): {skipped:?}");
    assert!(ran.len() >= 20, "{ran:?}");
    assert!(skipped.len() <= 4, "{skipped:?}");
}
