//! The EfficientNet family's layers and gradients against TensorFlow: fixtures/effnet/*.npz
//! (scripts/make_effnet_fixtures.py) hold inputs, weights, TensorFlow's outputs and its
//! tf.GradientTape gradients of `loss = Σ y·r`; here the same graphs are built with ferroflow's
//! ops and layers, differentiated by ferroflow's autodiff and compared. And a reduced
//! EfficientNet-style model trains: its loss falls, batch normalization's moving statistics
//! move as Keras's do.
//!
//! Tolerances (float32 on both sides, sums in different orders): rtol 1e-5 + atol 1e-5 for
//! single ops; 1e-4 for the squeeze-and-excitation block and the whole MBConv block (a chain
//! of convolutions, three batch normalizations and a channel product).
use std::collections::BTreeMap;
use std::path::PathBuf;

use ferroflow::autodiff::gradients;
use ferroflow::graph::Attrs;
use ferroflow::prelude::*;
use ferroflow::proto::attr;
use ferroflow::train::efficientnet::{self, EfficientNetConfig, StageArgs};
use ferroflow::train::layers::{self, Activation};
use ferroflow::train::model::{FitOptions, Functional, Loss};
use ferroflow::train::optimizers::Optimizer;
use ferroflow::train::{Builder, Initializer};

fn fixture(name: &str) -> BTreeMap<String, Tensor> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/effnet").join(format!("{name}.npz"));
    ferroflow::tensor::npy::read_npz(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).into_iter().collect()
}

/// Compares and reports the largest absolute difference.
fn check(what: &str, got: &Tensor, want: &Tensor, tol: f64) {
    match ferroflow::testing::compare(got, want, tol, tol) {
        Ok(err) => println!("{what}: max |ferroflow - TensorFlow| = {err:.2e}"),
        Err(e) => panic!("{what}: {e}"),
    }
}

fn placeholder(s: &Scope, name: &str, t: &Tensor) -> Output {
    s.with_name(name).placeholder(t.dtype(), &Shape::known(t.dims())).unwrap()
}

/// `Σ y·r` with `r` a constant.
fn weighted_sum(s: &Scope, y: Output, r: &Tensor) -> Output {
    let r = s.constant(r).unwrap();
    let axes: Vec<i32> = (0..r_rank(s, y)).collect();
    s.reduce("Sum", s.mul(y, r).unwrap(), &axes, false).unwrap()
}

fn r_rank(s: &Scope, y: Output) -> i32 {
    let shapes = ferroflow::ops::infer_shapes(&s.graph()).unwrap();
    shapes[y.node][y.index].rank().unwrap() as i32
}

/// Runs `fetches` of the scope's graph with `feeds` (placeholders by output).
fn run(s: &Scope, feeds: &[(Output, &Tensor)], fetches: &[Output], targets: &[&str]) -> Vec<Tensor> {
    let g = s.graph();
    let names: Vec<String> = feeds.iter().map(|(o, _)| g.output_name(*o)).collect();
    let feeds: Vec<(&str, Tensor)> =
        names.iter().map(String::as_str).zip(feeds.iter().map(|(_, t)| (*t).clone())).collect();
    let fetch: Vec<String> = fetches.iter().map(|o| g.output_name(*o)).collect();
    let fetch: Vec<&str> = fetch.iter().map(String::as_str).collect();
    let sess = Session::new(g, SessionOptions::default()).unwrap();
    sess.run(&feeds, &fetch, targets).unwrap()
}

#[test]
fn depthwise_convolution_and_its_gradients_match_tensorflow() {
    for (case, stride, padding) in [
        ("depthwise_same_s1", 1, "SAME"),
        ("depthwise_same_s2", 2, "SAME"),
        ("depthwise_valid_s1", 1, "VALID"),
        ("depthwise_valid_s2", 2, "VALID"),
    ] {
        let f = fixture(case);
        let s = Scope::new();
        let (x, w) = (placeholder(&s, "x", &f["x"]), placeholder(&s, "w", &f["w"]));
        let mut a = Attrs::new();
        a.insert("T".into(), attr::dtype(DType::Float));
        a.insert("strides".into(), attr::ints(&[1, stride, stride, 1]));
        a.insert("padding".into(), attr::string(padding));
        let y = Output { node: s.add_op("DepthwiseConv2dNative", "depthwise", &[x, w], &[], a).unwrap(), index: 0 };
        let loss = weighted_sum(&s, y, &f["r"]);
        let g = gradients(&s, &[loss], &[x, w], None).unwrap();
        let out = run(&s, &[(x, &f["x"]), (w, &f["w"])], &[y, g[0].unwrap(), g[1].unwrap()], &[]);
        check(&format!("{case} y"), &out[0], &f["y"], 1e-5);
        check(&format!("{case} dx"), &out[1], &f["dx"], 1e-5);
        check(&format!("{case} dw"), &out[2], &f["dw"], 1e-5);
    }
}

#[test]
fn batch_normalization_training_and_inference_and_gradients_match_tensorflow() {
    for (case, training) in [("batch_norm_train", true), ("batch_norm_infer", false)] {
        let f = fixture(case);
        let s = Scope::new();
        let x = placeholder(&s, "x", &f["x"]);
        let scale = placeholder(&s, "scale", &f["scale"]);
        let offset = placeholder(&s, "offset", &f["offset"]);
        let mean = s.constant(&f["moving_mean"]).unwrap();
        let var = s.constant(&f["moving_var"]).unwrap();
        let mut a = Attrs::new();
        a.insert("T".into(), attr::dtype(DType::Float));
        a.insert("U".into(), attr::dtype(DType::Float));
        a.insert("epsilon".into(), attr::float(1e-3));
        a.insert("is_training".into(), attr::boolean(training));
        a.insert("exponential_avg_factor".into(), attr::float(if training { 0.01 } else { 1.0 }));
        let bn = s.add_op("FusedBatchNormV3", "bn", &[x, scale, offset, mean, var], &[], a).unwrap();
        let out = |index| Output { node: bn, index };
        let loss = weighted_sum(&s, out(0), &f["r"]);
        let g = gradients(&s, &[loss], &[x, scale, offset], None).unwrap();
        let mut fetches = vec![out(0), g[0].unwrap(), g[1].unwrap(), g[2].unwrap()];
        if training {
            fetches.extend([out(1), out(2), out(3), out(4)]);
        }
        let feeds = [(x, &f["x"]), (scale, &f["scale"]), (offset, &f["offset"])];
        let got = run(&s, &feeds, &fetches, &[]);
        let mut names = vec!["y", "dx", "dscale", "doffset"];
        if training {
            names.extend(["new_mean", "new_var", "batch_mean", "batch_var"]);
        }
        for (name, t) in names.iter().zip(&got) {
            check(&format!("{case} {name}"), t, &f[*name], 1e-5);
        }
    }
}

#[test]
fn swish_and_its_gradient_match_tensorflow() {
    let f = fixture("swish");
    let s = Scope::new();
    let x = placeholder(&s, "x", &f["x"]);
    let y = Activation::Swish.apply(&s, x).unwrap();
    let loss = weighted_sum(&s, y, &f["r"]);
    let g = gradients(&s, &[loss], &[x], None).unwrap();
    let out = run(&s, &[(x, &f["x"])], &[y, g[0].unwrap()], &[]);
    check("swish y", &out[0], &f["y"], 1e-6);
    check("swish dx", &out[1], &f["dx"], 1e-6);
}

/// Sets each variable `name` of the session to the fixture's array `key`.
fn assign(sess: &Session, f: &BTreeMap<String, Tensor>, pairs: &[(&str, &str)]) {
    for (var, key) in pairs {
        let r = sess.resources().lookup(&format!("localhost/{var}")).unwrap_or_else(|| panic!("no variable {var}"));
        r.assign(f[*key].clone());
    }
}

/// Builds `body` in a fresh builder, loads the fixture's weights into its variables, runs it
/// on the fixture's `x` and compares y and the gradients of `Σ y·r` for x and each variable.
fn compare_layer(
    case: &str,
    weights: &[(&str, &str)],
    tol: f64,
    body: impl FnOnce(&Builder, Output, Output) -> Output,
) -> (Session, Builder) {
    let f = fixture(case);
    let b = Builder::with_seed(1);
    let s = b.scope().clone();
    let x = placeholder(&s, "x", &f["x"]);
    let training = s.with_name("training").placeholder(DType::Bool, &Shape::scalar()).unwrap();
    let y = body(&b, x, training);
    let loss = weighted_sum(&s, y, &f["r"]);
    let vars = b.variables();
    let handle =
        |name: &str| vars.iter().find(|v| v.name == name).unwrap_or_else(|| panic!("no variable {name}")).handle;
    let mut xs = vec![x];
    xs.extend(weights.iter().map(|(v, _)| handle(v)));
    let g = gradients(&s, &[loss], &xs, None).unwrap();
    let init = b.global_variables_initializer().unwrap();
    let graph = b.graph();
    let sess = Session::new(graph.clone(), SessionOptions::default()).unwrap();
    sess.run(&[], &[], &[&graph.node(init).name]).unwrap();
    assign(&sess, &f, weights);
    let mut fetch = vec![graph.output_name(y)];
    fetch.extend(g.iter().map(|o| graph.output_name(o.expect("every input reaches y"))));
    let fetch: Vec<&str> = fetch.iter().map(String::as_str).collect();
    let updates = b.collections().get(layers::UPDATE_OPS).cloned().unwrap_or_default();
    let targets: Vec<&str> = updates.iter().map(String::as_str).collect();
    let feeds = [(graph.output_name(x), f["x"].clone()), (graph.output_name(training), Tensor::scalar(true))];
    let feeds: Vec<(&str, Tensor)> = feeds.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let out = sess.run(&feeds, &fetch, &targets).unwrap();
    check(&format!("{case} y"), &out[0], &f["y"], tol);
    check(&format!("{case} dx"), &out[1], &f["dx"], tol);
    for ((var, key), got) in weights.iter().zip(&out[2..]) {
        check(&format!("{case} d{key} ({var})"), got, &f[&format!("d{key}")], tol);
    }
    (sess, b)
}

#[test]
fn squeeze_excitation_layer_and_its_gradients_match_tensorflow() {
    let weights =
        [("se/reduce/kernel", "w1"), ("se/reduce/bias", "b1"), ("se/expand/kernel", "w2"), ("se/expand/bias", "b2")];
    compare_layer("se_block", &weights, 1e-4, |b, x, _| {
        layers::squeeze_excitation(b, x, 2, &Initializer::GlorotUniform { seed: None }, "se").unwrap()
    });
}

#[test]
fn mbconv_block_in_training_mode_matches_tensorflow_with_its_moving_statistics() {
    let weights = [
        ("blk/expand_conv/kernel", "expand_kernel"),
        ("blk/expand_bn/gamma", "bn0_gamma"),
        ("blk/expand_bn/beta", "bn0_beta"),
        ("blk/dwconv/depthwise_kernel", "dw_kernel"),
        ("blk/bn/gamma", "bn1_gamma"),
        ("blk/bn/beta", "bn1_beta"),
        ("blk/se/reduce/kernel", "se_reduce_kernel"),
        ("blk/se/reduce/bias", "se_reduce_bias"),
        ("blk/se/expand/kernel", "se_expand_kernel"),
        ("blk/se/expand/bias", "se_expand_bias"),
        ("blk/project_conv/kernel", "project_kernel"),
        ("blk/project_bn/gamma", "bn2_gamma"),
        ("blk/project_bn/beta", "bn2_beta"),
    ];
    let stage = StageArgs { kernel: 3, repeats: 1, filters_in: 8, filters_out: 8, expand_ratio: 4, strides: 1 };
    let config = EfficientNetConfig::b0(2);
    let (sess, _) = compare_layer("mbconv_block", &weights, 1e-4, |b, x, training| {
        efficientnet::mbconv(b, x, training, &config, 8, 8, &stage, 1, "blk").unwrap()
    });
    // The update ops ran with the step: the moving statistics are TensorFlow's.
    let f = fixture("mbconv_block");
    for (bn, key) in [("expand_bn", "bn0"), ("bn", "bn1"), ("project_bn", "bn2")] {
        for (stat, suffix) in [("moving_mean", "mean"), ("moving_variance", "var")] {
            let v = sess.resources().lookup(&format!("localhost/blk/{bn}/{stat}")).unwrap().read().unwrap();
            check(&format!("mbconv_block {bn}/{stat}"), &v, &f[&format!("{key}_{suffix}")], 1e-5);
        }
    }
}

/// Random images and labels from a fixed generator.
fn random_batch(n: usize, hw: usize, classes: usize, seed: u64) -> (Tensor, Tensor) {
    let mut r = ferroflow::tensor::rng::Rng::new(seed);
    let mut next = move || r.unit();
    let x: Vec<f32> = (0..n * hw * hw * 3).map(|_| next() as f32).collect();
    let y: Vec<i64> = (0..n).map(|_| (next() * classes as f64) as i64 % classes as i64).collect();
    (Tensor::from_vec(&[n, hw, hw, 3], x).unwrap(), Tensor::from_vec(&[n], y).unwrap())
}

#[test]
fn reduced_efficientnet_loss_decreases_over_training_steps() {
    // Width 0.25, depth 0.5, three stages on 32x32 input: stem, block1a, block2a, block3a
    // (each MBConv with expansion, depthwise, SE, projection), head, pooling, dropout, dense.
    let config = (EfficientNetConfig::reduced(5, 0.25, 0.5, 3)).with_seed(Some(3));
    let model = Functional::new(&[32, 32, 3])
        .seed(7)
        .compile(
            |b, x, training| efficientnet::efficientnet(b, x, training, &config),
            Loss::SparseCategoricalCrossentropy,
            &Optimizer::adam(1e-2),
            SessionOptions::default(),
        )
        .unwrap();
    let (x, y) = random_batch(16, 32, 5, 11);
    let losses: Vec<f64> = (1..=8).map(|step| model.train_step(x.clone(), y.clone(), step).unwrap()).collect();
    println!("losses over 8 steps on one batch: {losses:?}");
    assert!(losses.iter().all(|l| l.is_finite()), "{losses:?}");
    assert!(losses[7] < 0.5 * losses[0], "the loss must fall on a batch the model can memorise: {losses:?}");
    // Evaluation switches batch normalization to the moving statistics and dropout off.
    let (loss, acc) = model.evaluate(&x, &y, 16).unwrap();
    assert!(loss.is_finite() && acc.is_some_and(|a| (0.0..=1.0).contains(&a)), "{loss} {acc:?}");
}

#[test]
fn batch_normalization_moving_statistics_follow_keras_during_fit() {
    // inputs → BatchNormalization → global average pooling → dense: after one step on a
    // batch, moving_mean = 0.99·0 + 0.01·mean(x) and moving_variance = 0.99·1 + 0.01·var(x)
    // with Bessel's correction (Keras 2's fused update), per channel.
    let model = Functional::new(&[4, 4, 3])
        .seed(1)
        .compile(
            |b, x, training| {
                let h = layers::batch_normalization(b, x, training, 0.99, 1e-3, "bn")?;
                let h = layers::global_average_pooling2d(b, h, false, "pool")?;
                layers::dense(b, h, 2, Activation::Linear, &Initializer::GlorotUniform { seed: None }, "dense")
            },
            Loss::SparseCategoricalCrossentropy,
            &Optimizer::gradient_descent(0.1),
            SessionOptions::default(),
        )
        .unwrap();
    let (x, y) = random_batch(6, 4, 2, 5);
    let opts = FitOptions::default().with_epochs(1).with_batch_size(6).with_verbose(false);
    model.fit(&x, &y, &opts, None).unwrap();
    let read = |name: &str| {
        let v = model.session().resources().lookup(&format!("localhost/bn/{name}")).unwrap().read().unwrap();
        v.as_slice::<f32>().unwrap().to_vec()
    };
    let (mean, var) = (read("moving_mean"), read("moving_variance"));
    let xs = x.as_slice::<f32>().unwrap();
    let n = xs.len() / 3;
    for c in 0..3 {
        let vals: Vec<f64> = xs.iter().skip(c).step_by(3).map(|&v| v as f64).collect();
        let m = vals.iter().sum::<f64>() / n as f64;
        let v = vals.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1) as f64;
        assert!((mean[c] as f64 - 0.01 * m).abs() < 1e-6, "channel {c}: moving mean {} vs {}", mean[c], 0.01 * m);
        assert!((var[c] as f64 - (0.99 + 0.01 * v)).abs() < 1e-6, "channel {c}: moving variance {}", var[c]);
    }
    // Evaluation reads them and leaves them alone.
    model.evaluate(&x, &y, 6).unwrap();
    assert_eq!(read("moving_mean"), mean);
}

#[test]
fn sequential_models_take_the_new_layers() {
    use ferroflow::train::layers::Padding;
    use ferroflow::train::model::{Layer, Sequential};
    let init = Initializer::GlorotUniform { seed: None };
    let model = Sequential::new(&[8, 8, 3])
        .seed(2)
        .push(Layer::Conv2D {
            filters: 8,
            kernel: [3, 3],
            strides: [1, 1],
            padding: Padding::Same,
            activation: Activation::Linear,
            kernel_init: init.clone(),
        })
        .push(Layer::BatchNormalization { momentum: 0.99, epsilon: 1e-3 })
        .push(Layer::DepthwiseConv2D {
            kernel: [3, 3],
            strides: [2, 2],
            padding: Padding::Same,
            depth_multiplier: 2,
            activation: Activation::Swish,
            kernel_init: init,
        })
        .push(Layer::GlobalAveragePooling2D)
        .push(Layer::Dropout { rate: 0.1 })
        .push(Layer::dense(3, Activation::Softmax))
        .compile(Loss::SparseCategoricalCrossentropy, &Optimizer::adam(1e-2), SessionOptions::default())
        .unwrap();
    let (x, y) = random_batch(8, 8, 3, 4);
    let losses: Vec<f64> = (1..=10).map(|step| model.train_step(x.clone(), y.clone(), step).unwrap()).collect();
    assert!(losses[9] < losses[0], "{losses:?}");
    let mean = model.session().resources().lookup("localhost/batch_normalization/moving_mean").unwrap();
    assert!(mean.read().unwrap().as_slice::<f32>().unwrap().iter().any(|&m| m != 0.0), "moving mean updated");
}
