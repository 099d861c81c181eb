//! Arithmetic simplification, exact in IEEE arithmetic. Each rule below says why the
//! rewritten graph computes bit-for-bit what the original did (for every input, including
//! ±0, ±inf and NaN; a signalling NaN may come out quiet either way).
//!
//! | rule | why it is exact |
//! |---|---|
//! | `x * 1`, `1 * x` → `x` (real types) | multiplying by one is exact; `-0*1 = -0` |
//! | `x / 1` → `x` | dividing by one is exact |
//! | `x + (-0.0)`, `(-0.0) + x` → `x`; integers `x + 0` | `+0 + -0 = +0`, `-0 + -0 = -0`; NOT `x + (+0)`, which turns `-0` into `+0` |
//! | `x - (+0.0)` → `x`; integers `x - 0` | `-0 - +0 = -0`, `+0 - +0 = +0` |
//! | `Neg(Neg(x))`, `LogicalNot(LogicalNot(x))` → `x` | a sign flip (or wrapping integer negation) undone |
//! | `Transpose(x, identity)`, `Transpose(Transpose(x, p), q)` with `p∘q = id` → `x` | pure data movement |
//! | `Reshape(Reshape(x, s1), s2)` → `Reshape(x, s2)` (x's shape fully known) | reshapes relabel row-major data |
//! | `Reshape(x, s)` with `s` = x's (known) shape → `x` | same data, same shape |
//! | `Cast(x)` to x's own type → `x` | the cast copies |
//! | `Squeeze(ExpandDims(x, a), [a])`, `ExpandDims(Squeeze(x, [a]), a)` → `x` | a unit axis added and removed |
//! | `Select(c, t, e)` with constant `c` all true (false) → `t` (`e`), shapes known equal | selection of whole operands |
//! | inference `FusedBatchNorm*` with constant statistics → `x * m + a` (`Mul`, `AddV2`), `m`, `a` folded | the kernel computes `x * m + a` with the same `m = scale / sqrt(var + eps)`, `a = offset - mean * m`, rounding after each step |
//! | the same with statistics that are tensors (variables) → `m`, `a` as ops on the `[C]` vectors (`AddV2`, `Sqrt`, `RealDiv`, `Mul`, `Sub`) | each op rounds as the kernel's step does |
//!
//! The first five rules are not written per op: they come from the registry's facts, each
//! op's exact neutral element and the side it may stand on (`Mul`: 1, either side; `AddV2`:
//! -0, either side; `Sub`: +0, right; `RealDiv`: 1, right) and whether it is an involution.
//!
//! The (x's shape) conditions make sure the output shape is the shape of the operand kept
//! (`x * ones([1, 1])` can broadcast `x` up a rank; such nodes are left alone). Nodes with
//! control inputs, and constants with control inputs, are left alone (ordering and frames).
//!
//! With [`crate::OptimizerOptions::inexact_float_rewrites`] only: `x / c` → `x * (1/c)` for a
//! constant float `c` (rounds twice), and `Reciprocal(Reciprocal(x))` → `x` (not exact: `1/(1/x)`
//! differs from `x` for subnormals and large values).
use ferroflow_proto::attr::AttrMap;
use std::collections::HashMap;

use ferroflow_graph::{Graph, NodeId, NodeSpec, Output};
use ferroflow_ops::{infer_shapes, Involution, Neutral, OpRegistry, Side};
use ferroflow_proto::{attr, attr_value};
use ferroflow_tensor::{DType, Shape, Tensor};

use crate::util::{const_value, make_identity, remove_orphans};
use crate::{OptimizeError, Pass, PassContext};

/// The arithmetic simplification pass.
pub struct ArithmeticSimplifier;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Uniform {
    One,
    PosZero,
    NegZero,
    True,
    False,
}

/// The single value every element of `t` has, if it is one of the interesting ones.
fn uniform(t: &Tensor) -> Option<Uniform> {
    fn all<T: Copy>(s: &[T], f: impl Fn(T) -> Option<Uniform>) -> Option<Uniform> {
        let first = f(*s.first()?)?;
        s.iter().all(|&v| f(v) == Some(first)).then_some(first)
    }
    let float = |v: f64| {
        if v == 1.0 {
            Some(Uniform::One)
        } else if v == 0.0 {
            Some(if v.is_sign_negative() { Uniform::NegZero } else { Uniform::PosZero })
        } else {
            None
        }
    };
    // Integer zero is both +0 and -0 for these rules.
    let int = |v: i64| match v {
        1 => Some(Uniform::One),
        0 => Some(Uniform::PosZero),
        _ => None,
    };
    match t.dtype() {
        DType::Float => all(t.as_slice::<f32>().ok()?, |v| float(v as f64)),
        DType::Double => all(t.as_slice::<f64>().ok()?, float),
        DType::Int32 => all(t.as_slice::<i32>().ok()?, |v| int(v as i64)),
        DType::Int64 => all(t.as_slice::<i64>().ok()?, int),
        DType::Bool => all(t.as_slice::<bool>().ok()?, |v| Some(if v { Uniform::True } else { Uniform::False })),
        _ => None,
    }
}

fn ints(t: &Tensor) -> Option<Vec<i64>> {
    match t.dtype() {
        DType::Int32 => Some(t.as_slice::<i32>().ok()?.iter().map(|&v| v as i64).collect()),
        DType::Int64 => Some(t.as_slice::<i64>().ok()?.to_vec()),
        _ => None,
    }
}

/// The graph's view the rules need: static shapes and constant values (of constants without
/// control inputs that are not fed).
struct View<'a> {
    shapes: Vec<Vec<Shape>>,
    consts: HashMap<NodeId, Option<Tensor>>,
    ctx: &'a PassContext<'a>,
}

impl View<'_> {
    fn constant(&mut self, graph: &Graph, o: Output) -> Option<Tensor> {
        if o.index != 0 {
            return None;
        }
        let ctx = self.ctx;
        self.consts
            .entry(o.node)
            .or_insert_with(|| {
                let n = graph.node(o.node);
                if !n.control_inputs.is_empty() || ctx.is_fed(graph, o.node) {
                    return None;
                }
                const_value(graph, o.node)
            })
            .clone()
    }

    fn shape(&self, o: Output) -> Shape {
        self.shapes.get(o.node).and_then(|s| s.get(o.index)).cloned().unwrap_or_else(Shape::unknown)
    }

    fn rank(&self, o: Output) -> Option<usize> {
        self.shape(o).rank()
    }

    /// True if broadcasting `c` against `x` gives x's shape: `c` has no more axes than `x`,
    /// and each of its axes is 1 or equal to x's (known) size there.
    fn absorbed_by(&self, c: &Tensor, x: Output) -> bool {
        let s = self.shape(x);
        let Some(xd) = s.dims() else { return false };
        c.rank() <= xd.len() && c.dims().iter().rev().zip(xd.iter().rev()).all(|(&cd, &xd)| cd == 1 || Some(cd) == xd)
    }
}

enum Rewrite {
    /// The node's output is this tensor.
    Forward(Output, String),
    /// Replace input `slot` by this tensor.
    Input(usize, Output, String),
}

fn norm_axis(a: i64, rank: usize) -> Option<usize> {
    let r = rank as i64;
    let a = if a < 0 { a + r } else { a };
    (0..r).contains(&a).then_some(a as usize)
}

fn rule(graph: &Graph, id: NodeId, v: &mut View) -> Option<Rewrite> {
    let n = graph.node(id);
    let dtype = *n.types.outputs.first()?;
    let real = matches!(dtype, DType::Float | DType::Double | DType::Int32 | DType::Int64);
    let input = |i: usize| n.inputs[i];
    let producer = |o: Output| {
        let p = graph.node(o.node);
        (p.control_inputs.is_empty() && o.index == 0).then_some(p)
    };
    let facts = OpRegistry::global().facts(&n.op)?;
    if let (Some((neutral, side)), true) = (facts.neutral, real) {
        // Integer zero is both +0 and -0.
        let (want, shown) = match neutral {
            Neutral::One => (Uniform::One, "1"),
            Neutral::NegZero if dtype.is_float() => (Uniform::NegZero, "-0"),
            Neutral::PosZero if dtype.is_float() => (Uniform::PosZero, "+0"),
            Neutral::NegZero | Neutral::PosZero => (Uniform::PosZero, "0"),
        };
        let sides: &[(usize, usize)] = match side {
            Side::Both => &[(1, 0), (0, 1)],
            Side::Right => &[(1, 0)],
        };
        for &(c, x) in sides {
            if let Some(t) = v.constant(graph, input(c)) {
                if uniform(&t) == Some(want) && v.absorbed_by(&t, input(x)) {
                    let written =
                        if c == 1 { format!("{}(x, {shown})", n.op) } else { format!("{}({shown}, x)", n.op) };
                    return Some(Rewrite::Forward(input(x), format!("{written} -> x")));
                }
            }
        }
    }
    if let Some(kind) = facts.involution {
        let p = producer(input(0))?;
        if p.op == n.op && (kind == Involution::Exact || v.ctx.options.inexact_float_rewrites) {
            let inexact = if kind == Involution::Exact { "" } else { "INEXACT: " };
            return Some(Rewrite::Forward(p.inputs[0], format!("{inexact}{op}({op}(x)) -> x", op = n.op)));
        }
    }
    match n.op.as_str() {
        "Transpose" => {
            let perm = ints(&v.constant(graph, input(1))?)?;
            if perm.iter().enumerate().all(|(i, &p)| p == i as i64) && v.rank(input(0)) == Some(perm.len()) {
                return Some(Rewrite::Forward(input(0), "identity Transpose -> x".into()));
            }
            let p = producer(input(0))?;
            if p.op == "Transpose" {
                let inner = ints(&v.constant(graph, p.inputs[1])?)?;
                if inner.len() == perm.len()
                    && perm
                        .iter()
                        .enumerate()
                        .all(|(i, &q)| usize::try_from(q).ok().and_then(|q| inner.get(q)) == Some(&(i as i64)))
                {
                    return Some(Rewrite::Forward(p.inputs[0], "Transpose(Transpose(x, p), inverse of p) -> x".into()));
                }
            }
        }
        "Reshape" => {
            let x = input(0);
            let xs = v.shape(x).as_known();
            if let (Some(xs), Some(out)) = (&xs, v.shape(Output { node: id, index: 0 }).as_known()) {
                if *xs == out {
                    return Some(Rewrite::Forward(x, "Reshape to the same shape -> x".into()));
                }
            }
            let p = producer(x)?;
            if p.op == "Reshape" && v.shape(p.inputs[0]).as_known().is_some() {
                return Some(Rewrite::Input(0, p.inputs[0], "Reshape(Reshape(x, s1), s2) -> Reshape(x, s2)".into()));
            }
        }
        "Cast" if graph.output_type(input(0)) == dtype => {
            return Some(Rewrite::Forward(input(0), "Cast to the same type -> x".into()));
        }
        "Squeeze" => {
            let dims = match n.attrs.attr_value("squeeze_dims") {
                Some(attr_value::Value::List(l)) => l.i.clone(),
                _ => return None,
            };
            let p = producer(input(0))?;
            if p.op == "ExpandDims" && dims.len() == 1 {
                let r = v.rank(input(0))?;
                let a = ints(&v.constant(graph, p.inputs[1])?)?;
                if a.len() == 1 && norm_axis(a[0], r).is_some() && norm_axis(a[0], r) == norm_axis(dims[0], r) {
                    return Some(Rewrite::Forward(p.inputs[0], "Squeeze(ExpandDims(x, a), [a]) -> x".into()));
                }
            }
        }
        "ExpandDims" => {
            let p = producer(input(0))?;
            if p.op == "Squeeze" {
                let dims = match p.attrs.attr_value("squeeze_dims") {
                    Some(attr_value::Value::List(l)) => l.i.clone(),
                    _ => return None,
                };
                let r = v.rank(p.inputs[0])?;
                let a = ints(&v.constant(graph, input(1))?)?;
                if dims.len() == 1
                    && a.len() == 1
                    && norm_axis(dims[0], r).is_some()
                    && norm_axis(dims[0], r) == norm_axis(a[0], r)
                {
                    return Some(Rewrite::Forward(p.inputs[0], "ExpandDims(Squeeze(x, [a]), a) -> x".into()));
                }
            }
        }
        "Select" | "SelectV2" => {
            let c = v.constant(graph, input(0))?;
            let (ts, es) = (v.shape(input(1)).as_known()?, v.shape(input(2)).as_known()?);
            let cond_fits = c.rank() == 0 || c.dims() == ts.as_slice();
            if ts != es || !cond_fits {
                return None;
            }
            match uniform(&c)? {
                Uniform::True => return Some(Rewrite::Forward(input(1), "Select(true, t, e) -> t".into())),
                Uniform::False => return Some(Rewrite::Forward(input(2), "Select(false, t, e) -> e".into())),
                _ => {}
            }
        }
        _ => {}
    }
    None
}

impl Pass for ArithmeticSimplifier {
    fn name(&self) -> &'static str {
        "arithmetic_simplification"
    }

    fn run(&self, graph: &mut Graph, ctx: &mut PassContext) -> Result<(), OptimizeError> {
        let shapes = infer_shapes(graph).unwrap_or_default();
        let order = graph.topological_order()?;
        let mut map: HashMap<Output, Output> = HashMap::new();
        let mut rewrites = Vec::new();
        let mut divisions = Vec::new();
        {
            let view_ctx: &PassContext = ctx;
            let mut view = View { shapes, consts: HashMap::new(), ctx: view_ctx };
            for &id in &order {
                // Read through the rewrites made so far.
                let n = graph.node_mut(id);
                for o in &mut n.inputs {
                    while let Some(&to) = map.get(o) {
                        *o = to;
                    }
                }
                let n = graph.node(id);
                if !n.control_inputs.is_empty() || view.ctx.library.has_side_effects(&n.op) || n.inputs.is_empty() {
                    continue;
                }
                if view.ctx.options.inexact_float_rewrites && n.op == "RealDiv" && n.types.outputs[0].is_float() {
                    if let Some(c) = view.constant(graph, n.inputs[1]) {
                        divisions.push((id, c));
                        continue;
                    }
                }
                match rule(graph, id, &mut view) {
                    Some(Rewrite::Forward(x, why)) if graph.output_type(x) == n.types.outputs[0] => {
                        map.insert(Output { node: id, index: 0 }, x);
                        rewrites.push((id, Some(x), why));
                    }
                    Some(Rewrite::Input(slot, x, why)) if graph.output_type(x) == n.types.inputs[slot] => {
                        graph.node_mut(id).inputs[slot] = x;
                        rewrites.push((id, None, why));
                    }
                    _ => {}
                }
            }
        }
        // Forwarded nodes become Identity(x) (removed below unless protected or ordering);
        // nodes whose input was rewired stay as they are.
        for (id, forward, why) in rewrites {
            ctx.report.rewritten.push((graph.node(id).name.clone(), why));
            if let Some(x) = forward {
                make_identity(graph, id, x);
            }
        }
        decompose_batch_norms(graph, ctx)?;
        for (id, c) in divisions {
            reciprocal_multiply(graph, id, &c, ctx)?;
        }
        crate::util::rewire(graph, &map);
        remove_orphans(graph, ctx)?;
        Ok(())
    }
}

/// `x / c` → `x * (1/c)` (inexact; only with `inexact_float_rewrites`).
fn reciprocal_multiply(graph: &mut Graph, id: NodeId, c: &Tensor, ctx: &mut PassContext) -> Result<(), OptimizeError> {
    let r = match c.dtype() {
        DType::Float => {
            Tensor::from_vec(c.dims(), c.as_slice::<f32>().unwrap_or(&[]).iter().map(|v| 1.0 / v).collect())
        }
        DType::Double => {
            Tensor::from_vec(c.dims(), c.as_slice::<f64>().unwrap_or(&[]).iter().map(|v| 1.0 / v).collect())
        }
        _ => return Ok(()),
    };
    let Ok(r) = r else { return Ok(()) };
    let base = format!("{}/reciprocal", graph.node(id).name);
    let name = graph.unique_name(&base);
    let mut spec = NodeSpec {
        name: name.clone(),
        op: "Const".into(),
        device: graph.node(id).device.clone(),
        ..Default::default()
    };
    spec.attrs.insert("dtype".into(), attr::dtype(r.dtype()));
    spec.attrs.insert("value".into(), crate::util::tensor_attr(&r));
    let rc = graph.add_node(spec, OpRegistry::global())?;
    let n = graph.node_mut(id);
    n.op = "Mul".into();
    n.inputs[1] = Output { node: rc, index: 0 };
    ctx.report.added.push(name);
    ctx.report.rewritten.push((graph.node(id).name.clone(), "INEXACT: x / c -> x * (1/c)".into()));
    Ok(())
}

/// An inference `FusedBatchNormV3` whose statistics are tensors (not constants) into
/// `AddV2(Mul(x, m), a)` with `m = scale / sqrt(var + ε)` and `a = offset − mean·m` as ops on
/// the `[C]` vectors, each rounding as the kernel's step does (the kernel computes them the
/// same way). The node keeps its name (it becomes the `AddV2`).
fn decompose_with_ops(graph: &mut Graph, ctx: &mut PassContext, id: usize, eps: f32) -> Result<(), OptimizeError> {
    let n = graph.node(id);
    let (name, device, ins) = (n.name.clone(), n.device.clone(), n.inputs.clone());
    let mut added = Vec::new();
    let mut op = |suffix: &str, op: &str, inputs: Vec<Output>, graph: &mut Graph| -> Result<Output, OptimizeError> {
        let nm = graph.unique_name(&format!("{name}/{suffix}"));
        let mut spec =
            NodeSpec { name: nm.clone(), op: op.into(), inputs, device: device.clone(), ..Default::default() };
        if op == "Const" {
            spec.attrs.insert("dtype".into(), attr::dtype(DType::Float));
            spec.attrs.insert("value".into(), crate::util::tensor_attr(&Tensor::scalar(eps)));
        } else {
            spec.attrs.insert("T".into(), attr::dtype(DType::Float));
        }
        let id = graph.add_node(spec, OpRegistry::global())?;
        added.push(nm);
        Ok(Output { node: id, index: 0 })
    };
    let e = op("epsilon", "Const", vec![], graph)?;
    let var_eps = op("add_epsilon", "AddV2", vec![ins[4], e], graph)?;
    let root = op("sqrt", "Sqrt", vec![var_eps], graph)?;
    let m = op("scale_factor", "RealDiv", vec![ins[1], root], graph)?;
    let mean_m = op("mean_scaled", "Mul", vec![ins[3], m], graph)?;
    let a = op("shift", "Sub", vec![ins[2], mean_m], graph)?;
    let xm = op("mul", "Mul", vec![ins[0], m], graph)?;
    ctx.report.added.extend(added);
    let node = graph.node_mut(id);
    node.op = "AddV2".into();
    node.inputs = vec![xm, a];
    let mut attrs = ferroflow_graph::Attrs::new();
    attrs.insert("T".into(), attr::dtype(DType::Float));
    node.attrs = attrs;
    node.types = ferroflow_graph::NodeTypes { inputs: vec![DType::Float; 2], outputs: vec![DType::Float] };
    node.experimental_type = None;
    ctx.report.rewritten.push((name, "inference FusedBatchNorm -> x * scale_factor + shift (factors as ops)".into()));
    Ok(())
}

/// Inference-mode `FusedBatchNormV3` (NHWC, float, constant statistics, only `y` used) into
/// `AddV2(Mul(x, m), a)` with `m` and `a` computed exactly as the kernel computes them. The
/// node keeps its name (it becomes the `AddV2`).
fn decompose_batch_norms(graph: &mut Graph, ctx: &mut PassContext) -> Result<(), OptimizeError> {
    let shapes = infer_shapes(graph).unwrap_or_default();
    let data = crate::util::data_consumers(graph);
    for (id, consumers) in data.iter().enumerate() {
        let n = graph.node(id);
        if n.op != "FusedBatchNormV3"
            || !n.control_inputs.is_empty()
            || ctx.is_protected(graph, id)
            || consumers.iter().any(|&(c, slot)| graph.node(c).inputs[slot].index != 0)
            || n.types.outputs[0] != DType::Float
        {
            continue;
        }
        let attr = |k: &str| n.attrs.get(k).and_then(|a| a.value.as_ref());
        if matches!(attr("is_training"), Some(attr_value::Value::B(true)) | None)
            || matches!(attr("data_format"), Some(attr_value::Value::S(f)) if f.as_slice() != b"NHWC")
        {
            continue;
        }
        let eps = match attr("epsilon") {
            Some(attr_value::Value::F(f)) => *f,
            _ => 1e-4,
        };
        if shapes.get(n.inputs[0].node).and_then(|s| s.get(n.inputs[0].index)).and_then(|s| s.rank()) != Some(4) {
            continue;
        }
        let mut stats = Vec::with_capacity(4);
        for &o in &n.inputs[1..5] {
            let p = graph.node(o.node);
            let v = (o.index == 0 && p.control_inputs.is_empty() && !ctx.is_fed(graph, o.node))
                .then(|| const_value(graph, o.node))
                .flatten()
                .filter(|t| t.dtype() == DType::Float && t.rank() == 1);
            match v {
                Some(t) => stats.push(t.as_slice::<f32>().map(<[f32]>::to_vec).unwrap_or_default()),
                None => break,
            }
        }
        let c = stats.first().map_or(0, Vec::len);
        if stats.len() != 4 || stats.iter().any(|s| s.len() != c) || c == 0 {
            // Statistics that are not constants (variables: a model being fine-tuned with
            // its BatchNormalization frozen): the same two factors as ops on the [C] vectors,
            // each rounding as the kernel's step does.
            let vector = |o: Output| {
                shapes.get(o.node).and_then(|s| s.get(o.index)).and_then(|s| s.dims().map(<[Option<usize>]>::to_vec))
            };
            let channels = shapes
                .get(n.inputs[0].node)
                .and_then(|s| s.get(n.inputs[0].index))
                .and_then(|s| s.dims())
                .and_then(|d| d[3]);
            let all_vectors = n.inputs[1..5].iter().all(|&o| {
                graph.output_type(o) == DType::Float && channels.is_some_and(|c| vector(o) == Some(vec![Some(c)]))
            });
            if all_vectors {
                decompose_with_ops(graph, ctx, id, eps)?;
            }
            continue;
        }
        let (scale, offset, mean, var) = (&stats[0], &stats[1], &stats[2], &stats[3]);
        let mul: Vec<f32> = (0..c).map(|i| scale[i] / (var[i] + eps).sqrt()).collect();
        let add: Vec<f32> = (0..c).map(|i| offset[i] - mean[i] * mul[i]).collect();
        let (name, device, x) = (n.name.clone(), n.device.clone(), n.inputs[0]);
        let mut konst = |suffix: &str, v: Vec<f32>, graph: &mut Graph| -> Result<Output, OptimizeError> {
            let t = Tensor::from_vec(&[c], v).map_err(|e| OptimizeError::Pass {
                pass: "arithmetic".into(),
                source: Box::new(OptimizeError::Tensor(e)),
            })?;
            let nm = graph.unique_name(&format!("{name}/{suffix}"));
            let mut spec =
                NodeSpec { name: nm.clone(), op: "Const".into(), device: device.clone(), ..Default::default() };
            spec.attrs.insert("dtype".into(), attr::dtype(DType::Float));
            spec.attrs.insert("value".into(), crate::util::tensor_attr(&t));
            let id = graph.add_node(spec, OpRegistry::global())?;
            ctx.report.added.push(nm);
            Ok(Output { node: id, index: 0 })
        };
        let m = konst("scale_factor", mul, graph)?;
        let a = konst("shift", add, graph)?;
        let mul_name = graph.unique_name(&format!("{name}/mul"));
        let mut spec = NodeSpec {
            name: mul_name.clone(),
            op: "Mul".into(),
            inputs: vec![x, m],
            device: device.clone(),
            ..Default::default()
        };
        spec.attrs.insert("T".into(), attr::dtype(DType::Float));
        let mul_id = graph.add_node(spec, OpRegistry::global())?;
        ctx.report.added.push(mul_name);
        let node = graph.node_mut(id);
        node.op = "AddV2".into();
        node.inputs = vec![Output { node: mul_id, index: 0 }, a];
        let mut attrs = ferroflow_graph::Attrs::new();
        attrs.insert("T".into(), attr::dtype(DType::Float));
        node.attrs = attrs;
        node.types = ferroflow_graph::NodeTypes { inputs: vec![DType::Float; 2], outputs: vec![DType::Float] };
        node.experimental_type = None;
        ctx.report.rewritten.push((name, "inference FusedBatchNorm -> x * scale_factor + shift".into()));
    }
    Ok(())
}
