//! Data-parallel pieces in a 1-rank world (no MPI; the multi-rank tests run under `mpirun` in
//! `crates/cli/tests/mpi.rs`): the collective kernels, the distributed optimizer's fused
//! all-reduce and the sharded fit.
use ferroflow::graph::Attrs;
use ferroflow::ops::RawOps;
use ferroflow::prelude::*;
use ferroflow::proto::attr;
use ferroflow::runtime::SessionOptions;
use ferroflow::workflows::mnist_training;

/// A graph: `x` → `op` with the group inputs (size `group_size`) → `out`.
fn collective(op: &str, group_size: i32, extra: &[(&str, ferroflow::proto::AttrValue)], recv_shape: bool) -> Session {
    let s = Scope::new();
    let x = s.with_name("x").placeholder(DType::Float, &Shape::unknown()).unwrap();
    let size = s.scalar(group_size).unwrap();
    let key = s.scalar(1i32).unwrap();
    let mut a = Attrs::new();
    a.insert("T".into(), attr::dtype(DType::Float));
    for (k, v) in extra {
        a.insert((*k).into(), v.clone());
    }
    let mut inputs = vec![x, size, key, key];
    if recv_shape {
        inputs = vec![size, key, key, s.constant_from(&[2], &[2i32, 3]).unwrap()];
    }
    s.with_name("out").add_op(op, op, &inputs, &[], a).unwrap();
    Session::new(s.graph(), SessionOptions::default()).unwrap()
}

fn reduce_attrs(final_op: &str) -> Vec<(&'static str, ferroflow::proto::AttrValue)> {
    vec![("merge_op", attr::string("Add")), ("final_op", attr::string(final_op))]
}

#[test]
fn collectives_in_a_one_rank_world_are_identities() {
    let x = Tensor::from_vec(&[2, 3], vec![1.0f32, -2.0, 3.5, 0.0, 7.0, -1.0]).unwrap();
    for final_op in ["Id", "Div"] {
        let sess = collective("CollectiveReduceV2", 1, &reduce_attrs(final_op), false);
        let out = sess.run(&[("x:0", x.clone())], &["out:0"], &[]).unwrap();
        assert_eq!(out[0].as_slice::<f32>().unwrap(), x.as_slice::<f32>().unwrap());
    }
    let sess = collective("CollectiveGatherV2", 1, &[], false);
    let out = sess.run(&[("x:0", x.clone())], &["out:0"], &[]).unwrap();
    assert_eq!((out[0].dims(), out[0].as_slice::<f32>().unwrap()), (x.dims(), x.as_slice::<f32>().unwrap()));
    let sess = collective("CollectiveBcastSendV2", 1, &[], false);
    let out = sess.run(&[("x:0", x.clone())], &["out:0"], &[]).unwrap();
    assert_eq!(out[0].as_slice::<f32>().unwrap(), x.as_slice::<f32>().unwrap());
}

#[test]
fn collective_errors_name_the_node_and_the_world() {
    let x = Tensor::from_vec(&[2], vec![1.0f32, 2.0]).unwrap();
    let sess = collective("CollectiveReduceV2", 2, &reduce_attrs("Div"), false);
    let e = sess.run(&[("x:0", x.clone())], &["out:0"], &[]).unwrap_err().to_string();
    assert!(e.contains("out") && e.contains("group_size 2") && e.contains("1 rank"), "{e}");
    // A receive with no sender anywhere fails instead of waiting.
    let sess = collective("CollectiveBcastRecvV2", 1, &[], true);
    let e = sess.run(&[], &["out:0"], &[]).unwrap_err().to_string();
    assert!(e.contains("no rank runs CollectiveBcastSendV2"), "{e}");
    // A scalar cannot be gathered along dimension 0.
    let sess = collective("CollectiveGatherV2", 1, &[], false);
    let e = sess.run(&[("x:0", Tensor::scalar(1.0f32))], &["out:0"], &[]).unwrap_err().to_string();
    assert!(e.contains("rank 1 or more"), "{e}");
}

/// In a 1-rank world the distributed optimizer's fused all-reduce (reshape, concat, reduce,
/// split) changes no bit: the same variables as the plain optimizer, step for step, with one
/// fused buffer or one per gradient.
#[test]
fn distributed_training_on_one_rank_matches_plain_training_bitwise() {
    let data = ferroflow::train::mnist::bundled_dir();
    let run = |distributed: bool| {
        let config = mnist_training::Config { distributed, dropout_rate: 0.0, ..Default::default() };
        let r = mnist_training::train_config(&data, 40, 3, SessionOptions::default(), 0, Default::default(), &config)
            .unwrap();
        (r.checksum, r.rank, r.test_accuracy)
    };
    let (plain, dist) = (run(false), run(true));
    assert_eq!(plain.1, (0, 1));
    assert_eq!(dist.1, (0, 1));
    assert_eq!(plain.0, dist.0, "the distributed optimizer changed the variables on one rank");
    assert_eq!(plain.2, dist.2);
}

#[test]
fn fused_gradient_buffers_split_back_exactly() {
    use ferroflow::train::distributed::DistributedOptimizer;
    use ferroflow::train::optimizers::Optimizer;
    use ferroflow::train::{Builder, Initializer};
    for threshold in [0, 64 << 20] {
        let b = Builder::with_seed(5);
        let s = b.scope().clone();
        let init = Initializer::TruncatedNormal { mean: 0.0, stddev: 0.5, seed: None };
        let w = b.variable(&s, "w", &[3, 4], DType::Float, &init, true).unwrap();
        let v = b.variable(&s, "v", &[4], DType::Float, &init, true).unwrap();
        let x = s.with_name("x").placeholder(DType::Float, &Shape::new(vec![None, Some(3)])).unwrap();
        let y = s.add_v2(s.matmul(x, w.value, false, false).unwrap(), v.value).unwrap();
        let loss = s.reduce("Sum", s.mul(y, y).unwrap(), &[0, 1], false).unwrap();
        let opt = DistributedOptimizer {
            fusion_threshold_bytes: threshold,
            ..DistributedOptimizer::new(Optimizer::gradient_descent(0.1))
        };
        let reduced = opt.compute_gradients(&b, loss, None).unwrap();
        let plain = Optimizer::gradient_descent(0.1).compute_gradients(&b, loss, None).unwrap();
        let init_op = b.global_variables_initializer().unwrap();
        let g = b.graph();
        let sess = Session::new(g.clone(), SessionOptions::default()).unwrap();
        sess.run(&[], &[], &[&g.node(init_op).name]).unwrap();
        let names: Vec<String> = reduced.iter().chain(&plain).map(|(o, _)| g.output_name(o.unwrap())).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let xv = Tensor::from_vec(&[2, 3], vec![0.5f32, -1.0, 2.0, 1.5, 0.25, -0.75]).unwrap();
        let out = sess.run(&[("x:0", xv)], &refs, &[]).unwrap();
        let n = reduced.len();
        for i in 0..n {
            assert_eq!(out[i].dims(), out[n + i].dims(), "threshold {threshold}: gradient {i}");
            assert_eq!(out[i].as_slice::<f32>().unwrap(), out[n + i].as_slice::<f32>().unwrap());
        }
        let fused = g.nodes().iter().filter(|n| n.op == "CollectiveReduceV2").count();
        assert_eq!(fused, if threshold == 0 { 2 } else { 1 }, "threshold {threshold}");
    }
}

/// A node asking for a task the cluster does not have fails at the first step, naming the
/// node, the device and the cluster's size (checked before any rank talks to another).
#[test]
fn a_device_beyond_the_cluster_is_an_error_naming_node_device_and_size() {
    let s = Scope::new();
    let a = s.scalar(1.0f32).unwrap();
    let far = s.with_name("far").with_device("/job:worker/task:5/device:CPU:0").unary("Neg", a).unwrap();
    let _ = far;
    let options = SessionOptions::default().with_cluster(Some(ferroflow::runtime::Cluster { tasks: 2, task: 0 }));
    let sess = Session::new(s.graph(), options).unwrap();
    let e = sess.run(&[], &["far:0"], &[]).unwrap_err().to_string();
    assert!(e.contains("'far'") && e.contains("/job:worker/task:5/device:CPU:0") && e.contains("2 task(s)"), "{e}");
}

/// A cluster session in a world that is not the cluster (here the 1-rank world of a process
/// not started by mpirun) fails at its first step saying so, instead of waiting for ranks
/// that do not exist; a fetch on a task other than 0 is refused, naming the node.
#[test]
fn cluster_steps_check_the_world_and_where_fetches_are() {
    let s = Scope::new();
    let a = s.scalar(1.0f32).unwrap();
    let _ = s.with_name("here").unary("Neg", a).unwrap();
    let _ = s.with_name("there").with_device("/job:worker/task:1/device:CPU:0").unary("Neg", a).unwrap();
    let options = SessionOptions::default().with_cluster(Some(ferroflow::runtime::Cluster { tasks: 2, task: 0 }));
    let sess = Session::new(s.graph(), options).unwrap();
    let e = sess.run(&[], &["here:0"], &[]).unwrap_err().to_string();
    assert!(e.contains("cluster has 2 task(s)") && e.contains("world has 1 rank(s)"), "{e}");
    let e = sess.run(&[], &["there:0"], &[]).unwrap_err().to_string();
    assert!(e.contains("'there'") && e.contains("task 1") && e.contains("returned by task 0"), "{e}");
}
