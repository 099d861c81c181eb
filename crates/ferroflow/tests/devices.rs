//! Two CPU devices: placement, partition graphs joined by _Send/_Recv, partitions run
//! concurrently as one step, RunMetadata with both partitions and per-device step stats, and
//! the partitions merge back into a graph that gives the same outputs.
use ferroflow::ops::RawOps;
use ferroflow::prelude::*;
use ferroflow::proto::{run_options::TraceLevel, RunOptions};
use ferroflow::runtime::merge_partitions;

/// x (fed) -> MatMul with w on CPU:0 -> Relu on CPU:1 -> sum on CPU:0, plus a control edge
/// across devices.
fn graph() -> (Graph, Vec<String>) {
    graph_with(Shape::new(vec![None, Some(3)]))
}

fn graph_with(x_shape: Shape) -> (Graph, Vec<String>) {
    let s = Scope::new();
    let c0 = s.with_device("/cpu:0");
    let c1 = s.with_device("/device:CPU:1");
    let x = c0.with_name("x").placeholder(DType::Float, &x_shape).unwrap();
    let w = c0
        .with_name("w")
        .constant(&Tensor::from_vec(&[3, 2], vec![1.0f32, -1.0, 0.5, 2.0, -0.5, 1.0]).unwrap())
        .unwrap();
    let h = c0.with_name("h").matmul(x, w, false, false).unwrap();
    let r = c1.with_name("r").relu(h).unwrap();
    let t = c1.with_name("t").unary("Tanh", h).unwrap();
    let sum = c0.with_name("sum").add_v2(r, t).unwrap();
    let g = s.graph();
    let outs = vec![g.output_name(sum), g.output_name(r)];
    (g, outs)
}

fn run(devices: usize, optimize: bool) -> (Vec<Tensor>, ferroflow::proto::RunMetadata) {
    let (g, fetches) = graph();
    let mut opts = SessionOptions::default().with_cpu_devices(devices);
    opts.optimizer.enabled = optimize;
    let sess = Session::new(g, opts).unwrap();
    let x = Tensor::from_vec(&[2, 3], vec![1.0f32, 2.0, 3.0, -1.0, 0.5, 0.25]).unwrap();
    let fetches: Vec<&str> = fetches.iter().map(String::as_str).collect();
    let opts =
        RunOptions { trace_level: TraceLevel::FullTrace as i32, output_partition_graphs: true, ..Default::default() };
    sess.run_with_options(&[("x:0", x)], &fetches, &[], &opts).unwrap()
}

#[test]
fn two_cpu_devices_partition_run_and_merge() {
    let (one, _) = run(1, false);
    for optimize in [false, true] {
        let (two, meta) = run(2, optimize);
        assert_eq!(one, two, "optimize={optimize}");
        assert_eq!(meta.partition_graphs.len(), 2);
        let ops = |i: usize| meta.partition_graphs[i].node.iter().map(|n| n.op.clone()).collect::<Vec<_>>();
        assert!(ops(0).contains(&"_Send".to_string()) && ops(0).contains(&"_Recv".to_string()), "{:?}", ops(0));
        assert!(ops(1).contains(&"_Send".to_string()) && ops(1).contains(&"_Recv".to_string()), "{:?}", ops(1));
        for (i, p) in meta.partition_graphs.iter().enumerate() {
            let dev = format!("/job:localhost/replica:0/task:0/device:CPU:{i}");
            assert!(p.node.iter().all(|n| n.device == dev), "partition {i}");
        }
        // Feeds and fetches as TensorFlow writes them: _Arg and _Retval nodes.
        let all: Vec<&str> = meta.partition_graphs.iter().flat_map(|p| &p.node).map(|n| n.name.as_str()).collect();
        assert!(all.contains(&"_arg_x_0_0") && !all.contains(&"x"), "{all:?}");
        assert!(all.contains(&"_retval_sum_0_0") && all.contains(&"_retval_r_0_1"), "{all:?}");
        // TensorFlow's attrs on every send and receive.
        for n in
            meta.partition_graphs.iter().flat_map(|p| &p.node).filter(|n| n.op.starts_with("_Send") || n.op == "_Recv")
        {
            for a in ["tensor_name", "send_device", "send_device_incarnation", "recv_device", "client_terminated"] {
                assert!(n.attr.contains_key(a), "{} lacks {a}", n.name);
            }
        }
        // Step stats per device.
        let stats = meta.step_stats.unwrap();
        let devices: Vec<&str> = stats.dev_stats.iter().map(|d| d.device.as_str()).collect();
        assert_eq!(devices.len(), 2, "{devices:?}");
        // The partitions merge into a graph that runs to the same outputs.
        let merged = merge_partitions(&meta.partition_graphs).unwrap();
        let g = ferroflow::ops::import_graph_def(&merged).unwrap();
        let sess = Session::new(g, SessionOptions::default()).unwrap();
        let x = Tensor::from_vec(&[2, 3], vec![1.0f32, 2.0, 3.0, -1.0, 0.5, 0.25]).unwrap();
        let (_, fetches) = graph();
        let fetches: Vec<&str> = fetches.iter().map(String::as_str).collect();
        assert_eq!(sess.run(&[("x:0", x)], &fetches, &[]).unwrap(), one);
    }
}

#[test]
fn an_error_in_one_partition_aborts_the_step() {
    let (g, fetches) = graph_with(Shape::unknown());
    let sess = Session::new(g, SessionOptions::default().with_cpu_devices(2)).unwrap();
    // x with 4 columns: the MatMul on CPU:0 fails while CPU:1 waits for its result; the step
    // ends with that error, no hang.
    let x = Tensor::from_vec(&[1, 4], vec![1.0f32; 4]);
    let fetches: Vec<&str> = fetches.iter().map(String::as_str).collect();
    let e = sess.run(&[("x:0", x.unwrap())], &fetches, &[]).unwrap_err().to_string();
    assert!(e.contains("'h'") && e.contains("Matrix size-incompatible"), "{e}");
}

#[test]
fn impossible_placements_are_errors_naming_node_and_device() {
    let (mut g, fetches) = graph();
    let r = g.find("r").unwrap();
    g.node_mut(r).device = "/cpu:7".into();
    let sess = Session::new(g, SessionOptions::default().with_cpu_devices(2)).unwrap();
    let x = Tensor::from_vec(&[1, 3], vec![1.0f32; 3]).unwrap();
    let e = sess.run(&[("x:0", x)], &[&fetches[0]], &[]).unwrap_err().to_string();
    assert!(e.contains("'r'") && e.contains("CPU:7"), "{e}");
}

/// Counts calls and fetches `h:0` every step.
#[derive(Default)]
struct Probe {
    calls: std::rc::Rc<std::cell::RefCell<Vec<String>>>,
}

impl ferroflow::runtime::hooks::SessionRunHook for Probe {
    fn begin(&mut self, _: &Session) -> Result<(), ferroflow::runtime::RuntimeError> {
        self.calls.borrow_mut().push("begin".into());
        Ok(())
    }
    fn before_run(
        &mut self,
        step: u64,
    ) -> Result<ferroflow::runtime::hooks::RunArgs, ferroflow::runtime::RuntimeError> {
        self.calls.borrow_mut().push(format!("before {step}"));
        Ok(ferroflow::runtime::hooks::RunArgs { fetches: vec!["h:0".into()], ..Default::default() })
    }
    fn after_run(
        &mut self,
        step: u64,
        v: &ferroflow::runtime::hooks::RunValues,
    ) -> Result<(), ferroflow::runtime::RuntimeError> {
        assert_eq!(v.results.len(), 1);
        assert_eq!(v.results[0].dims(), &[2, 2]);
        self.calls.borrow_mut().push(format!("after {step}"));
        Ok(())
    }
    fn end(&mut self, _: &Session) -> Result<(), ferroflow::runtime::RuntimeError> {
        self.calls.borrow_mut().push("end".into());
        Ok(())
    }
}

#[test]
fn hooks_run_around_steps_and_write_partition_graphs() {
    use ferroflow::runtime::hooks::{MonitoredSession, PartitionGraphHook};
    let dir = tempfile::tempdir().unwrap();
    let (g, fetches) = graph();
    let sess = Session::new(g, SessionOptions::default().with_cpu_devices(2)).unwrap();
    let probe = Probe::default();
    let calls = probe.calls.clone();
    let hooks: Vec<Box<dyn ferroflow::runtime::hooks::SessionRunHook>> =
        vec![Box::new(probe), Box::new(PartitionGraphHook::new(dir.path(), 2))];
    let mut ms = MonitoredSession::new(sess, hooks).unwrap();
    let x = Tensor::from_vec(&[2, 3], vec![1.0f32, 2.0, 3.0, -1.0, 0.5, 0.25]).unwrap();
    for _ in 0..3 {
        let out = ms.run(&[("x:0", x.clone())], &[&fetches[0]], &[]).unwrap();
        assert_eq!(out.len(), 1, "the hook's fetch is not returned to the caller");
    }
    assert_eq!(ms.global_step(), 3);
    ms.close().unwrap();
    assert_eq!(calls.borrow().join(","), "begin,before 0,after 0,before 1,after 1,before 2,after 2,end");
    for step in [0, 2] {
        for d in ["CPU_0", "CPU_1"] {
            let p = dir.path().join(format!("global_step_{step}/_job_localhost_replica_0_task_0_device_{d}.pbtxt"));
            let def = ferroflow::graph::io::read_graph_def(&p).unwrap();
            assert!(def.node.iter().any(|n| n.op == "_Send"), "{p:?}");
        }
    }
    assert!(!dir.path().join("global_step_1").exists());
}

#[test]
fn a_recv_without_its_send_is_an_error_naming_it() {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tf/partitions");
    let p = dir.join("_job_localhost_replica_0_task_0_device_CPU_1.pbtxt");
    let g = ferroflow::ops::import_graph_def(&ferroflow::graph::io::read_graph_def(&p).unwrap()).unwrap();
    let sess = Session::new(g, SessionOptions::default()).unwrap();
    let e = sess.run(&[], &["z:0"], &[]).unwrap_err().to_string();
    assert!(e.contains("_Recv 'h/_1'") && e.contains("edge_5_h") && e.contains("no _Send"), "{e}");
}
