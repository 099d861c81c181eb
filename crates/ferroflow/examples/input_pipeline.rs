//! `input_pipeline`'s prefetch experiment: a small CNN trained from the flowers pipeline
//! (read_file → decode_jpeg → resize, batch) written the simple way — a serial map — once
//! without and once with `prefetch(AUTOTUNE)`, then with the next step,
//! `map(num_parallel_calls=AUTOTUNE)` plus prefetch; alternating rounds. Prints the mean step
//! time (input wait included) of each and the gains. In TensorFlow, prefetch alone gave
//! about 30%.
//!
//! `cargo run --release -p ferroflow --example input_pipeline -- [--dir DIR] [--size 64] [--steps 30] [--rounds 2]`
//! (without --dir it generates 5 × 40 flowers-like JPEGs in a temporary directory).
use ferroflow::data::{Budget, Dataset, AUTOTUNE};
use ferroflow::runtime::SessionOptions;
use ferroflow::tensor::Tensor;
use ferroflow::train::layers::{Activation, Padding};
use ferroflow::train::model::{FitOptions, Layer, Loss, Sequential};
use ferroflow::train::optimizers::Optimizer;
use ferroflow::train::Initializer;
use ferroflow::workflows::flowers::{self, FlowersOptions};
use ferroflow::workflows::input_pipeline::{self, PipelineOptions};

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> T {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let size: usize = arg(&args, "--size", 64);
    let steps: u64 = arg(&args, "--steps", 30);
    let rounds: usize = arg(&args, "--rounds", 2);
    let tmp;
    let dir = match args.iter().position(|a| a == "--dir") {
        Some(i) => std::path::PathBuf::from(args.get(i + 1).ok_or("--dir needs a value")?),
        None => {
            tmp = std::env::temp_dir().join(format!("ferroflow-flowers-{}", std::process::id()));
            flowers::generate(&tmp, &FlowersOptions { per_class: 40, ..Default::default() })?;
            tmp.clone()
        }
    };
    let conv = |filters| Layer::Conv2D {
        filters,
        kernel: [3, 3],
        strides: [1, 1],
        padding: Padding::Same,
        activation: Activation::Relu,
        kernel_init: Initializer::GlorotUniform { seed: None },
    };
    let pool = || Layer::MaxPool2D { pool: [2, 2], strides: [2, 2], padding: Padding::Valid };
    let mut figures: Vec<(&str, f64, f64)> = Vec::new();
    let configs =
        [("serial map", false, false), ("serial map + prefetch", false, true), ("parallel map + prefetch", true, true)];
    for round in 0..rounds {
        for (name, parallel, prefetch) in configs {
            let options = PipelineOptions {
                size,
                batch: 32,
                parallel: parallel.then_some(AUTOTUNE),
                prefetch: prefetch.then_some(AUTOTUNE),
                budget: Budget::default().with_log(false),
                ..Default::default()
            };
            let (ds, classes) = input_pipeline::pipeline(&dir, &options)?;
            // Pixels scaled to [0, 1]; the model's sparse labels are int64.
            let ds: Dataset<(Tensor, Tensor)> = ds
                .map(|(x, y): (Tensor, Tensor)| {
                    let scaled: Vec<f32> = x.as_slice::<f32>()?.iter().map(|v| v / 255.0).collect();
                    let y: Vec<i64> = y.as_slice::<i32>()?.iter().map(|&v| v as i64).collect();
                    let n = y.len();
                    Ok((Tensor::from_vec(x.dims(), scaled)?, Tensor::from_vec(&[n], y)?))
                })
                .repeat(None);
            let model = Sequential::new(&[size, size, 3])
                .seed(1)
                .push(conv(16))
                .push(pool())
                .push(conv(32))
                .push(pool())
                .push(Layer::Flatten)
                .push(Layer::dense(classes.len(), Activation::Softmax))
                .compile(Loss::SparseCategoricalCrossentropy, &Optimizer::adam(1e-3), SessionOptions::default())?;
            let opts = FitOptions::default().with_epochs(1).with_verbose(false);
            let h = model.fit_dataset(&ds, &opts, Some(steps), None)?;
            // The first steps warm up the pipeline and the tuner: measure the rest.
            let tail = &h.step_seconds[h.step_seconds.len() / 3..];
            let step = tail.iter().sum::<f64>() / tail.len() as f64;
            println!(
                "round {} {name:<24}: {:.1} ms/step (input wait {:.0}% of the loop), loss {:.3}",
                round + 1,
                step * 1e3,
                h.input_fraction() * 100.0,
                h.history.loss.last().copied().unwrap_or(f64::NAN)
            );
            figures.push((name, step, h.input_fraction()));
        }
    }
    let mean = |name: &str| {
        let v: Vec<(f64, f64)> = figures.iter().filter(|f| f.0 == name).map(|f| (f.1, f.2)).collect();
        let n = v.len() as f64;
        (v.iter().map(|f| f.0).sum::<f64>() / n, v.iter().map(|f| f.1).sum::<f64>() / n)
    };
    let (off, off_wait) = mean(configs[0].0);
    for (name, _, _) in configs {
        let (t, wait) = mean(name);
        println!(
            "{name:<24}: {:.1} ms/step, input wait {:.0}%, {:.0}% faster than the serial map without prefetch (input wait {:.0}%)",
            t * 1e3,
            wait * 100.0,
            (off / t - 1.0) * 100.0,
            off_wait * 100.0
        );
    }
    Ok(())
}
