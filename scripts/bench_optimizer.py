#!/usr/bin/env python3
"""Optimizer wall time on a large generated graph: TensorFlow's Grappler and ferroflow on the
same GraphDef, in the same run.

The graph is an unrolled layered network written by TensorFlow (TF1 graph mode, default
names): per layer a MatMul with a constant weight, a bias computed by a constant subgraph
((a + b) * c, foldable), BiasAdd, two identical scaled copies of the activations (a shared
subexpression), their sum, Relu, an Identity chain, and Neg(Neg(.)). 1,200 layers give
20,402 nodes.

Grappler: `tf_optimizer.OptimizeGraph` with its default passes and two iterations (as a TF1
Session runs it), the placeholder fed and the output fetched. ferroflow: `ferroflow optimize`
(release build) on the same .pb with the same feed and fetch; the optimizer's own time is
taken from its report (graph loading excluded; Grappler's figure includes converting the
MetaGraphDef into its item, which is small next to the passes). Each is run 3 times; the best
time is reported, with node counts before and after.

Run:  cargo build --release -p ferroflow-cli && .venv/bin/python scripts/bench_optimizer.py [LAYERS]
"""
import os
import re
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow as tf
from tensorflow.python.grappler import tf_optimizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grappler_reference import grappler_item  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
BIN = os.path.join(ROOT, "target", "release", "ferroflow")


def build(layers, width=16):
    rng = np.random.default_rng(0)
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, width], name="x")
        h = x
        for i in range(layers):
            with tf.name_scope(f"layer{i}"):
                w = tf.constant(rng.standard_normal((width, width)).astype(np.float32) * 0.1)
                a = tf.constant(rng.standard_normal(width).astype(np.float32))
                b = tf.constant(rng.standard_normal(width).astype(np.float32))
                c = tf.constant(0.5, shape=[width])
                bias = tf.multiply(tf.add(a, b), c)
                z = tf.nn.bias_add(tf.matmul(h, w), bias)
                s = tf.constant(0.25)
                d1 = tf.multiply(z, s)
                d2 = tf.multiply(z, s)
                r = tf.nn.relu(tf.add(d1, d2))
                r = tf.identity(tf.identity(r))
                h = tf.negative(tf.negative(r))
        out = tf.identity(h, name="out")
    return g, out


def main():
    layers = int(sys.argv[1]) if len(sys.argv) > 1 else 1200
    g, out = build(layers)
    gd = g.as_graph_def()
    mg, config = grappler_item(gd, ["x:0"], ["out:0"])
    n_nodes = len(gd.node)
    print(f"graph: {layers} layers, {n_nodes} nodes")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "layered.pb")
        with open(path, "wb") as f:
            f.write(gd.SerializeToString())
        tf_times, tf_after = [], None
        ff_times, ff_after, ff_wall = [], None, []
        for _ in range(3):
            t0 = time.perf_counter()
            opt = tf_optimizer.OptimizeGraph(config, mg)
            tf_times.append(time.perf_counter() - t0)
            tf_after = len(opt.node)
            t0 = time.perf_counter()
            r = subprocess.run([BIN, "optimize", path, "--feed", "x:0", "--fetch", "out:0"],
                               capture_output=True, text=True, check=True)
            ff_wall.append(time.perf_counter() - t0)
            m = re.search(r"total: (\d+) -> (\d+) nodes in \d+ round\(s\), ([\d.]+) ms", r.stdout)
            ff_after = int(m.group(2))
            ff_times.append(float(m.group(3)) / 1e3)
    tf_best, ff_best = min(tf_times), min(ff_times)
    print(f"TensorFlow Grappler : {tf_best * 1e3:9.1f} ms   {n_nodes} -> {tf_after} nodes")
    print(f"ferroflow optimizer : {ff_best * 1e3:9.1f} ms   {n_nodes} -> {ff_after} nodes"
          f"   (whole `ferroflow optimize` process incl. reading the .pb: {min(ff_wall) * 1e3:.1f} ms)")
    print(f"ratio ferroflow/Grappler: {ff_best / tf_best:.3f}  (Grappler/ferroflow = {tf_best / ff_best:.1f}x)")


if __name__ == "__main__":
    main()
