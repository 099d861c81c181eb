//! `traced_functions`: `tf.function` in Rust. Prints cube(2), cube(2.0), the number of concrete
//! functions, collatz(27), collatz(97) and sum_squares_until([0.5, 1.5, 2.0, 3.0, 4.0], 6.0),
//! each run as a traced graph. `--export DIR` also writes the concrete functions of collatz and
//! sum_squares_until as GraphDefs with their function libraries (`collatz.pb`,
//! `sum_squares_until.pb`) and their feed/fetch names (`*.names`), which TensorFlow imports and
//! runs (`scripts/function_interop.py`), and each as a SavedModel (`collatz_saved_model/`,
//! `sum_squares_until_saved_model/`) that `tf.saved_model.load` runs
//! (`scripts/saved_model_interop.py`). `--report` prints what the optimizer did to each of
//! those concrete functions (as `ferroflow optimize --report` does for a GraphDef).
//! `cargo run --release --example traced_functions -- [--export DIR] [--report]`
use ferroflow::tensor::Tensor;
use ferroflow::workflows::traced_functions;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (mut export, mut report) = (None, false);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--export" => {
                let dir = args.next().ok_or_else(|| anyhow::anyhow!("--export needs a directory"))?;
                export = Some(std::path::PathBuf::from(dir));
            }
            "--report" => report = true,
            other => anyhow::bail!("unknown argument '{other}' (usage: traced_functions [--export DIR] [--report])"),
        }
    }
    let (cube, collatz, sum_squares_until) = traced_functions::functions();
    for line in traced_functions::run(&cube, &collatz, &sum_squares_until)? {
        println!("{line}");
    }
    let x = Tensor::from_vec(&[5], vec![0.5f32, 1.5, 2.0, 3.0, 4.0])?;
    if report {
        let c = collatz.concrete_function_keyed(&(), &[Tensor::scalar(27i32)])?;
        let s = sum_squares_until.concrete_function_keyed(&(), &[x.clone(), Tensor::scalar(6.0f32)])?;
        for (name, f) in [("collatz", c), ("sum_squares_until", s)] {
            println!("\noptimizer report for the concrete function {name}:");
            match f.optimizer_report() {
                Some(r) => println!("{}", r.table().trim_end()),
                None => println!("(optimization is off)"),
            }
        }
    }
    if let Some(dir) = export {
        std::fs::create_dir_all(&dir)?;
        let c = collatz.concrete_function_keyed(&(), &[Tensor::scalar(27i32)])?;
        let s = sum_squares_until.concrete_function_keyed(&(), &[x, Tensor::scalar(6.0f32)])?;
        for (name, f) in [("collatz", c), ("sum_squares_until", s)] {
            ferroflow::graph::io::write_graph_def(&dir.join(format!("{name}.pb")), &f.graph_def())?;
            ferroflow::saved_model::save_function(&f, &dir.join(format!("{name}_saved_model")), None)?;
            let (inputs, outputs) = f.names();
            std::fs::write(
                dir.join(format!("{name}.names")),
                format!("{}\n{}\n", inputs.join(" "), outputs.join(" ")),
            )?;
        }
        println!(
            "exported collatz.pb and sum_squares_until.pb (and each as a SavedModel, *_saved_model/) to {}",
            dir.display()
        );
    }
    Ok(())
}
