//! Multi-process tests under `mpirun` (feature `mpi`; `.ci/run` installs Open MPI and runs
//! them with `cargo test -p ferroflow-cli --features mpi --test mpi`). Not compiled without
//! the feature.
#![cfg(feature = "mpi")]
use std::path::Path;
use std::process::{Command, Output};

use ferroflow::checkpoint::BundleReader;

/// `mpirun -np N` (oversubscribed beyond the cores, shared memory only, as root too) of the
/// ferroflow binary with `args`.
fn mpirun(np: usize, args: &[&str]) -> Output {
    let out = Command::new("mpirun")
        .args(["-np", &np.to_string(), "--oversubscribe", "--bind-to", "none", "--mca", "btl", "self,vader"])
        .arg(env!("CARGO_BIN_EXE_ferroflow"))
        .args(args)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .expect("mpirun runs (install openmpi-bin; see README)");
    out
}

/// mpirun's MPMD form: rank 0 runs ferroflow with `rank_0`'s arguments, rank 1 with `rank_1`'s.
fn mpmd(rank_0: &[&str], rank_1: &[&str]) -> Output {
    let ferroflow = env!("CARGO_BIN_EXE_ferroflow");
    Command::new("mpirun")
        .args(["--oversubscribe", "--bind-to", "none", "--mca", "btl", "self,vader"])
        .args(["-np", "1", ferroflow])
        .args(rank_0)
        .args([":", "-np", "1", ferroflow])
        .args(rank_1)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .expect("mpirun runs (install openmpi-bin; see README)")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Each rank's `rank=R ... variables_fnv1a=H test_accuracy=A` line: (rank, checksum, accuracy).
fn ranks(o: &Output) -> Vec<(usize, String, f64)> {
    let mut v: Vec<(usize, String, f64)> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| l.starts_with("rank="))
        .map(|l| {
            let field = |k: &str| l.split(' ').find_map(|w| w.strip_prefix(k)).unwrap_or_else(|| panic!("{k} in {l}"));
            (
                field("rank=").parse().unwrap(),
                field("variables_fnv1a=").to_string(),
                field("test_accuracy=").parse().unwrap(),
            )
        })
        .collect();
    v.sort_by_key(|r| r.0);
    v
}

#[test]
fn two_ranks_train_mnist_data_parallel_with_identical_variables() {
    let o = mpirun(2, &["mnist", "--distributed", "--intra-op-threads", "1"]);
    assert!(o.status.success(), "{}", text(&o));
    let r = ranks(&o);
    assert_eq!(r.iter().map(|r| r.0).collect::<Vec<_>>(), [0, 1], "{}", text(&o));
    assert_eq!(r[0].1, r[1].1, "the replicas' variables differ: {}", text(&o));
    assert!(r.iter().all(|r| r.2 >= 0.95), "accuracy below 0.95: {}", text(&o));
}

#[test]
fn four_ranks_stay_bitwise_identical() {
    let o = mpirun(4, &["mnist", "--distributed", "--intra-op-threads", "1", "--steps", "200"]);
    assert!(o.status.success(), "{}", text(&o));
    let r = ranks(&o);
    assert_eq!(r.len(), 4, "{}", text(&o));
    assert!(r.iter().all(|x| x.1 == r[0].1), "the replicas' variables differ: {}", text(&o));
}

fn variables(prefix: &Path) -> Vec<(String, Vec<f32>)> {
    let r = BundleReader::open(prefix).unwrap();
    let names: Vec<String> = r.entries().keys().filter(|k| !k.starts_with('_')).cloned().collect();
    names
        .into_iter()
        .filter_map(|k| {
            let t = r.read(&k).unwrap();
            Some((k, t.as_slice::<f32>().ok()?.to_vec()))
        })
        .collect()
}

/// Two ranks of 50 examples each take the same steps as one process on the batches of 100
/// (dropout off: its masks depend on the batch's shape): the variables agree within 1e-5.
///
/// One intra-op thread on both sides: a product split across threads sums in another order
/// for 50 rows than for 100, and a ReLU input that rounding moves across 0 switches that
/// unit's gradient for the example, which Adam then spreads over the whole layer (seen: the
/// default seed's third batch on two threads, 1.6e-3 after 60 steps). With one thread the
/// only difference left is the mean of two means, and the variables agree within 2e-6 for
/// seeds 1 to 5.
#[test]
fn two_ranks_match_one_process_with_the_same_global_batch() {
    let dir = tempfile::tempdir().unwrap();
    let (one, two) = (dir.path().join("one/m"), dir.path().join("two/m"));
    let common = ["--steps", "60", "--dropout", "0", "--intra-op-threads", "1", "--save"];
    let single = Command::new(env!("CARGO_BIN_EXE_ferroflow"))
        .arg("mnist")
        .args(common)
        .arg(one.to_str().unwrap())
        .output()
        .unwrap();
    assert!(single.status.success(), "{}", text(&single));
    let mut args = vec!["mnist", "--distributed"];
    args.extend(common);
    args.push(two.to_str().unwrap());
    let o = mpirun(2, &args);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("rank 0 saved"), "{}", text(&o));
    let (a, b) = (variables(&dir.path().join("one/m-60")), variables(&dir.path().join("two/m-60")));
    assert!(a.len() >= 18, "{:?}", a.iter().map(|v| &v.0).collect::<Vec<_>>());
    assert_eq!(a.iter().map(|v| &v.0).collect::<Vec<_>>(), b.iter().map(|v| &v.0).collect::<Vec<_>>());
    for ((name, x), (_, y)) in a.iter().zip(&b) {
        let worst = x.iter().zip(y).map(|(p, q)| (p - q).abs()).fold(0f32, f32::max);
        assert!(worst <= 1e-5, "{name}: the 2-rank and 1-process values differ by {worst}");
    }
}

#[test]
fn allreduce_bench_compares_with_mpi_allreduce() {
    let o = mpirun(2, &["allreduce-bench", "--mb", "1,4", "--runs", "3"]);
    assert!(o.status.success(), "{}", text(&o));
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(s.contains("across 2 rank(s), mpi backend"), "{s}");
    // A header and one row per size, printed by rank 0 only.
    assert_eq!(
        s.lines().filter(|l| l.trim_start().starts_with("1.0") || l.trim_start().starts_with("4.0")).count(),
        2,
        "{s}"
    );
}

/// An error on a rank ends the whole job (`MPI_Abort`) with that error, its rank named,
/// instead of leaving the other ranks waiting in a collective.
#[test]
fn a_failing_rank_ends_the_job_with_its_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nothing-here");
    // Rank-local bad input: every rank fails reading the data, each names it, none hangs.
    let o = mpirun(2, &["mnist", "--distributed", "--data", missing.to_str().unwrap()]);
    assert!(!o.status.success());
    let t = text(&o);
    assert!(t.contains("error on rank"), "{t}");
    assert!(t.contains("nothing-here"), "{t}");
}

/// Ranks that built different graphs (here: another dropout rate, through mpirun's
/// `-np 1 A : -np 1 B` form) fail at step 0 with the same error on every rank, naming the
/// ranks, instead of waiting on collectives the other never issues.
#[test]
fn ranks_with_different_graphs_fail_at_step_zero() {
    let o = mpmd(&["mnist", "--distributed", "--dropout", "0.2"], &["mnist", "--distributed", "--dropout", "0.3"]);
    assert!(!o.status.success());
    let t = text(&o);
    assert!(t.contains("the ranks run different graphs (rank 0 and rank 1 differ"), "{t}");
    assert!(!t.contains("test_accuracy="), "{t}");
}

/// A rank killed mid-training ends the job within seconds, with a message naming the rank,
/// instead of leaving the other waiting in its next all-reduce.
#[test]
fn a_killed_rank_ends_the_job_and_is_named() {
    let mut child = Command::new("mpirun")
        .args(["-np", "2", "--oversubscribe", "--bind-to", "none", "--mca", "btl", "self,vader"])
        .arg(env!("CARGO_BIN_EXE_ferroflow"))
        .args(["mnist", "--distributed", "--intra-op-threads", "1", "--steps", "1000000"])
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Both ranks are training once mpirun has two children that have run for a while.
    let ranks = || -> Vec<String> {
        let o = Command::new("pgrep").args(["-P", &child.id().to_string()]).output().unwrap();
        String::from_utf8_lossy(&o.stdout).split_whitespace().map(str::to_string).collect()
    };
    let start = std::time::Instant::now();
    while ranks().len() < 2 {
        assert!(start.elapsed().as_secs() < 60, "the ranks did not start");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    std::thread::sleep(std::time::Duration::from_secs(3));
    let victim = ranks().pop().unwrap();
    assert!(Command::new("kill").args(["-9", &victim]).status().unwrap().success());
    let killed = std::time::Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        assert!(killed.elapsed().as_secs() < 30, "the job still runs 30 s after a rank was killed");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let o = child.wait_with_output().unwrap();
    assert!(!o.status.success());
    let t = text(&o);
    assert!(t.contains("process rank") && t.contains("exited on signal 9"), "{t}");
}

/// `text` (a GraphDef in text form) with the nodes named in `on_task_1` placed on
/// `/job:worker/task:1` (the rest default to task 0).
fn split(text: &str, on_task_1: &[&str]) -> String {
    let mut blocks: Vec<String> = text.split("node {").map(str::to_string).collect();
    for b in blocks.iter_mut().skip(1) {
        let name = b.split("name: \"").nth(1).and_then(|r| r.split('"').next()).unwrap_or("").to_string();
        if on_task_1.contains(&name.as_str()) {
            *b = b.replacen("\n  op:", "\n  device: \"/job:worker/task:1\"\n  op:", 1);
        }
    }
    blocks.join("node {")
}

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tf").join(name)
}

/// Graphs whose devices name two tasks run across two ranks (`ferroflow run` under mpirun:
/// each rank runs its task's partitions, the tensors between them travel as MPI messages)
/// and give TensorFlow's outputs: `what_runs` (as written), and the TensorFlow MLP fixture
/// (optimized for the whole step on every rank) with its first layer on task 1 and the
/// second on task 0. Rank 0 writes both tasks' partition graphs, step stats and profiles.
#[test]
fn a_graph_split_across_two_ranks_gives_tensorflows_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &[&str], &str); 2] = [
        ("seed_000", &["Const", "Const_1", "Add"], "Mul:0"),
        (
            "mlp",
            &[
                "x",
                "MatMul/ReadVariableOp/resource",
                "BiasAdd/ReadVariableOp/resource",
                "MatMul/ReadVariableOp",
                "MatMul",
                "BiasAdd/ReadVariableOp",
                "BiasAdd",
                "Relu",
            ],
            "Identity:0",
        ),
    ];
    for (name, task_1, fetch) in cases {
        let source = std::fs::read_to_string(fixture(&format!("{name}.pbtxt"))).unwrap();
        let graph = dir.path().join(format!("{name}.pbtxt"));
        std::fs::write(&graph, split(&source, task_1)).unwrap();
        let out = dir.path().join(format!("{name}.out.npz"));
        let mut args = vec!["run", graph.to_str().unwrap(), "--fetch", fetch, "--output", out.to_str().unwrap()];
        if name == "seed_000" {
            // Optimized, `what_runs` folds into one constant on task 0; as written, its Add on
            // task 1 feeds the Mul on task 0 across the ranks.
            args.push("--no-optimize");
        }
        let inputs = fixture(&format!("{name}.inputs.npz"));
        if inputs.exists() {
            args.extend(["--inputs", inputs.to_str().unwrap()]);
        }
        // What the step recorded on both tasks, gathered and written by rank 0.
        let (parts, logs) = (dir.path().join(format!("{name}.parts")), dir.path().join(format!("{name}.logs")));
        let (parts_arg, logs_arg) = (parts.to_str().unwrap(), logs.to_str().unwrap());
        args.extend(["--partition-graphs", parts_arg, "--run-metadata", logs_arg, "--profile", logs_arg]);
        let o = mpirun(2, &args);
        assert!(o.status.success(), "{name}: {}", text(&o));
        let got = ferroflow::tensor::npy::read_npz(&out).unwrap();
        let want = ferroflow::tensor::npy::read_npz(&fixture(&format!("{name}.expected.npz"))).unwrap();
        ferroflow::testing::compare(&got[0].1, &want[0].1, 1e-5, 1e-6).unwrap_or_else(|e| panic!("{name}: {e}"));
        check_recorded(&parts, &logs);
    }
}

/// Both tasks' partition graphs, step stats (in the event file's tagged RunMetadata) and
/// profile captures (a host each) were written.
fn check_recorded(parts: &Path, logs: &Path) {
    use ferroflow::proto::event::What;
    let task = |t: usize| format!("/job:worker/replica:0/task:{t}/device:CPU:0");
    for t in 0..2 {
        let file = parts.join("global_step_0").join(format!("{}.pbtxt", task(t).replace(['/', ':'], "_")));
        assert!(file.is_file(), "{} is missing", file.display());
    }
    let events = std::fs::read_dir(logs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("events.out.tfevents"))
        .expect("an event file");
    let meta = ferroflow::summary::read_events(&events)
        .unwrap()
        .into_iter()
        .find_map(|e| match e.what {
            Some(What::TaggedRunMetadata(t)) => Some(t.run_metadata),
            _ => None,
        })
        .expect("tagged run metadata");
    let meta: ferroflow::proto::RunMetadata = ferroflow::proto::decode(&meta, "RunMetadata").unwrap();
    let stats = meta.step_stats.expect("step stats");
    for t in 0..2 {
        let dev = stats.dev_stats.iter().find(|d| d.device == task(t));
        assert!(dev.is_some_and(|d| !d.node_stats.is_empty()), "no node stats of task {t}: {stats:?}");
    }
    assert_eq!(meta.partition_graphs.len(), 2);
    let run = std::fs::read_dir(logs.join("plugins/profile")).unwrap().next().unwrap().unwrap().path();
    let mut hosts: Vec<String> =
        std::fs::read_dir(run).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    hosts.sort();
    assert!(
        hosts.len() == 2 && hosts[0].ends_with("-rank0.xplane.pb") && hosts[1].ends_with("-rank1.xplane.pb"),
        "{hosts:?}"
    );
}

/// Ranks that run different steps of one graph (here: different fetches, through mpirun's
/// MPMD form) fail at the step's start on both ranks, naming the ranks, instead of waiting
/// on each other.
#[test]
fn ranks_running_different_steps_fail_naming_the_ranks() {
    let graph = fixture("seed_000.pbtxt");
    let g = graph.to_str().unwrap();
    let o = mpmd(&["run", g, "--fetch", "Mul:0"], &["run", g, "--fetch", "Add:0"]);
    assert!(!o.status.success());
    let t = text(&o);
    assert!(t.contains("the ranks run different steps (rank 0 and rank 1 differ"), "{t}");
}

/// A node of task 1 fails at run time (a Reshape of a fed tensor to the wrong size): rank 1
/// reports the node's error with its rank and ends the job, so rank 0, waiting for the
/// tensor, does not wait forever.
#[test]
fn an_error_on_rank_1_ends_the_step_on_both_ranks() {
    let dir = tempfile::tempdir().unwrap();
    let graph = dir.path().join("bad.pbtxt");
    let t1 = "device: \"/job:worker/task:1\"";
    std::fs::write(
        &graph,
        format!(
            "node {{ name: \"x\" op: \"Placeholder\" {t1} attr {{ key: \"dtype\" value {{ type: DT_FLOAT }} }} }}
node {{ name: \"shape\" op: \"Const\" {t1} attr {{ key: \"dtype\" value {{ type: DT_INT32 }} }}
  attr {{ key: \"value\" value {{ tensor {{ dtype: DT_INT32 tensor_shape {{ dim {{ size: 1 }} }} int_val: 7 }} }} }} }}
node {{ name: \"bad_reshape\" op: \"Reshape\" input: \"x\" input: \"shape\" {t1}
  attr {{ key: \"T\" value {{ type: DT_FLOAT }} }} attr {{ key: \"Tshape\" value {{ type: DT_INT32 }} }} }}
node {{ name: \"out\" op: \"Identity\" input: \"bad_reshape\" attr {{ key: \"T\" value {{ type: DT_FLOAT }} }} }}
"
        ),
    )
    .unwrap();
    let x = dir.path().join("x.npy");
    ferroflow::tensor::npy::write_npy(&x, &ferroflow::tensor::Tensor::from_vec(&[6], vec![1f32; 6]).unwrap()).unwrap();
    let feed = format!("x:0={}", x.display());
    let start = std::time::Instant::now();
    let o = mpirun(2, &["run", graph.to_str().unwrap(), "--feed", &feed, "--fetch", "out:0"]);
    assert!(!o.status.success());
    assert!(start.elapsed().as_secs() < 60);
    let t = text(&o);
    assert!(t.contains("error on rank 1 of 2: node 'bad_reshape' (Reshape)"), "{t}");
}
