#!/usr/bin/env python3
"""Executor overhead, ferroflow vs TensorFlow, in the same run on the same machine.

Graphs (same in both): `chain` = a fed scalar through 2,000 `Square` ops; `wide` = 2,000
independent `Square` ops on the fed scalar, joined by one `Pack` (tf.stack). TensorFlow runs
them as a `tf.function` (its graph executor, after Grappler); ferroflow runs them through
`Session::run_plan` (examples/executor_overhead.rs). Prints ns/op for both and the ratio.

Run:  .venv/bin/python scripts/bench_executor.py [--ops 2000] [--iters 300]
"""
import argparse
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def tf_ns_per_op(fn, n_ops, iters):
    x = tf.constant(1.0)
    for _ in range(max(3, iters // 10)):
        fn(x)
    samples = []
    for _ in range(7):
        t = time.perf_counter()
        for _ in range(iters):
            fn(x)
        samples.append((time.perf_counter() - t) * 1e9 / iters / n_ops)
    return sorted(samples)[3]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", type=int, default=2000)
    ap.add_argument("--iters", type=int, default=300)
    args = ap.parse_args()
    n = args.ops

    subprocess.run(["cargo", "build", "--release", "--quiet", "--example", "executor_overhead"], cwd=ROOT, check=True)
    exe = os.path.join(ROOT, "target", "release", "examples", "executor_overhead")
    ours = {}
    for line in subprocess.run([exe, str(n), str(args.iters)], capture_output=True, text=True, check=True).stdout.splitlines():
        r = json.loads(line)
        ours[(r["graph"], r["inter_op_threads"], r.get("trace", "none"))] = r["ns_per_op"]

    spec = [tf.TensorSpec([], tf.float32)]

    @tf.function(input_signature=spec)
    def chain(x):
        for _ in range(n):
            x = tf.math.square(x)
        return x

    @tf.function(input_signature=spec)
    def wide(x):
        return tf.stack([tf.math.square(x) for _ in range(n)])

    print(f"executor overhead, {n} ops, ns/op (median of 7 batches of {args.iters} runs)")
    print("TensorFlow uses its default thread pools; ferroflow is shown with 1 and 2 inter-op threads")
    print(f"{'graph':<8}{'TensorFlow':>12}{'ff 1 thread':>13}{'ratio':>8}{'ff 2 threads':>14}{'ratio':>8}")
    for name, fn, ops in [("chain", chain, n), ("wide", wide, n + 1)]:
        theirs = tf_ns_per_op(fn, ops, args.iters)
        one, two = ours[(name, 1, "none")], ours[(name, 2, "none")]
        print(f"{name:<8}{theirs:>12.1f}{one:>13.1f}{theirs / one:>7.1f}x{two:>14.1f}{theirs / two:>7.1f}x")
        sys.stdout.flush()

    # Step-stats collection: a TF1 Session running the chain with RunOptions FULL_TRACE (and a
    # RunMetadata to fill) against NO_TRACE; ferroflow's Session::run_plan_with_options likewise.
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [], name="x")
        y = x
        for _ in range(n):
            y = tf.math.square(y)
    with tf.compat.v1.Session(graph=g) as sess:
        def tf1(trace):
            opts = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE if trace else 0)
            meta = tf.compat.v1.RunMetadata()
            iters = max(10, args.iters // 10)
            for _ in range(3):
                sess.run(y, {x: 1.0}, options=opts, run_metadata=meta)
            samples = []
            for _ in range(7):
                t = time.perf_counter()
                for _ in range(iters):
                    sess.run(y, {x: 1.0}, options=opts, run_metadata=meta)
                samples.append((time.perf_counter() - t) * 1e9 / iters / n)
            return sorted(samples)[3]
        tf_plain, tf_full = tf1(False), tf1(True)
    ff_plain, ff_full = ours[("chain", 1, "none")], ours[("chain", 1, "full")]
    print(f"\nstep stats on the chain, ns/op: TensorFlow 1 Session NO_TRACE {tf_plain:.1f}, FULL_TRACE {tf_full:.1f} "
          f"(+{tf_full - tf_plain:.1f}); ferroflow NO_TRACE {ff_plain:.1f}, FULL_TRACE {ff_full:.1f} (+{ff_full - ff_plain:.1f})")


if __name__ == "__main__":
    main()
