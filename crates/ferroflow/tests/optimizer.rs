//! The graph optimizer: `what_runs`, node counts against TensorFlow's Grappler, Grappler's own
//! optimized graphs, and differential tests (optimized outputs bit-identical to unoptimized
//! ones) on every fixture, on each exact arithmetic rule, and on random graphs.
use std::path::PathBuf;

use ferroflow::ops::RawOps;
use ferroflow::optimize::{Item, MetaOptimizer, OptimizerOptions};
use ferroflow::prelude::*;
use ferroflow::tensor::npy;
use ferroflow::testing::{compare, read_manifest};

fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tf")
}

struct Case {
    name: String,
    graph: Graph,
    feeds: Vec<(String, Tensor)>,
    expected: Vec<(String, Tensor)>,
}

fn case(name: &str) -> Case {
    let dir = fixtures_dir();
    let ext = if name == "seed_000" { "pbtxt" } else { "pb" };
    let graph = ferroflow::load_graph(&dir.join(format!("{name}.{ext}"))).unwrap();
    let inputs = dir.join(format!("{name}.inputs.npz"));
    let feeds = if inputs.exists() { npy::read_npz(&inputs).unwrap() } else { vec![] };
    let expected = npy::read_npz(&dir.join(format!("{name}.expected.npz"))).unwrap();
    Case { name: name.to_string(), graph, feeds, expected }
}

fn all_cases() -> Vec<Case> {
    let mut names: Vec<String> =
        read_manifest(&fixtures_dir().join("MANIFEST")).unwrap().into_iter().map(|f| f.name).collect();
    names.push("seed_000".into());
    names.iter().map(|n| case(n)).collect()
}

fn item(c: &Case) -> Item {
    Item {
        feeds: c.feeds.iter().map(|(n, _)| n.clone()).collect(),
        fetches: c.expected.iter().map(|(n, _)| n.clone()).collect(),
        ..Default::default()
    }
}

fn run(graph: &Graph, feeds: &[(String, Tensor)], fetches: &[String], optimize: bool) -> Vec<Tensor> {
    let mut opts = SessionOptions::default().with_inter_op_threads(2).with_intra_op_threads(2);
    opts.optimizer.enabled = optimize;
    let sess = Session::new(graph.clone(), opts).unwrap();
    let feeds: Vec<(&str, Tensor)> = feeds.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let fetches: Vec<&str> = fetches.iter().map(String::as_str).collect();
    sess.run(&feeds, &fetches, &[]).unwrap_or_else(|e| panic!("optimize={optimize}: {e}"))
}

/// Same dtype, shape and bytes, except that a NaN matches any NaN: which operand's NaN a
/// binary op propagates (its sign and payload) is unspecified — LLVM treats `*` and `+` as
/// commutative and may swap operands in one kernel's loop and not another's.
fn assert_bit_identical(what: &str, got: &Tensor, want: &Tensor) {
    assert_eq!((got.dtype(), got.dims()), (want.dtype(), want.dims()), "{what}");
    let nan_bits = |t: &Tensor| -> Option<Vec<u64>> {
        match t.dtype() {
            DType::Float => Some(
                t.as_slice::<f32>()
                    .ok()?
                    .iter()
                    .map(|v| if v.is_nan() { u64::MAX } else { v.to_bits() as u64 })
                    .collect(),
            ),
            DType::Double => Some(
                t.as_slice::<f64>().ok()?.iter().map(|v| if v.is_nan() { u64::MAX } else { v.to_bits() }).collect(),
            ),
            _ => None,
        }
    };
    if let (Some(a), Some(b)) = (nan_bits(got), nan_bits(want)) {
        assert!(a == b, "{what}: optimized {} != unoptimized {}", got.preview(8), want.preview(8));
        return;
    }
    match (got.as_bytes(), want.as_bytes()) {
        (Ok(a), Ok(b)) => assert!(a == b, "{what}: optimized {} != unoptimized {}", got.preview(8), want.preview(8)),
        _ => assert_eq!(got, want, "{what}"),
    }
}

#[test]
fn what_runs_folds_to_a_const_named_mul_with_value_nine() {
    let (rust_graph, fetch) = ferroflow::workflows::what_runs::graph().unwrap();
    let tf_graph = ferroflow::load_graph(&fixtures_dir().join("seed_000.pbtxt")).unwrap();
    for (what, graph) in [("built in Rust", rust_graph), ("written by TensorFlow", tf_graph)] {
        let it = Item { fetches: vec![fetch.clone()], ..Default::default() };
        let opt = MetaOptimizer::new(OptimizerOptions::default()).optimize(&graph, &it).unwrap();
        let g = &opt.graph;
        assert_eq!(g.len(), 1, "{what}: {:?}", g.nodes().iter().map(|n| &n.name).collect::<Vec<_>>());
        let n = &g.nodes()[0];
        assert_eq!((n.name.as_str(), n.op.as_str()), ("Mul", "Const"), "{what}");
        let sess = Session::new(g.clone(), SessionOptions::default()).unwrap();
        assert_eq!(sess.run(&[], &["Mul:0"], &[]).unwrap()[0].scalar_value::<f32>().unwrap(), 9.0);
        // The report says which pass merged the two adds and which folded them.
        let r = &opt.report;
        assert_eq!(r.passes_touching("Add_1")[0].1, "common_subexpression_elimination", "{what}");
        let cse = r.passes.iter().find(|p| p.pass == "common_subexpression_elimination").unwrap();
        assert_eq!(cse.merged, vec![("Add_1".to_string(), "Add".to_string())]);
        let fold = r.passes.iter().find(|p| p.pass == "constant_folding").unwrap();
        assert_eq!(fold.folded, vec!["Add".to_string(), "Mul".to_string()]);
        assert!(r.details().contains("merged   Add_1 into Add"), "{}", r.details());
    }
}

/// `fixtures/tf/grappler/COUNTS`: node counts after TensorFlow's Grappler (written by
/// scripts/grappler_reference.py).
fn grappler_counts() -> Vec<(String, usize, usize)> {
    let text = std::fs::read_to_string(fixtures_dir().join("grappler/COUNTS")).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let p: Vec<&str> = l.split_whitespace().collect();
            (p[0].to_string(), p[1].parse().unwrap(), p[2].parse().unwrap())
        })
        .collect()
}

#[test]
fn optimized_node_counts_are_no_larger_than_grapplers() {
    let counts = grappler_counts();
    assert!(counts.len() >= 17, "every fixture has a Grappler count");
    println!("{:<18} {:>7} {:>9} {:>10}", "fixture", "nodes", "grappler", "ferroflow");
    let mut larger = vec![];
    for (name, before, grappler) in counts {
        let c = case(&name);
        assert_eq!(c.graph.len(), before, "{name}: COUNTS is stale (rerun scripts/grappler_reference.py)");
        let opt = MetaOptimizer::new(OptimizerOptions::default()).optimize(&c.graph, &item(&c)).unwrap();
        println!("{name:<18} {before:>7} {grappler:>9} {:>10}", opt.graph.len());
        if opt.graph.len() > grappler {
            larger.push(format!("{name}: {} > Grappler's {grappler}", opt.graph.len()));
        }
    }
    assert!(larger.is_empty(), "{larger:?}");
}

#[test]
fn grappler_optimized_graphs_run_and_match_tensorflow() {
    // TensorFlow's own optimized graphs (with _FusedMatMul, _FusedConv2D, ...) import and
    // run, with and without ferroflow's optimizer on top.
    for c in all_cases() {
        let g = ferroflow::load_graph(&fixtures_dir().join(format!("grappler/{}.pb", c.name))).unwrap();
        let fetches: Vec<String> = c.expected.iter().map(|(n, _)| n.clone()).collect();
        for optimize in [false, true] {
            let got = run(&g, &c.feeds, &fetches, optimize);
            for ((name, want), got) in c.expected.iter().zip(&got) {
                compare(got, want, 1e-5, 1e-6).unwrap_or_else(|e| panic!("{} {name}: {e}", c.name));
            }
        }
    }
}

#[test]
fn default_passes_are_bit_identical_on_every_fixture() {
    for c in all_cases() {
        let fetches: Vec<String> = c.expected.iter().map(|(n, _)| n.clone()).collect();
        let plain = run(&c.graph, &c.feeds, &fetches, false);
        let optimized = run(&c.graph, &c.feeds, &fetches, true);
        for ((name, a), b) in fetches.iter().zip(&optimized).zip(&plain) {
            assert_bit_identical(&format!("{} {name}", c.name), a, b);
        }
    }
}

#[test]
fn session_optimizes_by_default_and_hands_back_the_graph() {
    let c = case("mlp");
    let sess = Session::new(c.graph.clone(), SessionOptions::default()).unwrap();
    let plan = sess.plan(&["x:0"], &["Identity:0"], &[]).unwrap();
    let ops: Vec<&str> = plan.graph().nodes().iter().map(|n| n.op.as_str()).collect();
    assert!(ops.contains(&"_FusedMatMul"), "{ops:?}");
    assert!(plan.optimizer_report().unwrap().nodes_after < c.graph.len());
    let mut off = SessionOptions::default();
    off.optimizer.enabled = false;
    let sess = Session::new(c.graph.clone(), off).unwrap();
    let plan = sess.plan(&["x:0"], &["Identity:0"], &[]).unwrap();
    assert!(plan.optimizer_report().is_none());
    assert_eq!(plan.graph().len(), c.graph.len());
}

#[test]
fn fetching_an_intermediate_blocks_its_fusion_and_keeps_it_fetchable() {
    let c = case("mlp");
    let mut it = item(&c);
    it.fetches.push("BiasAdd:0".into());
    let opt = MetaOptimizer::new(OptimizerOptions::default()).optimize(&c.graph, &it).unwrap();
    assert!(opt.graph.find("BiasAdd").is_some());
    let fetches = it.fetches.clone();
    let a = run(&c.graph, &c.feeds, &fetches, true);
    let b = run(&c.graph, &c.feeds, &fetches, false);
    for (x, y) in a.iter().zip(&b) {
        assert_bit_identical("mlp with BiasAdd fetched", x, y);
    }
}

#[test]
fn fed_constants_are_not_folded() {
    // Feeding a Const's output replaces its value: nothing downstream may be folded.
    let (graph, fetch) = ferroflow::workflows::what_runs::graph().unwrap();
    let sess = Session::new(graph, SessionOptions::default()).unwrap();
    let got = sess.run(&[("Const:0", Tensor::scalar(5.0f32))], &[&fetch], &[]).unwrap();
    assert_eq!(got[0].scalar_value::<f32>().unwrap(), 49.0);
}

#[test]
fn bad_items_name_the_tensor() {
    let (graph, _) = ferroflow::workflows::what_runs::graph().unwrap();
    let it = Item { fetches: vec!["Nope:0".into()], ..Default::default() };
    let e = MetaOptimizer::new(OptimizerOptions::default()).optimize(&graph, &it).err().unwrap().to_string();
    assert!(e.contains("fetch 'Nope:0'") && e.contains("no node named 'Nope'"), "{e}");
    let it = Item { fetches: vec!["Mul:3".into()], ..Default::default() };
    let e = MetaOptimizer::new(OptimizerOptions::default()).optimize(&graph, &it).err().unwrap().to_string();
    assert!(e.contains("Mul:3"), "{e}");
    let it = Item { fetches: vec!["Mul:0".into()], targets: vec!["Gone".into()], ..Default::default() };
    let e = MetaOptimizer::new(OptimizerOptions::default()).optimize(&graph, &it).err().unwrap().to_string();
    assert!(e.contains("target 'Gone'"), "{e}");
}

#[test]
fn per_pass_dumps_and_time_budget() {
    let c = case("cnn");
    let mut dumps = vec![];
    let opt = MetaOptimizer::new(OptimizerOptions::default())
        .optimize_with_dump(&c.graph, &item(&c), &mut |round, pass, g| {
            dumps.push((round, pass.to_string(), g.len()));
            Ok(())
        })
        .unwrap();
    assert_eq!(dumps[0], (0, "original".to_string(), c.graph.len()));
    assert_eq!(dumps.len(), 1 + opt.report.passes.len());
    assert_eq!(dumps.last().unwrap().2, opt.graph.len());
    // A zero budget stops passes at their first check; the graph stays valid and runs.
    let opts = OptimizerOptions::default().with_pass_time_budget(std::time::Duration::ZERO);
    let opt = MetaOptimizer::new(opts).optimize(&c.graph, &item(&c)).unwrap();
    assert!(opt.report.passes.iter().any(|p| p.timed_out));
    let fetches: Vec<String> = c.expected.iter().map(|(n, _)| n.clone()).collect();
    let got = run(&opt.graph, &c.feeds, &fetches, false);
    for ((name, want), got) in c.expected.iter().zip(&got) {
        compare(got, want, 1e-5, 1e-6).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

/// Builds `f(x)` for a placeholder `x` of shape [2,3] with `build`, then checks that the
/// optimizer applied `rule` and that outputs are bit-identical on special values.
fn check_rule(rule: &str, build: impl Fn(&Scope, Output) -> Output) {
    let s = Scope::new();
    let x = s.with_name("x").placeholder(DType::Float, &Shape::known(&[2, 3])).unwrap();
    let y = build(&s, x);
    let y = s.with_name("y").unary("Sqrt", y).unwrap();
    let g = s.graph();
    let fetch = g.output_name(y);
    let it = Item { feeds: vec!["x:0".into()], fetches: vec![fetch.clone()], ..Default::default() };
    let opt = MetaOptimizer::new(OptimizerOptions::default()).optimize(&g, &it).unwrap();
    let applied: Vec<String> =
        opt.report.passes.iter().flat_map(|p| p.rewritten.iter().map(|(_, w)| w.clone())).collect();
    assert!(applied.iter().any(|w| w == rule), "{rule} not applied; got {applied:?}\n{}", opt.report.details());
    let special = [0.0f32, -0.0, 1.5, f32::INFINITY, f32::NEG_INFINITY, f32::NAN];
    let xv = Tensor::from_vec(&[2, 3], special.to_vec()).unwrap();
    let feeds = vec![("x:0".to_string(), xv)];
    let a = run(&g, &feeds, std::slice::from_ref(&fetch), true);
    let b = run(&g, &feeds, std::slice::from_ref(&fetch), false);
    assert_bit_identical(rule, &a[0], &b[0]);
}

#[test]
fn each_exact_arithmetic_rule_fires_and_is_bit_identical() {
    let ones = |s: &Scope| s.constant(&Tensor::from_vec(&[3], vec![1.0f32; 3]).unwrap()).unwrap();
    check_rule("Mul(x, 1) -> x", |s, x| s.mul(x, ones(s)).unwrap());
    check_rule("Mul(1, x) -> x", |s, x| s.mul(s.scalar(1.0f32).unwrap(), x).unwrap());
    check_rule("RealDiv(x, 1) -> x", |s, x| s.real_div(x, s.scalar(1.0f32).unwrap()).unwrap());
    check_rule("AddV2(x, -0) -> x", |s, x| s.add_v2(x, s.scalar(-0.0f32).unwrap()).unwrap());
    check_rule("Sub(x, +0) -> x", |s, x| s.sub(x, s.scalar(0.0f32).unwrap()).unwrap());
    check_rule("Neg(Neg(x)) -> x", |s, x| s.unary("Neg", s.unary("Neg", x).unwrap()).unwrap());
    check_rule("Cast to the same type -> x", |s, x| s.cast(x, DType::Float).unwrap());
    check_rule("Reshape(Reshape(x, s1), s2) -> Reshape(x, s2)", |s, x| {
        let r = s.reshape(x, &[3, 2]).unwrap();
        s.reshape(r, &[2, 3]).unwrap()
    });
    check_rule("Reshape to the same shape -> x", |s, x| s.reshape(x, &[2, 3]).unwrap());
    let transpose = |s: &Scope, x: Output, p: &[i32]| {
        let perm = s.constant_from(&[p.len()], p).unwrap();
        let mut a = ferroflow::graph::Attrs::new();
        a.insert("T".into(), ferroflow::proto::AttrValue { value: Some(ferroflow::proto::attr_value::Value::Type(1)) });
        a.insert(
            "Tperm".into(),
            ferroflow::proto::AttrValue { value: Some(ferroflow::proto::attr_value::Value::Type(3)) },
        );
        Output { node: s.add_op("Transpose", "Transpose", &[x, perm], &[], a).unwrap(), index: 0 }
    };
    check_rule("Transpose(Transpose(x, p), inverse of p) -> x", |s, x| {
        let t = transpose(s, x, &[1, 0]);
        transpose(s, t, &[1, 0])
    });
    check_rule("identity Transpose -> x", |s, x| transpose(s, x, &[0, 1]));
    let select = |s: &Scope, x: Output, c: bool| {
        let cond = s.scalar(c).unwrap();
        let other = s.unary("Neg", x).unwrap();
        let mut a = ferroflow::graph::Attrs::new();
        a.insert("T".into(), ferroflow::proto::AttrValue { value: Some(ferroflow::proto::attr_value::Value::Type(1)) });
        Output { node: s.add_op("SelectV2", "Select", &[cond, x, other], &[], a).unwrap(), index: 0 }
    };
    check_rule("Select(true, t, e) -> t", |s, x| select(s, x, true));
    check_rule("Select(false, t, e) -> e", |s, x| select(s, x, false));
}

#[test]
fn inexact_rules_only_with_their_option() {
    let s = Scope::new();
    let x = s.with_name("x").placeholder(DType::Float, &Shape::known(&[4])).unwrap();
    let y = s.real_div(x, s.scalar(3.0f32).unwrap()).unwrap();
    let g = s.graph();
    let it = Item { feeds: vec!["x:0".into()], fetches: vec![g.output_name(y)], ..Default::default() };
    let exact = MetaOptimizer::new(OptimizerOptions::default()).optimize(&g, &it).unwrap();
    assert!(exact.graph.nodes().iter().any(|n| n.op == "RealDiv"), "x / 3 is kept by default");
    let opts = OptimizerOptions::default().with_inexact_float_rewrites(true);
    let fast = MetaOptimizer::new(opts).optimize(&g, &it).unwrap();
    assert!(!fast.graph.nodes().iter().any(|n| n.op == "RealDiv"));
    assert!(fast.report.details().contains("INEXACT: x / c -> x * (1/c)"));
}

#[test]
fn elementwise_chains_fuse_into_one_pass_with_identical_results() {
    let s = Scope::new();
    let x = s.with_name("x").placeholder(DType::Float, &Shape::new(vec![None, Some(64)])).unwrap();
    let b = s.constant(&Tensor::from_vec(&[64], (0..64).map(|i| i as f32 * 0.01).collect()).unwrap()).unwrap();
    let h = s.add_v2(x, b).unwrap();
    let h = s.unary("Tanh", h).unwrap();
    let h = s.mul(h, s.scalar(0.5f32).unwrap()).unwrap();
    let h = s.unary("Sigmoid", h).unwrap();
    let y = s.sub(h, x).unwrap();
    let g = s.graph();
    let fetch = g.output_name(y);
    let it = Item { feeds: vec!["x:0".into()], fetches: vec![fetch.clone()], ..Default::default() };
    let opt = MetaOptimizer::new(OptimizerOptions::default()).optimize(&g, &it).unwrap();
    let fused: Vec<_> = opt.graph.nodes().iter().filter(|n| n.op == "_FusedElementwise").collect();
    assert_eq!(fused.len(), 1, "{}", opt.report.details());
    // [3,64] broadcasts the bias (general path); [1000,64] is large; [5,1]... shapes vary per run.
    for rows in [3usize, 1000] {
        let v: Vec<f32> = (0..rows * 64).map(|i| ((i * 7919) % 1000) as f32 / 100.0 - 5.0).collect();
        let feeds = vec![("x:0".to_string(), Tensor::from_vec(&[rows, 64], v).unwrap())];
        let a = run(&g, &feeds, std::slice::from_ref(&fetch), true);
        let b = run(&g, &feeds, std::slice::from_ref(&fetch), false);
        assert_bit_identical("fused chain", &a[0], &b[0]);
    }
}

mod random_graphs {
    use super::*;
    use proptest::prelude::*;

    /// One step of a random graph: an op kind and operands picked among earlier values.
    #[derive(Clone, Debug)]
    struct Step {
        kind: u8,
        a: usize,
        b: usize,
    }

    fn build(steps: &[Step], consts: &[f32]) -> (Graph, Vec<String>) {
        let s = Scope::new();
        let x = s.with_name("x").placeholder(DType::Float, &Shape::new(vec![None, Some(4)])).unwrap();
        let mut vals = vec![x];
        let vec4 = |k: usize| {
            let v: Vec<f32> = (0..4).map(|i| consts[(k + i) % consts.len()]).collect();
            s.constant(&Tensor::from_vec(&[4], v).unwrap()).unwrap()
        };
        let w = s
            .constant(&Tensor::from_vec(&[4, 4], (0..16).map(|i| consts[i % consts.len()]).collect()).unwrap())
            .unwrap();
        for (i, st) in steps.iter().enumerate() {
            let a = vals[st.a % vals.len()];
            let b = vals[st.b % vals.len()];
            let v = match st.kind % 16 {
                0 => s.add_v2(a, b),
                1 => s.sub(a, vec4(i)),
                2 => s.mul(a, b),
                3 => s.real_div(a, vec4(i + 1)),
                4 => s.maximum(a, b),
                5 => s.unary("Relu", a),
                6 => s.unary("Tanh", a),
                7 => s.unary("Neg", a),
                8 => s.identity(a),
                9 => s.mul(a, s.scalar(1.0f32).unwrap()),
                10 => s.add_v2(a, s.scalar(-0.0f32).unwrap()),
                11 => s.bias_add(s.matmul(a, w, false, false).unwrap(), vec4(i)),
                12 => s.relu(s.bias_add(s.matmul(a, w, false, true).unwrap(), vec4(i + 2)).unwrap()),
                13 => s.add_v2(a, s.add_v2(vec4(i), vec4(i + 3)).unwrap()),
                14 => s.unary("Sigmoid", a),
                _ => s.unary("Square", a),
            }
            .unwrap();
            vals.push(v);
        }
        let g = s.graph();
        // Fetch the last value and one in the middle (fetched intermediates block fusion).
        let mut fetches = vec![g.output_name(*vals.last().unwrap())];
        let mid = g.output_name(vals[vals.len() / 2]);
        if !fetches.contains(&mid) {
            fetches.push(mid);
        }
        (g, fetches)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]
        #[test]
        fn optimized_outputs_are_bit_identical(
            steps in prop::collection::vec((0u8..16, 0usize..64, 0usize..64).prop_map(|(kind, a, b)| Step { kind, a, b }), 1..24),
            consts in prop::collection::vec(prop_oneof![-3.0f32..3.0, Just(0.0), Just(-0.0), Just(1.0)], 4..8),
            xs in prop::collection::vec(prop_oneof![-4.0f32..4.0, Just(0.0), Just(-0.0), Just(f32::INFINITY), Just(f32::NAN)], 12),
        ) {
            let (g, fetches) = build(&steps, &consts);
            let feeds = vec![("x:0".to_string(), Tensor::from_vec(&[3, 4], xs).unwrap())];
            let a = run(&g, &feeds, &fetches, true);
            let b = run(&g, &feeds, &fetches, false);
            for ((name, x), y) in fetches.iter().zip(&a).zip(&b) {
                assert_bit_identical(name, x, y);
            }
        }
    }
}

/// A pass that breaks the graph (gives a node an input of the wrong type).
struct Breaker;

impl ferroflow::optimize::Pass for Breaker {
    fn name(&self) -> &'static str {
        "breaker"
    }
    fn run(
        &self,
        graph: &mut Graph,
        _: &mut ferroflow::optimize::PassContext,
    ) -> Result<(), ferroflow::optimize::OptimizeError> {
        let id = graph.find("Mul").expect("what_runs has Mul");
        graph.node_mut(id).inputs.pop();
        Ok(())
    }
}

#[test]
fn a_failing_pass_is_switched_off_and_reported_or_fails_when_asked() {
    let (graph, fetch) = ferroflow::workflows::what_runs::graph().unwrap();
    let it = Item { fetches: vec![fetch], ..Default::default() };
    let passes = || {
        let mut p = ferroflow::optimize::default_passes();
        p.insert(1, Box::new(Breaker));
        p
    };
    let opts = OptimizerOptions::default().with_fail_on_pass_error(false);
    let opt = MetaOptimizer::with_passes(passes(), opts).optimize(&graph, &it).unwrap();
    let failed: Vec<_> = opt.report.passes.iter().filter(|p| p.error.is_some()).collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].pass, "breaker");
    assert!(failed[0].error.as_ref().unwrap().contains("Mul"), "{:?}", failed[0].error);
    assert!(opt.report.table().contains("FAILED"));
    // The other passes still ran: `what_runs` is one constant.
    assert_eq!(opt.graph.len(), 1);
    let opts = OptimizerOptions::default().with_fail_on_pass_error(true);
    let e = MetaOptimizer::with_passes(passes(), opts).optimize(&graph, &it).err().unwrap().to_string();
    assert!(e.contains("optimizer pass 'breaker' failed"), "{e}");
}

#[test]
fn constant_folding_never_builds_constants_over_its_cap() {
    // Fill([1 << 20, 1 << 10], 1.0) would be 4 GiB: left for run time (which a user may not
    // even reach), and the optimizer must not allocate it.
    let s = Scope::new();
    let dims = s.constant_from(&[2], &[1i32 << 20, 1 << 10]).unwrap();
    let one = s.scalar(1.0f32).unwrap();
    let mut a = ferroflow::graph::Attrs::new();
    a.insert("T".into(), ferroflow::proto::AttrValue { value: Some(ferroflow::proto::attr_value::Value::Type(1)) });
    a.insert(
        "index_type".into(),
        ferroflow::proto::AttrValue { value: Some(ferroflow::proto::attr_value::Value::Type(3)) },
    );
    let fill = s.add_op("Fill", "Fill", &[dims, one], &[], a).unwrap();
    let g = s.graph();
    let it = Item { fetches: vec![format!("{}:0", g.node(fill).name)], ..Default::default() };
    let opt = MetaOptimizer::new(OptimizerOptions::default()).optimize(&g, &it).unwrap();
    assert_eq!(opt.graph.node(opt.graph.find("Fill").unwrap()).op, "Fill");
}

#[test]
fn colocation_with_removed_nodes_is_dropped() {
    // TensorFlow's gradient nodes are colocated (`_class: loc:@MatMul_1`) with forward nodes
    // that fusion removes; the optimized graph must not name them (TensorFlow rejects it).
    let c = case("gradients");
    let opt = MetaOptimizer::new(OptimizerOptions::default()).optimize(&c.graph, &item(&c)).unwrap();
    for n in opt.graph.nodes() {
        if let Some(ferroflow::proto::attr_value::Value::List(l)) = n.attrs.get("_class").and_then(|a| a.value.as_ref())
        {
            for s in &l.s {
                let name = String::from_utf8_lossy(s);
                let target = name.strip_prefix("loc:@").unwrap();
                assert!(opt.graph.find(target).is_some(), "{} is colocated with removed {target}", n.name);
            }
        }
    }
}

#[test]
fn long_forwarding_chains_optimize_in_linear_time() {
    // 200,000 Identity nodes in a row: pruning bypasses them all. Following the chain from
    // every consumer was quadratic (a 20,000-node chain took 20 s, 200,000 minutes); with
    // path compression the whole step, optimizer on, takes about a second in release.
    let n = 200_000;
    let s = Scope::new();
    let mut v = s.with_name("x").placeholder(DType::Float, &Shape::scalar()).unwrap();
    for _ in 0..n {
        v = s.identity(v).unwrap();
    }
    let g = s.graph();
    let fetch = g.output_name(v);
    let start = std::time::Instant::now();
    let sess = Session::new(g, SessionOptions::default()).unwrap();
    let plan = sess.plan(&["x:0"], &[&fetch], &[]).unwrap();
    assert_eq!(plan.graph().len(), 2, "the chain is bypassed: x and the fetched node remain");
    let out = sess.run_plan(&plan, &[Tensor::scalar(3.0f32)]).unwrap();
    assert_eq!(out[0].scalar_value::<f32>().unwrap(), 3.0);
    eprintln!("{n}-node Identity chain: optimized and ran in {:?}", start.elapsed());
}

/// A zero `Pad` of H and W before a `VALID` convolution folds into the convolution's explicit
/// padding (Keras' MobileNetV2, EfficientNet and ResNet50 pad this way), bit-identical to the
/// unfolded graph, for `DepthwiseConv2dNative` and `Conv2D`, with a constant filter and with
/// one fed at run time (a variable's value in a training graph), finite or holding an
/// infinity (then the kernel pads the input itself: TensorFlow's `0 * inf` is NaN, not the
/// zero a skipped tap contributes).
#[test]
fn a_zero_pad_folds_into_the_following_convolution_exactly() {
    use ferroflow::proto::attr;
    for op in ["DepthwiseConv2dNative", "Conv2D"] {
        for (fed, finite) in [(false, true), (true, true), (false, false), (true, false)] {
            let s = Scope::new();
            let x =
                s.with_name("x").placeholder(DType::Float, &Shape::new(vec![None, Some(9), Some(8), Some(4)])).unwrap();
            let pads = s.constant(&Tensor::from_vec(&[4, 2], vec![0i32, 0, 1, 1, 0, 1, 0, 0]).unwrap()).unwrap();
            let mut fv: Vec<f32> =
                (0..36 * if op == "Conv2D" { 3 } else { 1 }).map(|i| (i % 7) as f32 * 0.25 - 0.6).collect();
            if !finite {
                fv[5] = f32::INFINITY;
            }
            let fdims: &[usize] = if op == "Conv2D" { &[3, 3, 4, 3] } else { &[3, 3, 4, 1] };
            let filter = Tensor::from_vec(fdims, fv).unwrap();
            let f = match fed {
                true => s.with_name("f").placeholder(DType::Float, &Shape::unknown()).unwrap(),
                false => s.constant(&filter).unwrap(),
            };
            let mut a = ferroflow::graph::Attrs::new();
            a.insert("T".into(), attr::dtype(DType::Float));
            let padded = Output { node: s.add_op("Pad", "pad", &[x, pads], &[], a.clone()).unwrap(), index: 0 };
            a.insert("strides".into(), attr::ints(&[1, 2, 2, 1]));
            a.insert("padding".into(), attr::string("VALID"));
            let y = Output { node: s.add_op(op, "conv", &[padded, f], &[], a).unwrap(), index: 0 };
            let g = s.graph();
            let fetch = g.output_name(y);
            let mut feed_names = vec!["x:0".to_string()];
            if fed {
                feed_names.push("f:0".into());
            }
            let it = Item { feeds: feed_names, fetches: vec![fetch.clone()], ..Default::default() };
            let opt = MetaOptimizer::new(OptimizerOptions::default()).optimize(&g, &it).unwrap();
            let what = format!("{op} (fed filter: {fed}, finite: {finite})");
            assert!(!opt.graph.nodes().iter().any(|n| n.op == "Pad"), "{what}:\n{}", opt.report.details());
            let v: Vec<f32> = (0..2 * 9 * 8 * 4).map(|i| ((i * 7919) % 1000) as f32 / 100.0 - 5.0).collect();
            let mut feeds = vec![("x:0".to_string(), Tensor::from_vec(&[2, 9, 8, 4], v).unwrap())];
            if fed {
                feeds.push(("f:0".to_string(), filter));
            }
            let a = run(&g, &feeds, std::slice::from_ref(&fetch), true);
            let b = run(&g, &feeds, std::slice::from_ref(&fetch), false);
            assert_eq!(a[0].as_slice::<f32>().unwrap().iter().any(|v| v.is_nan()), !finite, "{what}");
            assert_bit_identical(&what, &a[0], &b[0]);
        }
    }
}

/// A constant vector `[a, a + b, a + 2b, ...]` of `k` floats.
fn test_vector(s: &Scope, k: usize, a: f32, b: f32) -> Output {
    s.constant(&Tensor::from_vec(&[k], (0..k).map(|i| a + i as f32 * b).collect()).unwrap()).unwrap()
}

/// A `SAME` NHWC `Conv2D` of a constant `kh×kh×c×k` filter (values in [-0.55, 0.55], varied by
/// `seed`).
fn test_conv2d(
    s: &Scope,
    name: &str,
    input: Output,
    (kh, c, k): (usize, usize, usize),
    stride: i64,
    seed: usize,
) -> Output {
    use ferroflow::proto::attr;
    let fv: Vec<f32> = (0..kh * kh * c * k).map(|i| ((i * 37 + seed) % 23) as f32 * 0.05 - 0.55).collect();
    let f = s.constant(&Tensor::from_vec(&[kh, kh, c, k], fv).unwrap()).unwrap();
    let mut a = ferroflow::graph::Attrs::new();
    a.insert("T".into(), attr::dtype(DType::Float));
    a.insert("strides".into(), attr::ints(&[1, stride, stride, 1]));
    a.insert("padding".into(), attr::string("SAME"));
    Output { node: s.add_op("Conv2D", name, &[input, f], &[], a).unwrap(), index: 0 }
}

/// ResNet's first block of a stage: two convolutions, each with a frozen BatchNormalization
/// (`Mul`, `AddV2`), joined by `AddV2` and `Relu`. Each convolution takes its own
/// BatchNormalization as its epilogue and one of them the join, whose program is then a chain
/// (every instruction after the first reads the one before): two `_FusedConv2DElementwise`,
/// no `_FusedElementwise` left, bit-identical to the unfused graph.
#[test]
fn two_convolution_branches_joined_each_fuse_their_own_chain() {
    let s = Scope::new();
    let c = 8;
    let x = s.with_name("x").placeholder(DType::Float, &Shape::new(vec![None, Some(6), Some(5), Some(c)])).unwrap();
    let conv_bn = |name: &str, input: Output, kh: usize, k: usize, seed: usize| {
        let y = test_conv2d(&s, name, input, (kh, c, k), 1, seed);
        s.add_v2(s.mul(y, test_vector(&s, k, 0.5 + seed as f32 * 0.1, 0.1)).unwrap(), test_vector(&s, k, -0.7, 0.3))
            .unwrap()
    };
    let shortcut = conv_bn("shortcut", x, 1, 16, 1);
    let main = conv_bn("main", x, 3, 16, 2);
    let y = s.unary("Relu", s.add_v2(shortcut, main).unwrap()).unwrap();
    let g = s.graph();
    let fetch = g.output_name(y);
    let it = Item { feeds: vec!["x:0".into()], fetches: vec![fetch.clone()], ..Default::default() };
    let opt = MetaOptimizer::new(OptimizerOptions::default()).optimize(&g, &it).unwrap();
    let fused: Vec<&ferroflow::graph::Node> =
        opt.graph.nodes().iter().filter(|n| n.op == "_FusedConv2DElementwise").collect();
    let ops: Vec<&str> = opt.graph.nodes().iter().map(|n| n.op.as_str()).collect();
    assert_eq!(fused.len(), 2, "{ops:?}\n{}", opt.report.details());
    assert!(!ops.iter().any(|o| ["Conv2D", "_FusedElementwise"].contains(o)), "{ops:?}");
    for n in fused {
        let program: Vec<String> = match n.attrs.get("program").and_then(|a| a.value.as_ref()) {
            Some(ferroflow::proto::attr_value::Value::List(l)) => {
                l.s.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect()
            }
            _ => panic!("{} has no program", n.name),
        };
        for (i, line) in program.iter().enumerate().skip(1) {
            assert!(
                line.split_whitespace().any(|w| w == format!("r{}", i - 1)),
                "{}: {program:?} is not a chain",
                n.name
            );
        }
    }
    for batch in [1, 2] {
        let v: Vec<f32> = (0..batch * 6 * 5 * c).map(|i| ((i * 7919) % 1000) as f32 / 200.0 - 2.5).collect();
        let feeds = vec![("x:0".to_string(), Tensor::from_vec(&[batch, 6, 5, c], v).unwrap())];
        let a = run(&g, &feeds, std::slice::from_ref(&fetch), true);
        let b = run(&g, &feeds, std::slice::from_ref(&fetch), false);
        assert_bit_identical("two convolution branches joined", &a[0], &b[0]);
    }
}

/// A depthwise convolution followed by a frozen BatchNormalization and Relu6 (per-channel
/// `Mul` and `AddV2`, as Keras' MobileNetV2 freezes) fuses into
/// `_FusedDepthwiseConv2dElementwise`, bit-identical to the unfused graph, with a channel
/// multiplier of 1 (the row-by-row path) and of 2 (the general kernel, then the program).
#[test]
fn depthwise_convolution_and_its_batch_norm_fuse_exactly() {
    use ferroflow::proto::attr;
    for m in [1usize, 2] {
        let s = Scope::new();
        let x = s.with_name("x").placeholder(DType::Float, &Shape::new(vec![None, Some(7), Some(6), Some(5)])).unwrap();
        let fv: Vec<f32> = (0..9 * 5 * m).map(|i| (i % 11) as f32 * 0.2 - 1.0).collect();
        let f = s.constant(&Tensor::from_vec(&[3, 3, 5, m], fv).unwrap()).unwrap();
        let mut a = ferroflow::graph::Attrs::new();
        a.insert("T".into(), attr::dtype(DType::Float));
        a.insert("strides".into(), attr::ints(&[1, 1, 1, 1]));
        a.insert("padding".into(), attr::string("SAME"));
        let y = Output { node: s.add_op("DepthwiseConv2dNative", "dw", &[x, f], &[], a).unwrap(), index: 0 };
        let c = 5 * m;
        let scale =
            s.constant(&Tensor::from_vec(&[c], (0..c).map(|i| 0.5 + i as f32 * 0.1).collect()).unwrap()).unwrap();
        let shift =
            s.constant(&Tensor::from_vec(&[c], (0..c).map(|i| i as f32 * 0.3 - 0.7).collect()).unwrap()).unwrap();
        let y = s.add_v2(s.mul(y, scale).unwrap(), shift).unwrap();
        let y = s.unary("Relu6", y).unwrap();
        let g = s.graph();
        let fetch = g.output_name(y);
        let it = Item { feeds: vec!["x:0".into()], fetches: vec![fetch.clone()], ..Default::default() };
        let opt = MetaOptimizer::new(OptimizerOptions::default()).optimize(&g, &it).unwrap();
        let ops: Vec<&str> = opt.graph.nodes().iter().map(|n| n.op.as_str()).collect();
        assert!(ops.contains(&"_FusedDepthwiseConv2dElementwise"), "m {m}: {ops:?}\n{}", opt.report.details());
        assert!(!ops.contains(&"DepthwiseConv2dNative"), "m {m}: {ops:?}");
        let v: Vec<f32> = (0..3 * 7 * 6 * 5).map(|i| ((i * 7919) % 1000) as f32 / 100.0 - 5.0).collect();
        let feeds = vec![("x:0".to_string(), Tensor::from_vec(&[3, 7, 6, 5], v).unwrap())];
        let a = run(&g, &feeds, std::slice::from_ref(&fetch), true);
        let b = run(&g, &feeds, std::slice::from_ref(&fetch), false);
        assert_bit_identical("depthwise + batch norm + relu6", &a[0], &b[0]);
    }
}

/// Every shape class of a convolution's epilogue operand, on both sides of the `Mul` and for
/// `Conv2D` and `DepthwiseConv2dNative`: a scalar, `[1]`, `[C]`, `[1, 1, 1, C]`, a per-image
/// `[N, 1, 1, C]`, the output's own shape with the batch unknown or 1, lower ranks (`[H, W, C]`,
/// `[W, C]`, `[H, 1, C]`), an unknown shape, and operands that *grow* the output: the
/// squeeze-and-excite multiply of MobileNetV3, whose convolution runs on a pooled `[N, 1, 1, C]`
/// and whose other side is the full `[N, H, W, C]`, and a rank-5 operand. The optimized graph
/// loads (its shapes infer), the fused node never changes the output's shape, and the results
/// are bit-identical to the unoptimized graph's.
#[test]
fn convolution_epilogues_with_operands_of_every_shape_class_are_exact() {
    use ferroflow::ops::attrs;
    use ferroflow::proto::attr;
    let (h, w, c) = (6usize, 5usize, 4usize);
    let n = 2usize;
    let full = vec![None, Some(h), Some(w), Some(c)];
    // (operand's static shape, its fed shape, whether the convolution runs on the pooled 1x1 input)
    type ShapeCase = (Option<Vec<Option<usize>>>, Vec<usize>, bool);
    let cases: Vec<ShapeCase> = vec![
        (Some(vec![]), vec![], false),
        (Some(vec![Some(1)]), vec![1], false),
        (Some(vec![Some(c)]), vec![c], false),
        (Some(vec![Some(1), Some(1), Some(1), Some(c)]), vec![1, 1, 1, c], false),
        (Some(vec![None, Some(1), Some(1), Some(c)]), vec![n, 1, 1, c], false),
        (Some(full.clone()), vec![n, h, w, c], false),
        (Some(vec![Some(1), Some(h), Some(w), Some(c)]), vec![1, h, w, c], false),
        (Some(vec![Some(h), Some(w), Some(c)]), vec![h, w, c], false),
        (Some(vec![Some(w), Some(c)]), vec![w, c], false),
        (Some(vec![Some(h), Some(1), Some(c)]), vec![h, 1, c], false),
        (None, vec![n, h, w, c], false),
        (Some(full.clone()), vec![n, h, w, c], true),
        (Some(vec![Some(1), Some(h), Some(w), Some(c)]), vec![1, h, w, c], true),
        (Some(vec![Some(c)]), vec![c], true),
        (Some(vec![Some(3), Some(1), Some(1), Some(1), Some(c)]), vec![3, 1, 1, 1, c], false),
    ];
    for depthwise in [false, true] {
        for (k, (operand, fed, pooled)) in cases.iter().enumerate() {
            for operand_first in [false, true] {
                let what = format!(
                    "depthwise {depthwise}, case {k} (operand {operand:?}, pooled {pooled}, first {operand_first})"
                );
                let s = Scope::new();
                let x = s.with_name("x").placeholder(DType::Float, &Shape::new(full.clone())).unwrap();
                let shape = operand.clone().map_or_else(Shape::unknown, Shape::new);
                let z = s.with_name("z").placeholder(DType::Float, &shape).unwrap();
                let input = if *pooled {
                    let axes = s.constant(&Tensor::from_vec(&[2], vec![1i32, 2]).unwrap()).unwrap();
                    s.mean_with(x, axes, attrs::Mean::new().keep_dims(true)).unwrap()
                } else {
                    x
                };
                let y = if depthwise {
                    let fv: Vec<f32> = (0..9 * c).map(|i| (i % 11) as f32 * 0.2 - 1.0).collect();
                    let f = s.constant(&Tensor::from_vec(&[3, 3, c, 1], fv).unwrap()).unwrap();
                    let mut a = ferroflow::graph::Attrs::new();
                    a.insert("T".into(), attr::dtype(DType::Float));
                    a.insert("strides".into(), attr::ints(&[1, 1, 1, 1]));
                    a.insert("padding".into(), attr::string("SAME"));
                    Output { node: s.add_op("DepthwiseConv2dNative", "dw", &[input, f], &[], a).unwrap(), index: 0 }
                } else {
                    test_conv2d(&s, "conv", input, (1, c, c), 1, 3)
                };
                let y = s.add_v2(y, test_vector(&s, c, 0.1, 0.05)).unwrap();
                let y = if operand_first { s.mul(z, y) } else { s.mul(y, z) }.unwrap();
                let y = s.unary("Relu", y).unwrap();
                let g = s.graph();
                let fetch = g.output_name(y);
                let it = Item {
                    feeds: vec!["x:0".into(), "z:0".into()],
                    fetches: vec![fetch.clone()],
                    ..Default::default()
                };
                let opt = MetaOptimizer::new(OptimizerOptions::default()).optimize(&g, &it).unwrap();
                let shapes = ferroflow::ops::infer_shapes(&opt.graph).unwrap_or_else(|e| panic!("{what}: {e}"));
                for (id, node) in opt.graph.nodes().iter().enumerate() {
                    if node.op.ends_with("Elementwise") && node.op.starts_with("_FusedConv")
                        || node.op == "_FusedDepthwiseConv2dElementwise"
                    {
                        let conv_out = if *pooled { vec![None, Some(1), Some(1), Some(c)] } else { full.clone() };
                        assert_eq!(
                            shapes[id][0].dims(),
                            Some(&conv_out[..]),
                            "{what}: {} changes the output's shape: {:?}\n{}",
                            node.name,
                            node,
                            opt.report.details()
                        );
                    }
                }
                let xv: Vec<f32> = (0..n * h * w * c).map(|i| ((i * 7919) % 1000) as f32 / 200.0 - 2.5).collect();
                let zv: Vec<f32> = (0..fed.iter().product()).map(|i| ((i * 31) % 17) as f32 * 0.125 - 1.0).collect();
                let feeds = vec![
                    ("x:0".to_string(), Tensor::from_vec(&[n, h, w, c], xv).unwrap()),
                    ("z:0".to_string(), Tensor::from_vec(fed, zv).unwrap()),
                ];
                let a = run(&g, &feeds, std::slice::from_ref(&fetch), true);
                let b = run(&g, &feeds, std::slice::from_ref(&fetch), false);
                assert_bit_identical(&what, &a[0], &b[0]);
            }
        }
    }
}

/// A ResNet bottleneck's tail: `Conv2D + BiasAdd` (fused first into `_FusedConv2D`), a frozen
/// BatchNormalization (per-channel `Mul`, `AddV2`), the residual `AddV2` with the shortcut as
/// its *first* operand, and `Relu` fuse into one `_FusedConv2DElementwise` (the bias, then the
/// program, on each block of output rows); a 1×1 `Conv2D` with its BatchNormalization and
/// `Relu6` too. Bit-identical to the unfused graph, through the Winograd path (3×3, stride 1,
/// 16 channels; batch 3's 60 tiles run phase by phase on 2 threads) and im2col (batch 1's 20
/// tiles), the pointwise path and a strided im2col one; odd spatial sizes leave partial
/// Winograd tiles.
#[test]
fn convolution_batch_norm_and_residual_join_fuse_exactly() {
    use ferroflow::proto::attr;
    let s = Scope::new();
    let c = 16;
    let x = s.with_name("x").placeholder(DType::Float, &Shape::new(vec![None, Some(9), Some(7), Some(c)])).unwrap();
    let vector = |k: usize, a: f32, b: f32| test_vector(&s, k, a, b);
    let conv = |name: &str, input: Output, kh: usize, stride: i64, k: usize| {
        test_conv2d(&s, name, input, (kh, c, k), stride, 0)
    };
    // 3×3 + bias + batch norm, residual join (shortcut first), relu.
    let y = conv("conv3", x, 3, 1, c);
    let mut a = ferroflow::graph::Attrs::new();
    a.insert("T".into(), attr::dtype(DType::Float));
    let y = Output { node: s.add_op("BiasAdd", "bias", &[y, vector(c, -0.2, 0.03)], &[], a).unwrap(), index: 0 };
    let y = s.add_v2(s.mul(y, vector(c, 0.5, 0.1)).unwrap(), vector(c, -0.7, 0.3)).unwrap();
    let y = s.unary("Relu", s.add_v2(x, y).unwrap()).unwrap();
    // 1×1 + batch norm + relu6, then a strided 3×3 + batch norm.
    let z = conv("conv1", y, 1, 1, c);
    let z =
        s.unary("Relu6", s.add_v2(s.mul(z, vector(c, 0.9, -0.02)).unwrap(), vector(c, 0.1, 0.05)).unwrap()).unwrap();
    let z = conv("conv3s2", z, 3, 2, 8);
    let z = s.add_v2(s.mul(z, vector(8, 1.1, 0.01)).unwrap(), vector(8, 0.0, 0.2)).unwrap();
    let g = s.graph();
    let fetch = g.output_name(z);
    let it = Item { feeds: vec!["x:0".into()], fetches: vec![fetch.clone()], ..Default::default() };
    let opt = MetaOptimizer::new(OptimizerOptions::default()).optimize(&g, &it).unwrap();
    let ops: Vec<&str> = opt.graph.nodes().iter().map(|n| n.op.as_str()).collect();
    assert_eq!(ops.iter().filter(|o| **o == "_FusedConv2DElementwise").count(), 3, "{ops:?}\n{}", opt.report.details());
    assert!(!ops.iter().any(|o| ["Conv2D", "_FusedConv2D", "_FusedElementwise"].contains(o)), "{ops:?}");
    for batch in [1, 3] {
        let v: Vec<f32> = (0..batch * 9 * 7 * c).map(|i| ((i * 7919) % 1000) as f32 / 200.0 - 2.5).collect();
        let feeds = vec![("x:0".to_string(), Tensor::from_vec(&[batch, 9, 7, c], v).unwrap())];
        let a = run(&g, &feeds, std::slice::from_ref(&fetch), true);
        let b = run(&g, &feeds, std::slice::from_ref(&fetch), false);
        assert_bit_identical("conv + batch norm + residual + relu", &a[0], &b[0]);
    }
}

/// `Conv2D + BiasAdd + Relu` then a `MaxPool` of windows equal to its strides (VALID) fuse
/// into one `_FusedConv2DElementwise` with `max_pool`, which pools each block of the
/// convolution's output in cache. Bit-identical to the unfused graph (a NaN input included)
/// through every path: the direct convolution (1 input channel) with 2×2 and 3×3 windows,
/// Winograd F(2×2) and F(4×4) blocks, and the kernel's whole-output pool where blocks cannot
/// hold whole windows (odd output sides; phases on 2 threads at batch 1; 3×3 windows over
/// 2×2 tiles). A pool whose windows overlap (3×3, stride 2) stays a `MaxPool`.
#[test]
fn convolution_and_max_pool_fuse_exactly() {
    use ferroflow::proto::attr;
    // (batch, side, input channels, output channels, pool window, pool stride)
    let cases = [
        (2, 28, 1, 32, 2, 2),
        (2, 27, 1, 8, 3, 3),
        (4, 14, 32, 64, 2, 2),
        (3, 16, 64, 64, 2, 2),
        (4, 13, 16, 16, 2, 2),
        (1, 14, 32, 64, 2, 2),
        (4, 12, 16, 16, 3, 3),
        (4, 14, 16, 16, 3, 2),
    ];
    for (batch, side, c, k, window, stride) in cases {
        let s = Scope::new();
        let x = s
            .with_name("x")
            .placeholder(DType::Float, &Shape::new(vec![None, Some(side), Some(side), Some(c)]))
            .unwrap();
        let fv: Vec<f32> = (0..9 * c * k).map(|i| ((i * 37) % 23) as f32 * 0.05 - 0.55).collect();
        let f = s.constant(&Tensor::from_vec(&[3, 3, c, k], fv).unwrap()).unwrap();
        let mut a = ferroflow::graph::Attrs::new();
        a.insert("T".into(), attr::dtype(DType::Float));
        a.insert("strides".into(), attr::ints(&[1, 1, 1, 1]));
        a.insert("padding".into(), attr::string("SAME"));
        let y = Output { node: s.add_op("Conv2D", "conv", &[x, f], &[], a).unwrap(), index: 0 };
        let bias =
            s.constant(&Tensor::from_vec(&[k], (0..k).map(|i| i as f32 * 0.03 - 0.2).collect()).unwrap()).unwrap();
        let mut a = ferroflow::graph::Attrs::new();
        a.insert("T".into(), attr::dtype(DType::Float));
        let y = Output { node: s.add_op("BiasAdd", "bias", &[y, bias], &[], a).unwrap(), index: 0 };
        let y = s.unary("Relu", y).unwrap();
        let mut a = ferroflow::graph::Attrs::new();
        a.insert("T".into(), attr::dtype(DType::Float));
        a.insert("ksize".into(), attr::ints(&[1, window, window, 1]));
        a.insert("strides".into(), attr::ints(&[1, stride, stride, 1]));
        a.insert("padding".into(), attr::string("VALID"));
        let y = Output { node: s.add_op("MaxPool", "pool", &[y], &[], a).unwrap(), index: 0 };
        let g = s.graph();
        let fetch = g.output_name(y);
        let it = Item { feeds: vec!["x:0".into()], fetches: vec![fetch.clone()], ..Default::default() };
        let opt = MetaOptimizer::new(OptimizerOptions::default()).optimize(&g, &it).unwrap();
        let pool = opt.graph.nodes().iter().find(|n| n.name == "pool").expect("the pool keeps its name");
        let fused = window == stride;
        assert_eq!(pool.op, if fused { "_FusedConv2DElementwise" } else { "MaxPool" }, "{}", opt.report.details());
        let mut v: Vec<f32> = (0..batch * side * side * c).map(|i| ((i * 7919) % 1000) as f32 / 200.0 - 2.5).collect();
        v[side * c + 5 * c] = f32::NAN;
        let feeds = vec![("x:0".to_string(), Tensor::from_vec(&[batch, side, side, c], v).unwrap())];
        let got = run(&g, &feeds, std::slice::from_ref(&fetch), true);
        let want = run(&g, &feeds, std::slice::from_ref(&fetch), false);
        let pooled = ((side as i64 - window) / stride + 1) as usize;
        assert_eq!(got[0].dims(), [batch, pooled, pooled, k]);
        assert_bit_identical(&format!("conv {side}x{side}x{c}->{k}, pool {window}/{stride}"), &got[0], &want[0]);
    }
}

/// `StridedSlice`'s shape function against its kernel, over random specs: every mask (one
/// ellipsis at most), negative and out-of-range bounds, negative strides, shrunk and new axes,
/// inputs whose shape is fully known and with one size unknown. Where the kernel accepts the
/// spec the inferred shape is the output's (and fully known when the input's is); a size the
/// input leaves unknown stays unknown or agrees.
#[test]
fn strided_slice_shapes_agree_with_the_kernel_for_every_mask() {
    let mut r = ferroflow::tensor::rng::Rng::new(7);
    let mut pick = |n: usize| (r.unit() * n as f64) as usize % n;
    let mut checked = 0;
    for case in 0..400 {
        let rank = 1 + pick(4);
        let dims: Vec<usize> = (0..rank).map(|_| pick(6)).collect();
        let n = 1 + pick(rank + 1);
        let ints = |pick: &mut dyn FnMut(usize) -> usize, lo: i64, span: usize| {
            (0..n).map(|_| lo + pick(span) as i64).collect::<Vec<i64>>()
        };
        let (b, e) = (ints(&mut pick, -7, 15), ints(&mut pick, -7, 15));
        let st: Vec<i64> = (0..n).map(|_| [-3, -2, -1, 1, 2, 3][pick(6)]).collect();
        let mut mask = |p: usize| (0..n).filter(|_| pick(p) == 0).fold(0i64, |m, i| m | 1 << i);
        let (bm, em, nm, sm) = (mask(3), mask(3), mask(5), mask(4));
        let ellipsis = if pick(3) == 0 { 1i64 << pick(n) } else { 0 };
        let unknown_at = (pick(2) == 0).then(|| pick(rank));
        let s = Scope::new();
        let declared =
            Shape::new(dims.iter().enumerate().map(|(i, &d)| (Some(i) != unknown_at).then_some(d)).collect());
        let x = s.with_name("x").placeholder(DType::Float, &declared).unwrap();
        let c = |v: &[i64]| s.constant_from(&[n], v).unwrap();
        let mut a = ferroflow::graph::Attrs::new();
        for (k, v) in [
            ("begin_mask", bm),
            ("end_mask", em),
            ("ellipsis_mask", ellipsis),
            ("new_axis_mask", nm),
            ("shrink_axis_mask", sm),
        ] {
            a.insert(k.into(), ferroflow::proto::attr::int(v));
        }
        a.insert("Index".into(), ferroflow::proto::attr::dtype(DType::Int64));
        a.insert("T".into(), ferroflow::proto::attr::dtype(DType::Float));
        let y = s.add_op("StridedSlice", "y", &[x, c(&b), c(&e), c(&st)], &[], a).unwrap();
        let graph = s.graph();
        let inferred = ferroflow::ops::infer_shapes(&graph).unwrap()[y][0].clone();
        let mut o = SessionOptions::default();
        o.optimizer.enabled = false;
        let sess = Session::new(graph, o).unwrap();
        let input = Tensor::from_vec(&dims, vec![0f32; dims.iter().product()]).unwrap();
        let Ok(out) = sess.run(&[("x:0", input)], &["y:0"], &[]) else { continue };
        let got = out[0].dims().to_vec();
        let what = format!("case {case}: dims {dims:?} begin {b:?} end {e:?} strides {st:?} masks b{bm} e{em} ellipsis{ellipsis} new{nm} shrink{sm}");
        match inferred.dims() {
            Some(d) => {
                assert_eq!(d.len(), got.len(), "{what}: rank {inferred:?} vs {got:?}");
                for (i, (&want, &have)) in d.iter().zip(&got).enumerate() {
                    assert!(want.is_none_or(|w| w == have), "{what}: dim {i}: inferred {inferred:?}, kernel {got:?}");
                }
                if unknown_at.is_none() {
                    assert!(d.iter().all(Option::is_some), "{what}: inferred {inferred:?} from a known shape");
                }
            }
            None => panic!("{what}: no shape inferred; the kernel gives {got:?}"),
        }
        checked += 1;
    }
    assert!(checked > 150, "only {checked} specs were valid");
}

/// EfficientNet's block as Keras exports it with an unknown batch: a convolution and a
/// depthwise convolution, each followed by a frozen BatchNormalization and swish
/// (`x * sigmoid(x)`), and squeeze-and-excite, whose `Reshape` target is built at run time
/// (`[tf.shape(x)[0], 1, 1, C]` from `Shape`, `StridedSlice`, `Pack`). Shape inference reads
/// that target as a partly known shape, so the shapes after it stay known and each
/// convolution takes its BatchNormalization *and* its swish (fused in two steps: the
/// normalization first, then the activation chained onto it); the results are bit-identical
/// to the unoptimized graph's.
#[test]
fn batch_norm_and_swish_chain_onto_convolutions_after_a_dynamic_reshape() {
    use ferroflow::ops::attrs;
    use ferroflow::proto::attr;
    let (h, w, c, k) = (7usize, 6usize, 4usize, 8usize);
    let s = Scope::new();
    let x = s.with_name("x").placeholder(DType::Float, &Shape::new(vec![None, Some(h), Some(w), Some(c)])).unwrap();
    let swish = |y: Output| s.mul(y, s.unary("Sigmoid", y).unwrap()).unwrap();
    let bn = |y: Output, n: usize, seed: f32| {
        s.add_v2(s.mul(y, test_vector(&s, n, 0.5 + seed, 0.1)).unwrap(), test_vector(&s, n, -0.7, 0.3)).unwrap()
    };
    let ints = |v: Vec<i32>| s.constant(&Tensor::from_vec(&[v.len()], v).unwrap()).unwrap();
    let expand = swish(bn(test_conv2d(&s, "expand", x, (1, c, k), 1, 1), k, 0.0));
    let fv: Vec<f32> = (0..9 * k).map(|i| (i % 11) as f32 * 0.2 - 1.0).collect();
    let f = s.constant(&Tensor::from_vec(&[3, 3, k, 1], fv).unwrap()).unwrap();
    let mut a = ferroflow::graph::Attrs::new();
    a.insert("T".into(), attr::dtype(DType::Float));
    a.insert("strides".into(), attr::ints(&[1, 1, 1, 1]));
    a.insert("padding".into(), attr::string("SAME"));
    let dw = Output { node: s.add_op("DepthwiseConv2dNative", "dw", &[expand, f], &[], a).unwrap(), index: 0 };
    let features = swish(bn(dw, k, 0.2));
    // Squeeze and excite: the pooled vector reshaped to [N, 1, 1, K] by a shape made at run time.
    let pooled = s.mean(features, ints(vec![1, 2])).unwrap();
    let batch = s
        .strided_slice_with(
            s.shape(pooled).unwrap(),
            ints(vec![0]),
            ints(vec![1]),
            ints(vec![1]),
            attrs::StridedSlice::new().shrink_axis_mask(1),
        )
        .unwrap();
    let one = s.constant(&Tensor::scalar(1i32)).unwrap();
    let kk = s.constant(&Tensor::scalar(k as i32)).unwrap();
    let target = s.pack(&[batch, one, one, kk]).unwrap();
    let squeezed = s.reshape(pooled, target).unwrap();
    let gate = s.unary("Sigmoid", test_conv2d(&s, "se", squeezed, (1, k, k), 1, 3)).unwrap();
    let y = s.mul(features, gate).unwrap();
    let g = s.graph();
    let shapes = ferroflow::ops::infer_shapes(&g).unwrap();
    assert_eq!(shapes[squeezed.node][0], Shape::new(vec![None, Some(1), Some(1), Some(k)]));
    assert_eq!(shapes[y.node][0], Shape::new(vec![None, Some(h), Some(w), Some(k)]));
    let fetch = g.output_name(y);
    let it = Item { feeds: vec!["x:0".into()], fetches: vec![fetch.clone()], ..Default::default() };
    let opt = MetaOptimizer::new(OptimizerOptions::default()).optimize(&g, &it).unwrap();
    let ops: Vec<&str> = opt.graph.nodes().iter().map(|n| n.op.as_str()).collect();
    let count = |op: &str| ops.iter().filter(|o| **o == op).count();
    assert_eq!(count("_FusedConv2DElementwise"), 1, "{ops:?}\n{}", opt.report.details());
    assert_eq!(count("_FusedDepthwiseConv2dElementwise"), 1, "{ops:?}\n{}", opt.report.details());
    // Each convolution's program ends in its swish; what is left unfused is the excite
    // (its convolution's output is the 1x1 side).
    for n in
        opt.graph.nodes().iter().filter(|n| n.op.ends_with("Conv2dElementwise") || n.op.ends_with("Conv2DElementwise"))
    {
        let program: Vec<String> = match n.attrs.get("program").and_then(|a| a.value.as_ref()) {
            Some(ferroflow::proto::attr_value::Value::List(l)) => {
                l.s.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect()
            }
            _ => panic!("{} has no program", n.name),
        };
        assert!(program.iter().any(|l| l.starts_with("Sigmoid")), "{}: {program:?}", n.name);
    }
    // The gate's sigmoid runs on the `[N, 1, 1, K]` gate, not once per pixel inside the
    // multiply's program: the multiply stays a `Mul` of its own.
    assert_eq!(count("_FusedElementwise"), 0, "{ops:?}\n{}", opt.report.details());
    assert_eq!((count("Sigmoid"), count("Mul")), (1, 1), "{ops:?}\n{}", opt.report.details());
    for batch in [1, 3] {
        let v: Vec<f32> = (0..batch * h * w * c).map(|i| ((i * 7919) % 1000) as f32 / 200.0 - 2.5).collect();
        let feeds = vec![("x:0".to_string(), Tensor::from_vec(&[batch, h, w, c], v).unwrap())];
        let a = run(&g, &feeds, std::slice::from_ref(&fetch), true);
        let b = run(&g, &feeds, std::slice::from_ref(&fetch), false);
        assert_bit_identical("conv, batch norm, swish, squeeze and excite", &a[0], &b[0]);
    }
}

/// Shapes made at run time from `Shape`, as Keras and `tf.reshape` users write them, infer as
/// partly known shapes: `[tf.shape(x)[0], -1]` (a flatten), `concat([tf.shape(x)[:-1], [K]])`
/// (a dense layer over the last axis), `tf.shape(x)[1:3]` (a resize target); and a negative
/// index from the end.
#[test]
fn run_time_shapes_built_from_shape_infer_in_part() {
    use ferroflow::ops::attrs;
    let s = Scope::new();
    let x = s.with_name("x").placeholder(DType::Float, &Shape::new(vec![None, Some(5), Some(4), Some(3)])).unwrap();
    let ints = |v: Vec<i32>| s.constant(&Tensor::from_vec(&[v.len()], v).unwrap()).unwrap();
    let shape = s.shape(x).unwrap();
    let slice = |b: i32, e: i32, o: attrs::StridedSlice| {
        s.strided_slice_with(shape, ints(vec![b]), ints(vec![e]), ints(vec![1]), o).unwrap()
    };
    let batch = slice(0, 1, attrs::StridedSlice::new().shrink_axis_mask(1));
    let flat = s.reshape(x, s.pack(&[batch, s.constant(&Tensor::scalar(-1i32)).unwrap()]).unwrap()).unwrap();
    let leading = slice(0, -1, attrs::StridedSlice::new());
    let dense = s
        .reshape(x, s.concat_v2(&[leading, ints(vec![3])], s.constant(&Tensor::scalar(0i32)).unwrap()).unwrap())
        .unwrap();
    let last = slice(-1, 0, attrs::StridedSlice::new().shrink_axis_mask(1));
    let spatial = slice(1, 3, attrs::StridedSlice::new());
    let g = s.graph();
    let shapes = ferroflow::ops::infer_shapes(&g).unwrap();
    assert_eq!(shapes[flat.node][0], Shape::new(vec![None, None]));
    assert_eq!(shapes[dense.node][0], Shape::new(vec![None, Some(5), Some(4), Some(3)]));
    let feeds = vec![("x:0".to_string(), Tensor::from_vec(&[2, 5, 4, 3], vec![0.5f32; 120]).unwrap())];
    let names: Vec<String> = [flat, dense, last, spatial].iter().map(|o| g.output_name(*o)).collect();
    let got = run(&g, &feeds, &names, true);
    assert_eq!(got[0].dims(), &[2, 60]);
    assert_eq!(got[1].dims(), &[2, 5, 4, 3]);
    assert_eq!(got[2].as_slice::<i32>().unwrap(), &[3]);
    assert_eq!(got[3].as_slice::<i32>().unwrap(), &[5, 4]);
}

/// A pre-activation (a frozen BatchNormalization as `Mul`/`AddV2`, then `Relu`) whose every
/// consumer is a pointwise convolution becomes their prologue — DenseNet's layers (a
/// convolution with its own BatchNorm + ReLU epilogue) and ResNetV2's blocks (the same
/// activation read by the shortcut convolution, with a bias, and by the main one, joined by a
/// residual `AddV2`) — and is left alone where a consumer is not pointwise (a 3×3 window, a
/// stride of 2, too few channels). Bit-identical to the unfused graph, at batch sizes that
/// run the GEMM as one matrix and as blocks split across the pool.
#[test]
fn pre_activations_become_prologues_of_pointwise_convolutions_exactly() {
    let c = 16;
    let build = |second: &str, channels: usize| {
        let s = Scope::new();
        let x =
            s.with_name("x").placeholder(DType::Float, &Shape::new(vec![None, None, None, Some(channels)])).unwrap();
        let pre = s
            .relu(
                s.add_v2(
                    s.mul(x, test_vector(&s, channels, 0.6, 0.05)).unwrap(),
                    test_vector(&s, channels, -0.4, 0.07),
                )
                .unwrap(),
            )
            .unwrap();
        let bn_relu = |y: Output, k: usize| {
            s.relu(s.add_v2(s.mul(y, test_vector(&s, k, 0.9, -0.01)).unwrap(), test_vector(&s, k, 0.1, 0.02)).unwrap())
                .unwrap()
        };
        let main = bn_relu(test_conv2d(&s, "main", pre, (1, channels, 24), 1, 1), 24);
        let other = match second {
            "bias" => {
                s.bias_add(test_conv2d(&s, "shortcut", pre, (1, channels, 24), 1, 2), test_vector(&s, 24, 0.3, -0.02))
            }
            "3x3" => Ok(test_conv2d(&s, "wide", pre, (3, channels, 24), 1, 2)),
            _ => Ok(test_conv2d(&s, "strided", pre, (1, channels, 24), 2, 2)),
        }
        .unwrap();
        let y = if second == "strided" { other } else { s.add_v2(main, other).unwrap() };
        let fetches = vec![s.graph().output_name(y), s.graph().output_name(main)];
        (s.graph(), fetches)
    };
    for (second, channels, fused) in [("bias", c, true), ("3x3", c, false), ("strided", c, false), ("bias", 4, false)] {
        let (g, fetches) = build(second, channels);
        let it = Item { feeds: vec!["x:0".into()], fetches: fetches.clone(), ..Default::default() };
        let opt = MetaOptimizer::new(OptimizerOptions::default()).optimize(&g, &it).unwrap();
        let with_prologue = opt
            .graph
            .nodes()
            .iter()
            .filter(|n| {
                matches!(n.attrs.get("prologue").and_then(|a| a.value.as_ref()),
                Some(ferroflow::proto::attr_value::Value::List(l)) if !l.s.is_empty())
            })
            .count();
        let elementwise = opt.graph.nodes().iter().filter(|n| n.op == "_FusedElementwise").count();
        let what = format!("{second}, {channels} channels");
        assert_eq!(with_prologue, if fused { 2 } else { 0 }, "{what}\n{}", opt.report.details());
        assert_eq!(elementwise == 0, fused, "{what}\n{}", opt.report.details());
        for (batch, h, w) in [(1, 6, 5), (3, 24, 25)] {
            let n = batch * h * w * channels;
            let v: Vec<f32> = (0..n).map(|i| ((i * 7919) % 1000) as f32 / 200.0 - 2.5).collect();
            let feeds = vec![("x:0".to_string(), Tensor::from_vec(&[batch, h, w, channels], v).unwrap())];
            let a = run(&g, &feeds, &fetches, true);
            let b = run(&g, &feeds, &fetches, false);
            for (got, want) in a.iter().zip(&b) {
                assert_bit_identical(&format!("{what}, batch {batch}"), got, want);
            }
        }
    }
}

/// An elementwise cluster does not take in a producer broadcast into it: Keras'
/// `Normalization`, `(x - mean) / max(sqrt(variance), 1e-7)` with `[1, 1, 1, C]` statistics
/// (variables, here fed), computes the square root and maximum once per channel in a small
/// program of their own, not once per pixel in the large one — bit-identical to the unfused
/// graph.
#[test]
fn a_broadcast_producer_is_not_recomputed_per_element() {
    let s = Scope::new();
    let x = s.with_name("x").placeholder(DType::Float, &Shape::new(vec![None, Some(6), Some(5), Some(3)])).unwrap();
    let stat = Shape::new(vec![Some(1), Some(1), Some(1), Some(3)]);
    let mean = s.with_name("mean").placeholder(DType::Float, &stat).unwrap();
    let var = s.with_name("var").placeholder(DType::Float, &stat).unwrap();
    let den = s.maximum(s.sqrt(var).unwrap(), 1e-7f32).unwrap();
    let y = s.real_div(s.sub(s.mul(x, 1.0f32 / 255.0).unwrap(), mean).unwrap(), den).unwrap();
    let g = s.graph();
    let fetches = vec![g.output_name(y)];
    let it = Item {
        feeds: vec!["x:0".into(), "mean:0".into(), "var:0".into()],
        fetches: fetches.clone(),
        ..Default::default()
    };
    let opt = MetaOptimizer::new(OptimizerOptions::default()).optimize(&g, &it).unwrap();
    let programs: Vec<Vec<String>> = opt
        .graph
        .nodes()
        .iter()
        .filter(|n| n.op == "_FusedElementwise")
        .map(|n| match n.attrs.get("program").and_then(|a| a.value.as_ref()) {
            Some(ferroflow::proto::attr_value::Value::List(l)) => {
                l.s.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect()
            }
            _ => panic!("{} has no program", n.name),
        })
        .collect();
    let with = |op: &str| programs.iter().filter(|p| p.iter().any(|l| l.starts_with(op))).collect::<Vec<_>>();
    assert_eq!(programs.len(), 2, "{programs:?}\n{}", opt.report.details());
    assert_eq!(with("Sqrt"), with("Maximum"), "{programs:?}");
    assert_eq!(with("RealDiv").len(), 1, "{programs:?}");
    assert!(with("RealDiv")[0].iter().all(|l| !l.starts_with("Sqrt")), "{programs:?}");
    let v: Vec<f32> = (0..2 * 6 * 5 * 3).map(|i| ((i * 7919) % 1000) as f32 / 4.0).collect();
    let feeds = vec![
        ("x:0".to_string(), Tensor::from_vec(&[2, 6, 5, 3], v).unwrap()),
        ("mean:0".to_string(), Tensor::from_vec(&[1, 1, 1, 3], vec![0.485f32, 0.456, 0.406]).unwrap()),
        ("var:0".to_string(), Tensor::from_vec(&[1, 1, 1, 3], vec![0.052f32, 0.05, 0.0]).unwrap()),
    ];
    let a = run(&g, &feeds, &fetches, true);
    let b = run(&g, &feeds, &fetches, false);
    assert_bit_identical("normalization", &a[0], &b[0]);
}

/// A squeeze-and-excite scale (EfficientNet's, MobileNetV3's: `x * sigmoid(conv(mean(x)))`, a
/// `Mul` of the NHWC tensor by an `[N, 1, 1, C]` one, either operand first) feeding a
/// pointwise convolution becomes the convolution's prologue, each image's row of scales
/// applied to its pixels as the GEMM's blocks are read — bit-identical to the unfused graph at
/// batch sizes whose blocks start and end inside images and across them.
#[test]
fn squeeze_and_excite_scales_become_prologues_exactly() {
    let c = 16;
    for swapped in [false, true] {
        let s = Scope::new();
        let x = s.with_name("x").placeholder(DType::Float, &Shape::new(vec![None, None, None, Some(c)])).unwrap();
        let axes = s.constant(&Tensor::from_vec(&[2], vec![1i32, 2]).unwrap()).unwrap();
        let squeezed = s.mean_with(x, axes, ferroflow::ops::attrs::Mean::new().keep_dims(true)).unwrap();
        let scale = s.sigmoid(test_conv2d(&s, "excite", squeezed, (1, c, c), 1, 4)).unwrap();
        let scaled = if swapped { s.mul(scale, x) } else { s.mul(x, scale) }.unwrap();
        let y = test_conv2d(&s, "project", scaled, (1, c, 24), 1, 5);
        let g = s.graph();
        let fetches = vec![g.output_name(y)];
        let it = Item { feeds: vec!["x:0".into()], fetches: fetches.clone(), ..Default::default() };
        let opt = MetaOptimizer::new(OptimizerOptions::default()).optimize(&g, &it).unwrap();
        let what = format!("scale {} the tensor", if swapped { "before" } else { "after" });
        let ops: Vec<&str> = opt.graph.nodes().iter().map(|n| n.op.as_str()).collect();
        assert!(!ops.contains(&"Mul"), "{what}: {ops:?}\n{}", opt.report.details());
        for (batch, h, w) in [(1, 6, 5), (3, 24, 25), (5, 7, 3)] {
            let n = batch * h * w * c;
            let v: Vec<f32> = (0..n).map(|i| ((i * 7919) % 1000) as f32 / 200.0 - 2.5).collect();
            let feeds = vec![("x:0".to_string(), Tensor::from_vec(&[batch, h, w, c], v).unwrap())];
            let a = run(&g, &feeds, &fetches, true);
            let b = run(&g, &feeds, &fetches, false);
            assert_bit_identical(&format!("{what}, batch {batch}"), &a[0], &b[0]);
        }
    }
}

/// A frozen BatchNormalization whose statistics are not constants (a Keras model fine-tuned
/// with its base frozen reads them from variables; here they are fed): the inference
/// `FusedBatchNormV3` becomes `x * m + a` with `m` and `a` computed by ops on the `[C]`
/// vectors, which then fuse into the convolution before and the swish after — bit-identical
/// to the kernel's own arithmetic.
#[test]
fn inference_batch_norm_with_tensor_statistics_decomposes_and_fuses_exactly() {
    use ferroflow::proto::attr;
    let s = Scope::new();
    let c = 6;
    let x = s.with_name("x").placeholder(DType::Float, &Shape::new(vec![None, Some(9), Some(8), Some(4)])).unwrap();
    let y = test_conv2d(&s, "conv", x, (3, 4, c), 1, 3);
    let stat = |n: &str| s.with_name(n).placeholder(DType::Float, &Shape::new(vec![Some(c)])).unwrap();
    let (gamma, beta, mean, var) = (stat("gamma"), stat("beta"), stat("mean"), stat("var"));
    let mut a = ferroflow::graph::Attrs::new();
    a.insert("T".into(), attr::dtype(DType::Float));
    a.insert("U".into(), attr::dtype(DType::Float));
    a.insert("epsilon".into(), attr::float(1e-3));
    a.insert("is_training".into(), attr::boolean(false));
    a.insert("data_format".into(), attr::string("NHWC"));
    let bn = s.add_op("FusedBatchNormV3", "bn", &[y, gamma, beta, mean, var], &[], a).unwrap();
    let y = Output { node: bn, index: 0 };
    let y = s.mul(y, s.unary("Sigmoid", y).unwrap()).unwrap();
    let g = s.graph();
    let fetch = g.output_name(y);
    let names = ["x:0", "gamma:0", "beta:0", "mean:0", "var:0"];
    let it = Item {
        feeds: names.iter().map(|n| n.to_string()).collect(),
        fetches: vec![fetch.clone()],
        ..Default::default()
    };
    let opt = MetaOptimizer::new(OptimizerOptions::default()).optimize(&g, &it).unwrap();
    let ops: Vec<&str> = opt.graph.nodes().iter().map(|n| n.op.as_str()).collect();
    assert!(!ops.contains(&"FusedBatchNormV3"), "{ops:?}\n{}", opt.report.details());
    assert!(ops.contains(&"_FusedConv2DElementwise"), "{ops:?}\n{}", opt.report.details());
    let v: Vec<f32> = (0..2 * 9 * 8 * 4).map(|i| ((i * 7919) % 1000) as f32 / 100.0 - 5.0).collect();
    let vec_of = |a: f32, b: f32| Tensor::from_vec(&[c], (0..c).map(|i| a + i as f32 * b).collect()).unwrap();
    let feeds: Vec<(String, Tensor)> = vec![
        ("x:0".into(), Tensor::from_vec(&[2, 9, 8, 4], v).unwrap()),
        ("gamma:0".into(), vec_of(0.7, 0.13)),
        ("beta:0".into(), vec_of(-0.4, 0.21)),
        ("mean:0".into(), vec_of(0.3, -0.17)),
        ("var:0".into(), vec_of(0.5, 0.37)),
    ];
    let a = run(&g, &feeds, std::slice::from_ref(&fetch), true);
    let b = run(&g, &feeds, std::slice::from_ref(&fetch), false);
    assert_bit_identical("conv + batch norm of fed statistics + swish", &a[0], &b[0]);
}
