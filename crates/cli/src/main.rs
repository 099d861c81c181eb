//! `ferroflow`: run, convert and inspect TensorFlow graphs; run the demo.
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use ferroflow::prelude::*;
use ferroflow::tensor::npy;

/// `println!` that ignores a closed stdout (e.g. piped into `head`) instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

#[derive(Parser)]
#[command(name = "ferroflow", version, about = "A TensorFlow-class dataflow system in Rust")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a GraphDef (.pb binary or .pbtxt text) and print or save the fetched tensors.
    Run {
        /// The graph file.
        graph: PathBuf,
        /// An .npz whose arrays are fed by name (keys are tensor names such as `x:0`).
        #[arg(long)]
        inputs: Option<PathBuf>,
        /// Feed one tensor from an .npy file: NAME=FILE.npy (repeatable).
        #[arg(long = "feed", value_name = "NAME=FILE.npy")]
        feeds: Vec<String>,
        /// A tensor to fetch, e.g. `Identity:0` (repeatable, at least one unless --target).
        #[arg(long = "fetch", value_name = "NAME")]
        fetches: Vec<String>,
        /// A node to run without fetching its outputs (repeatable).
        #[arg(long = "target", value_name = "NODE")]
        targets: Vec<String>,
        /// Write the fetched tensors to this .npz, each under its fetch name as given.
        #[arg(long)]
        output: Option<PathBuf>,
        /// Threads running independent nodes (0 = one per core).
        #[arg(long, default_value_t = 0)]
        inter_op_threads: usize,
        /// Threads one large kernel may use (0 = one per core).
        #[arg(long, default_value_t = 0)]
        intra_op_threads: usize,
        /// Fail a step whose `While` loop runs more iterations than this (0 = no limit).
        #[arg(long, default_value_t = 0)]
        max_loop_iterations: u64,
    },
    /// Import a GraphDef (validating it) and write it back: .pbtxt as text, otherwise binary.
    Convert {
        /// Input graph (.pb or .pbtxt).
        input: PathBuf,
        /// Output graph (.pb or .pbtxt).
        output: PathBuf,
    },
    /// List a graph's nodes with their ops, inputs, dtypes and inferred shapes.
    Inspect {
        /// The graph file.
        graph: PathBuf,
    },
    /// Run the demo: seed 000's graph built with the Rust API, then a bundled TensorFlow MLP.
    Demo,
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run {
            graph,
            inputs,
            feeds,
            fetches,
            targets,
            output,
            inter_op_threads,
            intra_op_threads,
            max_loop_iterations,
        } => {
            let opts = SessionOptions { inter_op_threads, intra_op_threads, max_loop_iterations };
            run(&graph, inputs.as_deref(), &feeds, &fetches, &targets, output.as_deref(), opts)
        }
        Command::Convert { input, output } => convert(&input, &output),
        Command::Inspect { graph } => inspect(&graph),
        Command::Demo => demo(),
    };
    if let Err(e) = result {
        eprintln!("error: {}", one_line(&e));
        std::process::exit(1);
    }
}

/// The error and its causes on one line, skipping causes whose text the line already holds
/// (library errors often print their source inline).
fn one_line(e: &anyhow::Error) -> String {
    let mut msg = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if msg.contains(&text) {
            continue;
        }
        if !msg.is_empty() {
            msg.push_str(": ");
        }
        msg.push_str(&text);
    }
    msg.replace('\n', " ")
}

fn print_nodes(g: &Graph) {
    for n in g.nodes() {
        let inputs: Vec<String> = n.inputs.iter().map(|o| g.output_name(*o)).collect();
        out!("  {} = {}({})", n.name, n.op, inputs.join(", "));
    }
}

fn load(path: &Path) -> Result<Graph> {
    ferroflow::load_graph(path).with_context(|| format!("loading graph {}", path.display()))
}

fn read_feeds(inputs: Option<&Path>, feeds: &[String]) -> Result<Vec<(String, Tensor)>> {
    let mut out = Vec::new();
    if let Some(p) = inputs {
        out.extend(npy::read_npz(p)?);
    }
    for f in feeds {
        let Some((name, file)) = f.split_once('=') else {
            bail!("--feed '{f}': expected NAME=FILE.npy");
        };
        out.push((name.to_string(), npy::read_npy(Path::new(file))?));
    }
    Ok(out)
}

fn print_tensor(name: &str, t: &Tensor) {
    out!("{name}: {} {:?} {}", t.dtype(), t.dims(), t.preview(10));
}

fn run(
    graph: &Path,
    inputs: Option<&Path>,
    feeds: &[String],
    fetches: &[String],
    targets: &[String],
    output: Option<&Path>,
    opts: SessionOptions,
) -> Result<()> {
    if fetches.is_empty() && targets.is_empty() {
        bail!("nothing to run: give at least one --fetch NAME or --target NODE");
    }
    let g = load(graph)?;
    let feeds = read_feeds(inputs, feeds)?;
    let sess = Session::new(g, opts)?;
    let feed_refs: Vec<(&str, Tensor)> = feeds.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let fetch_refs: Vec<&str> = fetches.iter().map(String::as_str).collect();
    let target_refs: Vec<&str> = targets.iter().map(String::as_str).collect();
    let results = sess.run(&feed_refs, &fetch_refs, &target_refs)?;
    for (name, t) in fetches.iter().zip(&results) {
        print_tensor(name, t);
    }
    if let Some(out) = output {
        let arrays: Vec<(String, Tensor)> = fetches.iter().cloned().zip(results).collect();
        npy::write_npz(out, &arrays)?;
        out!("wrote {} tensor(s) to {}", arrays.len(), out.display());
    }
    Ok(())
}

fn convert(input: &Path, output: &Path) -> Result<()> {
    let g = load(input)?;
    ferroflow::graph::io::write_graph_def(output, &g.to_graph_def())?;
    out!("{}: {} nodes -> {}", input.display(), g.len(), output.display());
    Ok(())
}

fn inspect(path: &Path) -> Result<()> {
    let g = load(path)?;
    let shapes = ferroflow::ops::infer_shapes(&g)?;
    out!("{}: {} nodes, {} functions", path.display(), g.len(), g.library.function.len());
    for (id, n) in g.nodes().iter().enumerate() {
        let inputs: Vec<String> = n.inputs.iter().map(|o| g.output_name(*o)).collect();
        let outs: Vec<String> = n.types.outputs.iter().zip(&shapes[id]).map(|(t, s)| format!("{t}{s}")).collect();
        out!("  {} = {}({}) -> {}", n.name, n.op, inputs.join(", "), outs.join(", "));
    }
    Ok(())
}

/// The bundled TensorFlow MLP fixture: graph, inputs and TensorFlow's outputs.
const MLP_PB: &[u8] = include_bytes!("../../../fixtures/tf/mlp.pb");
const MLP_INPUTS: &[u8] = include_bytes!("../../../fixtures/tf/mlp.inputs.npz");
const MLP_EXPECTED: &[u8] = include_bytes!("../../../fixtures/tf/mlp.expected.npz");

fn demo() -> Result<()> {
    out!("== Seed 000: a=1, b=2, c=a+b, d=a+b, out=c*d, built with the Rust Scope API");
    let (graph, fetch) = ferroflow::testing::graphs::seed_000()?;
    print_nodes(&graph);
    let sess = Session::new(graph, SessionOptions::default())?;
    print_tensor(&fetch, &sess.run(&[], &[&fetch], &[])?[0]);

    out!("\n== A frozen TensorFlow 2 MLP (fixtures/tf/mlp.pb), run by ferroflow and compared with TensorFlow's output");
    let def = ferroflow::proto::decode(MLP_PB, "mlp.pb")?;
    let g = ferroflow::ops::import_graph_def(&def)?;
    let ops: std::collections::BTreeSet<&str> = g.nodes().iter().map(|n| n.op.as_str()).collect();
    out!("{} nodes, ops: {}", g.len(), ops.into_iter().collect::<Vec<_>>().join(", "));
    let inputs = npy::read_npz_from(std::io::Cursor::new(MLP_INPUTS), "mlp.inputs.npz")?;
    let expected = npy::read_npz_from(std::io::Cursor::new(MLP_EXPECTED), "mlp.expected.npz")?;
    let sess = Session::new(g, SessionOptions::default())?;
    let feeds: Vec<(&str, Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let fetches: Vec<&str> = expected.iter().map(|(n, _)| n.as_str()).collect();
    let results = sess.run(&feeds, &fetches, &[])?;
    for ((name, want), got) in expected.iter().zip(&results) {
        print_tensor(name, got);
        let (g, w) = (got.as_slice::<f32>()?, want.as_slice::<f32>()?);
        let max_err = g.iter().zip(w).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        out!("  max |ferroflow - TensorFlow| = {max_err:.3e} over {} values", w.len());
    }
    Ok(())
}
