//! The model API on the bundled MNIST sample: a `Sequential` MLP (or, with `--cnn`, a small
//! CNN) trained with `fit` — progress line with steps/s and loss, validation after each epoch.
//! `cargo run --release -p ferroflow --example sequential_mnist -- [--cnn] [--epochs N]`
use ferroflow::runtime::SessionOptions;
use ferroflow::train::layers::{Activation, Padding};
use ferroflow::train::mnist;
use ferroflow::train::model::{FitOptions, Layer, Loss, Sequential};
use ferroflow::train::optimizers::Optimizer;
use ferroflow::train::Initializer;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cnn = args.iter().any(|a| a == "--cnn");
    let epochs = match args.iter().position(|a| a == "--epochs") {
        Some(i) => args.get(i + 1).ok_or("--epochs needs a value")?.parse()?,
        None => 3,
    };
    let m = mnist::load(&mnist::bundled_dir())?;
    let (mut xtr, mut xte) = (m.train.images.clone(), m.test.images.clone());
    let model = if cnn {
        xtr = xtr.reshaped(&[m.train.len(), 28, 28, 1])?;
        xte = xte.reshaped(&[m.test.len(), 28, 28, 1])?;
        Sequential::new(&[28, 28, 1])
            .seed(1)
            .push(Layer::Conv2D {
                filters: 16,
                kernel: [3, 3],
                strides: [1, 1],
                padding: Padding::Same,
                activation: Activation::Relu,
                kernel_init: Initializer::GlorotUniform { seed: None },
            })
            .push(Layer::MaxPool2D { pool: [2, 2], strides: [2, 2], padding: Padding::Valid })
            .push(Layer::Flatten)
            .push(Layer::Dropout { rate: 0.2 })
            .push(Layer::dense(10, Activation::Softmax))
    } else {
        Sequential::new(&[784])
            .seed(1)
            .push(Layer::dense(256, Activation::Relu))
            .push(Layer::Dropout { rate: 0.2 })
            .push(Layer::dense(10, Activation::Softmax))
    };
    let model =
        model.compile(Loss::SparseCategoricalCrossentropy, &Optimizer::adam(1e-3), SessionOptions::default())?;
    let opts = FitOptions::default().with_epochs(epochs).with_batch_size(100);
    let hist = model.fit(&xtr, &m.train.sparse_labels(), &opts, Some((&xte, &m.test.sparse_labels())))?;
    let (loss, acc) = *hist.validation.last().ok_or("no epochs ran")?;
    println!("val_loss={loss:.4} val_accuracy={:.4} steps_per_sec={:.1}", acc.unwrap_or(f64::NAN), hist.steps_per_sec);
    Ok(())
}
