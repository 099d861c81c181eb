//! The gRPC API end to end: the test model served in-process on an ephemeral port, called by
//! the tonic client generated with the server (TensorFlow's own client is the pytest suite's).
use std::net::SocketAddr;

use ferroflow::proto::convert::{tensor_from_proto, tensor_to_proto};
use ferroflow::proto::serving::model_spec::VersionChoice;
use ferroflow::proto::serving::{
    model_version_status, GetModelMetadataRequest, GetModelStatusRequest, Int64Value, ModelSpec, PredictRequest,
    SignatureDefMap,
};
use ferroflow::proto::{Message, TensorProto};
use ferroflow::tensor::Tensor;
use ferroflow_serve::grpc::{ModelServiceClient, PredictionServiceClient};
use ferroflow_serve::{ModelConfig, ServeOptions, Server, ServerHandle};
use tonic::transport::Channel;
use tonic::Code;

mod common;
use common::{scores, write_model};

fn start(dir: &std::path::Path) -> ServerHandle {
    let options = ServeOptions::new()
        .with_model(ModelConfig::new("m", dir))
        .with_rest_port(None)
        .with_grpc_port(0)
        .with_poll_wait_seconds(0);
    Server::start(options).unwrap()
}

async fn channel(addr: SocketAddr) -> Channel {
    tonic::transport::Endpoint::from_shared(format!("http://{addr}")).unwrap().connect().await.unwrap()
}

fn spec(name: &str, signature: &str, version: Option<i64>) -> Option<ModelSpec> {
    Some(ModelSpec {
        name: name.into(),
        version_choice: version.map(|value| VersionChoice::Version(Int64Value { value })),
        signature_name: signature.into(),
    })
}

fn predict_request(signature: &str, inputs: &[(&str, Tensor)]) -> PredictRequest {
    PredictRequest {
        model_spec: spec("m", signature, None),
        inputs: inputs.iter().map(|(k, t)| (k.to_string(), tensor_to_proto(t))).collect(),
        output_filter: Vec::new(),
    }
}

#[test]
fn predict_metadata_and_status_over_grpc() {
    let dir = tempfile::tempdir().unwrap();
    write_model(&dir.path().join("1"), 1.0);
    let server = start(dir.path());
    let addr = server.grpc_addr().unwrap();
    assert!(server.rest_addr().is_none());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let mut client = PredictionServiceClient::new(channel(addr).await);
        let x = [[1.0f32, 2.0, 3.0], [0.5, 0.0, -1.0]];
        let flat: Vec<f32> = x.iter().flatten().copied().collect();
        let r = client
            .predict(predict_request("", &[("x", Tensor::from_vec(&[2, 3], flat.clone()).unwrap())]))
            .await
            .unwrap()
            .into_inner();
        let got = tensor_from_proto(&r.outputs["scores"]).unwrap();
        let want: Vec<f32> = scores(&x, 1.0).into_iter().flatten().collect();
        assert_eq!(got.dims(), &[2, 2]);
        assert_eq!(got.as_slice::<f32>().unwrap(), &want[..]);
        let answered = r.model_spec.unwrap();
        assert_eq!(answered.name, "m");
        assert_eq!(answered.signature_name, "serving_default");
        assert!(matches!(answered.version_choice, Some(VersionChoice::Version(Int64Value { value: 1 }))));

        // Several outputs, filtered.
        let mut req = predict_request(
            "two",
            &[
                ("a", Tensor::from_vec(&[1, 3], vec![1.0f32, 2.0, 3.0]).unwrap()),
                ("n", Tensor::from_vec(&[1], vec![21i32]).unwrap()),
            ],
        );
        req.output_filter = vec!["n2".into()];
        let r = client.predict(req.clone()).await.unwrap().into_inner();
        assert_eq!(r.outputs.keys().collect::<Vec<_>>(), vec!["n2"]);
        assert_eq!(tensor_from_proto(&r.outputs["n2"]).unwrap().as_slice::<i32>().unwrap(), &[42]);
        req.output_filter = vec!["nope".into()];
        assert_eq!(client.predict(req.clone()).await.unwrap_err().code(), Code::InvalidArgument);
        req.output_filter = vec!["n2".into(), "n2".into()];
        assert_eq!(client.predict(req).await.unwrap_err().code(), Code::InvalidArgument);

        // Failures, each answered with its code; the server keeps serving.
        let good = || predict_request("", &[("x", Tensor::from_vec(&[1, 3], vec![1.0f32, 2.0, 3.0]).unwrap())]);
        let mut req = good();
        req.model_spec = spec("nope", "", None);
        assert_eq!(client.predict(req).await.unwrap_err().code(), Code::NotFound);
        let mut req = good();
        req.model_spec = spec("m", "", Some(7));
        assert_eq!(client.predict(req).await.unwrap_err().code(), Code::NotFound);
        let mut req = good();
        req.model_spec = spec("m", "nope", None);
        let e = client.predict(req).await.unwrap_err();
        assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
        let req = predict_request("", &[("x", Tensor::from_vec(&[1, 3], vec![1i32, 2, 3]).unwrap())]);
        let e = client.predict(req).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().contains("Expects arg[0]"), "{}", e.message());
        let req = predict_request("", &[("x", Tensor::from_vec(&[1, 4], vec![1.0f32; 4]).unwrap())]);
        assert_eq!(client.predict(req).await.unwrap_err().code(), Code::InvalidArgument);
        let req = predict_request("", &[("y", Tensor::from_vec(&[1, 3], vec![1.0f32; 3]).unwrap())]);
        let e = client.predict(req).await.unwrap_err();
        assert!(e.message().contains("Missing but required: {x}"), "{}", e.message());
        let req = predict_request("fail", &[("i", Tensor::from_vec(&[1], vec![5i32]).unwrap())]);
        assert_eq!(client.predict(req).await.unwrap_err().code(), Code::InvalidArgument);
        // A TensorProto whose content does not fit its shape, and one that claims 2^40 floats.
        let mut req = good();
        let x = req.inputs.get_mut("x").unwrap();
        x.tensor_content.truncate(5);
        assert_eq!(client.predict(req).await.unwrap_err().code(), Code::InvalidArgument);
        let mut req = good();
        let huge = Tensor::from_vec(&[1], vec![0.0f32]).unwrap();
        let mut p: TensorProto = tensor_to_proto(&huge);
        p.tensor_shape = Some(ferroflow::proto::convert::dims_to_proto(&[1 << 20, 1 << 20]));
        p.tensor_content.clear();
        req.inputs.insert("x".into(), p);
        let e = client.predict(req).await.unwrap_err();
        assert!(matches!(e.code(), Code::InvalidArgument | Code::ResourceExhausted), "{e:?}");
        let r = client.predict(good()).await.unwrap().into_inner();
        assert_eq!(tensor_from_proto(&r.outputs["scores"]).unwrap().as_slice::<f32>().unwrap(), &[5.0, 5.0]);

        // Metadata: the signature defs packed in an Any.
        let e = client
            .get_model_metadata(GetModelMetadataRequest { model_spec: spec("m", "", None), metadata_field: vec![] })
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        let r = client
            .get_model_metadata(GetModelMetadataRequest {
                model_spec: spec("m", "", None),
                metadata_field: vec!["signature_def".into()],
            })
            .await
            .unwrap()
            .into_inner();
        let any = &r.metadata["signature_def"];
        assert_eq!(any.type_url, "type.googleapis.com/tensorflow.serving.SignatureDefMap");
        let map = SignatureDefMap::decode(&any.value[..]).unwrap();
        let sig = &map.signature_def["serving_default"];
        assert_eq!(sig.method_name, "tensorflow/serving/predict");
        assert_eq!(sig.inputs["x"].dtype, 1);
        assert!(map.signature_def.contains_key("two"));

        // Status.
        let mut models = ModelServiceClient::new(channel(addr).await);
        let r = models
            .get_model_status(GetModelStatusRequest { model_spec: spec("m", "", None) })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.model_version_status.len(), 1);
        assert_eq!(r.model_version_status[0].version, 1);
        assert_eq!(r.model_version_status[0].state, model_version_status::State::Available as i32);
        let e = models.get_model_status(GetModelStatusRequest { model_spec: spec("x", "", None) }).await.unwrap_err();
        assert_eq!(e.code(), Code::NotFound);
    });
    drop(dir);
}

/// `ModelService.HandleReloadConfigRequest`: the listed models are served once it answers (a
/// new one loaded, one no longer listed gone); a config without a list or with a bad model is
/// INVALID_ARGUMENT and changes nothing; a model that fails to load is an error.
#[test]
fn a_reload_config_request_changes_the_models_served() {
    use ferroflow::proto::serving::file_system_storage_path_source_config::{
        servable_version_policy, ServableVersionPolicy,
    };
    use ferroflow::proto::serving::{model_server_config, ModelConfigList, ModelServerConfig, ReloadConfigRequest};
    let dir = tempfile::tempdir().unwrap();
    let (m, b) = (dir.path().join("m"), dir.path().join("b"));
    write_model(&m.join("1"), 1.0);
    write_model(&b.join("3"), 3.0);
    write_model(&b.join("4"), 4.0);
    std::fs::create_dir_all(dir.path().join("broken/1")).unwrap();
    let options = ServeOptions::new()
        .with_model(ModelConfig::new("m", &m))
        .with_rest_port(None)
        .with_grpc_port(0)
        .with_poll_wait_seconds(0)
        .with_load_retries(0, std::time::Duration::ZERO);
    let server = Server::start(options).unwrap();
    let addr = server.grpc_addr().unwrap();
    let config = |models: &[(&str, &std::path::Path, Option<ServableVersionPolicy>)]| ReloadConfigRequest {
        config: Some(ModelServerConfig {
            config: Some(model_server_config::Config::ModelConfigList(ModelConfigList {
                config: models
                    .iter()
                    .map(|(name, base, policy)| ferroflow::proto::serving::ModelConfig {
                        name: name.to_string(),
                        base_path: base.display().to_string(),
                        model_platform: "tensorflow".into(),
                        model_version_policy: policy.clone(),
                        version_labels: [("old".to_string(), 3i64)].into_iter().collect(),
                    })
                    .collect(),
            })),
        }),
    };
    let all = Some(ServableVersionPolicy {
        policy_choice: Some(servable_version_policy::PolicyChoice::All(servable_version_policy::All {})),
    });
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let mut models = ModelServiceClient::new(channel(addr).await);
        let versions = |name: &str| GetModelStatusRequest { model_spec: spec(name, "", None) };
        let r = models.handle_reload_config_request(config(&[("m", &m, None), ("b", &b, all)])).await.unwrap();
        assert_eq!(r.into_inner().status.unwrap().error_code, 0);
        let b_status = models.get_model_status(versions("b")).await.unwrap().into_inner().model_version_status;
        let mut served: Vec<i64> = b_status.iter().map(|s| s.version).collect();
        served.sort();
        assert_eq!(served, vec![3, 4], "the 'all' policy serves both versions");

        let r = models.handle_reload_config_request(config(&[("b", &b, None)])).await.unwrap();
        assert_eq!(r.into_inner().status.unwrap().error_code, 0);
        let gone = models.get_model_status(versions("m")).await.unwrap_err();
        assert_eq!(gone.code(), Code::NotFound, "{gone:?}");

        for bad in [
            ReloadConfigRequest { config: None },
            config(&[("b", &b, None), ("b", &m, None)]),
            config(&[("", &b, None)]),
        ] {
            let e = models.handle_reload_config_request(bad).await.unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
        }
        assert!(models.get_model_status(versions("b")).await.is_ok(), "b still served after refused configs");

        let broken = dir.path().join("broken");
        let e =
            models.handle_reload_config_request(config(&[("b", &b, None), ("x", &broken, None)])).await.unwrap_err();
        assert!(e.message().contains("model x"), "{e:?}");
        assert!(models.get_model_status(versions("b")).await.is_ok());
    });
    server.shutdown();
}
