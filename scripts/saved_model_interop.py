#!/usr/bin/env python3
"""TensorFlow loads ferroflow's SavedModels (issue 18), and ferroflow runs and lists them as
TensorFlow does.

1. `ferroflow mnist --steps 300 --saved-model D/mnist` trains mnist_training's MLP and exports it;
   `tf.saved_model.load(D/mnist).signatures["serving_default"](inputs=x)` must give what
   `ferroflow run D/mnist --inputs x.npz` gives (rtol 1e-5).
2. `examples/traced_functions --export D` writes the traced collatz and sum_squares_until functions
   (StatelessWhile with a StatelessIf inside) as SavedModels; TensorFlow's signature calls
   must give TensorFlow's own tf.function values (fixtures/function/seed_004.npz).
3. `ferroflow convert DIR frozen.pb` freezes TensorFlow's own fixtures (Keras MLP and CNN,
   the TF1 builder export); TensorFlow imports each frozen graph and runs it to TensorFlow's
   outputs of the SavedModel (fixtures/saved_model/*.npz).
4. For each of ferroflow's SavedModels, `saved_model_cli show --all` and `ferroflow inspect DIR` print the same
   lines (the op set compared as a set: Python prints it in hash order).

Run:  .venv/bin/python scripts/saved_model_interop.py
"""
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
FF = os.path.join(ROOT, "target", "release", "ferroflow")
failures = 0


def check(ok, what):
    global failures
    failures += not ok
    print(("ok   " if ok else "FAIL ") + what, flush=True)


def listing_lines(text):
    """The lines of a `show --all` listing, the op set made order-free."""
    out = []
    for line in text.splitlines():
        if line.startswith("The MetaGraph with tag set"):
            head, ops = line.split(": ", 1)
            line = head + ": " + ", ".join(sorted(o.strip(" '") for o in ops.strip("{}").split(",")))
        out.append(line)
    return out


def compare_listing(d, label):
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    tf_text = subprocess.run([cli, "show", "--all", "--dir", d], capture_output=True, text=True, check=True).stdout
    ff_text = subprocess.run([FF, "inspect", d], capture_output=True, text=True, check=True).stdout
    want, got = listing_lines(tf_text), listing_lines(ff_text)
    same = want == got[: len(want)]
    check(same, f"{label}: ferroflow inspect prints what saved_model_cli show --all prints ({len(want)} lines)")
    if not same:
        for a, b in zip(want, got):
            if a != b:
                print(f"     saved_model_cli: {a!r}\n     ferroflow:       {b!r}")
                break


def main():
    subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "ferroflow-cli"], cwd=ROOT, check=True)
    subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "ferroflow", "--example", "traced_functions"],
                   cwd=ROOT, check=True)
    with tempfile.TemporaryDirectory() as d:
        # 1. mnist_training's trained MLP.
        sm = os.path.join(d, "mnist")
        subprocess.run([FF, "mnist", "--steps", "300", "--saved-model", sm], check=True, capture_output=True)
        x = np.random.default_rng(0).uniform(0, 1, (16, 784)).astype(np.float32)
        np.savez(os.path.join(d, "x.npz"), inputs=x)
        subprocess.run([FF, "run", sm, "--inputs", os.path.join(d, "x.npz"), "--output", os.path.join(d, "ff.npz")],
                       check=True, capture_output=True)
        ours = np.load(os.path.join(d, "ff.npz"))["predictions"]
        loaded = tf.saved_model.load(sm)
        sig = loaded.signatures["serving_default"]
        theirs = sig(inputs=tf.constant(x))["predictions"].numpy()
        err = float(np.max(np.abs(ours - theirs)))
        check(np.allclose(theirs, ours, rtol=1e-5, atol=1e-6),
              f"TensorFlow runs ferroflow's mnist_training MLP SavedModel: predictions {theirs.shape}, "
              f"max |TF - ferroflow| {err:.2e}, argmax equal {bool((ours.argmax(1) == theirs.argmax(1)).all())}")
        compare_listing(sm, "mnist_training MLP")

        # 2. Traced functions with a while loop.
        fx = dict(np.load(os.path.join(ROOT, "fixtures", "function", "seed_004.npz")))
        subprocess.run([os.path.join(ROOT, "target", "release", "examples", "traced_functions"), "--export", d],
                       check=True, capture_output=True)
        collatz = tf.saved_model.load(os.path.join(d, "collatz_saved_model")).signatures["serving_default"]
        for n, key in [(27, "collatz_27"), (97, "collatz_97")]:
            got = int(collatz(n=tf.constant(n, tf.int32))["output_0"].numpy())
            check(got == int(fx[key]), f"TensorFlow runs ferroflow's collatz SavedModel: collatz({n}) = {got} "
                                       f"(tf.function: {int(fx[key])})")
        ssu = tf.saved_model.load(os.path.join(d, "sum_squares_until_saved_model")).signatures["serving_default"]
        out = ssu(x=tf.constant([0.5, 1.5, 2.0, 3.0, 4.0], tf.float32), limit=tf.constant(6.0))
        got = (float(out["output_0"].numpy()), int(out["output_1"].numpy()))
        want = (float(fx["sum_total"]), int(fx["sum_count"]))
        check(got == want, f"TensorFlow runs ferroflow's sum_squares_until SavedModel: {got} (tf.function: {want})")
        # 3. Frozen signatures.
        for name, feed, fetch in [("keras_mlp", "keras_tensor", "output_0"), ("keras_cnn", "keras_tensor", "output_0"),
                                  ("tf1_builder", "x", "scores")]:
            frozen = os.path.join(d, f"{name}.frozen.pb")
            subprocess.run([FF, "convert", os.path.join(ROOT, "fixtures", "saved_model", name), frozen], check=True,
                           capture_output=True)
            fx = np.load(os.path.join(ROOT, "fixtures", "saved_model", f"{name}.npz"))
            gd = tf.compat.v1.GraphDef()
            with open(frozen, "rb") as f:
                gd.ParseFromString(f.read())
            g = tf.Graph()
            with g.as_default():
                tf.graph_util.import_graph_def(gd, name="")
                with tf.compat.v1.Session(graph=g) as sess:
                    got = sess.run(f"{fetch}:0", {f"{feed}:0": fx["x"]})
            err = float(np.max(np.abs(got - fx[fetch])))
            ops = sorted({n.op for n in gd.node})
            check(np.allclose(got, fx[fetch], rtol=1e-5, atol=1e-6) and "VarHandleOp" not in ops,
                  f"TensorFlow runs ferroflow's frozen {name}: max |diff| {err:.2e} against the SavedModel's outputs; "
                  f"{len(gd.node)} nodes, ops {ops}")
        compare_listing(os.path.join(d, "collatz_saved_model"), "collatz")
        compare_listing(os.path.join(d, "sum_squares_until_saved_model"), "sum_squares_until")
    print(f"{failures} failure(s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
