//! Keras-style callbacks for [`Model::fit_with`] and [`Model::fit_dataset_with`]: a
//! [`Callback`] trait called at the start and end of training, of each epoch and of each batch
//! with a logs map (`loss`, `val_loss`, `val_accuracy`, ...), and the callbacks people reach
//! for: [`TensorBoard`] (scalars, histograms, graph, profile), [`CsvLogger`],
//! [`EarlyStopping`] and [`ModelCheckpoint`].
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use ferroflow_summary::SummaryWriter;
use ferroflow_tensor::Tensor;

use crate::model::Model;
use crate::profile::{check_writable, ProfileBatches, ProfileWindow};
use crate::{Result, TrainError};

/// Metric values by name (`loss`, `val_loss`, `val_accuracy`).
pub type Logs = BTreeMap<String, f64>;

/// Called by the fit loop as training runs. Every method does nothing by default.
#[allow(unused_variables)]
pub trait Callback {
    /// Before training: the epochs and, when known, the steps per epoch.
    fn set_params(&mut self, epochs: usize, steps_per_epoch: Option<u64>) {}
    /// Before the first epoch.
    fn on_train_begin(&mut self, model: &Model) -> Result<()> {
        Ok(())
    }
    /// After the last epoch (or an early stop), with the last epoch's logs.
    fn on_train_end(&mut self, model: &Model, logs: &Logs) -> Result<()> {
        Ok(())
    }
    /// Before epoch `epoch` (0-based).
    fn on_epoch_begin(&mut self, model: &Model, epoch: usize) -> Result<()> {
        Ok(())
    }
    /// After epoch `epoch`, with its mean `loss` and the validation metrics.
    fn on_epoch_end(&mut self, model: &Model, epoch: usize, logs: &Logs) -> Result<()> {
        Ok(())
    }
    /// Before global batch `batch` (1-based, counted across epochs).
    fn on_train_batch_begin(&mut self, model: &Model, batch: u64) -> Result<()> {
        Ok(())
    }
    /// After global batch `batch`, with its `loss`.
    fn on_train_batch_end(&mut self, model: &Model, batch: u64, logs: &Logs) -> Result<()> {
        Ok(())
    }
    /// Before validation at the end of an epoch.
    fn on_test_begin(&mut self, model: &Model) -> Result<()> {
        Ok(())
    }
    /// After validation, with `val_loss` (and `val_accuracy`).
    fn on_test_end(&mut self, model: &Model, logs: &Logs) -> Result<()> {
        Ok(())
    }
    /// Whether training should stop after this epoch (Keras's `model.stop_training`).
    fn stop_training(&self) -> bool {
        false
    }
    /// The batches (first, last; 1-based) this callback profiles, if it does: training
    /// refuses a second profile at the start rather than failing at its first batch.
    fn profile_batches(&self) -> Option<(u64, u64)> {
        None
    }
}

/// How often [`TensorBoard`] writes the loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateFreq {
    /// After each epoch (`epoch_loss`).
    Epoch,
    /// Also every N batches (`batch_loss`).
    Batches(u64),
}

/// Keras's `TensorBoard` callback: `log_dir/train` and `log_dir/validation` runs with
/// `epoch_loss` / `epoch_accuracy` scalars, `batch_loss` every N batches, histograms of the
/// trainable weights every `histogram_freq` epochs, the graph, and the profile of
/// `profile_batch` (with step markers TensorBoard's overview page counts). The log directory
/// is checked writable when the callback is made, not after an epoch.
pub struct TensorBoard {
    log_dir: PathBuf,
    histogram_freq: usize,
    write_graph: bool,
    update_freq: UpdateFreq,
    profile: Option<ProfileWindow>,
    train: Option<SummaryWriter>,
    validation: Option<SummaryWriter>,
}

impl TensorBoard {
    /// A TensorBoard callback writing under `log_dir`; `profile_batch` is Keras's (`"110,120"`,
    /// `"5"`, or empty for none).
    pub fn new(
        log_dir: &Path,
        histogram_freq: usize,
        write_graph: bool,
        update_freq: UpdateFreq,
        profile_batch: &str,
    ) -> Result<TensorBoard> {
        check_writable(log_dir)?;
        let profile = match profile_batch.trim() {
            "" | "0" => None,
            spec => Some(ProfileWindow::new(&ProfileBatches::parse(log_dir, spec)?)),
        };
        Ok(TensorBoard {
            log_dir: log_dir.to_path_buf(),
            histogram_freq,
            write_graph,
            update_freq,
            profile,
            train: None,
            validation: None,
        })
    }

    /// In data-parallel training: rank 0's callback, whose profile holds every rank's
    /// capture (the other ranks profile the same batches with `FitOptions::profile` and
    /// [`ProfileBatches::gather`] set).
    pub fn gather_profile_across_ranks(mut self) -> TensorBoard {
        if let Some(p) = &mut self.profile {
            p.gather();
        }
        self
    }

    /// Where the profile was written, once it was.
    pub fn profile_path(&self) -> Option<&Path> {
        self.profile.as_ref().and_then(|p| p.written.as_deref())
    }

    fn writer(slot: &mut Option<SummaryWriter>, dir: PathBuf) -> Result<&mut SummaryWriter> {
        if slot.is_none() {
            *slot = Some(SummaryWriter::create(&dir).map_err(TrainError::Summary)?);
        }
        Ok(slot.as_mut().expect("set above"))
    }
}

impl Callback for TensorBoard {
    fn profile_batches(&self) -> Option<(u64, u64)> {
        self.profile.as_ref().map(|p| p.batches())
    }

    fn on_train_begin(&mut self, model: &Model) -> Result<()> {
        let graph = self.write_graph.then(|| model.session().graph().to_graph_def());
        let w = Self::writer(&mut self.train, self.log_dir.join("train"))?;
        if let Some(g) = graph {
            w.graph(&g).map_err(TrainError::Summary)?;
        }
        Ok(())
    }

    fn on_train_batch_begin(&mut self, _model: &Model, batch: u64) -> Result<()> {
        match self.profile.as_mut() {
            Some(p) => p.batch_begin(batch),
            None => Ok(()),
        }
    }

    fn on_train_batch_end(&mut self, _model: &Model, batch: u64, logs: &Logs) -> Result<()> {
        if let Some(p) = self.profile.as_mut() {
            p.batch_end(batch)?;
        }
        if let (UpdateFreq::Batches(n), Some(&loss)) = (self.update_freq, logs.get("loss")) {
            if n > 0 && batch.is_multiple_of(n) {
                let w = Self::writer(&mut self.train, self.log_dir.join("train"))?;
                w.scalar("batch_loss", loss as f32, batch as i64).map_err(TrainError::Summary)?;
            }
        }
        Ok(())
    }

    fn on_epoch_end(&mut self, model: &Model, epoch: usize, logs: &Logs) -> Result<()> {
        let w = Self::writer(&mut self.train, self.log_dir.join("train"))?;
        for (k, v) in logs.iter().filter(|(k, _)| !k.starts_with("val_")) {
            w.scalar(&format!("epoch_{k}"), *v as f32, epoch as i64).map_err(TrainError::Summary)?;
        }
        if self.histogram_freq > 0 && epoch.is_multiple_of(self.histogram_freq) {
            for (name, t) in model.trainable_weights()? {
                let values: Vec<f32> = crate::to_f64(&t)?.into_iter().map(|v| v as f32).collect();
                w.histogram(&name, &values, epoch as i64).map_err(TrainError::Summary)?;
            }
        }
        let val: Vec<(&String, &f64)> = logs.iter().filter(|(k, _)| k.starts_with("val_")).collect();
        if !val.is_empty() {
            let w = Self::writer(&mut self.validation, self.log_dir.join("validation"))?;
            for (k, v) in val {
                w.scalar(&format!("epoch_{}", &k[4..]), *v as f32, epoch as i64).map_err(TrainError::Summary)?;
            }
        }
        Ok(())
    }

    fn on_train_end(&mut self, _model: &Model, _logs: &Logs) -> Result<()> {
        if let Some(p) = self.profile.as_mut() {
            p.finish()?;
        }
        for w in [&mut self.train, &mut self.validation].into_iter().flatten() {
            w.close().map_err(TrainError::Summary)?;
        }
        Ok(())
    }
}

/// Keras's `CSVLogger`: one row per epoch (`epoch` and every log, columns from the first
/// epoch), flushed as written.
pub struct CsvLogger {
    path: PathBuf,
    file: Option<std::io::BufWriter<std::fs::File>>,
    columns: Vec<String>,
}

impl CsvLogger {
    /// A logger writing `path` (replaced).
    pub fn new(path: &Path) -> CsvLogger {
        CsvLogger { path: path.to_path_buf(), file: None, columns: Vec::new() }
    }
}

impl Callback for CsvLogger {
    fn on_train_begin(&mut self, _model: &Model) -> Result<()> {
        let f = std::fs::File::create(&self.path)
            .map_err(|e| TrainError::Io { context: format!("CSVLogger: {}", self.path.display()), source: e })?;
        self.file = Some(std::io::BufWriter::new(f));
        Ok(())
    }

    fn on_epoch_end(&mut self, _model: &Model, epoch: usize, logs: &Logs) -> Result<()> {
        let io = |e: std::io::Error| TrainError::Io { context: "CSVLogger".into(), source: e };
        let Some(f) = self.file.as_mut() else { return Ok(()) };
        if self.columns.is_empty() {
            self.columns = logs.keys().cloned().collect();
            writeln!(f, "epoch,{}", self.columns.join(",")).map_err(io)?;
        }
        let row: Vec<String> =
            self.columns.iter().map(|c| logs.get(c).map_or(String::new(), |v| v.to_string())).collect();
        writeln!(f, "{epoch},{}", row.join(",")).map_err(io)?;
        f.flush().map_err(io)
    }
}

/// Whether a smaller or a larger monitored value is better.
fn lower_is_better(monitor: &str) -> bool {
    !(monitor.contains("acc") || monitor.contains("auc"))
}

/// Keras's `EarlyStopping`: stop when `monitor` has not improved by more than `min_delta` for
/// `patience` epochs; with `restore_best_weights`, the model ends training with the weights of
/// its best epoch (Keras 3: whether or not training stopped early).
pub struct EarlyStopping {
    monitor: String,
    min_delta: f64,
    patience: usize,
    restore_best_weights: bool,
    best: Option<f64>,
    best_weights: Option<Vec<(String, Tensor)>>,
    wait: usize,
    stop: bool,
    /// The epoch training stopped after, if it did.
    pub stopped_epoch: Option<usize>,
    /// The epoch with the best `monitor` value so far (0-based).
    pub best_epoch: Option<usize>,
}

impl EarlyStopping {
    /// Stops after `patience` epochs without an improvement of `monitor` (`val_loss`,
    /// `val_accuracy`, `loss`) above `min_delta`.
    pub fn new(monitor: &str, min_delta: f64, patience: usize) -> EarlyStopping {
        EarlyStopping {
            monitor: monitor.into(),
            min_delta: min_delta.abs(),
            patience,
            restore_best_weights: false,
            best: None,
            best_weights: None,
            wait: 0,
            stop: false,
            stopped_epoch: None,
            best_epoch: None,
        }
    }

    /// Keras's `restore_best_weights`: keep the weights of the best epoch (a snapshot that
    /// shares the session's buffers until the next update writes them) and assign them when
    /// training ends.
    pub fn restore_best_weights(mut self, on: bool) -> EarlyStopping {
        self.restore_best_weights = on;
        self
    }
}

impl Callback for EarlyStopping {
    fn on_train_begin(&mut self, _model: &Model) -> Result<()> {
        (self.best, self.best_weights, self.wait, self.stop) = (None, None, 0, false);
        (self.stopped_epoch, self.best_epoch) = (None, None);
        Ok(())
    }

    fn on_epoch_end(&mut self, model: &Model, epoch: usize, logs: &Logs) -> Result<()> {
        let Some(&v) = logs.get(&self.monitor) else {
            return Err(TrainError::Invalid(format!(
                "EarlyStopping monitors '{}', which the logs do not have (they have: {})",
                self.monitor,
                logs.keys().cloned().collect::<Vec<_>>().join(", ")
            )));
        };
        let improved = match self.best {
            None => true,
            Some(b) if lower_is_better(&self.monitor) => v < b - self.min_delta,
            Some(b) => v > b + self.min_delta,
        };
        if improved {
            self.best = Some(v);
            self.best_epoch = Some(epoch);
            self.wait = 0;
            if self.restore_best_weights {
                self.best_weights = Some(model.get_weights()?);
            }
        } else {
            self.wait += 1;
            if self.wait >= self.patience {
                self.stop = true;
                self.stopped_epoch = Some(epoch);
            }
        }
        Ok(())
    }

    fn on_train_end(&mut self, model: &Model, _logs: &Logs) -> Result<()> {
        match self.best_weights.take() {
            Some(w) => model.set_weights(&w),
            None => Ok(()),
        }
    }

    fn stop_training(&self) -> bool {
        self.stop
    }
}

/// Keras's `ModelCheckpoint`: after each epoch, save the model with its Saver
/// (`PREFIX-STEP.index/.data/.meta` and the `checkpoint` file), or with `save_best_only` only
/// when `monitor` improved.
pub struct ModelCheckpoint {
    prefix: PathBuf,
    monitor: String,
    save_best_only: bool,
    best: Option<f64>,
    /// Every checkpoint written.
    pub saved: Vec<PathBuf>,
}

impl ModelCheckpoint {
    /// Saves to `prefix` after each epoch (or only on improvements of `monitor`).
    pub fn new(prefix: &Path, monitor: &str, save_best_only: bool) -> ModelCheckpoint {
        ModelCheckpoint {
            prefix: prefix.to_path_buf(),
            monitor: monitor.into(),
            save_best_only,
            best: None,
            saved: Vec::new(),
        }
    }
}

impl Callback for ModelCheckpoint {
    fn on_train_begin(&mut self, model: &Model) -> Result<()> {
        if let Some(dir) = self.prefix.parent().filter(|d| !d.as_os_str().is_empty()) {
            check_writable(dir)?;
        }
        // Fails now, not after an epoch, when the model cannot save.
        model
            .has_saver()
            .then_some(())
            .ok_or_else(|| TrainError::Invalid("ModelCheckpoint: this model has no saver (Model::with_saver)".into()))
    }

    fn on_epoch_end(&mut self, model: &Model, _epoch: usize, logs: &Logs) -> Result<()> {
        if self.save_best_only {
            let Some(&v) = logs.get(&self.monitor) else {
                return Err(TrainError::Invalid(format!(
                    "ModelCheckpoint monitors '{}', not in the logs",
                    self.monitor
                )));
            };
            let better = self.best.is_none_or(|b| if lower_is_better(&self.monitor) { v < b } else { v > b });
            if !better {
                return Ok(());
            }
            self.best = Some(v);
        }
        self.saved.push(model.save(&self.prefix)?);
        Ok(())
    }
}

/// Keras's progress bar: on a terminal, one line per epoch redrawn after each batch —
/// `Epoch 2/5 [=========>......] 12/20 ETA 1.3s 9.1 steps/s loss 0.4321` — and the epoch's
/// final metrics; when stdout is not a terminal (a log file, CI), only the final line of each
/// epoch.
pub struct ProgbarLogger {
    epochs: usize,
    steps: Option<u64>,
    epoch: usize,
    start: std::time::Instant,
    last_draw: Option<std::time::Instant>,
    done: u64,
    loss_sum: f64,
    terminal: bool,
}

impl Default for ProgbarLogger {
    fn default() -> Self {
        use std::io::IsTerminal;
        ProgbarLogger::new(std::io::stdout().is_terminal())
    }
}

impl ProgbarLogger {
    /// A bar drawn when `terminal` (otherwise only each epoch's summary line).
    pub fn new(terminal: bool) -> ProgbarLogger {
        ProgbarLogger {
            epochs: 0,
            steps: None,
            epoch: 0,
            start: std::time::Instant::now(),
            last_draw: None,
            done: 0,
            loss_sum: 0.0,
            terminal,
        }
    }

    /// The line for the current state (`final_logs` at the epoch's end).
    pub fn line(&self, final_logs: Option<&Logs>) -> String {
        let secs = self.start.elapsed().as_secs_f64();
        let rate = self.done as f64 / secs.max(1e-9);
        let mut out = format!("Epoch {}/{}", self.epoch + 1, self.epochs);
        if let Some(total) = self.steps.filter(|&t| t > 0) {
            const WIDTH: u64 = 24;
            let filled = (self.done.min(total) * WIDTH / total) as usize;
            let head = if self.done < total { ">" } else { "=" };
            let bar = format!(
                "{}{}{}",
                "=".repeat(filled.saturating_sub(1)),
                if filled > 0 { head } else { "" },
                ".".repeat(WIDTH as usize - filled)
            );
            out += &format!(" [{bar}] {}/{total}", self.done);
            if final_logs.is_none() && rate > 0.0 {
                out += &format!(" ETA {:.1}s", total.saturating_sub(self.done) as f64 / rate);
            }
        } else {
            out += &format!(" {} steps", self.done);
        }
        match final_logs {
            Some(logs) => {
                out += &format!(" {secs:.1}s {rate:.1} steps/s");
                for (k, v) in logs {
                    out += &format!(" {k} {v:.4}");
                }
            }
            None => out += &format!(" {rate:.1} steps/s loss {:.4}", self.loss_sum / self.done.max(1) as f64),
        }
        out
    }
}

impl Callback for ProgbarLogger {
    fn set_params(&mut self, epochs: usize, steps_per_epoch: Option<u64>) {
        self.epochs = epochs;
        self.steps = steps_per_epoch;
    }

    fn on_epoch_begin(&mut self, _model: &Model, epoch: usize) -> Result<()> {
        self.epoch = epoch;
        self.start = std::time::Instant::now();
        self.done = 0;
        self.loss_sum = 0.0;
        self.last_draw = None;
        Ok(())
    }

    fn on_train_batch_end(&mut self, _model: &Model, _batch: u64, logs: &Logs) -> Result<()> {
        self.done += 1;
        self.loss_sum += logs.get("loss").copied().unwrap_or(0.0);
        // Redrawn at most 20 times a second.
        if self.terminal && self.last_draw.is_none_or(|t| t.elapsed().as_millis() >= 50) {
            self.last_draw = Some(std::time::Instant::now());
            let mut out = std::io::stdout().lock();
            let _ = write!(out, "\r\x1b[2K{}", self.line(None));
            let _ = out.flush();
        }
        Ok(())
    }

    fn on_epoch_end(&mut self, _model: &Model, _epoch: usize, logs: &Logs) -> Result<()> {
        let line = self.line(Some(logs));
        // Written, not `println!`ed: a closed stdout (`| head`) must not panic the library.
        let mut out = std::io::stdout().lock();
        let _ = if self.terminal { writeln!(out, "\r\x1b[2K{line}") } else { writeln!(out, "{line}") };
        Ok(())
    }
}

/// What both training loops do around their work: the callbacks, then (with
/// `FitOptions::verbose`) the progress bar, and `FitOptions::profile`'s window, called at the
/// same points in the same order.
pub(crate) struct Hooks<'a, 'b> {
    callbacks: &'a mut [&'b mut dyn Callback],
    progbar: Option<ProgbarLogger>,
    window: Option<ProfileWindow>,
}

impl<'a, 'b> Hooks<'a, 'b> {
    /// Checks the profile's log directory and starts training (`set_params`, `on_train_begin`).
    pub(crate) fn begin(
        model: &Model,
        callbacks: &'a mut [&'b mut dyn Callback],
        opts: &crate::model::FitOptions,
        steps: Option<u64>,
    ) -> Result<Hooks<'a, 'b>> {
        if let Some(p) = &opts.profile {
            check_writable(&p.log_dir)?;
            if let Some(other) = callbacks.iter().find_map(|c| c.profile_batches()) {
                return Err(TrainError::Invalid(format!(
                    "FitOptions::profile (batches {}..={}) and a callback's profile_batch ({}..={}) both profile: \
                     one profile can be collected at a time, keep one of them",
                    p.first, p.last, other.0, other.1
                )));
            }
        }
        let mut hooks = Hooks {
            callbacks,
            progbar: opts.verbose.then(ProgbarLogger::default),
            window: opts.profile.as_ref().map(ProfileWindow::new),
        };
        hooks.each(|c| {
            c.set_params(opts.epochs, steps);
            c.on_train_begin(model)
        })?;
        Ok(hooks)
    }

    /// Calls `f` on every callback, then on the progress bar (Keras calls its bar last).
    fn each(&mut self, mut f: impl FnMut(&mut dyn Callback) -> Result<()>) -> Result<()> {
        self.callbacks.iter_mut().try_for_each(|c| f(&mut **c))?;
        match self.progbar.as_mut() {
            Some(p) => f(p),
            None => Ok(()),
        }
    }

    pub(crate) fn epoch_begin(&mut self, model: &Model, epoch: usize) -> Result<()> {
        self.each(|c| c.on_epoch_begin(model, epoch))
    }

    pub(crate) fn batch_begin(&mut self, model: &Model, batch: u64) -> Result<()> {
        if let Some(w) = self.window.as_mut() {
            w.batch_begin(batch)?;
        }
        self.each(|c| c.on_train_batch_begin(model, batch))
    }

    pub(crate) fn batch_end(&mut self, model: &Model, batch: u64, loss: f64) -> Result<()> {
        if let Some(w) = self.window.as_mut() {
            w.batch_end(batch)?;
        }
        if self.callbacks.is_empty() && self.progbar.is_none() {
            return Ok(());
        }
        let logs = Logs::from([("loss".to_string(), loss)]);
        self.each(|c| c.on_train_batch_end(model, batch, &logs))
    }

    /// Runs `evaluate` between `on_test_begin` and `on_test_end` and adds `val_loss` (and
    /// `val_accuracy`) to `logs`.
    pub(crate) fn validate(
        &mut self,
        model: &Model,
        logs: &mut Logs,
        evaluate: impl FnOnce() -> Result<(f64, Option<f64>)>,
    ) -> Result<(f64, Option<f64>)> {
        self.each(|c| c.on_test_begin(model))?;
        let (l, a) = evaluate()?;
        let mut test_logs = Logs::from([("val_loss".to_string(), l)]);
        if let Some(a) = a {
            test_logs.insert("val_accuracy".into(), a);
        }
        self.each(|c| c.on_test_end(model, &test_logs))?;
        logs.extend(test_logs);
        Ok((l, a))
    }

    /// `on_epoch_end`; true when a callback asks training to stop.
    pub(crate) fn epoch_end(&mut self, model: &Model, epoch: usize, logs: &Logs) -> Result<bool> {
        self.each(|c| c.on_epoch_end(model, epoch, logs))?;
        Ok(self.callbacks.iter().any(|c| c.stop_training()))
    }

    /// `on_train_end`, and the profile written if its window is still open; returns where the
    /// profile went.
    pub(crate) fn end(mut self, model: &Model, logs: &Logs) -> Result<Option<PathBuf>> {
        self.each(|c| c.on_train_end(model, logs))?;
        match self.window.as_mut() {
            Some(w) => {
                w.finish()?;
                Ok(w.written.clone())
            }
            None => Ok(None),
        }
    }
}
