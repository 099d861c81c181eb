#!/usr/bin/env python3
"""The project's one table of ratios against TensorFlow (issue 19): every workload run side by
side on this machine, TensorFlow and ferroflow processes alternating round by round (so machine
noise hits both), written to docs/PERFORMANCE.md with the date and the CPU.

Workloads (each a TensorFlow process and a ferroflow process printing `median_ms=`):
  - MobileNetV2 and ResNet50 (Keras' architectures, random weights, 224x224x3, frozen by
    scripts/make_model_fixtures.py --large into target/models/), batch 1 and 32, default
    threads and 1 thread: TensorFlow runs the frozen GraphDef in a tf.compat.v1 Session
    (Grappler and oneDNN on, as a TensorFlow user gets them); ferroflow runs it with
    `ferroflow benchmark` (its optimizer on).
  - MobileNetV2 alpha 0.35 at 96x96 (the committed test model), batch 1 and 32.
  - The Keras CNN SavedModel (fixtures/saved_model/keras_cnn), batch 1 and 32: TensorFlow
    `tf.saved_model.load(dir).signatures["serving_default"]`, ferroflow
    `examples/saved_model_bench`.

The ratio is TensorFlow's median / ferroflow's median (> 1: ferroflow faster); the spread is
the range of the per-round ratios. Peak RSS is each side's largest over its rounds.

The other rows the issue lists (executor, FULL_TRACE, seed-003 training, MLP latency, small
CNN, GEMM, optimizer, checkpoints, input pipeline) have their own scripts today
(scripts/bench_*.py); they join this table as they are ported to the worker format below.

Run:  .venv/bin/python scripts/make_model_fixtures.py --large      # once
      .venv/bin/python scripts/compare_tf.py [--rounds 3] [--runs 20] [--only NAME...] [--no-write]
      (--only measures the rows whose names contain a NAME and replaces just those rows)
"""
import argparse
import datetime
import os
import platform
import re
import subprocess
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
FF = os.path.join(ROOT, "target", "release", "ferroflow")
MODELS = os.path.join(ROOT, "target", "models")


def peak_rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def tf_graph_worker(graph, inputs, fetch, runs, warmup, threads):
    """A frozen GraphDef in a TF1 Session, timed per run."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import numpy as np
    import tensorflow as tf

    gd = tf.compat.v1.GraphDef()
    with open(graph, "rb") as f:
        gd.ParseFromString(f.read())
    feeds = dict(np.load(inputs))
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=threads, inter_op_parallelism_threads=threads)
    g = tf.Graph()
    with g.as_default():
        tf.graph_util.import_graph_def(gd, name="")
    with tf.compat.v1.Session(graph=g, config=config) as sess:
        for _ in range(warmup):
            sess.run(fetch, feeds)
        ms = []
        for _ in range(runs):
            start = time.perf_counter()
            sess.run(fetch, feeds)
            ms.append((time.perf_counter() - start) * 1e3)
    ms.sort()
    print(f"median_ms={ms[len(ms) // 2]:.3f} min_ms={ms[0]:.3f} max_ms={ms[-1]:.3f} peak_rss_mb={peak_rss_mb():.1f}")


def tf_saved_model_worker(d, batch, runs, warmup):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import numpy as np
    import tensorflow as tf

    sig = tf.saved_model.load(d).signatures["serving_default"]
    feeds = {}
    for key, spec in sig.structured_input_signature[1].items():
        dims = [batch if s is None else s for s in spec.shape.as_list()]
        n = int(np.prod(dims))
        feeds[key] = tf.constant(((np.arange(n) * 7919) % 1000 / 1000.0).astype(np.float32).reshape(dims))
    for _ in range(warmup):
        sig(**feeds)
    ms = []
    for _ in range(runs):
        start = time.perf_counter()
        for v in sig(**feeds).values():
            v.numpy()
        ms.append((time.perf_counter() - start) * 1e3)
    ms.sort()
    print(f"median_ms={ms[len(ms) // 2]:.3f} min_ms={ms[0]:.3f} max_ms={ms[-1]:.3f} peak_rss_mb={peak_rss_mb():.1f}")


def batch_inputs(npz, batch):
    """The model's fixture input repeated to `batch`, saved keyed by tensor name."""
    import numpy as np

    out = os.path.join(os.path.dirname(npz), os.path.basename(npz).replace(".npz", f".b{batch}.npz"))
    if not os.path.exists(out):
        x = np.load(npz)["x"]
        reps = -(-batch // x.shape[0])
        np.savez(out, **{"x:0": np.concatenate([x] * reps)[:batch]})
    return out


def workloads(a):
    """(name, TensorFlow command, ferroflow command) for each row."""
    rows = []
    me = [sys.executable, os.path.abspath(__file__)]
    graphs = [("MobileNetV2 0.35 96x96", os.path.join(ROOT, "fixtures", "models", "mobilenet_v2_035_96"))]
    for name, base in [("MobileNetV2", "mobilenet_v2"), ("ResNet50", "resnet50")]:
        path = os.path.join(MODELS, base)
        if os.path.exists(path + ".pb"):
            graphs.append((name, path))
        else:
            print(f"(no {path}.pb: run scripts/make_model_fixtures.py --large for the {name} rows)")
    for name, base in graphs:
        for batch in (1, 32):
            for threads in (0, 1):
                label = f"{name} batch {batch}, " + ("default threads" if threads == 0 else "1 thread")
                inputs = batch_inputs(base + ".npz", batch)
                tf_cmd = me + ["--worker", "tf_graph", base + ".pb", inputs, "logits:0", str(a.runs), "3",
                               str(threads)]
                ff_cmd = [FF, "benchmark", base + ".pb", "--inputs", inputs, "--fetch", "logits:0", "--runs",
                          str(a.runs), "--warmup", "3", "--inter-op-threads", str(threads), "--intra-op-threads",
                          str(threads)]
                rows.append((label, tf_cmd, ff_cmd))
    sm = os.path.join(ROOT, "fixtures", "saved_model", "keras_cnn")
    bench = os.path.join(ROOT, "target", "release", "examples", "saved_model_bench")
    for batch in (1, 32):
        rows.append((f"Keras CNN SavedModel batch {batch}",
                     me + ["--worker", "tf_saved_model", sm, str(batch), str(a.runs * 5), "5"],
                     [bench, sm, str(batch), str(a.runs * 5)]))
    if a.only:
        rows = [r for r in rows if any(o.lower() in r[0].lower() for o in a.only)]
    return rows


def measure(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {out.stderr.strip()[-500:]}")
    m = re.search(r"median_ms=([0-9.]+)", out.stdout)
    rss = re.search(r"peak_rss_mb=([0-9.]+)", out.stdout)
    return float(m.group(1)), float(rss.group(1)) if rss else None


def cpu_name():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker")
    ap.add_argument("args", nargs="*")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    if a.worker == "tf_graph":
        g, inputs, fetch, runs, warmup, threads = a.args
        return tf_graph_worker(g, inputs, fetch, int(runs), int(warmup), int(threads))
    if a.worker == "tf_saved_model":
        d, batch, runs, warmup = a.args
        return tf_saved_model_worker(d, int(batch), int(runs), int(warmup))
    for cmd in (["-p", "ferroflow-cli"], ["-p", "ferroflow", "--example", "saved_model_bench"]):
        subprocess.run(["cargo", "build", "--release", "--quiet"] + cmd, cwd=ROOT, check=True)
    import statistics

    results = []
    for name, tf_cmd, ff_cmd in workloads(a):
        tf_ms, ff_ms, tf_rss, ff_rss = [], [], [], []
        for _ in range(a.rounds):
            t, tr = measure(tf_cmd)
            f, fr = measure(ff_cmd)
            tf_ms.append(t)
            ff_ms.append(f)
            tf_rss.append(tr or 0)
            ff_rss.append(fr or 0)
        t, f = statistics.median(tf_ms), statistics.median(ff_ms)
        ratios = [x / y for x, y in zip(tf_ms, ff_ms)]
        row = (name, t, f, t / f, min(ratios), max(ratios), a.rounds, max(tf_rss), max(ff_rss))
        results.append(row)
        print(f"{name:<42} TF {t:9.2f} ms  ferroflow {f:9.2f} ms  ratio {t / f:5.2f} "
              f"({min(ratios):.2f}-{max(ratios):.2f})  RSS TF {max(tf_rss):.0f} MB / ff {max(ff_rss):.0f} MB",
              flush=True)
    if a.no_write:
        return
    path = os.path.join(ROOT, "docs", "PERFORMANCE.md")
    if a.only and os.path.exists(path):
        # Rows measured now replace their lines; the others stay as they were measured.
        with open(path) as fh:
            old = fh.read().splitlines()
        new = {r[0]: table_row(r) for r in results}
        lines = [new.pop(line.split(" | ")[0][2:], line) if line.startswith("| ") else line for line in old]
        at = max(i for i, line in enumerate(lines) if line.startswith("| ")) + 1
        lines[at:at] = list(new.values())
        with open(path, "w") as fh:
            fh.write("\n".join(lines) + "\n")
        print(f"updated {len(results)} row(s) of docs/PERFORMANCE.md")
        return
    lines = [
        "# Performance against TensorFlow",
        "",
        f"Written by `scripts/compare_tf.py` on {datetime.date.today()} ({cpu_name()}, {os.cpu_count()} cores),",
        f"TensorFlow {tf_version()} (tensorflow-cpu, oneDNN), {a.rounds} rounds of alternating processes, "
        f"{a.runs} timed runs per process. Ratio = TensorFlow's median / ferroflow's median (> 1: ferroflow",
        "faster); spread = the lowest and highest per-round ratio. Peak RSS is the largest of each side's processes.",
        "",
        "| workload | TensorFlow (ms) | ferroflow (ms) | ratio | spread | rounds | peak RSS TF / ferroflow (MB) |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [table_row(r) for r in results]
    lines += ["", "The other workloads (executor, FULL_TRACE, training, GEMM, optimizer, checkpoints, input",
              "pipeline) are measured by their own `scripts/bench_*.py` today; see the README's figures."]
    with open(os.path.join(ROOT, "docs", "PERFORMANCE.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("wrote docs/PERFORMANCE.md")


def table_row(r):
    name, t, f, ratio, lo, hi, n, tr, fr = r
    return f"| {name} | {t:.2f} | {f:.2f} | {ratio:.2f} | {lo:.2f}–{hi:.2f} | {n} | {tr:.0f} / {fr:.0f} |"


def tf_version():
    out = subprocess.run([sys.executable, "-c", "import tensorflow as tf; print(tf.__version__)"], capture_output=True,
                         text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    return out.stdout.strip() or "?"


if __name__ == "__main__":
    sys.exit(main())
