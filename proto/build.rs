//! Generates the tonic/prost code with a vendored protoc, so no system protoc is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY: build scripts are single-threaded; nothing else reads the environment here.
    unsafe { std::env::set_var("PROTOC", protoc) };
    tonic_prost_build::configure()
        .codec_path("crate::codec::WhipCodec")
        .file_descriptor_set_path(
            std::path::PathBuf::from(std::env::var("OUT_DIR")?).join("whip_descriptor.bin"),
        )
        .compile_protos(&["proto/whip.proto"], &["proto"])?;
    println!("cargo:rerun-if-changed=proto/whip.proto");
    Ok(())
}
