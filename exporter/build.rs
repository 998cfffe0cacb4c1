//! Compiles the ONNX proto subset with protox (pure Rust, no protoc) and prost-build.
fn main() {
    println!("cargo:rerun-if-changed=proto/onnx.proto");
    let fds = protox::compile(["onnx.proto"], ["proto"]).expect("proto/onnx.proto must compile");
    prost_build::Config::new().compile_fds(fds).expect("prost-build must generate the ONNX types");
}
