//! The small arithmetic graph that shows what actually runs once it is optimized and
//! partitioned: `a = 1, b = 2, c = a + b, d = a + b, out = c * d` (9 when run), with the node
//! names TensorFlow gives `tf.constant`, `tf.add` and `tf.multiply`.
use crate::prelude::*;

/// The graph and its fetch name (`Mul:0`).
pub fn graph() -> Result<(Graph, String), ferroflow_ops::BuildError> {
    let s = Scope::new();
    let a = s.scalar(1.0f32)?;
    let b = s.scalar(2.0f32)?;
    let c = s.with_name("Add").add(a, b)?;
    let d = s.with_name("Add").add(a, b)?;
    let out = s.with_name("Mul").mul(c, d)?;
    let graph = s.graph();
    let fetch = graph.output_name(out);
    Ok((graph, fetch))
}
