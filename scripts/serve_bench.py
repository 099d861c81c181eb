#!/usr/bin/env python3
"""`ferroflow serve` against TensorFlow behind a REST server, measured by one load generator in
one run.

Servers (each started, measured at every concurrency, then stopped; one at a time):
  tensorflow          TensorFlow's own SavedModel, `tf.saved_model.load(dir).signatures
                      ["serving_default"]`, behind a minimal Python REST server speaking TF
                      Serving's `POST /v1/models/NAME:predict {"instances": ...}` ->
                      `{"predictions": ...}` (http.server.ThreadingHTTPServer, HTTP/1.1
                      keep-alive), in its own process. (TF Serving's binary is not installable
                      here; this is the TensorFlow-from-Python baseline, not TF Serving.)
  ferroflow           `ferroflow serve` (REST), no batching
  ferroflow+batching  `ferroflow serve --enable_batching --batching_parameters_file F` with F
                      written here (max_batch_size 32, batch_timeout_micros, num_batch_threads)
  with --grpc, both ferroflow servers are also loaded over gRPC on their --port: the same
  batch-1 input as a serialized PredictRequest (the tensor as raw `tensor_content`, no JSON),
  sent by grpcio without TensorFlow's protos ("ferroflow gRPC", "ferroflow+batching gRPC")

The client: C worker processes (multiprocessing, so the GIL does not throttle concurrency), each
with one keep-alive HTTP/1.1 connection on loopback (raw sockets), sends R batch-1 requests of a
fixed random input after a warm-up; all start together at a barrier. Reported per server and
concurrency (1, 8, 32): requests/s (all requests / the wall time from the barrier to the last
answer), p50 and p99 latency, errors.

Offline (the model alone, no server): ferroflow's target/release/examples/saved_model_bench at
batch 1 (p50 ms) and batch 32 (rows/s), and TensorFlow's signature call the same way. Derived:
  REST overhead at c=1 = p50(ferroflow REST, c=1) - offline batch-1 p50   (target <= 0.3 ms)
                         (it includes the client's own cost: the GET-status round trip at c=1,
                         printed too, is the floor of transport plus client)
  batching efficiency  = requests/s(ferroflow+batching, c=32) / offline batch-32 rows/s
                                                                           (target >= 0.8)
                         (over REST, and over gRPC with --grpc)

Models: cnn = fixtures/saved_model/keras_cnn (32x32x3); mobilenet = Keras MobileNetV2
(weights=None, seed 0, 224x224x3) exported by `model.export()` into target/serve_bench/ (once).
Everything written goes under target/serve_bench/ (git-ignored).

Run:  .venv/bin/python scripts/serve_bench.py [--models cnn,mobilenet] [--requests 200]
          [--concurrency 1,8,32] [--grpc] [--quick] [--json out.json]
"""
import argparse
import atexit
import json
import multiprocessing as mp
import os
import queue
import re
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "target" / "serve_bench"
FERROFLOW = ROOT / "target" / "release" / "ferroflow"
OFFLINE = ROOT / "target" / "release" / "examples" / "saved_model_bench"
HOST = "127.0.0.1"

MODELS = {
    "cnn": {"dir": ROOT / "fixtures" / "saved_model" / "keras_cnn", "shape": (32, 32, 3)},
    "mobilenet": {"dir": WORK / "mobilenet_v2", "shape": (224, 224, 3)},
}

# -- process bookkeeping: every server started here is stopped on exit, Ctrl-C or SIGTERM --------
_children = []


def _stop(proc, grace=10):
    if proc.poll() is not None:
        return proc.returncode
    try:
        proc.send_signal(signal.SIGTERM)
        return proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(timeout=10)
    except ProcessLookupError:
        return None


def _stop_all():
    while _children:
        _stop(_children.pop(), grace=5)


def _on_signal(signum, _frame):
    raise KeyboardInterrupt(f"signal {signum}")


def spawn(args, log_path, **kw):
    logf = open(log_path, "wb")
    proc = subprocess.Popen([str(a) for a in args], stdout=logf, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True, **kw)
    logf.close()
    _children.append(proc)
    return proc


def stop(proc):
    rc = _stop(proc)
    if proc in _children:
        _children.remove(proc)
    return rc


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


# -- the TensorFlow side (in its own processes) -------------------------------------------------
def tf_server_main(model_dir, port):
    """TensorFlow's SavedModel behind TF Serving's REST predict protocol (row format)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import numpy as np
    import tensorflow as tf

    fn = tf.saved_model.load(model_dir).signatures["serving_default"]
    (in_name, in_spec), = fn.structured_input_signature[1].items()
    out_keys = sorted(fn.structured_outputs)
    dtype = in_spec.dtype.as_numpy_dtype
    fn(**{in_name: tf.zeros([1] + [d or 1 for d in in_spec.shape[1:]], in_spec.dtype)})  # warm up
    status = json.dumps({"model_version_status": [{"version": "1", "state": "AVAILABLE",
                                                   "status": {"error_code": "OK", "error_message": ""}}]}).encode()
    predict_path = re.compile(r"^/v1/models/[^/:]+(/versions/\d+)?:predict$")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # head and body are separate writes: no 40 ms delayed-ACK stall

        def _send(self, code, data):
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):  # noqa: N802
            self._send(200, status)

        def do_POST(self):  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if not predict_path.match(self.path):
                self._send(400, b'{"error": "Malformed request"}')
                return
            try:
                x = np.asarray(json.loads(body)["instances"], dtype=dtype)
                out = fn(**{in_name: tf.constant(x)})
                if len(out_keys) == 1:
                    preds = out[out_keys[0]].numpy().tolist()
                else:
                    cols = {k: out[k].numpy().tolist() for k in out_keys}
                    preds = [{k: cols[k][i] for k in out_keys} for i in range(len(x))]
                self._send(200, json.dumps({"predictions": preds}).encode())
            except Exception as e:  # noqa: BLE001
                self._send(400, json.dumps({"error": str(e)}).encode())

        def log_message(self, *a):
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 256

    srv = Server((HOST, port), Handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    srv.serve_forever()


def tf_offline_main(model_dir, batch, runs):
    """TensorFlow's signature call at `batch`, timed as saved_model_bench times ferroflow's."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import numpy as np
    import tensorflow as tf

    fn = tf.saved_model.load(model_dir).signatures["serving_default"]
    feeds = {}
    for name, spec in fn.structured_input_signature[1].items():
        dims = [d if d is not None else batch for d in spec.shape]
        n = int(np.prod(dims))
        feeds[name] = tf.constant((((np.arange(n) * 7919) % 1000) / 1000.0).astype(np.float32).reshape(dims))
    for _ in range(5):
        fn(**feeds)
    ms = []
    for _ in range(runs):
        t = time.perf_counter()
        fn(**feeds)
        ms.append((time.perf_counter() - t) * 1e3)
    print(f"median_ms={statistics.median(ms):.4f}")


def export_mobilenet(out_dir):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import shutil

    import tensorflow as tf

    tf.keras.utils.set_random_seed(0)
    model = tf.keras.applications.MobileNetV2(weights=None)
    tmp = Path(str(out_dir) + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.export(str(tmp))
    os.rename(tmp, out_dir)


# -- the load generator ------------------------------------------------------------------------
_CL = re.compile(rb"\r\ncontent-length:\s*(\d+)", re.IGNORECASE)


def _read_response(sock, buf):
    """One response off a keep-alive connection: (status, body, leftover bytes)."""
    while True:
        i = buf.find(b"\r\n\r\n")
        if i >= 0:
            break
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        buf += chunk
    head = bytes(buf[:i])
    status = int(head[9:12])
    m = _CL.search(head)
    if not m:
        raise ConnectionError("an answer without Content-Length: " + head[:200].decode("latin-1"))
    end = i + 4 + int(m.group(1))
    while len(buf) < end:
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("the server closed the connection mid-answer")
        buf += chunk
    return status, bytes(buf[i + 4:end]), buf[end:]


def _connect(port):
    s = socket.create_connection((HOST, port), timeout=300)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def request_once(port, request):
    s = _connect(port)
    try:
        s.sendall(request)
        status, body, _ = _read_response(s, bytearray())
        return status, body
    finally:
        s.close()


class GrpcRequest:
    """A serialized gRPC request and its method: sent as bytes on a channel without
    (de)serializers, so the client neither imports TensorFlow nor builds messages per call."""

    def __init__(self, method, payload):
        self.method, self.payload = method, payload


class _HttpClient:
    """One keep-alive HTTP/1.1 connection; `send` gives (status, body)."""

    failures = (OSError, ConnectionError)

    def __init__(self, port, request):
        self.port, self.request = port, request
        self.sock, self.buf = _connect(port), bytearray()

    def send(self):
        self.sock.sendall(self.request)
        status, body, self.buf = _read_response(self.sock, self.buf)
        return status, body

    def reconnect(self):
        """After a failure: a new connection (OSError when the server is gone)."""
        self.sock.close()
        self.sock, self.buf = _connect(self.port), bytearray()

    def close(self):
        self.sock.close()


class _GrpcClient:
    """One gRPC channel; `send` gives (200, response bytes) or raises grpc.RpcError."""

    def __init__(self, port, request):
        import grpc  # imported after the fork: gRPC's threads do not survive one

        self.failures = (grpc.RpcError,)
        unlimited = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
        self.channel = grpc.insecure_channel(f"{HOST}:{port}", options=unlimited)
        self.call, self.payload = self.channel.unary_unary(request.method), request.payload

    def send(self):
        return 200, self.call(self.payload, timeout=300)

    def reconnect(self):
        pass  # the channel reconnects by itself

    def close(self):
        self.channel.close()


def _worker(port, request, n, warmup, barrier, results):
    import array

    # The parent stops the workers (SIGTERM); Ctrl-C reaches the parent, which does.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)

    lat = array.array("d")
    errors = 0
    err_sample = ""
    try:
        client = (_GrpcClient if isinstance(request, GrpcRequest) else _HttpClient)(port, request)
        for _ in range(warmup):
            client.send()
    except Exception as e:  # noqa: BLE001
        barrier.abort()
        results.put(("fail", repr(e)))
        return
    try:
        barrier.wait()
    except Exception as e:  # noqa: BLE001 (another worker failed)
        results.put(("fail", repr(e)))
        return
    start = time.monotonic()
    for i in range(n):
        t = time.perf_counter()
        try:
            status, body = client.send()
        except client.failures as e:
            errors += 1
            err_sample = err_sample or repr(e)
            try:
                client.reconnect()
            except OSError as e2:  # the server is gone: the rest fail too
                errors += n - i - 1
                err_sample += f"; reconnecting: {e2!r}"
                break
            continue
        lat.append(time.perf_counter() - t)
        if status != 200:
            errors += 1
            err_sample = err_sample or f"{status}: {body[:200]!r}"
    end = time.monotonic()
    client.close()
    results.put(("ok", lat.tobytes(), errors, err_sample, start, end))


def _varint(n):
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _bytes_field(number, data):
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _int_field(number, value):
    return _varint(number << 3) + _varint(value)


def grpc_predict_for(model, port_rest):
    """The batch-1 request of `request_for` as a serialized `tensorflow.serving.PredictRequest`
    (model `m`, the default signature's one input as a DT_FLOAT `TensorProto` with
    `tensor_content`): field numbers from TensorFlow Serving's predict.proto, model.proto and
    TensorFlow's tensor.proto / tensor_shape.proto."""
    import numpy as np

    status, body = request_once(port_rest, f"GET /v1/models/m/metadata HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
    if status != 200:
        raise RuntimeError(f"metadata: {status} {body[:200]!r}")
    sig = json.loads(body)["metadata"]["signature_def"]["signature_def"]["serving_default"]
    (key,) = sig["inputs"].keys()
    x = np.random.default_rng(0).uniform(0, 1, (1,) + MODELS[model]["shape"]).astype(np.float32)
    shape = b"".join(_bytes_field(2, _int_field(1, d)) for d in x.shape)  # TensorShapeProto.dim.size
    tensor = _int_field(1, 1) + _bytes_field(2, shape) + _bytes_field(4, x.tobytes())  # DT_FLOAT
    payload = _bytes_field(1, _bytes_field(1, b"m")) + _bytes_field(2, _bytes_field(1, key.encode()) + _bytes_field(2, tensor))
    return GrpcRequest("/tensorflow.serving.PredictionService/Predict", payload)


def run_load(port, request, concurrency, n, warmup):
    """C processes x n requests; {rps, p50_ms, p99_ms, mean_ms, errors, requests}."""
    import array

    import numpy as np

    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(concurrency + 1)
    results = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(port, request, n, warmup, barrier, results), daemon=True)
             for _ in range(concurrency)]
    for p in procs:
        p.start()
    try:
        try:
            barrier.wait(timeout=600)
        except Exception:  # noqa: BLE001 (a worker could not connect: its message follows)
            pass
        got = []
        while len(got) < len(procs):
            try:
                got.append(results.get(timeout=1))
            except queue.Empty:
                if not any(p.is_alive() for p in procs) and results.empty():
                    raise RuntimeError(f"{len(procs) - len(got)} client workers died without a result")
    except BaseException:
        for p in procs:
            p.terminate()
        raise
    finally:
        for p in procs:
            p.join(10)
    fails = [g[1] for g in got if g[0] == "fail"]
    if fails:
        raise RuntimeError(f"client workers failed: {fails[:3]}")
    lat = array.array("d")
    errors, samples = 0, []
    for _, raw, err, sample, _, _ in got:
        a = array.array("d")
        a.frombytes(raw)
        lat.extend(a)
        errors += err
        if sample:
            samples.append(sample)
    wall = max(g[5] for g in got) - min(g[4] for g in got)
    ms = np.frombuffer(lat, dtype=np.float64) * 1e3
    total = concurrency * n
    return {
        "requests": total, "errors": errors, "error_sample": samples[0] if samples else "",
        "rps": total / wall if wall > 0 else float("nan"),
        "p50_ms": float(np.percentile(ms, 50)) if len(ms) else float("nan"),
        "p99_ms": float(np.percentile(ms, 99)) if len(ms) else float("nan"),
        "mean_ms": float(ms.mean()) if len(ms) else float("nan"),
    }


def http_post(path, body):
    return (f"POST {path} HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def wait_ready(port, proc, log_path, timeout=300):
    deadline = time.monotonic() + timeout
    get = f"GET /v1/models/m HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n".encode()
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited ({proc.returncode}):\n{tail(log_path)}")
        try:
            status, body = request_once(port, get)
            if status == 200 and b"AVAILABLE" in body:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"server not ready after {timeout} s:\n{tail(log_path)}")


def tail(path, n=25):
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


# -- the servers -----------------------------------------------------------------------------
def start_tf(model, port):
    log = WORK / f"tf-{model}.log"
    proc = spawn([sys.executable, __file__, "--tf-server", MODELS[model]["dir"], "--port", port], log,
                 env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    return proc, log, ""


def batching_params(a):
    text = (f"max_batch_size {{ value: {a.max_batch_size} }}\n"
            f"batch_timeout_micros {{ value: {a.batch_timeout_micros} }}\n"
            f"max_enqueued_batches {{ value: 1000 }}\n"
            f"num_batch_threads {{ value: {a.num_batch_threads} }}\n")
    for s in a.allowed_batch_sizes:
        text += f"allowed_batch_sizes: {s}\n"
    return text


def start_ff(model, port, a, batching, grpc_port=None):
    base = WORK / "base" / model
    base.mkdir(parents=True, exist_ok=True)
    link = base / "1"
    if not link.exists():
        link.symlink_to(MODELS[model]["dir"].resolve(), target_is_directory=True)
    args = [a.ferroflow, "serve", "--model_name=m", f"--model_base_path={base}", f"--rest_api_port={port}",
            f"--port={grpc_port or 0}", "--file_system_poll_wait_seconds=0"]
    if batching:
        params = WORK / "batching.txt"
        params.write_text(batching_params(a))
        args += ["--enable_batching", f"--batching_parameters_file={params}"]
    log = WORK / f"ferroflow-{model}{'-batching' if batching else ''}.log"
    proc = spawn(args, log)
    note = ""
    if batching:
        time.sleep(0.5)
        if re.search(r"enable_batching.*(not implemented|ignored)", Path(log).read_text(errors="replace")):
            note = "batching flags IGNORED by this binary"
    return proc, log, note


def offline(model, a):
    d = MODELS[model]["dir"]
    out = {}
    if OFFLINE.exists():
        for batch, runs in ((1, a.offline_runs), (32, max(5, a.offline_runs // 5))):
            r = subprocess.run([OFFLINE, d, str(batch), str(runs)], capture_output=True, text=True)
            m = re.search(r"median_ms=([0-9.]+)", r.stdout)
            if r.returncode != 0 or not m:
                print(f"  saved_model_bench {model} batch {batch} failed: {r.stderr.strip()[-300:]}")
                continue
            out[f"ferroflow_b{batch}_ms"] = float(m.group(1))
    else:
        print(f"  ({OFFLINE} is not built: cargo build --release -p ferroflow --example saved_model_bench; "
              "offline figures skipped)")
    if not a.no_tf_offline:
        for batch, runs in ((1, a.offline_runs), (32, max(5, a.offline_runs // 5))):
            r = subprocess.run([sys.executable, __file__, "--tf-offline", d, "--batch", str(batch), "--runs", str(runs)],
                               capture_output=True, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
            m = re.search(r"median_ms=([0-9.]+)", r.stdout)
            if m:
                out[f"tensorflow_b{batch}_ms"] = float(m.group(1))
            else:
                print(f"  TensorFlow offline {model} batch {batch} failed: {r.stderr.strip()[-300:]}")
    return out


def prepare(model):
    d = MODELS[model]["dir"]
    if model == "mobilenet" and not (d / "saved_model.pb").exists():
        print(f"exporting MobileNetV2 (weights=None, seed 0) to {d} ...", flush=True)
        WORK.mkdir(parents=True, exist_ok=True)
        r = subprocess.run([sys.executable, __file__, "--export-mobilenet", d], capture_output=True, text=True,
                           env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
        if r.returncode != 0:
            raise SystemExit(f"exporting MobileNetV2 failed:\n{r.stderr[-2000:]}")
    if not (d / "saved_model.pb").exists():
        raise SystemExit(f"no SavedModel at {d}")


def request_for(model, digits=None):
    """The fixed batch-1 request: uniform [0, 1) float32 values, written as a client writes
    `x.tolist()` (17 significant digits), or rounded to `digits` decimals."""
    import numpy as np

    x = np.random.default_rng(0).uniform(0, 1, (1,) + MODELS[model]["shape"]).astype(np.float32)
    if digits is not None:
        x = np.round(x.astype(np.float64), digits)
    body = json.dumps({"instances": x.tolist()}, separators=(",", ":")).encode()
    return http_post("/v1/models/m:predict", body), len(body)


def answer_of(body):
    import numpy as np

    return np.asarray(json.loads(body)["predictions"], dtype=np.float64)


def bench_model(model, a, results):
    import numpy as np

    prepare(model)
    request, size = request_for(model, a.round)
    n = a.requests if model == "cnn" else a.requests_mobilenet
    print(f"\n== {model}: {MODELS[model]['dir'].relative_to(ROOT) if MODELS[model]['dir'].is_relative_to(ROOT) else MODELS[model]['dir']}"
          f", batch-1 request body {size / 1024:.0f} KiB, {n} requests per worker, warm-up {a.warmup}", flush=True)
    res = {"requests_per_worker": n, "body_bytes": size, "servers": {}, "notes": {}}
    results["models"][model] = res
    print("  offline ...", flush=True)
    res["offline"] = offline(model, a)
    reference = None
    configs = [("tensorflow", lambda p, _: start_tf(model, p)),
               ("ferroflow", lambda p, g: start_ff(model, p, a, False, g)),
               ("ferroflow+batching", lambda p, g: start_ff(model, p, a, True, g))]
    for name, start in configs:
        if a.only and name not in a.only:
            continue
        port = free_port()
        grpc_port = free_port() if a.grpc and name != "tensorflow" else None
        proc, log, note = start(port, grpc_port)
        try:
            wait_ready(port, proc, log)
            status, body = request_once(port, request)
            if status != 200:
                raise RuntimeError(f"{name}: {status} {body[:300]!r}")
            ans = answer_of(body)
            if reference is None:
                reference = ans
            elif not np.allclose(ans, reference, rtol=1e-3, atol=1e-4):
                note = (note + "; " if note else "") + \
                    f"ANSWER DIFFERS from the first server's (max |diff| {np.abs(ans - reference).max():.3g})"
            res["servers"][name] = {}
            for c in a.concurrency:
                r = run_load(port, request, c, n, max(1, a.warmup * 8 // max(8, c)))
                res["servers"][name][c] = r
                err = f"  ERRORS {r['errors']} ({r['error_sample']})" if r["errors"] else ""
                print(f"  {name:<24} c={c:<3} {r['rps']:9.1f} req/s  p50 {r['p50_ms']:8.3f} ms  "
                      f"p99 {r['p99_ms']:8.3f} ms{err}", flush=True)
            if grpc_port:
                # The same requests over gRPC, the tensor as raw bytes: no JSON to read.
                greq = grpc_predict_for(model, port)
                res["servers"][name + " gRPC"] = {}
                for c in a.concurrency:
                    r = run_load(grpc_port, greq, c, n, max(1, a.warmup * 8 // max(8, c)))
                    res["servers"][name + " gRPC"][c] = r
                    err = f"  ERRORS {r['errors']} ({r['error_sample']})" if r["errors"] else ""
                    print(f"  {name + ' gRPC':<24} c={c:<3} {r['rps']:9.1f} req/s  p50 {r['p50_ms']:8.3f} ms  "
                          f"p99 {r['p99_ms']:8.3f} ms{err}", flush=True)
            if name != "ferroflow+batching":
                # The HTTP round trip without a model run (GET status): the transport and client floor.
                get = f"GET /v1/models/m HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode()
                res.setdefault("http_floor", {})[name] = run_load(port, get, 1, max(n, 50), a.warmup)
                if name == "ferroflow":
                    # The most requests/s this client and loopback HTTP reach at all (no model, no JSON).
                    top = max(a.concurrency)
                    res["http_ceiling"] = dict(run_load(port, get, top, max(n, 50), 2), concurrency=top)
            if proc.poll() is not None:
                note = (note + "; " if note else "") + f"server died ({proc.returncode})"
        except RuntimeError as e:
            note = (note + "; " if note else "") + f"FAILED: {str(e).splitlines()[0][:200]}"
            print(f"  {name}: {e}", flush=True)
        finally:
            rc = stop(proc)
            if name.startswith("ferroflow") and rc not in (0, None):
                note = (note + "; " if note else "") + f"exit code {rc} on SIGTERM"
        if note:
            res["notes"][name] = note


def report(results, a):
    print("\n" + "=" * 100)
    print(f"serve_bench: {results['cpus']} CPUs, {results['date']}; client: {', '.join(map(str, a.concurrency))} "
          "worker processes, keep-alive HTTP/1.1, batch-1 requests")
    print("req/s vs TF = ferroflow req/s / TensorFlow req/s; p50 vs TF = TensorFlow p50 / ferroflow p50 "
          "(> 1: ferroflow better). TensorFlow = the SavedModel in Python's http.server, not TF Serving")
    for model, res in results["models"].items():
        print(f"\n{model}:")
        print(f"  {'server':<25}{'c':>4}{'req/s':>11}{'p50 ms':>10}{'p99 ms':>10}{'errors':>8}"
              f"{'req/s vs TF':>13}{'p50 vs TF':>11}")
        tf = res["servers"].get("tensorflow", {})
        for name, per_c in res["servers"].items():
            for c, r in per_c.items():
                ratio = p50_ratio = ""
                if name != "tensorflow" and c in tf and tf[c]["rps"] > 0:
                    ratio = f"{r['rps'] / tf[c]['rps']:.2f}x"
                    p50_ratio = f"{tf[c]['p50_ms'] / r['p50_ms']:.2f}x"
                    r["rps_vs_tf"] = r["rps"] / tf[c]["rps"]
                    r["p50_speedup_vs_tf"] = tf[c]["p50_ms"] / r["p50_ms"]
                print(f"  {name:<25}{c:>4}{r['rps']:>11.1f}{r['p50_ms']:>10.3f}{r['p99_ms']:>10.3f}"
                      f"{r['errors']:>8}{ratio:>13}{p50_ratio:>11}")
        for name, note in res["notes"].items():
            print(f"  note: {name}: {note}")
        off = res["offline"]
        derived = {}
        if "ferroflow_b1_ms" in off:
            line = f"  offline ferroflow: batch-1 p50 {off['ferroflow_b1_ms']:.3f} ms"
            if "ferroflow_b32_ms" in off:
                derived["offline_b32_rows_per_s"] = 32 / (off["ferroflow_b32_ms"] / 1e3)
                line += f", batch-32 {derived['offline_b32_rows_per_s']:.0f} rows/s"
            print(line)
        if "tensorflow_b1_ms" in off:
            line = f"  offline TensorFlow: batch-1 p50 {off['tensorflow_b1_ms']:.3f} ms"
            if "tensorflow_b32_ms" in off:
                line += f", batch-32 {32 / (off['tensorflow_b32_ms'] / 1e3):.0f} rows/s"
            print(line)
        for name, r in res.get("http_floor", {}).items():
            print(f"  HTTP round trip without a model run (GET status, c=1), {name}: p50 {r['p50_ms']:.3f} ms")
        if "http_ceiling" in res:
            hc = res["http_ceiling"]
            print(f"  client + HTTP ceiling (GET status on ferroflow, c={hc['concurrency']}): {hc['rps']:.0f} req/s "
                  "(no model run can be measured above this)")
        ff = res["servers"].get("ferroflow", {})
        if 1 in ff and "ferroflow_b1_ms" in off:
            derived["rest_overhead_c1_ms"] = ff[1]["p50_ms"] - off["ferroflow_b1_ms"]
            ok = "ok" if derived["rest_overhead_c1_ms"] <= 0.3 else "OVER TARGET"
            print(f"  REST overhead at c=1: {ff[1]['p50_ms']:.3f} - {off['ferroflow_b1_ms']:.3f} = "
                  f"{derived['rest_overhead_c1_ms']:.3f} ms  (target <= 0.3 ms: {ok})")
        top = max(a.concurrency)
        for server, key, over in (("ferroflow+batching", "batching_efficiency", ""),
                                  ("ferroflow+batching gRPC", "batching_efficiency_grpc", " over gRPC")):
            fb = res["servers"].get(server, {})
            if top in fb and "offline_b32_rows_per_s" in derived:
                derived[key] = fb[top]["rps"] / derived["offline_b32_rows_per_s"]
                ok = "ok" if derived[key] >= 0.8 else "UNDER TARGET"
                print(f"  batching at c={top}{over}: {fb[top]['rps']:.0f} req/s / offline batch-32 "
                      f"{derived['offline_b32_rows_per_s']:.0f} rows/s = {derived[key]:.2f}  (target >= 0.8: {ok})")
        res["derived"] = derived


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="cnn,mobilenet")
    ap.add_argument("--requests", type=int, default=None, help="requests per worker (cnn; default 300)")
    ap.add_argument("--requests-mobilenet", type=int, default=None,
                    help="requests per worker for mobilenet (default: --requests / 10, at least 3)")
    ap.add_argument("--concurrency", default="1,8,32")
    ap.add_argument("--warmup", type=int, default=None, help="warm-up requests per worker (default 10)")
    ap.add_argument("--quick", action="store_true", help="few requests (a smoke test, not a measurement)")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--ferroflow", default=str(FERROFLOW))
    ap.add_argument("--round", type=int, default=None, metavar="DIGITS",
                    help="write the request's values rounded to DIGITS decimals (default: full float repr)")
    ap.add_argument("--grpc", action="store_true",
                    help="also load ferroflow's servers over gRPC (Predict, the tensor as raw bytes)")
    ap.add_argument("--only", default="", help="servers to run (tensorflow,ferroflow,ferroflow+batching)")
    ap.add_argument("--max-batch-size", type=int, default=32)
    ap.add_argument("--batch-timeout-micros", type=int, default=2000)
    ap.add_argument("--num-batch-threads", type=int, default=2)
    ap.add_argument("--allowed-batch-sizes", default="", help="e.g. 8,16,32 (default: none)")
    ap.add_argument("--offline-runs", type=int, default=None, help="saved_model_bench runs at batch 1 (default 200)")
    ap.add_argument("--no-tf-offline", action="store_true", help="skip TensorFlow's offline timing")
    # Internal modes (this script re-runs itself for them).
    ap.add_argument("--tf-server", help=argparse.SUPPRESS)
    ap.add_argument("--tf-offline", help=argparse.SUPPRESS)
    ap.add_argument("--export-mobilenet", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--batch", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--runs", type=int, default=100, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.tf_server:
        return tf_server_main(a.tf_server, a.port)
    if a.tf_offline:
        return tf_offline_main(a.tf_offline, a.batch, a.runs)
    if a.export_mobilenet:
        return export_mobilenet(a.export_mobilenet)

    quick = a.quick
    a.requests = a.requests if a.requests is not None else (20 if quick else 300)
    a.requests_mobilenet = a.requests_mobilenet if a.requests_mobilenet is not None else max(3, a.requests // 10)
    a.warmup = a.warmup if a.warmup is not None else (3 if quick else 10)
    a.offline_runs = a.offline_runs if a.offline_runs is not None else (20 if quick else 200)
    a.concurrency = [int(c) for c in a.concurrency.split(",") if c]
    a.allowed_batch_sizes = [int(s) for s in a.allowed_batch_sizes.split(",") if s]
    a.only = [s for s in a.only.split(",") if s]
    a.ferroflow = Path(a.ferroflow)
    models = [m for m in a.models.split(",") if m]
    for m in models:
        if m not in MODELS:
            raise SystemExit(f"unknown model {m}; known: {', '.join(MODELS)}")
    wants_ferroflow = not a.only or any(s.startswith("ferroflow") for s in a.only)
    r = subprocess.run([a.ferroflow, "serve", "--help"], capture_output=True, text=True) if wants_ferroflow else None
    if r is not None and r.returncode != 0:
        raise SystemExit(f"{a.ferroflow} has no `serve` subcommand (rebuild: cargo build --release)")

    WORK.mkdir(parents=True, exist_ok=True)
    atexit.register(_stop_all)
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)  # also when started in the background (SIGINT ignored there)
    results = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "cpus": os.cpu_count(), "models": {},
               "params": {"concurrency": a.concurrency, "warmup": a.warmup,
                          "batching": batching_params(a), "quick": quick}}
    if quick:
        print("--quick: a smoke test; the figures mean little")
    try:
        for m in models:
            bench_model(m, a, results)
    except KeyboardInterrupt:
        print("\ninterrupted; stopping the servers", file=sys.stderr)
        _stop_all()
        sys.exit(130)
    finally:
        _stop_all()
    report(results, a)
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=2, default=str))
        print(f"\nwrote {a.json}")


if __name__ == "__main__":
    main()
