//! An MNIST MLP, built with the training API exactly as TensorFlow 1's `tf.compat.v1` code
//! builds it, its training run in a session, and its restore from the `.meta` alone (the
//! example, the CLI and the demo use them).
use std::path::Path;

use ferroflow::ops::{Ops, RawOps};
use ferroflow_graph::Output;
use ferroflow_runtime::{Session, SessionOptions};
use ferroflow_tensor::Tensor;
use ferroflow_tensor::{DType, Shape};
use ferroflow_train::distributed::{self, Broadcast, DistributedOptimizer};
use ferroflow_train::layers::{dense, dropout, Activation};
use ferroflow_train::meta_graph::import_meta_graph_file;
use ferroflow_train::mnist;
use ferroflow_train::model::{FitOptions, Model};
use ferroflow_train::optimizers::Optimizer;
use ferroflow_train::saved_model::{SavedModelWriter, SignatureSpec};
use ferroflow_train::saver::{meta_path, Saver, SaverOptions};
use ferroflow_train::{losses, model::Roles, Builder, Initializer, Result};

/// The model's `config`.
#[derive(Clone, Debug)]
pub struct Config {
    /// 784.
    pub num_inputs: usize,
    /// 10.
    pub num_outputs: usize,
    /// Hidden layers (2).
    pub num_layers: usize,
    /// Units per hidden layer (256).
    pub num_units: usize,
    /// Dropout rate (0.2).
    pub dropout_rate: f64,
    /// Adam's learning rate (1e-3).
    pub learning_rate: f64,
    /// Examples per training step (100); distributed, the global batch, split
    /// across the ranks.
    pub batch_size: usize,
    /// Data-parallel across the ranks of `ferroflow_collective::world()` (`mpirun -np N`):
    /// gradients averaged by a [`DistributedOptimizer`] (off: a single process).
    pub distributed: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            num_inputs: 784,
            num_outputs: 10,
            num_layers: 2,
            num_units: 256,
            dropout_rate: 0.2,
            learning_rate: 1e-3,
            batch_size: 100,
            distributed: false,
        }
    }
}

/// Builds the model in `b`: placeholders `inputs`, `outputs`, `is_training`; dropout on
/// the input; `layer_<l>` dense+relu (truncated normal, stddev 0.1) each followed by
/// `layer_dropout_<l>`; `out_layer` dense+softmax; the loss
/// `mean(-sum(y * log(out + 1e-7), 1))`; `accuracy`; `AdamOptimizer.minimize(loss,
/// global_step)`; `init`. Returns the roles by name.
pub fn build(b: &Builder, c: &Config) -> Result<Roles> {
    let s = b.scope().clone();
    let x = s.with_name("inputs").placeholder(DType::Float, &Shape::new(vec![None, Some(c.num_inputs)]))?;
    let y = s.with_name("outputs").placeholder(DType::Float, &Shape::new(vec![None, Some(c.num_outputs)]))?;
    let training = s.with_name("is_training").placeholder(DType::Bool, &Shape::scalar())?;
    let init = Initializer::TruncatedNormal { mean: 0.0, stddev: 0.1, seed: None };
    let mut layer = dropout(b, x, c.dropout_rate, training, None, "dropout")?;
    for l in 0..c.num_layers {
        layer = dense(b, layer, c.num_units, Activation::Relu, &init, &format!("layer_{l}"))?;
        layer = dropout(b, layer, c.dropout_rate, training, None, &format!("layer_dropout_{l}"))?;
    }
    let out = dense(b, layer, c.num_outputs, Activation::Softmax, &init, "out_layer")?;
    let eps = s.scalar(10e-8f32)?;
    let log = s.unary("Log", s.add_v2(out, eps)?)?;
    let prod = s.mul(y, log)?;
    let sum = s.reduce("Sum", prod, &[1], false)?;
    let neg = s.unary("Neg", sum)?;
    let loss: Output = s.reduce("Mean", neg, &[0], false)?;
    let acc = losses::accuracy(&s, y, out, "accuracy")?;
    let gs = b.global_step()?;
    let adam = Optimizer::adam(c.learning_rate);
    let train = if c.distributed {
        DistributedOptimizer::new(adam).minimize(b, loss, None, Some(&gs))?
    } else {
        adam.minimize(b, loss, None, Some(&gs))?
    };
    let init = b.global_variables_initializer()?;
    let g = b.graph();
    Ok(Roles {
        inputs: g.output_name(x),
        labels: g.output_name(y),
        is_training: Some(g.output_name(training)),
        predictions: Some(g.output_name(out)),
        loss: g.output_name(loss),
        accuracy: Some(g.output_name(acc)),
        train_op: g.node(train).name.clone(),
        init: g.node(init).name.clone(),
    })
}

/// What [`train_logged`] writes besides training: a TF1 checkpoint (`save`, a prefix), a
/// SavedModel of the trained model (`saved_model`, a directory: `serving_default` maps
/// `inputs` to `predictions`), and TensorBoard logs (`tensorboard`: the log directory and
/// the batches to profile).
#[derive(Clone, Copy, Debug, Default)]
pub struct Outputs<'a> {
    /// A TF1 Saver checkpoint prefix (`PREFIX-STEP`).
    pub save: Option<&'a Path>,
    /// A SavedModel directory.
    pub saved_model: Option<&'a Path>,
    /// TensorBoard: the log directory and the batches to profile (`"A,B"`).
    pub tensorboard: Option<(&'a Path, &'a str)>,
}

/// What a training run measured.
#[derive(Clone, Debug)]
pub struct Report {
    /// Training steps run.
    pub steps: u64,
    /// Training steps per second.
    pub steps_per_sec: f64,
    /// `global_step` after training.
    pub global_step: i64,
    /// `accuracy:0` on the test split with `is_training:0` false.
    pub test_accuracy: f32,
    /// Training and test digits.
    pub examples: (usize, usize),
    /// The checkpoint written after training (`PREFIX-STEP`), if one was asked for.
    pub checkpoint: Option<std::path::PathBuf>,
    /// This process's rank and the number of ranks (0 and 1 unless distributed).
    pub rank: (usize, usize),
    /// FNV-1a 64 of every variable's bytes after training (equal on every rank of a
    /// distributed run: the replicas are bitwise identical).
    pub checksum: u64,
}

impl Report {
    /// What a single-process run says after training (the CLI's `mnist` and the demo print
    /// it): where `outputs` went, the steps and `global_step`, and `test_accuracy=<value>` last.
    pub fn summary(&self, outputs: &Outputs) -> String {
        let mut lines = Vec::new();
        if let Some((dir, _)) = outputs.tensorboard {
            lines.push(format!("TensorBoard logs (scalars, histograms, graph, profile) in {}", dir.display()));
        }
        lines.push(format!(
            "{} steps on {} training digits ({:.0} steps/s); global_step = {}",
            self.steps, self.examples.0, self.steps_per_sec, self.global_step
        ));
        lines.push(format!(
            "accuracy:0 on {} test digits, fed by name (inputs:0, outputs:0, is_training:0=false):",
            self.examples.1
        ));
        if let Some(c) = &self.checkpoint {
            lines.push(format!(
                "saved {}.{{index,data-00000-of-00001,meta}} (and the directory's `checkpoint` file)",
                c.display()
            ));
        }
        if let Some(dir) = outputs.saved_model {
            lines.push(format!("exported a SavedModel to {} (serving_default: inputs -> predictions)", dir.display()));
        }
        lines.push(format!("test_accuracy={:.4}", self.test_accuracy));
        lines.join("\n")
    }
}

/// Trains the model on the MNIST IDX files in `data` for `steps` batches of 100
/// (shuffled epochs; the loss printed every `log_every` steps), then
/// runs `accuracy:0` by name on the test split. With `save`, a TF1 `Saver` then writes
/// `SAVE-STEP.{index,data-00000-of-00001,meta}` and the `checkpoint` file.
pub fn train(
    data: &Path,
    steps: u64,
    seed: i64,
    options: SessionOptions,
    log_every: u64,
    save: Option<&Path>,
) -> std::result::Result<Report, crate::Error> {
    train_logged(data, steps, seed, options, log_every, Outputs { save, ..Outputs::default() })
}

/// [`train`] with Keras's `TensorBoard` callback when `tensorboard` is given: `(log_dir,
/// profile_batch)` — per-epoch and per-100-batch loss, weight histograms, the graph and the
/// profile of those batches under `log_dir`.
pub fn train_logged(
    data: &Path,
    steps: u64,
    seed: i64,
    options: SessionOptions,
    log_every: u64,
    outputs: Outputs,
) -> std::result::Result<Report, crate::Error> {
    train_config(data, steps, seed, options, log_every, outputs, &Config::default())
}

/// [`train_logged`] with the model's `config`. With `config.distributed`, every rank of the
/// world trains data-parallel: rank 0's initial variables are broadcast, each global batch
/// (`config.batch_size`) is split across the ranks, gradients are averaged; only rank 0 writes the
/// checkpoint, the SavedModel and the TensorBoard logs.
pub fn train_config(
    data: &Path,
    steps: u64,
    seed: i64,
    options: SessionOptions,
    log_every: u64,
    outputs: Outputs,
    config: &Config,
) -> std::result::Result<Report, crate::Error> {
    let world = ferroflow_collective::world();
    let (rank, ranks) = if config.distributed { (world.rank(), world.size()) } else { (0, 1) };
    // Rank 0 writes every file; the others profile the same batches and send rank 0 their
    // captures (one host each in the profile's run directory).
    let gather_profile = ranks > 1;
    let mut rank_profile = None;
    if rank != 0 {
        if let Some((dir, spec)) = outputs.tensorboard.filter(|(_, spec)| !matches!(spec.trim(), "" | "0")) {
            let mut p = crate::train::profile::ProfileBatches::parse(dir, spec)?;
            p.gather = true;
            rank_profile = Some(p);
        }
    }
    let outputs = if rank == 0 { outputs } else { Outputs::default() };
    let Outputs { save, saved_model, tensorboard } = outputs;
    use crate::train::callbacks::{Callback, TensorBoard, UpdateFreq};
    let mut tb = match tensorboard {
        Some((dir, profile_batch)) => {
            let t = TensorBoard::new(dir, 1, true, UpdateFreq::Batches(100), profile_batch)?;
            Some(if gather_profile { t.gather_profile_across_ranks() } else { t })
        }
        None => None,
    };
    let m = mnist::load(data)?;
    let b = Builder::with_seed(seed);
    let roles = build(&b, config)?;
    let mut saver = Saver::new(&b, None, SaverOptions::default())?;
    let broadcast = config.distributed.then(|| Broadcast::new(&b)).transpose()?;
    let reads = distributed::variable_reads(&b);
    let model = Model::new(Session::new(b.graph(), options)?, roles, &[784]);
    model.initialize()?;
    if let Some(bc) = &broadcast {
        bc.run(model.session(), 0)?;
    }
    let opts = FitOptions::default()
        .with_epochs(usize::MAX)
        .with_batch_size(config.batch_size)
        .with_max_steps(Some(steps))
        .with_shuffle_seed(seed as u64)
        .with_verbose(false)
        .with_log_every(log_every)
        .with_profile(rank_profile)
        .with_shard(config.distributed.then_some((ranks, rank)));
    let mut callbacks: Vec<&mut dyn Callback> = tb.iter_mut().map(|t| t as &mut dyn Callback).collect();
    let hist = model.fit_with(&m.train.images, &m.train.one_hot(10)?, &opts, None, &mut callbacks)?;
    let sess = model.session();
    let global_step = sess.run(&[], &["global_step/Read/ReadVariableOp:0"], &[])?[0].scalar_value::<i64>()?;
    let feeds = [
        ("inputs:0", m.test.images.clone()),
        ("outputs:0", m.test.one_hot(10)?),
        ("is_training:0", Tensor::scalar(false)),
    ];
    let acc = sess.run(&feeds, &["accuracy:0"], &[])?[0].scalar_value::<f32>()?;
    let checksum = distributed::checksum(sess, &reads)?;
    let checkpoint = save.map(|prefix| saver.save(sess, prefix, Some(global_step))).transpose()?;
    if let Some(dir) = saved_model {
        let roles = model.roles();
        let predictions = roles.predictions.as_deref().unwrap_or("out_layer/Softmax:0");
        SavedModelWriter::new(sess.graph().to_graph_def())
            .signature(SignatureSpec::new(
                "serving_default",
                &[("inputs", &roles.inputs)],
                &[("predictions", predictions)],
            ))
            .default_value("is_training", Tensor::scalar(false))
            .save(dir, Some((sess, &saver)))?;
    }
    Ok(Report {
        steps: hist.steps,
        steps_per_sec: hist.steps_per_sec,
        global_step,
        test_accuracy: acc,
        examples: (m.train.len(), m.test.len()),
        checkpoint,
        rank: (rank, ranks),
        checksum,
    })
}

/// The restore, without the model's code: imports `checkpoint.meta` into a new
/// graph under `import_scope`, restores `checkpoint` in a fresh session, and runs
/// `SCOPE/accuracy:0` on the test split of `data` fed by names.
pub fn evaluate_restored(checkpoint: &Path, data: &Path, import_scope: &str) -> std::result::Result<f32, crate::Error> {
    let m = mnist::load(data)?;
    let imported = import_meta_graph_file(&meta_path(checkpoint), None, import_scope)?;
    let saver = imported
        .saver
        .as_ref()
        .ok_or_else(|| crate::train::TrainError::Invalid("the meta graph has no saver".into()))?;
    let sess = Session::new(imported.graph.clone(), SessionOptions::default())?;
    saver.restore(&sess, checkpoint)?;
    let name = |n: &str| if import_scope.is_empty() { n.to_string() } else { format!("{import_scope}/{n}") };
    let (x, y, t, acc) = (name("inputs:0"), name("outputs:0"), name("is_training:0"), name("accuracy:0"));
    let feeds =
        [(x.as_str(), m.test.images.clone()), (y.as_str(), m.test.one_hot(10)?), (t.as_str(), Tensor::scalar(false))];
    Ok(sess.run(&feeds, &[&acc], &[])?[0].scalar_value::<f32>()?)
}
