//! A sequential model builder and a `fit` loop over a session.
//!
//! [`Sequential`] builds a TensorFlow 1 graph with placeholders `inputs`, `outputs` (labels)
//! and `is_training`, the layers, a `loss`, an `accuracy` node and the optimizer's train op.
//! [`Model`] runs any graph with those roles (also one built by hand, like seed 003's):
//! [`Model::fit`] trains over shuffled batches and epochs with a progress line (steps/s,
//! loss), validates after each epoch, and stops with an error naming the step and tensor
//! when the loss stops being finite or a batch has the wrong shape.
use std::time::Instant;

use ferroflow_graph::{NodeId, Output};
use ferroflow_runtime::{Session, SessionOptions};
use ferroflow_tensor::{DType, Shape, Tensor};

use crate::layers::{self, Activation, Padding};
use crate::losses;
use crate::optimizers::Optimizer;
use crate::{Builder, Initializer, Result, TrainError};

/// A layer of a [`Sequential`] model.
#[derive(Clone, Debug, PartialEq)]
pub enum Layer {
    /// A dense layer.
    Dense {
        /// Output units.
        units: usize,
        /// Activation.
        activation: Activation,
        /// Kernel initializer.
        kernel_init: Initializer,
    },
    /// Dropout, active only while training.
    Dropout {
        /// Fraction dropped.
        rate: f64,
    },
    /// Flattens all but the batch dimension.
    Flatten,
    /// A 2-D convolution (NHWC).
    Conv2D {
        /// Output channels.
        filters: usize,
        /// Kernel height and width.
        kernel: [usize; 2],
        /// Strides.
        strides: [usize; 2],
        /// Padding.
        padding: Padding,
        /// Activation.
        activation: Activation,
        /// Kernel initializer.
        kernel_init: Initializer,
    },
    /// 2-D max pooling (NHWC).
    MaxPool2D {
        /// Window.
        pool: [usize; 2],
        /// Strides.
        strides: [usize; 2],
        /// Padding.
        padding: Padding,
    },
    /// A depthwise 2-D convolution without bias (NHWC), then an activation.
    DepthwiseConv2D {
        /// Kernel height and width.
        kernel: [usize; 2],
        /// Strides.
        strides: [usize; 2],
        /// Padding.
        padding: Padding,
        /// Filters per input channel.
        depth_multiplier: usize,
        /// Activation.
        activation: Activation,
        /// Kernel initializer.
        kernel_init: Initializer,
    },
    /// Batch normalization over channels (NHWC): batch statistics while training (moving
    /// averages updated with each step), the moving ones otherwise.
    BatchNormalization {
        /// Moving-average momentum (Keras: 0.99).
        momentum: f64,
        /// Added to the variance (Keras: 1e-3).
        epsilon: f64,
    },
    /// The mean over height and width (NHWC to `[batch, channels]`).
    GlobalAveragePooling2D,
}

impl Layer {
    /// A dense layer with Glorot-uniform kernel (Keras's default).
    pub fn dense(units: usize, activation: Activation) -> Layer {
        Layer::Dense { units, activation, kernel_init: Initializer::GlorotUniform { seed: None } }
    }
}

/// The training loss of a model whose last layer gives class scores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loss {
    /// Cross-entropy with one-hot float labels `[batch, classes]`. A final softmax is folded
    /// into the loss (computed from its logits, numerically stable).
    CategoricalCrossentropy,
    /// Cross-entropy with class-index labels (int64 `[batch]`).
    SparseCategoricalCrossentropy,
    /// Mean squared error against float targets.
    MeanSquaredError,
}

/// A model description: input shape (without the batch dimension) and layers.
#[derive(Clone, Debug)]
pub struct Sequential {
    input_shape: Vec<usize>,
    layers: Vec<Layer>,
    seed: Option<i64>,
}

/// The tensor and node names a [`Model`] runs.
#[derive(Clone, Debug)]
pub struct Roles {
    /// Input batch placeholder (`inputs:0`).
    pub inputs: String,
    /// Label placeholder (`outputs:0`).
    pub labels: String,
    /// Boolean placeholder switching dropout (`is_training:0`), if the model has one.
    pub is_training: Option<String>,
    /// The model's output (`predictions:0`, a softmax or the last layer), if known: what an
    /// exported SavedModel's `serving_default` returns.
    pub predictions: Option<String>,
    /// Scalar loss.
    pub loss: String,
    /// Scalar accuracy, if any.
    pub accuracy: Option<String>,
    /// The train op (a node name).
    pub train_op: String,
    /// Variable initializer (a node name).
    pub init: String,
}

impl Sequential {
    /// A model taking inputs of `input_shape` (without the batch dimension).
    pub fn new(input_shape: &[usize]) -> Sequential {
        Sequential { input_shape: input_shape.to_vec(), layers: Vec::new(), seed: None }
    }
    /// Makes initialization and dropout reproducible (the graph-level seed).
    pub fn seed(mut self, seed: i64) -> Sequential {
        self.seed = Some(seed);
        self
    }
    /// Appends a layer.
    pub fn push(mut self, layer: Layer) -> Sequential {
        self.layers.push(layer);
        self
    }

    /// Builds the graph (layers, loss, accuracy, train op with `global_step`), opens a session
    /// and initializes the variables.
    pub fn compile(&self, loss: Loss, optimizer: &Optimizer, options: SessionOptions) -> Result<Model> {
        let b = self.seed.map_or_else(Builder::new, Builder::with_seed);
        let s = b.scope().clone();
        let mut in_shape = vec![None];
        in_shape.extend(self.input_shape.iter().map(|&d| Some(d)));
        let x = s.with_name("inputs").placeholder(DType::Float, &Shape::new(in_shape.clone()))?;
        let training = s.with_name("is_training").placeholder(DType::Bool, &Shape::scalar())?;
        let mut h = x;
        let mut logits = None;
        let (mut dense_n, mut drop_n, mut conv_n, mut pool_n, mut flat_n) = (0, 0, 0, 0, 0);
        let (mut dw_n, mut bn_n, mut gap_n) = (0, 0, 0);
        let n = self.layers.len();
        for (i, layer) in self.layers.iter().enumerate() {
            let numbered = |base: &str, k: &mut usize| {
                let name = if *k == 0 { base.to_string() } else { format!("{base}_{k}") };
                *k += 1;
                name
            };
            h = match layer {
                Layer::Dense { units, activation, kernel_init } => {
                    let name = numbered("dense", &mut dense_n);
                    let fold = i + 1 == n && *activation == Activation::Softmax && loss != Loss::MeanSquaredError;
                    if fold {
                        let z = layers::dense(&b, h, *units, Activation::Linear, kernel_init, &name)?;
                        logits = Some(z);
                        s.with_name("predictions").softmax(z)?
                    } else {
                        layers::dense(&b, h, *units, *activation, kernel_init, &name)?
                    }
                }
                Layer::Dropout { rate } => {
                    layers::dropout(&b, h, *rate, training, None, &numbered("dropout", &mut drop_n))?
                }
                Layer::Flatten => layers::flatten(&b, h, &numbered("flatten", &mut flat_n))?,
                Layer::Conv2D { filters, kernel, strides, padding, activation, kernel_init } => layers::conv2d(
                    &b,
                    h,
                    *filters,
                    *kernel,
                    *strides,
                    *padding,
                    *activation,
                    kernel_init,
                    &numbered("conv2d", &mut conv_n),
                )?,
                Layer::MaxPool2D { pool, strides, padding } => {
                    layers::max_pool2d(&b, h, *pool, *strides, *padding, &numbered("max_pooling2d", &mut pool_n))?
                }
                Layer::DepthwiseConv2D { kernel, strides, padding, depth_multiplier, activation, kernel_init } => {
                    let name = numbered("depthwise_conv2d", &mut dw_n);
                    let y = layers::depthwise_conv2d(
                        &b,
                        h,
                        *kernel,
                        *strides,
                        *padding,
                        *depth_multiplier,
                        kernel_init,
                        &name,
                    )?;
                    activation.apply(&s.name_scope(&name), y)?
                }
                Layer::BatchNormalization { momentum, epsilon } => layers::batch_normalization(
                    &b,
                    h,
                    training,
                    *momentum,
                    *epsilon,
                    &numbered("batch_normalization", &mut bn_n),
                )?,
                Layer::GlobalAveragePooling2D => {
                    layers::global_average_pooling2d(&b, h, false, &numbered("global_average_pooling2d", &mut gap_n))?
                }
            };
        }
        let logits = logits.unwrap_or(h);
        finish(&b, Body { inputs: x, training, outputs: h, logits }, &self.input_shape, loss, optimizer, options)
    }
}

/// A model body in a builder's graph: its input and `is_training` placeholders, its output,
/// and the logits the loss is computed from (the output itself unless a final softmax was
/// folded into the loss).
struct Body {
    inputs: Output,
    training: Output,
    outputs: Output,
    logits: Output,
}

/// Adds labels, loss, accuracy and the train op (which also runs the [`layers::UPDATE_OPS`]
/// the layers added, e.g. batch normalization's moving averages) around a model body, opens a
/// session and initializes the variables.
fn finish(
    b: &Builder,
    body: Body,
    input_shape: &[usize],
    loss: Loss,
    optimizer: &Optimizer,
    options: SessionOptions,
) -> Result<Model> {
    let s = b.scope().clone();
    // Everything created so far is the body's: the model's weights.
    let weights = b.variables().into_iter().map(|v| Weight { name: v.name, trainable: v.trainable }).collect();
    let Body { inputs: x, training, outputs: h, logits } = body;
    let classes = layers::static_shape(b, h)?.dims().and_then(|d| d.last().copied().flatten());
    let (labels, loss_t, acc) = match loss {
        Loss::CategoricalCrossentropy => {
            let k = classes.ok_or_else(|| TrainError::Invalid("the last layer's width must be known".into()))?;
            let y = s.with_name("outputs").placeholder(DType::Float, &Shape::new(vec![None, Some(k)]))?;
            let l = losses::softmax_cross_entropy(&s, y, logits)?;
            (y, l, Some(losses::accuracy(&s, y, h, "accuracy")?))
        }
        Loss::SparseCategoricalCrossentropy => {
            let y = s.with_name("outputs").placeholder(DType::Int64, &Shape::new(vec![None]))?;
            let l = losses::sparse_softmax_cross_entropy(&s, y, logits)?;
            (y, l, Some(losses::sparse_accuracy(&s, y, h, "accuracy")?))
        }
        Loss::MeanSquaredError => {
            let shape = layers::static_shape(b, h)?;
            let y = s.with_name("outputs").placeholder(DType::Float, &shape)?;
            (y, losses::mean_squared_error(&s, y, h)?, None)
        }
    };
    let loss_t = s.with_name("loss").identity(loss_t)?;
    let gs = b.global_step()?;
    let mut train = optimizer.minimize(b, loss_t, None, Some(&gs))?;
    let updates: Vec<NodeId> = b
        .collections()
        .get(layers::UPDATE_OPS)
        .map(|names| s.with_graph(|g| names.iter().filter_map(|n| g.find(n)).collect()))
        .unwrap_or_default();
    if !updates.is_empty() {
        let mut deps = vec![train];
        deps.extend(updates);
        train = s.with_name("train_with_updates").group(&deps)?;
    }
    let init = b.global_variables_initializer()?;
    let g = b.graph();
    let name = |o: Output| g.output_name(o);
    let roles = Roles {
        inputs: name(x),
        labels: name(labels),
        is_training: Some(name(training)),
        predictions: Some(name(h)),
        loss: name(loss_t),
        accuracy: acc.map(name),
        train_op: g.node(train).name.clone(),
        init: g.node(init).name.clone(),
    };
    let saver = crate::saver::Saver::new(b, None, Default::default())?;
    let session = Session::new(b.graph(), options)?;
    let m = Model { session, roles, input_shape: input_shape.to_vec(), saver: Some(saver.into()), weights };
    m.initialize()?;
    Ok(m)
}

/// A model whose body is a Rust function over the graph, for architectures a [`Sequential`]
/// list cannot express (residual connections, squeeze-and-excitation, several paths).
///
/// The body gets the [`Builder`], the input batch (`inputs:0`, float `[batch, input_shape…]`)
/// and the boolean `is_training:0` (true in training steps, false in [`Model::evaluate`]),
/// calls layer functions from [`layers`] on them, and returns the logits (for the
/// cross-entropy losses; a `predictions` softmax is added) or the outputs (for mean squared
/// error). Compiling adds what [`Sequential::compile`] adds: labels, loss, accuracy, the
/// train op with the layers' update ops, a saver, the session.
///
/// ```ignore
/// let model = Functional::new(&[32, 32, 3]).seed(1).compile(
///     |b, x, training| {
///         let h = layers::conv2d_no_bias(b, x, 16, [3, 3], [1, 1], Padding::Same, &init, "conv")?;
///         let h = layers::batch_normalization(b, h, training, 0.99, 1e-3, "bn")?;
///         let h = b.scope().add(Activation::Swish.apply(b.scope(), h)?, x)?; // residual
///         let h = layers::global_average_pooling2d(b, h, false, "pool")?;
///         layers::dense(b, h, 10, Activation::Linear, &init, "logits")
///     },
///     Loss::SparseCategoricalCrossentropy, &Optimizer::adam(1e-3), SessionOptions::default())?;
/// ```
#[derive(Clone, Debug)]
pub struct Functional {
    input_shape: Vec<usize>,
    seed: Option<i64>,
}

impl Functional {
    /// A model taking inputs of `input_shape` (without the batch dimension).
    pub fn new(input_shape: &[usize]) -> Functional {
        Functional { input_shape: input_shape.to_vec(), seed: None }
    }

    /// Makes initialization and dropout reproducible (the graph-level seed).
    pub fn seed(mut self, seed: i64) -> Functional {
        self.seed = Some(seed);
        self
    }

    /// Builds the body with `body(builder, inputs, is_training)`, then the loss, accuracy and
    /// train op; opens a session and initializes the variables.
    pub fn compile(
        &self,
        body: impl FnOnce(&Builder, Output, Output) -> Result<Output>,
        loss: Loss,
        optimizer: &Optimizer,
        options: SessionOptions,
    ) -> Result<Model> {
        let b = self.seed.map_or_else(Builder::new, Builder::with_seed);
        let s = b.scope().clone();
        let mut in_shape = vec![None];
        in_shape.extend(self.input_shape.iter().map(|&d| Some(d)));
        let x = s.with_name("inputs").placeholder(DType::Float, &Shape::new(in_shape))?;
        let training = s.with_name("is_training").placeholder(DType::Bool, &Shape::scalar())?;
        let logits = body(&b, x, training)?;
        let outputs =
            if loss == Loss::MeanSquaredError { logits } else { s.with_name("predictions").softmax(logits)? };
        finish(&b, Body { inputs: x, training, outputs, logits }, &self.input_shape, loss, optimizer, options)
    }
}

/// Options of [`Model::fit`].
#[derive(Clone, Debug)]
pub struct FitOptions {
    /// Passes over the training data.
    pub epochs: usize,
    /// Examples per step.
    pub batch_size: usize,
    /// Stop after this many steps in total (across epochs), if set.
    pub max_steps: Option<u64>,
    /// Shuffle seed: each epoch visits the examples in a new order drawn from it.
    pub shuffle_seed: u64,
    /// Show Keras's progress bar ([`crate::callbacks::ProgbarLogger`]) on stdout: redrawn
    /// after each batch on a terminal, one line per epoch otherwise.
    pub verbose: bool,
    /// Print the loss every this many steps (0 = never), like seed 003's loop.
    pub log_every: u64,
    /// Profile these batches (Keras's `profile_batch`) into a TensorBoard log directory.
    pub profile: Option<crate::profile::ProfileBatches>,
    /// Data-parallel training: `(ranks, rank)`. Each global batch of `batch_size` examples
    /// (the same on every rank: the shuffle seed is shared) is cut into `ranks` contiguous
    /// parts and this process trains on part `rank`, so the ranks together see exactly the
    /// batches one process would (`Dataset::shard`'s role for in-memory arrays).
    pub shard: Option<(usize, usize)>,
}

impl Default for FitOptions {
    fn default() -> Self {
        FitOptions {
            epochs: 1,
            batch_size: 32,
            max_steps: None,
            shuffle_seed: 0,
            verbose: true,
            log_every: 0,
            profile: None,
            shard: None,
        }
    }
}

/// What [`Model::fit`] measured.
#[derive(Clone, Debug, Default)]
pub struct History {
    /// Mean training loss per epoch.
    pub loss: Vec<f64>,
    /// Validation (loss, accuracy) per epoch, when validation data was given.
    pub validation: Vec<(f64, Option<f64>)>,
    /// Steps run.
    pub steps: u64,
    /// Training steps per second (wall time of the training steps only).
    pub steps_per_sec: f64,
}

/// A graph with training roles in a session.
pub struct Model {
    session: Session,
    roles: Roles,
    input_shape: Vec<usize>,
    saver: Option<std::sync::Mutex<crate::saver::Saver>>,
    weights: Vec<Weight>,
}

/// One of a model's weights (Keras's `model.weights`): a variable of its layers, not of the
/// optimizer (slots) or the loop (`global_step`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Weight {
    /// The variable's name (its `VarHandleOp` node), e.g. `dense/kernel`.
    pub name: String,
    /// Whether the optimizer trains it (batch normalization's moving statistics are not).
    pub trainable: bool,
}

/// The variables a hand-built graph's optimizer updates (input 0 of every node the registry
/// calls an optimizer update), by name.
fn trained_variables(g: &ferroflow_graph::Graph) -> Vec<Weight> {
    let registry = ferroflow_ops::OpRegistry::global();
    let mut names: Vec<String> = g
        .nodes()
        .iter()
        .filter(|n| registry.facts(&n.op).is_some_and(|f| f.optimizer_update))
        .filter_map(|n| n.inputs.first().map(|o| g.node(o.node).name.clone()))
        .collect();
    names.sort();
    names.dedup();
    names.into_iter().map(|name| Weight { name, trainable: true }).collect()
}

/// Rows `idx` of a `[n, ...]` tensor, as a new tensor.
pub fn gather_rows(t: &Tensor, idx: &[usize]) -> Result<Tensor> {
    let dims = t.dims();
    if dims.is_empty() {
        return Err(TrainError::Invalid("cannot take rows of a scalar".into()));
    }
    let row: usize = dims[1..].iter().product();
    let mut out_dims = dims.to_vec();
    out_dims[0] = idx.len();
    macro_rules! go {
        ($t:ty) => {{
            let src = t.as_slice::<$t>()?;
            let mut v = Vec::with_capacity(idx.len() * row);
            for &i in idx {
                v.extend_from_slice(&src[i * row..(i + 1) * row]);
            }
            Tensor::from_vec(&out_dims, v)?
        }};
    }
    Ok(match t.dtype() {
        DType::Float => go!(f32),
        DType::Double => go!(f64),
        DType::Int32 => go!(i32),
        DType::Int64 => go!(i64),
        d => return Err(TrainError::Invalid(format!("cannot batch {d} tensors"))),
    })
}

/// The epoch order's generator: SplitMix64's outputs taken modulo (slightly biased).
struct SplitMix(u64);
impl SplitMix {
    fn shuffle(&mut self, v: &mut [usize]) {
        for i in (1..v.len()).rev() {
            let j = (ferroflow_tensor::rng::splitmix64(&mut self.0) % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }
}

impl Model {
    /// A model over an existing session whose graph has these roles (e.g. seed 003's graph
    /// built by hand). `input_shape` excludes the batch dimension. Its weights are the
    /// variables the graph's optimizer updates.
    pub fn new(session: Session, roles: Roles, input_shape: &[usize]) -> Model {
        let weights = trained_variables(session.graph());
        Model { session, roles, input_shape: input_shape.to_vec(), saver: None, weights }
    }

    /// The weights (Keras's `model.weights`), in creation order.
    pub fn weights(&self) -> &[Weight] {
        &self.weights
    }

    fn variable(&self, name: &str) -> Result<std::sync::Arc<ferroflow_runtime::Variable>> {
        self.session
            .variable(name)
            .ok_or_else(|| TrainError::Invalid(format!("weight '{name}' has no value yet (initialize the model)")))
    }

    /// The weights' current values (Keras's `get_weights`), by name. The tensors share the
    /// session's buffers, which the next update copies before writing (copy-on-write), so a
    /// snapshot costs no copy of its own.
    pub fn get_weights(&self) -> Result<Vec<(String, Tensor)>> {
        self.weights
            .iter()
            .map(|w| {
                let value = self.variable(&w.name)?.read();
                let value = value.ok_or_else(|| TrainError::Invalid(format!("weight '{}' is unassigned", w.name)))?;
                Ok((w.name.clone(), value))
            })
            .collect()
    }

    /// The trainable weights' current values, by name.
    pub fn trainable_weights(&self) -> Result<Vec<(String, Tensor)>> {
        let trainable: std::collections::HashSet<&str> =
            self.weights.iter().filter(|w| w.trainable).map(|w| w.name.as_str()).collect();
        Ok(self.get_weights()?.into_iter().filter(|(n, _)| trainable.contains(n.as_str())).collect())
    }

    /// Assigns weights by name (Keras's `set_weights`, e.g. values from [`Model::get_weights`]).
    /// Every name must be a weight and every value keep its weight's dtype and shape; nothing
    /// is assigned unless all are.
    pub fn set_weights(&self, values: &[(String, Tensor)]) -> Result<()> {
        let mut checked = Vec::with_capacity(values.len());
        for (name, value) in values {
            if !self.weights.iter().any(|w| &w.name == name) {
                return Err(TrainError::Invalid(format!("set_weights: '{name}' is not one of the model's weights")));
            }
            let var = self.variable(name)?;
            let current = var.read();
            let (dtype, dims) = current.as_ref().map_or((var.dtype(), None), |t| (t.dtype(), Some(t.dims())));
            if value.dtype() != dtype || dims.is_some_and(|d| d != value.dims()) {
                return Err(TrainError::Invalid(format!(
                    "set_weights: '{name}' holds {dtype}{:?}, got {}{:?}",
                    dims.unwrap_or_default(),
                    value.dtype(),
                    value.dims()
                )));
            }
            checked.push((var, value.clone()));
        }
        for (var, value) in checked {
            var.assign(value);
        }
        Ok(())
    }

    /// The model with a saver for its session's graph (one made before the session).
    pub fn with_saver(mut self, saver: crate::saver::Saver) -> Model {
        self.saver = Some(saver.into());
        self
    }

    /// Whether the model can [`Model::save`].
    pub fn has_saver(&self) -> bool {
        self.saver.is_some()
    }

    fn saver(&self) -> Result<std::sync::MutexGuard<'_, crate::saver::Saver>> {
        let s = self.saver.as_ref().ok_or_else(|| TrainError::Invalid("this model has no saver".into()))?;
        Ok(s.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Saves every variable (and the `.meta`) as `PREFIX-STEP`, STEP being `global_step`, with
    /// TensorFlow's Saver layout (see [`crate::saver::Saver::save`]); returns the checkpoint.
    pub fn save(&self, prefix: impl AsRef<std::path::Path>) -> Result<std::path::PathBuf> {
        let step = self.session.run(&[], &["global_step/Read/ReadVariableOp:0"], &[])?[0].scalar_value::<i64>()?;
        self.saver()?.save(&self.session, prefix, Some(step))
    }

    /// Exports the model as a SavedModel that TensorFlow loads: its `serving_default`
    /// signature maps `inputs` to `predictions` with `is_training` false (a default in the
    /// written graph), and its variables are the session's current values. Needs the model's
    /// saver and [`Roles::predictions`].
    pub fn export_saved_model(&self, dir: &std::path::Path) -> Result<()> {
        let predictions = self
            .roles
            .predictions
            .as_deref()
            .ok_or_else(|| TrainError::Invalid("the model does not name its predictions".into()))?;
        let mut writer = crate::saved_model::SavedModelWriter::new(self.session.graph().to_graph_def()).signature(
            crate::saved_model::SignatureSpec::new(
                "serving_default",
                &[("inputs", &self.roles.inputs)],
                &[("predictions", predictions)],
            ),
        );
        if let Some(t) = &self.roles.is_training {
            writer = writer.default_value(t.split(':').next().unwrap_or(t), Tensor::scalar(false));
        }
        let saver = self.saver()?;
        writer.save(dir, Some((&self.session, &saver)))
    }

    /// Restores every variable from checkpoint `prefix`.
    pub fn restore(&self, prefix: impl AsRef<std::path::Path>) -> Result<crate::saver::RestoreReport> {
        self.saver()?.restore(&self.session, prefix)
    }

    /// The session.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The roles' names.
    pub fn roles(&self) -> &Roles {
        &self.roles
    }

    /// Runs the variable initializer.
    pub fn initialize(&self) -> Result<()> {
        self.session.run(&[], &[], &[&self.roles.init])?;
        Ok(())
    }

    /// Checks a batch's shape; `when` says where it came from in the error (`step 3`).
    fn check_batch(&self, x: &Tensor, when: &str) -> Result<()> {
        if x.dims().len() != self.input_shape.len() + 1 || x.dims()[1..] != self.input_shape[..] {
            return Err(TrainError::BatchShape {
                when: when.to_string(),
                input: self.roles.inputs.clone(),
                got: x.dims().to_vec(),
                expected: self.input_shape.clone(),
            });
        }
        Ok(())
    }

    fn feeds(&self, x: Tensor, y: Tensor, training: bool) -> Vec<(&str, Tensor)> {
        let mut f = vec![(self.roles.inputs.as_str(), x), (self.roles.labels.as_str(), y)];
        if let Some(t) = &self.roles.is_training {
            f.push((t.as_str(), Tensor::scalar(training)));
        }
        f
    }

    /// One training step on a batch; returns the loss (before the update). `step` (1-based)
    /// only labels errors.
    pub fn train_step(&self, x: Tensor, y: Tensor, step: u64) -> Result<f64> {
        self.check_batch(&x, &format!("step {step}"))?;
        if x.dims()[0] != y.dims().first().copied().unwrap_or(0) {
            return Err(TrainError::Invalid(format!(
                "step {step}: {} examples in '{}' but {} labels in '{}'",
                x.dims()[0],
                self.roles.inputs,
                y.dims().first().copied().unwrap_or(0),
                self.roles.labels
            )));
        }
        let feeds = self.feeds(x, y, true);
        let out = self
            .session
            .run(&feeds, &[&self.roles.loss], &[&self.roles.train_op])
            .map_err(|source| TrainError::Step { step, source })?;
        let loss = crate::to_f64(&out[0])?[0];
        if !loss.is_finite() {
            return Err(TrainError::NonFinite { step, tensor: self.roles.loss.clone(), value: loss });
        }
        Ok(loss)
    }

    /// Mean loss and accuracy over `(x, y)` in batches, with dropout off.
    pub fn evaluate(&self, x: &Tensor, y: &Tensor, batch_size: usize) -> Result<(f64, Option<f64>)> {
        let n = x.dims().first().copied().unwrap_or(0);
        if n == 0 || batch_size == 0 {
            return Err(TrainError::Invalid("evaluate needs examples and a batch size above 0".into()));
        }
        let mut fetches = vec![self.roles.loss.as_str()];
        if let Some(a) = &self.roles.accuracy {
            fetches.push(a);
        }
        let (mut loss, mut acc) = (0.0, 0.0);
        let mut start = 0;
        while start < n {
            let idx: Vec<usize> = (start..(start + batch_size).min(n)).collect();
            let xb = gather_rows(x, &idx)?;
            self.check_batch(&xb, &format!("evaluate, examples {start}.."))?;
            let out = self.session.run(&self.feeds(xb, gather_rows(y, &idx)?, false), &fetches, &[])?;
            loss += crate::to_f64(&out[0])?[0] * idx.len() as f64;
            if out.len() > 1 {
                acc += crate::to_f64(&out[1])?[0] * idx.len() as f64;
            }
            start += batch_size;
        }
        Ok((loss / n as f64, self.roles.accuracy.as_ref().map(|_| acc / n as f64)))
    }

    /// Trains on `(x, y)`: shuffled batches, `epochs` passes (or `max_steps` steps), a
    /// progress line, validation on `validation` after each epoch.
    pub fn fit(
        &self,
        x: &Tensor,
        y: &Tensor,
        opts: &FitOptions,
        validation: Option<(&Tensor, &Tensor)>,
    ) -> Result<History> {
        self.fit_with(x, y, opts, validation, &mut [])
    }

    /// [`Model::fit`] calling `callbacks` (Keras's `callbacks=[...]`) at the start and end of
    /// training, of every epoch, batch and validation; training stops after an epoch when one
    /// of them asks. Each batch is a profiler step (`train`, its row gathering the input wait),
    /// and `opts.profile` profiles batches as in `fit_dataset`.
    pub fn fit_with(
        &self,
        x: &Tensor,
        y: &Tensor,
        opts: &FitOptions,
        validation: Option<(&Tensor, &Tensor)>,
        callbacks: &mut [&mut dyn crate::callbacks::Callback],
    ) -> Result<History> {
        use crate::callbacks::Logs;
        let n = x.dims().first().copied().unwrap_or(0);
        if n == 0 || opts.batch_size == 0 || opts.epochs == 0 {
            return Err(TrainError::Invalid(format!(
                "fit needs examples, a batch size and epochs above 0 (got {n} examples, batch {}, {} epochs)",
                opts.batch_size, opts.epochs
            )));
        }
        if y.dims().first().copied() != Some(n) {
            return Err(TrainError::Invalid(format!(
                "{n} examples in x but {:?} in y: their first dimensions must match",
                y.dims().first()
            )));
        }
        if let Some((ranks, rank)) = opts.shard {
            if rank >= ranks || opts.batch_size < ranks {
                return Err(TrainError::Invalid(format!(
                    "shard ({ranks} ranks, rank {rank}): expected a rank below the number of ranks and a batch size \
                     ({}) of at least one example per rank",
                    opts.batch_size
                )));
            }
        }
        let mut rng = SplitMix(opts.shuffle_seed);
        let mut order: Vec<usize> = (0..n).collect();
        let mut hist = History::default();
        let steps_per_epoch = n.div_ceil(opts.batch_size) as u64;
        let mut train_time = 0.0;
        let mut hooks = crate::callbacks::Hooks::begin(self, callbacks, opts, Some(steps_per_epoch))?;
        let mut logs = Logs::new();
        'epochs: for epoch in 0..opts.epochs {
            hooks.epoch_begin(self, epoch)?;
            rng.shuffle(&mut order);
            let (mut sum, mut count) = (0.0, 0u64);
            for chunk in order.chunks(opts.batch_size) {
                if opts.max_steps.is_some_and(|m| hist.steps >= m) {
                    if count > 0 {
                        hist.loss.push(sum / count as f64);
                    }
                    break 'epochs;
                }
                let batch_no = hist.steps + 1;
                hooks.batch_begin(self, batch_no)?;
                let step_span = ferroflow_profiler::step("train", batch_no as i64);
                let input_span = ferroflow_profiler::span_kind("IteratorGetNext", ferroflow_profiler::Kind::Input, 0);
                let chunk = match opts.shard {
                    Some((ranks, rank)) => &chunk[chunk.len() * rank / ranks..chunk.len() * (rank + 1) / ranks],
                    None => chunk,
                };
                let xb = gather_rows(x, chunk)?;
                let yb = gather_rows(y, chunk)?;
                drop(input_span);
                let t0 = Instant::now();
                let loss = self.train_step(xb, yb, batch_no)?;
                train_time += t0.elapsed().as_secs_f64();
                drop(step_span);
                hooks.batch_end(self, batch_no, loss)?;
                hist.steps += 1;
                sum += loss;
                count += 1;
                if opts.log_every > 0 && hist.steps % opts.log_every == 0 {
                    eprintln!("{} step loss: {loss}", hist.steps);
                }
            }
            hist.loss.push(sum / count.max(1) as f64);
            logs = Logs::from([("loss".to_string(), sum / count.max(1) as f64)]);
            if let Some((vx, vy)) = validation {
                let (l, a) = hooks.validate(self, &mut logs, || self.evaluate(vx, vy, opts.batch_size.max(256)))?;
                hist.validation.push((l, a));
            }
            if hooks.epoch_end(self, epoch, &logs)? {
                break;
            }
        }
        hooks.end(self, &logs)?;
        hist.steps_per_sec = hist.steps as f64 / train_time.max(1e-9);
        Ok(hist)
    }
}
