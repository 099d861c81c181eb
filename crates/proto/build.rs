//! Compiles `protos/` with protox (pure Rust, no protoc binary) and generates prost types.
use prost::Message;

fn main() {
    let files = [
        "ferroflow/framework.proto",
        "ferroflow/runtime.proto",
        "ferroflow/summary.proto",
        "ferroflow/checkpoint.proto",
        "ferroflow/meta_graph.proto",
        "ferroflow/example.proto",
        "ferroflow/xplane.proto",
        "ferroflow/serving.proto",
    ];
    for f in &files {
        println!("cargo:rerun-if-changed=protos/{f}");
    }
    let fds = protox::compile(files, ["protos"]).expect("compile .proto files");
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap());
    std::fs::write(out.join("descriptor.bin"), fds.encode_to_vec()).unwrap();
    let mut config = prost_build::Config::new();
    // Sorted maps give deterministic, canonical bytes.
    config.btree_map(["."]);
    // Boxed oneof variants keep AttrValue small: big graphs parse 2-3x faster.
    for v in ["list", "shape", "tensor", "func"] {
        config.boxed(format!(".tensorflow.AttrValue.value.{v}"));
    }
    config.enable_type_names();
    config.compile_fds(fds).expect("generate prost code");
}
