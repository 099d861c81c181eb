#!/usr/bin/env python3
"""Executor overhead, ferroflow vs TensorFlow, in the same run on the same machine.

Graphs (same in both): `chain` = a fed scalar through 2,000 `Square` ops; `wide` = 2,000
independent `Square` ops on the fed scalar, joined by one `Pack` (tf.stack). TensorFlow runs
them as a `tf.function` (its graph executor); ferroflow runs them through `Session::run_plan`
(examples/executor_overhead.rs) with its optimizer off, so every node runs. TensorFlow is timed
twice: with Grappler off (the same 2,000 nodes executed: the ratio's basis) and with it on
(what a user gets: Grappler fuses the chain into one `_UnaryOpsComposition` node). Prints
ns/op for each and the ratios.

Step stats (RunOptions FULL_TRACE): a TF1 Session with Grappler off, so it, too, records 2,000
node stats (with Grappler on it records 5, and "per node" divides by the wrong count).

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


def no_grappler_config():
    cfg = tf.compat.v1.ConfigProto()
    cfg.graph_options.rewrite_options.disable_meta_optimizer = True
    return cfg


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

    def make():
        @tf.function(input_signature=spec)
        def chain(x):
            for _ in range(n):
                x = tf.math.square(x)
            return x

        @tf.function(input_signature=spec)
        def wide(x):
            return tf.stack([tf.math.square(x) for _ in range(n)])
        return chain, wide

    # tf.functions are optimized when first called: time them with Grappler off, then on.
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
    plain = dict(zip(["chain", "wide"], make()))
    theirs_off = {name: tf_ns_per_op(fn, n if name == "chain" else n + 1, args.iters) for name, fn in plain.items()}
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": False})
    grappled = dict(zip(["chain", "wide"], make()))
    theirs_on = {name: tf_ns_per_op(fn, n if name == "chain" else n + 1, args.iters) for name, fn in grappled.items()}

    print(f"executor overhead, {n} ops, ns/op (median of 7 batches of {args.iters} runs)")
    print("TensorFlow uses its default thread pools; ferroflow is shown with 1 and 2 inter-op threads;")
    print("ratios are against TensorFlow running the same nodes (Grappler off)")
    print(f"{'graph':<8}{'TF no Grappler':>15}{'TF Grappler':>13}{'ff 1 thread':>13}{'ratio':>8}{'ff 2 threads':>14}{'ratio':>8}")
    for name in ["chain", "wide"]:
        theirs = theirs_off[name]
        one, two = ours[(name, 1, "none")], ours[(name, 2, "none")]
        print(f"{name:<8}{theirs:>15.1f}{theirs_on[name]:>13.1f}{one:>13.1f}{theirs / one:>7.1f}x{two:>14.1f}"
              f"{theirs / two:>7.1f}x")
        sys.stdout.flush()

    # Step-stats collection: a TF1 Session running the chain with RunOptions FULL_TRACE (and a
    # RunMetadata to fill) against NO_TRACE; ferroflow's Session::run_plan_with_options likewise.
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [], name="x")
        y = x
        for _ in range(n):
            y = tf.math.square(y)
    with tf.compat.v1.Session(graph=g, config=no_grappler_config()) as sess:
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
            return sorted(samples)[3], sum(len(d.node_stats) for d in meta.step_stats.dev_stats)
        (tf_plain, _), (tf_full, recorded) = tf1(False), tf1(True)
    ff_plain, ff_full = ours[("chain", 1, "none")], ours[("chain", 1, "full")]
    tf_cost, ff_cost = tf_full - tf_plain, ff_full - ff_plain
    print(f"\nstep stats on the chain ({recorded} node stats recorded by TensorFlow), ns/node: "
          f"TensorFlow 1 Session NO_TRACE {tf_plain:.1f}, FULL_TRACE {tf_full:.1f} (+{tf_cost:.1f}); "
          f"ferroflow NO_TRACE {ff_plain:.1f}, FULL_TRACE {ff_full:.1f} (+{ff_cost:.1f}); "
          f"ferroflow's cost / TensorFlow's: {ff_cost / tf_cost:.3f}")


if __name__ == "__main__":
    main()
