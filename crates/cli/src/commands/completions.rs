//! `ferroflow completions SHELL`: a shell completion script for every subcommand and flag.
use anyhow::Result;
use clap::Args;
use clap_complete::Shell;

/// Print a shell completion script (bash, zsh, fish, powershell or elvish).
///
/// bash: `ferroflow completions bash > ~/.local/share/bash-completion/completions/ferroflow`;
/// zsh: `ferroflow completions zsh > ~/.zfunc/_ferroflow` (with `fpath+=~/.zfunc` before
/// `compinit`); fish: `ferroflow completions fish > ~/.config/fish/completions/ferroflow.fish`.
#[derive(Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    shell: Shell,
}

/// Writes the script for `cli` (the whole command line) to stdout.
pub fn run(args: CompletionsArgs, mut cli: clap::Command) -> Result<()> {
    clap_complete::generate(args.shell, &mut cli, "ferroflow", &mut crate::output::Stdout);
    Ok(())
}
