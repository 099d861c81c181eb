//! `Einsum`.
use ferroflow_graph::Output;

use ferroflow_graph::ShapeError;
use ferroflow_proto::attr::AttrMap;
use ferroflow_tensor::Shape;

use crate::gradient::{g0, GradCtx, GradError, GradResult};
use crate::registry::{op, OpDef};
use crate::shape_inference::InferCtx;
use crate::{Ops, RawOps};

/// The einsum op.
pub fn defs() -> Vec<OpDef> {
    vec![op("Einsum")
        .input("inputs: N * T")
        .output("output: T")
        .attr("equation: string")
        .attr("N: int >= 1")
        .attr("T: type")
        .grows()
        .shape(einsum_shape)
        .gradient(einsum_grad)
        .build()]
}

/// An equation's operands' and output's labels, `...` kept as the one label `.`.
fn parse(equation: &str) -> Option<(Vec<Vec<char>>, Vec<char>)> {
    let labels =
        |s: &str| -> Vec<char> { s.trim().replace("...", ".").chars().filter(|c| !c.is_whitespace()).collect() };
    let (ins, out) = equation.split_once("->")?;
    Some((ins.split(',').map(labels).collect(), labels(out)))
}

/// The output's shape from the operands': each output label's size where an operand of known
/// rank gives it, the ellipsis the broadcast of the operands' (unknown if an operand's rank is).
fn einsum_shape(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let Some((ins, out)) = c.attrs.string_attr("equation").as_deref().and_then(parse) else {
        return Ok(vec![Shape::unknown()]);
    };
    let mut sizes: std::collections::HashMap<char, usize> = Default::default();
    let mut ellipsis: Option<Shape> = Some(Shape::scalar());
    for (subs, shape) in ins.iter().zip(c.inputs) {
        let Some(dims) = shape.dims() else {
            ellipsis = ellipsis.filter(|_| !subs.contains(&'.'));
            continue;
        };
        let named = subs.len() - usize::from(subs.contains(&'.'));
        let Some(extra) = dims.len().checked_sub(named) else { return Ok(vec![Shape::unknown()]) };
        let mut k = 0;
        for &l in subs {
            if l == '.' {
                let part = Shape::new(dims[k..k + extra].to_vec());
                ellipsis = ellipsis.and_then(|e| e.broadcast(&part));
                k += extra;
            } else {
                if let Some(d) = dims[k] {
                    sizes.insert(l, d);
                }
                k += 1;
            }
        }
    }
    let mut dims = Vec::new();
    for l in &out {
        if *l == '.' {
            match ellipsis.as_ref().and_then(|e| e.dims()) {
                Some(e) => dims.extend_from_slice(e),
                None => return Ok(vec![Shape::unknown()]),
            }
        } else {
            dims.push(sizes.get(l).copied());
        }
    }
    Ok(vec![Shape::new(dims)])
}

fn text(labels: &[char]) -> String {
    labels.iter().map(|&c| if c == '.' { "...".to_string() } else { c.to_string() }).collect()
}

/// TensorFlow's `_EinsumGrad` for one or two operands: the gradient of an operand is the
/// einsum of the output's gradient with the other operand onto the operand's labels; labels
/// summed away in the forward pass (in the operand only) come back by broadcasting. An
/// ellipsis must stand for the same dimensions in every operand (no broadcasting of it), and
/// an operand may not repeat a label (a diagonal).
fn einsum_grad(ctx: &GradCtx, gs: &[Option<Output>]) -> GradResult {
    let n = ctx.node.inputs.len();
    let Some(g) = g0(gs) else { return Ok(vec![None; n]) };
    let equation = ctx.attr_string("equation");
    let (ins, out) = parse(&equation).ok_or_else(|| ctx.unsupported(format!("malformed equation '{equation}'")))?;
    if ins.len() != n || n > 2 {
        return Err(ctx.unsupported("only einsums of one or two operands are differentiable"));
    }
    for subs in ins.iter().chain([&out]) {
        let mut seen = subs.clone();
        seen.sort_unstable();
        seen.dedup();
        if seen.len() != subs.len() {
            return Err(
                ctx.unsupported(format!("a repeated label in '{equation}' (a diagonal) is not differentiable yet"))
            );
        }
    }
    if equation.contains("...") && !(ins.iter().all(|s| s.contains(&'.')) && out.contains(&'.')) {
        return Err(ctx.unsupported("an ellipsis must appear in every operand and the output to be differentiable"));
    }
    let s = &ctx.scope;
    let mut grads = Vec::with_capacity(n);
    for i in 0..n {
        let x = ctx.input(i);
        let subs = &ins[i];
        let other = (n == 2).then(|| (ctx.input(1 - i), &ins[1 - i]));
        let kept: Vec<char> =
            subs.iter().copied().filter(|c| out.contains(c) || other.is_some_and(|(_, o)| o.contains(c))).collect();
        let grad = match other {
            Some((y, ysubs)) => s.einsum(&[g, y], &format!("{},{}->{}", text(&out), text(ysubs), text(&kept)))?,
            None => s.einsum(&[g], &format!("{}->{}", text(&out), text(&kept)))?,
        };
        if subs.contains(&'.') && kept.len() != subs.len() {
            return Err(ctx.unsupported("labels summed away next to an ellipsis are not differentiable yet"));
        }
        grads.push(Some(restore(s, grad, x, subs, &kept)?));
    }
    Ok(grads)
}

/// `grad` (over the labels `kept`) broadcast back over the labels of `subs` it lacks.
fn restore(s: &crate::Scope, grad: Output, x: Output, subs: &[char], kept: &[char]) -> Result<Output, GradError> {
    if kept.len() == subs.len() {
        return Ok(grad);
    }
    let mut g = grad;
    for (pos, c) in subs.iter().enumerate() {
        if !kept.contains(c) {
            let axis = s.scalar(pos as i32)?;
            g = s.expand_dims(g, axis)?;
        }
    }
    Ok(s.broadcast_to(g, s.unary("Shape", x)?)?)
}
