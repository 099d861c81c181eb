//! Training in graph mode, TensorFlow 1 style: resource variables with initializers and
//! seeds ([`Builder`], [`Variable`], [`Initializer`]), optimizers that add TensorFlow's update
//! ops (`ResourceApplyAdam`, ...) to the graph ([`optimizers`]), layers ([`layers`]), losses
//! and metrics ([`losses`]), a sequential model with a `fit` loop ([`model`]) and MNIST's IDX
//! files ([`mnist`]).
//!
//! Everything here builds graph nodes with TensorFlow's op names and attrs, so a ferroflow
//! training graph is a TensorFlow graph: variables are `VarHandleOp`s read by
//! `ReadVariableOp` and initialized by `AssignVariableOp`, and the session's resource manager
//! keeps their values between steps.
#![warn(missing_docs)]

pub mod callbacks;
pub mod distributed;
pub mod efficientnet;
pub mod layers;
pub mod losses;
pub mod meta_graph;
pub mod mnist;
pub mod model;
pub mod optimizers;
pub mod profile;
pub mod saved_model;
pub mod saved_model_show;
pub mod saver;

use std::cell::RefCell;
use std::rc::Rc;

use ferroflow_graph::{Attrs, Graph, NodeId, Output};
use ferroflow_ops::{BuildError, Scope};
use ferroflow_ops::{Ops, RawOps};
use ferroflow_proto::attr;
use ferroflow_tensor::{DType, Shape, Tensor};

/// TensorFlow's `DEFAULT_GRAPH_SEED`, used when only an op seed is given.
pub const DEFAULT_GRAPH_SEED: i64 = 87654321;

/// An error while building or training. Errors from the crates below keep their type
/// (`Build`, `Runtime`, `Data`, ...); the message names the step, tensor, file or argument.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrainError {
    /// Building graph nodes failed.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// Building gradients failed.
    #[error(transparent)]
    Gradients(#[from] ferroflow_autodiff::GradError),
    /// Running the graph failed (outside a training step).
    #[error(transparent)]
    Runtime(#[from] ferroflow_runtime::RuntimeError),
    /// A tensor operation failed.
    #[error(transparent)]
    Tensor(#[from] ferroflow_tensor::TensorError),
    /// The input pipeline failed while training or evaluating.
    #[error("input pipeline: {0}")]
    Data(#[from] ferroflow_data::DataError),
    /// A training step failed to run (a kernel rejected the batch: labels out of range, ...).
    #[error("step {step}: {source}")]
    Step {
        /// The 1-based step.
        step: u64,
        /// What the session reported.
        source: ferroflow_runtime::RuntimeError,
    },
    /// A batch whose shape does not fit the model's input.
    #[error(
        "{when}: batch for '{input}' has shape {got:?}, expected [?{}]",
        expected.iter().map(|d| format!(", {d}")).collect::<String>()
    )]
    BatchShape {
        /// Where the batch came from (`step 3`, `evaluate, examples 256..`).
        when: String,
        /// The input tensor (`inputs:0`).
        input: String,
        /// The batch's shape.
        got: Vec<usize>,
        /// The model's input shape without the batch dimension.
        expected: Vec<usize>,
    },
    /// Bad arguments (shapes, names, options) or a model that cannot do what was asked.
    #[error("{0}")]
    Invalid(String),
    /// A SavedModel signature's function calls could not be inlined to freeze it.
    #[error("freezing signature '{signature}': {source}")]
    Freeze {
        /// The signature.
        signature: String,
        /// Why its calls do not inline.
        source: Box<ferroflow_runtime::FunctionDefError>,
    },
    /// A training step produced a NaN or infinite value.
    #[error("step {step}: tensor '{tensor}' is not finite ({value}); training stopped")]
    NonFinite {
        /// The 1-based step.
        step: u64,
        /// The tensor.
        tensor: String,
        /// The offending value.
        value: f64,
    },
    /// A graph could not be imported.
    #[error(transparent)]
    Graph(#[from] ferroflow_graph::GraphError),
    /// A checkpoint could not be read or written.
    #[error(transparent)]
    Checkpoint(#[from] ferroflow_checkpoint::CheckpointError),
    /// A file (MNIST's IDX, a SavedModel, a meta graph, a checkpoint's state) could not be
    /// read or written, or is not what it should be.
    #[error("{path}: {reason}")]
    File {
        /// The file.
        path: String,
        /// What was wrong, in full (it quotes `source` when there is one).
        reason: String,
        /// The underlying error, if any.
        #[source]
        source: Option<BoxError>,
    },
    /// A log file or directory (CSVLogger's, TensorBoard's) could not be written.
    #[error("{context}: {source}")]
    Io {
        /// What was being written (`CSVLogger: log.csv`).
        context: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// TensorBoard's summaries could not be written.
    #[error("TensorBoard callback: {0}")]
    Summary(#[source] ferroflow_summary::SummaryError),
    /// Profiling batches failed.
    #[error("{context}: {source}")]
    Profile {
        /// What was profiled (`profile_batch`).
        context: String,
        /// The profiler's error.
        source: ferroflow_profiler::ProfileError,
    },
    /// The ranks of data-parallel training could not communicate.
    #[error("{context}: {source}")]
    Collective {
        /// What the ranks were doing (`broadcast_variables`).
        context: String,
        /// The communicator's error.
        source: ferroflow_collective::CollectiveError,
    },
}

/// Any error, boxed (the cause of a [`TrainError::File`]).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl TrainError {
    /// A file that is not what it should be (`path: reason`).
    pub fn file(path: impl AsRef<std::path::Path>, reason: impl Into<String>) -> TrainError {
        TrainError::File { path: path.as_ref().display().to_string(), reason: reason.into(), source: None }
    }

    /// A file that could not be read or written because of `source` (`path: source`).
    pub fn file_error(
        path: impl AsRef<std::path::Path>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> TrainError {
        TrainError::file_caused(path, source.to_string(), source)
    }

    /// A file that could not be used because of `source`, explained by `reason`.
    pub fn file_caused(
        path: impl AsRef<std::path::Path>,
        reason: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> TrainError {
        TrainError::File {
            path: path.as_ref().display().to_string(),
            reason: reason.into(),
            source: Some(Box::new(source)),
        }
    }
}

/// Shorthand for results in this crate.
pub type Result<T> = std::result::Result<T, TrainError>;

/// How a variable gets its first value.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Initializer {
    /// All zeros.
    Zeros,
    /// All ones.
    Ones,
    /// One value everywhere.
    Constant(f64),
    /// Normal(mean, stddev).
    RandomNormal {
        /// Mean.
        mean: f64,
        /// Standard deviation.
        stddev: f64,
        /// Op seed (with the graph seed, as TensorFlow's `get_seed`).
        seed: Option<i64>,
    },
    /// Normal(mean, stddev) with values beyond two standard deviations redrawn.
    TruncatedNormal {
        /// Mean.
        mean: f64,
        /// Standard deviation.
        stddev: f64,
        /// Op seed.
        seed: Option<i64>,
    },
    /// Uniform in [minval, maxval).
    RandomUniform {
        /// Lower bound.
        minval: f64,
        /// Upper bound (exclusive).
        maxval: f64,
        /// Op seed.
        seed: Option<i64>,
    },
    /// Glorot (Xavier) uniform: U(±sqrt(6 / (fan_in + fan_out))), fans as in Keras
    /// (conv kernels `[h, w, in, out]` multiply both by `h·w`).
    GlorotUniform {
        /// Op seed.
        seed: Option<i64>,
    },
    /// Keras's `VarianceScaling`: variance `scale / n`, n the fan in, fan out or their mean
    /// (fans as for [`Initializer::GlorotUniform`]); normal (untruncated), truncated normal
    /// (stddev corrected for the truncation, as Keras) or uniform. EfficientNet's convolutions
    /// use scale 2 over fan out, normal; its dense layer 1/3 over fan out, uniform.
    VarianceScaling {
        /// The variance numerator.
        scale: f64,
        /// Which fan divides it.
        mode: FanMode,
        /// The distribution drawn from.
        distribution: Distribution,
        /// Op seed.
        seed: Option<i64>,
    },
}

/// The fan [`Initializer::VarianceScaling`] divides by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FanMode {
    /// Inputs per output unit.
    FanIn,
    /// Outputs per input unit.
    FanOut,
    /// Their mean.
    FanAvg,
}

/// The distribution of [`Initializer::VarianceScaling`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Distribution {
    /// Normal.
    Normal,
    /// Normal with values beyond two standard deviations redrawn.
    TruncatedNormal,
    /// Uniform.
    Uniform,
}

/// A resource variable in the graph.
#[derive(Clone, Debug)]
pub struct Variable {
    /// Its name (the `VarHandleOp` node's name and `shared_name`).
    pub name: String,
    /// The handle (`VarHandleOp:0`): what optimizers update and gradients are taken for.
    pub handle: Output,
    /// A read of the value (`<name>/Read/ReadVariableOp:0`), for use in the model.
    pub value: Output,
    /// The `AssignVariableOp` that sets the initial value (`<name>/Assign`).
    pub initializer: NodeId,
    /// Element type.
    pub dtype: DType,
    /// Shape.
    pub shape: Vec<usize>,
    /// Whether optimizers update it by default.
    pub trainable: bool,
}

/// Builds a training graph: a [`Scope`] plus the variables created in it and the graph-level
/// random seed (TensorFlow's `tf.set_random_seed`).
#[derive(Clone)]
pub struct Builder {
    scope: Scope,
    vars: Rc<RefCell<Vec<Variable>>>,
    collections: Rc<RefCell<std::collections::BTreeMap<String, Vec<String>>>>,
    graph_seed: Option<i64>,
}

impl Default for Builder {
    fn default() -> Self {
        Builder::new()
    }
}

impl Builder {
    /// A builder over a new graph, without a graph seed (random ops are non-deterministic
    /// unless given op seeds).
    pub fn new() -> Builder {
        Builder { scope: Scope::new(), vars: Rc::default(), collections: Rc::default(), graph_seed: None }
    }

    /// A builder whose random ops are reproducible: each op's seeds derive from `seed` and
    /// the op's position in the graph, as in TensorFlow.
    pub fn with_seed(seed: i64) -> Builder {
        Builder { graph_seed: Some(seed), ..Builder::new() }
    }

    /// The root scope.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// This builder with its scope under `name/` (same graph, variables and seed): layers
    /// built through it are named `name/<layer>/...`, as Keras names a block's layers.
    /// Model-level nodes (`global_step`, `init`) belong to the root builder.
    pub fn name_scope(&self, name: &str) -> Builder {
        Builder { scope: self.scope.name_scope(name), ..self.clone() }
    }

    /// A copy of the graph built so far.
    pub fn graph(&self) -> Graph {
        self.scope.graph()
    }

    /// The `(seed, seed2)` attrs for a new random op: TensorFlow's `get_seed`.
    pub fn seeds(&self, op_seed: Option<i64>) -> (i64, i64) {
        match (self.graph_seed, op_seed) {
            (Some(g), Some(o)) => (g, o),
            (Some(g), None) => (g, self.scope.with_graph(|gr| gr.len()) as i64),
            (None, Some(o)) => (DEFAULT_GRAPH_SEED, o),
            (None, None) => (0, 0),
        }
    }

    /// A random tensor of `shape` (an int32 vector) from `op` (`RandomUniform`,
    /// `RandomStandardNormal` or `TruncatedNormal`).
    pub fn random(&self, scope: &Scope, op: &str, shape: Output, dtype: DType, seed: Option<i64>) -> Result<Output> {
        let (s1, s2) = self.seeds(seed);
        let mut a = Attrs::new();
        a.insert("dtype".into(), attr::dtype(dtype));
        a.insert("T".into(), attr::dtype(scope.dtype(shape)));
        a.insert("seed".into(), attr::int(s1));
        a.insert("seed2".into(), attr::int(s2));
        Ok(Output { node: scope.add_op(op, op, &[shape], &[], a)?, index: 0 })
    }

    /// A scalar constant of `dtype`.
    pub fn scalar(scope: &Scope, dtype: DType, v: f64) -> Result<Output> {
        Ok(match dtype {
            DType::Double => scope.scalar(v)?,
            DType::Float => scope.scalar(v as f32)?,
            DType::Int32 => scope.scalar(v as i32)?,
            DType::Int64 => scope.scalar(v as i64)?,
            d => return Err(TrainError::Invalid(format!("no scalar constants of {d}"))),
        })
    }

    fn initial_value(&self, scope: &Scope, init: &Initializer, shape: &[usize], dtype: DType) -> Result<Output> {
        let dims: Vec<i32> = shape.iter().map(|&d| d as i32).collect();
        let fill = |v: f64| -> Result<Output> {
            let sh = scope.with_name("shape_as_tensor").constant_from(&[dims.len()], &dims)?;
            let c = Self::scalar(&scope.with_name("Const"), dtype, v)?;
            let mut a = Attrs::new();
            a.insert("T".into(), attr::dtype(dtype));
            a.insert("index_type".into(), attr::dtype(DType::Int32));
            Ok(Output { node: scope.add_op("Fill", "zeros", &[sh, c], &[], a)?, index: 0 })
        };
        let affine = |op: &str, name: &str, scale: f64, shift: f64, seed: Option<i64>| -> Result<Output> {
            let s = scope.name_scope(name);
            let sh = s.with_name("shape").constant_from(&[dims.len()], &dims)?;
            let r = self.random(&s, op, sh, dtype, seed)?;
            let scaled = s.with_name("mul").mul(r, Self::scalar(&s.with_name("stddev"), dtype, scale)?)?;
            Ok(s.with_name("add").add_v2(scaled, Self::scalar(&s.with_name("mean"), dtype, shift)?)?)
        };
        match *init {
            Initializer::Zeros => fill(0.0),
            Initializer::Ones => fill(1.0),
            Initializer::Constant(v) => fill(v),
            Initializer::RandomNormal { mean, stddev, seed } => {
                affine("RandomStandardNormal", "random_normal", stddev, mean, seed)
            }
            Initializer::TruncatedNormal { mean, stddev, seed } => {
                affine("TruncatedNormal", "truncated_normal", stddev, mean, seed)
            }
            Initializer::RandomUniform { minval, maxval, seed } => {
                affine("RandomUniform", "random_uniform", maxval - minval, minval, seed)
            }
            Initializer::GlorotUniform { seed } => {
                let (fan_in, fan_out) = fans(shape);
                let limit = (6.0 / (fan_in + fan_out).max(1.0)).sqrt();
                affine("RandomUniform", "random_uniform", 2.0 * limit, -limit, seed)
            }
            Initializer::VarianceScaling { scale, mode, distribution, seed } => {
                let (fan_in, fan_out) = fans(shape);
                let n = match mode {
                    FanMode::FanIn => fan_in,
                    FanMode::FanOut => fan_out,
                    FanMode::FanAvg => (fan_in + fan_out) / 2.0,
                };
                let variance = scale / n.max(1.0);
                match distribution {
                    Distribution::Normal => affine("RandomStandardNormal", "random_normal", variance.sqrt(), 0.0, seed),
                    // Keras's constant: the stddev of a unit normal truncated to [-2, 2].
                    Distribution::TruncatedNormal => affine(
                        "TruncatedNormal",
                        "truncated_normal",
                        variance.sqrt() / 0.879_625_661_034_239_8,
                        0.0,
                        seed,
                    ),
                    Distribution::Uniform => {
                        let limit = (3.0 * variance).sqrt();
                        affine("RandomUniform", "random_uniform", 2.0 * limit, -limit, seed)
                    }
                }
            }
        }
    }

    /// Creates a variable `name` (under `scope`'s prefix) with its handle, a read, and an
    /// initializer. A name already in use is an error (TensorFlow's `get_variable` rule).
    pub fn variable(
        &self,
        scope: &Scope,
        name: &str,
        shape: &[usize],
        dtype: DType,
        init: &Initializer,
        trainable: bool,
    ) -> Result<Variable> {
        let full = format!("{}{name}", scope.prefix());
        if self.scope.with_graph(|g| g.find(&full).is_some()) {
            return Err(TrainError::Invalid(format!("variable '{full}' already exists")));
        }
        let mut a = Attrs::new();
        a.insert("dtype".into(), attr::dtype(dtype));
        let sh = Shape::new(shape.iter().map(|&d| Some(d)).collect());
        a.insert("shape".into(), attr::shape(&sh));
        a.insert("shared_name".into(), attr::string(&full));
        a.insert("container".into(), attr::string(""));
        let handle = Output { node: scope.with_name(name).add_op("VarHandleOp", name, &[], &[], a)?, index: 0 };
        let inner = scope.reenter(&full);
        let value = self.initial_value(&inner.name_scope("Initializer"), init, shape, dtype)?;
        let mut a = Attrs::new();
        a.insert("dtype".into(), attr::dtype(dtype));
        let initializer = inner.add_op("AssignVariableOp", "Assign", &[handle, value], &[], a)?;
        let mut a = Attrs::new();
        a.insert("dtype".into(), attr::dtype(dtype));
        let read = inner.name_scope("Read").add_op("ReadVariableOp", "ReadVariableOp", &[handle], &[], a)?;
        let v = Variable {
            name: full,
            handle,
            value: Output { node: read, index: 0 },
            initializer,
            dtype,
            shape: shape.to_vec(),
            trainable,
        };
        self.vars.borrow_mut().push(v.clone());
        Ok(v)
    }

    /// A new read of `v` (`ReadVariableOp`) in `scope`: a value read at this point of the step.
    pub fn read(&self, scope: &Scope, v: &Variable) -> Result<Output> {
        let mut a = Attrs::new();
        a.insert("dtype".into(), attr::dtype(v.dtype));
        Ok(Output { node: scope.add_op("ReadVariableOp", "ReadVariableOp", &[v.handle], &[], a)?, index: 0 })
    }

    /// TensorFlow's `get_or_create_global_step`: an int64 scalar `global_step`, not trainable.
    pub fn global_step(&self) -> Result<Variable> {
        if let Some(v) = self.vars.borrow().iter().find(|v| v.name == "global_step") {
            return Ok(v.clone());
        }
        self.variable(&self.scope, "global_step", &[], DType::Int64, &Initializer::Zeros, false)
    }

    /// Every variable created so far, in creation order.
    pub fn variables(&self) -> Vec<Variable> {
        self.vars.borrow().clone()
    }

    /// Adds a node or tensor name to collection `key` (TensorFlow's `add_to_collection`;
    /// optimizers add their update op to `train_op`). Collections go into meta graphs.
    pub fn add_to_collection(&self, key: &str, name: &str) {
        self.collections.borrow_mut().entry(key.to_string()).or_default().push(name.to_string());
    }

    /// The node-list collections added so far.
    pub fn collections(&self) -> std::collections::BTreeMap<String, Vec<String>> {
        self.collections.borrow().clone()
    }

    /// The trainable variables.
    pub fn trainable_variables(&self) -> Vec<Variable> {
        self.vars.borrow().iter().filter(|v| v.trainable).cloned().collect()
    }

    /// A `NoOp` named `init` that runs every variable's initializer (TensorFlow's
    /// `global_variables_initializer`).
    pub fn global_variables_initializer(&self) -> Result<NodeId> {
        let deps: Vec<NodeId> = self.vars.borrow().iter().map(|v| v.initializer).collect();
        Ok(self.scope.with_name("init").group(&deps)?)
    }
}

/// Keras's fan-in and fan-out of a weight shape.
fn fans(shape: &[usize]) -> (f64, f64) {
    match shape {
        [] => (1.0, 1.0),
        [n] => (*n as f64, *n as f64),
        [i, o] => (*i as f64, *o as f64),
        _ => {
            let receptive: usize = shape[..shape.len() - 2].iter().product();
            let (i, o) = (shape[shape.len() - 2], shape[shape.len() - 1]);
            ((receptive * i) as f64, (receptive * o) as f64)
        }
    }
}

/// A float tensor from a session result, as `f64` values (for losses and metrics).
pub fn to_f64(t: &Tensor) -> Result<Vec<f64>> {
    Ok(match t.dtype() {
        DType::Float => t.as_slice::<f32>()?.iter().map(|&v| v as f64).collect(),
        DType::Double => t.as_slice::<f64>()?.to_vec(),
        DType::Int32 => t.as_slice::<i32>()?.iter().map(|&v| v as f64).collect(),
        DType::Int64 => t.as_slice::<i64>()?.iter().map(|&v| v as f64).collect(),
        d => return Err(TrainError::Invalid(format!("expected a numeric tensor, got {d}"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fans_follow_keras() {
        assert_eq!(fans(&[784, 256]), (784.0, 256.0));
        assert_eq!(fans(&[3, 3, 8, 16]), (72.0, 144.0));
    }

    #[test]
    fn seeds_follow_get_seed() {
        let b = Builder::new();
        assert_eq!(b.seeds(None), (0, 0));
        assert_eq!(b.seeds(Some(5)), (DEFAULT_GRAPH_SEED, 5));
        let b = Builder::with_seed(42);
        assert_eq!(b.seeds(Some(5)), (42, 5));
        let (g, o) = b.seeds(None);
        assert_eq!(g, 42);
        assert_eq!(o, 0);
    }
}
