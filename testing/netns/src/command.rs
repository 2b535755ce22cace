//! Running iproute2 and iptables, with their stderr in the error when they fail.

use std::process::Command;

/// Runs `program args…`; `Err` carries the command line and what it printed.
pub(crate) fn run(program: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(program).args(args).output().map_err(|e| format!("{program}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{program} {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Runs a clean-up command, ignoring failure (the thing may already be gone).
pub(crate) fn quietly(program: &str, args: &[&str]) {
    let _ = run(program, args);
}
