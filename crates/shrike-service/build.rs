//! Compiles `proto/shrike/v1/shrike.proto` (kept at the workspace root, beside the code that
//! serves it) with protox, so a build needs no protoc. The encoded descriptor set is kept for
//! server reflection.

use prost::Message as _;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let file = root.join("shrike/v1/shrike.proto");
    println!("cargo:rerun-if-changed={}", file.display());
    let fds = protox::compile([&file], [&root])?;
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("shrike_v1_descriptor.bin"), fds.encode_to_vec())?;
    tonic_prost_build::configure().build_client(true).build_server(true).compile_fds(fds)?;
    Ok(())
}
