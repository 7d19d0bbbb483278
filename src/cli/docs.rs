//! `settle completions` and `settle man`: from the same command line as the help.

use super::args::{self, command};
use super::common::invalid;
use crate::error::{Error, Result};

/// `settle completions SHELL`: the shell's completion script, from the same command line as
/// the help.
pub(super) fn completions(shell: args::Shell) -> Result<i32> {
    use clap_complete::Shell as S;
    let shell = match shell {
        args::Shell::Bash => S::Bash,
        args::Shell::Zsh => S::Zsh,
        args::Shell::Fish => S::Fish,
    };
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut command(), "settle", &mut out);
    write_stdout(&out)
}

/// `settle man`: the manual page (roff) on stdout; with `--dir DIR`, one page per command there
/// too (settle.1, settle-record.1, ...), as `man settle-record` finds them.
pub(super) fn man_page(dir: Option<&std::path::Path>) -> Result<i32> {
    let failed = |e: std::io::Error| invalid(format!("cannot write the manual pages: {e}"));
    match dir {
        Some(dir) => {
            clap_mangen::generate_to(command(), dir).map_err(failed)?;
            say!("manual pages written to {}", dir.display());
            Ok(0)
        }
        None => {
            let mut out = Vec::new();
            clap_mangen::Man::new(command())
                .render(&mut out)
                .map_err(failed)?;
            write_stdout(&out)
        }
    }
}

pub(super) fn write_stdout(bytes: &[u8]) -> Result<i32> {
    use std::io::Write as _;
    let mut stdout = crate::out::stdout();
    if let Err(e) = stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        crate::stdout_failed(&e);
        return Err(Error::Invalid(format!("cannot write to stdout: {e}")));
    }
    Ok(0)
}
