//! Losses and metrics as graph nodes.
use ferroflow_graph::{Attrs, Output};
use ferroflow_ops::Scope;
use ferroflow_tensor::DType;

use ferroflow_proto::attr;

use crate::Result;
use ferroflow_ops::{Ops, RawOps};

/// Mean over the batch of softmax cross-entropy between one-hot (or soft) `labels` and
/// `logits` (`SoftmaxCrossEntropyWithLogits`: numerically stable, max subtracted).
pub fn softmax_cross_entropy(s: &Scope, labels: Output, logits: Output) -> Result<Output> {
    let s = s.name_scope("softmax_cross_entropy_loss");
    let mut a = Attrs::new();
    a.insert("T".into(), attr::dtype(s.dtype(logits)));
    let xent = s.add_op("SoftmaxCrossEntropyWithLogits", "xentropy", &[logits, labels], &[], a)?;
    Ok(s.with_name("value").reduce("Mean", Output { node: xent, index: 0 }, &[0], false)?)
}

/// Mean over the batch of sparse softmax cross-entropy: `labels` are class indices (int32 or
/// int64); an index outside `[0, classes)` fails the step with an error naming it.
pub fn sparse_softmax_cross_entropy(s: &Scope, labels: Output, logits: Output) -> Result<Output> {
    let s = s.name_scope("sparse_softmax_cross_entropy_loss");
    let mut a = Attrs::new();
    a.insert("T".into(), attr::dtype(s.dtype(logits)));
    a.insert("Tlabels".into(), attr::dtype(s.dtype(labels)));
    let xent = s.add_op("SparseSoftmaxCrossEntropyWithLogits", "xentropy", &[logits, labels], &[], a)?;
    Ok(s.with_name("value").reduce("Mean", Output { node: xent, index: 0 }, &[0], false)?)
}

/// Mean squared error over all elements.
pub fn mean_squared_error(s: &Scope, labels: Output, predictions: Output) -> Result<Output> {
    let s = s.name_scope("mean_squared_error");
    let d = s.sub(predictions, labels)?;
    let sq = s.unary("Square", d)?;
    let rank = ferroflow_ops::infer_shapes(&s.graph())
        .ok()
        .and_then(|sh| sh.get(sq.node).and_then(|o| o[0].rank()))
        .unwrap_or(2);
    let axes: Vec<i32> = (0..rank as i32).collect();
    Ok(s.with_name("value").reduce("Mean", sq, &axes, false)?)
}

fn arg_max(s: &Scope, x: Output) -> Result<Output> {
    let axis = s.scalar(1i32)?;
    let mut a = Attrs::new();
    a.insert("T".into(), attr::dtype(s.dtype(x)));
    a.insert("Tidx".into(), attr::dtype(DType::Int32));
    a.insert("output_type".into(), attr::dtype(DType::Int64));
    Ok(Output { node: s.add_op("ArgMax", "ArgMax", &[x, axis], &[], a)?, index: 0 })
}

/// The fraction of rows where `argmax(labels) == argmax(predictions)` (one-hot labels), as
/// the seed's `accuracy` node; the result node is named `name`.
pub fn accuracy(s: &Scope, labels: Output, predictions: Output, name: &str) -> Result<Output> {
    let y = arg_max(s, labels)?;
    let p = arg_max(s, predictions)?;
    fraction_equal(s, y, p, name)
}

/// `mean(cast(equal(y, p), float))` over int64 class indices, named `name`.
fn fraction_equal(s: &Scope, y: Output, p: Output, name: &str) -> Result<Output> {
    let mut a = Attrs::new();
    a.insert("T".into(), attr::dtype(DType::Int64));
    let eq = Output { node: s.add_op("Equal", "Equal", &[y, p], &[], a)?, index: 0 };
    let f = s.cast(eq, DType::Float)?;
    Ok(s.with_name(name).reduce("Mean", f, &[0], false)?)
}

/// Accuracy with class-index labels (int64).
pub fn sparse_accuracy(s: &Scope, labels: Output, predictions: Output, name: &str) -> Result<Output> {
    let p = arg_max(s, predictions)?;
    let y = if s.dtype(labels) == DType::Int64 { labels } else { s.cast(labels, DType::Int64)? };
    fraction_equal(s, y, p, name)
}
