//! The gRPC API: TensorFlow Serving's `tensorflow.serving.PredictionService` (Predict,
//! Classify, Regress, MultiInference, GetModelMetadata) and `ModelService` (GetModelStatus,
//! HandleReloadConfigRequest),
//! served by tonic's generated services over hyper's HTTP/2. Errors carry TensorFlow's status
//! codes (gRPC's numbers are the same); messages past 1024 bytes are cut as TensorFlow
//! Serving cuts them. A client's `grpc-timeout` bounds the model run, as the REST deadline does.
use std::sync::Arc;
use std::time::Duration;

use ferroflow::proto::serving::model_spec::VersionChoice;
use ferroflow::proto::serving::{
    inference_result, model_version_status, ClassificationRequest, ClassificationResponse, GetModelMetadataRequest,
    GetModelMetadataResponse, GetModelStatusRequest, GetModelStatusResponse, InferenceResult, ModelSpec,
    ModelVersionStatus, MultiInferenceRequest, MultiInferenceResponse, PredictRequest, PredictResponse,
    RegressionRequest, RegressionResponse, ReloadConfigRequest, ReloadConfigResponse, SignatureDefMap, StatusProto,
};
use ferroflow::proto::{Any, Message};
use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status};

use crate::manager::{State, Which};
use crate::service::{self, Servable, CLASSIFY_METHOD, REGRESS_METHOD};
use crate::shared::{blocking, Shared};
use crate::ApiError;

/// The service code tonic-build generated (servers and clients).
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod api {
    include!(concat!(env!("OUT_DIR"), "/tensorflow.serving.PredictionService.rs"));
    include!(concat!(env!("OUT_DIR"), "/tensorflow.serving.ModelService.rs"));
}

pub use api::model_service_client::ModelServiceClient;
use api::model_service_server::{ModelService, ModelServiceServer};
pub use api::prediction_service_client::PredictionServiceClient;
use api::prediction_service_server::{PredictionService, PredictionServiceServer};

/// The longest error message sent; longer ones end in `...TRUNCATED`.
const MAX_MESSAGE: usize = 1024;

/// Both services over the handlers' shared state.
#[derive(Clone)]
pub(crate) struct Api {
    shared: Arc<Shared>,
}

/// The gRPC status of an error.
fn status(e: ApiError) -> Status {
    let mut message = e.message;
    if message.len() > MAX_MESSAGE {
        let mut cut = MAX_MESSAGE;
        while !message.is_char_boundary(cut) {
            cut -= 1;
        }
        message.truncate(cut);
        message.push_str("...TRUNCATED");
    }
    Status::new(tonic::Code::from_i32(e.code.value()), message)
}

/// The `grpc-timeout` a client sent (`100m`, `5S`, ...).
fn deadline(metadata: &MetadataMap) -> Option<Duration> {
    let v = metadata.get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = v.split_at(v.len().checked_sub(1)?);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// The model and version a spec names.
fn which(spec: Option<&ModelSpec>) -> Result<(String, Which), ApiError> {
    let spec = spec.ok_or_else(|| ApiError::invalid("Missing ModelSpec"))?;
    let which = match &spec.version_choice {
        None => Which::Latest,
        Some(VersionChoice::Version(v)) => Which::Version(v.value),
        Some(VersionChoice::VersionLabel(l)) => Which::Label(l.clone()),
    };
    Ok((spec.name.clone(), which))
}

impl Api {
    pub(crate) fn new(shared: Arc<Shared>) -> Api {
        Api { shared }
    }

    /// The servers of both services, refusing messages over `max_message` bytes.
    pub(crate) fn servers(self, max_message: usize) -> (PredictionServiceServer<Api>, ModelServiceServer<Api>) {
        let prediction = PredictionServiceServer::new(self.clone())
            .max_decoding_message_size(max_message)
            .max_encoding_message_size(usize::MAX);
        let model = ModelServiceServer::new(self).max_decoding_message_size(max_message);
        (prediction, model)
    }

    fn resolve(&self, spec: Option<&ModelSpec>) -> Result<Arc<Servable>, Status> {
        let (name, which) = which(spec).map_err(status)?;
        self.shared.manager.resolve(&name, &which).map_err(status)
    }

    /// Classify or regress on the examples of `input`.
    async fn infer(
        &self,
        deadline: Option<Duration>,
        spec: Option<ModelSpec>,
        input: Option<ferroflow::proto::serving::Input>,
        classify: bool,
    ) -> Result<(ModelSpec, inference_result::Result), Status> {
        let servable = self.resolve(spec.as_ref())?;
        let signature = spec.map(|s| s.signature_name).unwrap_or_default();
        blocking(&self.shared, deadline, move |_, cancel, timeout| {
            service::infer_input(&servable, &signature, input.as_ref(), classify, timeout, cancel)
        })
        .await
        .map_err(status)
    }
}

#[tonic::async_trait]
impl PredictionService for Api {
    async fn classify(
        &self,
        request: Request<ClassificationRequest>,
    ) -> Result<Response<ClassificationResponse>, Status> {
        let deadline = deadline(request.metadata());
        let r = request.into_inner();
        let (model_spec, result) = self.infer(deadline, r.model_spec, r.input, true).await?;
        let inference_result::Result::ClassificationResult(result) = result else {
            return Err(Status::internal("classify answered with a regression"));
        };
        Ok(Response::new(ClassificationResponse { result: Some(result), model_spec: Some(model_spec) }))
    }

    async fn regress(&self, request: Request<RegressionRequest>) -> Result<Response<RegressionResponse>, Status> {
        let deadline = deadline(request.metadata());
        let r = request.into_inner();
        let (model_spec, result) = self.infer(deadline, r.model_spec, r.input, false).await?;
        let inference_result::Result::RegressionResult(result) = result else {
            return Err(Status::internal("regress answered with a classification"));
        };
        Ok(Response::new(RegressionResponse { result: Some(result), model_spec: Some(model_spec) }))
    }

    async fn predict(&self, request: Request<PredictRequest>) -> Result<Response<PredictResponse>, Status> {
        let deadline = deadline(request.metadata());
        let r = request.into_inner();
        let servable = self.resolve(r.model_spec.as_ref())?;
        let signature = r.model_spec.map(|s| s.signature_name).unwrap_or_default();
        let (inputs, output_filter) = (r.inputs, r.output_filter);
        let response = blocking(&self.shared, deadline, move |shared, cancel, timeout| {
            let batcher = shared.batcher.as_ref();
            service::predict_protos(batcher, &servable, &signature, inputs, &output_filter, timeout, cancel)
        })
        .await
        .map_err(status)?;
        Ok(Response::new(response))
    }

    async fn multi_inference(
        &self,
        request: Request<MultiInferenceRequest>,
    ) -> Result<Response<MultiInferenceResponse>, Status> {
        let deadline = deadline(request.metadata());
        let r = request.into_inner();
        let Some(first) = r.tasks.first() else {
            return Err(status(ApiError::invalid("MultiInferenceRequest must have at least one task")));
        };
        let name = first.model_spec.as_ref().map(|s| s.name.clone()).unwrap_or_default();
        let mut signatures: Vec<String> = Vec::new();
        for task in &r.tasks {
            let spec = task.model_spec.as_ref().ok_or_else(|| status(ApiError::invalid("Missing ModelSpec")))?;
            if spec.name != name {
                return Err(status(ApiError::invalid(
                    "All ModelSpecs in a MultiInferenceRequest must access the same model name",
                )));
            }
            let sig = if spec.signature_name.is_empty() { service::DEFAULT_SIGNATURE } else { &spec.signature_name };
            if signatures.iter().any(|s| s == sig) {
                return Err(status(ApiError::invalid(format!("Duplicate evaluation of signature: {sig}"))));
            }
            if task.method_name != CLASSIFY_METHOD && task.method_name != REGRESS_METHOD {
                return Err(status(ApiError::coded(
                    ferroflow::status::Code::Unimplemented,
                    format!("Unsupported signature method_name: {}", task.method_name),
                )));
            }
            signatures.push(sig.to_string());
        }
        let mut results = Vec::with_capacity(r.tasks.len());
        for task in r.tasks {
            let classify = task.method_name == CLASSIFY_METHOD;
            let (model_spec, result) = self.infer(deadline, task.model_spec, r.input.clone(), classify).await?;
            results.push(InferenceResult { model_spec: Some(model_spec), result: Some(result) });
        }
        Ok(Response::new(MultiInferenceResponse { results }))
    }

    async fn get_model_metadata(
        &self,
        request: Request<GetModelMetadataRequest>,
    ) -> Result<Response<GetModelMetadataResponse>, Status> {
        let r = request.into_inner();
        if r.metadata_field.is_empty() {
            return Err(status(ApiError::invalid("GetModelMetadataRequest must specify at least one metadata_field")));
        }
        if let Some(f) = r.metadata_field.iter().find(|f| *f != "signature_def") {
            return Err(status(ApiError::invalid(format!("Metadata field {f} is not supported"))));
        }
        let servable = self.resolve(r.model_spec.as_ref())?;
        let map = SignatureDefMap { signature_def: servable.model.signature_defs().clone() };
        let any = Any {
            type_url: "type.googleapis.com/tensorflow.serving.SignatureDefMap".into(),
            value: map.encode_to_vec(),
        };
        let mut spec = service::answered(&servable, "");
        spec.signature_name.clear();
        Ok(Response::new(GetModelMetadataResponse {
            model_spec: Some(spec),
            metadata: [("signature_def".to_string(), any)].into_iter().collect(),
        }))
    }
}

#[tonic::async_trait]
impl ModelService for Api {
    async fn get_model_status(
        &self,
        request: Request<GetModelStatusRequest>,
    ) -> Result<Response<GetModelStatusResponse>, Status> {
        let r = request.into_inner();
        let (name, which) = which(r.model_spec.as_ref()).map_err(status)?;
        let list = self.shared.manager.status(&name, &which).map_err(status)?;
        let model_version_status = list
            .into_iter()
            .map(|(version, state, error)| {
                let state = match state {
                    State::Loading => model_version_status::State::Loading,
                    State::Available => model_version_status::State::Available,
                    State::End => model_version_status::State::End,
                };
                let (code, message) = error.map_or((0, String::new()), |(c, m)| (c.value(), m));
                ModelVersionStatus {
                    version,
                    state: state as i32,
                    status: Some(StatusProto { error_code: code, error_message: message }),
                }
            })
            .collect();
        Ok(Response::new(GetModelStatusResponse { model_version_status }))
    }

    /// Serves the request's `model_config_list` from now on (as a reread
    /// `--model_config_file`), answering once the new models are loaded: INVALID_ARGUMENT for
    /// a config without a list or one that does not check, the load errors of models that
    /// serve nothing.
    async fn handle_reload_config_request(
        &self,
        request: Request<ReloadConfigRequest>,
    ) -> Result<Response<ReloadConfigResponse>, Status> {
        let config = request.into_inner().config.unwrap_or_default();
        let models = crate::config::models_of_proto(&config)
            .ok_or_else(|| {
                ApiError::invalid(
                    "ServerModelConfig type not supported by HandleReloadConfigRequest. Only ModelConfigList is \
                     currently supported",
                )
            })
            .and_then(|r| r.map_err(|e| ApiError::invalid(e.to_string())))
            .map_err(status)?;
        let manager = self.shared.manager.clone();
        let failures = tokio::task::spawn_blocking(move || {
            manager.reconfigure(&models);
            manager.startup_failures()
        })
        .await
        .map_err(|e| Status::internal(format!("reloading the config: {e}")))?;
        if !failures.is_empty() {
            return Err(status(ApiError::coded(ferroflow::status::Code::Unknown, failures.join("; "))));
        }
        Ok(Response::new(ReloadConfigResponse {
            status: Some(StatusProto { error_code: 0, error_message: String::new() }),
        }))
    }
}
