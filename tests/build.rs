//! Generates one `#[test]` per scenario file in `scenarios/`, so
//! `cargo test -p trainyard-tests <name>` selects one (the name is the file
//! stem with `-` as `_`, prefixed `scenario_`).

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    files.sort();
    let mut out = String::new();
    let _ = writeln!(out, "/// Every scenario file this build saw.");
    let _ = writeln!(out, "const GENERATED: &[&str] = &{files:?};");
    for f in &files {
        let stem = f.trim_end_matches(".yaml");
        let ident: String = stem
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let _ = writeln!(
            out,
            "#[test]\nfn scenario_{ident}() {{\n    run({f:?});\n}}\n"
        );
    }
    let path =
        Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("scenarios.rs");
    std::fs::write(&path, out).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}
