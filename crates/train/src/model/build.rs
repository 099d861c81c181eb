//! Building a model's graph: a [`Sequential`] list of [`Layer`]s, or a [`Functional`] body
//! written in Rust, compiled with a [`Loss`] and an optimizer into a [`Model`] (placeholders
//! `inputs`, `outputs` and `is_training`, the layers, `loss`, `accuracy`, the train op and a
//! saver, in a session with the variables initialized).
use ferroflow_graph::Output;
use ferroflow_runtime::{Session, SessionOptions};
use ferroflow_tensor::{DType, Shape};

use super::{Model, Roles, Weight};
use crate::layers::{self, Activation, Padding};
use crate::losses;
use crate::optimizers::Optimizer;
use crate::{Builder, Initializer, Result, TrainError};
use ferroflow_ops::RawOps;

/// A layer of a [`Sequential`] model.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
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
#[non_exhaustive]
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
        let (b, x, training) = start(self.seed, &self.input_shape)?;
        let s = b.scope().clone();
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

/// A builder (with the graph-level `seed`) and a model's two placeholders: `inputs` (float
/// `[batch, input_shape…]`) and the boolean `is_training`.
fn start(seed: Option<i64>, input_shape: &[usize]) -> Result<(Builder, Output, Output)> {
    let b = seed.map_or_else(Builder::new, Builder::with_seed);
    let s = b.scope().clone();
    let mut in_shape = vec![None];
    in_shape.extend(input_shape.iter().map(|&d| Some(d)));
    let x = s.with_name("inputs").placeholder(DType::Float, &Shape::new(in_shape))?;
    let training = s.with_name("is_training").placeholder(DType::Bool, &Shape::scalar())?;
    Ok((b, x, training))
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
    let train = optimizer.minimize_with_updates(b, loss_t, None, Some(&gs))?;
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
        let (b, x, training) = start(self.seed, &self.input_shape)?;
        let s = b.scope().clone();
        let logits = body(&b, x, training)?;
        let outputs =
            if loss == Loss::MeanSquaredError { logits } else { s.with_name("predictions").softmax(logits)? };
        finish(&b, Body { inputs: x, training, outputs, logits }, &self.input_shape, loss, optimizer, options)
    }
}
