#!/usr/bin/env python3
"""CNN inference throughput, ferroflow vs TensorFlow, in the same run on the same machine.

The graph is the issue's CNN (batch 32, 28x28x1, conv 3x3x32 -> pool -> conv 3x3x64 -> pool ->
dense 10 -> log_softmax) with the fixture's weights: TensorFlow runs it as a tf.function;
ferroflow runs the frozen fixtures/tf/cnn.pb (examples/cnn_inference.rs).

Run:  .venv/bin/python scripts/bench_cnn.py [--batch 32] [--seconds 3]
"""
import argparse
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures import cnn_function, cnn_weights  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "ferroflow", "--example", "cnn_inference"],
                   cwd=ROOT, check=True)
    exe = os.path.join(ROOT, "target", "release", "examples", "cnn_inference")
    ours = [json.loads(line) for line in subprocess.run([exe, str(args.batch), str(args.seconds)], capture_output=True,
                                                         text=True, check=True).stdout.splitlines()]

    model = cnn_function(cnn_weights(np.random.default_rng(7)))
    x = tf.constant(np.random.default_rng(0).uniform(0, 1, (args.batch, 28, 28, 1)).astype(np.float32))
    for _ in range(5):
        model(x)
    start, runs = time.perf_counter(), 0
    while time.perf_counter() - start < args.seconds:
        model(x).numpy()
        runs += 1
    theirs = runs * args.batch / (time.perf_counter() - start)

    print(f"CNN inference, batch {args.batch}, images/s (higher is better)")
    print(f"TensorFlow 2.21 (default threads): {theirs:,.0f}")
    for r in ours:
        print(f"ferroflow, {r['threads']} thread(s):        {r['images_per_s']:,.0f}  ({r['images_per_s'] / theirs:.2f}x TensorFlow)")


if __name__ == "__main__":
    main()
