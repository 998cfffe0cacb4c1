//! Generates the gRPC server of `totoc serve` (the Open Inference Protocol's `inference.GRPCInferenceService`)
//! from `src/serve/proto/grpc_predict_v2.proto`, with protox (pure Rust, no protoc) and tonic-prost-build.
fn main() {
    println!("cargo:rerun-if-changed=src/serve/proto/grpc_predict_v2.proto");
    let fds = protox::compile(["grpc_predict_v2.proto"], ["src/serve/proto"])
        .expect("src/serve/proto/grpc_predict_v2.proto must compile");
    // The codec counts every request message before prost builds it (src/serve/codec.rs).
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(true)
        .codec_path("crate::serve::codec::BoundedCodec")
        // an answer's parameters (engine, engine_sha256, the sampler's values) in one order: the same answer is
        // the same bytes (prost's default HashMap encodes them in a random order)
        .btree_map(".inference.ModelInferResponse.parameters")
        .compile_fds(fds)
        .expect("tonic-prost-build must generate the inference service");
}
