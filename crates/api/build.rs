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
    Ok(())
}
