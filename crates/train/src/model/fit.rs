//! The training loop. [`Model::fit_dataset`] trains from an input pipeline, a
//! [`ferroflow_data::Dataset`] of `(x, y)` batches, epoch by epoch, with callbacks,
//! validation and profiling; [`Model::fit`] trains from in-memory arrays by making them such a
//! dataset first, as Keras's `Model.fit(x, y)` does (its array adapter): the example indices
//! are shuffled each epoch, batched, and each batch's rows gathered. One loop runs both, so
//! callbacks, validation, `max_steps` and the figures behave the same for either. The time
//! each step waits for its batch is measured apart from the step itself, so the effect of
//! `prefetch` (input overlapping training) shows in [`PipelineHistory`].
use std::time::Instant;

use ferroflow_data::{Cardinality, DataError, Dataset};
use ferroflow_tensor::Tensor;

use super::{gather_rows, Model};
use crate::callbacks::{Callback, Hooks, Logs};
use crate::{Result, TrainError};

/// Options of [`Model::fit`].
///
/// `#[non_exhaustive]`: other crates build a `FitOptions` from `FitOptions::default()` and its
/// `with_*` setters, so fields can be added without breaking them.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct FitOptions {
    /// Passes over the training data.
    pub epochs: usize,
    /// Examples per step.
    pub batch_size: usize,
    /// Stop after this many steps in total (across epochs), if set.
    pub max_steps: Option<u64>,
    /// Shuffle seed for [`Model::fit`]: each epoch visits the examples in a new, uniformly
    /// drawn order (the dataset's `shuffle` with this seed, reshuffled each iteration).
    pub shuffle_seed: u64,
    /// Show Keras's progress bar ([`crate::callbacks::ProgbarLogger`]) on stdout: redrawn
    /// after each batch on a terminal, one line per epoch otherwise.
    pub verbose: bool,
    /// Print the loss every this many steps (0 = never), like a TensorFlow 1 training loop.
    pub log_every: u64,
    /// Profile these batches (Keras's `profile_batch`) into a TensorBoard log directory.
    pub profile: Option<crate::profile::ProfileBatches>,
    /// Data-parallel training: `(ranks, rank)`. Each global batch of `batch_size` examples
    /// (the same on every rank: the shuffle seed is shared) is cut into `ranks` contiguous
    /// parts and this process trains on part `rank`, so the ranks together see exactly the
    /// batches one process would (`Dataset::shard`'s role for in-memory arrays).
    pub shard: Option<(usize, usize)>,
}

impl FitOptions {
    /// Sets [`FitOptions::epochs`].
    pub fn with_epochs(mut self, epochs: usize) -> Self {
        self.epochs = epochs;
        self
    }

    /// Sets [`FitOptions::batch_size`].
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size;
        self
    }

    /// Sets [`FitOptions::max_steps`].
    pub fn with_max_steps(mut self, max_steps: Option<u64>) -> Self {
        self.max_steps = max_steps;
        self
    }

    /// Sets [`FitOptions::shuffle_seed`].
    pub fn with_shuffle_seed(mut self, shuffle_seed: u64) -> Self {
        self.shuffle_seed = shuffle_seed;
        self
    }

    /// Sets [`FitOptions::verbose`].
    pub fn with_verbose(mut self, verbose: bool) -> Self {
        self.verbose = verbose;
        self
    }

    /// Sets [`FitOptions::log_every`].
    pub fn with_log_every(mut self, log_every: u64) -> Self {
        self.log_every = log_every;
        self
    }

    /// Sets [`FitOptions::profile`].
    pub fn with_profile(mut self, profile: Option<crate::profile::ProfileBatches>) -> Self {
        self.profile = profile;
        self
    }

    /// Sets [`FitOptions::shard`].
    pub fn with_shard(mut self, shard: Option<(usize, usize)>) -> Self {
        self.shard = shard;
        self
    }
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

/// How the loop evaluates after each epoch.
type Validate<'a> = &'a dyn Fn() -> Result<(f64, Option<f64>)>;

impl Model {
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
        callbacks: &mut [&mut dyn Callback],
    ) -> Result<History> {
        let train = array_batches(x, y, opts)?;
        let validate = validation.map(|(vx, vy)| move || self.evaluate(vx, vy, opts.batch_size.max(256)));
        let validate = validate.as_ref().map(|v| v as Validate);
        Ok(self.run_epochs(&train, opts, None, validate, callbacks)?.history)
    }

    /// Trains from `train`'s `(x, y)` batches: each epoch reads a fresh iterator, or, with
    /// `steps_per_epoch`, that many batches from one iterator kept across epochs (give it a
    /// `repeat()`; an iterator that runs out ends training with a note, as Keras does).
    /// `opts.batch_size`, `shuffle_seed` and `shard` are the dataset's business and are
    /// ignored here; `epochs`, `max_steps`, `verbose` and `log_every` apply. After each epoch
    /// the model is evaluated on `validation` when given.
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
        let validate = validation.map(|v| move || self.evaluate_dataset(v));
        let validate = validate.as_ref().map(|v| v as Validate);
        self.run_epochs(train, opts, steps_per_epoch, validate, callbacks)
    }

    /// The loop: epochs of steps over `train`'s batches (see [`Model::fit_dataset_with`]),
    /// `validate` after each epoch.
    fn run_epochs(
        &self,
        train: &Dataset<(Tensor, Tensor)>,
        opts: &FitOptions,
        steps_per_epoch: Option<u64>,
        validate: Option<Validate>,
        callbacks: &mut [&mut dyn Callback],
    ) -> Result<PipelineHistory> {
        let mut out = PipelineHistory::default();
        let steps = steps_per_epoch.or(match train.cardinality() {
            Cardinality::Finite(n) => Some(n),
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
                    // An epoch cut before its first step has no mean loss.
                    if count > 0 {
                        out.history.loss.push(sum / count as f64);
                    }
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
                        log::warn!(
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
                    log::info!("{} step loss: {loss}", out.history.steps);
                }
            }
            out.history.loss.push(sum / count.max(1) as f64);
            logs = Logs::from([("loss".to_string(), sum / count.max(1) as f64)]);
            if let Some(validate) = validate {
                let (l, a) = hooks.validate(self, &mut logs, validate)?;
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
}

/// `(x, y)` as a dataset of `opts.batch_size` batches, the way Keras's array adapter feeds
/// `Model.fit`: the example indices `0..n` shuffled each epoch (seeded by
/// `opts.shuffle_seed`), batched, and each batch's rows gathered from `x` and `y`. With
/// `opts.shard = (ranks, rank)`, each global batch is cut into `ranks` contiguous parts and
/// this rank gets part `rank`.
fn array_batches(x: &Tensor, y: &Tensor, opts: &FitOptions) -> Result<Dataset<(Tensor, Tensor)>> {
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
    // A dtype gather_rows cannot batch fails here, before training, rather than at step 1.
    gather_rows(x, &[])?;
    gather_rows(y, &[])?;
    let (x, y, shard) = (x.clone(), y.clone(), opts.shard);
    let batches = Dataset::range(0, n as i64, 1)?
        .shuffle(n, Some(opts.shuffle_seed), true)?
        .batch(opts.batch_size, false)?
        .map(move |indices: Tensor| {
            let indices: Vec<usize> = indices.as_slice::<i64>()?.iter().map(|&i| i as usize).collect();
            let part = match shard {
                Some((ranks, rank)) => &indices[indices.len() * rank / ranks..indices.len() * (rank + 1) / ranks],
                None => &indices[..],
            };
            let rows = |t: &Tensor| gather_rows(t, part).map_err(DataError::other);
            Ok((rows(&x)?, rows(&y)?))
        });
    Ok(batches)
}

#[cfg(test)]
mod tests {
    use ferroflow_tensor::Tensor;

    use super::{array_batches, FitOptions};

    /// The rows of `x` (`[n, 1]`, row i holding i) each epoch visits, batch by batch.
    fn epochs(opts: &FitOptions, n: usize, epochs: usize) -> Vec<Vec<Vec<i64>>> {
        let x = Tensor::from_vec(&[n, 1], (0..n as i64).collect()).unwrap();
        let y = Tensor::from_vec(&[n], (0..n as i64).map(|i| i * 10).collect()).unwrap();
        let ds = array_batches(&x, &y, opts).unwrap();
        (0..epochs)
            .map(|_| {
                ds.iter()
                    .unwrap()
                    .map(|b| {
                        let (xb, yb) = b.unwrap();
                        let rows = xb.as_slice::<i64>().unwrap().to_vec();
                        let labels: Vec<i64> = rows.iter().map(|r| r * 10).collect();
                        assert_eq!(yb.as_slice::<i64>().unwrap(), labels, "x and y rows stay paired");
                        rows
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn each_epoch_is_a_new_seeded_permutation_in_batches() {
        let opts = FitOptions { batch_size: 4, shuffle_seed: 9, ..Default::default() };
        let seen = epochs(&opts, 10, 3);
        for epoch in &seen {
            assert_eq!(epoch.iter().map(Vec::len).collect::<Vec<_>>(), [4, 4, 2]);
            let mut all: Vec<i64> = epoch.concat();
            all.sort_unstable();
            assert_eq!(all, (0..10).collect::<Vec<_>>(), "every example once per epoch");
        }
        assert!(seen[0] != seen[1] && seen[1] != seen[2], "a new order each epoch: {seen:?}");
        assert_eq!(seen, epochs(&opts, 10, 3), "the seed fixes the orders");
        assert_ne!(seen, epochs(&FitOptions { shuffle_seed: 10, ..opts }, 10, 3));
    }

    #[test]
    fn ranks_split_each_global_batch_into_contiguous_parts() {
        let opts = FitOptions { batch_size: 5, shuffle_seed: 3, ..Default::default() };
        let whole = epochs(&opts, 12, 2);
        let parts: Vec<_> =
            (0..2).map(|rank| epochs(&FitOptions { shard: Some((2, rank)), ..opts.clone() }, 12, 2)).collect();
        for (e, epoch) in whole.iter().enumerate() {
            for (b, batch) in epoch.iter().enumerate() {
                assert_eq!(&[parts[0][e][b].clone(), parts[1][e][b].clone()].concat(), batch);
                assert_eq!(parts[0][e][b].len(), batch.len() / 2);
            }
        }
    }

    #[test]
    fn bad_arrays_and_options_are_argument_errors() {
        let x = Tensor::from_vec(&[4, 1], vec![0f32; 4]).unwrap();
        let y = Tensor::from_vec(&[3], vec![0i64; 3]).unwrap();
        let e = array_batches(&x, &y, &FitOptions::default()).err().unwrap();
        assert!(matches!(e, crate::TrainError::Invalid(_)), "{e:?}");
        assert!(e.to_string().contains("first dimensions must match"), "{e}");
        let y = Tensor::from_vec(&[4], vec![0i64; 4]).unwrap();
        let e = array_batches(&x, &y, &FitOptions { batch_size: 4, shard: Some((2, 2)), ..Default::default() });
        assert!(e.err().unwrap().to_string().contains("rank below the number of ranks"));
    }
}
