//! Constant folding: nodes whose data inputs are all constant are evaluated once, with the
//! same CPU kernels the executor runs, and replaced by `Const` nodes. Ops whose value depends
//! only on their input's shape (`Shape`, `Size`, `Rank`, ...) fold when that shape is
//! statically known.
//!
//! Exact: the folded value is what the kernel would compute at run time (same kernel, same
//! inputs; kernels do not depend on the thread count for their results).
//!
//! Naming follows TensorFlow: a single-output node is rewritten in place (a fetched node keeps
//! its name, so `Mul` of `what_runs` becomes a `Const` named `Mul`); outputs of a multi-output
//! node become `ConstantFolding/<node>-folded-<i>`. The folded node's control inputs, and
//! those of the constants it read, carry over to the new constant.
use std::collections::HashMap;

use ferroflow_graph::{Graph, NodeId, NodeSpec, Output};
use ferroflow_kernels::{run_op, KernelContext, KernelRegistry};
use ferroflow_ops::{infer_node, infer_shapes, InferCtx, Known, OpRegistry};
use ferroflow_tensor::{DType, Tensor};

use crate::util::{const_value, has_control_flow, make_const, remove_orphans, rewire};
use crate::{OptimizeError, Pass, PassContext};

/// The constant-folding pass.
pub struct ConstantFolding;

/// A statically known value as the tensor an op of output dtype `out` would produce.
fn known_tensor(known: Known, out: DType) -> Option<Tensor> {
    match known {
        Known::Value(t) => (t.dtype() == out).then_some(t),
        Known::Shape(s) => {
            let dims = s.as_known()?;
            match out {
                DType::Int32 => {
                    let v: Vec<i32> = dims.into_iter().map(i32::try_from).collect::<Result<_, _>>().ok()?;
                    Tensor::from_vec(&[v.len()], v).ok()
                }
                DType::Int64 => {
                    let v: Vec<i64> = dims.into_iter().map(|d| d as i64).collect();
                    Tensor::from_vec(&[v.len()], v).ok()
                }
                _ => None,
            }
        }
        Known::Dim(d) => match out {
            DType::Int32 => Some(Tensor::scalar(i32::try_from(d?).ok()?)),
            DType::Int64 => Some(Tensor::scalar(i64::try_from(d?).ok()?)),
            _ => None,
        },
        Known::Handle(_) => None,
    }
}

/// The value of a node whose output depends only on its input's shape (the registry's
/// `shape_only` ops: `Shape`, `Size`, `Rank`, `ZerosLike`, ...) when that input is not
/// constant but has a statically known shape: from what inference knows of the output, or
/// by running the kernel on zeros of that shape when the result fits the folding cap.
fn static_value(
    graph: &Graph,
    id: NodeId,
    shapes: Option<&Vec<Vec<ferroflow_tensor::Shape>>>,
    ctx: &PassContext,
    kctx: &KernelContext,
) -> Option<Tensor> {
    let n = graph.node(id);
    let reg = OpRegistry::global();
    let def = reg.get(&n.op).filter(|d| d.facts.shape_only)?;
    if n.types.inputs.first() == Some(&ferroflow_tensor::DType::Variant) {
        return None; // a list's zeros depend on its length, not its (scalar) shape
    }
    let src = n.inputs[0];
    let producer = graph.node(src.node);
    if (producer.op == "Const" && !ctx.is_fed(graph, src.node)) || reg.is_control_flow(&producer.op) {
        return None; // plain folding handles constants; frames are left alone
    }
    let shape = shapes?.get(src.node)?.get(src.index)?;
    let out = n.types.outputs[0];
    let inputs = [shape.clone()];
    let icx = InferCtx { def, attrs: &n.attrs, inputs: &inputs, known: &[None], num_outputs: 1 };
    if let Some(known) = def.known_fn.and_then(|f| f(&icx)) {
        return known_tensor(known, out);
    }
    let dims = shape.as_known()?;
    if shape.num_elements()?.saturating_mul(out.size().unwrap_or(8)) > ctx.options.max_folded_constant_bytes {
        return None;
    }
    let zeros = Tensor::zeros(n.types.inputs[0], &dims).ok()?;
    run_op(&n.op, &n.attrs, vec![zeros], kctx).ok()?.into_iter().next()
}

/// The output shapes of a node whose inputs are these constants, by its shape function.
fn output_shapes(graph: &Graph, id: NodeId, inputs: &[Tensor]) -> Option<Vec<ferroflow_tensor::Shape>> {
    let n = graph.node(id);
    let def = OpRegistry::global().get(&n.op)?;
    let shapes: Vec<ferroflow_tensor::Shape> =
        inputs.iter().map(|t| ferroflow_tensor::Shape::known(t.dims())).collect();
    let known: Vec<Option<Known>> = inputs.iter().map(|t| Some(Known::Value(t.clone()))).collect();
    infer_node(def, &n.attrs, &shapes, &known).ok()
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
        let kctx = KernelContext { intra_op: None, resources: None, step: None };
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
            if OpRegistry::global().is_control_flow(&n.op) || ctx.library.is_call(&n.op) || ctx.is_fed(graph, id) {
                continue;
            }
            if ctx.is_protected(graph, id) && !(ctx.is_named_in_item(&n.name) && n.num_outputs() == 1) {
                continue;
            }
            if ctx.library.has_side_effects(&n.op) {
                continue;
            }
            // A variant (a TensorList, an Optional) has no `Const` form.
            if n.types.outputs.contains(&DType::Variant) {
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
            // Never allocate a result over the size cap: check the output sizes first, from
            // the op's shape function on these constants (ops that can grow their input are
            // only folded when those sizes are known).
            let cap = ctx.options.max_folded_constant_bytes;
            let sizes: Option<Vec<usize>> = output_shapes(graph, id, &inputs).and_then(|s| {
                s.iter()
                    .zip(&n.types.outputs)
                    .map(|(sh, d)| Some(sh.num_elements()?.saturating_mul(d.size().unwrap_or(8))))
                    .collect()
            });
            let grows = OpRegistry::global().facts(&n.op).is_some_and(|f| f.grows);
            match sizes {
                Some(sizes) if sizes.iter().fold(0usize, |a, &b| a.saturating_add(b)) > cap => continue,
                None if grows => continue,
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
    spec.attrs.insert("dtype".into(), ferroflow_proto::attr::dtype(v.dtype()));
    spec.attrs.insert("value".into(), crate::util::tensor_attr(v));
    spec
}
