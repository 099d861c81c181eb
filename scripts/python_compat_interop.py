#!/usr/bin/env python3
"""Seed 003's script through ferroflow.compat.v1, then TensorFlow reads what it wrote (issue 46).

1. With the ferroflow package's interpreter (--ff-python, a venv where `pip install ./python`
   ran): the article's model (python/tests/test_compat_v1.py's Model) trains on synthetic
   data and `tf.train.Saver` writes ckpt/model-STEP{.index,.data-*,.meta} and `checkpoint`.
2. With TensorFlow (this interpreter, the repo's .venv): `tf.compat.v1.train.latest_checkpoint`,
   `import_meta_graph(...meta)`, `saver.restore`, then `accuracy:0` on the same test data —
   it must equal ferroflow's.

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


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ff-python", required=True)
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


if __name__ == "__main__":
    main()
