//! Training against TensorFlow: TF1 graphs with resource variables and every optimizer's
//! update op, run for 3 steps and compared with TensorFlow's variable values; random ops
//! tested statistically against TensorFlow's samples; seeds; the `mnist_training` model learning
//! MNIST; and bad input during training.
use std::collections::HashMap;
use std::path::PathBuf;

use ferroflow::prelude::*;
use ferroflow::tensor::npy::read_npz;
use ferroflow::testing::compare;
use ferroflow::train::layers::Activation;
use ferroflow::train::model::{FitOptions, Layer, Loss, Model, Sequential};
use ferroflow::train::optimizers::Optimizer;
use ferroflow::train::{mnist, Builder, Initializer, TrainError};

fn training_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tf/training")
}

fn npz(name: &str) -> HashMap<String, Tensor> {
    read_npz(&training_dir().join(name)).unwrap().into_iter().collect()
}

#[test]
fn every_optimizer_matches_tensorflow_for_three_steps() {
    let graph = ferroflow::load_graph(&training_dir().join("optimizers.pb")).unwrap();
    let roles = std::fs::read_to_string(training_dir().join("optimizers.txt")).unwrap();
    let (mut init, mut train, mut fetch, mut vars) = (String::new(), vec![], vec![], vec![]);
    for line in roles.lines().filter(|l| !l.starts_with('#')) {
        let (k, v) = line.split_once(' ').unwrap();
        match k {
            "init" => init = v.to_string(),
            "train" => train.push(v.to_string()),
            "fetch" => fetch.push(v.to_string()),
            "var" => vars.push(v.to_string()),
            other => panic!("unknown role {other}"),
        }
    }
    let inputs = npz("optimizers.inputs.npz");
    let expected = npz("optimizers.expected.npz");
    for optimize in [true, false] {
        let mut opts = SessionOptions::default();
        opts.optimizer.enabled = optimize;
        let sess = Session::new(graph.clone(), opts).unwrap();
        sess.run(&[], &[], &[&init]).unwrap();
        let feeds: Vec<(&str, Tensor)> = inputs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        let targets: Vec<&str> = train.iter().map(String::as_str).collect();
        for step in 1..=3 {
            sess.run(&feeds, &[], &targets).unwrap();
            for v in &vars {
                let got = sess.resources().lookup(&format!("localhost/{v}")).unwrap().read().unwrap();
                let want = &expected[&format!("step{step}/{v}")];
                compare(&got, want, 1e-5, 1e-6).unwrap_or_else(|e| panic!("step {step}, variable {v}: {e}"));
            }
        }
        let f: Vec<&str> = fetch.iter().map(String::as_str).collect();
        let out = sess.run(&[], &f, &[]).unwrap();
        assert_eq!(out[0], expected[&fetch[0]]);
    }
}

/// The two-sample Kolmogorov–Smirnov statistic.
fn ks(a: &[f32], b: &[f32]) -> f64 {
    let mut a: Vec<f32> = a.to_vec();
    let mut b: Vec<f32> = b.to_vec();
    a.sort_by(f32::total_cmp);
    b.sort_by(f32::total_cmp);
    let (mut i, mut j, mut d) = (0, 0, 0f64);
    while i < a.len() && j < b.len() {
        let x = a[i].min(b[j]);
        while i < a.len() && a[i] <= x {
            i += 1;
        }
        while j < b.len() && b[j] <= x {
            j += 1;
        }
        d = d.max((i as f64 / a.len() as f64 - j as f64 / b.len() as f64).abs());
    }
    d
}

#[test]
fn random_ops_draw_tensorflows_distributions_reproducibly() {
    let graph = ferroflow::load_graph(&training_dir().join("random.pb")).unwrap();
    let tf = npz("random.expected.npz");
    let names = ["uniform/RandomUniform:0", "normal:0", "truncated:0"];
    let sess = Session::new(graph.clone(), SessionOptions::default()).unwrap();
    let first = sess.run(&[], &names, &[]).unwrap();
    let second = sess.run(&[], &names, &[]).unwrap();
    // Same graph seeds → same streams in a new session; later steps continue the stream.
    let again = Session::new(graph, SessionOptions::default()).unwrap().run(&[], &names, &[]).unwrap();
    for (k, name) in names.iter().enumerate() {
        assert_eq!(first[k], again[k], "{name}: seeded runs are reproducible");
        assert_ne!(first[k], second[k], "{name}: each step draws new values");
        let ours = first[k].as_slice::<f32>().unwrap();
        let theirs = tf[*name].as_slice::<f32>().unwrap();
        // KS critical value at α = 0.001 for two samples of 20,000: 1.95·sqrt(2/20000) ≈ 0.0195.
        let d = ks(ours, theirs);
        assert!(d < 0.0195, "{name}: KS distance to TensorFlow's samples {d}");
        let mean = ours.iter().map(|&v| v as f64).sum::<f64>() / ours.len() as f64;
        let var = ours.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / ours.len() as f64;
        let (want_mean, want_var, lo, hi) = match *name {
            "uniform/RandomUniform:0" => (0.5, 1.0 / 12.0, 0.0, 1.0),
            "normal:0" => (0.0, 1.0, f32::NEG_INFINITY, f32::INFINITY),
            // Normal truncated at ±2σ: variance 1 − 2·2·φ(2)/(Φ(2) − Φ(−2)) ≈ 0.7737.
            _ => (0.0, 0.7737, -2.0, 2.0),
        };
        let se = (want_var / ours.len() as f64).sqrt();
        assert!((mean - want_mean).abs() < 5.0 * se, "{name}: mean {mean}");
        assert!((var - want_var).abs() < 0.03, "{name}: variance {var}");
        let hi_ok = if k == 0 { ours.iter().all(|&v| v < hi) } else { ours.iter().all(|&v| v <= hi) };
        assert!(ours.iter().all(|&v| v >= lo) && hi_ok, "{name}: values within [{lo}, {hi})");
    }
}

fn initial_values(seed: i64) -> Vec<Tensor> {
    let b = Builder::with_seed(seed);
    let s = b.scope().clone();
    let inits = [
        Initializer::TruncatedNormal { mean: 0.0, stddev: 0.1, seed: None },
        Initializer::RandomNormal { mean: 1.0, stddev: 2.0, seed: Some(3) },
        Initializer::RandomUniform { minval: -1.0, maxval: 1.0, seed: None },
        Initializer::GlorotUniform { seed: None },
        Initializer::Zeros,
        Initializer::Ones,
        Initializer::Constant(2.5),
    ];
    for (i, init) in inits.iter().enumerate() {
        b.variable(&s, &format!("v{i}"), &[30, 20], DType::Float, init, true).unwrap();
    }
    let init = b.global_variables_initializer().unwrap();
    let g = b.graph();
    let sess = Session::new(g.clone(), SessionOptions::default()).unwrap();
    sess.run(&[], &[], &[&g.node(init).name]).unwrap();
    (0..inits.len()).map(|i| sess.resources().lookup(&format!("localhost/v{i}")).unwrap().read().unwrap()).collect()
}

#[test]
fn initializers_follow_their_distributions_and_seeds() {
    let a = initial_values(42);
    assert_eq!(a, initial_values(42), "the same graph seed gives the same values");
    let b = initial_values(43);
    for k in 0..4 {
        assert_ne!(a[k], b[k], "initializer {k}: another graph seed gives other values");
    }
    let stats = |t: &Tensor| {
        let v = t.as_slice::<f32>().unwrap();
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64;
        let sd = (v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / v.len() as f64).sqrt();
        let (lo, hi) = v.iter().fold((f32::MAX, f32::MIN), |(l, h), &x| (l.min(x), h.max(x)));
        (mean, sd, lo, hi)
    };
    let (m, sd, lo, hi) = stats(&a[0]);
    assert!(m.abs() < 0.01 && (sd - 0.088).abs() < 0.01 && lo >= -0.2 && hi <= 0.2, "truncated {m} {sd} {lo} {hi}");
    let (m, sd, _, _) = stats(&a[1]);
    assert!((m - 1.0).abs() < 0.25 && (sd - 2.0).abs() < 0.15, "normal {m} {sd}");
    let (m, _, lo, hi) = stats(&a[2]);
    assert!(m.abs() < 0.1 && lo >= -1.0 && hi < 1.0, "uniform {m} {lo} {hi}");
    let limit = (6.0f32 / 50.0).sqrt();
    let (_, _, lo, hi) = stats(&a[3]);
    assert!(lo >= -limit && hi <= limit && hi > 0.8 * limit, "glorot {lo} {hi} limit {limit}");
    assert!(a[4].as_slice::<f32>().unwrap().iter().all(|&v| v == 0.0));
    assert!(a[5].as_slice::<f32>().unwrap().iter().all(|&v| v == 1.0));
    assert!(a[6].as_slice::<f32>().unwrap().iter().all(|&v| v == 2.5));
}

#[test]
fn dropout_scales_kept_values_and_is_off_when_not_training() {
    let b = Builder::with_seed(7);
    let s = b.scope().clone();
    let x = s.with_name("x").placeholder(DType::Float, &Shape::new(vec![None, Some(1000)])).unwrap();
    let training = s.with_name("training").placeholder(DType::Bool, &Shape::scalar()).unwrap();
    let y = ferroflow::train::layers::dropout(&b, x, 0.25, training, None, "dropout").unwrap();
    let g = b.graph();
    let sess = Session::new(g.clone(), SessionOptions::default()).unwrap();
    let ones = Tensor::from_vec(&[20, 1000], vec![1f32; 20_000]).unwrap();
    let run = |t: bool| {
        sess.run(&[("x:0", ones.clone()), ("training:0", Tensor::scalar(t))], &[&g.output_name(y)], &[]).unwrap()
    };
    let off = run(false);
    assert_eq!(off[0], ones, "identity when not training");
    let on = run(true);
    let v = on[0].as_slice::<f32>().unwrap();
    assert!(v.iter().all(|&x| x == 0.0 || x == 1.0 / 0.75), "kept values scaled by 1/(1-rate)");
    let dropped = v.iter().filter(|&&x| x == 0.0).count() as f64 / v.len() as f64;
    assert!((dropped - 0.25).abs() < 0.015, "dropped fraction {dropped}");
    assert_ne!(run(true)[0], on[0], "a new mask each step");
}

#[test]
fn mnist_training_model_learns_mnist() {
    let m = mnist::load(&mnist::bundled_dir()).unwrap();
    let b = Builder::with_seed(1);
    let roles = ferroflow::workflows::mnist_training::build(&b, &Default::default()).unwrap();
    let graph = b.graph();
    for name in ["inputs", "outputs", "is_training", "accuracy", "global_step", "layer_0/kernel", "out_layer/bias"] {
        assert!(graph.find(name).is_some(), "the seed's node '{name}' exists");
    }
    let model = Model::new(Session::new(graph, SessionOptions::default()).unwrap(), roles, &[784]);
    model.initialize().unwrap();
    let opts = FitOptions::default().with_epochs(1).with_batch_size(100).with_max_steps(Some(300)).with_verbose(false);
    let hist = model.fit(&m.train.images, &m.train.one_hot(10).unwrap(), &opts, None).unwrap();
    assert_eq!(hist.steps, 80, "one epoch of 8,000 digits in batches of 100");
    let step = model.session().run(&[], &["global_step/Read/ReadVariableOp:0"], &[]).unwrap();
    assert_eq!(step[0].scalar_value::<i64>().unwrap(), 80);
    let (_, acc) = model.evaluate(&m.test.images, &m.test.one_hot(10).unwrap(), 500).unwrap();
    let acc = acc.unwrap();
    // The 3,000-step run (examples/mnist_mlp.rs) reaches ≥ 0.95; one epoch already learns.
    assert!(acc > 0.85, "test accuracy after one epoch: {acc}");
}

#[test]
fn sequential_models_train_with_every_optimizer() {
    // A linearly separable toy problem: class = argmax of the first 3 features.
    let n = 240;
    let mut xs = Vec::with_capacity(n * 6);
    let mut ys = Vec::with_capacity(n);
    let mut rng = ferroflow::tensor::rng::Rng::new(12345);
    for _ in 0..n {
        let mut row = [0f32; 6];
        for v in &mut row {
            *v = rng.unit() as f32 * 2.0 - 1.0;
        }
        let class = (0..3).max_by(|&a, &b| row[a].total_cmp(&row[b])).unwrap();
        xs.extend_from_slice(&row);
        ys.push(class as i64);
    }
    let x = Tensor::from_vec(&[n, 6], xs).unwrap();
    let y = Tensor::from_vec(&[n], ys).unwrap();
    for opt in [
        Optimizer::gradient_descent(0.5),
        Optimizer::momentum(0.1, 0.9, false),
        Optimizer::momentum(0.1, 0.9, true),
        Optimizer::adam(0.05),
        Optimizer::rms_prop(0.01),
        Optimizer::adagrad(0.5),
    ] {
        let model = Sequential::new(&[6])
            .seed(3)
            .push(Layer::dense(16, Activation::Relu))
            .push(Layer::Dropout { rate: 0.1 })
            .push(Layer::dense(3, Activation::Softmax))
            .compile(Loss::SparseCategoricalCrossentropy, &opt, SessionOptions::default())
            .unwrap();
        let opts = FitOptions::default().with_epochs(30).with_batch_size(24).with_verbose(false);
        let hist = model.fit(&x, &y, &opts, Some((&x, &y))).unwrap();
        let (loss, acc) = *hist.validation.last().unwrap();
        assert!(hist.loss.last().unwrap() < &hist.loss[0], "{}: loss falls", opt.name());
        assert!(acc.unwrap() > 0.85, "{}: accuracy {acc:?}, loss {loss}", opt.name());
    }
}

#[test]
fn bad_input_during_training_names_the_step_and_tensor() {
    let model = Sequential::new(&[4])
        .seed(1)
        .push(Layer::dense(3, Activation::Softmax))
        .compile(Loss::SparseCategoricalCrossentropy, &Optimizer::adam(0.01), SessionOptions::default())
        .unwrap();
    let x = Tensor::from_vec(&[8, 4], vec![0.5f32; 32]).unwrap();
    // A batch of the wrong shape.
    let wrong = Tensor::from_vec(&[8, 5], vec![0.5f32; 40]).unwrap();
    let y = Tensor::from_vec(&[8], vec![0i64, 1, 2, 0, 1, 2, 0, 1]).unwrap();
    let opts = FitOptions::default().with_epochs(1).with_batch_size(4).with_verbose(false);
    let e = model.fit(&wrong, &y, &opts, None).unwrap_err();
    assert!(matches!(e, TrainError::BatchShape { ref when, .. } if when == "step 1"), "{e:?}");
    let e = e.to_string();
    assert!(e.contains("step 1") && e.contains("inputs:0") && e.contains("[4, 5]"), "{e}");
    // Labels out of range for sparse cross-entropy: the step and the loss node are named.
    let bad = Tensor::from_vec(&[8], vec![0i64, 1, 2, 0, 1, 7, 0, 1]).unwrap();
    let e = model.fit(&x, &bad, &opts.clone().with_shuffle_seed(0), None).unwrap_err();
    assert!(matches!(e, TrainError::Step { .. }), "{e:?}");
    let e = e.to_string();
    assert!(e.contains("step ") && e.contains("SparseSoftmaxCrossEntropyWithLogits") && e.contains('7'), "{e}");
    // Mismatched example counts.
    let short = Tensor::from_vec(&[6], vec![0i64; 6]).unwrap();
    let e = model.fit(&x, &short, &opts, None).unwrap_err();
    assert!(matches!(e, TrainError::Invalid(_)) && e.to_string().contains("first dimensions must match"), "{e}");

    // A loss that becomes NaN mid-training: plain gradient descent with a huge rate on MSE.
    let model = Sequential::new(&[4])
        .seed(1)
        .push(Layer::dense(1, Activation::Linear))
        .compile(Loss::MeanSquaredError, &Optimizer::gradient_descent(1e18), SessionOptions::default())
        .unwrap();
    let t = Tensor::from_vec(&[8, 1], vec![1f32; 8]).unwrap();
    let x = Tensor::from_vec(&[8, 4], (0..32).map(|i| i as f32).collect()).unwrap();
    let opts = FitOptions::default().with_epochs(50).with_batch_size(8).with_verbose(false);
    match model.fit(&x, &t, &opts, None) {
        Err(TrainError::NonFinite { step, tensor, .. }) => {
            assert!(step > 1, "the first steps are finite");
            assert_eq!(tensor, "loss:0");
            let msg = model.fit(&x, &t, &opts, None).unwrap_err().to_string();
            assert!(msg.contains("step") && msg.contains("loss:0") && msg.contains("not finite"), "{msg}");
        }
        other => panic!("expected a non-finite loss error, got {other:?}"),
    }
}

#[test]
fn sequential_cnn_learns_mnist_digits() {
    use ferroflow::train::layers::Padding;
    let m = mnist::load(&mnist::bundled_dir()).unwrap();
    let take = |t: &Tensor, n: usize| {
        let idx: Vec<usize> = (0..n).collect();
        ferroflow::train::model::gather_rows(t, &idx).unwrap().reshaped(&[n, 28, 28, 1]).unwrap()
    };
    let (xtr, xte) = (take(&m.train.images, 1500), take(&m.test.images, 500));
    let ytr = Tensor::from_vec(&[1500], m.train.labels[..1500].iter().map(|&l| l as i64).collect()).unwrap();
    let yte = Tensor::from_vec(&[500], m.test.labels[..500].iter().map(|&l| l as i64).collect()).unwrap();
    let glorot = Initializer::GlorotUniform { seed: None };
    let model = Sequential::new(&[28, 28, 1])
        .seed(5)
        .push(Layer::Conv2D {
            filters: 8,
            kernel: [3, 3],
            strides: [1, 1],
            padding: Padding::Same,
            activation: Activation::Relu,
            kernel_init: glorot.clone(),
        })
        .push(Layer::MaxPool2D { pool: [2, 2], strides: [2, 2], padding: Padding::Valid })
        .push(Layer::Flatten)
        .push(Layer::Dropout { rate: 0.1 })
        .push(Layer::dense(10, Activation::Softmax))
        .compile(Loss::SparseCategoricalCrossentropy, &Optimizer::adam(0.005), SessionOptions::default())
        .unwrap();
    let opts = FitOptions::default().with_epochs(2).with_batch_size(50).with_verbose(false);
    let hist = model.fit(&xtr, &ytr, &opts, Some((&xte, &yte))).unwrap();
    let acc = hist.validation.last().unwrap().1.unwrap();
    assert!(acc > 0.8, "CNN test accuracy after 2 epochs on 1,500 digits: {acc}");
}
