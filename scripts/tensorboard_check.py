#!/usr/bin/env python3
"""TensorFlow and real TensorBoard read ferroflow's event files.

1. `ferroflow tensorboard` writes runs for seed 000's TensorFlow pbtxt and the CNN fixture;
   the `write_events` example writes a run with seed 000's graph built in Rust, a `loss`
   scalar over 5 steps and a tagged run metadata.
2. TensorFlow's own reader (`tf.compat.v1.train.summary_iterator`) reads every file: first
   event `brain.Event:2`, the GraphDef parses and equals the source graph, the scalars match;
   the RunMetadata of a FULL_TRACE step parses (`RunMetadata.FromString`) and
   `timeline.Timeline(step_stats).generate_chrome_trace_format()` accepts it.
3. Real TensorBoard is started on 127.0.0.1: `/data/runs` lists the runs, the graph plugin
   returns each graph (`/data/plugin/graphs/graph?run=...`), the scalars plugin returns the
   loss values, and the tagged run metadata is listed.

Run:  .venv/bin/python scripts/tensorboard_check.py   (exit status 0 when every check passes)
"""
import glob
import json
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

        # TensorFlow's reader.
        for run in list(sources) + ["rust"]:
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
                      f"{run}: the graph event holds seed 000's nodes")
                losses = [(e.step, tf.make_ndarray(v.tensor).item()) for e in events for v in e.summary.value if v.tag == "loss"]
                check(losses == [(s, 1.0 / (s + 1)) for s in range(5)] or
                      all(abs(a - 1.0 / (s + 1)) < 1e-7 for s, a in losses) and len(losses) == 5,
                      f"{run}: TensorFlow reads the 5 loss scalars: {losses}")
                tagged = [e.tagged_run_metadata for e in events if e.HasField("tagged_run_metadata")]
                meta = tf.compat.v1.RunMetadata.FromString(tagged[0].run_metadata)
                check(tagged[0].tag == "step_0" and len(meta.partition_graphs) == 1,
                      "rust: tagged run metadata parses as TensorFlow's RunMetadata")
                # The RunMetadata file: TensorFlow parses it and its timeline accepts the stats.
                from tensorflow.python.client import timeline
                meta = tf.compat.v1.RunMetadata.FromString(open(os.path.join(logdir, run, "run_metadata.pb"), "rb").read())
                nodes = [s.node_name for d in meta.step_stats.dev_stats for s in d.node_stats]
                check(sorted(nodes) == ["Add", "Add_1", "Mul"],
                      f"RunMetadata.FromString parses ferroflow's step stats: {nodes} (constants are not run per step)")
                trace = json.loads(timeline.Timeline(meta.step_stats).generate_chrome_trace_format())
                ops = sorted({e["args"]["op"] for e in trace["traceEvents"] if e.get("ph") == "X"})
                check(ops == ["AddV2", "Mul"], f"timeline.Timeline(step_stats).generate_chrome_trace_format() accepts it: ops {ops}")

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
                    if len(runs) >= 3:
                        break
                except Exception:
                    pass
                time.sleep(0.5)
            check(sorted(runs) == ["cnn", "rust", "seed_000"], f"TensorBoard lists the runs: {runs}")
            info = json.loads(get(port, "/data/plugin/graphs/info"))
            for run in ["seed_000", "cnn", "rust"]:
                check(info.get(run, {}).get("run_graph") is True, f"TensorBoard's graph plugin has a run graph for {run}")
                text = get(port, f"/data/plugin/graphs/graph?run={run}&conceptual=false").decode()
                g = tf.compat.v1.GraphDef()
                text_format.Parse(text, g)
                want = read_graph(sources[run]) if run in sources else None
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
