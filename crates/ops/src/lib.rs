//! Op definitions for ferroflow: one registry where each op is defined once (signature,
//! attrs with defaults, shape inference), and the TensorFlow-1-style graph builder [`Scope`].
#![warn(missing_docs)]

mod defs;
mod registry;
mod scope;
pub mod shape_inference;

pub use registry::{op, ArgDef, ArgType, AttrDef, OpBuilder, OpDef, OpRegistry};
pub use scope::{BuildError, Scope};
pub use shape_inference::{infer_shapes, InferCtx, ShapeFn};

use ferroflow_graph::{Graph, GraphError};
use ferroflow_proto::GraphDef;

/// Imports a GraphDef against the global op registry, validating it (see
/// [`Graph::from_graph_def`]) and running shape inference.
pub fn import_graph_def(def: &GraphDef) -> Result<Graph, GraphError> {
    let g = Graph::from_graph_def(def, OpRegistry::global())?;
    infer_shapes(&g)?;
    Ok(g)
}
