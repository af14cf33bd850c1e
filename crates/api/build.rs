//! Compiles `api/proto/trainyard/v1alpha1/*.proto` with protox (no system
//! `protoc`) into the messages, the server and a client, and writes the
//! file descriptor set that server reflection serves.

use std::path::PathBuf;

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../api/proto");
    let file = "trainyard/v1alpha1/scheduler.proto";
    println!("cargo:rerun-if-changed={}", root.join(file).display());
    let fds = protox::compile([file], [&root])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("trainyard_descriptor.bin"), fds.encode_to_vec())?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        // The client is generic over its channel; no `connect` helper (it
        // would need tonic's transport feature).
        .build_transport(false)
        .compile_fds(fds)?;
    ui_files(&out)
}

/// `ui_files.rs`: every file under `ui/` (the dashboard) as
/// `(path under /ui/, content type, include_str!(...))`, sorted by path.
fn ui_files(out: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("ui");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        println!("cargo:rerun-if-changed={}", dir.display());
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut code = String::from("&[\n");
    for f in files {
        let rel = f.strip_prefix(&root)?.to_string_lossy().replace('\\', "/");
        let kind = match f.extension().and_then(|e| e.to_str()) {
            Some("html") => "text/html; charset=utf-8",
            Some("js") => "text/javascript; charset=utf-8",
            Some("css") => "text/css; charset=utf-8",
            Some("svg") => "image/svg+xml",
            Some("json") => "application/json",
            _ => continue,
        };
        code.push_str(&format!(
            "    ({rel:?}, {kind:?}, include_str!({:?})),\n",
            f.display().to_string()
        ));
    }
    code.push_str("]\n");
    std::fs::write(out.join("ui_files.rs"), code)?;
    Ok(())
}
