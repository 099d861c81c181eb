#!/usr/bin/env python3
"""Eager dispatch, ferroflow vs TensorFlow, in the same run on the same machine.

The same five calls on tiny inputs (a scalar add and relu, a 2x2 matmul, a sum over 4
values, a concat of two 4-vectors), where the kernel's own work is a few ns and the rest is
dispatch. TensorFlow runs them in eager mode from Python (`tf.add(x, y)` ...); ferroflow
through `function::eager` from Rust (examples/eager_overhead.rs). Prints µs/op and the ratio.
Then a 1,000-op body (Square of a scalar) eagerly and as a graph function on both sides.

Run:  .venv/bin/python scripts/bench_eager.py [--iters 100000]
"""
import argparse
import json
import os
import subprocess
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def tf_ns(fn, iters):
    for _ in range(max(10, iters // 10)):
        fn()
    samples = []
    for _ in range(7):
        t = time.perf_counter()
        for _ in range(iters):
            fn()
        samples.append((time.perf_counter() - t) * 1e9 / iters)
    return sorted(samples)[3]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=100_000)
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "--quiet", "--example", "eager_overhead"], cwd=ROOT, check=True)
    exe = os.path.join(ROOT, "target", "release", "examples", "eager_overhead")
    ours = {}
    for line in subprocess.run([exe, str(args.iters)], capture_output=True, text=True, check=True).stdout.splitlines():
        r = json.loads(line)
        ours[r["op"]] = r.get("ns_per_op", r.get("ns_per_call"))
    x, y = tf.constant(2.0), tf.constant(3.0)
    m = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    v = tf.constant([1.0, 2.0, 3.0, 4.0])
    cases = {
        "add_scalar": lambda: tf.add(x, y),
        "relu_scalar": lambda: tf.nn.relu(x),
        "matmul_2x2": lambda: tf.linalg.matmul(m, m),
        "reduce_sum_4": lambda: tf.reduce_sum(v, axis=0),
        "concat_2x4": lambda: tf.concat([v, v], axis=0),
    }
    tf_iters = max(1000, args.iters // 10)
    print(f"eager dispatch, µs/op (median of 7 batches; TensorFlow {tf_iters} and ferroflow {args.iters} calls per batch)")
    print(f"{'op':<14}{'TensorFlow':>12}{'ferroflow':>12}{'ratio':>9}")
    for name, fn in cases.items():
        theirs = tf_ns(fn, tf_iters)
        print(f"{name:<14}{theirs / 1e3:>12.2f}{ours[name] / 1e3:>12.3f}{theirs / ours[name]:>8.1f}x")

    # The same 1,000-op body (Square of a scalar) eagerly and as a graph function, both sides.
    def body(x):
        for _ in range(1000):
            x = tf.math.square(x)
        return x
    graph_fn = tf.function(body)
    one = tf.constant(1.0)
    graph_fn(one)
    calls = max(20, args.iters // 1000)
    tf_eager, tf_graph = tf_ns(lambda: body(one), calls // 10 or 1), tf_ns(lambda: graph_fn(one), calls)
    ff_eager, ff_graph = ours["function_1000_eager"], ours["function_1000_graph"]
    print(f"\n1,000-op body, ms per call: TensorFlow eager {tf_eager / 1e6:.2f}, tf.function {tf_graph / 1e6:.3f} "
          f"({tf_eager / tf_graph:.1f}x); ferroflow eager {ff_eager / 1e6:.3f}, function {ff_graph / 1e6:.3f} "
          f"({ff_eager / ff_graph:.1f}x)")


if __name__ == "__main__":
    main()
