//! Constant folding: nodes whose data inputs are all constant are evaluated once, with the
//! same CPU kernels the executor runs, and replaced by `Const` nodes. `Shape`, `Size` and
//! `Rank` of statically known shapes become constants too.
//!
//! Exact: the folded value is what the kernel would compute at run time (same kernel, same
//! inputs; kernels do not depend on the thread count for their results).
//!
//! Naming follows TensorFlow: a single-output node is rewritten in place (a fetched node keeps
//! its name, so `Mul` of seed 000 becomes a `Const` named `Mul`); outputs of a multi-output
//! node become `ConstantFolding/<node>-folded-<i>`. The folded node's control inputs, and
//! those of the constants it read, carry over to the new constant.
use std::collections::HashMap;

use ferroflow_graph::{Graph, NodeId, NodeSpec, Output};
use ferroflow_kernels::{run_op, KernelContext, KernelRegistry};
use ferroflow_ops::{infer_shapes, OpRegistry};
use ferroflow_tensor::{DType, Tensor};

use crate::util::{const_value, has_control_flow, is_call, is_control_flow, make_const, remove_orphans, rewire};
use crate::{OptimizeError, Pass, PassContext};

/// The constant-folding pass.
pub struct ConstantFolding;

/// Ops whose output can be much larger than their inputs.
const GROWING: &[&str] = &[
    "Fill",
    "Tile",
    "Range",
    "BroadcastTo",
    "Pad",
    "PadV2",
    "MirrorPad",
    "OneHot",
    "ZerosLike",
    "OnesLike",
    "ResizeBilinear",
    "ResizeNearestNeighbor",
    "MatMul",
    "BatchMatMulV2",
    "Einsum",
    "Conv2D",
    "Gather",
    "GatherV2",
    "GatherNd",
];

fn shape_value(op: &str, dims: &[usize], out: DType) -> Option<Tensor> {
    let as_ints = |v: Vec<i64>, shape: &[usize]| -> Option<Tensor> {
        match out {
            DType::Int32 => {
                let v: Vec<i32> = v.into_iter().map(i32::try_from).collect::<Result<_, _>>().ok()?;
                Tensor::from_vec(shape, v).ok()
            }
            DType::Int64 => Tensor::from_vec(shape, v).ok(),
            _ => None,
        }
    };
    match op {
        "Shape" => as_ints(dims.iter().map(|&d| d as i64).collect(), &[dims.len()]),
        "Size" => as_ints(vec![dims.iter().product::<usize>() as i64], &[]),
        _ => None,
    }
}

/// An integer tensor's values.
fn int_values(t: &Tensor) -> Option<Vec<i64>> {
    match t.dtype() {
        DType::Int32 => Some(t.as_slice::<i32>().ok()?.iter().map(|&v| v as i64).collect()),
        DType::Int64 => Some(t.as_slice::<i64>().ok()?.to_vec()),
        _ => None,
    }
}

/// A scalar's value as f64.
fn scalar_f64(t: &Tensor) -> Option<f64> {
    Some(match t.dtype() {
        DType::Int32 => t.scalar_value::<i32>().ok()? as f64,
        DType::Int64 => t.scalar_value::<i64>().ok()? as f64,
        DType::Float => t.scalar_value::<f32>().ok()? as f64,
        DType::Double => t.scalar_value::<f64>().ok()?,
        _ => return None,
    })
}

/// The number of elements a growing op would produce from these constant inputs, when it can
/// be told without running it (saturating, so absurd requests come out huge, not wrapped).
fn grown_elements(op: &str, inputs: &[Tensor]) -> Option<usize> {
    let product = |v: &[i64]| v.iter().try_fold(1usize, |acc, &d| acc.checked_mul(usize::try_from(d).ok()?));
    let big = usize::MAX;
    match op {
        "Range" => {
            let (start, limit, delta) = (scalar_f64(&inputs[0])?, scalar_f64(&inputs[1])?, scalar_f64(&inputs[2])?);
            let n = ((limit - start) / delta).ceil();
            Some(if n.is_finite() { n.clamp(0.0, 1e18) as usize } else { big })
        }
        "Fill" | "BroadcastTo" => Some(product(&int_values(&inputs[if op == "Fill" { 0 } else { 1 }])?).unwrap_or(big)),
        "Tile" => Some(product(&int_values(&inputs[1])?).and_then(|m| m.checked_mul(inputs[0].len())).unwrap_or(big)),
        "Pad" | "PadV2" | "MirrorPad" => {
            let p = int_values(&inputs[1])?;
            let dims = inputs[0].dims();
            if p.len() != dims.len() * 2 {
                return None;
            }
            let grown: Vec<i64> = dims.iter().enumerate().map(|(i, &d)| d as i64 + p[2 * i] + p[2 * i + 1]).collect();
            Some(product(&grown).unwrap_or(big))
        }
        "OneHot" => {
            let depth = usize::try_from(scalar_f64(&inputs[1])? as i64).ok()?;
            Some(inputs[0].len().checked_mul(depth).unwrap_or(big))
        }
        "ZerosLike" | "OnesLike" => Some(inputs[0].len()),
        _ => None,
    }
}

/// The value of a shape-only node (`Shape`, `Size`, `Rank`, `ZerosLike`, `OnesLike`) whose
/// input is not constant but has a statically known shape.
fn static_value(
    graph: &Graph,
    id: NodeId,
    shapes: Option<&Vec<Vec<ferroflow_tensor::Shape>>>,
    ctx: &PassContext,
    kctx: &KernelContext,
) -> Option<Tensor> {
    let n = graph.node(id);
    if !matches!(n.op.as_str(), "Shape" | "Size" | "Rank" | "ZerosLike" | "OnesLike") {
        return None;
    }
    let src = n.inputs[0];
    let producer = graph.node(src.node);
    if (producer.op == "Const" && !ctx.is_fed(graph, src.node)) || is_control_flow(&producer.op) {
        return None; // plain folding handles constants; frames are left alone
    }
    let shape = shapes?.get(src.node)?.get(src.index)?;
    let out = n.types.outputs[0];
    match n.op.as_str() {
        "Rank" => Some(Tensor::scalar(shape.rank()? as i32)),
        "Shape" | "Size" => shape_value(&n.op, &shape.as_known()?, out),
        _ => {
            let dims = shape.as_known()?;
            if dims.iter().product::<usize>() * out.size().unwrap_or(8) > ctx.options.max_folded_constant_bytes {
                return None;
            }
            let zeros = Tensor::zeros(out, &dims).ok()?;
            run_op(&n.op, &n.attrs, vec![zeros], kctx).ok()?.into_iter().next()
        }
    }
}

impl Pass for ConstantFolding {
    fn name(&self) -> &'static str {
        "constant_folding"
    }

    fn run(&self, graph: &mut Graph, ctx: &mut PassContext) -> Result<(), OptimizeError> {
        let control_flow = has_control_flow(graph);
        let shapes = if control_flow { None } else { infer_shapes(graph).ok() };
        let order = graph.topological_order()?;
        let kernels = KernelRegistry::global();
        let kctx = KernelContext { intra_op: None, resources: None };
        let mut values: HashMap<NodeId, Tensor> = HashMap::new();
        let mut map: HashMap<Output, Output> = HashMap::new();
        for (step, &id) in order.iter().enumerate() {
            if step % 256 == 0 && ctx.out_of_time() {
                break;
            }
            let n = graph.node(id);
            if n.op == "Const" || n.inputs.is_empty() || n.num_outputs() == 0 {
                continue;
            }
            if is_control_flow(&n.op) || is_call(graph, &n.op) || ctx.is_fed(graph, id) {
                continue;
            }
            if ctx.is_protected(graph, id) && !(ctx.is_named_in_item(&n.name) && n.num_outputs() == 1) {
                continue;
            }
            if crate::util::has_side_effects(&n.op) {
                continue;
            }
            // Values that depend only on a statically known shape (Shape, Size, Rank,
            // ZerosLike, OnesLike).
            if let Some(v) = static_value(graph, id, shapes.as_ref(), ctx, &kctx) {
                // The constant still waits for the tensor it describes (dead tokens,
                // ordering), except for fed tensors and placeholders, which are not run.
                let src = graph.node(id).inputs[0].node;
                let mut controls = graph.node(id).control_inputs.clone();
                let source_runs = !ctx.is_fed(graph, src) && !graph.node(src).op.starts_with("Placeholder");
                if source_runs && !controls.contains(&src) {
                    controls.push(src);
                }
                make_const(graph, id, &v, controls);
                ctx.report.folded.push(graph.node(id).name.clone());
                values.insert(id, v);
                continue;
            }
            // All data inputs constant?
            let mut inputs = Vec::with_capacity(n.inputs.len());
            let mut controls = n.control_inputs.clone();
            let mut all_const = true;
            for o in &n.inputs {
                let p = graph.node(o.node);
                if p.op != "Const" || ctx.is_fed(graph, o.node) {
                    all_const = false;
                    break;
                }
                let v = match values.get(&o.node) {
                    Some(v) => v.clone(),
                    None => match const_value(graph, o.node) {
                        Some(v) => {
                            values.insert(o.node, v.clone());
                            v
                        }
                        None => {
                            all_const = false;
                            break;
                        }
                    },
                };
                if v.dtype() == DType::String {
                    all_const = false;
                    break;
                }
                inputs.push(v);
                for &c in &p.control_inputs {
                    if !controls.contains(&c) {
                        controls.push(c);
                    }
                }
            }
            if !all_const || !kernels.has_op(&n.op) {
                continue;
            }
            // Never allocate a result over the size cap: check the static output sizes first
            // (ops that can grow their input are only folded when those sizes are known).
            let cap = ctx.options.max_folded_constant_bytes;
            let sizes: Option<Vec<usize>> = shapes.as_ref().and_then(|s| {
                s.get(id)?
                    .iter()
                    .zip(&n.types.outputs)
                    .map(|(sh, d)| Some(sh.num_elements()? * d.size().unwrap_or(8)))
                    .collect()
            });
            let sizes = sizes.or_else(|| {
                let e = grown_elements(&n.op, &inputs)?;
                Some(vec![e.saturating_mul(n.types.outputs.first()?.size().unwrap_or(8))])
            });
            match sizes {
                Some(sizes) if sizes.iter().sum::<usize>() > cap => continue,
                None if GROWING.contains(&n.op.as_str()) => continue,
                _ => {}
            }
            // A kernel error here is left for run time to report, with the node's name.
            let Ok(outputs) = run_op(&n.op, &n.attrs, inputs, &kctx) else { continue };
            let bytes: usize = outputs.iter().map(|t| t.len() * t.dtype().size().unwrap_or(8)).sum();
            if bytes > ctx.options.max_folded_constant_bytes || outputs.len() != n.num_outputs() {
                continue;
            }
            if outputs.iter().zip(&n.types.outputs).any(|(t, d)| t.dtype() != *d) {
                continue;
            }
            if outputs.len() == 1 {
                let v = outputs.into_iter().next().expect("one output");
                make_const(graph, id, &v, controls);
                ctx.report.folded.push(graph.node(id).name.clone());
                values.insert(id, v);
                continue;
            }
            let name = n.name.clone();
            let device = n.device.clone();
            for (i, v) in outputs.into_iter().enumerate() {
                let new_name = graph.unique_name(&format!("ConstantFolding/{name}-folded-{i}"));
                let spec = NodeSpec {
                    name: new_name.clone(),
                    op: "Const".into(),
                    control_inputs: controls.clone(),
                    device: device.clone(),
                    ..Default::default()
                };
                let c = graph.add_node(spec_with_value(spec, &v), OpRegistry::global())?;
                values.insert(c, v);
                map.insert(Output { node: id, index: i }, Output { node: c, index: 0 });
                ctx.report.added.push(new_name);
            }
            ctx.report.folded.push(name);
        }
        rewire(graph, &map);
        remove_orphans(graph, ctx)?;
        Ok(())
    }
}

fn spec_with_value(mut spec: NodeSpec, v: &Tensor) -> NodeSpec {
    spec.attrs.insert("dtype".into(), crate::util::type_attr(v.dtype()));
    spec.attrs.insert("value".into(), crate::util::tensor_attr(v));
    spec
}
