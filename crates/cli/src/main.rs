//! `ferroflow`: run, convert and inspect TensorFlow graphs; run the demo.
use clap::{ArgAction, CommandFactory, Parser, Subcommand};

/// `println!` for the CLI's stdout: a closed stdout (the command piped into `head`) ends the
/// process quietly with status 0 instead of panicking ([`output`]).
macro_rules! out {
    () => {
        $crate::output::print_str("\n")
    };
    ($($arg:tt)*) => {
        $crate::output::print(format_args!("{}\n", format_args!($($arg)*)))
    };
}

mod commands;
mod interrupt;
mod load;
mod logging;
mod output;
mod world;

use commands::*;

/// Run, inspect, convert, freeze, optimize, profile and benchmark TensorFlow graphs,
/// checkpoints, SavedModels and Keras model files; train TensorFlow-style models.
#[derive(Parser)]
#[command(name = "ferroflow", version, disable_version_flag = true)]
struct Cli {
    /// Print errors only (the library's progress and warnings on stderr are left out).
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    quiet: bool,
    /// Print more of the library's diagnostics on stderr, each with its level and source: -v
    /// debug, -vv trace (by default: progress and warnings).
    #[arg(short, long, global = true, action = ArgAction::Count)]
    verbose: u8,
    /// Print the version (`ferroflow info` adds the build's features, CPU features and codecs).
    #[arg(short = 'V', long, action = ArgAction::Version)]
    version: Option<bool>,
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
    Info(info::InfoArgs),
    Serve(serve::ServeArgs),
    Completions(completions::CompletionsArgs),
}

fn main() {
    output::install_panic_hook();
    let cli = Cli::parse_from(serve::drop_ignored_flags(std::env::args_os().collect()));
    logging::init(cli.quiet, cli.verbose);
    let result = match cli.command {
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
        Command::Info(args) => info::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Completions(args) => completions::run(args, Cli::command()),
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
    fn the_command_line_is_consistent() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }

    #[test]
    fn error_lines_escape_control_characters() {
        assert_eq!(super::printable("a\nb\0c\u{1b}[31m"), "a b\\u{0}c\\u{1b}[31m");
    }
}
