//! Comparing ferroflow's outputs with TensorFlow's: the fixture manifest and a tolerance
//! check shared by the test suites, the CLI demo and the comparison scripts.
use std::path::Path;

use ferroflow_tensor::{DType, Tensor};

/// One fixture listed in `fixtures/tf/MANIFEST`.
#[derive(Clone, Debug)]
pub struct Fixture {
    /// Base name: `NAME.pb`, `NAME.pbtxt`, `NAME.inputs.npz`, `NAME.expected.npz`.
    pub name: String,
    /// Relative tolerance for floating-point outputs.
    pub rtol: f64,
    /// Absolute tolerance for floating-point outputs.
    pub atol: f64,
    /// The op types the graph contains.
    pub ops: Vec<String>,
}

/// Reads a fixture manifest: lines `name rtol atol op...`, `#` comments.
pub fn read_manifest(path: &Path) -> Result<Vec<Fixture>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut parts = line.split_whitespace();
        let bad = || format!("{}:{}: expected 'name rtol atol ops...'", path.display(), i + 1);
        let name = parts.next().ok_or_else(bad)?.to_string();
        let rtol = parts.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
        let atol = parts.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
        out.push(Fixture { name, rtol, atol, ops: parts.map(String::from).collect() });
    }
    Ok(out)
}

fn as_f64(t: &Tensor) -> Option<Vec<f64>> {
    Some(match t.dtype() {
        DType::Float => t.as_slice::<f32>().ok()?.iter().map(|&v| v as f64).collect(),
        DType::Double => t.as_slice::<f64>().ok()?.to_vec(),
        _ => return None,
    })
}

/// Checks `got` against `want`: same dtype and shape; floats within `atol + rtol * |want|`
/// (NaN matches NaN, infinities must match exactly); everything else bit-equal. Returns the
/// largest absolute error seen on success.
pub fn compare(got: &Tensor, want: &Tensor, rtol: f64, atol: f64) -> Result<f64, String> {
    if got.dtype() != want.dtype() {
        return Err(format!("dtype {} != expected {}", got.dtype(), want.dtype()));
    }
    if got.dims() != want.dims() {
        return Err(format!("shape {:?} != expected {:?}", got.dims(), want.dims()));
    }
    let (Some(g), Some(w)) = (as_f64(got), as_f64(want)) else {
        return if got == want {
            Ok(0.0)
        } else {
            Err(format!("values {} != expected {}", got.preview(8), want.preview(8)))
        };
    };
    let mut max_err = 0f64;
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        if a.is_nan() && b.is_nan() {
            continue;
        }
        if b.is_infinite() || a.is_infinite() {
            if a != b {
                return Err(format!("element {i}: {a} != expected {b}"));
            }
            continue;
        }
        let err = (a - b).abs();
        if err.is_nan() || err > atol + rtol * b.abs() {
            return Err(format!("element {i}: {a} differs from expected {b} by {err:e} (rtol {rtol}, atol {atol})"));
        }
        max_err = max_err.max(err);
    }
    Ok(max_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare_catches_differences() {
        let a = Tensor::from_vec(&[2], vec![1.0f32, f32::NAN]).unwrap();
        let b = Tensor::from_vec(&[2], vec![1.0f32 + 1e-7, f32::NAN]).unwrap();
        assert!(compare(&a, &b, 1e-5, 1e-6).is_ok());
        let c = Tensor::from_vec(&[2], vec![1.1f32, f32::NAN]).unwrap();
        assert!(compare(&a, &c, 1e-5, 1e-6).is_err());
        assert!(compare(&a, &Tensor::from_vec(&[2], vec![1.0f64, 0.0]).unwrap(), 1.0, 1.0).is_err());
        assert!(compare(&Tensor::scalar(1i32), &Tensor::scalar(2i32), 1.0, 1.0).is_err());
    }
}

/// Benchmark graphs for executor overhead, built the same way here and in TensorFlow by
/// `scripts/bench_executor.py`.
pub mod graphs {
    use crate::prelude::*;

    /// Seed 000's program: `a = 1, b = 2, c = a + b, d = a + b, out = c * d` (9 when run).
    /// Returns the graph and the fetch name (`mul:0`).
    pub fn seed_000() -> Result<(Graph, String), ferroflow_ops::BuildError> {
        let s = Scope::new();
        // Named as TensorFlow names `tf.constant`, `tf.add` and `tf.multiply`.
        let a = s.scalar(1.0f32)?;
        let b = s.scalar(2.0f32)?;
        let c = s.with_name("Add").add(a, b)?;
        let d = s.with_name("Add").add(a, b)?;
        let out = s.with_name("Mul").mul(c, d)?;
        let graph = s.graph();
        let fetch = graph.output_name(out);
        Ok((graph, fetch))
    }

    /// `x` (a fed scalar) through a chain of `n` `Square` ops: no parallelism, pure
    /// per-op dispatch cost. Returns the graph and the fetch name.
    pub fn chain(n: usize) -> (Graph, String) {
        let s = Scope::new();
        let mut v = s.with_name("x").placeholder(DType::Float, &Shape::scalar()).expect("placeholder");
        for _ in 0..n {
            v = s.unary("Square", v).expect("square");
        }
        let g = s.graph();
        let fetch = g.output_name(v);
        (g, fetch)
    }

    /// `n` independent `Square` ops on the fed scalar `x`, stacked by one `Pack`: the
    /// executor's cost of fanning out and joining. Returns the graph and the fetch name.
    pub fn wide(n: usize) -> (Graph, String) {
        let s = Scope::new();
        let x = s.with_name("x").placeholder(DType::Float, &Shape::scalar()).expect("placeholder");
        let outs: Vec<Output> = (0..n).map(|_| s.unary("Square", x).expect("square")).collect();
        let packed = s.pack(&outs, 0).expect("pack");
        let g = s.graph();
        let fetch = g.output_name(packed);
        (g, fetch)
    }

    /// An unrolled layered network of `layers` layers (the graph `scripts/bench_optimizer.py`
    /// builds in TensorFlow): per layer a MatMul with a constant weight, a bias from a
    /// constant subgraph `(a + b) * c`, BiasAdd, two identical scaled copies (a shared
    /// subexpression), their sum, Relu, two Identities and `Neg(Neg(.))`. 17 nodes a layer.
    pub fn layered(layers: usize, width: usize) -> (Graph, String) {
        let s = Scope::new();
        let x = s.with_name("x").placeholder(DType::Float, &Shape::new(vec![None, Some(width)])).expect("x");
        let mut h = x;
        let mut seed = 1u32;
        let mut next = move || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (seed >> 8) as f32 / (1u32 << 24) as f32 - 0.5
        };
        for i in 0..layers {
            let l = s.name_scope(&format!("layer{i}"));
            let mut vec = |n: usize| Tensor::from_vec(&[n], (0..n).map(|_| next()).collect()).expect("vector");
            let w = l.constant(&vec(width * width).reshaped(&[width, width]).expect("w")).expect("w");
            let a = l.constant(&vec(width)).expect("a");
            let b = l.constant(&vec(width)).expect("b");
            let c = l.constant(&Tensor::from_vec(&[width], vec![0.5f32; width]).expect("c")).expect("c");
            let bias = l.mul(l.add(a, b).expect("add"), c).expect("mul");
            let z = l.bias_add(l.matmul(h, w, false, false).expect("matmul"), bias).expect("bias");
            let sc = l.scalar(0.25f32).expect("s");
            let d1 = l.mul(z, sc).expect("d1");
            let d2 = l.mul(z, sc).expect("d2");
            let r = l.relu(l.add(d1, d2).expect("sum")).expect("relu");
            let r = l.identity(l.identity(r).expect("id")).expect("id");
            h = l.unary("Neg", l.unary("Neg", r).expect("neg")).expect("neg");
        }
        let out = s.with_name("out").identity(h).expect("out");
        let g = s.graph();
        let fetch = g.output_name(out);
        (g, fetch)
    }

    /// A dense network `sizes[0] -> sizes[1] -> ... `: MatMul + BiasAdd per layer, then the
    /// activation `act` (`"relu"`, or `"gelu"` = tanh-approximated GELU, an elementwise chain)
    /// on hidden layers and Softmax at the end. Input `x:0` is `[batch, sizes[0]]`.
    pub fn mlp(sizes: &[usize], act: &str) -> (Graph, String) {
        let s = Scope::new();
        let x = s.with_name("x").placeholder(DType::Float, &Shape::new(vec![None, Some(sizes[0])])).expect("x");
        let mut h = x;
        let mut seed = 7u32;
        let mut next = move || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            ((seed >> 8) as f32 / (1u32 << 24) as f32 - 0.5) * 0.1
        };
        for (i, pair) in sizes.windows(2).enumerate() {
            let (n_in, n_out) = (pair[0], pair[1]);
            let l = s.name_scope(&format!("dense{i}"));
            let w = Tensor::from_vec(&[n_in, n_out], (0..n_in * n_out).map(|_| next()).collect()).expect("w");
            let b = Tensor::from_vec(&[n_out], (0..n_out).map(|_| next()).collect()).expect("b");
            let w = l.constant(&w).expect("w");
            let b = l.constant(&b).expect("b");
            let z = l.bias_add(l.matmul(h, w, false, false).expect("matmul"), b).expect("bias");
            h = if i + 2 == sizes.len() {
                s.softmax(z).expect("softmax")
            } else if act == "gelu" {
                // 0.5 * z * (1 + tanh(0.7978845608 * (z + 0.044715 * z^3)))
                let k = |v: f32| l.scalar(v).expect("scalar");
                let z3 = l.mul(l.unary("Square", z).expect("sq"), z).expect("z3");
                let inner =
                    l.mul(k(0.797_884_6), l.add(z, l.mul(k(0.044_715), z3).expect("m")).expect("a")).expect("m");
                let t = l.add(k(1.0), l.unary("Tanh", inner).expect("tanh")).expect("a");
                l.mul(l.mul(k(0.5), z).expect("m"), t).expect("gelu")
            } else {
                l.relu(z).expect("relu")
            };
        }
        let g = s.graph();
        let fetch = g.output_name(h);
        (g, fetch)
    }
}

/// Seed 003's MNIST model, built with the training API exactly as the article's
/// `tf.compat.v1` code builds it, and its training run (the example, the CLI and the demo).
pub mod seed_003 {
    use std::path::Path;

    use ferroflow_graph::Output;
    use ferroflow_runtime::{Session, SessionOptions};
    use ferroflow_tensor::Tensor;
    use ferroflow_tensor::{DType, Shape};
    use ferroflow_train::layers::{dense, dropout, Activation};
    use ferroflow_train::meta_graph::import_meta_graph_file;
    use ferroflow_train::mnist;
    use ferroflow_train::model::{FitOptions, Model};
    use ferroflow_train::optimizers::Optimizer;
    use ferroflow_train::saver::{meta_path, Saver, SaverOptions};
    use ferroflow_train::{losses, model::Roles, Builder, Initializer, Result};

    /// The article's `config`.
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
            }
        }
    }

    /// Builds the model in `b`: placeholders `inputs`, `outputs`, `is_training`; dropout on
    /// the input; `layer_<l>` dense+relu (truncated normal, stddev 0.1) each followed by
    /// `layer_dropout_<l>`; `out_layer` dense+softmax; the article's loss
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
        let log = s.unary("Log", s.add(out, eps)?)?;
        let prod = s.mul(y, log)?;
        let sum = s.reduce("Sum", prod, &[1], false)?;
        let neg = s.unary("Neg", sum)?;
        let loss: Output = s.reduce("Mean", neg, &[0], false)?;
        let acc = losses::accuracy(&s, y, out, "accuracy")?;
        let gs = b.global_step()?;
        let train = Optimizer::adam(c.learning_rate).minimize(b, loss, None, Some(&gs))?;
        let init = b.global_variables_initializer()?;
        let g = b.graph();
        Ok(Roles {
            inputs: g.output_name(x),
            labels: g.output_name(y),
            is_training: Some(g.output_name(training)),
            loss: g.output_name(loss),
            accuracy: Some(g.output_name(acc)),
            train_op: g.node(train).name.clone(),
            init: g.node(init).name.clone(),
        })
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
    }

    /// Trains the seed's model on the MNIST IDX files in `data` for `steps` batches of 100
    /// (shuffled epochs; the loss printed every `log_every` steps as the article does), then
    /// runs `accuracy:0` by name on the test split. With `save`, a TF1 `Saver` then writes
    /// `SAVE-STEP.{index,data-00000-of-00001,meta}` and the `checkpoint` file.
    pub fn train(
        data: &Path,
        steps: u64,
        seed: i64,
        options: SessionOptions,
        log_every: u64,
        save: Option<&Path>,
    ) -> std::result::Result<Report, Box<dyn std::error::Error>> {
        let m = mnist::load(data)?;
        let b = Builder::with_seed(seed);
        let roles = build(&b, &Config::default())?;
        let mut saver = Saver::new(&b, None, SaverOptions::default())?;
        let model = Model::new(Session::new(b.graph(), options)?, roles, &[784]);
        model.initialize()?;
        let opts = FitOptions {
            epochs: usize::MAX,
            batch_size: 100,
            max_steps: Some(steps),
            shuffle_seed: seed as u64,
            verbose: false,
            log_every,
        };
        let hist = model.fit(&m.train.images, &m.train.one_hot(10)?, &opts, None)?;
        let sess = model.session();
        let global_step = sess.run(&[], &["global_step/Read/ReadVariableOp:0"], &[])?[0].scalar_value::<i64>()?;
        let feeds = [
            ("inputs:0", m.test.images.clone()),
            ("outputs:0", m.test.one_hot(10)?),
            ("is_training:0", Tensor::scalar(false)),
        ];
        let acc = sess.run(&feeds, &["accuracy:0"], &[])?[0].scalar_value::<f32>()?;
        let checkpoint = save.map(|prefix| saver.save(sess, prefix, Some(global_step))).transpose()?;
        Ok(Report {
            steps: hist.steps,
            steps_per_sec: hist.steps_per_sec,
            global_step,
            test_accuracy: acc,
            examples: (m.train.len(), m.test.len()),
            checkpoint,
        })
    }

    /// The article's restore, without the model's code: imports `checkpoint.meta` into a new
    /// graph under `import_scope`, restores `checkpoint` in a fresh session, and runs
    /// `SCOPE/accuracy:0` on the test split of `data` fed by names.
    pub fn evaluate_restored(
        checkpoint: &Path,
        data: &Path,
        import_scope: &str,
    ) -> std::result::Result<f32, Box<dyn std::error::Error>> {
        let m = mnist::load(data)?;
        let imported = import_meta_graph_file(&meta_path(checkpoint), None, import_scope)?;
        let saver = imported.saver.as_ref().ok_or("the meta graph has no saver")?;
        let sess = Session::new(imported.graph.clone(), SessionOptions::default())?;
        saver.restore(&sess, checkpoint)?;
        let name = |n: &str| if import_scope.is_empty() { n.to_string() } else { format!("{import_scope}/{n}") };
        let (x, y, t, acc) = (name("inputs:0"), name("outputs:0"), name("is_training:0"), name("accuracy:0"));
        let feeds = [
            (x.as_str(), m.test.images.clone()),
            (y.as_str(), m.test.one_hot(10)?),
            (t.as_str(), Tensor::scalar(false)),
        ];
        Ok(sess.run(&feeds, &[&acc], &[])?[0].scalar_value::<f32>()?)
    }
}
