#!/usr/bin/env python3
"""Checks what a multi-process ferroflow run records against TensorFlow and real TensorBoard
(+ its profile plugin), live on 127.0.0.1.

1. TensorFlow's MLP fixture, its first layer placed on /job:worker/task:1, runs across two
   MPI ranks: `mpirun -np 2 ferroflow run ... --partition-graphs --run-metadata --profile`.
   Its output matches TensorFlow's; TensorFlow parses both tasks' partition graphs (rank 0
   gathered them); the event file's tagged RunMetadata (rank 0 gathered every task's step
   stats) parses with TensorFlow and holds node stats of both tasks' devices, and
   `timeline.Timeline` turns it into a Chrome trace.
2. mnist_training trained data-parallel on two ranks with `--logdir --profile-batch`: rank 0 writes
   one profile run holding both ranks' captures, a host each.
3. Real TensorBoard serves both: the graph plugin lists the run metadata tag `step_0` and
   returns it; the profile plugin lists both runs, and for each capture both hosts
   (`<host>-rank0`, `<host>-rank1`), each with an overview page and a trace.

Needs Open MPI (`apt-get install openmpi-bin libopenmpi-dev libclang-dev`) and the venv with
`tensorflow-cpu tensorboard tensorboard-plugin-profile`.
Run:  .venv/bin/python scripts/distributed_check.py [--keep DIR]
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tfcheck import FIX, ROOT, TensorBoard, check, failures  # noqa: E402

EXE = os.path.join(ROOT, "target", "release", "ferroflow")
ON_TASK_1 = ["x", "MatMul/ReadVariableOp/resource", "BiasAdd/ReadVariableOp/resource", "MatMul/ReadVariableOp",
             "MatMul", "BiasAdd/ReadVariableOp", "BiasAdd", "Relu"]


def mpirun(args):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = ["mpirun", "-np", "2", "--oversubscribe", "--bind-to", "none", "--mca", "btl", "self,vader", EXE] + args
    return subprocess.run(cmd, capture_output=True, text=True, env=env)


def split_mlp(path):
    blocks = open(os.path.join(FIX, "mlp.pbtxt")).read().split("node {")
    for i, b in enumerate(blocks[1:], 1):
        name = b.split('name: "')[1].split('"')[0]
        if name in ON_TASK_1:
            blocks[i] = b.replace("\n  op:", '\n  device: "/job:worker/task:1"\n  op:', 1)
    open(path, "w").write("node {".join(blocks))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keep", help="write the logs here (kept) instead of a temp dir")
    a = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "ferroflow-cli", "--features", "mpi"],
                   cwd=ROOT, check=True)
    import numpy as np
    import tensorflow as tf
    from google.protobuf import text_format
    from tensorflow.python.client import timeline

    work = a.keep or tempfile.mkdtemp(prefix="ff-distributed-")
    os.makedirs(work, exist_ok=True)
    logs = os.path.join(work, "logs")

    # 1. A graph split across two ranks.
    graph = os.path.join(work, "mlp_split.pbtxt")
    split_mlp(graph)
    parts, out = os.path.join(work, "partitions"), os.path.join(work, "mlp.out.npz")
    r = mpirun(["run", graph, "--inputs", os.path.join(FIX, "mlp.inputs.npz"), "--fetch", "Identity:0",
                "--output", out, "--partition-graphs", parts, "--run-metadata", os.path.join(logs, "split_mlp"),
                "--profile", os.path.join(logs, "split_mlp")])
    check(r.returncode == 0, "mpirun -np 2 ferroflow run (MLP split across tasks 0 and 1)" +
          ("" if r.returncode == 0 else ": " + r.stdout + r.stderr))
    if r.returncode == 0:
        got = np.load(out)["Identity:0"]
        want = np.load(os.path.join(FIX, "mlp.expected.npz"))
        want = want[want.files[0]]
        check(np.allclose(got, want, rtol=1e-5, atol=1e-6),
              f"its output matches TensorFlow's (max |d| {np.abs(got - want).max():.2g})")
        files = sorted(glob.glob(os.path.join(parts, "global_step_0", "*.pbtxt")))
        devices = set()
        for f in files:
            g = tf.compat.v1.GraphDef()
            text_format.Parse(open(f).read(), g)
            devices |= {n.device for n in g.node}
        check(any("task:0" in d for d in devices) and any("task:1" in d for d in devices) and len(files) == 2,
              f"TensorFlow parses both tasks' partition graphs, gathered by rank 0: {[os.path.basename(f) for f in files]}")
        events = glob.glob(os.path.join(logs, "split_mlp", "events.out.tfevents.*"))
        tagged = [e.tagged_run_metadata for f in events for e in tf.compat.v1.train.summary_iterator(f)
                  if e.HasField("tagged_run_metadata")]
        meta = tf.compat.v1.RunMetadata.FromString(tagged[0].run_metadata) if tagged else None
        devs = {d.device: len(d.node_stats) for d in meta.step_stats.dev_stats} if meta else {}
        check(len(devs) == 2 and all(n > 0 for n in devs.values()) and len(meta.partition_graphs) == 2,
              f"TensorFlow parses the gathered RunMetadata: node stats per device {devs}")
        if meta:
            trace = json.loads(timeline.Timeline(meta.step_stats).generate_chrome_trace_format())
            ops = sorted({e["args"]["op"] for e in trace["traceEvents"] if e.get("ph") == "X"})
            check({"_Send", "_Recv", "Softmax"} <= set(ops), f"timeline.Timeline turns it into a Chrome trace: {ops}")

    # 2. Data-parallel training, profiled on both ranks.
    r = mpirun(["mnist", "--distributed", "--steps", "300", "--intra-op-threads", "1",
                "--logdir", os.path.join(logs, "mnist"), "--profile-batch", "100,105"])
    check(r.returncode == 0, "mpirun -np 2 ferroflow mnist --distributed --logdir --profile-batch" +
          ("" if r.returncode == 0 else ": " + r.stdout + r.stderr))
    captures = glob.glob(os.path.join(logs, "mnist", "plugins", "profile", "*", "*.xplane.pb"))
    check(sorted(os.path.basename(c).split("-rank")[-1] for c in captures) == ["0.xplane.pb", "1.xplane.pb"],
          f"rank 0 wrote one capture with a host per rank: {[os.path.basename(c) for c in captures]}")

    # 3. Real TensorBoard.
    with TensorBoard(logs) as tb:
        runs = []
        for _ in range(120):
            try:
                runs = tb.get("/data/plugin/profile/runs") or []
                if len(runs) >= 2:
                    break
            except Exception:
                pass
            time.sleep(1)
        info = tb.get("/data/plugin/graphs/info")
        tags = info.get("split_mlp", {}).get("tags", {})
        check("step_0" in tags, f"the graph plugin lists the run metadata tag step_0: {list(tags)}")
        rm = tb.get("/data/plugin/graphs/run_metadata", run="split_mlp", tag="step_0")
        text = rm.decode() if isinstance(rm, bytes) else json.dumps(rm)
        check("task:1" in text and "task:0" in text, f"and returns it with both tasks' devices ({len(text)} bytes)")
        check(len(runs) == 2, f"the profile plugin lists both captures: {runs}")
        for run in runs:
            hosts = [h["hostname"] for h in tb.get("/data/plugin/profile/hosts", run=run, tag="trace_viewer@")]
            check(sorted(h.rsplit("-", 1)[-1] for h in hosts) == ["rank0", "rank1"], f"{run}: hosts {hosts}")
            for host in hosts:
                tv = tb.get("/data/plugin/profile/data", run=run, tag="trace_viewer@", host=host)
                evs = [e for e in (tv.get("traceEvents", []) if isinstance(tv, dict) else []) if e.get("ph") == "X"]
                ov = tb.get("/data/plugin/profile/data", run=run, tag="overview_page", host=host)
                steps = ov[1].get("rows", []) if isinstance(ov, list) and len(ov) > 1 else []
                check(len(evs) > 0 and len(steps) > 0,
                      f"{run} {host}: trace_viewer has {len(evs)} events, overview_page {len(steps)} steps")
    print(f"\n{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
