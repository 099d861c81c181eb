#!/usr/bin/env python3
"""Run every model of the zoo (scripts/make_zoo.py) through `ferroflow run` and compare with
TensorFlow's outputs (issue 43); write docs/COVERAGE.md.

For each ZOO/<name>/ (frozen.pb, saved_model/, io.npz, meta.json) it runs
`ferroflow run` on the frozen GraphDef and on the SavedModel directory, with
`--intra-op-threads 1` and `2`, the optimizer on and `--no-optimize` (8 runs), and checks every
output against TensorFlow's: max|Δ| ≤ tolerance × max(1, max|TF output|) (tolerance 1e-4 from
meta.json; integer and boolean outputs must be identical). A model with ops ferroflow lacks
is reported with those ops (found from the graph and its function library against
`ferroflow ops --json`) after one confirming run. Each model's failure (error, crash, timeout)
is reported on its line and the run goes on.

Prints one line per model: name, nodes, op types, status, worst max|Δ| over the
configurations, ms per batch-1 call (`ferroflow benchmark` on the frozen graph, 2 intra-op
threads, median of --runs).

Then writes docs/COVERAGE.md: the table; how many of TensorFlow's op types (the committed
fixtures/tf/op_defs.pb) ferroflow registers and runs; the ops the zoo needs that ferroflow
lacks, with the models needing each.

--zoo fixtures/zoo checks the committed subset (graphs only: no SavedModels there); several
directories may be given (`--zoo target/zoo fixtures/zoo`: a name in both is checked once, from
the first).

Run:  .venv/bin/python scripts/zoo_check.py [--zoo target/zoo] [--bin target/release/ferroflow]
          [--only NAME...] [--timeout S] [--quick] [--no-coverage] [--json OUT] [--reuse JSON...]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def graph_ops(pb):
    """(node count, op types of the graph and its function library)."""
    from tensorflow.core.framework import graph_pb2
    gd = graph_pb2.GraphDef()
    with open(pb, "rb") as f:
        gd.ParseFromString(f.read())
    ops = {n.op for n in gd.node}
    lib = {f.signature.name for f in gd.library.function}
    for fn in gd.library.function:
        ops |= {n.op for n in fn.node_def}
    return len(gd.node), sorted(ops - lib)


def tf_op_names(path):
    from tensorflow.core.framework import op_def_pb2
    ol = op_def_pb2.OpList()
    with open(path, "rb") as f:
        ol.ParseFromString(f.read())
    return {o.name for o in ol.op}


def ferroflow_ops(binary):
    out = subprocess.run([binary, "ops", "--json"], capture_output=True, text=True, check=True).stdout
    return {o["name"]: o for o in json.loads(out)}


def compare(got, want, tol):
    """(ok, max|Δ|, reason)."""
    if got.shape != want.shape:
        return False, float("inf"), f"shape {list(got.shape)} != TF {list(want.shape)}"
    if want.dtype.kind in "biuU" or want.dtype == bool:
        if got.dtype.kind in "f" or not np.array_equal(got, want):
            bad = int(np.sum(got != want)) if got.shape == want.shape else -1
            return False, float("inf"), f"{bad} of {want.size} values differ (exact op)"
        return True, 0.0, ""
    if want.size == 0:
        return True, 0.0, ""
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    if not np.array_equal(np.isnan(g), np.isnan(w)):
        return False, float("inf"), "NaN where TF has none (or the reverse)"
    m = np.isfinite(w)
    if not np.array_equal(g[~m], w[~m]):
        return False, float("inf"), "non-finite values differ"
    d = float(np.max(np.abs(g[m] - w[m]))) if m.any() else 0.0
    scale = max(1.0, float(np.max(np.abs(w[m]))) if m.any() else 1.0)
    return d <= tol * scale, d, "" if d <= tol * scale else f"max|Δ| {d:.3g} > {tol:g}×{scale:.3g}"


def short(err):
    lines = [line for line in err.strip().splitlines() if line.strip()]
    line = lines[-1] if lines else "no output"
    for cand in lines:
        if "error" in cand.lower():
            line = cand
            break
    return line[:240]


# How much larger than TensorFlow's float32 error (against the float64 graph) ferroflow's may be
# where the two float32 results differ by more than the tolerance.
ACCURACY_FACTOR = 2.0
# Past this error of TensorFlow's float32 output against the float64 answer (relative to the
# largest output), the instance is too ill-conditioned for any comparison: reported, not passed.
ILL_CONDITIONED = 1e-2


def run_one(args, model_dir, meta, io, fmt, threads, optimize, tmp):
    if fmt == "pb":
        target = os.path.join(model_dir, "frozen.pb")
        feeds = {n: io[n] for n in meta["inputs"]}
        fetches = list(meta["outputs"])
        want = {n: io[n] for n in meta["outputs"]}
    else:
        target = os.path.join(model_dir, "saved_model")
        feeds = {k: io[v] for k, v in meta["signature_inputs"].items()}
        fetches = list(meta["signature_outputs"])
        want = {k: io[v] for k, v in meta["signature_outputs"].items()}
    feed_path = os.path.join(tmp, f"in_{fmt}.npz")
    np.savez(feed_path, **feeds)
    out_path = os.path.join(tmp, "out.npz")
    if os.path.exists(out_path):
        os.remove(out_path)
    cmd = [args.bin, "run", target, "--inputs", feed_path, "--output", out_path,
           "--intra-op-threads", str(threads), "--inter-op-threads", str(threads)]
    for f in fetches:
        cmd += ["--fetch", f]
    if not optimize:
        cmd.append("--no-optimize")
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return False, None, f"timeout after {args.timeout}s"
    if p.returncode != 0:
        how = f"exit {p.returncode}" if p.returncode > 0 else f"signal {-p.returncode}"
        return False, None, f"{how}: {short(p.stderr or p.stdout)}"
    got = dict(np.load(out_path, allow_pickle=False))
    worst, reasons, notes = 0.0, [], []
    frozen_name = {k: meta["signature_outputs"][k] for k in want} if fmt != "pb" else {k: k for k in want}
    for k, w in want.items():
        if k not in got:
            reasons.append(f"{k} not in the output")
            continue
        ok, d, why = compare(got[k], w, meta.get("tolerance", 1e-4))
        worst = max(worst, d)
        exact = io.get(f"{frozen_name[k]}@float64")
        if not ok and exact is not None and got[k].shape == exact.shape:
            # A deep random-weight model: both float32 results are this far from the exact
            # (float64) answer. ferroflow passes when its error is within the tolerance or at
            # most ACCURACY_FACTOR times TensorFlow's own.
            scale = max(1.0, float(np.max(np.abs(exact))))
            ours = float(np.max(np.abs(got[k].astype(np.float64) - exact))) / scale
            theirs = float(np.max(np.abs(w.astype(np.float64) - exact))) / scale
            if theirs > ILL_CONDITIONED:
                reasons.append(f"{k}: ill-conditioned instance: TensorFlow's own float32 output is {theirs:.2e} "
                               f"from the float64 answer (ferroflow's {ours:.2e}); no verdict")
                continue
            if ours <= max(meta.get("tolerance", 1e-4), ACCURACY_FACTOR * theirs):
                notes.append(f"{k}: error vs float64 {ours:.2e}, TensorFlow's {theirs:.2e}")
                continue
            why += f" (error vs float64 {ours:.2e}, TensorFlow's {theirs:.2e})"
        if not ok:
            reasons.append(f"{k}: {why}")
    return not reasons, worst, "; ".join(reasons) if reasons else "; ".join(notes)


def bench(args, model_dir, meta, io, tmp):
    feeds = {}
    for n in meta["inputs"]:
        a = io[n]
        feeds[n] = a[:1] if meta.get("batched") else a
    feed_path = os.path.join(tmp, "bench.npz")
    np.savez(feed_path, **feeds)
    cmd = [args.bin, "benchmark", os.path.join(model_dir, "frozen.pb"), "--inputs", feed_path,
           "--runs", str(args.runs), "--warmup", "1", "--intra-op-threads", "2", "--inter-op-threads", "2"]
    for f in meta["outputs"]:
        cmd += ["--fetch", f]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return None
    for line in p.stdout.splitlines()[::-1]:
        if line.startswith("median_ms="):
            return float(line.split()[0].split("=")[1])
    return None


def flat_model(zoo, name, tmp_root):
    """A model of the committed subset (fixtures/zoo/<name>.pb + .npz, no meta.json): laid out
    as a zoo entry (graph only) in tmp_root, its meta inferred: the feeds are the npz keys that
    name Placeholders, the rest are TensorFlow's outputs (`<output>@float64`: the float64 graph's)."""
    from tensorflow.core.framework import graph_pb2
    gd = graph_pb2.GraphDef()
    with open(os.path.join(zoo, f"{name}.pb"), "rb") as f:
        gd.ParseFromString(f.read())
    placeholders = {n.name for n in gd.node if n.op == "Placeholder"}
    io = dict(np.load(os.path.join(zoo, f"{name}.npz"), allow_pickle=False))
    ins = sorted(k for k in io if k.split(":")[0] in placeholders)
    outs = sorted(k for k in io if k not in ins and not k.endswith("@float64"))
    kind = "app" if name.startswith("app_") else "layer"
    batched = all(io[k].ndim > 0 and io[k].shape[0] == 2 for k in ins)
    if not batched:
        kind = "detection"
    d = os.path.join(tmp_root, name)
    os.makedirs(d, exist_ok=True)
    for src, dst in ((f"{name}.pb", "frozen.pb"), (f"{name}.npz", "io.npz")):
        if not os.path.exists(os.path.join(d, dst)):
            os.symlink(os.path.abspath(os.path.join(zoo, src)), os.path.join(d, dst))
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump({"kind": kind, "inputs": ins, "outputs": outs, "tolerance": 1e-4, "batched": batched}, f)


def check_model(args, name, have):
    d = os.path.join(args.zoo, name)
    with open(os.path.join(d, "meta.json")) as f:
        meta = json.load(f)
    io = dict(np.load(os.path.join(d, "io.npz"), allow_pickle=False))
    nodes, ops = graph_ops(os.path.join(d, "frozen.pb"))
    row = {"name": name, "kind": meta.get("kind", ""), "nodes": nodes, "op_types": len(ops), "ops": ops,
           "missing": sorted(o for o in ops if o not in have), "max_diff": None, "ms": None,
           "status": "ok", "runs": 0, "configs": 0}
    formats = ["pb"] + (["sm"] if os.path.isdir(os.path.join(d, "saved_model")) and not args.pb_only else [])
    row["formats"] = "graph, SavedModel" if "sm" in formats else "graph"
    configs = [(fmt, t, o) for fmt in formats for t in (1, 2) for o in (True, False)]
    if args.quick:
        configs = [("pb", 2, True), ("pb", 1, False)] + ([("sm", 2, True)] if "sm" in formats else [])
    failures = []
    with tempfile.TemporaryDirectory(prefix="zoo_") as tmp:
        for i, (fmt, t, o) in enumerate(configs):
            ok, diff, why = run_one(args, d, meta, io, fmt, t, o, tmp)
            if ok and why:
                row["float64"] = why
            row["configs"] += 1
            if diff is not None:
                row["max_diff"] = diff if row["max_diff"] is None else max(row["max_diff"], diff)
            if ok:
                row["runs"] += 1
            else:
                failures.append(f"{'graph' if fmt == 'pb' else 'saved_model'} t{t}{'' if o else ' no-opt'}: {why}")
                if i == 0 and (row["missing"] or "unknown op" in why):
                    break  # the same ops are missing in every configuration
        if row["missing"]:
            row["status"] = "unknown ops: " + ", ".join(row["missing"])
        elif failures:
            row["status"] = "FAIL " + failures[0] + (f" (+{len(failures) - 1} more configs)" if len(failures) > 1
                                                     else "")
        if row["runs"] and not args.no_bench:
            row["ms"] = bench(args, d, meta, io, tmp)
    return row


def fmt_diff(v):
    return "-" if v is None else f"{v:.2e}"


def fmt_ms(v):
    return "-" if v is None else f"{v:.2f}"


def write_coverage(args, rows, have, tf_ops):
    registered = {n for n in have if n in tf_ops}
    kernels = {n for n, o in have.items() if n in tf_ops and o.get("cpu_kernels")}
    missing = {}
    for r in rows:
        for op in r["missing"]:
            missing.setdefault(op, []).append(r["name"])
    ok = sum(1 for r in rows if r["status"] == "ok")
    lines = [
        "# Coverage",
        "",
        "Written by `scripts/zoo_check.py` over the model zoo of `scripts/make_zoo.py` (issue 43): "
        "models exported by TensorFlow 2.21 with random weights, each run by `ferroflow run` as a "
        "frozen GraphDef and as a SavedModel, on 1 and 2 intra-op threads, with the optimizer on and "
        "off, and compared with TensorFlow's outputs: max|Δ| ≤ 1e-4 × max(1, max|TF output|) "
        "(integer outputs identical). Where a deep application's two float32 results differ by "
        "more (random weights amplify rounding), the table says so (runs marked †) and the model "
        f"passes only if ferroflow's error against the exact answer (the same graph run by "
        f"TensorFlow in float64) is at most {ACCURACY_FACTOR}× TensorFlow's own float32 error, "
        "both figures given under the table; where TensorFlow's own float32 output is more than "
        f"{ILL_CONDITIONED:g} (relative) from the float64 answer, the instance is reported as "
        "ill-conditioned, with no verdict (random weights that amplify rounding this much make "
        "any float32 comparison meaningless). Keras applications run at batch 1 and their default input "
        "size; the layer models at batch 2. Rows `app_*` and rows whose *as* is only 'graph' come "
        "from the committed subset (`fixtures/zoo/`, `make_zoo.py --subset`: reduced widths and "
        "input sizes, frozen graphs only), checked where the full zoo's entry was not generated. "
        "*ms* is the median of `ferroflow benchmark` on the "
        "frozen graph at batch 1, 2 intra-op threads, on the machine that wrote this file "
        "(2 shared cores: a rough figure, not a benchmark).",
        "",
        f"**TensorFlow op types with an implementation here:** {len(registered)} of the "
        f"{len(tf_ops)} op types in TensorFlow's registry (`fixtures/tf/op_defs.pb`) are "
        f"registered in ferroflow, {len(kernels)} of them with CPU kernels (the rest run by the "
        f"executor or the runtime: control flow, function calls, send/receive).",
        "",
        f"**Models:** {ok} of {len(rows)} run and match TensorFlow in every configuration.",
        "",
        "| model | kind | as | nodes | op types | runs | max\\|Δ\\| | ms (batch 1) |",
        "|---|---|---|---:|---:|---|---:|---:|",
    ]
    order = {"app": 0, "layer": 1, "detection": 2}
    for r in sorted(rows, key=lambda r: (order.get(r["kind"], 3), r["name"])):
        status = ("yes †" if r.get("float64") else "yes") if r["status"] == "ok" else r["status"].replace("|", "\\|")
        lines.append(f"| {r['name']} | {r['kind']} | {r.get('formats', '')} | {r['nodes']} | {r['op_types']} | {status} | "
                     f"{fmt_diff(r['max_diff'])} | {fmt_ms(r['ms'])} |")
    marked = [r for r in rows if r["status"] == "ok" and r.get("float64")]
    if marked:
        lines += ["", "† Differs from TensorFlow's float32 output by more than 1e-4 × scale, and is as close "
                  "to the float64 answer as TensorFlow (relative to max |output|):", ""]
        lines += [f"- {r['name']}: {r['float64']}" for r in sorted(marked, key=lambda r: r["name"])]
    lines += ["", "## Ops the zoo needs that ferroflow lacks", ""]
    if not missing:
        lines.append("None.")
    for op in sorted(missing, key=lambda o: (-len(missing[o]), o)):
        in_tf = "" if op in tf_ops else " (not in TensorFlow's op_defs.pb)"
        lines.append(f"- `{op}`{in_tf}: {', '.join(missing[op])}")
    lines.append("")
    with open(args.coverage, "w") as f:
        f.write("\n".join(lines))
    return missing


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--zoo", nargs="+", default=[os.path.join(ROOT, "target", "zoo")],
                   help="zoo directories; a model already found in an earlier one is skipped")
    p.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "ferroflow"))
    p.add_argument("--only", nargs="+")
    p.add_argument("--timeout", type=float, default=600, help="seconds per ferroflow command")
    p.add_argument("--runs", type=int, default=5, help="timed runs of the benchmark")
    p.add_argument("--quick", action="store_true", help="3 configurations instead of 8")
    p.add_argument("--pb-only", action="store_true", help="skip the SavedModels")
    p.add_argument("--no-bench", action="store_true")
    p.add_argument("--coverage", default=os.path.join(ROOT, "docs", "COVERAGE.md"))
    p.add_argument("--no-coverage", action="store_true", help="do not write docs/COVERAGE.md")
    p.add_argument("--op-defs", default=os.path.join(ROOT, "fixtures", "tf", "op_defs.pb"))
    p.add_argument("--json", help="also write the rows as JSON here (after each model)")
    p.add_argument("--reuse", nargs="+", default=[],
                   help="rows of earlier runs (--json files): models with a row there are not run "
                        "again, their rows go into the table (a long check done in parts, or resumed)")
    args = p.parse_args()
    have = ferroflow_ops(args.bin)
    # One view of every zoo directory: links to full entries, the subset's flat layout (graphs
    # only) laid out as entries.
    root = tempfile.mkdtemp(prefix="zoo_")
    for z in args.zoo:
        for n in sorted(os.listdir(z)):
            if n.endswith(".pb") and not os.path.exists(os.path.join(root, n[:-3])):
                flat_model(z, n[:-3], root)
            elif os.path.exists(os.path.join(z, n, "meta.json")) and not os.path.exists(os.path.join(root, n)):
                os.symlink(os.path.abspath(os.path.join(z, n)), os.path.join(root, n))
    args.zoo = root
    names = sorted(n for n in os.listdir(args.zoo) if os.path.exists(os.path.join(args.zoo, n, "meta.json")))
    if args.only:
        names = [n for n in names if n in args.only]
    # Small models first, so a long run reports most models early.
    names.sort(key=lambda n: os.path.getsize(os.path.join(args.zoo, n, "frozen.pb")))
    reused = {}
    for path in args.reuse:
        with open(path) as f:
            reused.update({r["name"]: r for r in json.load(f)})
    rows = []
    print(f"{'model':<34} {'nodes':>6} {'ops':>4}  {'max|Δ|':>9} {'ms':>9}  status", flush=True)
    for name in names:
        if name in reused:
            rows.append(reused[name])
            continue
        t0 = time.time()
        try:
            row = check_model(args, name, have)
        except Exception as e:  # a broken zoo entry is reported, not fatal
            row = {"name": name, "kind": "", "nodes": 0, "op_types": 0, "ops": [], "missing": [],
                   "max_diff": None, "ms": None, "status": f"FAIL checker: {type(e).__name__}: {e}"}
        row["seconds"] = round(time.time() - t0, 1)
        rows.append(row)
        print(f"{name:<34} {row['nodes']:>6} {row['op_types']:>4}  {fmt_diff(row['max_diff']):>9} "
              f"{fmt_ms(row['ms']):>9}  {row['status']}" + (f" († {row['float64']})" if row.get("float64") else ""),
              flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if not args.no_coverage:
        missing = write_coverage(args, rows, have, tf_op_names(args.op_defs))
        print(f"\nwrote {args.coverage}")
        print("ops the zoo needs that ferroflow lacks:")
        for op in sorted(missing, key=lambda o: (-len(missing[o]), o)):
            print(f"  {op}: {', '.join(missing[op])}")
    bad = [r for r in rows if r["status"] != "ok"]
    print(f"\n{len(rows) - len(bad)} of {len(rows)} models run and match TensorFlow")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
