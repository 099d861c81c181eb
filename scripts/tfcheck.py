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
