//! The small arithmetic graph that shows what actually runs once it is optimized and
//! partitioned: `a = 1, b = 2, c = a + b, d = a + b, out = c * d` (9 when run), with the node
//! names TensorFlow gives `tf.constant`, `tf.add` and `tf.multiply`.
use crate::prelude::*;
use ferroflow::ops::RawOps;
use ferroflow_ops::BuildError;

/// The graph and its fetch name (`Mul:0`).
pub fn graph() -> Result<(Graph, String), BuildError> {
    let s = Scope::new();
    build(&s, &s)
}

/// The same graph placed on two CPU devices: the constants, `Add` and `Mul` on `/cpu:0`,
/// `Add_1` on `/cpu:1`; run with two CPU devices, each runs its partition.
pub fn two_device_graph() -> Result<(Graph, String), BuildError> {
    let s = Scope::new();
    build(&s.with_device("/cpu:0"), &s.with_device("/cpu:1"))
}

/// Builds the graph with `d` on `second` and everything else on `first` (scopes of one graph).
fn build(first: &Scope, second: &Scope) -> Result<(Graph, String), BuildError> {
    let a = first.scalar(1.0f32)?;
    let b = first.scalar(2.0f32)?;
    let c = first.with_name("Add").add_v2(a, b)?;
    let d = second.with_name("Add").add_v2(a, b)?;
    let out = first.with_name("Mul").mul(c, d)?;
    let graph = first.graph();
    let fetch = graph.output_name(out);
    Ok((graph, fetch))
}
