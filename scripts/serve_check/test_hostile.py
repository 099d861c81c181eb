"""(c) Never down because of a request: each hostile request gets TensorFlow Serving's status code
(or, for broken HTTP, a 4xx or a closed connection), and afterwards the process still runs and a
normal request still succeeds. The last test also checks the log for panics."""
import gzip
import json
import signal
import socket
import struct
import threading
import time

import grpc
import numpy as np
import pytest
from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2, types_pb2

import harness as h
from conftest import MAX_BODY, prediction_stub
from test_grpc import TIMEOUT, code_of, predict_request

ONE = np.random.default_rng(5).uniform(0, 1, (1, 32, 32, 3)).astype(np.float32)
ONE_BODY = json.dumps({"instances": ONE.tolist()})


def normal_request_works(server):
    code, body = server.predict(ONE_BODY)
    assert code == 200, body
    assert np.asarray(body["predictions"]).shape == (1, 10)
    assert server.alive()


def post_raw(server, body, path="/v1/models/m:predict", headers=None, **kw):
    return h.raw_http(server.rest_port, h.http_request_bytes("POST", path, body, headers), **kw)


def assert_error(code, body, want):
    assert code == want, (code, body)
    if want != 404 or isinstance(body, dict):
        assert isinstance(body, dict) and isinstance(body.get("error"), str) and body["error"], body


# -- bad JSON and bad tensors: 400 -----------------------------------------------------------------
BAD_BODIES = {
    "malformed JSON": '{"instances": [[1, 2',
    "not an object": "[1, 2, 3]",
    "null": "null",
    "empty body": "",
    "empty instances": '{"instances": []}',
    "instances not a list": '{"instances": 5}',
    "both instances and inputs": json.dumps({"instances": ONE.tolist(), "inputs": ONE.tolist()}),
    "neither": '{"signature_name": "serving_default"}',
    "signature_name not a string": json.dumps({"signature_name": 5, "instances": ONE.tolist()}),
    "strings for floats": json.dumps({"instances": [[[["a"] * 3] * 32] * 32]}),
    "bools for floats": json.dumps({"instances": [[[[True] * 3] * 32] * 32]}),
    "nulls for floats": json.dumps({"instances": [[[[None] * 3] * 32] * 32]}),
    "object leaves": json.dumps({"instances": [[[[{"x": 1}] * 3] * 32] * 32]}),
    "rank too low": '{"instances": [[1.0, 2.0, 3.0]]}',
    "rank too high": json.dumps({"instances": [[[[[0.5]] * 3] * 32] * 32]}),
    "wrong inner dim": json.dumps({"instances": np.zeros((1, 31, 32, 3)).tolist()}),
    "ragged rows": json.dumps({"instances": [np.zeros((32, 32, 3)).tolist(), np.zeros((32, 31, 3)).tolist()]}),
    "ragged deep": json.dumps({"instances": [[[[0.0, 0.0, 0.0]] * 32] * 31 + [[[0.0, 0.0]] * 32]]}),
    "scalar instance": '{"instances": [1.0]}',
    "unknown input name": json.dumps({"inputs": {"nope": ONE.tolist()}}),
    "named rows missing input": '{"instances": [{"nope": 1}]}',
    "mixed named and bare rows": json.dumps({"instances": [{"keras_tensor": ONE[0].tolist()}, ONE[0].tolist()]}),
    "unknown signature": json.dumps({"signature_name": "nope", "instances": ONE.tolist()}),
    "number out of range": '{"instances": [[[[1e999, 0, 0]]]]}',
    "string NaN for a float": '{"instances": [[[["NaN", 0, 0]]]]}',
    "NUL-prefixed string for a float": json.dumps({"instances": [[[["\u0000ferroflow:NaN"] * 3] * 32] * 32]}),
}


@pytest.mark.parametrize("name", list(BAD_BODIES))
def test_bad_body_is_400(main_server, name):
    code, body = main_server.predict(BAD_BODIES[name])
    assert_error(code, body, 400)
    assert main_server.alive()


def test_bad_bodies_then_normal(main_server):
    normal_request_works(main_server)


def test_deep_nesting(main_server):
    for depth in (200, 100_000):
        code, body = main_server.predict('{"instances": ' + "[" * depth + "]" * depth + "}")
        assert_error(code, body, 400)
    code, body = main_server.predict('{"instances": [' + '{"a":' * 50_000 + "1" + "}" * 50_000 + "]}")
    assert_error(code, body, 400)
    normal_request_works(main_server)


def test_non_utf8_body(main_server):
    st, _, raw = post_raw(main_server, b'{"instances": [[\xff\xfe\x80]]}')
    assert st == 400, raw
    st, _, raw = post_raw(main_server, b'{"signature_name": "\xc3\x28", "instances": [1]}')
    assert st == 400, raw
    normal_request_works(main_server)


def test_dtype_rules(multi_server):
    """ints need JSON integers (1.0 -> 400), int32 range checked, strings where numbers go -> 400."""
    for body in ('{"signature_name": "two", "instances": [{"a": [1, 2, 3], "n": 1.0}]}',
                 '{"signature_name": "two", "instances": [{"a": [1, 2, 3], "n": 4294967296}]}',
                 '{"signature_name": "two", "instances": [{"a": [1, 2, 3], "n": "1"}]}',
                 '{"signature_name": "two", "instances": [{"a": [1, 2, 3]}]}',
                 '{"signature_name": "two", "instances": [{"a": [1, 2, 3], "n": 1, "z": 2}]}',
                 '{"signature_name": "two", "inputs": {"a": [[1, 2, 3]]}}',
                 '{"signature_name": "two", "instances": [{"a": [1, 2, 3], "n": [1, 2]}]}',
                 '{"signature_name": "types", "instances": [{"b": 1, "d": [1, 2], "k": 1}]}',
                 '{"signature_name": "text", "instances": [{"b64": "***"}]}',
                 '{"signature_name": "text", "instances": [5]}'):
        code, got = multi_server.predict(body, model="multi")
        assert_error(code, got, 400)
    code, got = multi_server.predict('{"signature_name": "two", "instances": [{"a": [1, 2, 3], "n": 2147483647}]}',
                                     model="multi")
    assert code == 200, got


# -- unknown model / version / label / signature -----------------------------------------------------
def test_unknown_names(main_server):
    cases = [
        ("/v1/models/nope:predict", 404),
        ("/v1/models/m/versions/7:predict", 404),
        ("/v1/models/m/labels/nope:predict", 400),
        ("/v1/models/m/versions/x:predict", 400),
        ("/v1/models/m/versions/99999999999999999999:predict", 400),
        ("/v1/models/m/versions/1/labels/a:predict", 400),
        ("/v1/models/m:nope", 400),
        ("/v1/models/m/extra:predict", 400),
        ("/v1/models/:predict", 400),
        ("/v1/other", 400),
    ]
    for path, want in cases:
        code, body = main_server.post(path, ONE_BODY)
        assert_error(code, body, want)
    code, _ = main_server.post("/v2/models/m:predict", ONE_BODY)
    assert code == 404
    code, _ = main_server.get("/")
    assert code == 404
    for method in ("PUT", "DELETE", "PATCH"):
        code, body = main_server.request(method, "/v1/models/m:predict", ONE_BODY)
        assert_error(code, body, 400)
    code, body = main_server.get("/v1/models/m:predict")
    assert_error(code, body, 400)
    normal_request_works(main_server)


def test_long_path(main_server):
    st, _, _ = h.raw_http(main_server.rest_port, h.http_request_bytes("GET", "/v1/models/" + "a" * 200_000))
    assert st in (0, 400, 404, 414, 431), st
    normal_request_works(main_server)


# -- bodies too large ----------------------------------------------------------------------------------
def test_body_over_limit(main_server):
    big = b'{"instances": [' + b"0.5," * (MAX_BODY // 4) + b"0.5]}"
    st, _, raw = post_raw(main_server, big)
    assert st == 413, raw[:300]
    # Chunked (no Content-Length): the limit still holds.
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(big[i:i + 65536]), big[i:i + 65536]) for i in range(0, len(big), 65536))
    st, _, raw = post_raw(main_server, chunks + b"0\r\n\r\n",
                          headers={"Content-Length": None, "Transfer-Encoding": "chunked"})
    assert st == 413, raw[:300]
    normal_request_works(main_server)


def test_huge_claimed_content_length(main_server):
    """A claimed length past the limit is refused at once, without waiting for the body."""
    for claimed in (str(10 ** 15), str(2 ** 63 - 1)):
        t = time.monotonic()
        st, _, raw = h.raw_http(main_server.rest_port, h.http_request_bytes(
            "POST", "/v1/models/m:predict", b'{"instances": [', {"Content-Length": claimed}), timeout=20)
        assert st == 413, raw
        assert time.monotonic() - t < 10
    for claimed in ("99999999999999999999999", "-5", "abc", "12, 13"):
        st, _, raw = h.raw_http(main_server.rest_port, h.http_request_bytes(
            "POST", "/v1/models/m:predict", b"{}", {"Content-Length": claimed}), timeout=20)
        assert st in (0, 400, 413), (claimed, st, raw)
    normal_request_works(main_server)


def test_gzip_bomb(main_server):
    """50 MB of JSON whitespace in 50 KB of gzip: refused past the limit, memory stays bounded."""
    rss_before = main_server.rss_mb()
    bomb = gzip.compress(b'{"instances": ' + b" " * 50_000_000 + ONE_BODY[len('{"instances": '):].encode(),
                         compresslevel=9)
    assert len(bomb) < 200_000
    st, _, raw = post_raw(main_server, bomb, headers={"Content-Encoding": "gzip"})
    assert st == 413, raw[:300]
    assert main_server.rss_mb() < rss_before + 512
    # Not gzip at all, or truncated gzip, under Content-Encoding: gzip -> 400.
    st, _, raw = post_raw(main_server, b"not gzip", headers={"Content-Encoding": "gzip"})
    assert st == 400, raw
    st, _, raw = post_raw(main_server, gzip.compress(ONE_BODY.encode())[:-20], headers={"Content-Encoding": "gzip"})
    assert st == 400, raw
    normal_request_works(main_server)


# -- slow, vanishing and broken clients -------------------------------------------------------------
def test_slow_client_stalls_then_vanishes(main_server):
    body = ONE_BODY.encode()
    slow = []
    for _ in range(8):
        s = socket.create_connection((h.HOST, main_server.rest_port))
        s.sendall(h.http_request_bytes("POST", "/v1/models/m:predict", body)[: 200 + len(body) // 2])
        slow.append(s)
    # Half-body clients hold connections; others are still answered promptly.
    t = time.monotonic()
    for _ in range(3):
        normal_request_works(main_server)
    assert time.monotonic() - t < 10
    time.sleep(1.0)
    for s in slow:
        s.close()
    normal_request_works(main_server)


def test_slow_headers(main_server):
    s = socket.create_connection((h.HOST, main_server.rest_port))
    s.sendall(b"POST /v1/models/m:predict HTTP/1.1\r\nHost: x\r\n")
    normal_request_works(main_server)
    s.close()


def test_client_disconnects_mid_request(main_server):
    big = json.dumps({"instances": np.random.default_rng(1).uniform(0, 1, (64, 32, 32, 3)).tolist()}).encode()
    assert len(big) < MAX_BODY
    for i in range(12):
        s = socket.create_connection((h.HOST, main_server.rest_port))
        data = h.http_request_bytes("POST", "/v1/models/m:predict", big)
        if i % 3 == 0:
            s.sendall(data[: len(data) // 3])  # mid-body
        else:
            s.sendall(data)  # whole request: the answer has nowhere to go
        if i % 2:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with RST
        s.close()
    time.sleep(0.5)
    normal_request_works(main_server)


def test_many_idle_connections(main_server):
    socks = [socket.create_connection((h.HOST, main_server.rest_port)) for _ in range(200)]
    try:
        normal_request_works(main_server)
    finally:
        for s in socks:
            s.close()
    normal_request_works(main_server)


def test_broken_http(main_server):
    port = main_server.rest_port
    garbage = [
        b"GARBAGE\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(range(256)),  # a TLS ClientHello
        b"POST /v1/models/m:predict HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZZ\r\nabc\r\n0\r\n\r\n",
        b"POST /v1/models/m:predict HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST /v1/models/m:predict HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 200_000 + b"\r\n\r\n",
        b"POST /v1/models/m:predict HTTP/1.1\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(5000)) + b"\r\n",
        b"\x00" * 1000,
        b"GET /v1/models/m HTTP/9.9\r\n\r\n",
    ]
    for data in garbage:
        st, _, _ = h.raw_http(port, data, timeout=20, shut_write=True)
        assert st in (0, 400, 413, 414, 431, 501, 505), (data[:60], st)
    normal_request_works(main_server)


def test_pipelined_and_keep_alive(main_server):
    """Two requests in one write on a keep-alive connection: two answers, in order."""
    one = h.http_request_bytes("POST", "/v1/models/m:predict", ONE_BODY.encode(), close=False)
    bad = h.http_request_bytes("POST", "/v1/models/m:predict", b"{bad", close=False)
    c = h.RawConn(main_server.rest_port)
    try:
        c.send(one + bad + one)
        codes = [c.read_response()[0] for _ in range(3)]
    finally:
        c.close()
    assert codes == [200, 400, 200]


def test_expect_100_continue(main_server):
    c = h.RawConn(main_server.rest_port, timeout=5)
    try:
        body = ONE_BODY.encode()
        c.send(h.http_request_bytes("POST", "/v1/models/m:predict", b"", {"Content-Length": str(len(body)),
                                                                           "Expect": "100-continue"}))
        st, _, raw = c.read_response()
        assert st == 100, (st, raw)
        c.send(body)
        st, _, raw = c.read_response()
        assert st == 200, raw
    finally:
        c.close()


# -- the model fails, or runs too long --------------------------------------------------------------
def test_model_failure_is_400(multi_server):
    code, body = multi_server.predict({"signature_name": "fail", "instances": [0, 5]}, model="multi")
    assert_error(code, body, 400)
    code, body = multi_server.predict({"signature_name": "fail", "instances": [2, 0]}, model="multi")
    assert code == 200 and body == {"predictions": [30.0, 10.0]}, body
    code, body = multi_server.predict({"signature_name": "fail", "instances": [-1]}, model="multi")
    assert_error(code, body, 400)
    assert multi_server.healthy("multi")


@pytest.fixture(scope="module")
def deadline_server(tmp_path_factory, models):
    work = tmp_path_factory.mktemp("deadline")
    h.copy_version(models["loop"], work / "loop", 1)
    try:
        server = h.start_server(work, model_name="loop", base_path=work / "loop",
                                extra=["--rest_api_timeout_in_ms=1000"])
    except h.ServerError as e:
        pytest.fail(str(e), pytrace=False)
    yield server
    server.stop()
    server.stop(signal.SIGKILL)


LOOP_FOREVER = {"inputs": {"x": [[0.5, 1.0, -2.0]], "n": 2_000_000_000}}


def test_deadline_504_and_run_cancelled(deadline_server):
    """A run past --rest_api_timeout_in_ms: 504 (DEADLINE_EXCEEDED), and the run is really stopped
    (the server's CPU use drops back), so such requests cannot pile up."""
    t = time.monotonic()
    code, body = deadline_server.predict(LOOP_FOREVER, model="loop", timeout=20)
    assert_error(code, body, 504)
    assert time.monotonic() - t < 10
    time.sleep(1.0)
    cpu = deadline_server.cpu_seconds()
    time.sleep(2.0)
    used = deadline_server.cpu_seconds() - cpu
    assert used < 0.5, f"the cancelled run still burns CPU: {used:.2f} s of CPU in 2 s"
    code, body = deadline_server.predict({"inputs": {"x": [[0.5, 1.0, -2.0]], "n": 3}}, model="loop")
    assert code == 200, body


def test_grpc_client_deadline(deadline_server):
    """The client's gRPC deadline bounds the run (DEADLINE_EXCEEDED) and the run is stopped."""
    stub = prediction_stub(deadline_server)
    req = predict_request("loop", {"x": np.array([[0.5, 1.0, -2.0]], np.float32), "n": np.int32(2_000_000_000)})
    with pytest.raises(grpc.RpcError) as e:
        stub.Predict(req, timeout=0.5)
    assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    time.sleep(1.5)
    cpu = deadline_server.cpu_seconds()
    time.sleep(2.0)
    used = deadline_server.cpu_seconds() - cpu
    assert used < 0.5, f"the abandoned run still burns CPU: {used:.2f} s of CPU in 2 s"
    r = stub.Predict(predict_request("loop", {"x": np.array([[0.5, 1.0, -2.0]], np.float32), "n": np.int32(3)}),
                     timeout=TIMEOUT)
    assert set(r.outputs) == {"y", "steps"}


# -- gRPC hostility ---------------------------------------------------------------------------------
def _shape(*dims):
    return tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=d) for d in dims])


def test_grpc_garbage_tensors(main_server):
    stub = prediction_stub(main_server)
    bad = {
        "content too short": tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, tensor_shape=_shape(1, 32, 32, 3),
                                                    tensor_content=b"\x00" * 5),
        "content too long": tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, tensor_shape=_shape(1, 32, 32, 3),
                                                   tensor_content=b"\x00" * (4 * 3072 + 4)),
        "huge dims, no data": tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, tensor_shape=_shape(2 ** 40, 32, 32, 3)),
        "huge dims, float_val": tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT,
                                                       tensor_shape=_shape(2 ** 40, 32, 32, 3), float_val=[1.0]),
        "dims overflow int64": tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT,
                                                      tensor_shape=_shape(2 ** 62, 2 ** 62, 32, 3)),
        "negative dim": tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, tensor_shape=_shape(-5, 32, 32, 3)),
        "dim -1": tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, tensor_shape=_shape(-1, 32, 32, 3)),
        "unknown rank": tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT,
                                               tensor_shape=tensor_shape_pb2.TensorShapeProto(unknown_rank=True)),
        "invalid dtype": tensor_pb2.TensorProto(dtype=types_pb2.DT_INVALID, tensor_shape=_shape(1, 32, 32, 3)),
        "dtype 9999": tensor_pb2.TensorProto(dtype=9999, tensor_shape=_shape(1, 32, 32, 3)),
        "resource dtype": tensor_pb2.TensorProto(dtype=types_pb2.DT_RESOURCE, tensor_shape=_shape(1)),
        "string dtype, float shape": tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING,
                                                            tensor_shape=_shape(1, 32, 32, 3), string_val=[b"\xff"]),
        "half dtype": tensor_pb2.TensorProto(dtype=types_pb2.DT_HALF, tensor_shape=_shape(1, 32, 32, 3),
                                             half_val=[1]),
    }
    got = {}
    for name, t in bad.items():
        with pytest.raises(grpc.RpcError) as e:
            stub.Predict(predict_request("m", {"keras_tensor": t}), timeout=TIMEOUT)
        got[name] = e.value.code()
        assert main_server.alive(), name
    assert got == {name: grpc.StatusCode.INVALID_ARGUMENT for name in bad}
    normal_request_works(main_server)


def test_grpc_garbage_message_bytes(main_server):
    ch = grpc.insecure_channel(f"{h.HOST}:{main_server.grpc_port}")
    try:
        call = ch.unary_unary("/tensorflow.serving.PredictionService/Predict",
                              request_serializer=lambda b: b, response_deserializer=lambda b: b)
        for data in (b"\xff" * 64, b"\x0a\xff\xff\xff\xff\x0f", b"\x12" + b"\xff" * 9 + b"\x01", bytes(range(256))):
            with pytest.raises(grpc.RpcError) as e:
                call(data, timeout=TIMEOUT)
            assert e.value.code() in (grpc.StatusCode.INTERNAL, grpc.StatusCode.INVALID_ARGUMENT), e.value
        unknown = ch.unary_unary("/tensorflow.serving.PredictionService/Nope",
                                 request_serializer=lambda b: b, response_deserializer=lambda b: b)
        with pytest.raises(grpc.RpcError) as e:
            unknown(b"", timeout=TIMEOUT)
        assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
    finally:
        ch.close()
    # Not even HTTP/2: a raw HTTP/1.1 request on the gRPC port.
    h.raw_http(main_server.grpc_port, h.http_request_bytes("GET", "/"), timeout=3)
    normal_request_works(main_server)
    assert code_of(prediction_stub(main_server).Predict, predict_request("nope", {"keras_tensor": ONE})) \
        == grpc.StatusCode.NOT_FOUND


def test_grpc_concurrent_abandoned_calls(main_server):
    """Calls whose client gives up at once (deadline 1 ms) or cancels: the server is unaffected."""
    stub = prediction_stub(main_server)
    x = np.random.default_rng(2).uniform(0, 1, (64, 32, 32, 3)).astype(np.float32)
    futures = [stub.Predict.future(predict_request("m", {"keras_tensor": x}), timeout=0.001) for _ in range(20)]
    futures += [stub.Predict.future(predict_request("m", {"keras_tensor": x}), timeout=30) for _ in range(10)]
    for f in futures[20:]:
        f.cancel()
    for f in futures:
        try:
            f.result()
        except (grpc.RpcError, grpc.FutureCancelledError):
            pass
    normal_request_works(main_server)


def test_concurrent_mix_of_good_and_bad(main_server):
    results = []

    def good():
        results.append(main_server.predict(ONE_BODY)[0])

    def bad():
        results.append(-main_server.predict('{"instances": [[1, 2')[0])

    threads = [threading.Thread(target=good if i % 2 else bad) for i in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [-400] * 16 + [200] * 16


def test_grpc_message_over_the_limit(tmp_path, models):
    """A request over --grpc_max_message_bytes: RESOURCE_EXHAUSTED (gRPC's code for "received
    message larger than max"), and the server goes on."""
    h.copy_version(models["mlp"], tmp_path / "mlp", 1)
    try:
        server = h.start_server(tmp_path, model_name="mlp", base_path=tmp_path / "mlp",
                                extra=["--grpc_max_message_bytes=1000000"])
    except h.ServerError as e:
        pytest.fail(str(e), pytrace=False)
    try:
        stub = prediction_stub(server)
        big = predict_request("mlp", {"keras_tensor": np.zeros((100_000, 4), np.float32)})  # 1.6 MB
        with pytest.raises(grpc.RpcError) as e:
            stub.Predict(big, timeout=TIMEOUT)
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, (e.value.code(), e.value.details())
        r = stub.Predict(predict_request("mlp", {"keras_tensor": np.zeros((2, 4), np.float32)}), timeout=TIMEOUT)
        assert set(r.outputs) == {"output_0"}
    finally:
        server.stop()


# -- finally -----------------------------------------------------------------------------------------
def test_zz_still_up_and_no_panics(main_server, multi_server):
    """After everything above: both servers run, answer, and logged no panic."""
    normal_request_works(main_server)
    assert multi_server.healthy("multi")
    for server in (main_server, multi_server):
        log = server.log()
        assert "panicked" not in log, log[log.index("panicked") - 300: log.index("panicked") + 500]
