//! RunOptions / RunMetadata: step stats per executed node and partition graphs.
use ferroflow::prelude::*;
use ferroflow::proto::{run_options::TraceLevel, RunOptions};

fn mlp() -> (Graph, String) {
    ferroflow::testing::graphs::mlp(&[8, 16, 4], "relu")
}

#[test]
fn full_trace_gives_a_node_exec_stats_per_executed_node() {
    let (g, fetch) = mlp();
    let sess = Session::new(g, SessionOptions::default()).unwrap();
    let x = Tensor::from_vec(&[3, 8], vec![0.5f32; 24]).unwrap();
    let opts =
        RunOptions { trace_level: TraceLevel::FullTrace as i32, output_partition_graphs: true, ..Default::default() };
    let (out, meta) = sess.run_with_options(&[("x:0", x.clone())], &[&fetch], &[], &opts).unwrap();
    assert_eq!(out[0].dims(), &[3, 4]);
    let plan = sess.plan(&["x:0"], &[&fetch], &[]).unwrap();
    let stats = meta.step_stats.unwrap();
    assert_eq!(stats.dev_stats.len(), 1);
    let dev = &stats.dev_stats[0];
    assert_eq!(dev.device, "/job:localhost/replica:0/task:0/device:CPU:0");
    assert_eq!(dev.node_stats.len(), plan.len(), "one NodeExecStats per executed node");
    for s in &dev.node_stats {
        assert!(s.all_start_micros > 1_600_000_000_000_000, "absolute micros: {}", s.all_start_micros);
        assert!(s.all_start_nanos / 1000 == s.all_start_micros);
        assert!(
            0 <= s.op_start_rel_nanos
                && s.op_start_rel_nanos <= s.op_end_rel_nanos
                && s.op_end_rel_nanos <= s.all_end_rel_nanos
        );
        assert!(dev.thread_names.contains_key(&s.thread_id));
        // timeline.py parses `(.*) = (.*)\((.*)\)`.
        let (name, rest) = s.timeline_label.split_once(" = ").unwrap();
        assert_eq!(name, s.node_name);
        assert!(rest.ends_with(')') && rest.contains('('), "{}", s.timeline_label);
        assert!(!s.output.is_empty());
    }
    let last = dev.node_stats.iter().find(|s| format!("{}:0", s.node_name) == fetch).unwrap();
    let desc = last.output[0].tensor_description.as_ref().unwrap();
    let dims: Vec<i64> = desc.shape.as_ref().unwrap().dim.iter().map(|d| d.size).collect();
    assert_eq!(dims, vec![3, 4]);
    assert_eq!(desc.allocation_description.as_ref().unwrap().requested_bytes, 48);
    assert_eq!(meta.partition_graphs.len(), 1);
    assert!(meta.partition_graphs[0].node.iter().all(|n| n.device.ends_with("device:CPU:0")));
    // No trace: no stats, same result.
    let (out2, meta) = sess.run_with_options(&[("x:0", x)], &[&fetch], &[], &RunOptions::default()).unwrap();
    assert!(meta.step_stats.is_none() && meta.partition_graphs.is_empty());
    assert_eq!(out[0], out2[0]);
}

#[test]
fn tracing_works_in_the_control_flow_executor() {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tf");
    let g = ferroflow::load_graph(&dir.join("tf1_control_flow.pb")).unwrap();
    let inputs = ferroflow::tensor::npy::read_npz(&dir.join("tf1_control_flow.inputs.npz")).unwrap();
    let sess = Session::new(g, SessionOptions::default()).unwrap();
    let feeds: Vec<(&str, Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let opts = RunOptions { trace_level: TraceLevel::SoftwareTrace as i32, ..Default::default() };
    let (_, meta) = sess.run_with_options(&feeds, &["acc:0"], &[], &opts).unwrap();
    let n = meta.step_stats.unwrap().dev_stats[0].node_stats.len();
    assert!(n > 10, "{n} node stats");
}

#[test]
fn traced_steps_record_every_node_and_make_the_protos_on_request() {
    // A chain of hand-offs and a wide part, on 2 inter-op threads: every node's record reaches
    // the trace whichever thread ran it.
    let (g, fetch) = ferroflow::testing::graphs::wide(200);
    let mut options = SessionOptions::default().with_inter_op_threads(2).with_intra_op_threads(1);
    options.optimizer.enabled = false;
    let sess = Session::new(g, options).unwrap();
    let plan = sess.plan(&["x:0"], &[&fetch], &[]).unwrap();
    let feeds = [Tensor::scalar(2.0f32)];
    let (out, trace) = sess.run_plan_traced(&plan, &feeds).unwrap();
    assert_eq!(out, sess.run_plan(&plan, &feeds).unwrap());
    assert_eq!(trace.len(), plan.len());
    let stats = trace.into_step_stats();
    let nodes = &stats.dev_stats[0].node_stats;
    assert_eq!(nodes.len(), plan.len());
    let mut names: Vec<&str> = nodes.iter().map(|s| s.node_name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), plan.len(), "each node once");
    assert!(nodes.windows(2).all(|w| w[0].all_start_nanos <= w[1].all_start_nanos), "start order");

    let (g, fetch) = ferroflow::testing::graphs::chain(300);
    let mut options = SessionOptions::default();
    options.optimizer.enabled = false;
    let sess = Session::new(g, options).unwrap();
    let plan = sess.plan(&["x:0"], &[&fetch], &[]).unwrap();
    let (_, trace) = sess.run_plan_traced(&plan, &[Tensor::scalar(1.0f32)]).unwrap();
    let nodes = trace.into_step_stats().dev_stats.remove(0).node_stats;
    assert_eq!(nodes.len(), plan.len());
    // Back to back on one thread: each node starts where the previous one ended.
    for w in nodes.windows(2) {
        let end = w[0].all_start_nanos + w[0].all_end_rel_nanos;
        assert!(
            w[1].all_start_nanos - end <= 1,
            "{} ends at {end}, {} starts at {}",
            w[0].node_name,
            w[1].node_name,
            w[1].all_start_nanos
        );
        assert!(w[1].op_start_rel_nanos >= 0 && w[1].op_end_rel_nanos >= w[1].op_start_rel_nanos);
    }
}
