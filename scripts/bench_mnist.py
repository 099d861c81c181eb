#!/usr/bin/env python3
"""mnist_training side by side: trains the MNIST MLP in TensorFlow 1-style graph mode
(placeholders inputs/outputs/is_training, dropout 0.2 through tf.cond, two dense+relu layers of
256 with truncated-normal(0.1) kernels, softmax, the cross-entropy, Adam 1e-3 with
global_step, batch 100) and in ferroflow (examples/mnist_mlp.rs, the same graph built in Rust),
on the bundled split (crates/train/data/mnist: 8,000 training / 2,000 test digits), in the same run.
Prints steps/s, test accuracy and peak memory (VmHWM) of each process, and the ratio.

TensorFlow 2.21's Keras 3 has no tf.compat.v1.layers, so dense and dropout are written out
with the ops tf.layers used (get_variable, matmul, bias_add, tf.cond + tf.nn.dropout).

Run:  cargo build --release -p ferroflow --example mnist_mlp
      .venv/bin/python scripts/bench_mnist.py [--steps 3000]
"""
import argparse
import gzip
import os
import re
import struct
import subprocess
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DATA = os.path.join(ROOT, "crates", "train", "data", "mnist")


def read_idx(name):
    with gzip.open(os.path.join(DATA, name + ".gz"), "rb") as f:
        raw = f.read()
    magic = struct.unpack(">i", raw[:4])[0]
    rank = magic & 0xFF
    dims = struct.unpack(">" + "i" * rank, raw[4:4 + 4 * rank])
    return dims, raw[4 + 4 * rank:]


def load_split(prefix):
    """The bundled split's images (float32, [n, 784] in [0, 1]) and one-hot labels."""
    import numpy as np
    (n, r, c), px = read_idx(f"{prefix}-images-idx3-ubyte")
    _, lb = read_idx(f"{prefix}-labels-idx1-ubyte")
    return (np.frombuffer(px, np.uint8).reshape(n, r * c).astype(np.float32) / 255.0,
            np.eye(10, dtype=np.float32)[np.frombuffer(lb, np.uint8)])


def tf1_mnist_mlp_with_saver(tf, seed, units=256, ref_variables=False, cond_v2=False):
    """tf_mnist_mlp as TensorFlow 1 built it: tf.cond as Switch/Merge (or TF 2.21's default
    cond_v2, functional If, with `cond_v2`), optionally ref variables (VariableV2), plus a TF1
    Saver. Returns (graph, tensors, saver)."""
    v1 = tf.compat.v1
    if not cond_v2:
        v1.disable_control_flow_v2()
    if ref_variables:
        v1.disable_resource_variables()
    try:
        g, t = tf_mnist_mlp(tf, seed, units=units, use_resource=not ref_variables)
        with g.as_default():
            saver = v1.train.Saver()
    finally:
        v1.enable_resource_variables()
        v1.enable_control_flow_v2()
    return g, t, saver


def train_steps(sess, t, x, y, steps, rng):
    """`steps` Adam steps on random batches of 100 with dropout on."""
    for _ in range(steps):
        idx = rng.choice(len(x), 100, replace=False)
        sess.run(t["train_op"], {t["x"]: x[idx], t["y"]: y[idx], t["is_training"]: True})


def peak_rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def tf_mnist_mlp(tf, seed, units=256, use_resource=True):
    """mnist_training's model in TensorFlow's tf.compat.v1 (graph mode must already be on):
    placeholders inputs/outputs/is_training, dropout 0.2 under tf.cond, layer_0/layer_1 dense+relu
    256 (truncated normal 0.1, resource variables), out_layer softmax, the loss,
    accuracy, Adam(1e-3) with global_step, init. Returns (graph, dict of those tensors/ops).
    `units` and `use_resource=False` (TF1's ref variables) make the fixtures' variants."""
    v1 = tf.compat.v1
    g = tf.Graph()
    with g.as_default():
        v1.set_random_seed(seed)
        x = v1.placeholder(tf.float32, [None, 784], name="inputs")
        y = v1.placeholder(tf.float32, [None, 10], name="outputs")
        is_training = v1.placeholder(tf.bool, name="is_training")

        def dropout(h, name):
            with v1.variable_scope(name):
                return tf.cond(is_training, lambda: tf.nn.dropout(h, rate=0.2), lambda: tf.identity(h))

        def dense(h, units, act, name):
            with v1.variable_scope(name):
                k = v1.get_variable("kernel", [h.shape[1], units],
                                    initializer=v1.truncated_normal_initializer(stddev=0.1),
                                    use_resource=use_resource)
                b = v1.get_variable("bias", [units], initializer=v1.zeros_initializer(), use_resource=use_resource)
                return act(tf.nn.bias_add(tf.matmul(h, k), b))

        layer = dropout(x, "dropout")
        for l in range(2):
            layer = dense(layer, units, tf.nn.relu, f"layer_{l}")
            layer = dropout(layer, f"layer_dropout_{l}")
        out = dense(layer, 10, tf.nn.softmax, "out_layer")
        loss = tf.reduce_mean(-tf.reduce_sum(y * tf.math.log(out + 10e-8), 1))
        correct = tf.equal(tf.argmax(y, 1), tf.argmax(out, 1))
        accuracy = tf.reduce_mean(tf.cast(correct, tf.float32), name="accuracy")
        global_step = v1.train.get_or_create_global_step()
        train_op = v1.train.AdamOptimizer(1e-3).minimize(loss, global_step=global_step)
        init = v1.global_variables_initializer()
    return g, dict(x=x, y=y, is_training=is_training, loss=loss, accuracy=accuracy, train_op=train_op,
                   init=init, global_step=global_step)


def run_tensorflow(steps, seed):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf

    v1 = tf.compat.v1
    v1.disable_eager_execution()

    xtr, ytr = load_split("train")
    xte, yte = load_split("t10k")
    g, t = tf_mnist_mlp(tf, seed)
    x, y, is_training = t["x"], t["y"], t["is_training"]
    train_op, loss, init = t["train_op"], t["loss"], t["init"]
    rng = np.random.default_rng(seed)
    with v1.Session(graph=g) as sess:
        sess.run(init)
        order = rng.permutation(len(xtr))
        pos = 0
        train_time = 0.0
        for i in range(steps):
            if pos + 100 > len(order):
                order = rng.permutation(len(xtr))
                pos = 0
            idx = order[pos:pos + 100]
            pos += 100
            feed = {x: xtr[idx], y: ytr[idx], is_training: True}
            t0 = time.perf_counter()
            _, l = sess.run([train_op, loss], feed_dict=feed)
            train_time += time.perf_counter() - t0
            if (i + 1) % 500 == 0:
                print(f"{i + 1} step loss: {l}", file=sys.stderr)
        acc = sess.run("accuracy:0", feed_dict={"inputs:0": xte, "outputs:0": yte, "is_training:0": False})
    print(f"steps={steps} steps_per_sec={steps / train_time:.1f}")
    print(f"peak_rss_mb={peak_rss_mb():.1f}")
    print(f"test_accuracy={acc:.4f}")


def parse(out):
    vals = dict(re.findall(r"(\w+)=([0-9.]+)", out))
    return {k: float(v) for k, v in vals.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs of each, alternating TensorFlow and ferroflow (the machine is noisy)")
    ap.add_argument("--tf-only", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.tf_only:
        run_tensorflow(a.steps, a.seed)
        return 0
    exe = os.path.join(ROOT, "target", "release", "examples", "mnist_mlp")
    if not os.path.exists(exe):
        print(f"{exe} is missing: cargo build --release -p ferroflow --example mnist_mlp", file=sys.stderr)
        return 2
    tf_runs, ff_runs = [], []
    for _ in range(a.repeat):
        tf_out = subprocess.run([sys.executable, __file__, "--tf-only", "--steps", str(a.steps), "--seed", str(a.seed)],
                                check=True, capture_output=True, text=True).stdout
        ff_out = subprocess.run([exe, "--steps", str(a.steps), "--seed", str(a.seed)], check=True,
                                capture_output=True, text=True).stdout
        tf_runs.append(parse(tf_out))
        ff_runs.append(parse(ff_out))
    print(f"{a.repeat} alternating runs of {a.steps} steps each (batch 100)")
    print(f"{'':12} {'median steps/s':>15} {'best':>7} {'ms/step':>8} {'test acc':>9} {'peak MB':>8}")
    med = {}
    for name, runs in [("tensorflow", tf_runs), ("ferroflow", ff_runs)]:
        sps = sorted(r["steps_per_sec"] for r in runs)
        m = sps[len(sps) // 2]
        med[name] = (m, sps[-1])
        acc = runs[0]["test_accuracy"]
        peak = max(r["peak_rss_mb"] for r in runs)
        print(f"{name:12} {m:15.1f} {sps[-1]:7.1f} {1000 / m:8.2f} {acc:9.4f} {peak:8.1f}")
    print(f"ratio (ferroflow / tensorflow steps/s): median {med['ferroflow'][0] / med['tensorflow'][0]:.2f}, "
          f"best {med['ferroflow'][1] / med['tensorflow'][1]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
