#!/usr/bin/env python3
"""Runs every committed fixture through two ferroflow binaries and compares what they write.

A refactoring must not change behaviour: for each TensorFlow fixture graph, model and
SavedModel under fixtures/, both binaries run it (1 and 2 threads, optimizer on and off),
optimize it (the optimized GraphDef), inspect it and convert it, and the files and stdout they
produce must be byte-identical. Needs only the standard library.

    python3 scripts/behaviour_check.py OLD_BINARY NEW_BINARY [--keep DIR]

Prints one line per case that differs and a summary; exits 1 if any differ.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import zipfile

FLOWERS = None
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def npz_keys(path):
    return [n[: -len(".npy")] for n in zipfile.ZipFile(path).namelist() if n.endswith(".npy")]


def signature_inputs(cli_txt):
    """The input keys of signature serving_default, from saved_model_cli's output."""
    keys, inside = [], False
    for line in open(cli_txt):
        if line.startswith("signature_def["):
            inside = "'serving_default'" in line
        elif inside:
            m = re.search(r"inputs\['([^']+)'\]", line)
            if m:
                keys.append(m.group(1))
    return keys


def cases():
    """(name, argument list, output files the command writes) for each check."""
    tf = os.path.join(ROOT, "fixtures", "tf")
    out = []
    for f in sorted(os.listdir(tf)):
        if not f.endswith(".expected.npz"):
            continue
        name = f[: -len(".expected.npz")]
        graph = os.path.join(tf, name + ".pb")
        if not os.path.exists(graph):
            graph = os.path.join(tf, name + ".pbtxt")
        inputs = os.path.join(tf, name + ".inputs.npz")
        fetches = npz_keys(os.path.join(tf, f))
        fetch_args = [a for k in fetches for a in ("--fetch", k)]
        base = ["run", graph] + (["--inputs", inputs] if os.path.exists(inputs) else []) + fetch_args
        for threads in ("1", "2"):
            for opt in ([], ["--no-optimize"]):
                tag = f"{name}.run.t{threads}{'.noopt' if opt else ''}"
                out.append((tag, base + ["--intra-op-threads", threads] + opt + ["--output", "{out}/o.npz"], ["o.npz"]))
        out.append((f"{name}.cpu2", base + ["--cpu-devices", "2", "--output", "{out}/o.npz"], ["o.npz"]))
        out.append((f"{name}.optimize", ["optimize", graph] + fetch_args + ["--report", "-o", "{out}/g.pbtxt"], ["g.pbtxt"]))
        out.append((f"{name}.inspect", ["inspect", graph], []))
        out.append((f"{name}.convert", ["convert", graph, "{out}/c.pbtxt"], ["c.pbtxt"]))
    models = os.path.join(ROOT, "fixtures", "models")
    for f in sorted(os.listdir(models)):
        if f.endswith(".pb"):
            stem = f[:-3]
            graph = os.path.join(models, f)
            for batch in ("b1", "b32"):
                npz = os.path.join(models, f"{stem}.{batch}.npz")
                if not os.path.exists(npz):
                    continue
                for threads in ("1", "2"):
                    out.append((f"{stem}.{batch}.t{threads}", ["run", graph, "--inputs", npz, "--fetch", "logits:0",
                                "--intra-op-threads", threads, "--output", "{out}/o.npz"], ["o.npz"]))
            out.append((f"{stem}.optimize", ["optimize", graph, "--fetch", "logits:0", "--report", "-o", "{out}/g.pb"], ["g.pb"]))
    sm = os.path.join(ROOT, "fixtures", "saved_model")
    for f in sorted(os.listdir(sm)):
        d = os.path.join(sm, f)
        if not os.path.isdir(d):
            continue
        npz = os.path.join(sm, f + ".npz")
        out.append((f"{f}.inspect", ["inspect", d], []))
        if os.path.exists(npz):
            inputs = signature_inputs(os.path.join(sm, f + ".cli.txt"))
            keys = npz_keys(npz)
            # A single input is fed from the npz's first array (Keras names it keras_tensor).
            feeds = [(k, k if k in keys else keys[0]) for k in inputs]
            feed_args = [a for k, v in feeds for a in ("--feed", f"{k}={{out}}/{v}.npy")]
            out.append((f"{f}.run", ["run", d] + feed_args + ["--output", "{out}/o.npz"], ["o.npz"],
                        (npz, [v for _, v in feeds])))
        out.append((f"{f}.convert", ["convert", d, "{out}/c.pb"], ["c.pb"]))
    hostile = os.path.join(ROOT, "fixtures", "hostile")
    for f in sorted(os.listdir(hostile)):
        out.append((f"hostile.{f}", ["inspect", os.path.join(hostile, f)], []))
    out.append(("ops", ["ops", "--json"], []))
    out.append(("demo.what_runs", ["run", os.path.join(tf, "seed_000.pbtxt"), "--fetch", "Mul:0", "--cpu-devices", "2",
                                 "--partition-graphs", "{out}/parts"], ["parts"]))
    out.append(("mnist", ["mnist", "--steps", "200", "--intra-op-threads", "1", "--save", "{out}/ck/model"],
                ["ck/model-200.index", "ck/model-200.data-00000-of-00001", "ck/model-200.meta"]))
    out.append(("pipeline", ["pipeline", "{flowers}", "--size", "32",
                             "--batch", "4", "--seed", "7", "--dump", "{out}/d.npz", "--dump-batches", "3"], ["d.npz"]))
    return out


def run(binary, args, workdir, extract):
    os.makedirs(workdir, exist_ok=True)
    if extract:
        npz, keys = extract
        z = zipfile.ZipFile(npz)
        for k in keys:
            with open(os.path.join(workdir, k + ".npy"), "wb") as f:
                f.write(z.read(k + ".npy"))
    argv = [binary] + [a.replace("{out}", workdir).replace("{flowers}", FLOWERS) for a in args]
    p = subprocess.run(argv, capture_output=True, timeout=600, cwd=workdir)
    text = (p.stdout + b"\n--stderr--\n" + p.stderr).replace(workdir.encode(), b"{out}")
    return p.returncode, text


def read_outputs(workdir, names):
    got = {}
    for n in names:
        p = os.path.join(workdir, n)
        if os.path.isdir(p):
            for root, _, files in os.walk(p):
                for f in files:
                    q = os.path.join(root, f)
                    got[os.path.relpath(q, workdir)] = open(q, "rb").read()
        elif os.path.exists(p):
            got[n] = open(p, "rb").read()
        else:
            got[n] = None
    return got


def strip_timing(text):
    """Drops figures that change run to run (times in the optimizer report, timings)."""
    lines = []
    # The bundled MNIST folder is found through the path the binary was built at.
    text = re.sub(rb"\S*/data/mnist", b"{data}/mnist", text)
    for line in text.decode(errors="replace").splitlines():
        if " ms" in line or "µs" in line or "time" in line.lower() or "/s" in line:
            line = "<timed line>"
        elif re.match(r"^\d+\s+\w+\s+\d+", line):
            line = re.sub(r"\s+[0-9.]+$", " <time>", line)
        lines.append(line)
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--keep", help="keep the outputs in this directory")
    ap.add_argument("--only", help="run cases whose name contains this")
    a = ap.parse_args()
    root = a.keep or tempfile.mkdtemp(prefix="behaviour-")
    global FLOWERS
    FLOWERS = os.path.join(root, "flowers")
    if not os.path.exists(FLOWERS):
        subprocess.run([a.old, "flowers", FLOWERS, "--per-class", "6", "--size", "40x30", "--seed", "3"],
                       check=True, capture_output=True)
    differ = 0
    total = 0
    for case in cases():
        name, args, outs = case[:3]
        extract = case[3] if len(case) > 3 else None
        if a.only and a.only not in name:
            continue
        total += 1
        results = []
        for side, binary in (("old", a.old), ("new", a.new)):
            wd = os.path.join(root, side, name)
            rc, text = run(binary, args, wd, extract)
            results.append((rc, strip_timing(text), read_outputs(wd, outs)))
        (rc0, t0, o0), (rc1, t1, o1) = results
        what = []
        if rc0 != rc1:
            what.append(f"exit {rc0} -> {rc1}")
        if t0 != t1:
            what.append("stdout/stderr")
        for k in sorted(set(o0) | set(o1)):
            if o0.get(k) != o1.get(k):
                what.append(f"file {k}")
        if what:
            differ += 1
            print(f"DIFF {name}: {', '.join(what)}")
    print(f"{total} cases, {differ} differ ({root})")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
