#!/usr/bin/env python3
"""TensorFlow runs ferroflow's traced functions: `examples/traced_functions.rs --export DIR` writes the
concrete functions of collatz and sum_squares_until as GraphDefs with their function libraries
(StatelessWhile / StatelessIf bodies); TensorFlow imports each into a graph and runs it, and the
values must equal what TensorFlow's own `tf.function` gives (fixtures/function/seed_004.npz).

Run:  .venv/bin/python scripts/function_interop.py
"""
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def run(pb, names, feeds):
    inputs, outputs = [line.split() for line in open(names).read().splitlines()]
    gd = tf.compat.v1.GraphDef()
    gd.ParseFromString(open(pb, "rb").read())
    ops = sorted({n.op for n in gd.node})
    lib_ops = sorted({n.op for f in gd.library.function for n in f.node_def})
    g = tf.Graph()
    with g.as_default():
        tf.graph_util.import_graph_def(gd, name="")
        with tf.compat.v1.Session(graph=g) as sess:
            values = sess.run(outputs, dict(zip(inputs, feeds)))
    return values, ops, lib_ops


def main():
    fixture = dict(np.load(os.path.join(ROOT, "fixtures", "function", "seed_004.npz")))
    failures = 0
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(["cargo", "run", "--release", "--quiet", "--example", "traced_functions", "--", "--export", d],
                       cwd=ROOT, check=True)
        checks = [
            ("collatz(27)", "collatz", [np.int32(27)], [fixture["collatz_27"]]),
            ("collatz(97)", "collatz", [np.int32(97)], [fixture["collatz_97"]]),
            ("sum_squares_until", "sum_squares_until",
             [np.array([0.5, 1.5, 2.0, 3.0, 4.0], np.float32), np.float32(6.0)],
             [fixture["sum_total"], fixture["sum_count"]]),
        ]
        for label, name, feeds, want in checks:
            got, ops, lib_ops = run(os.path.join(d, f"{name}.pb"), os.path.join(d, f"{name}.names"), feeds)
            ok = all(np.array_equal(np.asarray(g), np.asarray(w)) for g, w in zip(got, want))
            loop = "StatelessWhile" in ops
            status = "ok  " if ok and loop else "FAIL"
            failures += not (ok and loop)
            print(f"{status} TensorFlow ran ferroflow's {label}: {[np.asarray(g).tolist() for g in got]} "
                  f"(tf.function: {[np.asarray(w).tolist() for w in want]}); graph ops {ops}; library ops {lib_ops}")
    print(f"{failures} failure(s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
