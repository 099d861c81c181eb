#!/usr/bin/env python3
"""Python overhead of ferroflow's Session.run (issue 46, point 6), measured side by side.

The batch-1 MLP (784 -> 256 relu -> 256 relu -> 10 softmax, constant weights) as one GraphDef:
- ferroflow from Python: `ferroflow.Session.run(y, {x: arr})`, median of many calls
  (from the main thread, so each step is interruptible by Ctrl-C, and from a worker thread);
- the same step from Rust: `ferroflow benchmark` on the same GraphDef and feed (median);
- TensorFlow from Python: `tf.compat.v1.Session.run` on the same GraphDef (same process kind);
- a 100 MB feed and fetch through ferroflow: time and peak RSS growth.
Overhead = Python median - Rust median. Targets: overhead <= 15 us; ferroflow >= 5x TF per call.

Run:  .venv/bin/python scripts/python_overhead.py --ff-python /path/to/ff-venv/bin/python
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

BUILD = r"""
import sys, numpy as np, ferroflow as ff
rng = np.random.default_rng(0)
x = ff.placeholder(ff.float32, [None, 784], name="x")
h = x
for i, (a, b) in enumerate([(784, 256), (256, 256)]):
    w = ff.constant((rng.standard_normal((a, b)) * 0.05).astype(np.float32), name=f"w{i}")
    h = ff.raw_ops.Relu(features=ff.raw_ops.MatMul(a=h, b=w) + ff.constant(np.zeros(b, np.float32)))
w = ff.constant((rng.standard_normal((256, 10)) * 0.05).astype(np.float32), name="w2")
y = ff.raw_ops.Softmax(logits=ff.raw_ops.MatMul(a=h, b=w), name="y")
open(sys.argv[1], "wb").write(ff.get_default_graph().as_graph_def())
np.save(sys.argv[2], rng.standard_normal((1, 784)).astype(np.float32))
"""

FF_TIME = r"""
import json, resource, statistics, sys, threading, time, numpy as np, ferroflow as ff
g = ff.load_graph(sys.argv[1]); x = np.load(sys.argv[2]); n = int(sys.argv[3])
sess = ff.Session(graph=g)
def bench():
    for _ in range(200): sess.run("y:0", {"x:0": x})
    ts = []
    for _ in range(n):
        t = time.perf_counter(); sess.run("y:0", {"x:0": x}); ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e6
main = bench()
out = {}
th = threading.Thread(target=lambda: out.setdefault("worker", bench())); th.start(); th.join()
# 100 MB through an Identity graph.
gi = ff.Graph()
with gi.as_default():
    p = ff.placeholder(ff.float32, [None], name="p"); ff.raw_ops.Identity(input=p, name="q")
si = ff.Session(graph=gi)
big = np.ones(25_000_000, np.float32)
si.run("q:0", {"p:0": big[:10]})
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter(); r = si.run("q:0", {"p:0": big}); big_ms = (time.perf_counter() - t) * 1e3
rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"main_us": main, "worker_us": out["worker"], "big_ms": big_ms,
                  "big_rss_growth_mb": (rss1 - rss0) / 1024, "fetch_is_view": r.base is not None}))
"""


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ff-python", required=True)
    p.add_argument("--binary", default=os.path.join(ROOT, "target", "release", "ferroflow"))
    p.add_argument("--calls", type=int, default=5000)
    a = p.parse_args()
    work = tempfile.mkdtemp(prefix="ff_overhead_")
    graph, feed = os.path.join(work, "mlp.pb"), os.path.join(work, "x.npy")
    subprocess.run([a.ff_python, "-c", BUILD, graph, feed], check=True)
    ff = json.loads(subprocess.run([a.ff_python, "-c", FF_TIME, graph, feed, str(a.calls)], check=True,
                                   capture_output=True, text=True).stdout.strip().splitlines()[-1])
    r = subprocess.run([a.binary, "benchmark", graph, "--feed", f"x:0={feed}", "--fetch", "y:0",
                        "--runs", str(a.calls), "--warmup", "200"], check=True, capture_output=True, text=True)
    rust_us = float(re.search(r"median_ms=([0-9.]+)", r.stdout + r.stderr).group(1)) * 1e3
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import statistics
    import time
    import numpy as np
    import tensorflow as tf
    gd = tf.compat.v1.GraphDef.FromString(open(graph, "rb").read())
    with tf.Graph().as_default() as g:
        tf.compat.v1.import_graph_def(gd, name="")
        with tf.compat.v1.Session(graph=g) as sess:
            x = np.load(feed)
            for _ in range(200):
                sess.run("y:0", {"x:0": x})
            ts = []
            for _ in range(a.calls):
                t = time.perf_counter()
                sess.run("y:0", {"x:0": x})
                ts.append(time.perf_counter() - t)
    tf_us = statistics.median(ts) * 1e6
    print(f"batch-1 MLP Session.run, median of {a.calls} calls:")
    print(f"  ferroflow from Python (main thread, interruptible): {ff['main_us']:.1f} us")
    print(f"  ferroflow from Python (worker thread):              {ff['worker_us']:.1f} us")
    print(f"  ferroflow from Rust (`ferroflow benchmark`):        {rust_us:.1f} us")
    print(f"  TensorFlow 2.21 tf.compat.v1.Session from Python:    {tf_us:.1f} us")
    print(f"  Python overhead: main {ff['main_us'] - rust_us:.1f} us, worker {ff['worker_us'] - rust_us:.1f} us (target <= 15)")
    print(f"  ferroflow vs TensorFlow per call: {tf_us / ff['main_us']:.2f}x main, {tf_us / ff['worker_us']:.2f}x worker (target >= 5)")
    print(f"100 MB feed + fetch (Identity): {ff['big_ms']:.1f} ms, peak RSS growth {ff['big_rss_growth_mb']:.0f} MB, "
          f"fetch is a view: {ff['fetch_is_view']}")


if __name__ == "__main__":
    main()
