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

// The demo's workflows and the test and fuzzing helpers serve this repository's CLI, tests
// and fuzz targets; they are not part of the supported API (no semver promise).
#[doc(hidden)]
pub mod fuzzing;
pub mod saved_model;
pub mod status;
#[doc(hidden)]
pub mod testing;
#[doc(hidden)]
pub mod workflows;

pub use ferroflow_autodiff as autodiff;
pub use ferroflow_checkpoint as checkpoint;
pub use ferroflow_codec as codec;
pub use ferroflow_collective as collective;
pub use ferroflow_data as data;
pub use ferroflow_function as function;
pub use ferroflow_graph as graph;
pub use ferroflow_keras as keras;
pub use ferroflow_kernels as kernels;
/// AutoGraph for Rust: `#[ferroflow::function]` on a `fn` over [`function::Value`]s makes
/// `if`/`while`/`for` over tensors functional control flow when traced (see
/// [`function::autograph`]).
pub use ferroflow_macros::function;
/// MPI as the collective world of multi-process runs (the `mpi` feature builds it with Open
/// MPI; without it, [`mpi::init`] says how to get it).
pub use ferroflow_mpi as mpi;
pub use ferroflow_ops as ops;
pub use ferroflow_optimize as optimize;
pub use ferroflow_profiler as profiler;
pub use ferroflow_proto as proto;
pub use ferroflow_runtime as runtime;
pub use ferroflow_summary as summary;
pub use ferroflow_tensor as tensor;
pub use ferroflow_train as train;

/// The names most programs use: graphs and sessions, eager execution and traced functions,
/// datasets, models and their training, checkpoints, and the facade's [`Error`].
pub mod prelude {
    pub use crate::{load_graph, Error};
    pub use ferroflow_data::{Dataset, AUTOTUNE};
    pub use ferroflow_function::{function, ConcreteFunction, Eager, Function, GradientTape, Value, Variable};
    pub use ferroflow_graph::{Graph, Output};
    pub use ferroflow_keras::KerasModel;
    pub use ferroflow_ops::{OpTarget, Ops, RawOps, Scope};
    pub use ferroflow_runtime::{Session, SessionOptions};
    pub use ferroflow_tensor::{DType, Shape, Tensor};
    pub use ferroflow_train::model::{FitOptions, Functional, Model, Sequential};
    pub use ferroflow_train::optimizers::Optimizer;
    pub use ferroflow_train::saver::Saver;
}

/// Any ferroflow error: every library crate's error converts into it (`?` works across
/// layers), keeping its type for a `match` (the MPI crate's `MpiError`, outside this facade,
/// is the CLI's).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Tensors, `.npy`/`.npz` files and the allocation limit.
    #[error(transparent)]
    Tensor(#[from] ferroflow_tensor::TensorError),
    /// Decoding or encoding a protocol buffer.
    #[error(transparent)]
    Proto(#[from] ferroflow_proto::ProtoError),
    /// A `TensorProto` that is not a tensor.
    #[error(transparent)]
    Convert(#[from] ferroflow_proto::convert::ConvertError),
    /// Reading or writing a graph file.
    #[error(transparent)]
    GraphFile(#[from] ferroflow_graph::io::GraphFileError),
    /// An invalid graph.
    #[error(transparent)]
    Graph(#[from] ferroflow_graph::GraphError),
    /// A shape function's refusal.
    #[error(transparent)]
    Shape(#[from] ferroflow_graph::ShapeError),
    /// Attrs that do not fit an op.
    #[error(transparent)]
    Attr(#[from] ferroflow_graph::AttrError),
    /// Building a graph through the op surface.
    #[error(transparent)]
    Build(#[from] ferroflow_ops::BuildError),
    /// Building gradients.
    #[error(transparent)]
    Gradient(#[from] ferroflow_ops::GradError),
    /// A kernel, made or run outside a session.
    #[error(transparent)]
    Kernel(#[from] ferroflow_kernels::KernelError),
    /// Checkpoint bundles.
    #[error(transparent)]
    Checkpoint(#[from] ferroflow_checkpoint::CheckpointError),
    /// JPEG and PNG.
    #[error(transparent)]
    Codec(#[from] ferroflow_codec::CodecError),
    /// The collectives of a process group.
    #[error(transparent)]
    Collective(#[from] ferroflow_collective::CollectiveError),
    /// The graph optimizer.
    #[error(transparent)]
    Optimize(#[from] ferroflow_optimize::OptimizeError),
    /// Building or running a step.
    #[error(transparent)]
    Runtime(#[from] ferroflow_runtime::RuntimeError),
    /// Instantiating or inlining a library function.
    #[error(transparent)]
    FunctionDef(#[from] ferroflow_runtime::FunctionDefError),
    /// Placing nodes on devices.
    #[error(transparent)]
    Placement(#[from] ferroflow_runtime::placer::PlacementError),
    /// A device name.
    #[error(transparent)]
    Device(#[from] ferroflow_runtime::device::DeviceError),
    /// Partitioning a graph across devices.
    #[error(transparent)]
    Partition(#[from] ferroflow_runtime::PartitionError),
    /// Pairing `_Send`s and `_Recv`s.
    #[error(transparent)]
    Rendezvous(#[from] ferroflow_runtime::RendezvousError),
    /// Merging partition graphs.
    #[error(transparent)]
    Merge(#[from] ferroflow_runtime::MergeError),
    /// Reading or analyzing a profile.
    #[error(transparent)]
    Profile(#[from] ferroflow_profiler::ProfileError),
    /// TensorBoard event files.
    #[error(transparent)]
    Summary(#[from] ferroflow_summary::SummaryError),
    /// Input pipelines and datasets.
    #[error(transparent)]
    Data(#[from] ferroflow_data::DataError),
    /// Eager execution, traced functions and AutoGraph.
    #[error(transparent)]
    Function(#[from] ferroflow_function::FunctionError),
    /// One eager op call.
    #[error(transparent)]
    Op(#[from] ferroflow_function::OpError),
    /// A checkpoint's `.index` table (its LevelDB-format blocks).
    #[error(transparent)]
    Table(#[from] ferroflow_checkpoint::table::TableError),
    /// Starting or joining an MPI world ([`mpi`]; without the `mpi` feature, the error
    /// that says so).
    #[error(transparent)]
    Mpi(#[from] ferroflow_mpi::MpiError),
    /// Training, checkpoints and TensorBoard callbacks.
    #[error(transparent)]
    Train(#[from] ferroflow_train::TrainError),
    /// Keras model files.
    #[error(transparent)]
    Keras(#[from] ferroflow_keras::KerasError),
    /// A file system operation.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A step of one of the [`workflows`] failed.
    #[error("{step}: {source}")]
    Workflow {
        /// The workflow and what it was doing, e.g. `mnist_training`.
        step: String,
        /// What stopped it.
        source: Box<Error>,
    },
}

impl Error {
    /// This error as the cause of workflow step `step`.
    pub fn in_step(self, step: impl Into<String>) -> Error {
        Error::Workflow { step: step.into(), source: Box::new(self) }
    }
}

// The types programs share between threads are Send + Sync; this fails to compile otherwise.
// (`Scope`, `function::Function` and `function::GradientTape` are single-threaded by design:
// see their docs.)
const _: () = {
    const fn shared<T: Send + Sync>() {}
    shared::<tensor::Tensor>();
    shared::<graph::Graph>();
    shared::<runtime::Session>();
    shared::<train::saved_model::SavedModel>();
    shared::<data::Dataset<Vec<tensor::Tensor>>>();
    shared::<data::Dataset<i64>>();
    shared::<train::saver::Saver>();
    shared::<keras::KerasModel>();
    shared::<Error>();
};

/// The cargo features this build of the library has (`jpeg`, `mpi`).
pub const FEATURES: &[&str] = &[
    #[cfg(feature = "jpeg")]
    "jpeg",
    #[cfg(feature = "mpi")]
    "mpi",
];

/// Reads a GraphDef file (`.pb` binary, `.pbtxt` text) and imports it, validated.
pub fn load_graph(path: &Path) -> Result<graph::Graph, Error> {
    let def = graph::io::read_graph_def(path)?;
    Ok(ops::import_graph_def(&def)?)
}
