"""Classify, Regress and MultiInference over tf.Examples (REST :classify / :regress, gRPC), against
TensorFlow running the same classification/regression signatures on the serialized examples.
`cls` parses its input with ParseExampleV2 (harness.build_classify_model); `plain` does not
(harness.build_plain_classify_model), so the API plumbing is checked even without that kernel."""
import grpc
import numpy as np
import pytest
from tensorflow_serving.apis import classification_pb2, inference_pb2, input_pb2, regression_pb2

import harness as h
from conftest import prediction_stub
from test_grpc import TIMEOUT, code_of

EXAMPLES = [{"x": [1.5, -0.5], "k": 2}, {"x": [0.25, 1.0]}, {"x": [-2.0, 0.75], "k": -1}]
CONTEXT = {"k": 3}


def serialized(examples, context=None):
    """What TF Serving feeds the signature: each example with the context merged in."""
    out = []
    for e in examples:
        merged = dict(context or {})
        merged.update(e)
        out.append(h.example(merged).SerializeToString())
    return np.array(out, dtype=object)


def tf_classify(tfref, models, examples, context=None, signature="classify"):
    r = tfref.run(models["cls"], signature, inputs=serialized(examples, context))
    return r["classes"], r["scores"]


def tf_regress(tfref, models, examples, context=None):
    return tfref.run(models["cls"], "regress", inputs=serialized(examples, context))["outputs"]


# -- REST --------------------------------------------------------------------------------------
@pytest.mark.parametrize("context", [None, CONTEXT])
def test_rest_classify(cls_server, models, tfref, context):
    body = {"signature_name": "classify", "examples": EXAMPLES}
    if context:
        body["context"] = context
    code, got = cls_server.post("/v1/models/cls:classify", body)
    assert code == 200, got
    classes, scores = tf_classify(tfref, models, EXAMPLES, context)
    assert list(got) == ["results"]
    assert len(got["results"]) == len(EXAMPLES)
    for row, cl, sc in zip(got["results"], classes, scores):
        assert [lab for lab, _ in row] == [c.decode() for c in cl]
        np.testing.assert_allclose([s for _, s in row], sc, rtol=1e-5, atol=1e-6)


def test_rest_classify_default_signature(cls_server, models, tfref):
    code, got = cls_server.post("/v1/models/cls:classify", {"examples": EXAMPLES[:1]})
    assert code == 200, got
    _, scores = tf_classify(tfref, models, EXAMPLES[:1], signature="serving_default")
    np.testing.assert_allclose([s for _, s in got["results"][0]], scores[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("context", [None, CONTEXT])
def test_rest_regress(cls_server, models, tfref, context):
    body = {"signature_name": "regress", "examples": EXAMPLES}
    if context:
        body["context"] = context
    code, got = cls_server.post("/v1/models/cls:regress", body)
    assert code == 200, got
    assert list(got) == ["results"]
    np.testing.assert_allclose(got["results"], tf_regress(tfref, models, EXAMPLES, context), rtol=1e-5, atol=1e-6)


def test_rest_classify_errors(cls_server):
    cases = {
        "regression signature": ("classify", {"signature_name": "regress", "examples": EXAMPLES}, 400),
        "classification signature": ("regress", {"signature_name": "classify", "examples": EXAMPLES}, 400),
        "unknown signature": ("classify", {"signature_name": "nope", "examples": EXAMPLES}, 400),
        "mixed value types": ("classify", {"examples": [{"x": [1.5, "a"]}]}, 400),
        "object value": ("classify", {"examples": [{"x": {"y": 1}}]}, 400),
        "no examples": ("classify", {"signature_name": "classify"}, 400),
        # The model's own failure (x missing, no default: ParseExample fails).
        "required feature missing": ("classify", {"examples": [{"k": 1}]}, 400),
        "unknown model": ("classify", {"examples": EXAMPLES}, 404),
    }
    got = {name: cls_server.post(f"/v1/models/{'nope' if name == 'unknown model' else 'cls'}:{verb}", body)[0]
           for name, (verb, body, _) in cases.items()}
    assert got == {name: want for name, (_, _, want) in cases.items()}
    assert cls_server.healthy("cls")


# -- gRPC --------------------------------------------------------------------------------------
def grpc_input(examples, context=None):
    i = input_pb2.Input()
    if context is None:
        for e in examples:
            i.example_list.examples.add().CopyFrom(h.example(e))
    else:
        for e in examples:
            i.example_list_with_context.examples.add().CopyFrom(h.example(e))
        i.example_list_with_context.context.CopyFrom(h.example(context))
    return i


@pytest.mark.parametrize("context", [None, CONTEXT])
def test_grpc_classify(cls_server, models, tfref, context):
    req = classification_pb2.ClassificationRequest()
    req.model_spec.name = "cls"
    req.model_spec.signature_name = "classify"
    req.input.CopyFrom(grpc_input(EXAMPLES, context))
    r = prediction_stub(cls_server).Classify(req, timeout=TIMEOUT)
    classes, scores = tf_classify(tfref, models, EXAMPLES, context)
    assert len(r.result.classifications) == len(EXAMPLES)
    for c, cl, sc in zip(r.result.classifications, classes, scores):
        assert [x.label for x in c.classes] == [v.decode() for v in cl]
        np.testing.assert_allclose([x.score for x in c.classes], sc, rtol=1e-5, atol=1e-6)
    assert r.model_spec.name == "cls" and r.model_spec.version.value == 1
    assert r.model_spec.signature_name == "classify"


@pytest.mark.parametrize("context", [None, CONTEXT])
def test_grpc_regress(cls_server, models, tfref, context):
    req = regression_pb2.RegressionRequest()
    req.model_spec.name = "cls"
    req.model_spec.signature_name = "regress"
    req.input.CopyFrom(grpc_input(EXAMPLES, context))
    r = prediction_stub(cls_server).Regress(req, timeout=TIMEOUT)
    np.testing.assert_allclose([x.value for x in r.result.regressions], tf_regress(tfref, models, EXAMPLES, context),
                               rtol=1e-5, atol=1e-6)


def test_grpc_multi_inference(cls_server, models, tfref):
    req = inference_pb2.MultiInferenceRequest()
    for sig, method in [("classify", "tensorflow/serving/classify"), ("regress", "tensorflow/serving/regress")]:
        t = req.tasks.add()
        t.model_spec.name = "cls"
        t.model_spec.signature_name = sig
        t.method_name = method
    req.input.CopyFrom(grpc_input(EXAMPLES))
    r = prediction_stub(cls_server).MultiInference(req, timeout=TIMEOUT)
    assert len(r.results) == 2
    _, scores = tf_classify(tfref, models, EXAMPLES)
    got = [[x.score for x in c.classes] for c in r.results[0].classification_result.classifications]
    np.testing.assert_allclose(got, scores, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose([x.value for x in r.results[1].regression_result.regressions],
                               tf_regress(tfref, models, EXAMPLES), rtol=1e-5, atol=1e-6)
    assert r.results[0].model_spec.signature_name == "classify"


def classify_request(model, sig, examples):
    """A ClassificationRequest of `examples` (none: no input) to `model`'s signature `sig`."""
    req = classification_pb2.ClassificationRequest()
    req.model_spec.name = model
    req.model_spec.signature_name = sig
    if examples:
        req.input.CopyFrom(grpc_input(examples))
    return req


def test_grpc_classify_errors(cls_server):
    stub = prediction_stub(cls_server)

    def cls_req(sig="classify", examples=EXAMPLES, model="cls"):
        return classify_request(model, sig, examples)

    assert code_of(stub.Classify, cls_req("nope")) == grpc.StatusCode.INVALID_ARGUMENT
    assert code_of(stub.Classify, cls_req("regress")) == grpc.StatusCode.INVALID_ARGUMENT
    assert code_of(stub.Classify, cls_req(examples=[])) == grpc.StatusCode.INVALID_ARGUMENT
    assert code_of(stub.Classify, cls_req(model="nope")) == grpc.StatusCode.NOT_FOUND
    # MultiInference: tasks on two models, or the same signature twice -> INVALID_ARGUMENT.
    req = inference_pb2.MultiInferenceRequest()
    for _ in range(2):
        t = req.tasks.add()
        t.model_spec.name = "cls"
        t.model_spec.signature_name = "classify"
        t.method_name = "tensorflow/serving/classify"
    req.input.CopyFrom(grpc_input(EXAMPLES))
    assert code_of(stub.MultiInference, req) == grpc.StatusCode.INVALID_ARGUMENT
    assert cls_server.healthy("cls")


# -- the plumbing, on a model that does not parse its examples ------------------------------------
def plain_scores(n):
    return [[0.1 + 0.01 * i, 0.7 + 0.01 * i, 0.2 + 0.01 * i] for i in range(n)]


@pytest.mark.parametrize("context", [None, CONTEXT])
def test_rest_classify_and_regress_plumbing(plain_server, context):
    body = {"examples": EXAMPLES}
    if context:
        body["context"] = context
    code, got = plain_server.post("/v1/models/plain:classify", body)
    assert code == 200, got
    assert list(got) == ["results"]
    assert [[lab for lab, _ in r] for r in got["results"]] == [["cat", "dog", "eel"]] * len(EXAMPLES)
    np.testing.assert_allclose([[s for _, s in r] for r in got["results"]], plain_scores(len(EXAMPLES)), rtol=1e-6)
    code, got = plain_server.post("/v1/models/plain:regress", dict(body, signature_name="regress"))
    assert code == 200, got
    np.testing.assert_allclose(got["results"], [1.5 + 2 * i for i in range(len(EXAMPLES))], rtol=1e-6)
    # Scores without classes: TF Serving writes each class's label as "" (REST: ["", score]).
    code, got = plain_server.post("/v1/models/plain:classify", dict(body, signature_name="scores_only"))
    assert code == 200, got
    assert [[lab for lab, _ in r] for r in got["results"]] == [["", "", ""]] * len(EXAMPLES)


PLUMBING_ERRORS = {
    "classify on a regression signature": ("classify", {"signature_name": "regress", "examples": EXAMPLES}),
    "classify on a predict signature": ("classify", {"signature_name": "predict", "examples": EXAMPLES}),
    "regress on a classification signature": ("regress", {"signature_name": "classify", "examples": EXAMPLES}),
    "unknown signature": ("classify", {"signature_name": "nope", "examples": EXAMPLES}),
    "no examples key": ("classify", {"signature_name": "classify"}),
    "empty examples": ("classify", {"examples": []}),
    "examples not a list": ("classify", {"examples": {"x": 1}}),
    "mixed value types": ("classify", {"examples": [{"x": [1.5, "a"]}]}),
    "nested list": ("classify", {"examples": [{"x": [[1.5]]}]}),
    "null value": ("classify", {"examples": [{"x": None}]}),
    "object value": ("classify", {"examples": [{"x": {"y": 1}}]}),
    "example not an object": ("classify", {"examples": [5]}),
    "context not an object": ("classify", {"context": 5, "examples": EXAMPLES}),
    "uint64 value": ("classify", {"examples": [{"x": 2 ** 64 - 1}]}),
    "malformed JSON": ("classify", "{bad json"),
}


def test_rest_plumbing_errors(plain_server):
    got = {name: plain_server.post(f"/v1/models/plain:{verb}", body) for name, (verb, body) in PLUMBING_ERRORS.items()}
    assert {k: v[0] for k, v in got.items()} == {k: 400 for k in got}, {k: v for k, v in got.items() if v[0] != 400}
    # Odd but valid examples: bools (int64), b64 strings, empty lists, unicode.
    code, body = plain_server.post("/v1/models/plain:classify",
                                   {"examples": [{"a": True, "b": {"b64": "AP8="}, "c": [], "d": "é"}]})
    assert code == 200, body
    assert plain_server.healthy("plain")


@pytest.mark.parametrize("context", [None, CONTEXT])
def test_grpc_classify_regress_multi_plumbing(plain_server, context):
    stub = prediction_stub(plain_server)
    req = classification_pb2.ClassificationRequest()
    req.model_spec.name = "plain"
    req.input.CopyFrom(grpc_input(EXAMPLES, context))
    r = stub.Classify(req, timeout=TIMEOUT)
    assert [[c.label for c in x.classes] for x in r.result.classifications] == [["cat", "dog", "eel"]] * 3
    np.testing.assert_allclose([[c.score for c in x.classes] for x in r.result.classifications], plain_scores(3),
                               rtol=1e-6)
    assert (r.model_spec.name, r.model_spec.signature_name, r.model_spec.version.value) == \
        ("plain", "serving_default", 1)
    rreq = regression_pb2.RegressionRequest()
    rreq.model_spec.name = "plain"
    rreq.model_spec.signature_name = "regress"
    rreq.input.CopyFrom(grpc_input(EXAMPLES, context))
    rr = stub.Regress(rreq, timeout=TIMEOUT)
    np.testing.assert_allclose([x.value for x in rr.result.regressions], [1.5, 3.5, 5.5], rtol=1e-6)
    m = inference_pb2.MultiInferenceRequest()
    for sig, method in [("classify", "tensorflow/serving/classify"), ("regress", "tensorflow/serving/regress")]:
        t = m.tasks.add()
        t.model_spec.name = "plain"
        t.model_spec.signature_name = sig
        t.method_name = method
    m.input.CopyFrom(grpc_input(EXAMPLES, context))
    mr = stub.MultiInference(m, timeout=TIMEOUT)
    assert len(mr.results) == 2
    assert len(mr.results[0].classification_result.classifications) == 3
    np.testing.assert_allclose([x.value for x in mr.results[1].regression_result.regressions], [1.5, 3.5, 5.5])


def test_grpc_plumbing_errors(plain_server):
    stub = prediction_stub(plain_server)

    def cls_req(sig="classify", examples=EXAMPLES, model="plain"):
        return classify_request(model, sig, examples)

    cases = {
        # TF Serving's classifier.cc: "No signature was found with the name" is INVALID_ARGUMENT.
        "unknown signature": (cls_req("nope"), grpc.StatusCode.INVALID_ARGUMENT),
        "a regression signature": (cls_req("regress"), grpc.StatusCode.INVALID_ARGUMENT),
        "a predict signature": (cls_req("predict"), grpc.StatusCode.INVALID_ARGUMENT),
        "no examples": (cls_req(examples=[]), grpc.StatusCode.INVALID_ARGUMENT),
        "unknown model": (cls_req(model="nope"), grpc.StatusCode.NOT_FOUND),
    }
    got = {name: code_of(stub.Classify, req) for name, (req, _) in cases.items()}
    assert got == {name: code for name, (_, code) in cases.items()}
    m = inference_pb2.MultiInferenceRequest()
    for _ in range(2):
        t = m.tasks.add()
        t.model_spec.name = "plain"
        t.model_spec.signature_name = "classify"
        t.method_name = "tensorflow/serving/classify"
    m.input.CopyFrom(grpc_input(EXAMPLES))
    assert code_of(stub.MultiInference, m) == grpc.StatusCode.INVALID_ARGUMENT
    assert plain_server.healthy("plain")
