"""Writes fixtures/spatial/: small Keras models of the spatial layers (1-D/3-D convolution
and pooling, transposed, separable, dilated and grouped convolution, up-sampling, cropping,
padding and resizing), frozen to GraphDefs as scripts/make_model_fixtures.py does, with an
input batch and TensorFlow's outputs.

Each model is `<name>.pb` with input `x` and output `y`; `<name>.npz` holds `x` and `y`.
Run with `--probe` to print each model's op types without writing anything.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np
import tensorflow as tf
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

OUT = os.path.join(os.path.dirname(__file__), "..", "fixtures", "spatial")
L = tf.keras.layers


def models():
    """(name, input shape without batch, layers) for every case."""
    R = L.Resizing
    cases = [
        ("conv1d", (9, 3), [L.Conv1D(4, 3, padding="same"), L.Conv1D(5, 2, strides=2)]),
        ("conv1d_dilated", (12, 3), [L.Conv1D(4, 3, dilation_rate=2, padding="same"), L.Conv1D(3, 2, dilation_rate=3)]),
        ("conv1d_causal", (10, 2), [L.Conv1D(4, 3, dilation_rate=2, padding="causal")]),
        ("conv3d", (5, 6, 7, 2), [L.Conv3D(4, 3, padding="same"), L.Conv3D(3, (2, 3, 2), strides=(1, 2, 2))]),
        ("conv2d_transpose", (5, 6, 3), [L.Conv2DTranspose(4, 3, strides=2, padding="same"), L.Conv2DTranspose(3, (3, 2), strides=(2, 1), padding="valid")]),
        ("conv3d_transpose", (3, 4, 5, 2), [L.Conv3DTranspose(3, 3, strides=2, padding="same"), L.Conv3DTranspose(2, 2, padding="valid")]),
        ("separable_conv1d", (10, 3), [L.SeparableConv1D(4, 3, depth_multiplier=2, padding="same"), L.SeparableConv1D(3, 3, strides=2)]),
        ("separable_conv2d", (8, 9, 3), [L.SeparableConv2D(4, 3, depth_multiplier=2, padding="same"), L.SeparableConv2D(3, 3, strides=2)]),
        ("separable_conv2d_dilated", (10, 10, 3), [L.SeparableConv2D(4, 3, dilation_rate=2, padding="same")]),
        ("conv2d_dilated", (11, 10, 3), [L.Conv2D(4, 3, dilation_rate=2, padding="same"), L.Conv2D(3, 3, dilation_rate=(2, 3))]),
        ("depthwise_dilated", (11, 10, 3), [L.DepthwiseConv2D(3, dilation_rate=2, padding="same"), L.DepthwiseConv2D(3, depth_multiplier=2, dilation_rate=2)]),
        ("conv2d_groups", (7, 8, 4), [L.Conv2D(6, 3, groups=2, padding="same"), L.Conv2D(4, 3, groups=2)]),
        ("upsampling2d_nearest", (3, 4, 2), [L.UpSampling2D((2, 3))]),
        ("upsampling2d_bilinear", (3, 4, 2), [L.UpSampling2D((2, 3), interpolation="bilinear")]),
        ("upsampling1d", (4, 3), [L.UpSampling1D(3)]),
        ("upsampling3d", (2, 3, 2, 2), [L.UpSampling3D((2, 1, 3))]),
        ("cropping1d", (9, 3), [L.Cropping1D((2, 3))]),
        ("cropping3d", (6, 5, 7, 2), [L.Cropping3D(((1, 2), (0, 1), (2, 2)))]),
        ("zeropadding1d", (5, 3), [L.ZeroPadding1D((2, 1))]),
        ("zeropadding3d", (2, 3, 2, 2), [L.ZeroPadding3D(((1, 0), (2, 1), (0, 2)))]),
        ("pool1d", (11, 3), [L.MaxPooling1D(3, strides=2, padding="same"), L.AveragePooling1D(2, padding="same"), L.AveragePooling1D(2)]),
        ("pool3d", (6, 7, 5, 2), [L.MaxPooling3D(2, padding="same"), L.AveragePooling3D((2, 2, 1), strides=(1, 2, 1), padding="same"), L.MaxPooling3D(2)]),
        ("global_max1d", (7, 3), [L.GlobalMaxPooling1D()]),
        ("global_max2d", (5, 6, 3), [L.GlobalMaxPooling2D()]),
        ("global_max3d", (3, 4, 5, 3), [L.GlobalMaxPooling3D()]),
        ("global_avg1d", (7, 3), [L.GlobalAveragePooling1D()]),
        ("global_avg3d", (3, 4, 5, 3), [L.GlobalAveragePooling3D()]),
    ]
    # Keras 3 offers no "gaussian" or "mitchellcubic" on the TensorFlow backend.
    for interp in ["bilinear", "nearest", "bicubic", "area", "lanczos3", "lanczos5"]:
        cases.append((f"resize_{interp}_up", (5, 7, 2), [R(9, 11, interpolation=interp)]))
        cases.append((f"resize_{interp}_down", (12, 10, 2), [R(5, 7, interpolation=interp)]))
        cases.append((f"resize_{interp}_crop", (8, 12, 2), [R(6, 5, interpolation=interp, crop_to_aspect_ratio=True)]))
        if interp not in ("nearest", "area"):
            cases.append((f"resize_{interp}_antialias", (12, 10, 2), [R(5, 7, interpolation=interp, antialias=True)]))
    return cases


def freeze(name, shape, layers, seed, probe):
    rng = np.random.default_rng(seed)
    inp = tf.keras.Input(shape)
    y = inp
    for layer in layers:
        y = layer(y)
    model = tf.keras.Model(inp, y)
    for w in model.weights:
        w.assign(rng.uniform(-1, 1, w.shape).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec([None, *shape], tf.float32, name="x")])
    def serve(x):
        return model(x, training=False)

    frozen = convert_variables_to_constants_v2(serve.get_concrete_function())
    gd = frozen.graph.as_graph_def()
    out = frozen.outputs[0].name.split(":")[0]
    for n in gd.node:
        if n.name == out:
            n.name = "y"
    ops = sorted({n.op for n in gd.node})
    if probe:
        print(name, ops)
        return
    x = rng.uniform(-1, 1, (2, *shape)).astype(np.float32)
    y = frozen(tf.constant(x))
    y = (y[0] if isinstance(y, (list, tuple)) else y).numpy()
    with open(os.path.join(OUT, f"{name}.pb"), "wb") as f:
        f.write(gd.SerializeToString(deterministic=True))
    np.savez(os.path.join(OUT, f"{name}.npz"), x=x, y=y)
    print(f"{name}: {len(gd.node)} nodes, y {y.shape}, ops {ops}")


def run_and_write(name, g, xv, extra=None):
    """Runs graph `g` (input `x`, output `y`) in TensorFlow and writes `<name>.pb` and
    `<name>.npz` (x, y and the `extra` arrays)."""
    gd = g.as_graph_def()
    with tf.compat.v1.Session(graph=g) as sess:
        y = sess.run("y:0", {"x:0": xv})
    with open(os.path.join(OUT, f"{name}.pb"), "wb") as fh:
        fh.write(gd.SerializeToString(deterministic=True))
    np.savez(os.path.join(OUT, f"{name}.npz"), x=xv, y=y, **(extra or {}))
    print(f"{name}: {len(gd.node)} nodes, y {y.shape}, ops {sorted({n.op for n in gd.node})}")


def gradients_fixture(probe):
    """`grads3d`: TensorFlow's gradients of a Conv3D (to its input and filter) and of the 3-D
    pools, flattened into one output `y`: Conv3DBackpropInputV2, Conv3DBackpropFilterV2,
    MaxPool3DGrad, AvgPool3DGrad."""
    rng = np.random.default_rng(7)
    shape = (2, 4, 5, 4, 2)
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, shape, name="x")
        f = tf.constant(rng.uniform(-1, 1, (2, 3, 2, 2, 3)).astype(np.float32))
        conv = tf.nn.conv3d(x, f, [1, 1, 2, 1, 1], "SAME")
        mx = tf.nn.max_pool3d(x, [1, 2, 2, 2, 1], [1, 2, 1, 1, 1], "SAME")
        av = tf.nn.avg_pool3d(x, [1, 2, 3, 2, 1], [1, 1, 2, 1, 1], "SAME")
        weigh = lambda t, seed: tf.reduce_sum(t * np.random.default_rng(seed).uniform(-1, 1, t.shape).astype(np.float32))
        dx, df = tf.gradients(weigh(conv, 1), [x, f])
        (dmx,) = tf.gradients(weigh(mx, 2), [x])
        (dav,) = tf.gradients(weigh(av, 3), [x])
        tf.identity(tf.concat([tf.reshape(t, [-1]) for t in (dx, df, dmx, dav)], 0), name="y")
    gd = g.as_graph_def()
    ops = sorted({n.op for n in gd.node})
    if probe:
        print("grads3d", ops)
        return
    run_and_write("grads3d", g, rng.uniform(-1, 1, shape).astype(np.float32))


def resize_gradients_fixture(probe):
    """`grads_resize`: TensorFlow's gradients of ResizeBicubic (half-pixel centres and aligned
    corners, up and down) and of ScaleAndTranslate (lanczos3 antialiased, keyscubic), each
    and of ResizeBilinear and ResizeNearestNeighbor (half-pixel, aligned corners, legacy), each
    weighted by `w0..w8` and summed, flattened into `y`: ResizeBicubicGrad,
    ScaleAndTranslateGrad, ResizeBilinearGrad, ResizeNearestNeighborGrad."""
    rng = np.random.default_rng(11)
    shape = (2, 6, 7, 3)
    g = tf.Graph()
    ws = {}
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, shape, name="x")
        outs = [
            tf.raw_ops.ResizeBicubic(images=x, size=[9, 5], half_pixel_centers=True),
            tf.raw_ops.ResizeBicubic(images=x, size=[4, 11], align_corners=True),
            tf.raw_ops.ScaleAndTranslate(images=x, size=[4, 5], scale=[4 / 6, 5 / 7], translation=[0.0, 0.0],
                                         kernel_type="lanczos3", antialias=True),
            tf.raw_ops.ScaleAndTranslate(images=x, size=[10, 9], scale=[10 / 6, 1.3], translation=[0.5, -1.0],
                                         kernel_type="keyscubic", antialias=False),
            tf.raw_ops.ResizeBilinear(images=x, size=[11, 4], half_pixel_centers=True),
            tf.raw_ops.ResizeBilinear(images=x, size=[3, 13], align_corners=True),
            tf.raw_ops.ResizeNearestNeighbor(images=x, size=[13, 5], half_pixel_centers=True),
            tf.raw_ops.ResizeNearestNeighbor(images=x, size=[4, 10], align_corners=True),
            tf.raw_ops.ResizeBilinear(images=x, size=[12, 14]),
        ]
        grads = []
        for i, o in enumerate(outs):
            ws[f"w{i}"] = rng.uniform(-1, 1, o.shape).astype(np.float32)
            (d,) = tf.gradients(tf.reduce_sum(o * ws[f"w{i}"]), [x])
            grads.append(tf.reshape(d, [-1]))
        tf.identity(tf.concat(grads, 0), name="y")
    gd = g.as_graph_def()
    ops = sorted({n.op for n in gd.node})
    if probe:
        print("grads_resize", ops)
        return
    run_and_write("grads_resize", g, rng.uniform(-1, 1, shape).astype(np.float32), ws)


def main():
    probe = "--probe" in sys.argv
    os.makedirs(OUT, exist_ok=True)
    tf.keras.utils.set_random_seed(43)
    for i, (name, shape, layers) in enumerate(models()):
        freeze(name, shape, layers, 1000 + i, probe)
    gradients_fixture(probe)
    resize_gradients_fixture(probe)


if __name__ == "__main__":
    main()
