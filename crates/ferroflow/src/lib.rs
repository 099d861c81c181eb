//! ferroflow: dataflow graphs that read and write TensorFlow's formats, run by a parallel
//! executor. This crate re-exports the layer crates; `use ferroflow::prelude::*` brings in
//! what a program needs.
//!
//! ```
//! use ferroflow::prelude::*;
//! let s = Scope::new();
//! let a = s.scalar(1.0f32).unwrap();
//! let b = s.scalar(2.0f32).unwrap();
//! let c = s.add(a, b).unwrap();
//! let d = s.add(a, b).unwrap();
//! let out = s.mul(c, d).unwrap();
//! let graph = s.graph();
//! let fetch = graph.output_name(out);
//! let sess = Session::new(graph, SessionOptions::default()).unwrap();
//! assert_eq!(sess.run(&[], &[&fetch], &[]).unwrap()[0].scalar_value::<f32>().unwrap(), 9.0);
//! ```
#![warn(missing_docs)]

use std::path::Path;

pub mod testing;

pub use ferroflow_autodiff as autodiff;
pub use ferroflow_checkpoint as checkpoint;
pub use ferroflow_graph as graph;
pub use ferroflow_kernels as kernels;
pub use ferroflow_ops as ops;
pub use ferroflow_optimize as optimize;
pub use ferroflow_proto as proto;
pub use ferroflow_runtime as runtime;
pub use ferroflow_summary as summary;
pub use ferroflow_tensor as tensor;
pub use ferroflow_train as train;

/// The names most programs use.
pub mod prelude {
    pub use ferroflow_graph::{Graph, Output};
    pub use ferroflow_ops::Scope;
    pub use ferroflow_runtime::{Session, SessionOptions};
    pub use ferroflow_tensor::{DType, Shape, Tensor};
}

/// Any ferroflow error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing a graph file.
    #[error(transparent)]
    GraphFile(#[from] ferroflow_graph::io::GraphFileError),
    /// An invalid graph.
    #[error(transparent)]
    Graph(#[from] ferroflow_graph::GraphError),
    /// Building or running a step.
    #[error(transparent)]
    Runtime(#[from] ferroflow_runtime::RuntimeError),
    /// Tensors and .npy/.npz files.
    #[error(transparent)]
    Tensor(#[from] ferroflow_tensor::TensorError),
    /// Building a graph with the Scope API.
    #[error(transparent)]
    Build(#[from] ferroflow_ops::BuildError),
}

/// Reads a GraphDef file (`.pb` binary, `.pbtxt` text) and imports it, validated.
pub fn load_graph(path: &Path) -> Result<graph::Graph, Error> {
    let def = graph::io::read_graph_def(path)?;
    Ok(ops::import_graph_def(&def)?)
}
