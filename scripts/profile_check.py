#!/usr/bin/env python3
"""Checks ferroflow's profiles against real TensorBoard + its profile plugin (xprof), live on
127.0.0.1, and runs input_pipeline's bottleneck story.

1. A flowers-like dataset (`ferroflow flowers`) feeds input_pipeline's small CNN twice with
   `ferroflow pipeline --logdir ... --profile-batch 3,8`: first with a serial map and no
   prefetch (run `serial`), then with a parallel map and prefetch (run `prefetch`).
2. TensorBoard (`tensorboard-plugin-profile` installed) serves the log directory; over HTTP:
   `runs` lists both captures; `overview_page` reports the profiled steps (> 0, no
   "No step marker" warning) and an average step time; `framework_op_stats` lists
   ferroflow's ops (a convolution and the optimizer's ResourceApplyAdam); `trace_viewer@`
   returns complete events on op threads and input-pipeline threads;
   `input_pipeline_analyzer` lists the iterator stages.
3. `ferroflow profile LOG/serial LOG/prefetch` calls the first run input-bound and reports
   the second's gain.
4. The TensorBoard callback's summaries over the same HTTP API: `epoch_loss` and
   `batch_loss` scalars, weight histograms, and the `input` run's image and text.
5. With `--screenshot OUT.png` (headless Chromium installed), a screenshot of the trace viewer
   (docs/images/profile_trace_viewer.png is one: steps `train 3`..`train 8` on the main thread
   with the serial map's `Iterator::...` events inside each, `Session::run`, and the ops on the
   executor threads under `ExecutorState::Process`).

Run:  .venv/bin/python scripts/profile_check.py [--keep DIR] [--screenshot OUT.png]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tfcheck import ROOT, TensorBoard, check, failures  # noqa: E402

EXE = os.path.join(ROOT, "target", "release", "ferroflow")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keep", help="write the dataset and logs here (kept) instead of a temp dir")
    ap.add_argument("--screenshot", help="headless Chromium screenshot of the trace viewer")
    a = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "ferroflow-cli"], cwd=ROOT, check=True)
    work = a.keep or tempfile.mkdtemp(prefix="ff-profile-")
    os.makedirs(work, exist_ok=True)
    data, log = os.path.join(work, "flowers"), os.path.join(work, "logs")
    shutil.rmtree(log, ignore_errors=True)
    if not os.path.isdir(data):
        subprocess.run([EXE, "flowers", data, "--per-class", "24", "--size", "320x240"], check=True, capture_output=True)
    common = ["--size", "128", "--batch", "16", "--profile-batch", "3,8", "--train-steps", "10"]
    out = {}
    for run, extra in (("serial", []), ("prefetch", ["--parallel", "auto", "--prefetch", "auto"])):
        r = subprocess.run([EXE, "-q", "pipeline", data, "--logdir", os.path.join(log, run)] + common + extra,
                           capture_output=True, text=True)
        out[run] = r.stdout
        check(r.returncode == 0 and "profile of batches 3,8" in r.stdout,
              f"ferroflow pipeline --logdir {run}: trained and wrote a profile" + ("" if r.returncode == 0 else f": {r.stderr}"))

    with TensorBoard(log) as tb:
        port = tb.port
        for _ in range(120):
            try:
                runs = tb.get("/data/plugin/profile/runs")
                if runs:
                    break
            except Exception:
                pass
            time.sleep(1)
        else:
            runs = []
        check(len(runs) == 2 and all(r.startswith(("serial/", "prefetch/")) for r in runs),
              f"TensorBoard's profile plugin lists both captures: {runs}")
        for run in runs:
            tools = tb.get("/data/plugin/profile/run_tools", run=run)
            hosts = tb.get("/data/plugin/profile/hosts", run=run, tag="overview_page")
            host = hosts[0]["hostname"] if hosts else ""
            check("overview_page" in tools and host, f"{run}: tools {len(tools)}, host '{host}'")

            def data(tag):
                return tb.get("/data/plugin/profile/data", run=run, tag=tag, host=host)

            ov = data("overview_page")
            steps = ov[1].get("rows", []) if len(ov) > 1 else []
            avg = ov[1].get("p", {}).get("steptime_ms_average") if len(ov) > 1 else None
            diag = json.dumps(ov[6]) if len(ov) > 6 else ""
            check(len(steps) > 0 and avg is not None and "No step marker" not in diag,
                  f"{run}: overview_page shows {len(steps)} steps, average step {avg} ms")
            ops = data("framework_op_stats")
            rows = ops[0].get("rows", []) if ops else []
            names = {str(c.get("v")) for row in rows for c in row.get("c", []) if isinstance(c, dict)}
            conv = any("Conv2D" in n for n in names)
            adam = any("ResourceApplyAdam" in n for n in names)
            check(len(rows) > 1 and conv and adam,
                  f"{run}: framework_op_stats has {len(rows)} rows (a convolution: {conv}, ResourceApplyAdam: {adam})")
            tv = data("trace_viewer@")
            evs = tv.get("traceEvents", []) if isinstance(tv, dict) else []
            x = [e for e in evs if e.get("ph") == "X"]
            op_ev = any(":" in e.get("name", "") and not e["name"].startswith("Iterator::") for e in x)
            it_ev = any(e.get("name", "").startswith("Iterator::") for e in x)
            check(op_ev and it_ev, f"{run}: trace_viewer returns {len(x)} complete events (ops: {op_ev}, "
                                   f"input pipeline: {it_ev})")
            ip = data("input_pipeline_analyzer")
            text = json.dumps(ip)
            check("Iterator::" in text, f"{run}: input_pipeline_analyzer lists the iterator stages")
        # The summaries of the TensorBoard callback (train/), and the input run's image and text.
        for run in ("serial", "prefetch"):
            scalars = tb.get("/data/plugin/scalars/tags").get(f"{run}/train", {})
            loss = tb.get("/data/plugin/scalars/scalars", run=f"{run}/train", tag="epoch_loss") if scalars else []
            check({"epoch_loss", "batch_loss"} <= set(scalars) and len(loss) == 2,
                  f"{run}: scalars dashboard has epoch_loss ({len(loss)} epochs) and batch_loss")
            hist = tb.get("/data/plugin/histograms/tags").get(f"{run}/train", {})
            check(any("kernel" in t for t in hist), f"{run}: histograms dashboard has the weights: {sorted(hist)}")
            images = tb.get("/data/plugin/images/tags").get(f"{run}/input", {})
            check("first_image" in images, f"{run}: images dashboard has the first input image")
            text = tb.get("/data/plugin/text/tags").get(f"{run}/input", [])
            check("pipeline" in text, f"{run}: text dashboard has the pipeline")
            graphs = tb.get("/data/runs")
            check(f"{run}/train" in graphs, f"{run}: the train run is listed (graph and summaries)")
        if a.screenshot and runs:
            chromium = shutil.which("chromium") or shutil.which("chromium-browser")
            if chromium:
                host = tb.get("/data/plugin/profile/hosts", run=runs[0], tag="trace_viewer@")[0]["hostname"]
                query = urllib.parse.urlencode({"run": runs[0], "tool": "trace_viewer@", "host": host})
                url = f"http://127.0.0.1:{port}/?{query}#profile"
                subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                                f"--screenshot={a.screenshot}", "--window-size=1600,1000",
                                "--virtual-time-budget=30000", url], capture_output=True, timeout=180)
                check(os.path.exists(a.screenshot), f"screenshot of the trace viewer: {a.screenshot}")
            else:
                print("skip screenshot: no chromium on PATH (apt-get install chromium)")

    r = subprocess.run([EXE, "profile", os.path.join(log, "serial"), os.path.join(log, "prefetch")],
                       capture_output=True, text=True)
    print(r.stdout)
    first = r.stdout.split("\n== ")[0]
    check(r.returncode == 0 and "input-bound" in first and "Second against first" in r.stdout,
          "ferroflow profile: the serial run is input-bound; the prefetch run's gain is reported")
    print(f"\n{len(failures)} failure(s); files in {work}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
