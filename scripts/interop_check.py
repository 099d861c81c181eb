#!/usr/bin/env python3
"""Interop checks that need live TensorFlow: TensorFlow reads what ferroflow writes.

1. Every fixture GraphDef (TensorFlow's .pb and .pbtxt) goes through `ferroflow convert`
   (import, validation, export) to .pbtxt and .pb; TensorFlow parses both and they equal
   TensorFlow's own parse of the original, message for message (every node, attr, tensor).
2. TensorFlow imports each re-written graph and runs it on the fixture inputs: outputs are
   bit-identical to TensorFlow running the original in the same process (the committed expected
   outputs may differ from a fresh run in the last bit: thread scheduling of reductions). A
   fetch that TensorFlow's own graph-mode kernels refuse in the original (the dilated depthwise
   convolution, whose expected output came from eager mode) is reported as skipped.
3. what_runs' graph built with ferroflow's Rust Scope API is written as .pbtxt and .pb;
   TensorFlow parses and runs it and gets 9.0.
4. Every fixture optimized by `ferroflow optimize` (for its feeds and fetches, without
   `elementwise_fusion`, whose `_FusedElementwise` is ferroflow's own op) is run by
   TensorFlow — `_FusedMatMul`/`_FusedConv2D` and folded constants included — and gives the
   fixture's outputs (within the fixture tolerances); optimized what_runs is one `Mul` Const = 9.

5. A TFRecord of tf.train.Examples written by ferroflow (`ferroflow flowers --tfrecord`):
   TensorFlow's TFRecordDataset reads every record (CRCs checked), parse_single_example
   gives each file's bytes, label and name, and decode_jpeg of the bytes equals decoding
   the file.
6. freeze: each TF1 meta graph + checkpoint of fixtures/tf/checkpoints/seed_003* (resource
   variables, TF1 ref variables, cond_v2's functional If) frozen by `ferroflow convert
   MODEL.meta --checkpoint DIR --fetch ... -o frozen.pb|.pbtxt`: TensorFlow imports the frozen
   graph (no variables left) and runs it to the outputs, bit for bit, of the graph TensorFlow's
   own tf.compat.v1.graph_util.convert_variables_to_constants freezes (whose nodes, names and
   ops, it has), and to those of the meta graph with the checkpoint restored within 1e-5 (the
   same accuracy: Grappler rewrites constant weights differently from variables, so the
   softmax may differ in the last bits).

Run:  .venv/bin/python scripts/interop_check.py          (exit status 0 when every check passes)
      .venv/bin/python scripts/interop_check.py freeze   (only check 6)
"""
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow as tf
from google.protobuf import text_format

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tfcheck import FIX, ROOT, check, failures, read_graph  # noqa: E402


def run_graph(gd, feeds, fetches):
    g = tf.Graph()
    with g.as_default():
        tf.graph_util.import_graph_def(gd, name="")
    with tf.compat.v1.Session(graph=g) as sess:
        return sess.run(fetches, feed_dict=feeds)


def tf_reference(name, original, inputs, fetches, cache={}):
    """TensorFlow's own outputs for the original graph, {fetch: value}, leaving out the fetches
    TensorFlow's graph-mode kernels refuse (reported as skipped)."""
    if name not in cache:
        try:
            cache[name] = dict(zip(fetches, run_graph(original, inputs, fetches)))
        except (tf.errors.OpError, ValueError):
            cache[name] = {}
            for f in fetches:
                try:
                    cache[name][f] = run_graph(original, inputs, [f])[0]
                except (tf.errors.OpError, ValueError) as e:
                    first = str(e).strip().splitlines()[0][:120]
                    print(f"skip  {name} {f}: TensorFlow's graph mode refuses it in the original fixture too ({first})")
    return cache[name]


def train_ferroflow_graph_in_tensorflow(tmp):
    """mnist_training's graph as ferroflow builds it (resource variables, dropout through
    Switch/Merge, ferroflow's gradient nodes, ResourceApplyAdam, global_step): TensorFlow
    imports it, initializes it, trains it by tensor names and evaluates accuracy:0."""
    from bench_mnist import read_idx
    subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "ferroflow", "--example", "mnist_mlp"],
                   cwd=ROOT, check=True)
    out = os.path.join(tmp, "mnist_training.pb")
    msg = subprocess.run([os.path.join(ROOT, "target", "release", "examples", "mnist_mlp"), "--write-graph", out],
                         check=True, capture_output=True, text=True).stdout
    train_op = msg.split("train op '")[1].split("'")[0]
    loss = msg.split("loss '")[1].split("'")[0]

    def load(prefix):
        (n, r, c), px = read_idx(f"{prefix}-images-idx3-ubyte")
        _, lb = read_idx(f"{prefix}-labels-idx1-ubyte")
        x = np.frombuffer(px, np.uint8).reshape(n, r * c).astype(np.float32) / 255.0
        return x, np.eye(10, dtype=np.float32)[np.frombuffer(lb, np.uint8)]

    xtr, ytr = load("train")
    xte, yte = load("t10k")
    g = tf.Graph()
    with g.as_default():
        tf.graph_util.import_graph_def(read_graph(out), name="")
    ops = {op.type for op in g.get_operations()}
    with tf.compat.v1.Session(graph=g) as sess:
        sess.run("init")
        for i in range(300):
            idx = np.arange(i * 100, i * 100 + 100) % len(xtr)
            sess.run([train_op, loss], {"inputs:0": xtr[idx], "outputs:0": ytr[idx], "is_training:0": True})
        step = sess.run("global_step/Read/ReadVariableOp:0")
        acc = sess.run("accuracy:0", {"inputs:0": xte, "outputs:0": yte, "is_training:0": False})
    check({"ResourceApplyAdam", "Switch", "Merge", "VarHandleOp", "RandomUniform"} <= ops and step == 300 and acc > 0.85,
          f"mnist_training's graph built by ferroflow: TensorFlow trains it 300 steps (global_step {step}), "
          f"accuracy:0 = {acc:.4f}")


def tensorflow_reads_ferroflow_tfrecords(exe, tmp):
    root = os.path.join(tmp, "flowers")
    record = os.path.join(tmp, "flowers.tfrecord")
    subprocess.run([exe, "flowers", root, "--per-class", "4", "--tfrecord", record], check=True, capture_output=True)
    classes = ["daisy", "dandelion", "roses", "sunflowers", "tulips"]
    spec = {
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64),
        "image/filename": tf.io.FixedLenFeature([], tf.string),
    }
    n, same = 0, True
    for raw in tf.data.TFRecordDataset(record):
        ex = tf.io.parse_single_example(raw, spec)
        name = ex["image/filename"].numpy().decode()
        label = int(ex["image/class/label"].numpy())
        path = os.path.join(root, classes[label], name)
        data = open(path, "rb").read()
        same &= ex["image/encoded"].numpy() == data and name.startswith(classes[label])
        same &= bool(np.array_equal(tf.io.decode_jpeg(ex["image/encoded"]).numpy(), tf.io.decode_jpeg(data).numpy()))
        n += 1
    check(n == 20 and same, f"TensorFlow reads ferroflow's TFRecord of tf.train.Examples: {n} records, bytes, labels "
                            f"and names equal the files")


def tensorflow_runs_frozen_meta_graphs(exe, tmp):
    """`ferroflow convert MODEL.meta --checkpoint DIR --fetch ...`: TensorFlow runs the frozen
    graph to the outputs of the meta graph restored from the checkpoint, and its nodes are those
    TensorFlow's convert_variables_to_constants keeps."""
    from bench_mnist import load_split
    x, y = load_split("t10k")
    feeds = {"inputs:0": x, "outputs:0": y, "is_training:0": False}
    fetches = ["out_layer/Softmax:0", "accuracy:0"]
    for name in ("seed_003", "seed_003_ref", "seed_003_v2"):
        ckpt = os.path.join(FIX, "checkpoints", name)
        prefix = tf.train.latest_checkpoint(ckpt)
        g = tf.Graph()
        with g.as_default():
            saver = tf.compat.v1.train.import_meta_graph(prefix + ".meta")
            with tf.compat.v1.Session(graph=g) as sess:
                saver.restore(sess, prefix)
                want = sess.run(fetches, feeds)
                theirs = tf.compat.v1.graph_util.convert_variables_to_constants(
                    sess, g.as_graph_def(), [f.split(":")[0] for f in fetches])
        for ext in ("pb", "pbtxt"):
            out = os.path.join(tmp, f"{name}.frozen.{ext}")
            cmd = [exe, "convert", prefix + ".meta", "--checkpoint", ckpt, "-o", out]
            for f in fetches:
                cmd += ["--fetch", f]
            subprocess.run(cmd, check=True, capture_output=True)
            gd = read_graph(out)
            ops = {n.op for n in gd.node}
            got = run_graph(gd, feeds, fetches)
            frozen_by_tf = run_graph(theirs, feeds, fetches)
            same = all(np.array_equal(a, b) for a, b in zip(got, frozen_by_tf))
            close = np.allclose(got[0], want[0], rtol=1e-5, atol=1e-6) and got[1] == want[1]
            check(same and close and not ops & {"VarHandleOp", "VariableV2", "ReadVariableOp", "RestoreV2"},
                  f"{name} frozen by ferroflow (.{ext}, {len(gd.node)} nodes, no variables): TensorFlow runs it, "
                  f"outputs bit-identical to TensorFlow's own frozen graph, within 1e-5 of the meta graph "
                  f"restored from its checkpoint (accuracy {got[1]:.4f} = {want[1]:.4f})")
            ours_nodes = sorted((n.name, n.op) for n in gd.node)
            tf_nodes = sorted((n.name, n.op) for n in theirs.node)
            check(ours_nodes == tf_nodes,
                  f"{name} frozen by ferroflow (.{ext}): the nodes (names, ops) of TensorFlow's "
                  f"convert_variables_to_constants ({len(tf_nodes)})"
                  + ("" if ours_nodes == tf_nodes else
                     f"; only ferroflow's: {sorted(set(ours_nodes) - set(tf_nodes))[:5]}, "
                     f"only TensorFlow's: {sorted(set(tf_nodes) - set(ours_nodes))[:5]}"))


def main():
    subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "ferroflow-cli"], cwd=ROOT, check=True)
    if sys.argv[1:] == ["freeze"]:
        with tempfile.TemporaryDirectory() as tmp:
            tensorflow_runs_frozen_meta_graphs(os.path.join(ROOT, "target", "release", "ferroflow"), tmp)
        print(f"\n{len(failures)} failure(s)")
        return 1 if failures else 0
    subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "ferroflow", "--example", "what_runs"],
                   cwd=ROOT, check=True)
    exe = os.path.join(ROOT, "target", "release", "ferroflow")
    names = [line.split()[0] for line in open(os.path.join(FIX, "MANIFEST")) if line.strip() and not line.startswith("#")]
    with tempfile.TemporaryDirectory() as tmp:
        for name in names + ["seed_000"]:
            sources = [f"{name}.pbtxt"] if name == "seed_000" else [f"{name}.pb", f"{name}.pbtxt"]
            for src in sources:
                original = read_graph(os.path.join(FIX, src))
                for ext in ("pbtxt", "pb"):
                    out = os.path.join(tmp, f"{src}.{ext}")
                    subprocess.run([exe, "convert", os.path.join(FIX, src), out], check=True, capture_output=True)
                    ours = read_graph(out)
                    check(ours == original, f"{src} -> ferroflow -> .{ext}: TensorFlow parses it, equal to the original")
                    if name == "seed_000":
                        value = run_graph(ours, {}, ["Mul:0"])[0]
                        check(value == 9.0, f"{src} -> .{ext}: TensorFlow runs it: Mul:0 = {value}")
                        continue
                    inputs = np.load(os.path.join(FIX, f"{name}.inputs.npz"))
                    feeds = {k: inputs[k] for k in inputs.files}
                    fetches = list(np.load(os.path.join(FIX, f"{name}.expected.npz")).files)
                    reference = tf_reference(name, original, feeds, fetches)
                    got = run_graph(ours, feeds, list(reference))
                    same = all(np.array_equal(g, r, equal_nan=True) for g, r in zip(got, reference.values()))
                    check(same, f"{src} -> .{ext}: TensorFlow runs it, {len(reference)}/{len(fetches)} outputs "
                                f"bit-identical to TF running the original")
        # Every AttrValue case, special floats and all byte values (NaN != NaN, so bytes compare).
        for src in ("edge.pb", "edge.pbtxt"):
            original = read_graph(os.path.join(FIX, src)).SerializeToString(deterministic=True)
            for ext in ("pbtxt", "pb"):
                out = os.path.join(tmp, f"{src}.{ext}")
                subprocess.run([exe, "convert", os.path.join(FIX, src), out], check=True, capture_output=True)
                ours = read_graph(out).SerializeToString(deterministic=True)
                check(ours == original, f"{src} -> ferroflow -> .{ext}: TensorFlow parses it, byte-equal to the original")
        for ext in ("pbtxt", "pb"):
            out = os.path.join(tmp, f"rust_what_runs.{ext}")
            subprocess.run([os.path.join(ROOT, "target", "release", "examples", "what_runs"), out], check=True,
                           capture_output=True)
            value = run_graph(read_graph(out), {}, ["Mul:0"])[0]
            check(value == 9.0, f"what_runs built with the Rust API, written as .{ext}: TensorFlow runs it: Mul:0 = {value}")
        # Optimized graphs, run by TensorFlow.
        for name in names + ["seed_000"]:
            src = os.path.join(FIX, f"{name}.pbtxt" if name == "seed_000" else f"{name}.pb")
            expected = np.load(os.path.join(FIX, f"{name}.expected.npz"))
            inputs = {} if name == "seed_000" else dict(np.load(os.path.join(FIX, f"{name}.inputs.npz")))
            out = os.path.join(tmp, f"{name}.optimized.pb")
            cmd = [exe, "optimize", src, "--disable", "elementwise_fusion", "-o", out]
            for k in inputs:
                cmd += ["--feed", k]
            for k in expected.files:
                cmd += ["--fetch", k]
            subprocess.run(cmd, check=True, capture_output=True)
            fetches = list(expected.files) if name == "seed_000" else list(tf_reference(name, None, None, None))
            gd = read_graph(out)
            got = run_graph(gd, inputs, fetches)
            same = all(np.allclose(g, expected[k], rtol=1e-5, atol=1e-6, equal_nan=True) if np.asarray(g).dtype.kind == "f"
                       else np.array_equal(g, expected[k]) for g, k in zip(got, fetches))
            fused = sorted({n.op for n in gd.node if n.op.startswith("_Fused")})
            check(same, f"{name} optimized by ferroflow ({len(gd.node)} nodes{', ' + ', '.join(fused) if fused else ''}): "
                        f"TensorFlow runs it, outputs equal the fixture's")
            if name == "seed_000":
                check([(n.name, n.op) for n in gd.node] == [("Mul", "Const")], "what_runs optimized: one node Mul, op Const")
        train_ferroflow_graph_in_tensorflow(tmp)
        tensorflow_reads_ferroflow_tfrecords(exe, tmp)
        tensorflow_runs_frozen_meta_graphs(exe, tmp)
    print(f"\n{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
