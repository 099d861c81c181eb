#!/usr/bin/env python3
"""Seed 003's script through ferroflow.compat.v1, then TensorFlow reads what it wrote (issue 46).

1. With the ferroflow package's interpreter (--ff-python, a venv where `pip install ./python`
   ran): the article's model (python/tests/test_compat_v1.py's Model) trains on synthetic
   data and `tf.train.Saver` writes ckpt/model-STEP{.index,.data-*,.meta} and `checkpoint`.
2. With TensorFlow (this interpreter, the repo's .venv): `tf.compat.v1.train.latest_checkpoint`,
   `import_meta_graph(...meta)`, `saver.restore`, then `accuracy:0` on the same test data —
   it must equal ferroflow's.

3. Speed: the same script (python/tests/test_compat_v1.py's Model, its import line switched)
   trained by TensorFlow (`tensorflow.compat.v1` with tf_keras's `tf.layers`) and by
   ferroflow on MNIST-sized synthetic data (784 inputs, 10 classes, 2 x 256 units, batch
   100, --epochs over 10,000 rows): wall time of the training loop and test accuracy.

Run:  .venv/bin/python scripts/python_compat_interop.py --ff-python /path/to/ff-venv/bin/python
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

FF_SIDE = r"""
import json, sys
sys.path.insert(0, sys.argv[2])
import numpy as np
import test_compat_v1 as T
tf = T.tf
tf.reset_default_graph()
m = T.Model(T.Config())
xt, yt = T.data(512, 0)
xs, ys = T.data(256, 1)
saver = tf.train.Saver()
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for i in range(0, 512, 64):
        sess.run([m.train_op, m.loss], {m.x: xt[i:i + 64], m.y: yt[i:i + 64], m.is_training: True})
    path = saver.save(sess, sys.argv[1] + "/ckpt/model", global_step=m.global_step)
    acc = float(sess.run(m.accuracy, {m.x: xs, m.y: ys, m.is_training: False}))
np.savez(sys.argv[1] + "/test.npz", x=xs, y=ys)
print(json.dumps({"path": path, "accuracy": acc}))
"""


TIMED = r"""
import json, os, sys, time
os.environ["TF_USE_LEGACY_KERAS"] = "1"
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
if sys.argv[1] == "tf":
    import tensorflow.compat.v1 as tf
    tf.disable_eager_execution()
else:
    import ferroflow.compat.v1 as tf
sys.path.insert(0, sys.argv[2])
import numpy as np
src = open(os.path.join(sys.argv[2], "test_compat_v1.py")).read()
src = src.replace("import ferroflow.compat.v1 as tf", "").replace("import pytest", "")
ns = {"tf": tf, "np": np, "pytest": None}
exec(compile(src.split("def data(")[0], "model", "exec"), ns)
class Config:
    num_inputs, num_outputs, num_units, num_layers = 784, 10, 256, 2
    dropout_rate, learning_rate = 0.2, 1e-3
rng = np.random.default_rng(0)
centers = rng.standard_normal((10, 784)).astype(np.float32)
def data(n, seed):
    r = np.random.default_rng(seed)
    labels = r.integers(0, 10, n)
    return centers[labels] + 2.0 * r.standard_normal((n, 784)).astype(np.float32), np.eye(10, dtype=np.float32)[labels]
xt, yt = data(10000, 1)
xs, ys = data(2000, 2)
tf.reset_default_graph()
m = ns["Model"](Config())
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    t = time.perf_counter()
    for epoch in range(int(sys.argv[3])):
        for i in range(0, 10000, 100):
            sess.run([m.train_op, m.loss], {m.x: xt[i:i + 100], m.y: yt[i:i + 100], m.is_training: True})
    wall = time.perf_counter() - t
    acc = float(sess.run(m.accuracy, {m.x: xs, m.y: ys, m.is_training: False}))
print(json.dumps({"wall_s": wall, "accuracy": acc}))
"""


def timed(python, side, epochs):
    r = subprocess.run([python, "-c", TIMED, side, os.path.join(ROOT, "python", "tests"), str(epochs)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{side} side failed: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ff-python", required=True)
    p.add_argument("--epochs", type=int, default=3)
    a = p.parse_args()
    work = tempfile.mkdtemp(prefix="ff_compat_")
    r = subprocess.run([a.ff_python, "-c", FF_SIDE, work, os.path.join(ROOT, "python", "tests")],
                       capture_output=True, text=True, check=True)
    ff = json.loads(r.stdout.strip().splitlines()[-1])
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import numpy as np
    import tensorflow as tf
    tf.compat.v1.disable_eager_execution()
    data = np.load(os.path.join(work, "test.npz"))
    with tf.compat.v1.Session() as sess:
        ckpt = tf.compat.v1.train.latest_checkpoint(os.path.join(work, "ckpt"))
        saver = tf.compat.v1.train.import_meta_graph(ckpt + ".meta")
        saver.restore(sess, ckpt)
        acc = float(sess.run("accuracy:0", {"inputs:0": data["x"], "outputs:0": data["y"], "is_training:0": False}))
    print(f"ferroflow wrote {ff['path']}; ferroflow accuracy {ff['accuracy']:.6f}, "
          f"TensorFlow after import_meta_graph + restore {acc:.6f}")
    if abs(acc - ff["accuracy"]) > 1e-6:
        sys.exit("MISMATCH")
    print("ok")
    t = timed(sys.executable, "tf", a.epochs)
    f = timed(a.ff_python, "ff", a.epochs)
    print(f"seed 003's script, {a.epochs} epochs of 100 steps (batch 100, 784-256-256-10):")
    print(f"  TensorFlow 2.21 compat.v1: {t['wall_s']:.2f} s, test accuracy {t['accuracy']:.4f}")
    print(f"  ferroflow compat.v1:       {f['wall_s']:.2f} s, test accuracy {f['accuracy']:.4f}")
    print(f"  ferroflow {t['wall_s'] / f['wall_s']:.2f}x TensorFlow")


if __name__ == "__main__":
    main()
