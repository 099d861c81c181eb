#!/usr/bin/env python3
"""Keras reads the Keras files ferroflow writes (issue 45), checked with live Keras 3.

For every Keras-written fixture in fixtures/keras/ (index.json) that ferroflow builds:
  1. `ferroflow convert X.keras OUT/X.keras` (ferroflow reads the model, builds it, and writes
     the session's weights with its own zip and HDF5 writers);
  2. `ferroflow run OUT/X.keras --inputs X.npz --output OUT/X.ff.npz` (ferroflow's predictions);
  3. Keras 3 `keras.models.load_model(OUT/X.keras)` predicts on the same inputs; its outputs
     must equal ferroflow's within 1e-5 of their scale.
Then the weights-only path: `ferroflow convert transfer.keras OUT/t.weights.h5 --weights
transfer.weights.h5`, and Keras `model.load_weights(OUT/t.weights.h5)` into transfer.keras's
model reproduces fixtures/keras/transfer_reweighted.npz.

Run:  .venv/bin/python scripts/keras_interop.py [--binary target/release/ferroflow] [NAME...]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
FIX = os.path.join(ROOT, "fixtures", "keras")
TOL = 1e-5


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        return float("inf")
    return float(np.max(np.abs(a - b), initial=0.0) / max(1.0, float(np.max(np.abs(b), initial=0.0))))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--binary", default=os.path.join(ROOT, "target", "release", "ferroflow"))
    p.add_argument("names", nargs="*")
    args = p.parse_args()
    import keras

    index = json.load(open(os.path.join(FIX, "index.json")))
    names = args.names or [n for n in sorted(index) if not n.startswith("legacy_")]
    out = tempfile.mkdtemp(prefix="keras_interop_")
    failures, checked, skipped = [], 0, []
    for name in names:
        src = os.path.join(FIX, f"{name}.keras")
        dst = os.path.join(out, f"{name}.keras")
        r = subprocess.run([args.binary, "convert", src, dst], capture_output=True, text=True)
        if r.returncode != 0:
            skipped.append(f"{name}: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}")
            continue
        npz = os.path.join(FIX, f"{name}.npz")
        ff_out = os.path.join(out, f"{name}.ff.npz")
        r = subprocess.run([args.binary, "run", dst, "--inputs", npz, "--output", ff_out], capture_output=True, text=True)
        if r.returncode != 0:
            failures.append(f"{name}: ferroflow run of its own file failed: {r.stderr.strip()}")
            continue
        model = keras.models.load_model(dst)
        data = np.load(npz)
        ins = [data[n] for n in index[name]["inputs"]]
        got = model(ins[0] if len(ins) == 1 else ins, training=False)
        got = got if isinstance(got, (list, tuple)) else [got]
        ff = np.load(ff_out)
        worst = 0.0
        for o, key in zip(got, index[name]["outputs"]):
            d = rel(np.asarray(o), ff[key])
            worst = max(worst, d)
        status = "ok" if worst <= TOL else "DIFFERS"
        print(f"{name}: Keras loads ferroflow's file; max |Keras - ferroflow| = {worst:.2e} of scale [{status}]", flush=True)
        if worst > TOL:
            failures.append(f"{name}: {worst:.2e}")
        checked += 1
        keras.backend.clear_session()

    # Weights only: ferroflow writes a .weights.h5 that Keras's load_weights takes.
    w = os.path.join(out, "transfer.weights.h5")
    subprocess.run([args.binary, "convert", os.path.join(FIX, "transfer.keras"), w, "--weights",
                    os.path.join(FIX, "transfer.weights.h5")], check=True, capture_output=True)
    model = keras.models.load_model(os.path.join(FIX, "transfer.keras"))
    model.load_weights(w)
    ref = np.load(os.path.join(FIX, "transfer_reweighted.npz"))
    d = rel(model(ref["x"], training=False), ref["out"])
    print(f"transfer.weights.h5: Keras load_weights of ferroflow's file reproduces Keras's outputs to {d:.2e} of scale")
    if d > TOL:
        failures.append(f"weights-only: {d:.2e}")
    print(f"{checked} models written by ferroflow and loaded by Keras; {len(skipped)} not built by ferroflow:")
    for s in skipped:
        print(f"  {s}")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
