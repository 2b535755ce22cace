//! The wasm module that `scripts/abi-wasm.sh` built (its path in `STAGGER_ABI_WASM`;
//! `scripts/test.sh` builds it and sets it): no imports at all — a host links nothing, so
//! wazero runs it with no WASI and no host functions — every function of the C header
//! exported with the wasm signature docs/abi.md gives, and no path of the machine that built
//! it inside.

use wasmparser::{ExternalKind, Parser, Payload, TypeRef, ValType};

/// The exports a host calls, with their wasm signatures (wasm32: pointers and `size_t` are
/// `i32`, `u64` is `i64`).
const EXPORTS: [(&str, &[ValType], &[ValType]); 9] = {
    use ValType::{I32, I64};
    [
        ("stagger_abi_version", &[], &[I32]),
        ("stagger_alloc", &[I32], &[I32]),
        ("stagger_free", &[I32, I32], &[]),
        ("stagger_session_new", &[I32, I32, I64, I64], &[I64]),
        ("stagger_last_error", &[I32], &[I32]),
        ("stagger_step", &[I64, I64, I32, I32, I32], &[I32]),
        ("stagger_metadata", &[I64, I32], &[I32]),
        ("stagger_report", &[I64, I32], &[I32]),
        ("stagger_session_free", &[I64], &[I32]),
    ]
};

#[test]
fn the_wasm_module_imports_nothing_and_exports_the_abi() {
    let Some(path) = std::env::var_os("STAGGER_ABI_WASM") else {
        assert!(std::env::var_os("CI").is_none(), "CI builds the module: scripts/test.sh sets STAGGER_ABI_WASM");
        eprintln!("skipped: STAGGER_ABI_WASM is not set (bash scripts/abi-wasm.sh OUT builds the module)");
        return;
    };
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.to_string_lossy()));
    let (mut imports, mut types, mut functions, mut exports, mut memory) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), false);
    for payload in Parser::new(0).parse_all(&bytes) {
        match payload.expect("a valid wasm module") {
            Payload::ImportSection(section) => {
                for import in section.into_imports() {
                    let import = import.unwrap();
                    let what = matches!(import.ty, TypeRef::Func(_)).then_some("function").unwrap_or("other");
                    imports.push(format!("{}::{} ({what})", import.module, import.name));
                }
            }
            Payload::TypeSection(section) => {
                for group in section.into_iter() {
                    for ty in group.unwrap().into_types() {
                        types.push(ty.unwrap_func().clone());
                    }
                }
            }
            Payload::FunctionSection(section) => functions.extend(section.into_iter().map(Result::unwrap)),
            Payload::ExportSection(section) => {
                for export in section {
                    let export = export.unwrap();
                    match export.kind {
                        ExternalKind::Func => exports.push((export.name.to_owned(), export.index)),
                        ExternalKind::Memory => memory |= export.name == "memory",
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    assert_eq!(imports, Vec::<String>::new(), "the module imports nothing");
    assert!(memory, "the memory is exported as `memory`: hosts read and write it");
    for (name, params, results) in EXPORTS {
        let index = exports.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("{name} is exported")).1;
        // No imported functions, so function index i is the module's i-th function.
        let ty = &types[functions[index as usize] as usize];
        assert_eq!((ty.params(), ty.results()), (params, results), "{name}'s signature");
    }
    let extra: Vec<&str> =
        exports.iter().map(|(n, _)| n.as_str()).filter(|n| !EXPORTS.iter().any(|e| e.0 == *n)).collect();
    assert_eq!(extra, Vec::<&str>::new(), "no other function is exported");

    let checkout = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_string_lossy().into_owned();
    let home = std::env::var("HOME").unwrap_or_default();
    for leak in [checkout.as_str(), home.as_str()].into_iter().filter(|p| p.len() > 1) {
        assert!(!bytes.windows(leak.len()).any(|w| w == leak.as_bytes()), "the module names {leak}");
    }
    eprintln!("{}: {} bytes, no imports", path.to_string_lossy(), bytes.len());
}
