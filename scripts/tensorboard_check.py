#!/usr/bin/env python3
"""TensorFlow and real TensorBoard read ferroflow's event files.

1. `ferroflow tensorboard` writes runs for what_runs' TensorFlow pbtxt (seed_000.pbtxt) and the CNN fixture;
   the `write_events` example writes a run with what_runs' graph built in Rust, a `loss`
   scalar over 5 steps and a tagged run metadata.
2. TensorFlow's own reader (`tf.compat.v1.train.summary_iterator`) reads every file: first
   event `brain.Event:2`, the GraphDef parses and equals the source graph, the scalars match;
   the RunMetadata of a FULL_TRACE step parses (`RunMetadata.FromString`) and
   `timeline.Timeline(step_stats).generate_chrome_trace_format()` accepts it.
3. Two CPU devices end to end: `ferroflow run --cpu-devices 2 --partition-graphs` on
   TensorFlow's graph placed on /cpu:0 and /cpu:1 writes one partition graph per device (with
   _Send/_Recv), `ferroflow merge-partitions` merges them, the merged graph gives the same
   outputs (and TensorFlow's), and `ferroflow tensorboard` logs it as run `two_devices`.
4. Real TensorBoard is started on 127.0.0.1: `/data/runs` lists the runs, the graph plugin
   returns each graph (`/data/plugin/graphs/graph?run=...`), the scalars plugin returns the
   loss values, and the tagged run metadata is listed.

Run:  .venv/bin/python scripts/tensorboard_check.py   (exit status 0 when every check passes)
"""
import glob
import json
import shutil
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf
from google.protobuf import text_format

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tfcheck import FIX, ROOT, check, failures, read_graph  # noqa: E402


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
        return r.read()


def main():
    subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "ferroflow-cli"], cwd=ROOT, check=True)
    subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "ferroflow", "--example", "write_events"],
                   cwd=ROOT, check=True)
    exe = os.path.join(ROOT, "target", "release", "ferroflow")
    with tempfile.TemporaryDirectory() as logdir:
        sources = {"seed_000": os.path.join(FIX, "seed_000.pbtxt"), "cnn": os.path.join(FIX, "cnn.pb")}
        for run, src in sources.items():
            subprocess.run([exe, "tensorboard", src, "--logdir", logdir, "--run", run], check=True, capture_output=True)
        subprocess.run([os.path.join(ROOT, "target", "release", "examples", "write_events"),
                        os.path.join(logdir, "rust")], check=True, capture_output=True)

        # Two CPU devices end to end: ferroflow runs TensorFlow's graph placed on /cpu:0 and
        # /cpu:1, writes the per-device partition graphs, merges them, and logs the merged graph.
        import numpy as np
        work = tempfile.mkdtemp(prefix="ferroflow-two-devices-")
        pdir = os.path.join(FIX, "partitions")
        base = [exe, "run", os.path.join(pdir, "graph.pbtxt"), "--inputs", os.path.join(pdir, "inputs.npz"),
                "--fetch", "out:0", "--fetch", "z:0"]
        subprocess.run(base + ["--cpu-devices", "2", "--partition-graphs", work, "--output", os.path.join(work, "two.npz")],
                       check=True, capture_output=True)
        parts = sorted(glob.glob(os.path.join(work, "global_step_0", "*.pbtxt")))
        names = [os.path.basename(p) for p in parts]
        check(names == ["_job_localhost_replica_0_task_0_device_CPU_0.pbtxt", "_job_localhost_replica_0_task_0_device_CPU_1.pbtxt"],
              f"two devices: one partition graph per device: {names}")
        pgs = [read_graph(p) for p in parts]
        check(all(any(n.op == "_Send" for n in g.node) and any(n.op == "_Recv" for n in g.node) for g in pgs),
              "two devices: TensorFlow parses both partition graphs; each has _Send and _Recv")
        merged = os.path.join(work, "merged.pbtxt")
        subprocess.run([exe, "merge-partitions", *parts, "-o", merged], check=True, capture_output=True)
        subprocess.run([exe, "run", merged, "--inputs", os.path.join(pdir, "inputs.npz"), "--fetch", "out:0", "--fetch", "z:0",
                        "--output", os.path.join(work, "merged.npz")], check=True, capture_output=True)
        two, mer, want = (np.load(os.path.join(work, "two.npz")), np.load(os.path.join(work, "merged.npz")),
                          np.load(os.path.join(pdir, "expected.npz")))
        check(all(np.array_equal(two[k], mer[k]) for k in ["out:0", "z:0"]), "two devices: the merged graph gives the same outputs")
        check(all(np.allclose(two[k], want[k], rtol=1e-5, atol=1e-6) for k in ["out:0", "z:0"]),
              "two devices: outputs equal TensorFlow's for the same graph")
        subprocess.run([exe, "tensorboard", merged, "--logdir", logdir, "--run", "two_devices"], check=True, capture_output=True)
        sources["two_devices"] = merged
        merged_graph = read_graph(merged)
        shutil.rmtree(work)

        # TensorFlow's reader.
        for run in ["seed_000", "cnn", "rust"]:
            files = glob.glob(os.path.join(logdir, run, "events.out.tfevents.*"))
            check(len(files) == 1, f"{run}: one event file named events.out.tfevents.<time>.<host>")
            events = list(tf.compat.v1.train.summary_iterator(files[0]))
            check(events[0].file_version == "brain.Event:2", f"{run}: TensorFlow reads it; first event brain.Event:2")
            graphs = [e for e in events if e.HasField("graph_def")]
            gd = tf.compat.v1.GraphDef.FromString(graphs[0].graph_def)
            if run in sources:
                check(gd == read_graph(sources[run]), f"{run}: the graph event equals the source GraphDef")
            else:
                check([n.name for n in gd.node] == ["Const", "Const_1", "Add", "Add_1", "Mul"],
                      f"{run}: the graph event holds what_runs' nodes")
                losses = [(e.step, tf.make_ndarray(v.tensor).item()) for e in events for v in e.summary.value if v.tag == "loss"]
                check(losses == [(s, 1.0 / (s + 1)) for s in range(5)] or
                      all(abs(a - 1.0 / (s + 1)) < 1e-7 for s, a in losses) and len(losses) == 5,
                      f"{run}: TensorFlow reads the 5 loss scalars: {losses}")
                tagged = [e.tagged_run_metadata for e in events if e.HasField("tagged_run_metadata")]
                meta = tf.compat.v1.RunMetadata.FromString(tagged[0].run_metadata)
                check(tagged[0].tag == "step_0" and len(meta.partition_graphs) == 2,
                      "rust: tagged run metadata parses as TensorFlow's RunMetadata (two partition graphs)")
                # The RunMetadata file: TensorFlow parses it and its timeline accepts the stats.
                from tensorflow.python.client import timeline
                meta = tf.compat.v1.RunMetadata.FromString(open(os.path.join(logdir, run, "run_metadata.pb"), "rb").read())
                nodes = sorted(s.node_name for d in meta.step_stats.dev_stats for s in d.node_stats)
                devices = sorted(d.device for d in meta.step_stats.dev_stats)
                check({"Add", "Add_1", "Mul"} <= set(nodes) and len(devices) == 2,
                      f"RunMetadata.FromString parses ferroflow's step stats on {devices}: {nodes}")
                trace = json.loads(timeline.Timeline(meta.step_stats).generate_chrome_trace_format())
                ops = sorted({e["args"]["op"] for e in trace["traceEvents"] if e.get("ph") == "X"})
                check({"AddV2", "Mul", "_Send", "_Recv"} <= set(ops),
                      f"timeline.Timeline(step_stats).generate_chrome_trace_format() accepts it: ops {ops}")

        # Real TensorBoard.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        tb = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "tensorboard"), "--logdir", logdir,
                               "--host", "127.0.0.1", "--port", str(port), "--reload_interval", "1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            runs = []
            for _ in range(120):
                try:
                    runs = json.loads(get(port, "/data/runs"))
                    if len(runs) >= 4:
                        break
                except Exception:
                    pass
                time.sleep(0.5)
            check(sorted(runs) == ["cnn", "rust", "seed_000", "two_devices"], f"TensorBoard lists the runs: {runs}")
            info = json.loads(get(port, "/data/plugin/graphs/info"))
            for run in ["seed_000", "cnn", "rust", "two_devices"]:
                check(info.get(run, {}).get("run_graph") is True, f"TensorBoard's graph plugin has a run graph for {run}")
                text = get(port, f"/data/plugin/graphs/graph?run={run}&conceptual=false").decode()
                g = tf.compat.v1.GraphDef()
                text_format.Parse(text, g)
                want = (merged_graph if run == "two_devices" else read_graph(sources[run])) if run in sources else None
                names = {n.name for n in g.node}
                ok = names == {n.name for n in want.node} if want else "Mul" in names
                check(ok, f"TensorBoard returns the {run} graph from /data/plugin/graphs/graph ({len(g.node)} nodes)")
            tags = info.get("rust", {}).get("tags", {})
            check("step_0" in tags, f"TensorBoard lists the tagged run metadata step_0: {list(tags)}")
            scalars = json.loads(get(port, "/data/plugin/scalars/scalars?run=rust&tag=loss"))
            check([int(s[1]) for s in scalars] == [0, 1, 2, 3, 4] and abs(scalars[-1][2] - 0.2) < 1e-6,
                  f"TensorBoard's scalars plugin returns the loss values: {[round(s[2], 4) for s in scalars]}")
        finally:
            tb.terminate()
            tb.wait(timeout=30)
    print(f"\n{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
