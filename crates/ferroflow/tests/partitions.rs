//! TensorFlow's own partition graphs (a graph on two logical CPUs, written by
//! scripts/make_fixtures.py) merge into a graph that runs in ferroflow to TensorFlow's output;
//! TensorFlow's RunMetadata parses; malformed partition sets are clear errors.
use std::path::PathBuf;

use ferroflow::prelude::*;
use ferroflow::proto::{GraphDef, RunMetadata};
use ferroflow::runtime::{merge_partitions, MergeError};
use ferroflow::tensor::npy;
use ferroflow::testing::compare;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tf/partitions")
}

fn partitions() -> Vec<GraphDef> {
    ["CPU_0", "CPU_1"]
        .iter()
        .map(|d| {
            let p = dir().join(format!("_job_localhost_replica_0_task_0_device_{d}.pbtxt"));
            ferroflow::graph::io::read_graph_def(&p).unwrap()
        })
        .collect()
}

#[test]
fn tensorflows_partitions_merge_and_run_to_tensorflows_output() {
    let parts = partitions();
    assert!(parts.iter().all(|p| p.node.iter().any(|n| n.op == "_Send") && p.node.iter().any(|n| n.op == "_Recv")));
    let merged = merge_partitions(&parts).unwrap();
    let plumbing: Vec<&str> = merged
        .node
        .iter()
        .filter(|n| matches!(n.op.as_str(), "_Send" | "_Recv" | "_Arg" | "_Retval"))
        .map(|n| n.name.as_str())
        .collect();
    assert!(plumbing.is_empty(), "{plumbing:?}");
    let g = ferroflow::ops::import_graph_def(&merged).unwrap();
    let inputs = npy::read_npz(&dir().join("inputs.npz")).unwrap();
    let expected = npy::read_npz(&dir().join("expected.npz")).unwrap();
    for optimize in [false, true] {
        let mut opts = SessionOptions::default();
        opts.optimizer.enabled = optimize;
        let sess = Session::new(g.clone(), opts).unwrap();
        let feeds: Vec<(&str, Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
        let fetches: Vec<&str> = expected.iter().map(|(n, _)| n.as_str()).collect();
        let got = sess.run(&feeds, &fetches, &[]).unwrap();
        for ((name, want), got) in expected.iter().zip(&got) {
            compare(got, want, 1e-5, 1e-6).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
    // Partition order does not matter.
    let mut rev = parts.clone();
    rev.reverse();
    assert_eq!(merge_partitions(&rev).unwrap().node.len(), merged.node.len());
}

#[test]
fn tensorflows_run_metadata_parses() {
    let bytes = std::fs::read(dir().join("run_metadata.pb")).unwrap();
    let meta: RunMetadata = ferroflow::proto::decode(&bytes, "run_metadata.pb").unwrap();
    assert_eq!(meta.partition_graphs.len(), 2);
    let stats = meta.step_stats.unwrap();
    let devices: Vec<&str> = stats.dev_stats.iter().map(|d| d.device.as_str()).collect();
    assert!(devices.iter().any(|d| d.ends_with("device:CPU:1")), "{devices:?}");
    let nodes: Vec<_> = stats.dev_stats.iter().flat_map(|d| &d.node_stats).collect();
    assert!(nodes
        .iter()
        .any(|n| n.node_name == "y" && n.all_start_micros > 0 && n.timeline_label.starts_with("y = Sum(")));
}

#[test]
fn malformed_partition_sets_are_errors_naming_the_node() {
    let parts = partitions();
    // A _Recv whose _Send is gone.
    let mut p = parts.clone();
    p[0].node.retain(|n| n.name != "h/_0");
    let e = merge_partitions(&p).unwrap_err();
    assert!(matches!(&e, MergeError::UnmatchedRecv { node, .. } if node == "h/_1"), "{e}");
    assert!(e.to_string().contains("edge_5_h"), "{e}");
    // Two sends of one tensor.
    let mut p = parts.clone();
    let send = p[0].node.iter().find(|n| n.name == "h/_0").unwrap().clone();
    let mut dup = send;
    dup.name = "h/_dup".into();
    p[1].node.push(dup);
    let e = merge_partitions(&p).unwrap_err().to_string();
    assert!(e.contains("sent twice") && e.contains("h/_dup"), "{e}");
    // One partition given twice: its nodes collide.
    let e = merge_partitions(&[parts[1].clone(), parts[1].clone(), parts[0].clone()]).unwrap_err().to_string();
    assert!(e.contains("sent twice") || e.contains("defined in two partitions"), "{e}");
}
