"""(b) The gRPC API (package tensorflow.serving, on --port) with the official client,
tensorflow-serving-api: Predict equals TensorFlow's outputs; output_filter, model_spec version /
version_label / signature_name; GetModelMetadata; GetModelStatus; errors as grpc.StatusCode."""
import threading

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2, types_pb2
from tensorflow_serving.apis import get_model_metadata_pb2, get_model_status_pb2, predict_pb2

from conftest import model_stub, prediction_stub, started
from test_rest import close, saved_model_signatures

TIMEOUT = 30


def predict_request(model, inputs, signature=None, version=None, label=None, output_filter=()):
    r = predict_pb2.PredictRequest()
    r.model_spec.name = model
    if signature is not None:
        r.model_spec.signature_name = signature
    if version is not None:
        r.model_spec.version.value = version
    if label is not None:
        r.model_spec.version_label = label
    for k, v in inputs.items():
        r.inputs[k].CopyFrom(v if isinstance(v, tensor_pb2.TensorProto) else tf.make_tensor_proto(v))
    r.output_filter.extend(output_filter)
    return r


def outputs(response):
    return {k: tf.make_ndarray(v) for k, v in response.outputs.items()}


def code_of(call, *args, **kw):
    with pytest.raises(grpc.RpcError) as e:
        call(*args, timeout=TIMEOUT, **kw)
    assert e.value.details(), "an error status without a message"
    return e.value.code()


@pytest.fixture(scope="module")
def cnn_x():
    return np.random.default_rng(11).uniform(0, 1, (2, 32, 32, 3)).astype(np.float32)


def test_predict_equals_tensorflow(pstub, models, tfref, cnn_x):
    want = tfref.run(models["cnn"], keras_tensor=cnn_x)["output_0"]
    r = pstub.Predict(predict_request("m", {"keras_tensor": cnn_x}), timeout=TIMEOUT)
    got = outputs(r)
    assert list(got) == ["output_0"]
    assert got["output_0"].dtype == np.float32 and got["output_0"].shape == (2, 10)
    close(got["output_0"], want)
    # The resolved model_spec: name, version, the default signature's name.
    assert r.model_spec.name == "m"
    assert r.model_spec.version.value == 1
    assert r.model_spec.signature_name == "serving_default"


def test_predict_tensor_values_in_repeated_fields(pstub, models, tfref, cnn_x):
    """TensorProto values may come in float_val instead of tensor_content; fewer values than the
    shape holds repeat the last one, none at all are zeros (TensorFlow's Tensor::FromProto)."""
    shape = tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=s)
                                                   for s in (1, 32, 32, 3)])
    full = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, tensor_shape=shape, float_val=cnn_x[0].ravel().tolist())
    got = outputs(pstub.Predict(predict_request("m", {"keras_tensor": full}), timeout=TIMEOUT))["output_0"]
    close(got, tfref.run(models["cnn"], keras_tensor=cnn_x[:1])["output_0"])
    one = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, tensor_shape=shape, float_val=[0.5])
    got = outputs(pstub.Predict(predict_request("m", {"keras_tensor": one}), timeout=TIMEOUT))["output_0"]
    close(got, tfref.run(models["cnn"], keras_tensor=np.full((1, 32, 32, 3), 0.5, np.float32))["output_0"])
    none = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, tensor_shape=shape)
    got = outputs(pstub.Predict(predict_request("m", {"keras_tensor": none}), timeout=TIMEOUT))["output_0"]
    close(got, tfref.run(models["cnn"], keras_tensor=np.zeros((1, 32, 32, 3), np.float32))["output_0"])


def test_predict_signature_and_version(pstub, models, tfref, cnn_x):
    want = tfref.run(models["cnn"], "serve", keras_tensor=cnn_x)["output_0"]
    r = pstub.Predict(predict_request("m", {"keras_tensor": cnn_x}, signature="serve", version=1), timeout=TIMEOUT)
    close(outputs(r)["output_0"], want)
    assert r.model_spec.signature_name == "serve"
    assert r.model_spec.version.value == 1


def test_output_filter(multi_server):
    stub = prediction_stub(multi_server)
    x = np.array([[0.5, 1.0, -2.0]], np.float32)
    n = np.int32(3)
    r = stub.Predict(predict_request("loop", {"x": x, "n": n}), timeout=TIMEOUT)
    assert set(r.outputs) == {"y", "steps"}
    r = stub.Predict(predict_request("loop", {"x": x, "n": n}, output_filter=["y"]), timeout=TIMEOUT)
    assert set(r.outputs) == {"y"}
    r = stub.Predict(predict_request("loop", {"x": x, "n": n}, output_filter=["steps"]), timeout=TIMEOUT)
    assert set(r.outputs) == {"steps"} and int(tf.make_ndarray(r.outputs["steps"])) == 3
    assert code_of(stub.Predict, predict_request("loop", {"x": x, "n": n}, output_filter=["nope"])) \
        == grpc.StatusCode.INVALID_ARGUMENT
    assert code_of(stub.Predict, predict_request("loop", {"x": x, "n": n}, output_filter=["y", "y"])) \
        == grpc.StatusCode.INVALID_ARGUMENT


def test_versions_and_labels(multi_server):
    stub = prediction_stub(multi_server)
    x = np.zeros((1, 3), np.float32)
    for kw, version in [({}, 2), ({"version": 1}, 1), ({"version": 2}, 2), ({"label": "stable"}, 1),
                        ({"label": "canary"}, 2)]:
        r = stub.Predict(predict_request("multi", {"x": x}, **kw), timeout=TIMEOUT)
        np.testing.assert_array_equal(outputs(r)["y"], np.full((1, 3), float(version), np.float32))
        assert r.model_spec.version.value == version, kw
    assert code_of(stub.Predict, predict_request("multi", {"x": x}, label="nope")) == grpc.StatusCode.INVALID_ARGUMENT
    assert code_of(stub.Predict, predict_request("multi", {"x": x}, version=3)) == grpc.StatusCode.NOT_FOUND


def test_dtypes(multi_server, models, tfref):
    stub = prediction_stub(multi_server)
    b = np.array([True, False])
    d = np.array([[1.0, 2.0], [1e300, -3.5]])
    k = np.array([5, -(2 ** 40)], np.int64)
    want = tfref.run(models["multi2"], "types", b=b, d=d, k=k)
    got = outputs(stub.Predict(predict_request("multi", {"b": b, "d": d, "k": k}, signature="types"), timeout=TIMEOUT))
    for key in want:
        assert got[key].dtype == want[key].dtype, key
        np.testing.assert_array_equal(got[key], want[key])
    s = np.array([b"hi", b"\x00\xff", b""], dtype=object)
    got = outputs(stub.Predict(predict_request("multi", {"s": s}, signature="text"), timeout=TIMEOUT))
    assert got["s_bytes"].tolist() == s.tolist() and got["s_text"].tolist() == s.tolist()


def test_large_message(multi_server, models, tfref):
    """A 5 MB request, over gRPC's 4 MiB default (TF Serving sets the server's limit to INT32_MAX)."""
    x = np.random.default_rng(3).uniform(0, 1, (420, 32, 32, 3)).astype(np.float32)
    r = prediction_stub(multi_server).Predict(predict_request("cnn", {"keras_tensor": x}), timeout=60)
    close(outputs(r)["output_0"], tfref.run(models["cnn"], keras_tensor=x)["output_0"])


def test_concurrent_predicts(pstub, models, tfref):
    xs = [np.random.default_rng(100 + i).uniform(0, 1, (1 + i % 3, 32, 32, 3)).astype(np.float32) for i in range(24)]
    want = [tfref.run(models["cnn"], keras_tensor=x)["output_0"] for x in xs]
    got = [None] * len(xs)
    errors = []

    def work(i):
        try:
            got[i] = outputs(pstub.Predict(predict_request("m", {"keras_tensor": xs[i]}), timeout=60))["output_0"]
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    for g, w in zip(got, want):
        close(g, w)


# -- metadata and status -----------------------------------------------------------------------
def metadata_request(model, fields=("signature_def",), version=None):
    r = get_model_metadata_pb2.GetModelMetadataRequest()
    r.model_spec.name = model
    if version is not None:
        r.model_spec.version.value = version
    r.metadata_field.extend(fields)
    return r


def test_get_model_metadata(pstub, models):
    r = pstub.GetModelMetadata(metadata_request("m"), timeout=TIMEOUT)
    assert r.model_spec.name == "m" and r.model_spec.version.value == 1
    assert list(r.metadata) == ["signature_def"]
    sigs = get_model_metadata_pb2.SignatureDefMap()
    assert r.metadata["signature_def"].Unpack(sigs), r.metadata["signature_def"].type_url
    want = saved_model_signatures(models["cnn"])
    for key in sorted(set(want) & set(sigs.signature_def)):
        g, w = sigs.signature_def[key], want[key]
        assert dict(g.inputs) == dict(w.inputs), key
        assert dict(g.outputs) == dict(w.outputs), key
        assert g.method_name == w.method_name, key
    assert sorted(sigs.signature_def) == sorted(want)  # __saved_model_init_op included


def test_get_model_metadata_errors(pstub):
    assert code_of(pstub.GetModelMetadata, metadata_request("m", fields=())) == grpc.StatusCode.INVALID_ARGUMENT
    assert code_of(pstub.GetModelMetadata, metadata_request("m", fields=("nope",))) \
        == grpc.StatusCode.INVALID_ARGUMENT
    assert code_of(pstub.GetModelMetadata, metadata_request("nope")) == grpc.StatusCode.NOT_FOUND
    assert code_of(pstub.GetModelMetadata, metadata_request("m", version=9)) == grpc.StatusCode.NOT_FOUND


def status_request(model, version=None):
    r = get_model_status_pb2.GetModelStatusRequest()
    r.model_spec.name = model
    if version is not None:
        r.model_spec.version.value = version
    return r


def test_get_model_status(mstub, multi_server):
    AVAILABLE = get_model_status_pb2.ModelVersionStatus.AVAILABLE
    for req in (status_request("m"), status_request("m", 1)):
        r = mstub.GetModelStatus(req, timeout=TIMEOUT)
        assert len(r.model_version_status) == 1
        s = r.model_version_status[0]
        assert (s.version, s.state, s.status.error_code, s.status.error_message) == (1, AVAILABLE, 0, "")
    r = model_stub(multi_server).GetModelStatus(status_request("multi"), timeout=TIMEOUT)
    assert sorted((s.version, s.state) for s in r.model_version_status) == [(1, AVAILABLE), (2, AVAILABLE)]
    assert code_of(mstub.GetModelStatus, status_request("nope")) == grpc.StatusCode.NOT_FOUND
    assert code_of(mstub.GetModelStatus, status_request("m", 9)) == grpc.StatusCode.NOT_FOUND


# -- errors ------------------------------------------------------------------------------------
def test_predict_errors(pstub, cnn_x):
    ok = {"keras_tensor": cnn_x[:1]}
    cases = [
        ("unknown model", predict_request("nope", ok), grpc.StatusCode.NOT_FOUND),
        ("unknown version", predict_request("m", ok, version=9), grpc.StatusCode.NOT_FOUND),
        # TF Serving's predict_util: "Serving signature key ... not found." is FAILED_PRECONDITION.
        ("unknown signature", predict_request("m", ok, signature="nope"), grpc.StatusCode.FAILED_PRECONDITION),
        ("int32 for float", predict_request("m", {"keras_tensor": np.zeros((1, 32, 32, 3), np.int32)}),
         grpc.StatusCode.INVALID_ARGUMENT),
        ("string for float", predict_request("m", {"keras_tensor": np.array([b"x"], dtype=object)}),
         grpc.StatusCode.INVALID_ARGUMENT),
        ("wrong shape", predict_request("m", {"keras_tensor": np.zeros((1, 31, 32, 3), np.float32)}),
         grpc.StatusCode.INVALID_ARGUMENT),
        ("wrong rank", predict_request("m", {"keras_tensor": np.zeros((32, 32, 3), np.float32)}),
         grpc.StatusCode.INVALID_ARGUMENT),
        ("missing input", predict_request("m", {}), grpc.StatusCode.INVALID_ARGUMENT),
        ("extra input", predict_request("m", {"keras_tensor": cnn_x[:1], "other": cnn_x[:1]}),
         grpc.StatusCode.INVALID_ARGUMENT),
        ("misnamed input", predict_request("m", {"other": cnn_x[:1]}), grpc.StatusCode.INVALID_ARGUMENT),
        ("no model_spec", predict_pb2.PredictRequest(), grpc.StatusCode.INVALID_ARGUMENT),
    ]
    got = {name: code_of(pstub.Predict, req) for name, req, _ in cases}
    assert got == {name: code for name, _, code in cases}


def test_model_failure_is_invalid_argument(multi_server):
    stub = prediction_stub(multi_server)
    req = predict_request("multi", {"i": np.array([0, 5], np.int32)}, signature="fail")
    assert code_of(stub.Predict, req) == grpc.StatusCode.INVALID_ARGUMENT
    r = stub.Predict(predict_request("multi", {"i": np.array([2, 0], np.int32)}, signature="fail"), timeout=TIMEOUT)
    np.testing.assert_array_equal(outputs(r)["y"], [30.0, 10.0])


def test_handle_reload_config_request_with_tensorflow_servings_client(tmp_path, models):
    """ModelService.HandleReloadConfigRequest, TensorFlow Serving's own messages: a model added
    is AVAILABLE when it answers, one removed is NOT_FOUND, a config without a list is
    INVALID_ARGUMENT."""
    import harness as h
    from tensorflow_serving.apis import model_management_pb2
    from tensorflow_serving.config import model_server_config_pb2

    for name in ("mlp", "cnn"):
        h.copy_version(models[name], tmp_path / name, 1)
    server = started(tmp_path / "run", model_name="mlp", base_path=tmp_path / "mlp")
    try:
        stub = model_stub(server)

        def reload(*names):
            req = model_management_pb2.ReloadConfigRequest()
            for n in names:
                c = req.config.model_config_list.config.add()
                c.name, c.base_path, c.model_platform = n, str(tmp_path / n), "tensorflow"
                c.model_version_policy.latest.num_versions = 1
                c.version_labels["stable"] = 1
            return stub.HandleReloadConfigRequest(req, timeout=120)

        def status(name):
            req = get_model_status_pb2.GetModelStatusRequest()
            req.model_spec.name = name
            return stub.GetModelStatus(req, timeout=30)

        r = reload("mlp", "cnn")
        assert r.status.error_code == 0, r
        (v,) = status("cnn").model_version_status
        assert v.version == 1 and v.state == v.AVAILABLE
        assert reload("cnn").status.error_code == 0
        with pytest.raises(grpc.RpcError) as e:
            status("mlp")
        assert e.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.RpcError) as e:
            stub.HandleReloadConfigRequest(model_management_pb2.ReloadConfigRequest(
                config=model_server_config_pb2.ModelServerConfig()), timeout=30)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert status("cnn").model_version_status[0].state == v.AVAILABLE
    finally:
        server.stop()
