"""Writes fixtures/hostile/: graphs written by TensorFlow that a hostile or careless user may
hand to ferroflow. Run with the project venv:  .venv/bin/python scripts/make_hostile_fixtures.py

- endless_v1.pbtxt: a TF1 while_loop (Enter/Merge/Switch/LoopCond/NextIteration/Exit frames)
  whose condition is always true; fetch `out:0`, feed nothing.
- endless_v2.pb: the same loop as TensorFlow 2 writes it (a functional While with cond and
  body FunctionDefs, not lowered); fetch `Identity:0` (see the printed names), feed `n:0`.
- count_v1.pbtxt: a TF1 while_loop counting to a fed `n:0` (int32) with a float vector carried
  through; fetch `count:0` and `acc:0` (a long loop must run in constant memory).
- fed_sizes.pbtxt: ops whose output size comes from a fed tensor: `tile` (Tile, multiples
  `multiples:0`), `broadcast` (BroadcastTo, `shape:0`), `pad` (Pad, `paddings:0`), `one_hot`
  (OneHot, `depth:0`), `resize` (ResizeBilinear, `size:0`); `x:0` is a float [2, 2].
- decode_any.pbtxt: `filename:0` (string) → ReadFile → DecodeJpeg (channels 3) → ExpandDims →
  ResizeBilinear to 32×32, fetch `resized:0`; image.png (a 40×30 RGB pattern) and
  decode_any.npz, TensorFlow's `resized` for image.png: TensorFlow 2.21's DecodeJpeg kernel
  decodes PNG (and GIF, BMP) by signature.
"""
import numpy as np
import os

import tensorflow as tf
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "hostile")
os.makedirs(OUT, exist_ok=True)


def write_text(g, name):
    """Writes TF1 graph `g` as text to fixtures/hostile/NAME.pbtxt."""
    gd = g.as_graph_def()
    with open(os.path.join(OUT, f"{name}.pbtxt"), "w") as f:
        f.write(str(gd))
    print(f"{name}:", sorted({n.op for n in gd.node}))


def endless_v1():
    g = tf.Graph()
    with g.as_default():
        tf.compat.v1.disable_control_flow_v2()
        i = tf.compat.v1.while_loop(lambda i: tf.constant(True), lambda i: i + 1, [tf.constant(0)], name="loop")
        tf.identity(i, name="out")
        tf.compat.v1.enable_control_flow_v2()
    write_text(g, "endless_v1")


def endless_v2():
    @tf.function
    def loop(n):
        return tf.while_loop(lambda i: tf.constant(True), lambda i: i + 1, [n])[0]

    concrete = loop.get_concrete_function(tf.TensorSpec([], tf.int32, name="n"))
    frozen = convert_variables_to_constants_v2(concrete, lower_control_flow=False)
    gd = frozen.graph.as_graph_def()
    with open(os.path.join(OUT, "endless_v2.pb"), "wb") as f:
        f.write(gd.SerializeToString(deterministic=True))
    print("endless_v2:", sorted({n.op for n in gd.node}), "inputs", [t.name for t in frozen.inputs],
          "outputs", [t.name for t in frozen.outputs])


def count_v1():
    g = tf.Graph()
    with g.as_default():
        tf.compat.v1.disable_control_flow_v2()
        n = tf.compat.v1.placeholder(tf.int32, [], name="n")
        i, acc = tf.compat.v1.while_loop(lambda i, acc: i < n, lambda i, acc: (i + 1, acc * 0.5 + 1.0),
                                         [tf.constant(0), tf.zeros([16])], name="loop")
        tf.identity(i, name="count")
        tf.identity(acc, name="acc")
        tf.compat.v1.enable_control_flow_v2()
    write_text(g, "count_v1")


def fed_sizes():
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 2], name="x")
        multiples = tf.compat.v1.placeholder(tf.int32, [2], name="multiples")
        shape = tf.compat.v1.placeholder(tf.int64, [3], name="shape")
        paddings = tf.compat.v1.placeholder(tf.int32, [2, 2], name="paddings")
        depth = tf.compat.v1.placeholder(tf.int32, [], name="depth")
        size = tf.compat.v1.placeholder(tf.int32, [2], name="size")
        tf.tile(x, multiples, name="tile")
        tf.broadcast_to(x, shape, name="broadcast")
        tf.pad(x, paddings, name="pad")
        tf.one_hot(tf.constant([0, 1, 2]), depth, name="one_hot")
        tf.compat.v1.image.resize_bilinear(tf.reshape(x, [1, 2, 2, 1]), size, name="resize")
        with tf.compat.v1.Session(graph=g) as sess:
            sess.run("tile:0", {x: [[1, 2], [3, 4]], multiples: [2, 3]})
    write_text(g, "fed_sizes")


def decode_any():
    y, x = np.mgrid[0:30, 0:40]
    pixels = np.stack([x * 6, y * 8, (x + y) * 3], axis=-1).astype(np.uint8)
    png = os.path.join(OUT, "image.png")
    with open(png, "wb") as f:
        f.write(tf.io.encode_png(pixels).numpy())
    g = tf.Graph()
    with g.as_default():
        filename = tf.compat.v1.placeholder(tf.string, [], name="filename")
        image = tf.io.decode_jpeg(tf.io.read_file(filename), channels=3)
        tf.compat.v1.image.resize_bilinear(tf.expand_dims(image, 0), [32, 32], name="resized")
        with tf.compat.v1.Session(graph=g) as sess:
            resized = sess.run("resized:0", {filename: png})
    assert resized.shape == (1, 32, 32, 3), resized.shape
    np.savez(os.path.join(OUT, "decode_any.npz"), resized=resized)
    write_text(g, "decode_any")


endless_v1()
endless_v2()
count_v1()
fed_sizes()
decode_any()
