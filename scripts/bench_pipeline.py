#!/usr/bin/env python3
"""input_pipeline, tf.data vs ferroflow, side by side in one run.

Both sides read the same class-folder directory of JPEGs: file list -> map(read_file ->
decode_jpeg(channels=3) -> resize(224, 224)) -> batch(32) [-> prefetch], either with a parallel
map (AUTOTUNE) + prefetch(AUTOTUNE) or serially (no parallel map, no prefetch). Each round runs
one TensorFlow process and one ferroflow process (alternating, so machine noise hits both), each
reading EPOCHS epochs (serial mode turns off tf.data's default map_parallelization and
inject_prefetch rewrites, which would otherwise parallelize its "serial" map); the script prints every epoch's images/s, each process's peak RSS, and the
ratio ferroflow / tf.data per epoch and overall.

Run:  cargo build --release -p ferroflow-cli
      target/release/ferroflow flowers /tmp/flowers600 --per-class 120 --size 500x375
      .venv/bin/python scripts/bench_pipeline.py /tmp/flowers600 [--rounds 3] [--epochs 3]
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def tf_worker(directory, epochs, parallel):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    classes = sorted(d for d in os.listdir(directory) if os.path.isdir(os.path.join(directory, d)))
    files, labels = [], []
    for i, c in enumerate(classes):
        f = sorted(glob.glob(os.path.join(directory, c, "*.jpg")))
        files += f
        labels += [i] * len(f)

    def load(path, label):
        image = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
        return tf.image.resize(image, (224, 224)), label

    ds = tf.data.Dataset.from_tensor_slices((files, labels))
    ds = ds.map(load, num_parallel_calls=tf.data.AUTOTUNE if parallel else None).batch(32)
    if parallel:
        ds = ds.prefetch(tf.data.AUTOTUNE)
    else:
        # tf.data's default graph rewrites would parallelize the map (map_parallelization)
        # and add a prefetch (inject_prefetch) behind the user's back; serial means serial.
        options = tf.data.Options()
        options.experimental_optimization.map_parallelization = False
        options.experimental_optimization.inject_prefetch = False
        ds = ds.with_options(options)
    for e in range(epochs):
        start = time.perf_counter()
        n = 0
        for x, _ in ds:
            n += int(x.shape[0])
        secs = time.perf_counter() - start
        print(f"epoch {e + 1}: {n} images, {secs:.3f} s, {n / secs:.1f} images/s", flush=True)


def run_measured(cmd):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed (exit {p.returncode}):\n{out}")
    return out, usage.ru_maxrss / 1024.0


def rates(out):
    return [float(m) for m in re.findall(r"epoch \d+: .*?([0-9.]+) images/s", out)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--ferroflow", default=os.path.join(ROOT, "target", "release", "ferroflow"))
    ap.add_argument("--worker", choices=["tf"], help=argparse.SUPPRESS)
    ap.add_argument("--serial", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker == "tf":
        tf_worker(a.dir, a.epochs, not a.serial)
        return
    n = len(glob.glob(os.path.join(a.dir, "*", "*.jpg")))
    print(f"{n} JPEGs in {a.dir}, {a.epochs} epochs per process, {a.rounds} rounds, {os.cpu_count()} cores")
    for mode in ["parallel", "serial"]:
        tf_all, ff_all = [], []
        print(f"\n== {mode}: " + ("parallel map AUTOTUNE + prefetch AUTOTUNE" if mode == "parallel" else "no parallel map, no prefetch"))
        for r in range(a.rounds):
            tf_cmd = [sys.executable, __file__, a.dir, "--worker", "tf", "--epochs", str(a.epochs)]
            ff_cmd = [a.ferroflow, "pipeline", a.dir, "--no-shuffle", "--epochs", str(a.epochs)]
            if mode == "serial":
                tf_cmd.append("--serial")
            else:
                ff_cmd += ["--parallel", "auto", "--prefetch", "auto"]
            tf_out, tf_rss = run_measured(tf_cmd)
            ff_out, ff_rss = run_measured(ff_cmd)
            t, f = rates(tf_out), rates(ff_out)
            tf_all += t
            ff_all += f
            for e, (x, y) in enumerate(zip(t, f)):
                print(f"round {r + 1} epoch {e + 1}: tf.data {x:7.1f} img/s   ferroflow {y:7.1f} img/s   ratio {y / x:5.2f}")
            print(f"round {r + 1} peak RSS: tf.data {tf_rss:.0f} MB, ferroflow {ff_rss:.0f} MB")
            for line in ff_out.splitlines():
                if line.startswith("autotune"):
                    print("  ferroflow " + line)
        ratios = [y / x for x, y in zip(tf_all, ff_all)]
        print(
            f"{mode}: tf.data mean {sum(tf_all) / len(tf_all):.1f} img/s (min {min(tf_all):.1f}, max {max(tf_all):.1f}); "
            f"ferroflow mean {sum(ff_all) / len(ff_all):.1f} img/s (min {min(ff_all):.1f}, max {max(ff_all):.1f}); "
            f"per-epoch ratio min {min(ratios):.2f}, mean {sum(ratios) / len(ratios):.2f}"
        )


if __name__ == "__main__":
    main()
