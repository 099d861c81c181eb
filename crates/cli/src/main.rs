//! `ferroflow`: run, convert and inspect TensorFlow graphs; run the demo.
use clap::{Parser, Subcommand};

/// `println!` that ignores a closed stdout (e.g. piped into `head`) instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

mod commands;
mod interrupt;
mod load;
mod world;

use commands::*;

#[derive(Parser)]
#[command(name = "ferroflow", version, about = "A TensorFlow-class dataflow system in Rust")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The subcommands; each one's help is its arguments' doc comment.
#[derive(Subcommand)]
enum Command {
    Run(run::RunArgs),
    Optimize(optimize::OptimizeArgs),
    MergePartitions(merge_partitions::MergePartitionsArgs),
    Tensorboard(tensorboard::TensorboardArgs),
    Convert(convert::ConvertArgs),
    Inspect(inspect::InspectArgs),
    InspectCheckpoint(inspect_checkpoint::InspectCheckpointArgs),
    Mnist(mnist::MnistArgs),
    AllreduceBench(allreduce_bench::AllreduceBenchArgs),
    Ops(ops::OpsArgs),
    Pipeline(pipeline::PipelineArgs),
    Profile(profile::ProfileArgs),
    Flowers(flowers::FlowersArgs),
    Benchmark(benchmark::BenchmarkArgs),
    Demo(demo::DemoArgs),
    Fit(fit::FitArgs),
    KerasApp(keras_app::KerasAppArgs),
}

fn main() {
    let result = match Cli::parse().command {
        Command::Run(args) => run::run(args),
        Command::Optimize(args) => optimize::run(args),
        Command::MergePartitions(args) => merge_partitions::run(args),
        Command::Tensorboard(args) => tensorboard::run(args),
        Command::Convert(args) => convert::run(args),
        Command::Inspect(args) => inspect::run(args),
        Command::InspectCheckpoint(args) => inspect_checkpoint::run(args),
        Command::Mnist(args) => mnist::run(args),
        Command::AllreduceBench(args) => allreduce_bench::run(args),
        Command::Ops(args) => ops::run(args),
        Command::Pipeline(args) => pipeline::run(args),
        Command::Profile(args) => profile::run(args),
        Command::Flowers(args) => flowers::run(args),
        Command::Benchmark(args) => benchmark::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Fit(args) => fit::run(args),
        Command::KerasApp(args) => keras_app::run(args),
    };
    if let Err(e) = result {
        eprintln!("error: {}", one_line(&e));
        std::process::exit(if interrupt::interrupted() { interrupt::EXIT_INTERRUPTED } else { 1 });
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
    printable(&msg)
}

/// `text` safe for a terminal on one line: line breaks become spaces and other control
/// characters (a NUL in a file name, an escape sequence in a graph) are shown escaped.
fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' | '\r' | '\t' => out.push(' '),
            c if c.is_control() => out.extend(c.escape_default()),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn error_lines_escape_control_characters() {
        assert_eq!(super::printable("a\nb\0c\u{1b}[31m"), "a b\\u{0}c\\u{1b}[31m");
    }
}
