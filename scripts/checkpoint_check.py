#!/usr/bin/env python3
"""Checkpoint interop with live TensorFlow 2.21, both directions.

ferroflow -> TensorFlow:
1. `ferroflow mnist --steps 300 --save DIR/model.ckpt` trains mnist_training and saves it with its
   Saver (model.ckpt-300.{index,data-00000-of-00001,meta} + `checkpoint`).
2. tf.train.latest_checkpoint / get_checkpoint_state read the state file.
3. tf.train.load_checkpoint: the same names, dtypes and shapes ferroflow lists, and values equal
   to what ferroflow restores (`ferroflow run MODEL.meta --checkpoint ... --fetch VAR/Read...`).
4. tf.compat.v1.train.import_meta_graph(ours) + restore + run('accuracy:0') gives ferroflow's
   accuracy:0 (from `ferroflow run MODEL.meta --checkpoint`), exactly; so does TensorFlow's own
   mnist_training graph (scripts/bench_mnist.py) restored from our checkpoint by a TF Saver.
5. Byte for byte: TensorFlow's SaveV2 of the same tensors in the same order writes an .index
   and .data identical to ferroflow's.

TensorFlow -> ferroflow:
6. A TF1 Saver saves TensorFlow's mnist_training model (live, 100 steps); `ferroflow run MODEL.meta
   --checkpoint` computes TensorFlow's accuracy:0 exactly, and `ferroflow inspect-checkpoint`
   lists TensorFlow's tensors. (cargo test does the same on the committed fixture.)
7. The same for the model built with TensorFlow 1's ref variables (VariableV2, Assign,
   ApplyAdam; disable_resource_variables), which ferroflow runs as resource variables, and for
   TF 2.21's default cond_v2 (functional If whose branches return variant Optionals).

Run:  .venv/bin/python scripts/checkpoint_check.py   (exit status 0 when every check passes)
"""
import os
import shutil
import subprocess
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_mnist import load_split, tf1_mnist_mlp_with_saver, train_steps  # noqa: E402
from tfcheck import ROOT, check, failures  # noqa: E402

BIN = os.path.join(ROOT, "target", "release", "ferroflow")
v1 = tf.compat.v1


def ferroflow(*args):
    r = subprocess.run([BIN, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"ferroflow {' '.join(args)}: {r.stderr}")
    return r.stdout


def main():
    subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "ferroflow-cli"], cwd=ROOT, check=True)
    xte, yte = load_split("t10k")
    tmp = tempfile.mkdtemp(prefix="ff_ckpt_check_")
    feeds = os.path.join(tmp, "feeds.npz")
    np.savez(feeds, **{"inputs:0": xte, "outputs:0": yte, "is_training:0": np.array(False)})

    # 1-2. ferroflow trains and saves; TensorFlow reads the state file.
    ours = os.path.join(tmp, "ours")
    ferroflow("mnist", "--steps", "300", "--save", os.path.join(ours, "model.ckpt"))
    prefix = os.path.join(ours, "model.ckpt-300")
    check(tf.train.latest_checkpoint(ours) == prefix, f"tf.train.latest_checkpoint reads our state file: {prefix}")
    st = tf.train.get_checkpoint_state(ours)
    check(list(st.all_model_checkpoint_paths) == [prefix], "get_checkpoint_state lists our checkpoint")

    # 3. Names, dtypes, shapes and values through tf.train.load_checkpoint.
    reader = tf.train.load_checkpoint(prefix)
    shapes = reader.get_variable_to_shape_map()
    dtypes = reader.get_variable_to_dtype_map()
    listing = ferroflow("inspect-checkpoint", prefix)
    ours_listed = {}
    for line in listing.splitlines():
        if " (" in line and line.endswith("]"):
            name, rest = line.split(" (", 1)
            dt, shape = rest.split(") ", 1)
            ours_listed[name] = (dt, [int(d) for d in shape.strip("[]").split(",") if d.strip()])
    check(sorted(ours_listed) == sorted(shapes), f"TensorFlow lists the same {len(shapes)} tensor names")
    tfname = {"float": tf.float32, "int64": tf.int64}
    check(all(tfname[ours_listed[n][0]] == dtypes[n] and ours_listed[n][1] == list(shapes[n]) for n in shapes),
          "same dtypes and shapes")
    names = sorted(shapes)
    out = os.path.join(tmp, "vars.npz")
    args = ["run", prefix + ".meta", "--checkpoint", prefix, "--output", out]
    for n in names:
        args += ["--fetch", f"{n}/Read/ReadVariableOp:0"]
    ferroflow(*args)
    ff = np.load(out)
    same = [n for n in names if np.array_equal(ff[f"{n}/Read/ReadVariableOp:0"], reader.get_tensor(n))]
    check(len(same) == len(names), f"load_checkpoint values equal ferroflow's restored values ({len(same)}/{len(names)})")

    # 4. accuracy:0 from our .meta in TensorFlow, and from TensorFlow's own graph.
    out = os.path.join(tmp, "acc.npz")
    ferroflow("run", prefix + ".meta", "--checkpoint", ours, "--inputs", feeds, "--fetch", "accuracy:0",
              "--output", out)
    ff_acc = float(np.load(out)["accuracy:0"])
    g = tf.Graph()
    with g.as_default():
        saver = v1.train.import_meta_graph(prefix + ".meta")
        with v1.Session(graph=g) as sess:
            saver.restore(sess, prefix)
            tf_acc = float(sess.run("accuracy:0", {"inputs:0": xte, "outputs:0": yte, "is_training:0": False}))
            step = sess.run("global_step/Read/ReadVariableOp:0")
    check(tf_acc == ff_acc and step == 300,
          f"TF import_meta_graph(ours) + restore: accuracy:0 = {tf_acc} (ferroflow {ff_acc}), global_step {step}")
    g, t, saver = tf1_mnist_mlp_with_saver(tf, 1)
    with v1.Session(graph=g) as sess:
        saver.restore(sess, prefix)
        acc2 = float(sess.run(t["accuracy"], {t["x"]: xte, t["y"]: yte, t["is_training"]: False}))
    check(acc2 == ff_acc, f"TensorFlow's own mnist_training graph restored from our checkpoint: accuracy {acc2}")

    # 5. Byte for byte: TensorFlow writes the same tensors in our order (sorted names).
    tfp = os.path.join(tmp, "tf_bytes", "model.ckpt-300")
    os.makedirs(os.path.dirname(tfp))
    tf.raw_ops.SaveV2(prefix=tfp, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(reader.get_tensor(n)) for n in names])
    for ext in ["index", "data-00000-of-00001"]:
        a = open(f"{prefix}.{ext}", "rb").read()
        b = open(f"{tfp}.{ext}", "rb").read()
        check(a == b, f".{ext}: ferroflow's {len(a)} bytes equal TensorFlow's SaveV2 of the same tensors")

    # 6-7. TensorFlow saves (resource variables, then TF1 ref variables), ferroflow restores.
    xtr, ytr = load_split("train")
    cases = [("", 5, False, False), (" with TF1 ref variables (VariableV2, ApplyAdam)", 6, True, False),
             (" with TF 2.21's default cond_v2 (If + Optionals)", 7, False, True)]
    for label, seed, refs, v2 in cases:
        theirs = os.path.join(tmp, f"theirs{seed}")
        os.makedirs(theirs)
        g, t, saver = tf1_mnist_mlp_with_saver(tf, seed, ref_variables=refs, cond_v2=v2)
        with v1.Session(graph=g) as sess:
            sess.run(t["init"])
            train_steps(sess, t, xtr, ytr, 100, np.random.default_rng(seed))
            tp = saver.save(sess, os.path.join(theirs, "model.ckpt"), global_step=t["global_step"])
            tf_acc = float(sess.run(t["accuracy"], {t["x"]: xte, t["y"]: yte, t["is_training"]: False}))
        ops = {n.op for n in g.as_graph_def().node}
        out = os.path.join(tmp, f"acc_theirs{seed}.npz")
        ferroflow("run", tp + ".meta", "--checkpoint", theirs, "--inputs", feeds, "--fetch", "accuracy:0",
                  "--output", out)
        ff_acc = float(np.load(out)["accuracy:0"])
        check(ff_acc == tf_acc and ("VariableV2" in ops) == refs and ("If" in ops) == v2,
              f"ferroflow restores TensorFlow's live checkpoint{label}: accuracy:0 = {ff_acc} (TensorFlow {tf_acc})")
        listing = ferroflow("inspect-checkpoint", theirs)
        check("21 tensors" in listing and "layer_1/kernel/Adam_1 (float) [256, 256]" in listing,
              "ferroflow inspect-checkpoint lists TensorFlow's 21 tensors")

    print(f"\n{len(failures)} failure(s)")
    if not failures:
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        print(f"files kept for inspection in {tmp}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
