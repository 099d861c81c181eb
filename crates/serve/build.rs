//! Generates the gRPC service code (tonic) for TensorFlow Serving's `PredictionService` and
//! `ModelService`. The messages are ferroflow's own (`ferroflow::proto::serving`, compiled by
//! the proto crate), so no `.proto` file is read here and no `protoc` is needed.
use tonic_build::manual::{Builder, Method, Service};

const PACKAGE: &str = "tensorflow.serving";
const MESSAGES: &str = "::ferroflow::proto::serving";

fn method(name: &str, route: &str, input: &str, output: &str) -> Method {
    Method::builder()
        .name(name)
        .route_name(route)
        .input_type(format!("{MESSAGES}::{input}"))
        .output_type(format!("{MESSAGES}::{output}"))
        .codec_path("tonic_prost::ProstCodec")
        .build()
}

fn main() {
    let prediction = Service::builder()
        .name("PredictionService")
        .package(PACKAGE)
        .method(method("classify", "Classify", "ClassificationRequest", "ClassificationResponse"))
        .method(method("regress", "Regress", "RegressionRequest", "RegressionResponse"))
        .method(method("predict", "Predict", "PredictRequest", "PredictResponse"))
        .method(method("multi_inference", "MultiInference", "MultiInferenceRequest", "MultiInferenceResponse"))
        .method(method("get_model_metadata", "GetModelMetadata", "GetModelMetadataRequest", "GetModelMetadataResponse"))
        .build();
    let model = Service::builder()
        .name("ModelService")
        .package(PACKAGE)
        .method(method("get_model_status", "GetModelStatus", "GetModelStatusRequest", "GetModelStatusResponse"))
        .method(method(
            "handle_reload_config_request",
            "HandleReloadConfigRequest",
            "ReloadConfigRequest",
            "ReloadConfigResponse",
        ))
        .build();
    Builder::new().build_client(true).build_transport(false).compile(&[prediction, model]);
    println!("cargo:rerun-if-changed=build.rs");
}
