"""(e) SIGTERM (and SIGINT) while requests are in flight: they are answered, new connections are
refused, an idle keep-alive connection does not hold the exit up, and the process exits 0."""
import http.client
import json
import signal
import socket
import threading
import time

import pytest

import harness as h

X = [[0.5, 1.0, -2.0]]


def loop_request(server, n, timeout=120):
    return server.predict({"inputs": {"x": X, "n": n}}, model="loop", timeout=timeout)


def calibrate(server, target_s=1.0):
    """An iteration count for module_loop that runs about target_s alone."""
    n = 2000
    while True:
        t = time.monotonic()
        code, body = loop_request(server, n)
        assert code == 200, body
        took = time.monotonic() - t
        if took > 0.2 or n >= 50_000_000:
            return max(1, int(n * target_s / max(took, 1e-3)))
        n *= 8


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_drains_in_flight_requests(tmp_path, models, sig):
    h.copy_version(models["loop"], tmp_path / "loop", 1)
    try:
        server = h.start_server(tmp_path, model_name="loop", base_path=tmp_path / "loop",
                                extra=["--rest_api_timeout_in_ms=120000"])
    except h.ServerError as e:
        pytest.fail(str(e), pytrace=False)
    try:
        n = calibrate(server)
        # An idle keep-alive connection (one request answered, then silence).
        idle = http.client.HTTPConnection(h.HOST, server.rest_port, timeout=30)
        idle.request("GET", "/v1/models/loop")
        idle.getresponse().read()

        results = [None] * 4
        started = threading.Barrier(len(results) + 1)

        def work(i):
            started.wait()
            try:
                results[i] = loop_request(server, n)
            except Exception as e:  # noqa: BLE001
                results[i] = ("exception", repr(e))

        threads = [threading.Thread(target=work, args=(i,)) for i in range(len(results) - 1)]

        def grpc_work():  # one of the in-flight requests comes over gRPC
            import numpy as np
            import tensorflow as tf

            from conftest import prediction_stub
            from test_grpc import predict_request

            stub = None
            try:
                stub = prediction_stub(server)
                req = predict_request("loop", {"x": np.array(X, np.float32), "n": np.int32(n)})
            except BaseException as e:  # noqa: BLE001 (pytest.fail when gRPC is not served)
                results[-1] = ("exception", repr(e))
            started.wait()
            if stub is None:
                return
            try:
                r = stub.Predict(req, timeout=120)
                results[-1] = (200, {"outputs": {"steps": int(tf.make_ndarray(r.outputs["steps"]))}})
            except Exception as e:  # noqa: BLE001
                results[-1] = ("exception", repr(e))

        threads.append(threading.Thread(target=grpc_work))
        for t in threads:
            t.start()
        started.wait()
        time.sleep(0.4)  # the requests are being run
        t0 = time.monotonic()
        server.proc.send_signal(sig)
        time.sleep(0.3)
        # No new connections once the signal is handled.
        refused = False
        for _ in range(50):
            try:
                s = socket.create_connection((h.HOST, server.rest_port), timeout=1)
                s.close()
                time.sleep(0.1)
            except OSError:
                refused = True
                break
        for t in threads:
            t.join(180)
        rc = server.proc.wait(timeout=60)
        took = time.monotonic() - t0
    finally:
        server.stop(signal.SIGKILL)
    for r in results:
        assert r is not None and r[0] == 200, r
        assert r[1]["outputs"]["steps"] == n
    assert rc == 0, server.log_tail()
    assert refused, "the port still accepted connections after the signal"
    assert took < 60, took


def _mlp_server(tmp_path, models):
    h.copy_version(models["mlp"], tmp_path / "mlp", 1)
    try:
        return h.start_server(tmp_path, model_name="mlp", base_path=tmp_path / "mlp")
    except h.ServerError as e:
        pytest.fail(str(e), pytrace=False)


def test_sigterm_with_idle_keep_alive_exits_promptly(tmp_path, models):
    server = _mlp_server(tmp_path, models)
    try:
        conns = []
        for _ in range(5):
            c = http.client.HTTPConnection(h.HOST, server.rest_port, timeout=30)
            c.request("POST", "/v1/models/mlp:predict", json.dumps({"instances": [[1.0, 2.0, 3.0, 4.0]]}))
            assert c.getresponse().read()
            conns.append(c)
        t0 = time.monotonic()
        rc = server.stop(signal.SIGTERM, timeout=20)
        took = time.monotonic() - t0
    finally:
        server.stop(signal.SIGKILL)
    assert rc == 0, server.log_tail()
    assert took < 5, f"idle keep-alive connections held the exit up for {took:.1f} s"


STALLED = {
    "mid-body": b"POST /v1/models/mlp:predict HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{",
    "mid-headers": b"POST /v1/models/mlp:predict HTTP/1.1\r\nHost: x\r\nContent-Le",
}


@pytest.mark.parametrize("where", list(STALLED))
def test_sigterm_with_stalled_client_exits_promptly(tmp_path, models, where):
    """A client stalled mid-request has no request in flight: it must not hold the exit up to the
    body or header timeout (60 s / 30 s; orchestrators SIGKILL 30 s after SIGTERM)."""
    server = _mlp_server(tmp_path, models)
    try:
        half = socket.create_connection((h.HOST, server.rest_port))
        half.sendall(STALLED[where])
        time.sleep(0.3)
        t0 = time.monotonic()
        rc = server.stop(signal.SIGTERM, timeout=10)
        took = time.monotonic() - t0
        half.close()
    finally:
        server.stop(signal.SIGKILL)
    assert rc == 0, (f"not exited 10 s after SIGTERM (killed): a client stalled {where} holds the drain\n"
                     f"{server.log_tail()}")
    assert took < 10, took
