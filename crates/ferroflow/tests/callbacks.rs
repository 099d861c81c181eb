//! fit callbacks: EarlyStopping stops, CSVLogger writes a row per epoch, ModelCheckpoint
//! without a saver and TensorBoard with an unwritable log directory fail before training,
//! and every hook is called in Keras's order.
use ferroflow::data::Dataset;
use ferroflow::runtime::SessionOptions;
use ferroflow::tensor::Tensor;
use ferroflow::train::callbacks::{Callback, CsvLogger, EarlyStopping, Logs, ModelCheckpoint, TensorBoard, UpdateFreq};
use ferroflow::train::layers::Activation;
use ferroflow::train::model::{FitOptions, Layer, Loss, Model, Sequential};
use ferroflow::train::optimizers::Optimizer;

fn model_and_data() -> (Model, Dataset<(Tensor, Tensor)>) {
    let model = Sequential::new(&[4])
        .seed(1)
        .push(Layer::dense(3, Activation::Softmax))
        .compile(Loss::SparseCategoricalCrossentropy, &Optimizer::adam(1e-2), SessionOptions::default())
        .unwrap();
    let x: Vec<f32> = (0..32).map(|i| ((i * 7) % 11) as f32 / 11.0).collect();
    let y: Vec<i64> = (0..8).map(|i| i % 3).collect();
    let ds = Dataset::from_tensor_slices((Tensor::from_vec(&[8, 4], x).unwrap(), Tensor::from_vec(&[8], y).unwrap()))
        .unwrap()
        .batch(4, false)
        .unwrap();
    (model, ds)
}

/// Records the order of the hooks.
#[derive(Default)]
struct Trace(Vec<String>);
impl Callback for Trace {
    fn on_train_begin(&mut self, _: &Model) -> ferroflow::train::Result<()> {
        self.0.push("train_begin".into());
        Ok(())
    }
    fn on_epoch_begin(&mut self, _: &Model, e: usize) -> ferroflow::train::Result<()> {
        self.0.push(format!("epoch_begin {e}"));
        Ok(())
    }
    fn on_train_batch_end(&mut self, _: &Model, b: u64, logs: &Logs) -> ferroflow::train::Result<()> {
        assert!(logs["loss"].is_finite());
        self.0.push(format!("batch_end {b}"));
        Ok(())
    }
    fn on_test_end(&mut self, _: &Model, logs: &Logs) -> ferroflow::train::Result<()> {
        self.0.push(format!("test_end {}", logs.contains_key("val_loss")));
        Ok(())
    }
    fn on_epoch_end(&mut self, _: &Model, e: usize, logs: &Logs) -> ferroflow::train::Result<()> {
        self.0.push(format!("epoch_end {e} {}", logs.keys().cloned().collect::<Vec<_>>().join(",")));
        Ok(())
    }
    fn on_train_end(&mut self, _: &Model, _: &Logs) -> ferroflow::train::Result<()> {
        self.0.push("train_end".into());
        Ok(())
    }
}

#[test]
fn hooks_run_in_keras_order_and_early_stopping_stops() {
    let (model, ds) = model_and_data();
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("log.csv");
    let mut trace = Trace::default();
    let mut logger = CsvLogger::new(&csv);
    // min_delta so large that nothing counts as an improvement: stops after `patience` epochs.
    let mut stop = EarlyStopping::new("val_loss", 1e9, 2);
    let opts = FitOptions::default().with_epochs(10).with_verbose(false);
    let h = model.fit_dataset_with(&ds, &opts, None, Some(&ds), &mut [&mut trace, &mut logger, &mut stop]).unwrap();
    assert_eq!(h.history.loss.len(), 3, "epoch 0 sets the best, epochs 1 and 2 do not improve");
    assert_eq!(stop.stopped_epoch, Some(2));
    assert_eq!(
        trace.0[..7],
        [
            "train_begin",
            "epoch_begin 0",
            "batch_end 1",
            "batch_end 2",
            "test_end true",
            "epoch_end 0 loss,val_accuracy,val_loss",
            "epoch_begin 1"
        ]
    );
    assert_eq!(trace.0.last().unwrap(), "train_end");
    let text = std::fs::read_to_string(&csv).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "epoch,loss,val_accuracy,val_loss");
    assert_eq!(lines.len(), 4);
    assert!(lines[3].starts_with("2,"));

    let e = EarlyStopping::new("val_auc", 0.0, 1);
    let mut e = e;
    let err = model.fit_dataset_with(&ds, &opts, None, None, &mut [&mut e]).unwrap_err().to_string();
    assert!(err.contains("val_auc") && err.contains("loss"), "{err}");
}

#[test]
fn checkpoints_and_bad_setups() {
    let (model, ds) = model_and_data();
    let dir = tempfile::tempdir().unwrap();
    let mut ckpt = ModelCheckpoint::new(&dir.path().join("ckpt/model"), "val_loss", true);
    let opts = FitOptions::default().with_epochs(3).with_verbose(false);
    model.fit_dataset_with(&ds, &opts, None, Some(&ds), &mut [&mut ckpt]).unwrap();
    assert!(!ckpt.saved.is_empty() && ckpt.saved.len() <= 3);
    for p in &ckpt.saved {
        assert!(
            p.with_extension("index").exists() || std::path::PathBuf::from(format!("{}.index", p.display())).exists(),
            "{p:?}"
        );
    }
    assert!(dir.path().join("ckpt/checkpoint").exists());
    // Monitoring a metric the logs lack names it.
    let mut ckpt = ModelCheckpoint::new(&dir.path().join("ckpt/model"), "val_loss", true);
    let e = model.fit_dataset_with(&ds, &opts, None, None, &mut [&mut ckpt]).unwrap_err().to_string();
    assert!(e.contains("val_loss"), "{e}");
    let e = TensorBoard::new(std::path::Path::new("/proc/ff-tb"), 1, true, UpdateFreq::Epoch, "").err().unwrap();
    assert!(matches!(e, ferroflow::train::TrainError::Io { .. }), "{e:?}");
    let e = e.to_string();
    assert!(e.contains("/proc/ff-tb") && e.contains("not writable"), "{e}");
    let e = TensorBoard::new(dir.path(), 1, true, UpdateFreq::Epoch, "3,x").err().unwrap().to_string();
    assert!(e.contains("profile_batch"), "{e}");
}

#[test]
fn the_progress_bar_shows_steps_eta_rate_and_metrics() {
    use ferroflow::train::callbacks::ProgbarLogger;
    let (model, ds) = model_and_data();
    let mut bar = ProgbarLogger::new(false);
    let opts = FitOptions::default().with_epochs(2).with_verbose(false);
    model.fit_dataset_with(&ds, &opts, None, Some(&ds), &mut [&mut bar]).unwrap();
    let logs = Logs::from([("loss".to_string(), 0.5), ("val_loss".to_string(), 0.25)]);
    let line = bar.line(Some(&logs));
    assert!(line.starts_with("Epoch 2/2 [========================] 2/2 "), "{line}");
    assert!(line.contains("steps/s") && line.contains("loss 0.5000") && line.contains("val_loss 0.2500"), "{line}");
    let mut half = ProgbarLogger::new(false);
    half.set_params(3, Some(4));
    half.on_epoch_begin(&model, 0).unwrap();
    half.on_train_batch_end(&model, 1, &Logs::from([("loss".to_string(), 1.0)])).unwrap();
    let line = half.line(None);
    assert!(
        line.starts_with("Epoch 1/3 [=====>") && line.contains("1/4 ETA") && line.contains("loss 1.0000"),
        "{line}"
    );
}

/// Copies the weights at the end of every epoch.
#[derive(Default)]
struct Weights(Vec<Vec<(String, Vec<f32>)>>);
impl Callback for Weights {
    fn on_epoch_end(&mut self, m: &Model, _: usize, _: &Logs) -> ferroflow::train::Result<()> {
        self.0.push(copy(&m.get_weights()?));
        Ok(())
    }
}

fn copy(w: &[(String, Tensor)]) -> Vec<(String, Vec<f32>)> {
    w.iter().map(|(n, t)| (n.clone(), t.as_slice::<f32>().unwrap().to_vec())).collect()
}

#[test]
fn early_stopping_restores_the_best_epochs_weights() {
    let (model, ds) = model_and_data();
    let names: Vec<&str> = model.weights().iter().map(|w| w.name.as_str()).collect();
    assert_eq!(names, ["dense/kernel", "dense/bias"], "layers' variables only: no slots, no global_step");
    let mut seen = Weights::default();
    // Only epoch 0 counts as an improvement: training stops after epoch 2 and ends with epoch
    // 0's weights, which epochs 1 and 2 changed.
    let mut stop = EarlyStopping::new("val_loss", 1e9, 2).restore_best_weights(true);
    let opts = FitOptions::default().with_epochs(10).with_verbose(false);
    model.fit_dataset_with(&ds, &opts, None, Some(&ds), &mut [&mut seen, &mut stop]).unwrap();
    assert_eq!((stop.best_epoch, stop.stopped_epoch, seen.0.len()), (Some(0), Some(2), 3));
    assert_ne!(seen.0[0], seen.0[2], "training moved the weights");
    assert_eq!(copy(&model.get_weights().unwrap()), seen.0[0]);
    // Without restore_best_weights the last epoch's weights stay.
    let (model, ds) = model_and_data();
    let mut seen = Weights::default();
    let mut stop = EarlyStopping::new("val_loss", 1e9, 2);
    model.fit_dataset_with(&ds, &opts, None, Some(&ds), &mut [&mut seen, &mut stop]).unwrap();
    assert_eq!(copy(&model.get_weights().unwrap()), seen.0[2]);
}

#[test]
fn set_weights_checks_names_dtypes_and_shapes_before_assigning() {
    let (model, _) = model_and_data();
    let before = copy(&model.get_weights().unwrap());
    let good = Tensor::from_vec(&[4, 3], vec![0.5f32; 12]).unwrap();
    let cases = [
        (
            vec![("dense/kernel".to_string(), good.clone()), ("dense/kernel/Adam".to_string(), good.clone())],
            "dense/kernel/Adam",
        ),
        (vec![("dense/kernel".to_string(), good.clone()), ("dense/bias".to_string(), good.clone())], "[3]"),
        (vec![("dense/bias".to_string(), Tensor::from_vec(&[3], vec![1i64, 2, 3]).unwrap())], "int64"),
    ];
    for (values, want) in cases {
        let e = model.set_weights(&values).unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
        assert_eq!(copy(&model.get_weights().unwrap()), before, "nothing assigned when one value is wrong");
    }
    model.set_weights(&[("dense/kernel".to_string(), good)]).unwrap();
    assert_eq!(model.get_weights().unwrap()[0].1.as_slice::<f32>().unwrap(), &[0.5f32; 12]);
    assert_eq!(model.trainable_weights().unwrap().len(), 2);
}

#[test]
fn two_profiles_of_one_fit_are_refused_at_the_start() {
    let (model, ds) = model_and_data();
    let dir = tempfile::tempdir().unwrap();
    let mut tb = TensorBoard::new(dir.path(), 0, false, UpdateFreq::Epoch, "1,2").unwrap();
    let profile = ferroflow::train::profile::ProfileBatches::parse(dir.path(), "1").unwrap();
    let opts = FitOptions::default().with_epochs(1).with_verbose(false).with_profile(Some(profile));
    let e = model.fit_dataset_with(&ds, &opts, None, None, &mut [&mut tb]).unwrap_err().to_string();
    assert!(e.contains("1..=1") && e.contains("1..=2") && e.contains("one profile"), "{e}");
}
