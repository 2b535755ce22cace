//! Shares the core's scenario tests with the wasm32 test `tests/core_scenarios.rs`.
//!
//! `include!` cannot take a file with inner doc comments or inner attributes, and the core's
//! `tests/scenarios.rs` starts with `//!` docs. So this copies it to `OUT_DIR` without its
//! leading inner doc comments and inner attributes, with `#[path = "…"]` module paths made
//! absolute (they are relative to the file, and the copy lives elsewhere) — nothing else
//! changes, and the copy is refreshed whenever the original changes, so there is one source
//! of truth.

use std::path::PathBuf;
use std::{env, fs};

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let tests = manifest.join("../../tests");
    let source = tests.join("scenarios.rs");
    println!("cargo:rerun-if-changed={}", source.display());
    println!("cargo:rerun-if-changed={}", tests.join("support").display());
    println!("cargo:rerun-if-changed=build.rs");
    // Missing (e.g. a packaged crate without the workspace): the wasm test then runs nothing.
    let text = fs::read_to_string(&source).unwrap_or_default();
    let mut in_header = true;
    let tests = tests.canonicalize().unwrap_or(tests);
    let relative = "#[path = \"";
    let absolute = format!("#[path = \"{}/", tests.display());
    let body: Vec<String> = text
        .lines()
        .filter(|line| {
            let trimmed = line.trim_start();
            if in_header && (trimmed.starts_with("//!") || trimmed.starts_with("#![")) {
                return false;
            }
            if !trimmed.is_empty() {
                in_header = false;
            }
            true
        })
        .map(|line| line.replacen(relative, &absolute, 1))
        .collect();
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("core_scenarios.rs");
    fs::write(out, body.join("\n") + "\n").expect("write the shared scenarios");
}
