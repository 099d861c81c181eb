#!/usr/bin/env python3
"""SavedModel inference, TensorFlow vs ferroflow, side by side in one run (issue 18): both load
the same directory (default: the Keras CNN with BatchNormalization of
fixtures/saved_model/keras_cnn, written by TensorFlow's `model.export()`) and call its
`serving_default` signature at batch 1 and 32. TensorFlow: `tf.saved_model.load(dir)
.signatures["serving_default"]`; ferroflow: `examples/saved_model_bench.rs`. Processes
alternate (TensorFlow, ferroflow, TensorFlow, ...) so machine noise hits both; each prints the
median latency of RUNS calls after 5 warm-up calls.

Run:  .venv/bin/python scripts/bench_saved_model.py [--dir DIR] [--rounds 3] [--runs 100]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def tf_worker(d, batch, runs):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from compare_tf import tf_saved_model_worker

    tf_saved_model_worker(d, batch, runs, 5)


def median(out):
    return float(re.search(r"median_ms=([0-9.]+)", out).group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=os.path.join(ROOT, "fixtures", "saved_model", "keras_cnn"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--batch", type=int, default=1)
    a = ap.parse_args()
    if a.worker:
        tf_worker(a.dir, a.batch, a.runs)
        return
    subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "ferroflow", "--example", "saved_model_bench"],
                   cwd=ROOT, check=True)
    exe = os.path.join(ROOT, "target", "release", "examples", "saved_model_bench")
    print(f"SavedModel {a.dir}: serving_default latency, {a.runs} calls per process, {a.rounds} rounds, "
          f"{os.cpu_count()} cores")
    for batch in (1, 32):
        tf_ms, ff_ms = [], []
        for r in range(a.rounds):
            t = subprocess.run([sys.executable, __file__, "--worker", "--dir", a.dir, "--batch", str(batch), "--runs",
                                str(a.runs)], capture_output=True, text=True, check=True).stdout
            f = subprocess.run([exe, a.dir, str(batch), str(a.runs)], capture_output=True, text=True,
                               check=True).stdout
            tf_ms.append(median(t))
            ff_ms.append(median(f))
            print(f"batch {batch:2d} round {r + 1}: TensorFlow {tf_ms[-1]:8.3f} ms   ferroflow {ff_ms[-1]:8.3f} ms   "
                  f"TF/ferroflow {tf_ms[-1] / ff_ms[-1]:5.2f}x")
        t, f = statistics.median(tf_ms), statistics.median(ff_ms)
        print(f"batch {batch:2d}: TensorFlow median {t:.3f} ms, ferroflow median {f:.3f} ms, "
              f"ferroflow is {t / f:.2f}x TensorFlow's speed")


if __name__ == "__main__":
    main()
