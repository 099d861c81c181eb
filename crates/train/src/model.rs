//! A model: a graph with training roles (`inputs`, `outputs`, `is_training`, `loss`,
//! `accuracy`, the train op) in a session, built by [`Sequential`] or [`Functional`] or by
//! hand (`mnist_training`'s graph). [`Model`] holds the weights (get, set, save, restore, export as a
//! SavedModel), runs one training step or an evaluation, and trains with [`Model::fit`]; a step names itself
//! in errors, and a loss that stops being finite or a batch of the wrong shape stops training.
use ferroflow_data::Dataset;
use ferroflow_runtime::Session;
use ferroflow_tensor::{DType, Tensor};

use crate::{Result, TrainError};

mod build;
mod fit;

pub use build::{Functional, Layer, Loss, Sequential};
pub use fit::{FitOptions, History, PipelineHistory};

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

impl Model {
    /// A model over an existing session whose graph has these roles (e.g. `mnist_training`'s graph
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

    /// Mean loss and accuracy over every batch of `data` (dropout off), weighted by batch size.
    pub fn evaluate_dataset(&self, data: &Dataset<(Tensor, Tensor)>) -> Result<(f64, Option<f64>)> {
        let (mut loss, mut acc, mut n, mut has_acc) = (0.0, 0.0, 0usize, false);
        for batch in data.iter()? {
            let (x, y) = batch?;
            let b = x.dims().first().copied().unwrap_or(0);
            if b == 0 {
                continue;
            }
            let (l, a) = self.evaluate(&x, &y, b)?;
            loss += l * b as f64;
            if let Some(a) = a {
                acc += a * b as f64;
                has_acc = true;
            }
            n += b;
        }
        if n == 0 {
            return Err(TrainError::Invalid("the validation dataset is empty".into()));
        }
        Ok((loss / n as f64, has_acc.then(|| acc / n as f64)))
    }
}
