"""(a) The REST API against TensorFlow: predict (row and columnar) equals the SavedModel run by
TensorFlow itself; status and metadata JSON shaped as TensorFlow Serving's."""
import json
import re

import numpy as np
import pytest
from google.protobuf import json_format

import harness as h

RTOL, ATOL = 1e-4, 1e-5


def close(got, want):
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64),
                               rtol=RTOL, atol=ATOL)


@pytest.fixture(scope="module")
def cnn_x():
    return np.random.default_rng(7).uniform(0, 1, (3, 32, 32, 3)).astype(np.float32)


def test_predict_row_equals_tensorflow(main_server, models, tfref, cnn_x):
    want = tfref.run(models["cnn"], keras_tensor=cnn_x)["output_0"]
    code, body = main_server.predict({"instances": cnn_x.tolist()})
    assert code == 200, body
    assert list(body) == ["predictions"]
    assert np.asarray(body["predictions"]).shape == (3, 10)
    close(body["predictions"], want)
    # Named rows: each instance an object keyed by the input.
    code, body = main_server.predict({"instances": [{"keras_tensor": r.tolist()} for r in cnn_x]})
    assert code == 200, body
    close(body["predictions"], want)


def test_predict_columnar_equals_tensorflow(main_server, models, tfref, cnn_x):
    want = tfref.run(models["cnn"], keras_tensor=cnn_x)["output_0"]
    code, body = main_server.predict({"inputs": {"keras_tensor": cnn_x.tolist()}})
    assert code == 200, body
    assert list(body) == ["outputs"]
    close(body["outputs"], want)
    code, body = main_server.predict({"inputs": cnn_x.tolist()})  # bare value for a one-input signature
    assert code == 200, body
    close(body["outputs"], want)


def test_predict_other_signature_and_version_paths(main_server, models, tfref, cnn_x):
    want = tfref.run(models["cnn"], "serve", keras_tensor=cnn_x[:1])["output_0"]
    for suffix in ("", "/versions/1", "/VERSIONS/1"):
        code, body = main_server.predict({"signature_name": "serve", "instances": cnn_x[:1].tolist()}, suffix=suffix)
        assert code == 200, (suffix, body)
        close(body["predictions"], want)


def test_predict_gzip_body(main_server, models, tfref, cnn_x):
    import gzip

    want = tfref.run(models["cnn"], keras_tensor=cnn_x[:2])["output_0"]
    body = gzip.compress(json.dumps({"instances": cnn_x[:2].tolist()}).encode())
    code, got = main_server.predict(body, headers={"Content-Encoding": "gzip"})
    assert code == 200, got
    close(got["predictions"], want)


@pytest.mark.parametrize("name,inp,x", [
    ("mlp", "keras_tensor", np.random.default_rng(1).normal(0, 1, (4, 4)).astype(np.float32)),
    ("tf1", "x", np.random.default_rng(2).normal(0, 1, (3, 5)).astype(np.float32)),
])
def test_other_models_equal_tensorflow(multi_server, models, tfref, name, inp, x):
    want = tfref.run(models[name], **{inp: x})
    (out_key,) = want
    code, body = multi_server.predict({"instances": x.tolist()}, model=name)
    assert code == 200, body
    close(body["predictions"], want[out_key])
    code, body = multi_server.predict({"inputs": {inp: x.tolist()}}, model=name)
    assert code == 200, body
    close(body["outputs"], want[out_key])


def test_several_inputs_and_outputs(multi_server, models, tfref):
    """module_loop: x float[?,3], n int32[] -> y, steps (a scalar): columnar answers an object."""
    x = np.array([[0.5, 1.0, -2.0], [3.0, 0.25, 1.0]], np.float32)
    want = tfref.run(models["loop"], x=x, n=np.int32(7))
    code, body = multi_server.predict({"inputs": {"x": x.tolist(), "n": 7}}, model="loop")
    assert code == 200, body
    assert set(body["outputs"]) == {"y", "steps"}
    close(body["outputs"]["y"], want["y"])
    assert body["outputs"]["steps"] == int(want["steps"])
    # Row format stacks n into [2]: not the signature's scalar -> 400 (TF Serving's session rejects it).
    code, body = multi_server.predict({"instances": [{"x": x[0].tolist(), "n": 7}, {"x": x[1].tolist(), "n": 7}]},
                                      model="loop")
    assert code == 400, body
    assert "error" in body


def test_rows_of_several_outputs_are_objects(multi_server, models, tfref):
    a = np.array([[1, 2, 3.5], [0, 0, -1]], np.float32)
    n = np.array([4, -1], np.int32)
    want = tfref.run(models["multi2"], "two", a=a, n=n)
    code, body = multi_server.predict(
        {"signature_name": "two", "instances": [{"a": a[0].tolist(), "n": 4}, {"a": a[1].tolist(), "n": -1}]},
        model="multi")
    assert code == 200, body
    preds = body["predictions"]
    assert [set(p) for p in preds] == [{"sum", "n2"}] * 2
    close([p["sum"] for p in preds], want["sum"])
    assert [p["n2"] for p in preds] == want["n2"].tolist()
    code, body = multi_server.predict({"signature_name": "two", "inputs": {"a": a.tolist(), "n": n.tolist()}},
                                      model="multi")
    assert code == 200, body
    close(body["outputs"]["sum"], want["sum"])
    assert body["outputs"]["n2"] == want["n2"].tolist()


def test_dtypes_bool_double_int64(multi_server, models, tfref):
    b = np.array([True, False])
    d = np.array([[1.0, 2.0], [1e300, -3.5]])
    k = np.array([5, -(2 ** 40)], np.int64)
    want = tfref.run(models["multi2"], "types", b=b, d=d, k=k)
    code, body = multi_server.predict(
        {"signature_name": "types", "inputs": {"b": b.tolist(), "d": d.tolist(), "k": k.tolist()}}, model="multi")
    assert code == 200, body
    out = body["outputs"]
    assert out["nb"] == want["nb"].tolist()
    np.testing.assert_array_equal(np.asarray(out["d2"]), want["d2"])  # doubles round-trip exactly
    assert out["k3"] == want["k3"].tolist()


def test_strings_raw_and_b64(multi_server):
    code, body = multi_server.predict(
        {"signature_name": "text", "instances": ["hi", {"b64": "AP8="}]}, model="multi")
    assert code == 200, body
    p = body["predictions"]
    # Aliases ending in _bytes come back base64-encoded; others raw.
    assert p[0] == {"s_bytes": {"b64": "aGk="}, "s_text": "hi"}
    assert p[1]["s_bytes"] == {"b64": "AP8="}


def test_strings_with_nul_bytes(multi_server):
    """A string that starts with U+0000 is an ordinary DT_STRING value (TF Serving takes any
    JSON string), raw or as base64."""
    code, body = multi_server.predict({"signature_name": "text", "instances": ["\u0000hi", "a\u0000b"]},
                                      model="multi")
    assert code == 200, body
    assert [p["s_bytes"] for p in body["predictions"]] == [{"b64": "AGhp"}, {"b64": "YQBi"}]
    code, body = multi_server.predict({"signature_name": "text", "inputs": {"s": ["\u0000ferroflow:NaN"]}},
                                      model="multi")
    assert code == 200, body
    assert body["outputs"]["s_bytes"] == [{"b64": "AGZlcnJvZmxvdzpOYU4="}]


def test_nan_and_infinity(multi_server):
    code, body = multi_server.request(
        "POST", "/v1/models/multi:predict", '{"instances": [[NaN, Infinity, -Infinity], [0.5, 1, 2]]}')
    assert code == 200, body
    y = body["predictions"]
    assert np.isnan(y[0][0]) and y[0][1] == float("inf") and y[0][2] == float("-inf")
    assert y[1] == [3.0, 4.0, 6.0]


def test_float_formatting_is_tensorflow_servings(multi_server):
    """6 significant digits (9 if that does not round-trip float32), `.0` on integral values."""
    st, _, raw = h.raw_http(multi_server.rest_port, h.http_request_bytes(
        "POST", "/v1/models/multi/versions/1:predict", b'{"instances": [[0, 1, 0.25]]}'))
    assert st == 200, raw
    assert json.loads(raw) == {"predictions": [[1.0, 3.0, 1.5]]}
    # (TF Serving pretty-prints; only the number tokens are compared.)
    assert re.findall(r"-?[0-9][0-9.e+-]*", raw.decode()) == ["1.0", "3.0", "1.5"]


def test_versions_and_labels(multi_server):
    """multi: versions 1 (bias 1) and 2 (bias 2) both served; labels stable=1, canary=2."""
    x = {"instances": [[0.0, 0.0, 0.0]]}
    for suffix, bias in [("", 2.0), ("/versions/1", 1.0), ("/versions/2", 2.0), ("/labels/stable", 1.0),
                         ("/labels/canary", 2.0)]:
        code, body = multi_server.predict(x, model="multi", suffix=suffix)
        assert code == 200, (suffix, body)
        assert body["predictions"] == [[bias] * 3], suffix


# -- status ------------------------------------------------------------------------------------
def _ok(version):
    return {"version": str(version), "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}


def test_status_json(main_server):
    code, body = main_server.get("/v1/models/m")
    assert code == 200
    assert body == {"model_version_status": [_ok(1)]}
    code, body = main_server.get("/v1/models/m/versions/1")
    assert code == 200
    assert body == {"model_version_status": [_ok(1)]}


def test_status_of_several_versions(multi_server):
    code, body = multi_server.get("/v1/models/multi")
    assert code == 200
    assert sorted(body["model_version_status"], key=lambda s: s["version"]) == [_ok(1), _ok(2)]
    code, body = multi_server.get("/v1/models/multi/labels/stable")
    assert code == 200
    # TF Serving's GetModelStatusImpl looks at model_spec.version only, so a label lists every
    # version; the labelled version alone is accepted too.
    got = sorted(body["model_version_status"], key=lambda s: s["version"])
    assert got in ([_ok(1)], [_ok(1), _ok(2)]), got


def test_status_errors(main_server):
    code, body = main_server.get("/v1/models/nope")
    assert code == 404 and "error" in body
    code, body = main_server.get("/v1/models/m/versions/9")
    assert code == 404 and "error" in body


# -- metadata ----------------------------------------------------------------------------------
def saved_model_signatures(model_dir):
    from tensorflow.core.protobuf import saved_model_pb2

    sm = saved_model_pb2.SavedModel()
    sm.ParseFromString((model_dir / "saved_model.pb").read_bytes())
    (mg,) = [m for m in sm.meta_graphs if "serve" in m.meta_info_def.tags]
    return mg.signature_def


def expected_signature_json(sig):
    """A SignatureDef as TensorFlow Serving prints it (proto field names, defaults printed)."""
    d = json_format.MessageToDict(sig, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
    d.pop("defaults", None)
    return d


@pytest.mark.parametrize("model,server_fixture,name", [
    ("cnn", "main_server", "m"), ("tf1", "multi_server", "tf1"), ("loop", "multi_server", "loop")])
def test_metadata_json(request, models, model, server_fixture, name):
    server = request.getfixturevalue(server_fixture)
    code, body = server.get(f"/v1/models/{name}/metadata")
    assert code == 200, body
    assert set(body) == {"model_spec", "metadata"}
    assert body["model_spec"] == {"name": name, "signature_name": "", "version": "1"}
    assert list(body["metadata"]) == ["signature_def"]
    assert list(body["metadata"]["signature_def"]) == ["signature_def"]
    got = body["metadata"]["signature_def"]["signature_def"]
    want = {k: expected_signature_json(v) for k, v in saved_model_signatures(models[model]).items()}
    for key in sorted(set(want) & set(got)):
        g = dict(got[key])
        assert g.pop("defaults", {}) == {}, key
        assert g == want[key], key
    # TF Serving lists every SignatureDef of the meta graph, __saved_model_init_op included.
    assert sorted(got) == sorted(want)


def test_metadata_of_a_version(multi_server):
    code, body = multi_server.get("/v1/models/multi/versions/1/metadata")
    assert code == 200, body
    assert body["model_spec"]["version"] == "1"
    code, body = multi_server.get("/v1/models/multi/metadata")
    assert body["model_spec"]["version"] == "2"
    code, body = multi_server.get("/v1/models/multi/versions/3/metadata")
    assert code == 404, body


def test_lenient_where_tf_serving_is(main_server, models, tfref, cnn_x):
    """TF Serving's JSON reader (rapidjson, kParseStopWhenDoneFlag) stops after the document and
    ignores top-level keys it does not know, and columnar `inputs` keys the signature lacks; a
    drop-in answers these 200 too."""
    want = tfref.run(models["cnn"], keras_tensor=cnn_x[:1])["output_0"]
    rows = cnn_x[:1].tolist()
    cases = {"trailing data": json.dumps({"instances": rows}) + " trailing",
             "unknown top-level key": json.dumps({"instances": rows, "model_version": 3}),
             "unknown key in inputs": json.dumps({"inputs": {"keras_tensor": rows, "unused": [1]}})}
    refused = {}
    for name, body in cases.items():
        code, got = main_server.predict(body)
        if code != 200:
            refused[name] = (code, got)
            continue
        close(got.get("predictions", got.get("outputs")), want)
    assert not refused, refused
