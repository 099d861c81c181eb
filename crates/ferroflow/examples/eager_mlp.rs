//! One training step of an MNIST-sized MLP (784-256-256-10, ReLU, softmax cross-entropy, SGD,
//! batch 100), three ways on the same data: TensorFlow 1 style through a `Session`
//! (`Sequential` + `Model::train_step`), and TensorFlow 2 style eagerly with a
//! `GradientTape` and `Variable`s, then the same tape code traced once as a graph function
//! (`function`, variables captured as resources, gradients by graph autodiff, updates as
//! `AssignSubVariableOp`s). Prints ms per step for each (median of 7 batches):
//! `cargo run --release --example eager_mlp -- [STEPS]`.

use ferroflow::function::eager::{self, Eager};
use ferroflow::function::{apply, function, FunctionError, GradientTape, Traced, Value, Variable};
use ferroflow::prelude::*;
use ferroflow::train::layers::Activation;
use ferroflow::train::model::{Layer, Loss, Sequential};
use ferroflow::train::optimizers::Optimizer;

fn median_ms(steps: usize, step: impl FnMut()) -> f64 {
    ferroflow::testing::median_secs_per_call(3, steps, step) * 1e3
}

fn uniform(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 2.0 * scale
        })
        .collect()
}

fn main() -> anyhow::Result<()> {
    let steps: usize = std::env::args().nth(1).map(|a| a.parse()).transpose()?.unwrap_or(20);
    let x = Tensor::from_vec(&[100, 784], uniform(78_400, 1, 1.0))?;
    let labels: Vec<i64> = (0..100).map(|i| i % 10).collect();
    let y = Tensor::from_vec(&[100], labels)?;

    let model = Sequential::new(&[784])
        .seed(1)
        .push(Layer::dense(256, Activation::Relu))
        .push(Layer::dense(256, Activation::Relu))
        .push(Layer::dense(10, Activation::Softmax))
        .compile(Loss::SparseCategoricalCrossentropy, &Optimizer::gradient_descent(0.01), SessionOptions::default())?;
    let mut n = 0;
    let session = median_ms(steps, || {
        n += 1;
        model.train_step(x.clone(), y.clone(), n).unwrap();
    });

    let sizes = [(784, 256), (256, 256), (256, 10)];
    let vars: Vec<(Variable, Variable)> = sizes
        .iter()
        .enumerate()
        .map(|(i, &(a, b))| {
            let limit = (6.0 / (a + b) as f32).sqrt();
            (
                Variable::new(
                    &format!("w{i}"),
                    Tensor::from_vec(&[a, b], uniform(a * b, 10 + i as u64, limit)).unwrap(),
                ),
                Variable::new(&format!("b{i}"), Tensor::from_vec(&[b], vec![0.0f32; b]).unwrap()),
            )
        })
        .collect();
    let lr = Tensor::scalar(0.01f32);
    let eager_ms = median_ms(steps, || {
        let tape = GradientTape::new();
        let params: Vec<Tensor> = vars.iter().flat_map(|(w, b)| [w.read(), b.read()]).collect();
        let mut h = x.clone();
        for (i, p) in params.chunks(2).enumerate() {
            h = Eager.add_v2(Eager.mat_mul(&h, &p[0]).unwrap(), &p[1]).unwrap();
            if i < 2 {
                h = Eager.relu(&h).unwrap();
            }
        }
        let xent = eager::op("SparseSoftmaxCrossEntropyWithLogits").input(&h).input(&y).run().unwrap();
        let loss = Eager.reduce("Mean", &xent[0], &[0], false).unwrap();
        let refs: Vec<&Tensor> = params.iter().collect();
        let grads = tape.gradient(&loss, &refs).unwrap();
        for ((w, b), g) in vars.iter().zip(grads.chunks(2)) {
            w.assign_sub(&Eager.mul(g[0].as_ref().unwrap(), &lr).unwrap()).unwrap();
            b.assign_sub(&Eager.mul(g[1].as_ref().unwrap(), &lr).unwrap()).unwrap();
        }
    });

    // The same step as a graph function: traced on the first call, then one planned run a step.
    let lr_value = Value::scalar(0.01f32);
    let train_step = function("train_step", |a: &[Value]| -> Result<Vec<Value>, FunctionError> {
        let tape = GradientTape::new();
        let params: Vec<Value> = vars.iter().flat_map(|(w, b)| [w.value(), b.value()]).collect::<Result<_, _>>()?;
        let mut h = a[0].clone();
        for (i, p) in params.chunks(2).enumerate() {
            h = Traced.add_v2(Traced.mat_mul(&h, &p[0])?, &p[1])?;
            if i < 2 {
                h = Traced.relu(&h)?;
            }
        }
        let xent = apply("SparseSoftmaxCrossEntropyWithLogits", &[&h, &a[1]], &[])?;
        let loss = Traced.reduce("Mean", &xent[0], &[0], false)?;
        let refs: Vec<&Value> = params.iter().collect();
        let grads = tape.gradient_values(&loss, &refs)?;
        for ((w, b), g) in vars.iter().zip(grads.chunks(2)) {
            let (gw, gb) = (g[0].as_ref().expect("a gradient"), g[1].as_ref().expect("a gradient"));
            w.assign_sub_value(&Traced.mul(gw, &lr_value)?)?;
            b.assign_sub_value(&Traced.mul(gb, &lr_value)?)?;
        }
        Ok(vec![loss])
    });
    let function_ms = median_ms(steps, || {
        train_step.call(&[x.clone(), y.clone()]).unwrap();
    });
    assert_eq!(train_step.trace_count(), 1);

    println!("MLP 784-256-256-10, batch 100, SGD: ms per training step (median of 7 batches of {steps})");
    println!("  Session (Sequential + train_step)   {session:8.3}");
    println!("  eager + GradientTape + Variables    {eager_ms:8.3}   ({:.2}x the Session's time)", eager_ms / session);
    println!(
        "  the same step as a function         {function_ms:8.3}   ({:.2}x the Session's time)",
        function_ms / session
    );
    Ok(())
}
