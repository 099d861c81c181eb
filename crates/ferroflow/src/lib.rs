//! ferroflow: dataflow graphs that read and write TensorFlow's formats, run by a parallel
//! executor. This crate re-exports the layer crates; `use ferroflow::prelude::*` brings in
//! what a program needs.
//!
//! ```
//! use ferroflow::prelude::*;
//! // y = 2x + 1 for a fed x.
//! let s = Scope::new();
//! let x = s.with_name("x").placeholder(DType::Float, &Shape::scalar()).unwrap();
//! let y = s.add(s.mul(x, s.scalar(2.0f32).unwrap()).unwrap(), s.scalar(1.0f32).unwrap()).unwrap();
//! let graph = s.graph();
//! let fetch = graph.output_name(y);
//! let sess = Session::new(graph, SessionOptions::default()).unwrap();
//! let out = sess.run(&[("x:0", Tensor::scalar(4.0f32))], &[&fetch], &[]).unwrap();
//! assert_eq!(out[0].scalar_value::<f32>().unwrap(), 9.0);
//! ```
#![warn(missing_docs)]

// `#[ferroflow::function]` expands to `::ferroflow::...` paths, in this crate too.
extern crate self as ferroflow;

use std::path::Path;

pub mod fuzzing;
pub mod saved_model;
pub mod testing;
pub mod workflows;

pub use ferroflow_autodiff as autodiff;
pub use ferroflow_checkpoint as checkpoint;
pub use ferroflow_codec as codec;
pub use ferroflow_collective as collective;
pub use ferroflow_data as data;
pub use ferroflow_function as function;
pub use ferroflow_graph as graph;
pub use ferroflow_kernels as kernels;
/// AutoGraph for Rust: `#[ferroflow::function]` on a `fn` over [`function::Value`]s makes
/// `if`/`while`/`for` over tensors functional control flow when traced (see
/// [`function::autograph`]).
pub use ferroflow_macros::function;
pub use ferroflow_ops as ops;
pub use ferroflow_optimize as optimize;
pub use ferroflow_profiler as profiler;
pub use ferroflow_proto as proto;
pub use ferroflow_runtime as runtime;
pub use ferroflow_summary as summary;
pub use ferroflow_tensor as tensor;
pub use ferroflow_train as train;

/// The names most programs use.
pub mod prelude {
    pub use ferroflow_graph::{Graph, Output};
    pub use ferroflow_ops::{OpTarget, Ops, RawOps, Scope};
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
    /// The graph optimizer.
    #[error(transparent)]
    Optimize(#[from] ferroflow_optimize::OptimizeError),
    /// Merging partition graphs.
    #[error(transparent)]
    Merge(#[from] ferroflow_runtime::MergeError),
    /// Decoding a protocol buffer.
    #[error(transparent)]
    Proto(#[from] ferroflow_proto::ProtoError),
    /// Writing TensorBoard event files.
    #[error(transparent)]
    Summary(#[from] ferroflow_summary::SummaryError),
    /// Reading or analyzing a profile.
    #[error(transparent)]
    Profile(#[from] ferroflow_profiler::ProfileError),
    /// Training, checkpoints and TensorBoard callbacks.
    #[error(transparent)]
    Train(#[from] ferroflow_train::TrainError),
    /// Input pipelines and datasets.
    #[error(transparent)]
    Data(#[from] ferroflow_data::DataError),
    /// Eager execution, traced functions and AutoGraph.
    #[error(transparent)]
    Function(#[from] ferroflow_function::FunctionError),
    /// A file system operation.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A step of one of the [`workflows`] failed (the workflows return any layer's error).
    #[error("{step}: {error}")]
    Workflow {
        /// The workflow and what it was doing, e.g. `mnist_training`.
        step: String,
        /// What stopped it; its text is part of this error's, so it is not a `source`.
        error: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// Reads a GraphDef file (`.pb` binary, `.pbtxt` text) and imports it, validated.
pub fn load_graph(path: &Path) -> Result<graph::Graph, Error> {
    let def = graph::io::read_graph_def(path)?;
    Ok(ops::import_graph_def(&def)?)
}
