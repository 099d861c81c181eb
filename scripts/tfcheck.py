"""Helpers shared by the scripts that check ferroflow against live TensorFlow."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf
from google.protobuf import text_format

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
FIX = os.path.join(ROOT, "fixtures", "tf")
failures = []


def check(ok, what):
    """Prints one check's outcome and remembers failures."""
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def read_graph(path):
    """A GraphDef from a .pb or .pbtxt file, parsed by TensorFlow."""
    gd = tf.compat.v1.GraphDef()
    if path.endswith(".pbtxt"):
        with open(path) as f:
            text_format.Parse(f.read(), gd)
    else:
        with open(path, "rb") as f:
            gd.ParseFromString(f.read())
    return gd


def http_get(port, path, **params):
    """GET from a server on 127.0.0.1 (gzip undone); JSON decoded when it parses, else bytes."""
    import gzip
    import json
    import urllib.parse
    import urllib.request

    url = f"http://127.0.0.1:{port}{path}" + ("?" + urllib.parse.urlencode(params) if params else "")
    with urllib.request.urlopen(url, timeout=120) as r:
        body = r.read()
        if r.headers.get("Content-Encoding") == "gzip" or body[:2] == b"\x1f\x8b":
            body = gzip.decompress(body)
    try:
        return json.loads(body) if body else None
    except ValueError:
        return body


class TensorBoard:
    """Real TensorBoard serving `logdir` on a free port of 127.0.0.1, for a `with` block."""

    def __init__(self, logdir, *extra):
        import socket
        import sys

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        exe = os.path.join(os.path.dirname(sys.executable), "tensorboard")
        self.args = [exe, "--logdir", logdir, "--host", "127.0.0.1", "--port", str(self.port), *extra]

    def __enter__(self):
        import subprocess

        self.proc = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return self

    def get(self, path, **params):
        return http_get(self.port, path, **params)

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait(timeout=30)
