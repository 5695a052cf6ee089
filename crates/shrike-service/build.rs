//! Compiles the protos kept at the workspace root with protox, so a build needs no protoc:
//! `proto/shrike/v1/shrike.proto` (Shrike's own API) and `proto/nighthawk/` (Nighthawk's
//! service and request-source APIs, see its README). Both encoded descriptor sets are kept,
//! for server reflection and (Nighthawk's) for reading and writing its messages dynamically.

use prost::Message as _;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);

    let file = root.join("shrike/v1/shrike.proto");
    println!("cargo:rerun-if-changed={}", file.display());
    let fds = protox::compile([&file], [&root])?;
    std::fs::write(out.join("shrike_v1_descriptor.bin"), fds.encode_to_vec())?;
    tonic_prost_build::configure().build_client(true).build_server(true).compile_fds(fds)?;

    let nighthawk = root.join("nighthawk");
    println!("cargo:rerun-if-changed={}", nighthawk.display());
    let files = [
        "api/client/service.proto",
        "api/request_source/service.proto",
        "api/request_source/request_source_plugin.proto",
        "api/rate_limiter/linear_ramping_rate_limiter.proto",
    ];
    let fds = protox::compile(files, [&nighthawk])?;
    std::fs::write(out.join("nighthawk_descriptor.bin"), fds.encode_to_vec())?;
    // The execution messages stay raw bytes in Rust: the service reads them against the
    // descriptors (prost-reflect), which keeps fields this copy of the API does not declare,
    // so a run naming one is refused by name rather than run without it.
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .extern_path(".nighthawk.client.ExecutionRequest", "crate::nighthawk::wire::Raw")
        .extern_path(".nighthawk.client.ExecutionResponse", "crate::nighthawk::wire::Raw")
        .compile_fds(fds)?;
    Ok(())
}
