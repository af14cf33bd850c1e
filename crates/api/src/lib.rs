//! Trainyard's gRPC API, `trainyard.v1alpha1.Scheduler`.

/// The generated messages, server and client.
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod pb {
    tonic::include_proto!("trainyard.v1alpha1");
}

/// The encoded file descriptor set of the protos, for server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/trainyard_descriptor.bin"));
