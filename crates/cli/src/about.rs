//! `trainyard version` and `trainyard completion`: what this binary is,
//! and the shell completion scripts (clap_complete).

use std::io::Write;

use anyhow::Result;
use clap::ValueEnum;

/// The crate's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The git commit the binary was built from, when the build was told
/// (`TRAINYARD_GIT_COMMIT=$(git rev-parse HEAD) cargo build`); a build
/// script asking git would rebuild the binary after every commit.
pub const COMMIT: Option<&str> = option_env!("TRAINYARD_GIT_COMMIT");

#[derive(clap::Args, Debug)]
pub struct VersionArgs {
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = VersionOutput::Text)]
    output: VersionOutput,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum VersionOutput {
    /// `trainyard 0.1.0 (commit abc123)`.
    Text,
    /// `{"version": "0.1.0", "commit": "abc123"}` (commit null when unknown).
    Json,
}

#[derive(clap::Args, Debug)]
pub struct CompletionArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    shell: Shell,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Shell {
    Bash,
    Zsh,
    Fish,
}

/// The commit, when known and not empty.
fn commit() -> Option<&'static str> {
    COMMIT.map(str::trim).filter(|c| !c.is_empty())
}

pub fn version(args: VersionArgs) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match args.output {
        VersionOutput::Text => match commit() {
            Some(c) => writeln!(out, "trainyard {VERSION} (commit {c})")?,
            None => writeln!(out, "trainyard {VERSION}")?,
        },
        VersionOutput::Json => {
            let v = serde_json::json!({"version": VERSION, "commit": commit()});
            writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        }
    }
    Ok(())
}

pub fn completion<C: clap::CommandFactory>(args: CompletionArgs) -> Result<()> {
    let shell = match args.shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    let mut cmd = C::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "trainyard", &mut out);
    std::io::stdout().lock().write_all(&out)?;
    Ok(())
}
