//! The op registry as the one place for op facts: every op has a kernel or is run by the
//! runtime by declaration, and declares how gradients pass through it; every op the registry
//! declares elementwise is fused by the optimizer and its fused form computes bit-for-bit what
//! its kernel computes; every declared activation fuses into `_FusedMatMul` bit-identically.
use ferroflow::graph::Attrs;
use ferroflow::kernels::KernelRegistry;
use ferroflow::ops::{Execution, OpRegistry};
use ferroflow::optimize::{Item, MetaOptimizer, OptimizerOptions};
use ferroflow::prelude::*;
use ferroflow::proto::attr;

#[test]
fn every_op_has_a_kernel_or_is_run_by_the_runtime() {
    let kernels = KernelRegistry::global();
    let mut wrong = vec![];
    for def in OpRegistry::global().defs() {
        match (def.facts.execution, kernels.has_op(&def.name)) {
            (Execution::Kernel, false) => wrong.push(format!("{}: no kernel", def.name)),
            (Execution::Kernel, true) | (_, false) => {}
            (e, true) => wrong.push(format!("{}: run by the runtime ({e:?}) but has a kernel", def.name)),
        }
    }
    for op in kernels.ops() {
        if OpRegistry::global().get(op).is_none() {
            wrong.push(format!("{op}: a kernel for an op the registry does not define"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn every_op_declares_how_gradients_pass() {
    let undeclared: Vec<&str> = OpRegistry::global()
        .defs()
        .into_iter()
        .filter(|d| d.facts.gradient.is_none())
        .map(|d| d.name.as_str())
        .collect();
    assert!(undeclared.is_empty(), "ops without a gradient or a not-differentiable mark: {undeclared:?}");
}

/// Inputs with every special value, then a spread of ordinary ones; longer than one fused
/// block (1024 elements) so block boundaries are crossed.
fn values(n: usize, seed: u64) -> Vec<f64> {
    let special =
        [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1e-30, -1e-30, 1e30, -1e30, f64::INFINITY, f64::NEG_INFINITY, f64::NAN];
    let mut r = ferroflow::tensor::rng::Rng::new(seed);
    (0..n)
        .map(|i| {
            let u = r.unit();
            if i < special.len() {
                special[i]
            } else {
                u * 16.0 - 8.0
            }
        })
        .collect()
}

fn tensor(dtype: DType, dims: &[usize], v: Vec<f64>) -> Tensor {
    match dtype {
        DType::Float => Tensor::from_vec(dims, v.into_iter().map(|x| x as f32).collect()).unwrap(),
        _ => Tensor::from_vec(dims, v).unwrap(),
    }
}

fn run(graph: &ferroflow::graph::Graph, feeds: &[(&str, Tensor)], fetch: &str, optimize: bool) -> Tensor {
    let mut opts = SessionOptions::default().with_inter_op_threads(1).with_intra_op_threads(1);
    opts.optimizer.enabled = optimize;
    let sess = Session::new(graph.clone(), opts).unwrap();
    sess.run(feeds, &[fetch], &[]).unwrap_or_else(|e| panic!("{fetch}: {e}")).remove(0)
}

fn same_bits(what: &str, a: &Tensor, b: &Tensor) {
    assert_eq!((a.dtype(), a.dims()), (b.dtype(), b.dims()), "{what}");
    assert!(a.as_bytes().unwrap() == b.as_bytes().unwrap(), "{what}: {} != {}", a.preview(8), b.preview(8));
}

#[test]
fn every_elementwise_op_fuses_and_its_fused_form_is_bit_identical() {
    let reg = OpRegistry::global();
    let elementwise: Vec<_> =
        reg.defs().into_iter().filter_map(|d| Some((d.name.clone(), d.facts.elementwise?))).collect();
    assert!(elementwise.len() >= 30, "{elementwise:?}");
    for (op, e) in &elementwise {
        for dtype in [DType::Float, DType::Double] {
            // op(x) or op(x, z) as written, and as a one-step `_FusedElementwise` program; the
            // second operand is a full tensor and, in a second program, a scalar.
            let s = Scope::new();
            let dims = [3usize, 700];
            let x = s.with_name("x").placeholder(dtype, &Shape::known(&dims)).unwrap();
            let z = s.with_name("z").placeholder(dtype, &Shape::known(&dims)).unwrap();
            let c = s.with_name("c").placeholder(dtype, &Shape::scalar()).unwrap();
            let mut t = Attrs::new();
            t.insert("T".into(), attr::dtype(dtype));
            let args: Vec<Output> = if e.arity() == 1 { vec![x] } else { vec![x, z] };
            let plain = Output { node: s.with_name("plain").add_op(op, op, &args, &[], t.clone()).unwrap(), index: 0 };
            let fused = |name: &str, args: &[Output]| {
                let mut a = t.clone();
                a.insert("N".into(), attr::int(args.len() as i64));
                let operands: Vec<String> = (0..args.len()).map(|i| format!("a{i}")).collect();
                a.insert("program".into(), attr::strings(&[format!("{op} {}", operands.join(" "))]));
                s.with_name(name).add_op("_FusedElementwise", name, args, &[], a).unwrap();
            };
            fused("fused", &args);
            let scalar_args: Vec<Output> = if e.arity() == 1 { vec![c] } else { vec![x, c] };
            let plain_scalar =
                Output { node: s.with_name("plain_c").add_op(op, op, &scalar_args, &[], t.clone()).unwrap(), index: 0 };
            fused("fused_c", &scalar_args);
            let g = s.graph();
            let feeds = [
                ("x:0", tensor(dtype, &dims, values(2100, 1))),
                ("z:0", tensor(dtype, &dims, values(2100, 2).into_iter().rev().collect())),
                ("c:0", tensor(dtype, &[], vec![-0.75])),
            ];
            let what = format!("{op} {dtype}");
            let want = run(&g, &feeds, &g.output_name(plain), false);
            same_bits(&what, &run(&g, &feeds, "fused:0", false), &want);
            let want = run(&g, &feeds, &g.output_name(plain_scalar), false);
            same_bits(&format!("{what} (scalar operand)"), &run(&g, &feeds, "fused_c:0", false), &want);
        }
        // The optimizer fuses it: `Square(op(x, ...))` becomes one `_FusedElementwise` whose
        // program names the op.
        let s = Scope::new();
        let x = s.with_name("x").placeholder(DType::Float, &Shape::known(&[4])).unwrap();
        let mut t = Attrs::new();
        t.insert("T".into(), attr::dtype(DType::Float));
        let args = if e.arity() == 1 { vec![x] } else { vec![x, x] };
        let y = Output { node: s.add_op(op, op, &args, &[], t).unwrap(), index: 0 };
        let y = s.with_name("y").unary("Square", y).unwrap();
        let g = s.graph();
        let item = Item { feeds: vec!["x:0".into()], fetches: vec![g.output_name(y)], ..Default::default() };
        let opt = MetaOptimizer::new(OptimizerOptions::default()).optimize(&g, &item).unwrap();
        let program = opt.graph.nodes().iter().find(|n| n.op == "_FusedElementwise").map(|n| {
            match n.attrs.get("program").and_then(|a| a.value.as_ref()) {
                Some(ferroflow::proto::attr_value::Value::List(l)) => {
                    l.s.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect::<Vec<_>>()
                }
                _ => vec![],
            }
        });
        let program = program.unwrap_or_else(|| panic!("{op} was not fused: {}", opt.report.details()));
        assert!(program.iter().any(|l| l.split_whitespace().next() == Some(op.as_str())), "{op}: {program:?}");
    }
}

#[test]
fn every_declared_activation_fuses_into_matmul_bit_identically() {
    let activations: Vec<String> =
        OpRegistry::global().defs().into_iter().filter(|d| d.facts.activation).map(|d| d.name.clone()).collect();
    assert!(activations.len() >= 6, "{activations:?}");
    for act in &activations {
        let s = Scope::new();
        let x = s.with_name("x").placeholder(DType::Float, &Shape::known(&[5, 8])).unwrap();
        let w = s.constant(&tensor(DType::Float, &[8, 6], values(48, 3))).unwrap();
        let b = s.constant(&tensor(DType::Float, &[6], values(6, 4))).unwrap();
        let h = s.bias_add(s.matmul(x, w, false, false).unwrap(), b).unwrap();
        let y = s.with_name("y").unary(act, h).unwrap();
        let g = s.graph();
        let fetch = g.output_name(y);
        let item = Item { feeds: vec!["x:0".into()], fetches: vec![fetch.clone()], ..Default::default() };
        let opt = MetaOptimizer::new(OptimizerOptions::default()).optimize(&g, &item).unwrap();
        let fused = opt.graph.nodes().iter().find(|n| n.op == "_FusedMatMul");
        assert!(fused.is_some(), "{act} was not fused: {}", opt.report.details());
        let v: Vec<f64> =
            values(40, 5).into_iter().map(|v| if v.is_finite() { v.clamp(-4.0, 4.0) } else { v }).collect();
        let feeds = [("x:0", tensor(DType::Float, &[5, 8], v))];
        same_bits(act, &run(&g, &feeds, &fetch, true), &run(&g, &feeds, &fetch, false));
    }
}

#[test]
fn each_family_has_its_definition_file_and_its_kernels_in_the_kernel_module_of_the_same_name() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut wrong = vec![];
    for def in OpRegistry::global().defs() {
        let defs = root.join(format!("crates/ops/src/defs/{}.rs", def.family));
        if !std::fs::read_to_string(&defs).is_ok_and(|s| s.contains(&format!("\"{}\"", def.name))) {
            wrong.push(format!("{}: not defined in {}", def.name, defs.display()));
        }
        if def.facts.execution != Execution::Kernel {
            continue;
        }
        // Elementwise kernels come from the scalar-function table, registered by walking the
        // registry; every other kernel is registered by name in its family's kernel module:
        // `<family>.rs`, a file of `<family>/`, or a `<family>.rs` inside another family's
        // directory (the fused family's convolutions live with the convolutions, in
        // `conv/fused.rs`).
        let src = root.join("crates/kernels/src");
        let mut files = vec![src.join(format!("{}.rs", def.family))];
        files.extend(rust_files(&src.join(def.family)));
        let dirs = std::fs::read_dir(&src).into_iter().flatten().flatten().map(|e| e.path());
        files.extend(dirs.filter(|d| d.is_dir()).map(|d| d.join(format!("{}.rs", def.family))));
        let quoted = format!("\"{}\"", def.name);
        let registered = def.facts.elementwise.is_some()
            || files.iter().any(|f| std::fs::read_to_string(f).is_ok_and(|t| t.contains(&quoted)));
        if !registered {
            wrong.push(format!("{}: its kernel is not registered in the {} kernel module", def.name, def.family));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// The `.rs` files under `dir`, at any depth (none if `dir` is not a directory).
fn rust_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![];
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(rust_files(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out
}
