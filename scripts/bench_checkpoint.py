#!/usr/bin/env python3
"""Checkpoint save/restore throughput, TensorFlow vs ferroflow, in the same run.

Both sides: K float32 variables holding N parameters in all (default 10 x 10M = 100 million,
400 MB), random-initialized in a TF1-style session, then `repeat` times: Saver.save with a
global step (SaveV2 + .meta + `checkpoint` file, max_to_keep=1) and Saver.restore into the same
session (RestoreV2 + assignments). ferroflow runs examples/checkpoint_bench.rs. Processes
alternate (TF, ferroflow, TF, ...) because this machine's speed drifts between minutes; the
median and best MB/s of each side and the ratios are printed. Files go to --dir (default: the
system temp directory, the same disk for both). Before each process the script calls sync(), so
neither side pays for the other's unwritten pages. ferroflow fsyncs what it saves (crash safety);
TensorFlow's SaveV2 does not, so its save time excludes the disk writes.

Run:  cargo build --release -p ferroflow --example checkpoint_bench
      .venv/bin/python scripts/bench_checkpoint.py [--params 100000000] [--vars 10] [--rounds 3]
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def run_tensorflow(params, nvars, repeat, directory):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    v1 = tf.compat.v1
    v1.disable_eager_execution()
    g = tf.Graph()
    per = params // nvars
    with g.as_default():
        v1.set_random_seed(1)
        for i in range(nvars):
            v1.get_variable(f"var_{i}", [per], initializer=v1.random_uniform_initializer(-1.0, 1.0),
                            use_resource=True)
        init = v1.global_variables_initializer()
        saver = v1.train.Saver(max_to_keep=1)
    mb = per * nvars * 4 / 1e6
    save, restore = [], []
    with v1.Session(graph=g) as sess:
        sess.run(init)
        for i in range(repeat):
            t = time.perf_counter()
            path = saver.save(sess, os.path.join(directory, "model.ckpt"), global_step=i)
            save.append(mb / (time.perf_counter() - t))
            t = time.perf_counter()
            saver.restore(sess, path)
            restore.append(mb / (time.perf_counter() - t))
    print(f"save_mb_per_s={statistics.median(save):.1f} best={max(save):.1f}")
    print(f"restore_mb_per_s={statistics.median(restore):.1f} best={max(restore):.1f}")


def parse(out):
    return {k: float(v) for k, v in re.findall(r"(save_mb_per_s|restore_mb_per_s)=([0-9.]+)", out)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--params", type=int, default=100_000_000)
    ap.add_argument("--vars", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3, help="saves and restores per process")
    ap.add_argument("--rounds", type=int, default=3, help="processes per side, alternating")
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--tf-child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.tf_child:
        run_tensorflow(a.params, a.vars, a.repeat, a.dir)
        return 0
    exe = os.path.join(ROOT, "target", "release", "examples", "checkpoint_bench")
    if not os.path.exists(exe):
        sys.exit(f"{exe} is missing: cargo build --release -p ferroflow --example checkpoint_bench")
    res = {"tensorflow": [], "ferroflow": []}
    for r in range(a.rounds):
        for side in ["tensorflow", "ferroflow"]:
            d = tempfile.mkdtemp(prefix=f"ckpt_bench_{side}_", dir=a.dir)
            common = ["--params", str(a.params), "--vars", str(a.vars), "--repeat", str(a.repeat)]
            if side == "tensorflow":
                cmd = [sys.executable, __file__, "--tf-child", "--dir", d, *common]
            else:
                cmd = [exe, "--dir", os.path.join(d, "ff"), *common]
            # Start each process with no dirty pages left by the other one (TensorFlow does not
            # fsync, so its 400 MB would otherwise be written back during ferroflow's run).
            os.sync()
            time.sleep(1)
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            shutil.rmtree(d, ignore_errors=True)
            res[side].append(parse(out))
            print(f"round {r + 1} {side}: {res[side][-1]}", flush=True)
    mb = a.params // a.vars * a.vars * 4 / 1e6
    print(f"\n{a.params // a.vars * a.vars:,} parameters ({mb:.0f} MB) in {a.vars} variables; MB/s, median over "
          f"{a.rounds} processes (each the median of {a.repeat}):")
    for key, what in [("save_mb_per_s", "save"), ("restore_mb_per_s", "restore")]:
        t = statistics.median(x[key] for x in res["tensorflow"])
        f = statistics.median(x[key] for x in res["ferroflow"])
        print(f"{what:8s} TensorFlow {t:8.1f}  ferroflow {f:8.1f}  ratio {f / t:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
