//! Training a Keras model as Keras's transfer-learning recipe does: [`KerasModel::freeze`]
//! sets the `trainable` flags (the base frozen, or its top layers unfrozen with its
//! BatchNormalization layers kept frozen), and [`KerasModel::compile`] builds the model once
//! with Keras's learning phase as a placeholder (dropout and trainable BatchNormalization
//! switch on it; frozen BatchNormalization always infers), the loss (sparse categorical
//! cross-entropy, from logits unless the model ends in a softmax), accuracy and Adam (Keras's
//! defaults) over the trainable weights, into a [`ferroflow_train::model::Model`] whose
//! `fit_dataset` is the training loop (callbacks, TensorBoard, profiling, progress bar).
use ferroflow_graph::Output;
use ferroflow_ops::RawOps;
use ferroflow_runtime::{Session, SessionOptions};
use ferroflow_tensor::{DType, Shape};
use ferroflow_train::model::{Model, Roles};
use ferroflow_train::optimizers::Optimizer;
use ferroflow_train::{losses, Builder};

use crate::build;
use crate::config::ModelSpec;
use crate::layers::{LayerWeights, Net};
use crate::model::{assign, read_weights};
use crate::weights::WeightMap;
use crate::{KerasError, KerasModel, Result};

/// Which layers train.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Freeze {
    /// As the file says.
    AsSaved,
    /// The base model (the nested model) frozen: only the layers after it train, and its
    /// BatchNormalization layers run in inference mode.
    Base,
    /// The base model's top `n` layers train too, except its BatchNormalization layers,
    /// which stay frozen (the Keras guide's fine-tuning step).
    UnfreezeTop(usize),
}

/// How [`KerasModel::compile`] trains.
///
/// `#[non_exhaustive]`: other crates build a `TrainOptions` from `TrainOptions::default()` and its
/// `with_*` setters, so fields can be added without breaking them.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TrainOptions {
    /// Adam's learning rate (Keras's default 0.001).
    pub learning_rate: f64,
    /// The graph-level seed (dropout and initializers), if any.
    pub seed: Option<i64>,
}

impl TrainOptions {
    /// Sets [`TrainOptions::learning_rate`].
    pub fn with_learning_rate(mut self, learning_rate: f64) -> Self {
        self.learning_rate = learning_rate;
        self
    }

    /// Sets [`TrainOptions::seed`].
    pub fn with_seed(mut self, seed: Option<i64>) -> Self {
        self.seed = seed;
        self
    }
}

impl Default for TrainOptions {
    fn default() -> Self {
        TrainOptions { learning_rate: 1e-3, seed: None }
    }
}

/// A compiled model: the training loop's [`Model`] and the layers' variables, to read the
/// trained weights back for writing a file.
pub struct Trainer {
    /// The model (`fit_dataset`, `train_step`, `evaluate`).
    pub model: Model,
    layers: Vec<LayerWeights>,
    /// Names of the trainable weights' layers (`path`), in creation order.
    pub trainable_layers: Vec<String>,
}

impl Trainer {
    /// The weights now, by layer path (what [`KerasModel::save`] writes).
    pub fn weights(&self) -> Result<WeightMap> {
        read_weights(self.model.session(), &self.layers)
    }

    /// Parameters: (trainable, total), as `model.summary()` counts them.
    pub fn params(&self) -> (usize, usize) {
        let (mut trainable, mut total) = (0, 0);
        for l in &self.layers {
            for (spec, var) in &l.vars {
                let n: usize = spec.shape.iter().product();
                total += n;
                if var.trainable {
                    trainable += n;
                }
            }
        }
        (trainable, total)
    }
}

/// The nested model a transfer-learning model wraps (its first layer that is a model).
fn base_index(spec: &ModelSpec) -> Result<usize> {
    spec.layers.iter().position(|l| l.is_model()).ok_or_else(|| {
        KerasError::Invalid(format!(
            "model '{}' has no nested base model (a model used as a layer) to freeze or unfreeze",
            spec.name
        ))
    })
}

impl KerasModel {
    /// Sets the `trainable` flags as Keras's transfer-learning recipe does.
    pub fn freeze(&mut self, freeze: Freeze) -> Result<()> {
        let top_n = match freeze {
            Freeze::AsSaved => return Ok(()),
            Freeze::Base => None,
            Freeze::UnfreezeTop(n) => Some(n),
        };
        let i = base_index(&self.spec)?;
        let base = self.spec.layers[i].name.clone();
        let inner: Vec<(String, String)> = self.spec.layers[i]
            .model
            .as_ref()
            .expect("base_index finds a model")
            .layers
            .iter()
            .map(|l| (l.name.clone(), l.class.clone()))
            .collect();
        match top_n {
            None => self.set_trainable(&[&base], false),
            Some(n) => {
                self.set_trainable(&[&base], true)?;
                let from = inner.len().saturating_sub(n);
                for (k, (name, class)) in inner.iter().enumerate() {
                    let t = k >= from && class != "BatchNormalization";
                    self.set_trainable(&[&base, name], t)?;
                }
                Ok(())
            }
        }
    }

    /// Builds the model for training (see the module's doc) in a new session with its
    /// weights.
    pub fn compile(&self, options: &TrainOptions, session: SessionOptions) -> Result<Trainer> {
        let spec = &self.spec;
        if spec.inputs.len() != 1 || spec.outputs.len() != 1 {
            return Err(KerasError::Invalid(format!(
                "fit trains models of one input and one output; '{}' has {} and {}",
                spec.name,
                spec.inputs.len(),
                spec.outputs.len()
            )));
        }
        let b = options.seed.map_or_else(Builder::new, Builder::with_seed);
        let s = b.scope().clone();
        let phase = s.with_exact_name("is_training").placeholder(DType::Bool, &Shape::scalar())?;
        let net = Net::new(b.clone());
        let built = build::build(&net, spec, true, Some(phase))?;
        let (x, out) = (built.inputs[0].1, built.outputs[0].1);
        let input_shape = build::input_shape(spec.layer(&spec.inputs[0].layer).expect("parsed"))?;
        let dims: Vec<usize> = input_shape.dims().unwrap_or(&[]).iter().skip(1).map(|d| d.unwrap_or(0)).collect();
        if dims.contains(&0) {
            return Err(KerasError::Invalid(format!(
                "fit needs the model's input shape known (got {input_shape}); build the model at a fixed size"
            )));
        }
        // The model's weights are all made: its trainable ones are the optimizer's.
        let trainable: Vec<_> = b.trainable_variables();
        if trainable.is_empty() {
            return Err(KerasError::Invalid("the model has no trainable weights (everything is frozen)".into()));
        }
        let labels = s.with_exact_name("labels").placeholder(DType::Int64, &Shape::new(vec![None]))?;
        let logits = if ends_in_softmax(&s, out) {
            // From probabilities, as Keras: log(clip(p, ε, 1 − ε)) as logits, ε = 1e-7.
            s.log(s.maximum(s.minimum(out, 1.0f32 - 1e-7)?, 1e-7f32)?)?
        } else {
            out
        };
        let loss = losses::sparse_softmax_cross_entropy(&s, labels, logits)?;
        let loss = s.with_exact_name("loss").identity(loss)?;
        let accuracy = losses::sparse_accuracy(&s, labels, out, "accuracy")?;
        let gs = b.global_step()?;
        let optimizer =
            Optimizer::Adam { learning_rate: options.learning_rate, beta1: 0.9, beta2: 0.999, epsilon: 1e-7 };
        let train = optimizer.minimize_with_updates(&b, loss, Some(&trainable), Some(&gs))?;
        let init = b.global_variables_initializer()?;
        let g = b.graph();
        let name = |o: Output| g.output_name(o);
        let roles = Roles {
            inputs: name(x),
            labels: name(labels),
            is_training: Some(name(phase)),
            predictions: Some(name(out)),
            loss: name(loss),
            accuracy: Some(name(accuracy)),
            train_op: g.node(train).name.clone(),
            init: g.node(init).name.clone(),
        };
        let session = Session::new(g, session)?;
        session.run(&[], &[], &[&roles.init])?;
        let layers = net.weights.borrow().clone();
        assign(&session, &layers, self.weights(), self.source())?;
        let trainable_layers = layers.iter().filter(|l| l.trainable).map(|l| l.path.join("/")).collect();
        Ok(Trainer { model: Model::new(session, roles, &dims), layers, trainable_layers })
    }
}

/// Whether `out` is a softmax (through identities).
fn ends_in_softmax(s: &ferroflow_ops::Scope, out: Output) -> bool {
    s.with_graph(|g| {
        let mut o = out;
        loop {
            let n = g.node(o.node);
            match (n.op.as_str(), n.inputs.first()) {
                ("Identity", Some(&i)) => o = i,
                (op, _) => return op == "Softmax",
            }
        }
    })
}
