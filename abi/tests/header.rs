//! The C header: regenerated with cbindgen and compared with the checked-in
//! `include/stagger.h` (stale fails, `STAGGER_BLESS=1` rewrites it); then a small C program
//! that includes it and links the native library runs a version check and a whole
//! session_new / step round, proving the header is what the library exports.

use std::path::{Path, PathBuf};
use std::process::Command;

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn generated() -> String {
    let dir = manifest_dir();
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("abi/cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(dir.join("src/codes.rs"))
        .with_src(dir.join("src/ffi.rs"))
        .generate()
        .expect("cbindgen reads the ABI");
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).expect("UTF-8")
}

#[test]
fn the_checked_in_header_is_what_cbindgen_generates_now() {
    let path = manifest_dir().join("include/stagger.h");
    let now = generated();
    if std::env::var_os("STAGGER_BLESS").is_some() {
        std::fs::write(&path, &now).unwrap();
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == now,
        "abi/include/stagger.h is stale: regenerate it with `STAGGER_BLESS=1 cargo test -p stagger-abi --test header` \
         and commit it"
    );
    for name in
        ["stagger_abi_version", "stagger_step", "STAGGER_ERR_MALFORMED", "STAGGER_EVENT_REQUEST_REFRESH", "StaggerBuf"]
    {
        assert!(now.contains(name), "{name} is in the header");
    }
}

/// The directory of the native library this test was built with: `target/<profile>/deps`,
/// beside the test itself (`cargo test -p stagger-abi` also copies it up to
/// `target/<profile>`; `cargo test --workspace` does not).
fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().to_path_buf()
}

#[test]
fn a_c_program_includes_the_header_links_the_library_and_runs_a_session() {
    let Some(cc) = ["cc", "gcc", "clang"].into_iter().find(|cc| Command::new(cc).arg("--version").output().is_ok())
    else {
        assert!(std::env::var_os("CI").is_none(), "CI has a C compiler");
        eprintln!("skipped: no C compiler (cc, gcc, clang) on this machine");
        return;
    };
    let lib = library_dir();
    assert!(
        lib.join(format!("{}stagger_abi{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX)).exists(),
        "the cdylib next to the tests in {}",
        lib.display()
    );
    let out = std::env::temp_dir().join(format!("stagger-abi-c-{}", std::process::id()));
    let built = Command::new(cc)
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&out)
        .arg(manifest_dir().join("tests/c/roundtrip.c"))
        .arg("-I")
        .arg(manifest_dir().join("include"))
        .arg("-L")
        .arg(&lib)
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-lstagger_abi")
        .output()
        .expect("the C compiler runs");
    assert!(built.status.success(), "cc failed:\n{}", String::from_utf8_lossy(&built.stderr));
    let ran = Command::new(&out).output().expect("the C program runs");
    let _ = std::fs::remove_file(&out);
    let stdout = String::from_utf8_lossy(&ran.stdout);
    assert!(ran.status.success(), "the C program failed:\n{stdout}\n{}", String::from_utf8_lossy(&ran.stderr));
    assert!(stdout.contains("dial conn 1 to b1:9092"), "{stdout}");
    assert!(stdout.contains("config error: seeds"), "{stdout}");
}
