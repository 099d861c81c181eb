//! `Model::fit` from an input pipeline: batches of `(x, y)` come from a
//! [`ferroflow_data::Dataset`], epoch by epoch, with validation from another dataset. The time
//! each step waits for its batch is measured apart from the step itself, so the effect of
//! `prefetch` (input overlapping training) shows in the figures.
use std::time::Instant;

use ferroflow_data::Dataset;
use ferroflow_tensor::Tensor;

use crate::callbacks::{Callback, Hooks, Logs};
use crate::model::{FitOptions, History, Model};
use crate::{Result, TrainError};

/// What [`Model::fit_dataset`] measured, beyond [`History`].
#[derive(Clone, Debug, Default)]
pub struct PipelineHistory {
    /// Losses, validation, steps and training speed.
    pub history: History,
    /// Seconds spent waiting for batches (the input pipeline's share of the loop).
    pub input_seconds: f64,
    /// Seconds spent in training steps.
    pub train_seconds: f64,
    /// Wall-clock seconds per step, input and training together.
    pub step_seconds: Vec<f64>,
    /// The profile written for `FitOptions::profile` (`.../plugins/profile/<run>/<host>.xplane.pb`).
    pub profile: Option<std::path::PathBuf>,
}

impl PipelineHistory {
    /// Mean wall-clock seconds per step (input wait included).
    pub fn mean_step_seconds(&self) -> f64 {
        self.step_seconds.iter().sum::<f64>() / self.step_seconds.len().max(1) as f64
    }

    /// The fraction of the loop spent waiting for input (TensorFlow's profiler calls a
    /// step input-bound above 20%).
    pub fn input_fraction(&self) -> f64 {
        self.input_seconds / (self.input_seconds + self.train_seconds).max(1e-12)
    }
}

impl Model {
    /// Trains from `train`'s `(x, y)` batches: each epoch reads a fresh iterator, or, with
    /// `steps_per_epoch`, that many batches from one iterator kept across epochs (give it a
    /// `repeat()`; an iterator that runs out ends training with a note, as Keras does).
    /// `opts.batch_size` and `shuffle_seed` are the dataset's business and are ignored here;
    /// `epochs`, `max_steps`, `verbose` and `log_every` apply. After each epoch the model is
    /// evaluated on `validation` when given.
    pub fn fit_dataset(
        &self,
        train: &Dataset<(Tensor, Tensor)>,
        opts: &FitOptions,
        steps_per_epoch: Option<u64>,
        validation: Option<&Dataset<(Tensor, Tensor)>>,
    ) -> Result<PipelineHistory> {
        self.fit_dataset_with(train, opts, steps_per_epoch, validation, &mut [])
    }

    /// [`Model::fit_dataset`] calling `callbacks` (Keras's `callbacks=[...]`) at the start and
    /// end of training, of every epoch, batch and validation; training stops after an epoch
    /// when one of them asks ([`Callback::stop_training`], e.g. `EarlyStopping`).
    pub fn fit_dataset_with(
        &self,
        train: &Dataset<(Tensor, Tensor)>,
        opts: &FitOptions,
        steps_per_epoch: Option<u64>,
        validation: Option<&Dataset<(Tensor, Tensor)>>,
        callbacks: &mut [&mut dyn Callback],
    ) -> Result<PipelineHistory> {
        if opts.epochs == 0 || steps_per_epoch == Some(0) {
            return Err(TrainError::Invalid("fit_dataset needs epochs and steps_per_epoch above 0".into()));
        }
        let mut out = PipelineHistory::default();
        let steps = steps_per_epoch.or(match train.cardinality() {
            ferroflow_data::Cardinality::Finite(n) => Some(n),
            _ => None,
        });
        let mut hooks = Hooks::begin(self, callbacks, opts, steps)?;
        let mut logs = Logs::new();
        let mut kept = None;
        'epochs: for epoch in 0..opts.epochs {
            hooks.epoch_begin(self, epoch)?;
            let mut fresh;
            let it = match steps_per_epoch {
                Some(_) => kept.get_or_insert(train.iter()?),
                None => {
                    fresh = train.iter()?;
                    &mut fresh
                }
            };
            let (mut sum, mut count) = (0.0, 0u64);
            loop {
                if steps_per_epoch.is_some_and(|s| count >= s) {
                    break;
                }
                if opts.max_steps.is_some_and(|m| out.history.steps >= m) {
                    out.history.loss.push(sum / count.max(1) as f64);
                    break 'epochs;
                }
                let batch_no = out.history.steps + 1;
                hooks.batch_begin(self, batch_no)?;
                let step_span = ferroflow_profiler::step("train", batch_no as i64);
                let input_span = ferroflow_profiler::span_kind("IteratorGetNext", ferroflow_profiler::Kind::Input, 0);
                let t0 = Instant::now();
                let Some(batch) = it.next() else {
                    drop(input_span);
                    if let Some(s) = step_span {
                        s.cancel();
                    }
                    if steps_per_epoch.is_some() {
                        eprintln!(
                            "the input ran out of data after {count} of {} steps of epoch {}; give the dataset a repeat()",
                            steps_per_epoch.unwrap_or(0),
                            epoch + 1
                        );
                        out.history.loss.push(sum / count.max(1) as f64);
                        break 'epochs;
                    }
                    break;
                };
                let (x, y) = batch?;
                drop(input_span);
                let t1 = Instant::now();
                let loss = self.train_step(x, y, batch_no)?;
                let t2 = Instant::now();
                drop(step_span);
                hooks.batch_end(self, batch_no, loss)?;
                out.input_seconds += (t1 - t0).as_secs_f64();
                out.train_seconds += (t2 - t1).as_secs_f64();
                out.step_seconds.push((t2 - t0).as_secs_f64());
                out.history.steps += 1;
                sum += loss;
                count += 1;
                if opts.log_every > 0 && out.history.steps % opts.log_every == 0 {
                    eprintln!("{} step loss: {loss}", out.history.steps);
                }
            }
            out.history.loss.push(sum / count.max(1) as f64);
            logs = Logs::from([("loss".to_string(), sum / count.max(1) as f64)]);
            if let Some(v) = validation {
                let (l, a) = hooks.validate(self, &mut logs, || self.evaluate_dataset(v))?;
                out.history.validation.push((l, a));
            }
            if hooks.epoch_end(self, epoch, &logs)? {
                break;
            }
        }
        out.profile = hooks.end(self, &logs)?;
        out.history.steps_per_sec = out.history.steps as f64 / out.train_seconds.max(1e-9);
        Ok(out)
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
