//! Fusion (TensorFlow's remapper): `MatMul + BiasAdd (+ activation)` into `_FusedMatMul`,
//! `Conv2D + BiasAdd (+ activation)` into `_FusedConv2D`, and chains of elementwise ops into
//! one `_FusedElementwise` that makes a single pass over memory.
//!
//! Exact: the fused kernels call the same scalar functions in the same order as the unfused
//! ones. As in TensorFlow, the fused node takes the name of the last node of the pattern (so
//! fetches keep working), and a pattern is only fused when every absorbed node has a single
//! data consumer, no control edges, and is not protected.
use std::collections::HashMap;

use ferroflow_graph::{Attrs, Graph, NodeId, NodeTypes, Output};
use ferroflow_ops::{BinaryFn, Elementwise, OpRegistry};
use ferroflow_proto::attr::AttrMap;
use ferroflow_proto::{attr, attr_value};
use ferroflow_tensor::DType;

use crate::util::{control_consumers, data_consumers, remove_orphans};
use crate::{OptimizeError, Pass, PassContext};

/// MatMul/Conv2D + BiasAdd (+ activation) fusion.
pub struct ContractionFusion;

/// Elementwise chain fusion.
pub struct ElementwiseFusion;

/// The registry's elementwise facts of `op`.
fn elementwise(op: &str) -> Option<Elementwise> {
    OpRegistry::global().facts(op).and_then(|f| f.elementwise)
}

struct Edges {
    data: Vec<Vec<(NodeId, usize)>>,
    ctrl: Vec<Vec<NodeId>>,
}

impl Edges {
    fn new(graph: &Graph) -> Edges {
        Edges { data: data_consumers(graph), ctrl: control_consumers(graph) }
    }

    /// True if `id` can disappear into a fusion whose next node is its only consumer.
    fn absorbable(&self, graph: &Graph, ctx: &PassContext, id: NodeId, device: &str) -> bool {
        let n = graph.node(id);
        self.data[id].len() == 1
            && self.ctrl[id].is_empty()
            && n.control_inputs.is_empty()
            && !ctx.is_protected(graph, id)
            && n.device == device
    }
}

impl Pass for ContractionFusion {
    fn name(&self) -> &'static str {
        "contraction_fusion"
    }

    fn run(&self, graph: &mut Graph, ctx: &mut PassContext) -> Result<(), OptimizeError> {
        let folded_pads = fold_pads(graph, ctx) | fuse_conv_epilogues(graph, ctx) | fuse_conv_prologues(graph, ctx);
        let edges = Edges::new(graph);
        let shapes = ferroflow_ops::infer_shapes(graph).unwrap_or_default();
        let shape =
            |o: Output| shapes.get(o.node).and_then(|s| s.get(o.index)).and_then(|s| s.dims().map(<[_]>::to_vec));
        let mut fused_any = false;
        for bias_id in 0..graph.len() {
            let b = graph.node(bias_id);
            let is_bias = match b.op.as_str() {
                "BiasAdd" => b.attrs.string_attr("data_format").is_none_or(|f| f == "NHWC"),
                // `x + b` with b a vector as long as x's last axis is BiasAdd (same additions,
                // same operand order); TensorFlow's remapper fuses it too.
                op if elementwise(op) == Some(Elementwise::Binary(BinaryFn::Add)) => {
                    match (shape(b.inputs[0]), shape(b.inputs[1])) {
                        (Some(x), Some(v)) => v.len() == 1 && v[0].is_some() && x.len() >= 2 && x.last() == v.first(),
                        _ => false,
                    }
                }
                _ => false,
            };
            if !is_bias {
                continue;
            }
            let dtype = b.types.outputs[0];
            let contraction = b.inputs[0];
            let c = graph.node(contraction.node);
            let fused_op = match c.op.as_str() {
                "MatMul" if dtype == DType::Float => "_FusedMatMul",
                "Conv2D"
                    if matches!(dtype, DType::Float | DType::Double)
                        && c.attrs.string_attr("data_format").is_none_or(|f| f == "NHWC") =>
                {
                    "_FusedConv2D"
                }
                _ => continue,
            };
            if !edges.absorbable(graph, ctx, contraction.node, &b.device) || !b.control_inputs.is_empty() {
                continue;
            }
            // Extend with the activation when the BiasAdd's only consumer is one.
            let mut root = bias_id;
            let mut activation = None;
            if let [(a, 0)] = edges.data[bias_id].as_slice() {
                let an = graph.node(*a);
                if OpRegistry::global().facts(&an.op).is_some_and(|f| f.activation)
                    && edges.absorbable(graph, ctx, bias_id, &an.device)
                    && an.control_inputs.is_empty()
                {
                    root = *a;
                    activation = Some(an.op.clone());
                }
            }
            if ctx.out_of_time() {
                break;
            }
            let (c, b) = (graph.node(contraction.node).clone(), graph.node(bias_id).clone());
            let mut attrs: Attrs = c.attrs.clone();
            attrs.remove("_class");
            let mut ops = vec!["BiasAdd"];
            if let Some(a) = &activation {
                ops.push(a.as_str());
            }
            attrs.insert("fused_ops".into(), attr::strings(&ops));
            attrs.insert("num_args".into(), attr::int(1));
            attrs.insert("epsilon".into(), attr::float(0.0001));
            let alpha = match activation.as_deref() {
                Some("LeakyRelu") => match graph.node(root).attrs.attr_value("alpha") {
                    Some(attr_value::Value::F(f)) => *f,
                    _ => 0.2,
                },
                _ => 0.2,
            };
            attrs.insert("leakyrelu_alpha".into(), attr::float(alpha));
            if fused_op == "_FusedConv2D" {
                attrs.insert("TArgs".into(), attr::dtypes(&[dtype]));
                attrs.insert("num_host_args".into(), attr::int(0));
            }
            let mut absorbed = vec![c.name.clone()];
            if root != bias_id {
                absorbed.push(b.name.clone());
            }
            let r = graph.node_mut(root);
            r.op = fused_op.to_string();
            r.inputs = vec![c.inputs[0], c.inputs[1], b.inputs[1]];
            r.attrs = attrs;
            r.device = c.device.clone();
            r.types = NodeTypes { inputs: vec![dtype; 3], outputs: vec![dtype] };
            r.experimental_type = None;
            ctx.report.fused.push((r.name.clone(), absorbed, fused_op.to_string()));
            fused_any = true;
        }
        let pooled = fuse_max_pools(graph, ctx);
        if fused_any || folded_pads || pooled {
            remove_orphans(graph, ctx)?;
        }
        Ok(())
    }
}

/// A `MaxPool` of non-overlapping windows (`ksize == strides`, VALID, NHWC) whose input is a
/// fused convolution's only output use (`_FusedConv2D` with a bias and an activation a
/// program can replay, or `_FusedConv2DElementwise`) becomes that convolution with
/// `max_pool = [ph, pw]`: the kernel pools each block of the convolution's output while it
/// is in cache, so the unpooled output (4× the pooled one for 2×2 windows) is never written
/// to memory and read back (the small CNN's two pools after its convolutions). Exact: the
/// same maxima in the same order. The fused node keeps the `MaxPool`'s name.
fn fuse_max_pools(graph: &mut Graph, ctx: &mut PassContext) -> bool {
    let edges = Edges::new(graph);
    let ints = |attrs: &Attrs, name: &str| match attrs.get(name).and_then(|a| a.value.as_ref()) {
        Some(attr_value::Value::List(l)) => l.i.clone(),
        _ => vec![],
    };
    let mut fused = false;
    for pool_id in 0..graph.len() {
        let p = graph.node(pool_id);
        if p.op != "MaxPool" || !p.control_inputs.is_empty() || p.inputs.len() != 1 || p.inputs[0].index != 0 {
            continue;
        }
        let (ksize, strides) = (ints(&p.attrs, "ksize"), ints(&p.attrs, "strides"));
        let window = match ksize[..] {
            [1, ph, pw, 1] if ph >= 1 && pw >= 1 && ksize == strides => [ph, pw],
            _ => continue,
        };
        if p.attrs.string_attr("padding").as_deref() != Some("VALID")
            || p.attrs.string_attr("data_format").is_some_and(|f| f != "NHWC")
        {
            continue;
        }
        let conv = p.inputs[0].node;
        let c = graph.node(conv);
        let program: Vec<String> = match c.op.as_str() {
            "_FusedConv2D" => match bias_prefix(c) {
                Some(lines) => lines.iter().map(|l| l.replace("{bias}", "a1")).collect(),
                None => continue,
            },
            "_FusedConv2DElementwise" if ints(&c.attrs, "max_pool").is_empty() => vec![],
            _ => continue,
        };
        if c.types.outputs.first() != p.types.outputs.first()
            || !edges.absorbable(graph, ctx, conv, &p.device)
            || ctx.out_of_time()
        {
            continue;
        }
        let c = c.clone();
        let mut attrs = c.attrs.clone();
        attrs.remove("_class");
        if c.op == "_FusedConv2D" {
            for k in FUSED_CONV2D_ONLY_ATTRS {
                attrs.remove(k);
            }
            attrs.insert("program".into(), attr::strings(&program.iter().map(String::as_str).collect::<Vec<_>>()));
            attrs.insert("N".into(), attr::int(1));
        }
        attrs.insert("max_pool".into(), attr::ints(&window));
        let n = graph.node_mut(pool_id);
        n.op = "_FusedConv2DElementwise".to_string();
        n.types = NodeTypes { inputs: c.types.inputs.clone(), outputs: c.types.outputs.clone() };
        n.inputs = c.inputs.clone();
        n.attrs = attrs;
        n.experimental_type = None;
        ctx.report.fused.push((n.name.clone(), vec![c.name.clone()], n.op.clone()));
        fused = true;
    }
    fused
}

/// The attributes of `Conv2D`/`_FusedConv2D` that `_FusedConv2DElementwise` does not have.
const FUSED_CONV2D_ONLY_ATTRS: [&str; 8] = [
    "fused_ops",
    "num_args",
    "num_host_args",
    "epsilon",
    "leakyrelu_alpha",
    "TArgs",
    "use_cudnn_on_gpu",
    "filter_format",
];

/// A convolution whose one consumer is a `_FusedElementwise` taking it as operand `a0` becomes
/// one node that runs the program on the convolution's output while it is in cache:
/// `DepthwiseConv2dNative` → `_FusedDepthwiseConv2dElementwise` (every other operand a scalar
/// or a vector of the output channels: MobileNet's frozen BatchNormalization and Relu6);
/// `Conv2D` and `_FusedConv2D` (bias, optional activation) → `_FusedConv2DElementwise`
/// (operands may also have the output's shape: ResNet's residual `Add` + `Relu`; the bias and
/// activation become the program's first instructions, `Add` being `BiasAdd`'s addition).
/// Exact: the same program over the same values. The fused node keeps the
/// `_FusedElementwise`'s name.
fn fuse_conv_epilogues(graph: &mut Graph, ctx: &mut PassContext) -> bool {
    let edges = Edges::new(graph);
    let shapes = ferroflow_ops::infer_shapes(graph).unwrap_or_default();
    let dims = |o: Output| shapes.get(o.node).and_then(|s| s.get(o.index)).and_then(|s| s.dims().map(<[_]>::to_vec));
    let mut fused = false;
    for e_id in 0..graph.len() {
        let e = graph.node(e_id);
        if e.op != "_FusedElementwise" || !e.control_inputs.is_empty() || e.inputs.is_empty() {
            continue;
        }
        // The convolution may be any operand (a residual join lists the shortcut first); it
        // becomes `a0` by swapping it with the operand there.
        let kind = |o: &Output| conv_epilogue(graph.node(o.node));
        let Some((at, (fused_op, prefix))) = e.inputs.iter().enumerate().find_map(|(i, o)| {
            (o.index == 0 && e.inputs.iter().filter(|x| *x == o).count() == 1)
                .then(|| kind(o).map(|k| (i, k)))
                .flatten()
        }) else {
            continue;
        };
        let conv = e.inputs[at];
        let d = graph.node(conv.node);
        if conv.index != 0
            || d.attrs.string_attr("data_format").is_some_and(|f| f != "NHWC")
            || d.types.outputs[0] != e.types.outputs[0]
            || !edges.absorbable(graph, ctx, conv.node, &e.device)
        {
            continue;
        }
        let Some(out) = dims(conv) else { continue };
        let Some(&Some(channels)) = out.last() else { continue };
        // Per-channel vectors and scalars for the depthwise kernel; also the output's own
        // shape for Conv2D's (the kernel checks the real shapes and broadcasts anything else
        // after the convolution).
        let full_ok = fused_op == "_FusedConv2DElementwise";
        let fits = e.inputs.iter().enumerate().filter(|&(i, _)| i != at).all(|(_, &o)| {
            dims(o).is_some_and(|d| {
                let trailing: Vec<Option<usize>> = d.iter().copied().skip_while(|&x| x == Some(1)).collect();
                keeps_shape(&d, &out) && (trailing.is_empty() || trailing == [Some(channels)] || full_ok)
            })
        });
        if !fits || ctx.out_of_time() {
            continue;
        }
        let (d, mut e) = (graph.node(conv.node).clone(), graph.node(e_id).clone());
        let Some(lines) = program(&e) else { continue };
        e.inputs.swap(0, at);
        let lines: Vec<String> = lines.iter().map(|l| swap_program_args(l, at)).collect();
        let dtype = e.types.outputs[0];
        let mut attrs: Attrs = d.attrs.clone();
        for k in std::iter::once("_class").chain(FUSED_CONV2D_ONLY_ATTRS) {
            attrs.remove(k);
        }
        let (program, inputs) = if d.op == fused_op {
            // Already fused: the new program runs after the old one (if any), on its result
            // (`a0` becomes the old program's last register) with its operands after the old
            // ones and before a prologue's.
            let old = match program_lines(&d).is_empty() {
                true => vec![],
                false => match program_of_fused_conv(&d) {
                    Some(old) => old,
                    None => continue,
                },
            };
            let epilogue_end = d.inputs.len() - prologue_args(&d);
            let (p, m) = (old.len(), epilogue_end - 2);
            let mut program = old;
            program.extend(lines.iter().map(|l| shift_program_operands(&shift_program_line(l, p), m)));
            let inputs: Vec<Output> = d.inputs[..epilogue_end]
                .iter()
                .chain(&e.inputs[1..])
                .chain(&d.inputs[epilogue_end..])
                .copied()
                .collect();
            (program, inputs)
        } else {
            // `a0` becomes the prefix's result; the bias is the last operand.
            let p = prefix.len();
            let bias_arg = e.inputs.len();
            let mut program: Vec<String> =
                prefix.iter().map(|l| l.replace("{bias}", &format!("a{bias_arg}"))).collect();
            program.extend(lines.iter().map(|l| shift_program_line(l, p)));
            let mut inputs: Vec<Output> =
                [d.inputs[0], d.inputs[1]].into_iter().chain(e.inputs[1..].iter().copied()).collect();
            if p > 0 {
                inputs.push(d.inputs[2]);
            }
            (program, inputs)
        };
        attrs.insert("program".into(), attr::strings(&program.iter().map(String::as_str).collect::<Vec<_>>()));
        attrs.insert("N".into(), attr::int(inputs.len() as i64 - 2));
        let n = graph.node_mut(e_id);
        n.op = fused_op.to_string();
        n.types = NodeTypes { inputs: vec![dtype; inputs.len()], outputs: vec![dtype] };
        n.inputs = inputs;
        n.attrs = attrs;
        n.experimental_type = None;
        ctx.report.fused.push((n.name.clone(), vec![d.name.clone()], n.op.clone()));
        fused = true;
    }
    fused
}

/// A node's `program` lines (none when it has no such attr).
fn program_lines(n: &ferroflow_graph::Node) -> Vec<String> {
    match n.attrs.attr_value("program") {
        Some(attr_value::Value::List(l)) => l.s.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect(),
        _ => vec![],
    }
}

/// How many of a `_FusedConv2DElementwise`'s operands (the last ones) are its prologue's.
fn prologue_args(n: &ferroflow_graph::Node) -> usize {
    match n.attrs.attr_value("prologue_args") {
        Some(attr_value::Value::I(k)) => usize::try_from(*k).unwrap_or(0).min(n.inputs.len().saturating_sub(2)),
        _ => 0,
    }
}

/// Whether a node has a non-empty `prologue` program.
fn has_prologue(n: &ferroflow_graph::Node) -> bool {
    matches!(n.attrs.attr_value("prologue"), Some(attr_value::Value::List(l)) if !l.s.is_empty())
}

/// Fewest input channels for which a pointwise convolution takes a prologue (fewer run as
/// the direct convolution, which reads the input whole: the prologue would then be applied
/// to a copy of all of it, no gain).
const PROLOGUE_MIN_CHANNELS: usize = 8;

/// A `_FusedElementwise` over one NHWC tensor (`a0`, of the output's shape) and per-channel
/// vectors or scalars — a frozen pre-activation BatchNormalization and its ReLU, as in
/// DenseNet's layers and transitions and ResNetV2's blocks — whose every consumer is a
/// pointwise convolution (1×1, stride 1, not explicitly padded; `Conv2D`, `_FusedConv2D`,
/// `_FusedConv2DElementwise`) taking it as its input, becomes those convolutions' `prologue`:
/// each runs the program on its blocks of input rows, in cache, before its GEMM reads them,
/// so the activated tensor is never written to memory and read back. Exact: the same program
/// over the same values, into the same GEMM. Its operands become the convolutions' last
/// ones (`prologue_args` of them).
fn fuse_conv_prologues(graph: &mut Graph, ctx: &mut PassContext) -> bool {
    let edges = Edges::new(graph);
    let shapes = ferroflow_ops::infer_shapes(graph).unwrap_or_default();
    let dims = |o: Output| shapes.get(o.node).and_then(|s| s.get(o.index)).and_then(|s| s.dims().map(<[_]>::to_vec));
    let ints = |attrs: &Attrs, name: &str| match attrs.get(name).and_then(|a| a.value.as_ref()) {
        Some(attr_value::Value::List(l)) => Some(l.i.clone()),
        _ => None,
    };
    let mut fused = false;
    for e_id in 0..graph.len() {
        let e = graph.node(e_id);
        let single = matches!(elementwise(&e.op), Some(Elementwise::Binary(_))) && is_fusible(graph, e_id);
        if (e.op != "_FusedElementwise" && !single)
            || !e.control_inputs.is_empty()
            || e.inputs.is_empty()
            || e.types.outputs.len() != 1
            || !edges.ctrl[e_id].is_empty()
            || edges.data[e_id].is_empty()
            || ctx.is_protected(graph, e_id)
        {
            continue;
        }
        // A lone binary op (a squeeze-and-excite `Multiply`) as a one-line program over its
        // NHWC operand (`a0`) and the other.
        let (lines, e_inputs) = match single {
            false => match program(e) {
                Some(lines) => (lines, e.inputs.clone()),
                None => continue,
            },
            true if dims(e.inputs[0]) == dims(Output { node: e_id, index: 0 }) => {
                (vec![format!("{} a0 a1", e.op)], e.inputs.clone())
            }
            true => (vec![format!("{} a1 a0", e.op)], vec![e.inputs[1], e.inputs[0]]),
        };
        let Some(x) = dims(e_inputs[0]) else { continue };
        let Some(&Some(channels)) = x.last() else { continue };
        if x.len() != 4 || channels < PROLOGUE_MIN_CHANNELS || dims(Output { node: e_id, index: 0 }) != Some(x.clone())
        {
            continue;
        }
        // Per channel, or per image and channel for a chain program (the kernel's
        // `RowOperand::PerImage`: a squeeze-and-excite scale).
        let chain = lines.len() == 1
            || lines.iter().skip(1).enumerate().all(|(i, l)| l.split_whitespace().any(|w| w == format!("r{i}")));
        let per_channel = e_inputs[1..].iter().all(|&o| {
            dims(o).is_some_and(|d| {
                let trailing: Vec<Option<usize>> = d.iter().copied().skip_while(|&v| v == Some(1)).collect();
                let per_image = chain
                    && d.len() == 4
                    && d[1..] == [Some(1), Some(1), Some(channels)]
                    && (d[0] == x[0] || d[0].is_none() || x[0].is_none());
                per_image || (d.len() <= 4 && (trailing.is_empty() || trailing == [Some(channels)]))
            })
        });
        if !per_channel {
            continue;
        }
        let dtype = e.types.outputs[0];
        let pointwise = |&(c_id, slot): &(NodeId, usize)| {
            let c = graph.node(c_id);
            let conv_op = match c.op.as_str() {
                "Conv2D" => true,
                "_FusedConv2D" => bias_prefix(c).is_some(),
                "_FusedConv2DElementwise" => !has_prologue(c),
                _ => false,
            };
            conv_op
                && slot == 0
                && c.inputs[0] == Output { node: e_id, index: 0 }
                && c.inputs.iter().filter(|o| o.node == e_id).count() == 1
                && c.device == e.device
                && c.types.outputs.first() == Some(&dtype)
                && c.attrs.string_attr("data_format").is_none_or(|f| f == "NHWC")
                && matches!(c.attrs.string_attr("padding").as_deref(), Some("VALID" | "SAME"))
                && ints(&c.attrs, "strides").is_none_or(|s| s.iter().all(|&v| v == 1))
                && dims(c.inputs[1]).is_some_and(|f| f.len() == 4 && f[..3] == [Some(1), Some(1), Some(channels)])
        };
        if !edges.data[e_id].iter().all(pointwise) || ctx.out_of_time() {
            continue;
        }
        let e = ferroflow_graph::Node { inputs: e_inputs, ..e.clone() };
        let m = e.inputs.len() - 1;
        for &(c_id, _) in &edges.data[e_id] {
            let c = graph.node(c_id).clone();
            let mut attrs = c.attrs.clone();
            for k in std::iter::once("_class").chain(FUSED_CONV2D_ONLY_ATTRS) {
                attrs.remove(k);
            }
            let (program, mut inputs): (Vec<String>, Vec<Output>) = match c.op.as_str() {
                "Conv2D" => (vec![], vec![e.inputs[0], c.inputs[1]]),
                "_FusedConv2D" => {
                    let prefix = bias_prefix(&c).expect("checked above");
                    (
                        prefix.iter().map(|l| l.replace("{bias}", "a1")).collect(),
                        vec![e.inputs[0], c.inputs[1], c.inputs[2]],
                    )
                }
                _ => {
                    let mut inputs = c.inputs.clone();
                    inputs[0] = e.inputs[0];
                    (program_lines(&c), inputs)
                }
            };
            inputs.extend_from_slice(&e.inputs[1..]);
            attrs.insert("program".into(), attr::strings(&program.iter().map(String::as_str).collect::<Vec<_>>()));
            attrs.insert("prologue".into(), attr::strings(&lines.iter().map(String::as_str).collect::<Vec<_>>()));
            attrs.insert("prologue_args".into(), attr::int(m as i64));
            attrs.insert("N".into(), attr::int(inputs.len() as i64 - 2));
            let n = graph.node_mut(c_id);
            n.op = "_FusedConv2DElementwise".to_string();
            n.types = NodeTypes { inputs: vec![dtype; inputs.len()], outputs: vec![dtype] };
            n.inputs = inputs;
            n.attrs = attrs;
            n.experimental_type = None;
            ctx.report.fused.push((n.name.clone(), vec![e.name.clone()], n.op.clone()));
        }
        fused = true;
    }
    fused
}

/// Whether an epilogue operand of shape `operand` broadcasts into the convolution's output
/// `out` without growing it (aligned from the last axis, each of its axes is 1 or the output's),
/// so the fused node's output is the convolution's: a squeeze-and-excite `Multiply` whose
/// convolution gives the 1x1 side is left unfused, its other side being the larger one.
fn keeps_shape(operand: &[Option<usize>], out: &[Option<usize>]) -> bool {
    operand.len() <= out.len() && operand.iter().rev().zip(out.iter().rev()).all(|(&a, &o)| a == Some(1) || a == o)
}

/// The fused op a convolution becomes with a `_FusedElementwise` as its epilogue, and the
/// program lines that come first (a `_FusedConv2D`'s bias and activation); `None` for nodes
/// that take no such epilogue.
fn conv_epilogue(n: &ferroflow_graph::Node) -> Option<(&'static str, Vec<String>)> {
    match n.op.as_str() {
        "DepthwiseConv2dNative" => Some(("_FusedDepthwiseConv2dElementwise", vec![])),
        "Conv2D" => Some(("_FusedConv2DElementwise", vec![])),
        "_FusedConv2D" => bias_prefix(n).map(|p| ("_FusedConv2DElementwise", p)),
        // A fused convolution takes a further program (BatchNorm fused first, then the swish
        // after it) unless it pools its output.
        "_FusedDepthwiseConv2dElementwise" => Some(("_FusedDepthwiseConv2dElementwise", vec![])),
        "_FusedConv2DElementwise" if !n.attrs.contains_key("max_pool") => Some(("_FusedConv2DElementwise", vec![])),
        _ => None,
    }
}

/// A fused convolution's program, checked as [`program`] checks one (operands `a0`, the
/// convolution's output, to `a{N}`).
fn program_of_fused_conv(n: &ferroflow_graph::Node) -> Option<Vec<String>> {
    let mut as_elementwise = n.clone();
    as_elementwise.inputs.remove(0); // the input and filter are one operand, `a0`
    program(&as_elementwise)
}

/// A program line with operands `a1..` renumbered `a{1+m}..` (`a0` and registers unchanged):
/// the operands of a program appended after one with `m` operands of its own.
fn shift_program_operands(line: &str, m: usize) -> String {
    line.split_whitespace()
        .enumerate()
        .map(|(i, tok)| match (i, tok.split_at(1)) {
            (0, _) => tok.to_string(),
            (_, ("a", k)) => match k.parse::<usize>() {
                Ok(k) if k > 0 => format!("a{}", k + m),
                _ => tok.to_string(),
            },
            _ => tok.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The program lines that replay a `_FusedConv2D`'s epilogue (`{bias}` standing for the bias
/// operand): `Add a0 {bias}`, then its activation; `None` for epilogues a program cannot
/// express (`LeakyRelu` carries an alpha).
fn bias_prefix(d: &ferroflow_graph::Node) -> Option<Vec<String>> {
    let ops: Vec<String> = match d.attrs.attr_value("fused_ops") {
        Some(attr_value::Value::List(l)) => l.s.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect(),
        _ => return None,
    };
    if d.inputs.len() != 3 || ops.first().map(String::as_str) != Some("BiasAdd") || ops.len() > 2 {
        return None;
    }
    let mut lines = vec!["Add a0 {bias}".to_string()];
    if let Some(act) = ops.get(1) {
        if !matches!(elementwise(act), Some(Elementwise::Unary(_))) {
            return None;
        }
        lines.push(format!("{act} r0"));
    }
    Some(lines)
}

/// A program line with operands `a0` and `a{k}` swapped.
fn swap_program_args(line: &str, k: usize) -> String {
    if k == 0 {
        return line.to_string();
    }
    let (zero, other) = ("a0".to_string(), format!("a{k}"));
    line.split_whitespace()
        .enumerate()
        .map(|(i, tok)| match tok {
            t if i > 0 && t == zero => other.clone(),
            t if i > 0 && t == other => zero.clone(),
            t => t.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A program line with `p` instructions put before it: `a0` becomes `r{p-1}` and `rK`
/// becomes `r{K+p}` (no change when `p` is 0).
fn shift_program_line(line: &str, p: usize) -> String {
    if p == 0 {
        return line.to_string();
    }
    line.split_whitespace()
        .enumerate()
        .map(|(i, tok)| match (i, tok.split_at(1)) {
            (0, _) => tok.to_string(),
            (_, ("a", "0")) => format!("r{}", p - 1),
            (_, ("r", k)) => k.parse::<usize>().map_or_else(|_| tok.to_string(), |k| format!("r{}", k + p)),
            _ => tok.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Folds a zero `Pad` of the spatial axes into the `VALID` convolution that consumes it
/// (`Conv2D`, `DepthwiseConv2dNative`): the convolution takes the unpadded input with
/// `padding = EXPLICIT` and the pad amounts, so the padded copy is never made (Keras'
/// MobileNetV2 and EfficientNet pad before each stride-2 depthwise convolution, frozen or
/// not). Exact for any filter, constant or a variable's value: the kernels skip a padding tap
/// only when every filter value is finite (its `0 * w` is then a zero that leaves the sum
/// unchanged) and pad the input themselves otherwise (`Window::materialized`). Only NHWC, a
/// constant pad of zeros on H and W alone, and a `Pad` whose one consumer is the convolution.
fn fold_pads(graph: &mut Graph, ctx: &mut PassContext) -> bool {
    let edges = Edges::new(graph);
    let mut folded = false;
    for conv_id in 0..graph.len() {
        let c = graph.node(conv_id);
        if !matches!(c.op.as_str(), "Conv2D" | "DepthwiseConv2dNative")
            || c.attrs.string_attr("padding").as_deref() != Some("VALID")
            || c.attrs.string_attr("data_format").is_some_and(|f| f != "NHWC")
            || !matches!(c.types.outputs[0], DType::Float | DType::Double)
        {
            continue;
        }
        let pad = c.inputs[0];
        let p = graph.node(pad.node);
        let zero_fill = match p.op.as_str() {
            "Pad" => true,
            "PadV2" => crate::util::const_value(graph, p.inputs[2].node).is_some_and(|v| match v.dtype() {
                DType::Float => v.as_slice::<f32>().is_ok_and(|s| s == [0.0]),
                DType::Double => v.as_slice::<f64>().is_ok_and(|s| s == [0.0]),
                _ => false,
            }),
            _ => false,
        };
        if !zero_fill || pad.index != 0 || !edges.absorbable(graph, ctx, pad.node, &c.device) {
            continue;
        }
        let Some(amounts) = crate::util::const_value(graph, p.inputs[1].node).and_then(|t| match t.dtype() {
            DType::Int32 => t.as_slice::<i32>().ok().map(|v| v.iter().map(|&x| i64::from(x)).collect::<Vec<i64>>()),
            DType::Int64 => t.as_slice::<i64>().ok().map(<[i64]>::to_vec),
            _ => None,
        }) else {
            continue;
        };
        if amounts.len() != 8 || amounts[..2] != [0, 0] || amounts[6..] != [0, 0] || amounts.iter().any(|&a| a < 0) {
            continue;
        }
        if ctx.out_of_time() {
            continue;
        }
        let (source, pad_name) = (p.inputs[0], p.name.clone());
        let c = graph.node_mut(conv_id);
        c.inputs[0] = source;
        c.attrs.insert("padding".into(), attr::string("EXPLICIT"));
        c.attrs.insert("explicit_paddings".into(), attr::ints(&amounts));
        ctx.report.fused.push((c.name.clone(), vec![pad_name], c.op.clone()));
        folded = true;
    }
    folded
}

/// The program of a `_FusedElementwise` node, if it is well formed (known ops, operands in
/// range, non-empty); a malformed one is left for its kernel to report.
fn program(n: &ferroflow_graph::Node) -> Option<Vec<String>> {
    let lines = program_lines(n);
    let ok = !lines.is_empty()
        && lines.iter().enumerate().all(|(i, line)| {
            let mut parts = line.split_whitespace();
            let op = parts.next().unwrap_or_default();
            let Some(arity) = elementwise(op).map(Elementwise::arity) else { return false };
            let operands: Vec<&str> = parts.collect();
            operands.len() == arity
                && operands.iter().all(|p| {
                    let (kind, num) = p.split_at(1.min(p.len()));
                    match (kind, num.parse::<usize>()) {
                        ("a", Ok(k)) => k < n.inputs.len(),
                        ("r", Ok(k)) => k < i,
                        _ => false,
                    }
                })
        });
    ok.then_some(lines)
}

fn is_fusible(graph: &Graph, id: NodeId) -> bool {
    let n = graph.node(id);
    let op = n.op.as_str();
    (elementwise(op).is_some() || (op == "_FusedElementwise" && program(n).is_some()))
        && n.types.outputs.len() == 1
        && matches!(n.types.outputs[0], DType::Float | DType::Double)
        && n.types.inputs.iter().all(|&t| t == n.types.outputs[0])
}

/// A cluster being built: its arguments (external tensors) and instructions.
struct Cluster<'a> {
    args: Vec<Output>,
    program: Vec<String>,
    absorbed: Vec<String>,
    /// The convolution whose chain (see [`conv_chains`]) the cluster has taken nodes of.
    conv: Option<NodeId>,
    /// The graph's inferred shapes and the root's output dims.
    shapes: &'a [Vec<ferroflow_tensor::Shape>],
    root: Option<Vec<Option<usize>>>,
}

impl Cluster<'_> {
    /// Whether `o` is known to have fewer elements than the cluster's output (a lower rank, or
    /// a 1 where the output's axis is larger): a producer broadcast into the cluster, which the
    /// program would recompute for every element of the output — Keras' `Normalization`
    /// computes `sqrt(variance)` of its `[1, 1, 1, C]` statistics, on a 224×224 batch of 32 that
    /// is 4.8 M square roots for 3 values. Such a producer stays a node of its own (or the
    /// root of a small cluster); its values are the same.
    fn broadcast_into(&self, o: Output) -> bool {
        let dims = self.shapes.get(o.node).and_then(|s| s.get(o.index)).and_then(|s| s.dims());
        match (dims, &self.root) {
            (Some(d), Some(root)) => {
                d.len() < root.len()
                    || d.iter().rev().zip(root.iter().rev()).any(|(&a, &r)| a == Some(1) && r != Some(1))
            }
            _ => false,
        }
    }
}

/// For each node, the convolution whose chain it is on: the elementwise nodes that follow a
/// convolution's output one single consumer at a time. A cluster takes nodes of one chain
/// only, so a join of two convolutions' chains (ResNet's first block of a stage: the shortcut
/// convolution's BatchNormalization added to the main path's) leaves the second chain to
/// fuse into its own convolution, and the join's program stays a chain (each instruction
/// reading the previous result), which the convolution's epilogue runs in place in L1: the
/// two-branch program took ResNet50's `conv2_block1_out` at batch 32 on one thread 57.6 ms
/// against 41.0 ms for `conv2_block2_out`, the same convolution with a one-branch program.
fn conv_chains(graph: &Graph, edges: &Edges) -> Vec<Option<NodeId>> {
    let mut chain = vec![None; graph.len()];
    for conv in 0..graph.len() {
        if conv_epilogue(graph.node(conv)).is_none() {
            continue;
        }
        let mut at = conv;
        while let [(next, _)] = edges.data[at].as_slice() {
            if !is_fusible(graph, *next) || chain[*next].is_some() {
                break;
            }
            chain[*next] = Some(conv);
            at = *next;
        }
    }
    chain
}

impl Cluster<'_> {
    /// Emits the instructions computing `o` (absorbing producers where allowed); returns the
    /// operand naming its value.
    #[allow(clippy::too_many_arguments)]
    fn emit(
        &mut self,
        graph: &Graph,
        ctx: &PassContext,
        edges: &Edges,
        o: Output,
        root_device: &str,
        top: bool,
        claimed: &mut [bool],
        chains: &[Option<NodeId>],
    ) -> String {
        let id = o.node;
        let other_chain = matches!((self.conv, chains[id]), (Some(a), Some(b)) if a != b);
        let absorb = top
            || (o.index == 0
                && is_fusible(graph, id)
                && !claimed[id]
                && !other_chain
                && !self.broadcast_into(o)
                && edges.absorbable(graph, ctx, id, root_device));
        if !absorb {
            let k = match self.args.iter().position(|a| *a == o) {
                Some(k) => k,
                None => {
                    self.args.push(o);
                    self.args.len() - 1
                }
            };
            return format!("a{k}");
        }
        claimed[id] = true;
        if self.conv.is_none() {
            self.conv = chains[id];
        }
        let n = graph.node(id);
        if !top {
            self.absorbed.push(n.name.clone());
        }
        if n.op == "_FusedElementwise" {
            // Inline an existing program: its args become operands here.
            let prog = program(n).expect("is_fusible checked the program");
            let operands: Vec<String> = n
                .inputs
                .iter()
                .map(|&i| self.emit(graph, ctx, edges, i, root_device, false, claimed, chains))
                .collect();
            let base = self.program.len();
            for line in prog {
                let mut parts = line.split_whitespace();
                let op = parts.next().unwrap_or_default().to_string();
                let mut out = op;
                for p in parts {
                    let (kind, num) = p.split_at(1);
                    let k: usize = num.parse().unwrap_or(0);
                    out.push(' ');
                    if kind == "a" {
                        out.push_str(&operands[k]);
                    } else {
                        out.push_str(&format!("r{}", base + k));
                    }
                }
                self.program.push(out);
            }
            return format!("r{}", self.program.len() - 1);
        }
        let operands: Vec<String> =
            n.inputs.iter().map(|&i| self.emit(graph, ctx, edges, i, root_device, false, claimed, chains)).collect();
        self.program.push(format!("{} {}", n.op, operands.join(" ")));
        format!("r{}", self.program.len() - 1)
    }
}

impl Pass for ElementwiseFusion {
    fn name(&self) -> &'static str {
        "elementwise_fusion"
    }

    fn run(&self, graph: &mut Graph, ctx: &mut PassContext) -> Result<(), OptimizeError> {
        let edges = Edges::new(graph);
        let order = graph.topological_order()?;
        let mut claimed = vec![false; graph.len()];
        let chains = conv_chains(graph, &edges);
        let shapes = ferroflow_ops::infer_shapes(graph).unwrap_or_default();
        let mut rewrites: Vec<(NodeId, Cluster)> = Vec::new();
        // Roots are visited consumers-first, so each cluster is as large as it can be.
        for &id in order.iter().rev() {
            if claimed[id] || !is_fusible(graph, id) {
                continue;
            }
            if ctx.out_of_time() {
                break;
            }
            let device = graph.node(id).device.clone();
            let root = shapes.get(id).and_then(|s| s.first()).and_then(|s| s.dims()).map(<[_]>::to_vec);
            let mut cl = Cluster { args: vec![], program: vec![], absorbed: vec![], conv: None, shapes: &shapes, root };
            let mut trial = claimed.clone();
            cl.emit(graph, ctx, &edges, Output { node: id, index: 0 }, &device, true, &mut trial, &chains);
            if cl.absorbed.is_empty() {
                continue;
            }
            claimed = trial;
            rewrites.push((id, cl));
        }
        let mut map: HashMap<Output, Output> = HashMap::new();
        map.clear();
        for (id, cl) in rewrites {
            let dtype = graph.node(id).types.outputs[0];
            let mut attrs = Attrs::new();
            attrs.insert("T".into(), attr::dtype(dtype));
            attrs.insert("N".into(), attr::int(cl.args.len() as i64));
            attrs.insert("program".into(), attr::strings(&cl.program));
            let n = graph.node_mut(id);
            n.op = "_FusedElementwise".into();
            n.types = NodeTypes { inputs: vec![dtype; cl.args.len()], outputs: vec![dtype] };
            n.inputs = cl.args;
            n.attrs = attrs;
            n.experimental_type = None;
            ctx.report.fused.push((
                n.name.clone(),
                cl.absorbed,
                format!("_FusedElementwise [{}]", cl.program.join("; ")),
            ));
        }
        remove_orphans(graph, ctx)?;
        Ok(())
    }
}
