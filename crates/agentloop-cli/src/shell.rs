//! Fitting the shell: `agentloop completions bash|zsh|fish|elvish|powershell` prints a
//! completion script and `agentloop man` the man page (roff), both generated from the clap
//! definition in [`crate::cli`], so they never fall behind a new flag.

use std::io::Write;

use clap::CommandFactory;

use crate::cli::{Cli, CompletionsArgs};
use crate::error::Failure;

fn write_out(bytes: &[u8]) -> Result<(), Failure> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(bytes)
        .and_then(|()| stdout.flush())
        .map_err(|e| Failure::new(format!("cannot write to standard output: {e}")))
}

/// `agentloop completions SHELL`.
pub fn completions(args: CompletionsArgs) -> Result<(), Failure> {
    let mut command = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "agentloop", &mut script);
    write_out(&script)
}

/// `agentloop man`.
pub fn man() -> Result<(), Failure> {
    let mut page = Vec::new();
    clap_mangen::Man::new(Cli::command())
        .render(&mut page)
        .map_err(|e| Failure::new(format!("cannot render the man page: {e}")))?;
    write_out(&page)
}
