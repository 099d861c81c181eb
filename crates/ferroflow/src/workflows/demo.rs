//! The demo (`ferroflow demo`): every workflow in turn, saying what it does and what came out.
//! [`what_runs`](super::what_runs) built, optimized and run on two CPU devices (partition graphs
//! written, merged back, TensorBoard runs); a frozen TensorFlow MLP compared with TensorFlow's
//! output; [`mnist_training`](super::mnist_training) trained, saved with a Saver and restored
//! from its `.meta` alone; [`input_pipeline`](super::input_pipeline) with and without its
//! speed-ups, the bottleneck hunt with `--logdir`, and the EfficientNet-style model trained
//! from it; [`traced_functions`](super::traced_functions).
use ferroflow::proto::attr::AttrMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::flowers::{self, FlowersOptions};
use super::input_pipeline::{self, PipelineOptions};
use super::{mnist_training, traced_functions, what_runs};
use crate::data::{Budget, AUTOTUNE};
use crate::prelude::*;
use crate::tensor::npy;
use crate::Error;

/// `writeln!` that ignores a closed output: the demo piped into `head` keeps running.
macro_rules! say {
    ($w:expr, $($arg:tt)*) => {{
        let _ = writeln!($w, $($arg)*);
    }};
}

/// What the demo runs and where it writes.
#[derive(Clone, Copy, Debug)]
pub struct DemoOptions<'a> {
    /// Where the demo writes its files: partition graphs, TensorBoard runs, the checkpoint,
    /// the generated flowers and the pipeline's cache file.
    pub out_dir: &'a Path,
    /// Training steps of `mnist_training`.
    pub mnist_steps: u64,
    /// Epochs of each fine-tuning phase of seed 001's EfficientNetB0 (0 skips it).
    pub effnet_epochs: usize,
    /// A TensorBoard log directory and the batches to profile (Keras's `profile_batch`,
    /// `"A,B"`): `mnist_training`'s logs go to `LOGDIR/mnist_training`, and the bottleneck
    /// hunt — a small CNN trained from the pipeline as it is, then with prefetch and a parallel
    /// map — to `LOGDIR/input_pipeline_serial` and `LOGDIR/input_pipeline_prefetch`.
    pub tensorboard: Option<(&'a Path, &'a str)>,
}

/// The bundled TensorFlow MLP fixture: graph, inputs and TensorFlow's outputs.
const MLP_PB: &[u8] = include_bytes!("../../data/mlp.pb");
const MLP_INPUTS: &[u8] = include_bytes!("../../data/mlp.inputs.npz");
const MLP_EXPECTED: &[u8] = include_bytes!("../../data/mlp.expected.npz");

/// Runs the demo, writing what it does to `w`; the last line is `test_accuracy=<value>`
/// (`mnist_training`'s). The workflows' own progress (training losses, progress bars) goes
/// to stdout and stderr as they write it.
pub fn run(w: &mut dyn Write, options: &DemoOptions) -> Result<(), Error> {
    let DemoOptions { out_dir, mnist_steps, effnet_epochs, tensorboard } = *options;
    if let Some((logdir, spec)) = tensorboard {
        // Both fail now rather than after the first parts of the demo ran.
        crate::train::profile::ProfileBatches::parse(logdir, spec)?;
        crate::train::profile::check_writable(logdir)?;
    }
    what_runs_optimized(w)?;
    what_runs_on_two_devices(w, out_dir)?;
    tensorflow_mlp(w)?;
    let test_accuracy = mnist_saved_and_restored(w, out_dir, mnist_steps, tensorboard)?;
    input_pipeline_and_training(w, out_dir, effnet_epochs, tensorboard)?;
    say!(
        w,
        "\n== traced_functions: tf.function in Rust — traced per signature, while/if as StatelessWhile/StatelessIf"
    );
    let (cube, collatz, sum_squares_until) = traced_functions::functions();
    for line in traced_functions::run(&cube, &collatz, &sum_squares_until)? {
        say!(w, "{line}");
    }
    if let Some((logdir, _)) = tensorboard {
        say!(
            w,
            "\n-- see it all: tensorboard --logdir {} (Scalars, Histograms, Images, Text, Graphs, Profile)",
            logdir.display()
        );
    }
    say!(w, "test_accuracy={test_accuracy:.4}");
    Ok(())
}

fn print_nodes(w: &mut dyn Write, g: &Graph) {
    for n in g.nodes() {
        let inputs: Vec<String> = n.inputs.iter().map(|o| g.output_name(*o)).collect();
        say!(w, "  {} = {}({})", n.name, n.op, inputs.join(", "));
    }
}

fn print_tensor(w: &mut dyn Write, name: &str, t: &Tensor) {
    say!(w, "{name}: {} {:?} {}", t.dtype(), t.dims(), t.preview(10));
}

/// `what_runs` built with the Scope API, what the optimizer makes of it, and its value.
fn what_runs_optimized(w: &mut dyn Write) -> Result<(), Error> {
    say!(w, "== what_runs: a=1, b=2, c=a+b, d=a+b, out=c*d, built with the Rust Scope API");
    let (graph, fetch) = what_runs::graph()?;
    print_nodes(w, &graph);
    let item = crate::optimize::Item { fetches: vec![fetch.clone()], ..Default::default() };
    let optimized = crate::optimize::MetaOptimizer::new(Default::default()).optimize(&graph, &item)?;
    say!(w, "\n-- what the optimizer does to it (a Session does this before running; `ferroflow optimize` shows it):");
    say!(w, "{}", optimized.report.details().trim_end());
    say!(w, "\n-- the optimized graph:");
    for n in optimized.graph.nodes() {
        let value = match n.attrs.attr_value("value") {
            Some(crate::proto::attr_value::Value::Tensor(t)) => crate::proto::convert::tensor_from_proto(t)
                .map(|t| format!(" value {}", t.preview(4)))
                .unwrap_or_default(),
            _ => String::new(),
        };
        say!(w, "  {} = {}{value}", n.name, n.op);
    }
    let sess = Session::new(graph, SessionOptions::default())?;
    print_tensor(w, &fetch, &sess.run(&[], &[&fetch], &[])?[0]);
    Ok(())
}

/// `what_runs` on two CPU devices, as TensorFlow users inspect it: partition graphs of a step
/// written per device by a hook, merged back into one graph, and written as a TensorBoard run.
fn what_runs_on_two_devices(w: &mut dyn Write, out_dir: &Path) -> Result<(), Error> {
    use crate::runtime::hooks::{MonitoredSession, PartitionGraphHook, SessionRunHook};
    say!(w, "\n== what_runs on two CPU devices: Add on /cpu:0, Add_1 on /cpu:1, Mul on /cpu:0");
    let (graph, fetch) = what_runs::two_device_graph()?;
    let logdir = out_dir.join("logdir");
    for (label, optimize) in [("as written", false), ("optimized", true)] {
        let mut opts = SessionOptions::default().with_cpu_devices(2);
        opts.optimizer.enabled = optimize;
        let dir = out_dir.join(if optimize { "partitions_optimized" } else { "partitions" });
        let hook = PartitionGraphHook::new(&dir, 1);
        let mut ms =
            MonitoredSession::new(Session::new(graph.clone(), opts)?, vec![Box::new(hook) as Box<dyn SessionRunHook>])?;
        let value = ms.run(&[], &[&fetch], &[])?;
        ms.close()?;
        let step_dir = dir.join("global_step_0");
        let mut files: Vec<PathBuf> =
            std::fs::read_dir(&step_dir)?.map(|e| e.map(|e| e.path())).collect::<std::io::Result<_>>()?;
        files.sort();
        say!(w, "-- {label}: {fetch} = {}; partition graphs of step 0:", value[0].preview(4));
        let mut defs = vec![];
        for f in &files {
            let def = crate::graph::io::read_graph_def(f)?;
            let nodes: Vec<String> = def.node.iter().map(|n| format!("{}({})", n.name, n.op)).collect();
            say!(w, "  {}: {}", f.display(), nodes.join(" "));
            defs.push(def);
        }
        let merged = crate::runtime::merge_partitions(&defs)?;
        let merged_path = dir.join("merged.pbtxt");
        crate::graph::io::write_graph_def(&merged_path, &merged)?;
        let check = Session::new(crate::ops::import_graph_def(&merged)?, SessionOptions::default())?;
        say!(
            w,
            "  merged into {} ({} nodes): {fetch} = {}",
            merged_path.display(),
            merged.node.len(),
            check.run(&[], &[&fetch], &[])?[0].preview(4)
        );
        let run = if optimize { "what_runs_optimized" } else { "what_runs" };
        let mut events = crate::summary::EventWriter::create(&logdir.join(run))?;
        events.add_graph(&merged, 0)?;
    }
    say!(w, "-- TensorBoard runs what_runs and what_runs_optimized written: tensorboard --logdir {}", logdir.display());
    Ok(())
}

/// The bundled frozen TensorFlow MLP run by ferroflow, against TensorFlow's outputs.
fn tensorflow_mlp(w: &mut dyn Write) -> Result<(), Error> {
    say!(
        w,
        "\n== A frozen TensorFlow 2 MLP (fixtures/tf/mlp.pb), run by ferroflow and compared with TensorFlow's output"
    );
    let def = crate::proto::decode(MLP_PB, "mlp.pb")?;
    let g = crate::ops::import_graph_def(&def)?;
    let ops: std::collections::BTreeSet<&str> = g.nodes().iter().map(|n| n.op.as_str()).collect();
    say!(w, "{} nodes, ops: {}", g.len(), ops.into_iter().collect::<Vec<_>>().join(", "));
    let inputs = npy::read_npz_from(std::io::Cursor::new(MLP_INPUTS), "mlp.inputs.npz")?;
    let expected = npy::read_npz_from(std::io::Cursor::new(MLP_EXPECTED), "mlp.expected.npz")?;
    let sess = Session::new(g, SessionOptions::default())?;
    let feeds: Vec<(&str, Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let fetches: Vec<&str> = expected.iter().map(|(n, _)| n.as_str()).collect();
    let results = sess.run(&feeds, &fetches, &[])?;
    for ((name, want), got) in expected.iter().zip(&results) {
        print_tensor(w, name, got);
        let (g, e) = (got.as_slice::<f32>()?, want.as_slice::<f32>()?);
        let max_err = g.iter().zip(e).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        say!(w, "  max |ferroflow - TensorFlow| = {max_err:.3e} over {} values", e.len());
    }
    Ok(())
}

/// `mnist_training` trained and saved, then restored from its `.meta` under an import scope
/// in a fresh session; returns the trained model's test accuracy.
fn mnist_saved_and_restored(
    w: &mut dyn Write,
    out_dir: &Path,
    steps: u64,
    tensorboard: Option<(&Path, &str)>,
) -> Result<f32, Error> {
    say!(w, "\n== mnist_training: an MNIST MLP trained in a session (tf.compat.v1 style, built in Rust)");
    let prefix = out_dir.join("mnist_training").join("model.ckpt");
    let log = tensorboard.map(|(d, spec)| (d.join("mnist_training"), spec));
    let outputs = mnist_training::Outputs {
        save: Some(&prefix),
        saved_model: None,
        tensorboard: log.as_ref().map(|(d, spec)| (d.as_path(), *spec)),
    };
    let data = crate::train::mnist::bundled_dir();
    say!(w, "training the MNIST MLP for {steps} steps on {} (loss every 500 steps on stderr)", data.display());
    let config = mnist_training::Config::default();
    let r = mnist_training::train_config(&data, steps, 1, SessionOptions::default(), 500, outputs, &config)
        .map_err(|e| e.in_step("mnist_training"))?;
    say!(w, "{}", r.summary(&outputs));
    let ckpt = r.checkpoint.expect("saved");
    say!(
        w,
        "\n-- restored without the model's code: import_meta_graph('{}.meta', import_scope='restored'),",
        ckpt.display()
    );
    say!(w, "   restore into a fresh session, run restored/accuracy:0 fed by names:");
    let acc = mnist_training::evaluate_restored(&ckpt, &data, "restored")
        .map_err(|e| e.in_step("restoring mnist_training"))?;
    say!(w, "restored_accuracy={acc:.4} (trained: {:.4})", r.test_accuracy);
    Ok(r.test_accuracy)
}

/// `input_pipeline` over a generated flowers dataset with and without its speed-ups, the
/// bottleneck hunt when there is a log directory, then the EfficientNet-style model trained
/// from it.
fn input_pipeline_and_training(
    w: &mut dyn Write,
    out_dir: &Path,
    effnet_epochs: usize,
    tensorboard: Option<(&Path, &str)>,
) -> Result<(), Error> {
    say!(w, "\n== input_pipeline: the tf.data-style input pipeline over a generated flowers dataset, then EfficientNet-style training");
    let dir = out_dir.join("flowers");
    if !dir.join("tulips").is_dir() {
        flowers::generate(&dir, &FlowersOptions { per_class: 40, ..Default::default() })?;
    }
    say!(w, "200 photo-like JPEGs (320-500 x 240-375) in 5 class folders under {}", dir.display());
    let cache = out_dir.join("flowers.cache");
    let _ = std::fs::remove_file(&cache);
    let quiet = Budget::default().with_log(false);
    // (name, parallel map, prefetch, cache)
    type Run<'a> = (&'a str, Option<i64>, Option<i64>, Option<Option<PathBuf>>);
    let runs: [Run; 4] = [
        ("map (serial)", None, None, None),
        ("map + prefetch(AUTOTUNE)", None, Some(AUTOTUNE), None),
        ("map(num_parallel_calls=AUTOTUNE) + prefetch", Some(AUTOTUNE), Some(AUTOTUNE), None),
        ("... + cache(file)", Some(AUTOTUNE), Some(AUTOTUNE), Some(Some(cache.clone()))),
    ];
    for (name, parallel, prefetch, cache) in runs {
        let options =
            PipelineOptions { size: 224, parallel, prefetch, cache, budget: quiet.clone(), ..Default::default() };
        let (ds, _) = input_pipeline::pipeline(&dir, &options)?;
        let (epochs, _) = input_pipeline::run_epochs(&ds, 2, |_, _, _, _| Ok(()))?;
        let rates: Vec<String> = epochs.iter().map(|e| format!("{:.0}", e.images_per_second())).collect();
        say!(w, "  {name:<46} images/s per epoch: {}", rates.join(", "));
    }
    if let Some((logdir, spec)) = tensorboard {
        bottleneck_hunt(w, &dir, logdir, spec, &quiet)?;
    }
    if effnet_epochs == 0 {
        return Ok(());
    }
    fine_tune_efficientnet(w, out_dir, &dir, effnet_epochs, tensorboard).map_err(|e| e.in_step("input_pipeline"))
}

/// Seed 001's model for real: Keras's EfficientNetB0 (the architecture of
/// `keras.applications.EfficientNetB0`, as a `.keras` file ferroflow writes with random
/// weights, at 64×64 so the demo stays short) under a pooling + dropout + Dense head,
/// fine-tuned on the flowers as Keras's transfer-learning guide does — the base frozen, then
/// its top 20 layers unfrozen at a lower learning rate — profiled, and saved as `.keras`.
fn fine_tune_efficientnet(
    w: &mut dyn Write,
    out_dir: &Path,
    dir: &Path,
    epochs: usize,
    tensorboard: Option<(&Path, &str)>,
) -> Result<(), Error> {
    use super::fine_tune::{fine_tune, FineTuneOptions};
    use crate::keras::{applications, Freeze, KerasModel};
    const SIZE: usize = 64;
    let model_path = out_dir.join("efficientnetb0_64.keras");
    let config = applications::transfer_model("seed001", applications::efficientnet_b0(SIZE, 0.2), SIZE, 5);
    let mut model = KerasModel::initialized(config, Some(1))?;
    // Random weights carry no statistics of any data: the moving statistics of its
    // BatchNormalization layers come from 64 of the flowers (pretrained weights would bring
    // ImageNet's), so the frozen base computes usable features.
    let listing = super::input_pipeline::list_classes(dir)?;
    let step = (listing.files.len() / 64).max(1);
    let files: Vec<_> = listing.files.iter().step_by(step).take(64).cloned().collect();
    let labels = vec![0; files.len()];
    let calibration = super::fine_tune::batches(&files, &labels, SIZE, files.len(), None)?;
    if let Some(batch) = calibration.iter()?.next() {
        model.calibrate_batch_norm(&[batch?.0])?;
    }
    model.save(&model_path, None)?;
    let s = model.summary()?;
    say!(
        w,
        "\n-- seed 001: keras.applications.EfficientNetB0 ({} layers, {} parameters) under a pooling/dropout/Dense head, written by ferroflow as {}\n   (random weights, BatchNormalization statistics calibrated on 64 of the flowers)",
        model.spec.layers.iter().filter_map(|l| l.model.as_ref()).map(|m| m.layers.len()).sum::<usize>(),
        s.total,
        model_path.display()
    );
    let tuned = out_dir.join("efficientnetb0_64.tuned.keras");
    let phases: [(&str, Freeze, f64, &Path, &str); 2] = [
        ("base frozen", Freeze::Base, 1e-3, &model_path, "fine_tune_frozen"),
        (
            "top 20 layers of the base unfrozen (BatchNormalization frozen)",
            Freeze::UnfreezeTop(20),
            1e-5,
            &tuned,
            "fine_tune_unfrozen",
        ),
    ];
    for (label, freeze, learning_rate, from, run) in phases {
        let options = FineTuneOptions {
            size: Some(SIZE),
            epochs,
            validation_split: Some(0.2),
            freeze,
            learning_rate,
            tensorboard: tensorboard.map(|(logdir, _)| (logdir.join(run), Some("2,3".to_string()))),
            save: Some(tuned.clone()),
            ..FineTuneOptions::default()
        };
        let r = fine_tune(from, dir, &options)?;
        let h = &r.history;
        say!(w, "  {label}: {} of {} parameters train", r.trainable.1, r.trainable.2);
        for (i, loss) in h.history.loss.iter().enumerate() {
            let (vl, va) = h.history.validation.get(i).copied().unwrap_or((f64::NAN, None));
            say!(
                w,
                "    epoch {}: loss {loss:.4}, val_loss {vl:.4}, val_accuracy {:.4}",
                i + 1,
                va.unwrap_or(f64::NAN)
            );
        }
        say!(
            w,
            "    {} training / {} validation images, {:.0} ms per step, input wait {:.0}% of the loop{}",
            r.images.0,
            r.images.1,
            h.mean_step_seconds() * 1e3,
            h.input_fraction() * 100.0,
            h.profile.as_ref().map(|p| format!(", profile {}", p.display())).unwrap_or_default()
        );
    }
    say!(w, "  the fine-tuned model: {} (keras.models.load_model reads it)", tuned.display());
    Ok(())
}

/// The bottleneck hunt: a small CNN trained from the pipeline with the TensorBoard callback
/// profiling `spec`, as it is (serial map, no prefetch) and then with a parallel map and
/// prefetch; each profile's report, then how the second changed against the first.
fn bottleneck_hunt(w: &mut dyn Write, dir: &Path, logdir: &Path, spec: &str, quiet: &Budget) -> Result<(), Error> {
    use crate::profiler::report;
    say!(w, "\n-- input_pipeline's bottleneck hunt: a small CNN trained from the pipeline with TensorBoard(profile_batch='{spec}'),");
    say!(w, "   first as it is, then with map(num_parallel_calls=AUTOTUNE) and prefetch(AUTOTUNE):");
    let mut reports = Vec::new();
    for (run, parallel, prefetch) in
        [("input_pipeline_serial", None, None), ("input_pipeline_prefetch", Some(AUTOTUNE), Some(AUTOTUNE))]
    {
        let step = || format!("input_pipeline, {run}");
        let options = PipelineOptions { size: 224, parallel, prefetch, budget: quiet.clone(), ..Default::default() };
        let h = input_pipeline::train_profiled_cnn(dir, &options, 12, &logdir.join(run), spec)
            .map_err(|e| e.in_step(step()))?;
        let path = h.profile.clone().ok_or_else(|| {
            Error::from(crate::train::TrainError::Invalid("no profile was written".into())).in_step(step())
        })?;
        let r = report::analyze(&crate::profiler::xspace::read_xspace(&path)?)?;
        say!(
            w,
            "\n   {run}: {:.1} ms per step, input wait {:.0}% of the loop; `ferroflow profile {}` says:",
            1e3 * h.mean_step_seconds(),
            100.0 * h.input_fraction(),
            path.display()
        );
        say!(w, "{}", r.to_string().trim_end());
        reports.push(r);
    }
    say!(w, "\n{}", report::compare(&reports[0], &reports[1]).trim_end());
    Ok(())
}
