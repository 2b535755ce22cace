//! Running iproute2 and iptables, with their stderr in the error when they fail.

use std::process::Command;
use std::sync::Mutex;

/// Held while iptables runs: the tests of one binary change the firewall at the same time,
/// and iptables' legacy backend refuses a change while another holds its lock.
static FIREWALL: Mutex<()> = Mutex::new(());

/// Runs `program args…`; `Err` carries the command line and what it printed.
pub(crate) fn run(program: &str, args: &[&str]) -> Result<(), String> {
    let _firewall = (program == "iptables").then(|| FIREWALL.lock().unwrap_or_else(|e| e.into_inner()));
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
