"""Helpers for the `ferroflow serve` checks: free ports, starting and stopping the server
(as a subprocess of target/release/ferroflow, or $FERROFLOW), raw HTTP/1.1, the SavedModels
the checks build with TensorFlow, and TensorFlow's own outputs for comparison.

Nothing here writes outside the temporary directories pytest hands out.
"""
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FERROFLOW = Path(os.environ.get("FERROFLOW", ROOT / "target" / "release" / "ferroflow"))
FIXTURES = ROOT / "fixtures" / "saved_model"
HOST = "127.0.0.1"

_used_ports = set()


def free_port():
    """A port nothing listens on now (bound to 0 and released: the CLI treats port 0 as off)."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((HOST, 0))
            port = s.getsockname()[1]
        if port not in _used_ports:
            _used_ports.add(port)
            return port
    raise RuntimeError("no free port")


_supported = {}


def serve_supported():
    """Whether the binary has the `serve` subcommand (None: no binary)."""
    if FERROFLOW not in _supported:
        if not FERROFLOW.exists():
            _supported[FERROFLOW] = None
        else:
            r = subprocess.run([str(FERROFLOW), "serve", "--help"], capture_output=True, text=True, timeout=60)
            _supported[FERROFLOW] = r.returncode == 0
    return _supported[FERROFLOW]


def copy_version(src, base, version, atomic=True):
    """Copies SavedModel `src` to `base/version` (via a non-numeric temporary name and a rename,
    as TensorFlow Serving's docs ask, so the poller never sees half a directory)."""
    base = Path(base)
    base.mkdir(parents=True, exist_ok=True)
    dst = base / str(version)
    if atomic:
        tmp = base / f".tmp-{version}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(src, tmp)
        os.rename(tmp, dst)
    else:
        shutil.copytree(src, dst)
    return dst


class ServerError(RuntimeError):
    pass


class Server:
    """A running `ferroflow serve`."""

    def __init__(self, proc, rest_port, grpc_port, log_path, args, models):
        self.proc = proc
        self.rest_port = rest_port
        self.grpc_port = grpc_port
        self.log_path = Path(log_path)
        self.args = args
        self.models = models

    # -- process ------------------------------------------------------------------------
    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc.poll() is None

    def log(self):
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, n=40):
        return "\n".join(self.log().splitlines()[-n:])

    def cpu_seconds(self):
        """user + system CPU time of the server process so far (Linux /proc)."""
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / tick

    def rss_mb(self):
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def stop(self, sig=signal.SIGTERM, timeout=30):
        """Signals the server and waits; kills it past `timeout`. Its exit code (None if killed)."""
        if self.proc.poll() is not None:
            return self.proc.returncode
        try:
            self.proc.send_signal(sig)
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            return None

    # -- REST -----------------------------------------------------------------------------
    def url(self, path):
        return f"http://{HOST}:{self.rest_port}{path}"

    def request(self, method, path, body=None, headers=None, timeout=60):
        """One request on a fresh connection: (status, parsed JSON or raw text)."""
        conn = http.client.HTTPConnection(HOST, self.rest_port, timeout=timeout)
        try:
            if isinstance(body, (dict, list)):
                body = json.dumps(body)
            if isinstance(body, str):
                body = body.encode()
            h = {"Content-Type": "application/json"}
            h.update(headers or {})
            conn.request(method, path, body=body, headers=h)
            r = conn.getresponse()
            data = r.read()
            return r.status, decode(data)
        finally:
            conn.close()

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body, **kw):
        return self.request("POST", path, body, **kw)

    def predict(self, body, model="m", suffix="", **kw):
        return self.post(f"/v1/models/{model}{suffix}:predict", body, **kw)

    def status(self, model="m"):
        return self.get(f"/v1/models/{model}")

    def healthy(self, model="m", timeout=30):
        """The process runs and answers a status request for `model` with 200."""
        if not self.alive():
            return False
        try:
            code, _ = self.request("GET", f"/v1/models/{model}", timeout=timeout)
            return code == 200
        except OSError:
            return False


def decode(data):
    text = data.decode("utf-8", errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        return text


def start_server(workdir, *, model_name=None, base_path=None, config=None, extra=(), wait_models=None,
                 grpc=True, timeout=120, expect_failure=False, env=None):
    """Starts `ferroflow serve` with TensorFlow Serving's flags: either --model_name/--model_base_path
    or --model_config_file (text written to workdir/models.config), REST and gRPC on free ports,
    --file_system_poll_wait_seconds=1 unless `extra` sets it. Waits until every model of
    `wait_models` answers GET /v1/models/NAME with an AVAILABLE version. With `expect_failure`,
    returns (exit code, log) once the process exits instead (raises if it keeps running)."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    if serve_supported() is False:
        raise ServerError(f"{FERROFLOW} has no `serve` subcommand (rebuild: cargo build --release -p ferroflow-cli)")
    if serve_supported() is None:
        raise ServerError(f"{FERROFLOW} does not exist (cargo build --release)")
    last = None
    for _attempt in range(3):
        rest_port = free_port()
        grpc_port = free_port() if grpc else 0
        args = [str(FERROFLOW), "serve"]
        if config is not None:
            cfg = workdir / "models.config"
            cfg.write_text(config)
            args.append(f"--model_config_file={cfg}")
        else:
            args += [f"--model_name={model_name}", f"--model_base_path={base_path}"]
        args += [f"--rest_api_port={rest_port}", f"--port={grpc_port}"]
        if not any(str(e).startswith("--file_system_poll_wait_seconds") for e in extra):
            args.append("--file_system_poll_wait_seconds=1")
        args += [str(e) for e in extra]
        log_path = workdir / f"server-{rest_port}.log"
        logf = open(log_path, "wb")
        proc = subprocess.Popen(args, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=str(workdir), env=env, start_new_session=True)
        logf.close()
        models = wait_models if wait_models is not None else ([model_name] if model_name else [])
        server = Server(proc, rest_port, grpc_port, log_path, args, models)
        if expect_failure:
            try:
                wait_ready(server, models, timeout, kill_on_timeout=False)
                what = "started and serves"
            except ServerError:
                what = "kept running"
            if server.alive():
                server.stop(signal.SIGKILL)
                raise ServerError(f"the server {what}; expected it to refuse to start:\n" + server.log_tail())
            return server.proc.returncode, server.log()
        try:
            wait_ready(server, models, timeout)
            return server
        except ServerError as e:
            last = e
            server.stop(signal.SIGKILL)
            if "in use" in server.log():  # another process took the port between bind and start
                continue
            raise
    raise last


def wait_ready(server, models, timeout, kill_on_timeout=True):
    deadline = time.monotonic() + timeout
    pending = list(models)
    while pending:
        if not server.alive():
            raise ServerError(f"ferroflow serve exited with {server.proc.returncode}:\n{server.log_tail()}")
        if time.monotonic() > deadline:
            if kill_on_timeout:
                server.stop(signal.SIGKILL)
            raise ServerError(f"not ready after {timeout} s ({pending} not AVAILABLE):\n{server.log_tail()}")
        name = pending[0]
        try:
            code, body = server.request("GET", f"/v1/models/{name}", timeout=5)
        except OSError:
            time.sleep(0.1)
            continue
        statuses = body.get("model_version_status", []) if code == 200 and isinstance(body, dict) else []
        if any(s.get("state") == "AVAILABLE" for s in statuses):
            pending.pop(0)
        elif statuses and all(s.get("state") == "END" and s.get("status", {}).get("error_message")
                              for s in statuses):
            if kill_on_timeout:
                server.stop(signal.SIGKILL)
            raise ServerError(f"model {name} failed to load: {statuses}\n{server.log_tail()}")
        else:
            time.sleep(0.1)


def wait_for(pred, timeout, interval=0.1, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


# -- raw HTTP ---------------------------------------------------------------------------------
class RawConn:
    """A socket with a read buffer, for answers that arrive together (pipelining)."""

    def __init__(self, port, timeout=30):
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        self.buf = b""
        self.timeout = timeout

    def send(self, data):
        self.sock.sendall(data)

    def close(self):
        self.sock.close()

    def _fill(self):
        try:
            chunk = self.sock.recv(65536)
        except (ConnectionResetError, socket.timeout, OSError):
            chunk = b""
        self.buf += chunk
        return bool(chunk)

    def read_response(self):
        """One HTTP/1.1 response (Content-Length, chunked, or until close): (status, headers, body);
        status 0 when the server closed without a complete head."""
        self.sock.settimeout(self.timeout)
        while b"\r\n\r\n" not in self.buf:
            if not self._fill():
                data, self.buf = self.buf, b""
                return 0, {}, data
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split()
        status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        if 100 <= status < 200:
            return status, headers, b""
        if "content-length" in headers:
            n = int(headers["content-length"])
            while len(self.buf) < n and self._fill():
                pass
            body, self.buf = self.buf[:n], self.buf[n:]
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                while b"\r\n" not in self.buf:
                    if not self._fill():
                        return status, headers, body
                line, self.buf = self.buf.split(b"\r\n", 1)
                size = int(line.split(b";")[0].strip() or b"0", 16)
                while len(self.buf) < size + 2 and self._fill():
                    pass
                body += self.buf[:size]
                self.buf = self.buf[size + 2:]
                if size == 0:
                    break
        else:
            while self._fill():
                pass
            body, self.buf = self.buf, b""
        return status, headers, body


def raw_http(port, data, timeout=30, shut_write=False):
    """Sends raw bytes (from a thread, so an early answer such as 413 is read while the rest is
    still being sent) and reads one response: (status, headers, body). status 0: the server
    closed without an answer."""
    import threading

    c = RawConn(port, timeout)

    def send():
        try:
            c.sock.sendall(data)
            if shut_write:
                c.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server answered and closed before reading everything

    t = threading.Thread(target=send, daemon=True)
    t.start()
    try:
        return c.read_response()
    finally:
        c.close()
        t.join(timeout)


def http_request_bytes(method, path, body=b"", headers=None, close=True):
    h = {"Host": "localhost", "Content-Type": "application/json", "Content-Length": str(len(body))}
    if close:
        h["Connection"] = "close"
    h.update(headers or {})
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items() if v is not None)
    return head.encode("latin-1") + b"\r\n" + body


# -- SavedModels built by TensorFlow for the checks ------------------------------------------
def build_multi_model(d, bias):
    """A TF1 SavedModel (SavedModelBuilder) with signatures over several dtypes:
    serving_default  x float[?,3]                 -> y = 2x + bias (a variable)
    two              a float[?,3], n int32[?]     -> sum = 2a, n2 = n + n
    text             s string[?]                  -> s_bytes, s_text (both s)
    fail             i int32[?]                   -> y = gather([10, 20, 30], i) (out of range fails)
    types            b bool[?], d double[?,2], k int64[?] -> nb = !b, d2 = d/2, k3 = 3k
    """
    import numpy as np
    import tensorflow as tf

    v1 = tf.compat.v1
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [None, 3], name="x")
        b = v1.get_variable("bias", initializer=np.float32(bias), use_resource=False)
        y = tf.add(x * 2.0, b, name="y")
        a = v1.placeholder(tf.float32, [None, 3], name="a")
        n = v1.placeholder(tf.int32, [None], name="n")
        total = tf.multiply(a, 2.0, name="sum")
        n2 = tf.add(n, n, name="n2")
        s = v1.placeholder(tf.string, [None], name="s")
        s_bytes = tf.identity(s, name="s_bytes")
        s_text = tf.identity(s, name="s_text")
        i = v1.placeholder(tf.int32, [None], name="i")
        gathered = tf.gather(tf.constant([10.0, 20.0, 30.0]), i, name="gathered")
        bb = v1.placeholder(tf.bool, [None], name="b")
        nb = tf.logical_not(bb, name="nb")
        dd = v1.placeholder(tf.float64, [None, 2], name="d")
        d2 = tf.multiply(dd, tf.constant(0.5, tf.float64), name="d2")
        k = v1.placeholder(tf.int64, [None], name="k")
        k3 = tf.multiply(k, tf.constant(3, tf.int64), name="k3")
        sig = v1.saved_model.signature_def_utils.predict_signature_def
        with v1.Session(graph=g) as sess:
            sess.run(v1.global_variables_initializer())
            builder = v1.saved_model.builder.SavedModelBuilder(str(d))
            builder.add_meta_graph_and_variables(
                sess, ["serve"],
                signature_def_map={
                    "serving_default": sig({"x": x}, {"y": y}),
                    "two": sig({"a": a, "n": n}, {"sum": total, "n2": n2}),
                    "text": sig({"s": s}, {"s_bytes": s_bytes, "s_text": s_text}),
                    "fail": sig({"i": i}, {"y": gathered}),
                    "types": sig({"b": bb, "d": dd, "k": k}, {"nb": nb, "d2": d2, "k3": k3}),
                },
                saver=v1.train.Saver(),
            )
            builder.save()
    return Path(d)


CLASSES = [b"cat", b"dog", b"eel"]


def build_classify_model(d):
    """A TF1 SavedModel reading serialized tf.Examples (x: float[2], k: int64[1], default 0):
    serving_default / classify  classification signature: classes (cat, dog, eel), scores =
                                softmax(x W + k c)
    regress                     regression signature: outputs = x . [1, 2] + k
    predict                     a predict signature over the same examples (scores)
    """
    import numpy as np
    import tensorflow as tf

    v1 = tf.compat.v1
    g = tf.Graph()
    with g.as_default():
        serialized = v1.placeholder(tf.string, [None], name="input_example_tensor")
        feats = v1.io.parse_example(serialized, {
            "x": v1.io.FixedLenFeature([2], tf.float32),
            "k": v1.io.FixedLenFeature([1], tf.int64, default_value=[0]),
        })
        x = feats["x"]
        k = tf.cast(feats["k"], tf.float32)
        w = v1.get_variable("w", initializer=np.array([[1.0, -1.0, 0.5], [2.0, 0.0, -1.0]], np.float32),
                            use_resource=False)
        logits = tf.matmul(x, w) + k * tf.constant([0.1, 0.2, 0.3])
        scores = tf.nn.softmax(logits, name="scores")
        classes = tf.tile(tf.constant([CLASSES]), [tf.shape(x)[0], 1], name="classes")
        value = tf.add(tf.reduce_sum(x * tf.constant([1.0, 2.0]), axis=1), k[:, 0], name="value")
        u = v1.saved_model.signature_def_utils
        cls = u.classification_signature_def(serialized, classes, scores)
        with v1.Session(graph=g) as sess:
            sess.run(v1.global_variables_initializer())
            builder = v1.saved_model.builder.SavedModelBuilder(str(d))
            builder.add_meta_graph_and_variables(
                sess, ["serve"],
                signature_def_map={
                    "serving_default": cls,
                    "classify": cls,
                    "regress": u.regression_signature_def(serialized, value),
                    "predict": u.predict_signature_def({"examples": serialized}, {"scores": scores}),
                },
                saver=v1.train.Saver(),
            )
            builder.save()
    return Path(d)


def build_plain_classify_model(d):
    """Classification/regression signatures that do not parse their examples (ferroflow has no
    ParseExample kernel yet): row i of a batch of n serialized examples gets
    scores [0.1, 0.7, 0.2] + 0.01 i over classes (cat, dog, eel), and regression value 1.5 + 2 i.
    It checks the plumbing: examples in, one result per example in order, labels with scores."""
    import tensorflow as tf

    v1 = tf.compat.v1
    g = tf.Graph()
    with g.as_default():
        serialized = v1.placeholder(tf.string, [None], name="input_example_tensor")
        n = tf.shape(serialized)[0]
        idx = tf.cast(tf.range(n), tf.float32)
        scores = tf.add(tf.constant([[0.1, 0.7, 0.2]]), tf.expand_dims(idx, 1) * 0.01, name="scores")
        classes = tf.tile(tf.constant([CLASSES]), tf.stack([n, 1]), name="classes")
        value = tf.add(1.5, idx * 2.0, name="value")
        u = v1.saved_model.signature_def_utils
        cls = u.classification_signature_def(serialized, classes, scores)
        with v1.Session(graph=g) as sess:
            builder = v1.saved_model.builder.SavedModelBuilder(str(d))
            builder.add_meta_graph_and_variables(
                sess, ["serve"],
                signature_def_map={
                    "serving_default": cls,
                    "classify": cls,
                    "scores_only": u.classification_signature_def(serialized, None, scores),
                    "regress": u.regression_signature_def(serialized, value),
                    "predict": u.predict_signature_def({"x": serialized}, {"scores": scores}),
                },
            )
            builder.save()
    return Path(d)


def example(features):
    """A serialized tf.train.Example: ints -> int64_list, floats -> float_list, bytes/str -> bytes_list."""
    import tensorflow as tf

    f = {}
    for key, v in features.items():
        vals = v if isinstance(v, (list, tuple)) else [v]
        if all(isinstance(x, bool) or isinstance(x, int) for x in vals):
            f[key] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(x) for x in vals]))
        elif all(isinstance(x, (int, float)) for x in vals):
            f[key] = tf.train.Feature(float_list=tf.train.FloatList(value=vals))
        else:
            f[key] = tf.train.Feature(bytes_list=tf.train.BytesList(
                value=[x.encode() if isinstance(x, str) else x for x in vals]))
    return tf.train.Example(features=tf.train.Features(feature=f))


class TFReference:
    """TensorFlow's own outputs: tf.saved_model.load(dir).signatures[name](**inputs)."""

    def __init__(self):
        self._loaded = {}

    def run(self, model_dir, signature="serving_default", **inputs):
        import tensorflow as tf

        key = str(model_dir)
        if key not in self._loaded:
            self._loaded[key] = tf.saved_model.load(key)
        fn = self._loaded[key].signatures[signature]
        out = fn(**{k: tf.constant(v) for k, v in inputs.items()})
        return {k: v.numpy() for k, v in out.items()}
