#!/usr/bin/env python3
"""Writes the TensorFlow fixtures that `cargo test` checks ferroflow against.

Each fixture is a frozen TensorFlow 2 graph (tf.function + convert_variables_to_constants_v2)
written as binary .pb and text .pbtxt, the inputs fed to it (.inputs.npz, keyed by tensor
name) and TensorFlow's outputs (.expected.npz, keyed by tensor name). MANIFEST lists each
fixture with the tolerances its comparison uses.

Run:  python3 -m venv .venv && .venv/bin/pip install tensorflow-cpu==2.21.0 tensorboard
      .venv/bin/python scripts/make_fixtures.py
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow as tf
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "tf")
rng = np.random.default_rng(20261129)
manifest = []


def save(name, fn, specs, feeds, rtol=1e-5, atol=1e-6, note="", lower_control_flow=True):
    """Freezes `fn` for `specs`, runs it on `feeds` and writes the fixture files.

    With lower_control_flow=False, functional control flow (If/While and their FunctionDefs)
    is kept as TensorFlow 2 writes it instead of being lowered to v1 Switch/Merge frames."""
    concrete = fn.get_concrete_function(*specs)
    frozen = convert_variables_to_constants_v2(concrete, lower_control_flow=lower_control_flow)
    gd = frozen.graph.as_graph_def()
    with open(os.path.join(OUT, f"{name}.pb"), "wb") as f:
        f.write(gd.SerializeToString(deterministic=True))
    with open(os.path.join(OUT, f"{name}.pbtxt"), "w") as f:
        f.write(str(gd))
    in_names = [t.name for t in frozen.inputs]
    outs = frozen(*[tf.constant(v) for v in feeds])
    if not isinstance(outs, (list, tuple)):
        outs = [outs]
    out_names = [t.name for t in frozen.outputs]
    np.savez(os.path.join(OUT, f"{name}.inputs.npz"), **dict(zip(in_names, feeds)))
    np.savez(os.path.join(OUT, f"{name}.expected.npz"), **{n: o.numpy() for n, o in zip(out_names, outs)})
    ops = sorted({n.op for n in gd.node})
    manifest.append(f"{name} {rtol} {atol} {' '.join(ops)}" + (f"  # {note}" if note else ""))
    print(f"{name}: {len(gd.node)} nodes, ops {ops}")


def f32(*shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def mlp():
    w1 = tf.Variable(f32(8, 16, lo=-0.5, hi=0.5))
    b1 = tf.Variable(f32(16, lo=-0.1, hi=0.1))
    w2 = tf.Variable(f32(16, 10, lo=-0.5, hi=0.5))
    b2 = tf.Variable(f32(10, lo=-0.1, hi=0.1))

    @tf.function
    def model(x):
        h = tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w1), b1))
        return tf.nn.softmax(tf.matmul(h, w2) + b2)

    save("mlp", model, [tf.TensorSpec([None, 8], tf.float32, name="x")], [f32(4, 8)])


def elementwise(dtype, name):
    r = tf.raw_ops

    @tf.function
    def f(x, y):
        outs = [r.Add(x=x, y=y), r.AddV2(x=x, y=y), r.Sub(x=x, y=y), r.Mul(x=x, y=y),
                r.Maximum(x=x, y=y), r.Minimum(x=x, y=y), r.Neg(x=x), r.Square(x=x),
                r.Relu(features=x), r.Equal(x=x, y=y)]
        if dtype in (tf.float32, tf.float64):
            ax = r.Abs(x=x) + tf.constant(0.5, dtype)
            outs += [r.RealDiv(x=x, y=y), r.Sqrt(x=ax), r.Rsqrt(x=ax), r.Exp(x=x), r.Log(x=ax),
                     r.Tanh(x=x), r.Sigmoid(x=x), r.Softmax(logits=x), r.LogSoftmax(logits=x)]
        return outs

    np_dtype = dtype.as_numpy_dtype
    if dtype in (tf.float32, tf.float64):
        x = (np.round(rng.uniform(-3, 3, size=(3, 4)) * 2) / 2).astype(np_dtype)
        y = (np.round(rng.uniform(0.5, 3, size=(4,)) * 2) / 2).astype(np_dtype)
    else:
        x = rng.integers(-5, 6, size=(3, 4)).astype(np_dtype)
        y = rng.integers(1, 6, size=(4,)).astype(np_dtype)
    specs = [tf.TensorSpec([3, 4], dtype, name="x"), tf.TensorSpec([4], dtype, name="y")]
    save(name, f, specs, [x, y], note="x [3,4] with y [4] broadcast")


def reductions():
    r = tf.raw_ops

    @tf.function
    def f(x, xi):
        return [r.Sum(input=x, axis=[1], keep_dims=False), r.Sum(input=x, axis=[0, 2], keep_dims=True),
                r.Mean(input=x, axis=[-1], keep_dims=False), r.Max(input=x, axis=[0], keep_dims=False),
                r.Sum(input=x, axis=tf.constant([0, 1, 2], tf.int64), keep_dims=False),
                r.Sum(input=xi, axis=[0], keep_dims=False), r.Mean(input=xi, axis=[1], keep_dims=True),
                r.Max(input=xi, axis=[1], keep_dims=False),
                r.Min(input=x, axis=[2], keep_dims=False), r.Prod(input=xi, axis=[1], keep_dims=True),
                r.Prod(input=x, axis=[0], keep_dims=False),
                r.ArgMax(input=x, dimension=2, output_type=tf.int64),
                r.ArgMax(input=xi, dimension=0, output_type=tf.int32)]

    specs = [tf.TensorSpec([2, 3, 5], tf.float32, name="x"), tf.TensorSpec([4, 3], tf.int32, name="xi")]
    save("reductions", f, specs, [f32(2, 3, 5), rng.integers(-9, 10, size=(4, 3)).astype(np.int32)])


def array_ops():
    r = tf.raw_ops

    @tf.function
    def f(x, m):
        sh = r.Shape(input=x, out_type=tf.int32)
        outs = [
            r.Reshape(tensor=x, shape=[-1, 3]), r.Reshape(tensor=x, shape=tf.constant([6, 2], tf.int64)),
            sh, r.Shape(input=x, out_type=tf.int64),
            r.ExpandDims(input=x, axis=-1), r.ExpandDims(input=x, axis=0),
            r.Squeeze(input=r.ExpandDims(input=x, axis=1), axis=[1]), r.Squeeze(input=tf.reshape(x, [1, 3, 1, 4]), axis=[]),
            r.Fill(dims=sh, value=tf.constant(7.5)), r.Fill(dims=tf.constant([2, 2], tf.int64), value=tf.constant(3)),
            r.ZerosLike(x=x), r.OnesLike(x=x), r.OnesLike(x=tf.cast(x, tf.int64)),
            r.Pack(values=[x, x * 2.0], axis=0), r.Pack(values=[x, x, -x], axis=-1),
            r.ConcatV2(values=[x, -x], axis=0), r.ConcatV2(values=[x, r.Reshape(tensor=x, shape=[3, 4])], axis=-1),
            r.Cast(x=x, DstT=tf.int32), r.Cast(x=x, DstT=tf.float64), r.Cast(x=x, DstT=tf.bool),
            r.Cast(x=r.Cast(x=x, DstT=tf.int64), DstT=tf.float32), r.Cast(x=x > 0.0, DstT=tf.float32),
            r.Identity(input=x), r.PlaceholderWithDefault(input=x, shape=[3, 4]),
            r.BiasAdd(value=x, bias=tf.constant([1.0, 2.0, 3.0, 4.0])),
            r.BiasAdd(value=tf.reshape(x, [1, 3, 2, 2]), bias=tf.constant([1.0, 2.0, 3.0]), data_format="NCHW"),
            r.MatMul(a=x, b=m), r.MatMul(a=m, b=x, transpose_a=True, transpose_b=True),
            r.MatMul(a=x, b=x, transpose_a=False, transpose_b=True),
        ]
        a, b = r.IdentityN(input=[x, sh])
        return outs + [a, b]

    x = (np.round(f32(3, 4) * 4) / 4).astype(np.float32)
    specs = [tf.TensorSpec([3, 4], tf.float32, name="x"), tf.TensorSpec([4, 5], tf.float32, name="m")]
    save("array_ops", f, specs, [x, f32(4, 5)])


def matmul_f64_int():
    r = tf.raw_ops

    @tf.function
    def f(a, b, c, d):
        return [r.MatMul(a=a, b=b), r.MatMul(a=c, b=d, transpose_b=True), r.BiasAdd(value=a, bias=tf.constant([0.5, -1.0, 2.0], tf.float64)),
                r.Softmax(logits=a), r.Sum(input=a, axis=[0], keep_dims=False)]

    specs = [tf.TensorSpec([3, 3], tf.float64, name="a"), tf.TensorSpec([3, 3], tf.float64, name="b"),
             tf.TensorSpec([2, 3], tf.int32, name="c"), tf.TensorSpec([4, 3], tf.int32, name="d")]
    save("matmul_mixed", f, specs, [rng.normal(size=(3, 3)), rng.normal(size=(3, 3)),
                                    rng.integers(-4, 5, (2, 3)).astype(np.int32),
                                    rng.integers(-4, 5, (4, 3)).astype(np.int32)])


def math_ops():
    r = tf.raw_ops

    @tf.function
    def f(x, y, i, j, b, c, v):
        return [
            r.Relu6(features=x * 3.0), r.Elu(features=x), r.Selu(features=x), r.Softplus(features=x * 10.0),
            r.LeakyRelu(features=x, alpha=0.1), r.LeakyRelu(features=x), r.Erf(x=x), r.Sign(x=x), r.Sign(x=i),
            r.Floor(x=x), r.Ceil(x=x), r.Round(x=x), r.Reciprocal(x=y), r.Log1p(x=r.Abs(x=x)), r.Expm1(x=x),
            r.Sin(x=x), r.Cos(x=x),
            r.Pow(x=r.Abs(x=x), y=y), r.Pow(x=i, y=r.Abs(x=j)), r.FloorMod(x=x, y=y), r.FloorMod(x=i, y=j),
            r.FloorDiv(x=x, y=y), r.FloorDiv(x=i, y=j), r.SquaredDifference(x=x, y=y), r.SquaredDifference(x=i, y=j),
            r.GreaterEqual(x=x, y=y), r.Less(x=x, y=y), r.LessEqual(x=i, y=j), r.NotEqual(x=x, y=y), r.NotEqual(x=b, y=c),
            r.LogicalAnd(x=b, y=c), r.LogicalOr(x=b, y=c), r.LogicalNot(x=b),
            r.Select(condition=b, x=x, y=-x), r.Select(condition=v, x=x, y=x * 2.0),
            r.SelectV2(condition=c, t=x, e=y), r.SelectV2(condition=r.Less(x=y, y=1.0), t=i, e=j),
            r.AddN(inputs=[x, x, y * 0.0 + x]), r.AddN(inputs=[i]), r.Rank(input=x), r.Size(input=x, out_type=tf.int64),
            r.ArgMin(input=x, dimension=1, output_type=tf.int32), r.ArgMin(input=i, dimension=0),
            r.All(input=b, axis=[1], keep_dims=False), r.Any(input=b, axis=[0, 1], keep_dims=True),
            r.StopGradient(input=x), r.PreventGradient(input=x, message="no"), r.Snapshot(input=i),
        ]

    x = np.array([[0.5, 1.5, 2.5, -0.5], [-1.5, -2.25, 3.7, 0.0], [1.0, -3.0, 0.1, 2.0]], np.float32)
    y = np.array([0.5, 2.0, 1.5, 3.0], np.float32)
    i = np.array([[7, -7, 9, 0], [-9, 4, 3, -1], [2, 5, -6, 8]], np.int32)
    j = np.array([[2, 3, -2, 5], [4, -3, 2, 1], [3, 2, 2, -4]], np.int32)
    b = np.array([[True, False, True, True], [False, False, True, False], [True, True, True, True]])
    c = np.array([[False, False, True, True], [True, False, False, True], [True, True, False, False]])
    v = np.array([True, False, True])
    specs = [tf.TensorSpec(a.shape, tf.as_dtype(a.dtype), name=n) for a, n in
             [(x, "x"), (y, "y"), (i, "i"), (j, "j"), (b, "b"), (c, "c"), (v, "v")]]
    save("math_ops", f, specs, [x, y, i, j, b, c, v])


def cnn_weights(rng_):
    return (tf.Variable(rng_.normal(0, 0.3, (3, 3, 1, 32)).astype(np.float32)),
            tf.Variable(rng_.normal(0, 0.01, (32,)).astype(np.float32)),
            tf.Variable(rng_.normal(0, 0.1, (3, 3, 32, 64)).astype(np.float32)),
            tf.Variable(rng_.normal(0, 0.01, (64,)).astype(np.float32)),
            tf.Variable(rng_.normal(0, 0.05, (7 * 7 * 64, 10)).astype(np.float32)),
            tf.Variable(rng_.normal(0, 0.01, (10,)).astype(np.float32)))


def cnn_function(weights):
    """The CNN of the issue: conv 3x3x32 -> pool -> conv 3x3x64 -> pool -> dense 10 -> log_softmax."""
    w1, b1, w2, b2, w3, b3 = weights

    @tf.function
    def model(x):
        h = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, w1, 1, "SAME"), b1))
        h = tf.nn.max_pool2d(h, 2, 2, "VALID")
        h = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(h, w2, 1, "SAME"), b2))
        h = tf.nn.max_pool2d(h, 2, 2, "VALID")
        h = tf.reshape(h, [-1, 7 * 7 * 64])
        return tf.nn.log_softmax(tf.matmul(h, w3) + b3)

    return model


def cnn():
    model = cnn_function(cnn_weights(np.random.default_rng(7)))
    x = rng.uniform(0, 1, (4, 28, 28, 1)).astype(np.float32)
    save("cnn", model, [tf.TensorSpec([None, 28, 28, 1], tf.float32, name="x")], [x])


def conv_ops():
    r = tf.raw_ops

    @tf.function
    def f(x, k, dk, xd, kd, pk):
        return [
            r.Conv2D(input=x, filter=k, strides=[1, 2, 2, 1], padding="VALID"),
            r.Conv2D(input=x, filter=k, strides=[1, 1, 1, 1], padding="SAME", dilations=[1, 2, 2, 1]),
            r.Conv2D(input=x, filter=k, strides=[1, 2, 1, 1], padding="EXPLICIT",
                     explicit_paddings=[0, 0, 1, 2, 0, 1, 0, 0]),
            r.Conv2D(input=x, filter=pk, strides=[1, 1, 1, 1],
                     padding="VALID"),
            r.DepthwiseConv2dNative(input=x, filter=dk, strides=[1, 2, 2, 1], padding="SAME"),
            r.DepthwiseConv2dNative(input=x, filter=dk, strides=[1, 1, 1, 1], padding="VALID", dilations=[1, 2, 1, 1]),
            r.MaxPool(input=x, ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1], padding="SAME"),
            r.MaxPool(input=x, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID"),
            r.AvgPool(value=x, ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1], padding="SAME"),
            r.AvgPool(value=x, ksize=[1, 2, 3, 1], strides=[1, 1, 2, 1], padding="VALID"),
            r.FusedBatchNormV3(x=x, scale=tf.constant([1.0, 0.5, 2.0]), offset=tf.constant([0.1, -0.2, 0.0]),
                               mean=tf.constant([0.3, -0.1, 0.5]), variance=tf.constant([1.0, 0.25, 4.0]),
                               epsilon=0.001, is_training=False)[0],
            r.Conv2D(input=xd, filter=kd, strides=[1, 1, 1, 1], padding="SAME"),
        ]

    specs = [tf.TensorSpec([2, 9, 8, 3], tf.float32, name="x"), tf.TensorSpec([3, 3, 3, 4], tf.float32, name="k"),
             tf.TensorSpec([3, 2, 3, 2], tf.float32, name="dk"), tf.TensorSpec([1, 5, 5, 2], tf.float64, name="xd"),
             tf.TensorSpec([2, 2, 2, 3], tf.float64, name="kd"), tf.TensorSpec([1, 1, 3, 4], tf.float32, name="pk")]
    save("conv_ops", f, specs, [f32(2, 9, 8, 3), f32(3, 3, 3, 4), f32(3, 2, 3, 2), rng.normal(size=(1, 5, 5, 2)),
                                rng.normal(size=(2, 2, 2, 3)), f32(1, 1, 3, 4)])


def index_ops():
    r = tf.raw_ops

    @tf.function
    def f(x, i, s, g, bm1, bm2):
        return [
            r.Transpose(x=x, perm=[2, 0, 1]), r.Transpose(x=s, perm=tf.constant([1, 0], tf.int64)),
            r.Slice(input=x, begin=[1, 0, 1], size=[1, -1, 2]),
            x[1:, ::-1], x[..., 1], x[None, :, 2], x[::2, -1:0:-1, 1:3], x[-1], x[:, tf.newaxis, ..., ::-2], s[:, 1:2],
            r.Tile(input=s, multiples=[2, 3]), r.Pad(input=s, paddings=[[1, 0], [2, 1]]),
            r.PadV2(input=i, paddings=[[0, 1], [1, 1]], constant_values=-7),
            r.MirrorPad(input=x, paddings=[[0, 0], [1, 2], [2, 1]], mode="REFLECT"),
            r.MirrorPad(input=s, paddings=[[2, 1], [0, 3]], mode="SYMMETRIC"),
            r.Range(start=2, limit=17, delta=3), r.Range(start=1.5, limit=-2.0, delta=-0.75),
            r.Range(start=tf.constant(5, tf.int64), limit=tf.constant(-4, tf.int64), delta=tf.constant(-2, tf.int64)),
            *r.Unpack(value=x, num=3, axis=1), *r.Split(axis=2, value=g, num_split=2),
            *r.SplitV(value=x, size_splits=[1, -1], axis=-1, num_split=2),
            r.GatherV2(params=x, indices=[2, 0, 2], axis=1), r.GatherV2(params=s, indices=[[1, 0], [0, 0]], axis=0),
            r.GatherV2(params=g, indices=tf.constant(3, tf.int64), axis=-1),
            r.GatherNd(params=x, indices=[[1, 2], [0, 0]]), r.GatherNd(params=x, indices=[[[1, 2, 3]], [[0, 1, 0]]]),
            r.OneHot(indices=i[0], depth=4, on_value=5.0, off_value=-1.0),
            r.OneHot(indices=tf.constant([[0, 2], [3, -1]], tf.int64), depth=3, on_value=1, off_value=0, axis=0),
            r.Cumsum(x=x, axis=1), r.Cumsum(x=i, axis=0, exclusive=True, reverse=True),
            r.Where(condition=x > 0.5), r.Where(condition=i),
            *r.TopKV2(input=s, k=2), *r.TopKV2(input=tf.constant([[3, 1, 3, 2, 3]]), k=4),
            r.BatchMatMulV2(x=bm1, y=bm2), r.BatchMatMulV2(x=bm1, y=bm1, adj_x=True),
        ]

    x = (np.round(f32(2, 3, 4) * 4) / 4).astype(np.float32)
    i = rng.integers(-3, 4, (2, 3)).astype(np.int32)
    i[0] = [1, 3, 0]
    s = f32(3, 4)
    g = f32(2, 2, 4)
    bm1, bm2 = f32(2, 1, 3, 4), f32(3, 4, 2)
    specs = [tf.TensorSpec(a.shape, tf.as_dtype(a.dtype), name=n) for a, n in
             [(x, "x"), (i, "i"), (s, "s"), (g, "g"), (bm1, "bm1"), (bm2, "bm2")]]
    save("index_ops", f, specs, [x, i, s, g, bm1, bm2])


def image_ops():
    r = tf.raw_ops

    @tf.function
    def f(img, a, b, c):
        return [
            r.ResizeBilinear(images=img, size=[7, 5]),
            r.ResizeBilinear(images=img, size=[3, 9], align_corners=True),
            r.ResizeBilinear(images=img, size=[8, 6], half_pixel_centers=True),
            r.ResizeNearestNeighbor(images=img, size=[7, 5]),
            r.ResizeNearestNeighbor(images=img, size=[3, 9], align_corners=True),
            r.ResizeNearestNeighbor(images=img, size=[8, 6], half_pixel_centers=True),
            r.Einsum(inputs=[a, b], equation="ij,jk->ik"), r.Einsum(inputs=[c, c], equation="bij,bkj->bik"),
            r.Einsum(inputs=[a], equation="ij->ji"), r.Einsum(inputs=[b, b], equation="ij,ij->i"),
            r.Einsum(inputs=[a, b], equation="ij,jk->"), r.Einsum(inputs=[c], equation="bii->bi"),
        ]

    specs = [tf.TensorSpec([2, 4, 5, 3], tf.float32, name="img"), tf.TensorSpec([2, 3], tf.float32, name="a"),
             tf.TensorSpec([3, 4], tf.float32, name="b"), tf.TensorSpec([2, 3, 3], tf.float32, name="c")]
    save("image_ops", f, specs, [f32(2, 4, 5, 3), f32(2, 3), f32(3, 4), f32(2, 3, 3)])


def control_flow_fn():
    @tf.function
    def inner(a):
        return a * 2.0 + 1.0

    @tf.function
    def f(x, n):
        i = tf.constant(0)
        acc = x
        while i < n:
            if tf.reduce_sum(acc) > 10.0:
                acc = acc * 0.5
            else:
                acc = acc + 1.0
            i += 1
        return acc, inner(x), tf.cond(n > 2, lambda: x - 1.0, lambda: x * 3.0)

    return f


def control_flow_v1():
    """The same function with control flow lowered to v1 frames (Switch/Merge/Enter/Exit)."""
    specs = [tf.TensorSpec([2, 2], tf.float32, name="x"), tf.TensorSpec([], tf.int32, name="n")]
    save("control_flow_v1", control_flow_fn(), specs, [f32(2, 2, lo=0.0, hi=3.0), np.int32(7)],
         note="lowered: a while frame with a cond inside, and a cond")


def tf1_control_flow():
    """A TF1 graph: tf.compat.v1 cond and while_loop with v1 control flow, run in a Session."""
    g = tf.Graph()
    with g.as_default():
        tf.compat.v1.disable_control_flow_v2()
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        k = tf.compat.v1.placeholder(tf.int32, [], name="k")
        c = tf.compat.v1.cond(tf.reduce_sum(x) > 0.0, lambda: x * 2.0, lambda: -x, name="pick")

        def body(i, acc, total):
            inner = tf.compat.v1.while_loop(lambda j, s: j < i, lambda j, s: (j + 1, s + 1.0), [0, 0.0], name="inner")[1]
            return i + 1, acc * 1.5 + inner, total + tf.compat.v1.cond(tf.equal(i % 2, 0), lambda: 1, lambda: 10)

        loop = tf.compat.v1.while_loop(lambda i, acc, total: i < k, body, [tf.constant(0), c, tf.constant(0)], name="loop")
        out = [tf.identity(c, name="cond_out"), tf.identity(loop[1], name="acc"), tf.identity(loop[2], name="total")]
        feeds = {"x:0": np.array([0.5, -0.25, 1.0], np.float32), "k:0": np.int32(5)}
        with tf.compat.v1.Session(graph=g) as sess:
            values = sess.run(out, feed_dict=feeds)
        tf.compat.v1.enable_control_flow_v2()
    gd = g.as_graph_def()
    with open(os.path.join(OUT, "tf1_control_flow.pb"), "wb") as f:
        f.write(gd.SerializeToString(deterministic=True))
    with open(os.path.join(OUT, "tf1_control_flow.pbtxt"), "w") as f:
        f.write(str(gd))
    np.savez(os.path.join(OUT, "tf1_control_flow.inputs.npz"), **feeds)
    np.savez(os.path.join(OUT, "tf1_control_flow.expected.npz"), **{t.name: v for t, v in zip(out, values)})
    ops = sorted({n.op for n in gd.node})
    manifest.append(f"tf1_control_flow 1e-05 1e-06 {' '.join(ops)}  # nested while_loop and cond (TF1, v1 frames)")
    print(f"tf1_control_flow: {len(gd.node)} nodes, ops {ops}")


def control_flow_v2():
    specs = [tf.TensorSpec([2, 2], tf.float32, name="x"), tf.TensorSpec([], tf.int32, name="n")]
    save("control_flow_v2", control_flow_fn(), specs, [f32(2, 2, lo=0.0, hi=3.0), np.int32(7)], lower_control_flow=False,
         note="functional While with an If in its body, a function call, and tf.cond")


def seed_000():
    """what_runs' graph as a TF1 program, as TensorFlow writes it (text GraphDef): nodes Const,
    Const_1, Add, Add_1, Mul."""
    g = tf.Graph()
    with g.as_default():
        a = tf.constant(1.0)
        b = tf.constant(2.0)
        c = tf.add(a, b)
        d = tf.add(a, b)
        out = tf.multiply(c, d)
        with tf.compat.v1.Session(graph=g) as sess:
            value = sess.run(out)
    assert value == 9.0 and out.name == "Mul:0"
    with open(os.path.join(OUT, "seed_000.pbtxt"), "w") as f:
        f.write(str(g.as_graph_def()))
    np.savez(os.path.join(OUT, "seed_000.expected.npz"), **{out.name: np.float32(value)})
    print(f"seed_000: fetch {out.name} = {value}")


def partitions():
    """TensorFlow's own partition graphs: a TF1 graph on two logical CPUs (device_count CPU=2),
    run with output_partition_graphs and FULL_TRACE. Writes partitions/<device>.pbtxt (named
    as an Estimator hook names them), the feeds and fetches, and the RunMetadata."""
    import shutil
    d = os.path.join(OUT, "partitions")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 3], name="x")
        with tf.device("/cpu:0"):
            w = tf.constant(np.arange(12, dtype=np.float32).reshape(3, 4) / 10.0, name="w")
            h = tf.nn.relu(tf.matmul(x, w), name="h")
        with tf.device("/cpu:1"):
            y = tf.reduce_sum(h * 2.0, axis=1, name="y")
            z = tf.add(h, 1.0, name="z")
        with tf.device("/cpu:0"):
            out = tf.identity(y + tf.reduce_mean(z), name="out")
    config = tf.compat.v1.ConfigProto(device_count={"CPU": 2})
    config.graph_options.rewrite_options.min_graph_nodes = -1
    feeds = {"x:0": f32(2, 3)}
    with tf.compat.v1.Session(graph=g, config=config) as sess:
        opts = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE, output_partition_graphs=True)
        meta = tf.compat.v1.RunMetadata()
        values = sess.run(["out:0", "z:0"], feed_dict={"x:0": feeds["x:0"]}, options=opts, run_metadata=meta)
    names = []
    for pg in meta.partition_graphs:
        device = pg.node[0].device
        name = device.replace("/", "_").replace(":", "_") + ".pbtxt"
        with open(os.path.join(d, name), "w") as f:
            f.write(str(pg))
        names.append(name)
    with open(os.path.join(d, "run_metadata.pb"), "wb") as f:
        f.write(meta.SerializeToString(deterministic=True))
    with open(os.path.join(d, "graph.pbtxt"), "w") as f:
        f.write(str(g.as_graph_def()))
    np.savez(os.path.join(d, "inputs.npz"), **feeds)
    np.savez(os.path.join(d, "expected.npz"), **{"out:0": values[0], "z:0": values[1]})
    print(f"partitions: {sorted(names)}")


def gradients():
    """A TF1 MLP-style loss and tf.gradients of it with respect to its weights: the whole graph
    (forward + TensorFlow's gradient nodes), the inputs, and TensorFlow's loss and gradients."""
    g = tf.Graph()
    r = np.random.default_rng(7)
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [4, 5], name="x")
        t = tf.compat.v1.placeholder(tf.float32, [4, 3], name="t")
        w1 = tf.constant(r.normal(0, 0.5, (5, 6)).astype(np.float32), name="w1")
        b1 = tf.constant(r.normal(0, 0.1, 6).astype(np.float32), name="b1")
        w2 = tf.constant(r.normal(0, 0.5, (6, 3)).astype(np.float32), name="w2")
        b2 = tf.constant(r.normal(0, 0.1, 3).astype(np.float32), name="b2")
        h = tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w1), b1), name="h")
        logits = tf.add(tf.matmul(h, w2), b2, name="logits")
        y = tf.nn.softmax(logits, name="y")
        side = tf.reduce_sum(tf.tanh(h) * tf.sigmoid(h), axis=1)
        loss = tf.add(tf.reduce_mean(tf.square(y - t)), 0.1 * tf.reduce_mean(side), name="loss")
        grads = tf.gradients(loss, [w1, b1, w2, b2])
        feeds = {"x:0": f32(4, 5), "t:0": np.eye(3, dtype=np.float32)[[0, 2, 1, 2]]}
        with tf.compat.v1.Session(graph=g) as sess:
            values = sess.run([loss] + grads, feed_dict=feeds)
    gd = g.as_graph_def()
    with open(os.path.join(OUT, "gradients.pb"), "wb") as f:
        f.write(gd.SerializeToString(deterministic=True))
    with open(os.path.join(OUT, "gradients.pbtxt"), "w") as f:
        f.write(str(gd))
    names = [loss.name] + [gr.name for gr in grads]
    np.savez(os.path.join(OUT, "gradients.inputs.npz"), **feeds)
    np.savez(os.path.join(OUT, "gradients.expected.npz"), **dict(zip(names, values)))
    ops = sorted({n.op for n in gd.node})
    manifest.append(f"gradients 1e-05 1e-06 {' '.join(ops)}  # tf.gradients of an MLP loss w.r.t. w1 b1 w2 b2")
    print(f"gradients: {len(gd.node)} nodes, ops {ops}; fetches {names}")


def training():
    """TF1 resource variables trained by each tf.compat.v1.train optimizer (GradientDescent,
    Momentum, Nesterov momentum, Adam, RMSProp with momentum, Adagrad) plus raw
    ResourceApplyAdagradV2, AssignSubVariableOp and VarIsInitializedOp: the graph, the feeds,
    and every variable's value after each of 3 steps (fixtures/tf/training/optimizers.*).
    Also seeded RandomUniform / RandomStandardNormal / TruncatedNormal samples from TensorFlow
    (random.*) for the statistical tests."""
    out = os.path.join(OUT, "training")
    os.makedirs(out, exist_ok=True)
    r = np.random.default_rng(11)
    x_val = r.normal(0, 1, (5, 3)).astype(np.float32)
    t_val = r.normal(0, 1, (5, 4)).astype(np.float32)
    w0 = r.normal(0, 0.5, (3, 4)).astype(np.float32)
    b0 = r.normal(0, 0.1, 4).astype(np.float32)
    v1 = tf.compat.v1
    g = tf.Graph()
    lines = []
    with g.as_default():
        x = v1.placeholder(tf.float32, [5, 3], name="x")
        t = v1.placeholder(tf.float32, [5, 4], name="t")
        opts = {
            "sgd": v1.train.GradientDescentOptimizer(0.1),
            "momentum": v1.train.MomentumOptimizer(0.05, 0.9),
            "nesterov": v1.train.MomentumOptimizer(0.05, 0.9, use_nesterov=True),
            "adam": v1.train.AdamOptimizer(0.01),
            "rmsprop": v1.train.RMSPropOptimizer(0.01, momentum=0.5),
            "adagrad": v1.train.AdagradOptimizer(0.1),
        }
        variables = []
        for k, opt in opts.items():
            with v1.variable_scope(k):
                w = v1.get_variable("w", initializer=w0, use_resource=True)
                b = v1.get_variable("b", initializer=b0, use_resource=True)
            loss = tf.reduce_sum(tf.square(tf.matmul(x, w) + b - t), name=f"{k}_loss")
            gs = v1.train.get_or_create_global_step() if k == "adam" else None
            op = opt.minimize(loss, global_step=gs, name=f"{k}_train")
            lines.append(f"train {op.name}")
            variables += [w, b]
        # Raw ops without a TF1 optimizer: AdagradV2, AssignSub, VarIsInitialized.
        with v1.variable_scope("raw"):
            wa = v1.get_variable("w", initializer=w0, use_resource=True)
            acc = v1.get_variable("accum", initializer=np.full((3, 4), 0.1, np.float32), use_resource=True)
            c = v1.get_variable("c", initializer=b0, use_resource=True)
        grad = tf.constant(r.normal(0, 1, (3, 4)).astype(np.float32), name="raw_grad")
        ada2 = tf.raw_ops.ResourceApplyAdagradV2(var=wa.handle, accum=acc.handle, lr=0.1, epsilon=1e-3, grad=grad,
                                                 name="raw_adagrad_v2")
        sub = tf.raw_ops.AssignSubVariableOp(resource=c.handle, value=tf.constant(b0 * 0.5), name="raw_assign_sub")
        inited = tf.raw_ops.VarIsInitializedOp(resource=wa.handle, name="raw_is_initialized")
        lines += ["train raw_adagrad_v2", "train raw_assign_sub", f"fetch {inited.name}"]
        variables += [wa, acc, c]
        all_vars = v1.global_variables()
        init = v1.global_variables_initializer()
        lines.insert(0, f"init {init.name}")
        feeds = {"x:0": x_val, "t:0": t_val}
        expected = {}
        with v1.Session(graph=g) as sess:
            sess.run(init)
            for step in range(1, 4):
                sess.run([v1.get_default_graph().get_operation_by_name(l.split()[1]) for l in lines if l.startswith("train")],
                         feed_dict=feeds)
                for v in all_vars:
                    expected[f"step{step}/{v.op.name}"] = sess.run(v.read_value())
            expected[inited.name] = sess.run(inited)
    for v in all_vars:
        lines.append(f"var {v.op.name}")
    gd = g.as_graph_def()
    with open(os.path.join(out, "optimizers.pb"), "wb") as f:
        f.write(gd.SerializeToString(deterministic=True))
    with open(os.path.join(out, "optimizers.txt"), "w") as f:
        f.write("# roles: init NODE | train NODE (run together each step) | fetch TENSOR | var NAME\n")
        f.write("\n".join(lines) + "\n")
    np.savez(os.path.join(out, "optimizers.inputs.npz"), **feeds)
    np.savez(os.path.join(out, "optimizers.expected.npz"), **expected)
    print(f"training/optimizers: {len(gd.node)} nodes, ops {sorted({n.op for n in gd.node})}")

    g = tf.Graph()
    with g.as_default():
        v1.set_random_seed(5)
        u = tf.random.uniform([20000], name="uniform")
        n = tf.random.normal([20000], name="normal")
        tn = tf.random.truncated_normal([20000], name="truncated")
        with v1.Session(graph=g) as sess:
            vals = sess.run([u, n, tn])
    gd = g.as_graph_def()
    with open(os.path.join(out, "random.pb"), "wb") as f:
        f.write(gd.SerializeToString(deterministic=True))
    np.savez(os.path.join(out, "random.expected.npz"), **{u.name: vals[0], n.name: vals[1], tn.name: vals[2]})
    print(f"training/random: ops {sorted({n.op for n in gd.node})}")


def checkpoints():
    """A TensorFlow 2.21 checkpoint written by SaveV2 with tensors of many dtypes and shapes
    (fixtures/tf/checkpoints/mixed.{index,data-00000-of-00001}), their values (mixed.npz, plus
    strings in mixed.strings.txt) and the save order (mixed.order)."""
    out = os.path.join(OUT, "checkpoints")
    os.makedirs(out, exist_ok=True)
    r = np.random.default_rng(3)
    tensors = [
        ("layer_0/kernel", r.normal(0, 1, (4, 3)).astype(np.float32)),
        ("layer_0/bias", r.normal(0, 1, 3).astype(np.float32)),
        ("global_step", np.array(5000, np.int64)),
        ("a_double", r.normal(0, 1, (2, 2, 2)).astype(np.float64)),
        ("int32s", np.arange(-3, 4, dtype=np.int32)),
        ("bools", np.array([True, False, True])),
        ("uint8s", np.arange(0, 250, 7, dtype=np.uint8)),
        ("empty", np.zeros((0, 3), np.float32)),
        ("halfs", np.array([0.5, -2.0, 65504.0], np.float16)),
    ]
    strings = [b"ab", b"", b"c" * 200, bytes(range(256))]
    prefix = os.path.join(out, "mixed")
    names = [n for n, _ in tensors] + ["strings"]
    values = [tf.constant(v) for _, v in tensors] + [tf.constant(strings)]
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names), tensors=values)
    np.savez(os.path.join(out, "mixed.npz"), **{n: v for n, v in tensors})
    with open(os.path.join(out, "mixed.strings.hex"), "w") as f:
        f.write("\n".join(s.hex() for s in strings) + "\n")
    with open(os.path.join(out, "mixed.order"), "w") as f:
        f.write("\n".join(names) + "\n")
    print(f"checkpoints/mixed: {names}")


def saver_seed_003():
    """mnist_training's second half in TensorFlow 2.21's TF1 API: the model of
    scripts/bench_mnist.py::tf_mnist_mlp (TF1 control flow: tf.cond as Switch/Merge, as
    TensorFlow 1 wrote it; TF 2.21's default cond_v2 makes training graphs whose If branches
    return variant Optionals for the gradient, which ferroflow does not run yet) trained 200
    steps (batch 100) on the bundled split, saved by tf.compat.v1.train.Saver into
    fixtures/tf/checkpoints/seed_003/ (model.ckpt-200.{index,data-00000-of-00001,meta} + the
    `checkpoint` state file, relative paths), and TensorFlow's accuracy:0 on the bundled test
    split after restoring from the .meta alone (expected.npz). ferroflow imports that .meta,
    restores, and must compute the same."""
    expected, path, ops = _saver_fixture("seed_003", seed=3, steps=200, units=256, ref_variables=False,
                                         keep=lambda sess: {"layer_0/kernel[:2]": sess.run(
                                             "layer_0/kernel/Read/ReadVariableOp:0")[:2]})
    print(f"checkpoints/seed_003: {path}, accuracy {expected['accuracy:0']}, ops {ops}")


def saver_seed_003_ref():
    """The same in TensorFlow 1's variable flavour: mnist_training's model with 32 units per hidden
    layer, every variable a ref variable (VariableV2 / Assign / ApplyAdam / AssignAdd, as
    TensorFlow 1 and `disable_v2_behavior()` make them), trained 50 steps and saved by a TF1
    Saver into fixtures/tf/checkpoints/seed_003_ref/. expected.npz holds accuracy:0 after
    restoring from the .meta alone, then every variable after one more Adam step on the first
    100 training digits with is_training false (no dropout randomness)."""
    def after_one_step(sess):
        sess.run("Adam", {"inputs:0": xtr[:100], "outputs:0": ytr[:100], "is_training:0": False})
        return {v.op.name: sess.run(v) for v in tf.compat.v1.global_variables()}

    import bench_mnist
    xtr, ytr = bench_mnist.load_split("train")
    expected, path, ops = _saver_fixture("seed_003_ref", seed=4, steps=50, units=32, ref_variables=True,
                                         keep=after_one_step)
    assert "VariableV2" in ops and "ApplyAdam" in ops and "VarHandleOp" not in ops, ops
    print(f"checkpoints/seed_003_ref: {path}, accuracy {expected['accuracy:0']}, ops {ops}")


def saver_seed_003_cond_v2():
    """mnist_training's model as TensorFlow 2.21 builds tf.compat.v1 code by default: dropout's
    tf.cond is a functional If (cond_v2) whose branches return their intermediates as variant
    Optionals (OptionalFromValue / OptionalNone) for the gradient's If (OptionalGetValue); 32
    units, resource variables, 50 steps, a TF1 Saver (fixtures/tf/checkpoints/seed_003_v2/).
    expected.npz: accuracy:0 after restoring from the .meta alone, then every variable after one
    more Adam step on the first 100 training digits with is_training false."""
    def after_one_step(sess):
        sess.run("Adam", {"inputs:0": xtr[:100], "outputs:0": ytr[:100], "is_training:0": False})
        return {v.op.name: sess.run(v) for v in tf.compat.v1.global_variables()}

    import bench_mnist
    xtr, ytr = bench_mnist.load_split("train")
    expected, path, ops = _saver_fixture("seed_003_v2", seed=5, steps=50, units=32, ref_variables=False,
                                         keep=after_one_step, cond_v2=True)
    assert "If" in ops and "Switch" not in ops, ops
    print(f"checkpoints/seed_003_v2: {path}, accuracy {expected['accuracy:0']}, ops {ops}")


def _saver_fixture(name, seed, steps, units, ref_variables, keep, cond_v2=False):
    """Trains tf1_mnist_mlp_with_saver for `steps`, saves it into checkpoints/NAME/ (relative
    paths), restores it from the .meta alone in a new graph, and writes expected.npz:
    accuracy:0 on the test split plus what `keep(sess)` returns."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import bench_mnist
    v1 = tf.compat.v1
    out = os.path.join(OUT, "checkpoints", name)
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):
        os.remove(os.path.join(out, f))
    xtr, ytr = bench_mnist.load_split("train")
    xte, yte = bench_mnist.load_split("t10k")
    g, t, saver = bench_mnist.tf1_mnist_mlp_with_saver(tf, seed, units=units, ref_variables=ref_variables,
                                                      cond_v2=cond_v2)
    cwd = os.getcwd()
    os.chdir(out)  # relative save path: the state file names the checkpoint relative to its dir
    try:
        with v1.Session(graph=g) as sess:
            sess.run(t["init"])
            bench_mnist.train_steps(sess, t, xtr, ytr, steps, np.random.default_rng(seed))
            path = saver.save(sess, "model.ckpt", global_step=t["global_step"])
    finally:
        os.chdir(cwd)
    g2 = tf.Graph()
    with g2.as_default():
        restorer = v1.train.import_meta_graph(os.path.join(out, path + ".meta"))
        with v1.Session(graph=g2) as sess:
            restorer.restore(sess, os.path.join(out, path))
            acc = sess.run("accuracy:0", {"inputs:0": xte, "outputs:0": yte, "is_training:0": False})
            expected = {"accuracy:0": np.float32(acc), **keep(sess)}
    np.savez(os.path.join(out, "expected.npz"), **expected)
    return expected, path, sorted({n.op for n in g.as_graph_def().node})


def grad_ops():
    """TensorFlow's gradient helper ops on fed inputs: BroadcastGradientArgs, BroadcastTo,
    DynamicStitch, ReluGrad, Relu6Grad, SigmoidGrad, TanhGrad, BiasAddGrad, UnsortedSegmentSum."""
    @tf.function
    def f(s0, s1, v, i0, i1, d0, d1, g, y):
        r0, r1 = tf.raw_ops.BroadcastGradientArgs(s0=s0, s1=s1)
        return (tf.identity(r0), tf.identity(r1), tf.broadcast_to(v, [2, 3, 4]),
                tf.raw_ops.DynamicStitch(indices=[i0, i1], data=[d0, d1]),
                tf.raw_ops.ReluGrad(gradients=g, features=y - 0.5),
                tf.raw_ops.Relu6Grad(gradients=g, features=y * 8.0 - 1.0), tf.raw_ops.SigmoidGrad(y=y, dy=g),
                tf.raw_ops.TanhGrad(y=y, dy=g), tf.raw_ops.BiasAddGrad(out_backprop=g),
                tf.math.unsorted_segment_sum(d1, i1 - 1, 4))
    specs = [tf.TensorSpec([3], tf.int32, name="s0"), tf.TensorSpec([2], tf.int32, name="s1"),
             tf.TensorSpec([3, 1], tf.float32, name="v"), tf.TensorSpec([2], tf.int32, name="i0"),
             tf.TensorSpec([3], tf.int32, name="i1"), tf.TensorSpec([2, 2], tf.float32, name="d0"),
             tf.TensorSpec([3, 2], tf.float32, name="d1"), tf.TensorSpec([3, 4], tf.float32, name="g"),
             tf.TensorSpec([3, 4], tf.float32, name="y")]
    feeds = [np.array([2, 1, 4], np.int32), np.array([3, 1], np.int32), f32(3, 1), np.array([4, 0], np.int32),
             np.array([1, 3, 2], np.int32), f32(2, 2), f32(3, 2), f32(3, 4), f32(3, 4, lo=0.0, hi=1.0)]
    save("grad_ops", f, specs, feeds)


def slice_grad_band():
    """Ops issue 43 added: StridedSliceGrad (raw, with every mask kind, and as tf.gradients
    writes it for x[1:3, ::-2] and x[..., 1]), Erfc, MatrixBandPart (lower, upper, band)."""
    @tf.function
    def f(x, dy, m):
        raw = tf.raw_ops.StridedSliceGrad(shape=[3, 5, 2], begin=[0, 1, -1, 0], end=[0, 3, -6, 0],
                                          strides=[1, 1, -2, 1], dy=dy, new_axis_mask=1, ellipsis_mask=8)
        y = tf.reduce_sum(x[1:3, ::-2] * 2.0) + tf.reduce_sum(x[..., 1] ** 2)
        (g,) = tf.gradients(y, [x])
        return (raw, g, tf.math.erfc(x), tf.linalg.band_part(m, -1, 0), tf.linalg.band_part(m, 0, -1),
                tf.linalg.band_part(m, 1, 2))
    specs = [tf.TensorSpec([3, 5, 2], tf.float32, name="x"), tf.TensorSpec([1, 2, 3, 2], tf.float32, name="dy"),
             tf.TensorSpec([2, 4, 5], tf.float32, name="m")]
    save("slice_grad_band", f, specs, [f32(3, 5, 2), f32(1, 2, 3, 2), f32(2, 4, 5)])


def conv_grad_ops():
    """The gradient kernels of convolutions and pools on fed inputs: Conv2DBackpropInput and
    Conv2DBackpropFilter (SAME stride 2, VALID with dilation-free 1x2 strides), MaxPoolGrad
    and AvgPoolGrad (3x3 windows, SAME stride 2 and VALID stride 1)."""
    @tf.function
    def f(x, w, gs, gv, mp, ap):
        same = dict(strides=[1, 2, 2, 1], padding="SAME")
        valid = dict(strides=[1, 1, 2, 1], padding="VALID")
        pool_same = dict(ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1], padding="SAME")
        pool_valid = dict(ksize=[1, 3, 3, 1], strides=[1, 1, 1, 1], padding="VALID")
        y = tf.nn.max_pool2d(x, 3, 2, "SAME")
        return (tf.raw_ops.Conv2DBackpropInput(input_sizes=tf.shape(x), filter=w, out_backprop=gs, **same),
                tf.raw_ops.Conv2DBackpropFilter(input=x, filter_sizes=tf.shape(w), out_backprop=gs, **same),
                tf.raw_ops.Conv2DBackpropInput(input_sizes=tf.shape(x), filter=w, out_backprop=gv, **valid),
                tf.raw_ops.Conv2DBackpropFilter(input=x, filter_sizes=tf.shape(w), out_backprop=gv, **valid),
                tf.raw_ops.MaxPoolGrad(orig_input=x, orig_output=y, grad=mp, **pool_same),
                tf.raw_ops.AvgPoolGrad(orig_input_shape=tf.shape(x), grad=mp, **pool_same),
                tf.raw_ops.AvgPoolGrad(orig_input_shape=tf.shape(x), grad=ap, **pool_valid))
    specs = [tf.TensorSpec([2, 7, 6, 3], tf.float32, name="x"), tf.TensorSpec([3, 3, 3, 4], tf.float32, name="w"),
             tf.TensorSpec([2, 4, 3, 4], tf.float32, name="gs"), tf.TensorSpec([2, 5, 2, 4], tf.float32, name="gv"),
             tf.TensorSpec([2, 4, 3, 3], tf.float32, name="mp"), tf.TensorSpec([2, 5, 4, 3], tf.float32, name="ap")]
    feeds = [f32(2, 7, 6, 3), f32(3, 3, 3, 4), f32(2, 4, 3, 4), f32(2, 5, 2, 4), f32(2, 4, 3, 3), f32(2, 5, 4, 3)]
    save("conv_grad_ops", f, specs, feeds, rtol=1e-5, atol=1e-5)


def losses():
    """Softmax cross-entropy with dense and sparse labels (both outputs: loss and backprop)."""
    @tf.function
    def f(logits, labels, ids):
        a = tf.raw_ops.SoftmaxCrossEntropyWithLogits(features=logits, labels=labels)
        b = tf.raw_ops.SparseSoftmaxCrossEntropyWithLogits(features=logits, labels=ids)
        return tf.identity(a[0]), tf.identity(a[1]), tf.identity(b[0]), tf.identity(b[1])
    specs = [tf.TensorSpec([4, 5], tf.float32, name="logits"), tf.TensorSpec([4, 5], tf.float32, name="labels"),
             tf.TensorSpec([4], tf.int64, name="ids")]
    labels = rng.uniform(0, 1, (4, 5)).astype(np.float32)
    labels /= labels.sum(axis=1, keepdims=True)
    save("losses", f, specs, [f32(4, 5, lo=-5.0, hi=5.0), labels, np.array([0, 4, 2, 1], np.int64)])


def softsign():
    """Softsign (f32 and f64, special values too), TensorFlow's SoftsignGrad, and the gradient
    tf.GradientTape takes through Softsign (which TensorFlow builds with SoftsignGrad)."""
    own = np.random.default_rng(20261201)

    @tf.function
    def f(x, y, g):
        with tf.GradientTape() as tape:
            tape.watch(x)
            s = tf.raw_ops.Softsign(features=x)
        (dx,) = tape.gradient(s, [x], output_gradients=[g])
        return (s, tf.raw_ops.Softsign(features=y), tf.raw_ops.SoftsignGrad(gradients=g, features=x),
                tf.identity(dx))
    x = np.concatenate([own.uniform(-4, 4, 10), [0.0, -0.0, 1e30, -1e30, np.inf, -np.inf, np.nan, 1e-30]])
    x = x.astype(np.float32).reshape(3, 6)
    y = own.uniform(-4, 4, (2, 5))
    g = own.uniform(-1, 1, (3, 6)).astype(np.float32)
    specs = [tf.TensorSpec([3, 6], tf.float32, name="x"), tf.TensorSpec([2, 5], tf.float64, name="y"),
             tf.TensorSpec([3, 6], tf.float32, name="g")]
    save("softsign", f, specs, [x, y, g], rtol=0.0, atol=0.0, note="bit-exact")


def xlogy():
    """Xlogy and Xdivy (f32 and f64, broadcasting, x = 0 against y = 0, negative and special y)
    and the gradient tf.GradientTape takes through Xlogy (which TensorFlow builds with Xdivy)."""
    own = np.random.default_rng(20261202)

    @tf.function
    def f(x, y, a, b, g):
        with tf.GradientTape() as tape:
            tape.watch([a, b])
            z = tf.math.xlogy(a, b)
        da, db = tape.gradient(z, [a, b], output_gradients=g)
        return (tf.math.xlogy(x, y), tf.math.xdivy(x, y), tf.math.xlogy(a, b), tf.math.xdivy(b, a),
                tf.identity(da), tf.identity(db))
    x = np.array([[0.0, -0.0, 1.5, -2.0, 0.0, 3.0], [1.0, 0.0, np.nan, 2.0, -1.0, 0.5]], np.float32)
    y = np.array([[0.0, 2.0, 0.0, 3.0, -1.0, np.inf], [np.nan, np.nan, 1.0, -0.0, 1e-30, 4.0]], np.float32)
    a = np.concatenate([[0.0, 0.0], own.uniform(-2, 2, 10)]).reshape(4, 3)
    b = own.uniform(0.25, 3.0, 3)
    g = own.uniform(-1, 1, (4, 3))
    specs = [tf.TensorSpec([2, 6], tf.float32, name="x"), tf.TensorSpec([2, 6], tf.float32, name="y"),
             tf.TensorSpec([4, 3], tf.float64, name="a"), tf.TensorSpec([3], tf.float64, name="b"),
             tf.TensorSpec([4, 3], tf.float64, name="g")]
    save("xlogy", f, specs, [x, y, a, b, g], rtol=1e-6, atol=1e-12)


def event_files():
    """Event files written by TensorFlow: a TF1 FileWriter (what_runs' graph, `loss` as
    simple_value at steps 0..2) and a TF2 writer (`loss` as a tensor scalar at steps 0..2, and
    the graph through tf.summary.graph). loss = 0.5 ** step in both."""
    import shutil
    for sub in ("tf1", "tf2"):
        d = os.path.join(OUT, "events", sub)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    g = tf.Graph()
    with g.as_default():
        a = tf.constant(1.0)
        b = tf.constant(2.0)
        tf.multiply(tf.add(a, b), tf.add(a, b))
    with g.as_default():
        w = tf.compat.v1.summary.FileWriter(os.path.join(OUT, "events", "tf1"), graph=g)
        for step in range(3):
            value = tf.compat.v1.Summary.Value(tag="loss", simple_value=0.5 ** step)
            w.add_summary(tf.compat.v1.Summary(value=[value]), step)
        w.close()
    w = tf.summary.create_file_writer(os.path.join(OUT, "events", "tf2"))
    with w.as_default():
        for step in range(3):
            tf.summary.scalar("loss", 0.5 ** step, step=step)
        tf.summary.graph(g.as_graph_def())
    w.close()
    print("events: TF1 FileWriter and TF2 summary writer files")


def edge_cases():
    """A GraphDef exercising every AttrValue case and awkward values (not meant to run)."""
    gd = tf.compat.v1.GraphDef()
    gd.versions.producer = 2474
    n = gd.node.add(name="edge/attrs", op="NoOp", device="/job:localhost/replica:0/task:0/device:CPU:0")
    n.attr["s"].s = bytes(range(256))
    n.attr["utf8"].s = "ünïcødé ☃".encode()
    n.attr["i"].i = -(2**63)
    n.attr["f_nan"].f = float("nan")
    n.attr["f_inf"].f = float("-inf")
    n.attr["f_tiny"].f = 1e-40
    n.attr["f_max"].f = float(np.finfo(np.float32).max)
    n.attr["b"].b = False
    n.attr["type"].type = tf.bfloat16.as_datatype_enum
    n.attr["shape"].shape.unknown_rank = True
    n.attr["empty_list"].list.SetInParent()
    n.attr["list"].list.i.extend([0, -1, 2**40])
    n.attr["list"].list.f.extend([0.5, float("inf")])
    n.attr["list"].list.s.extend([b"", b"\x00\xff"])
    n.attr["list"].list.type.extend([tf.float32.as_datatype_enum, tf.string.as_datatype_enum])
    n.attr["func"].func.name = "f"
    n.attr["func"].func.attr["T"].type = tf.int64.as_datatype_enum
    n.attr["placeholder"].placeholder = "T"
    t = tf.make_tensor_proto(np.array([[1.5, -0.0, np.nan], [np.inf, 1e-45, -3.0]], np.float32))
    n.attr["tensor"].tensor.CopyFrom(t)
    n.attr["tensor_str"].tensor.CopyFrom(tf.make_tensor_proto(np.array([b"a", b"\x01\x02"])))
    n.attr["tensor_half"].tensor.CopyFrom(tf.make_tensor_proto(np.array([1.0, 65504.0], np.float16)))
    n.attr["tensor_i64"].tensor.CopyFrom(tf.make_tensor_proto(np.int64(-5)))
    n.experimental_debug_info.original_node_names.append("orig")
    m = gd.node.add(name="edge/ctrl", op="NoOp", input=["^edge/attrs"])
    m.experimental_debug_info.SetInParent()
    fn = gd.library.function.add()
    fn.signature.name = "f"
    fn.signature.input_arg.add(name="x", type=tf.float32.as_datatype_enum)
    fn.signature.output_arg.add(name="y", type=tf.float32.as_datatype_enum)
    body = fn.node_def.add(name="neg", op="Neg", input=["x"])
    body.attr["T"].type = tf.float32.as_datatype_enum
    fn.ret["y"] = "neg:y:0"
    fn.arg_attr[0].attr["_user_specified_name"].s = b"x"
    fn.resource_arg_unique_id[0] = 5
    with open(os.path.join(OUT, "edge.pb"), "wb") as f:
        f.write(gd.SerializeToString(deterministic=True))
    with open(os.path.join(OUT, "edge.pbtxt"), "w") as f:
        f.write(str(gd))
    print("edge: every AttrValue case, special floats, all byte values, a function library")


def tf_op_defs():
    """fixtures/tf/op_defs.pb: every OpDef TensorFlow registers (an OpList, descriptions
    cleared), so `cargo test -p ferroflow-ops` checks the registry's signatures and attr
    defaults against TensorFlow's own (SavedModels strip default-valued attrs)."""
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.python.client import pywrap_tf_session

    ops = op_def_pb2.OpList()
    ops.ParseFromString(pywrap_tf_session.TF_GetBuffer(pywrap_tf_session.TF_GetAllOpList()))
    for op in ops.op:
        op.ClearField("summary")
        op.ClearField("description")
        for a in list(op.attr) + list(op.input_arg) + list(op.output_arg):
            a.ClearField("description")
    ops.op.sort(key=lambda o: o.name)
    with open(os.path.join(OUT, "op_defs.pb"), "wb") as f:
        f.write(ops.SerializeToString())
    print("op_defs.pb:", len(ops.op), "ops")


def update_manifest(entries):
    """Replaces (or adds) the MANIFEST lines of `entries`, keeping every other line."""
    path = os.path.join(OUT, "MANIFEST")
    with open(path) as f:
        lines = f.read().splitlines()
    for entry in entries:
        key = entry.split()[0]
        at = [i for i, line in enumerate(lines) if line.split()[:1] == [key]]
        if at:
            lines[at[0]] = entry
        else:
            lines.append(entry)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def collectives():
    """TensorFlow's V2 collective ops in a group of one (this process: ferroflow's 1-rank world
    outside mpirun): all-reduce with and without Div, all-gather, broadcast send; the
    multi-rank behaviour is checked under mpirun (crates/cli/tests/mpi.rs)."""

    @tf.function
    def fn(x, i):
        g = dict(group_size=1, group_key=1)
        mean = tf.raw_ops.CollectiveReduceV2(input=x, instance_key=1, ordering_token=[], merge_op="Add",
                                             final_op="Div", **g)
        mx = tf.raw_ops.CollectiveReduceV2(input=i, instance_key=2, ordering_token=[], merge_op="Max",
                                           final_op="Id", **g)
        gathered = tf.raw_ops.CollectiveGatherV2(input=x, instance_key=3, ordering_token=[], **g)
        sent = tf.raw_ops.CollectiveBcastSendV2(input=x, instance_key=4, **g)
        return mean, mx, gathered, sent

    save("collectives", fn, [tf.TensorSpec([2, 3], tf.float32, name="x"), tf.TensorSpec([4], tf.int64, name="i")],
         [f32(2, 3), np.array([3, -1, 7, 0], np.int64)], note="a group of 1 rank")


def main():
    os.makedirs(OUT, exist_ok=True)
    if len(sys.argv) > 1:
        # Only the named fixture functions; their MANIFEST lines are replaced (or added).
        for name in sys.argv[1:]:
            globals()[name]()
        update_manifest(manifest)
        return
    mlp()
    elementwise(tf.float32, "elementwise_f32")
    elementwise(tf.float64, "elementwise_f64")
    elementwise(tf.int32, "elementwise_i32")
    elementwise(tf.int64, "elementwise_i64")
    reductions()
    array_ops()
    matmul_f64_int()
    math_ops()
    cnn()
    conv_ops()
    index_ops()
    image_ops()
    control_flow_v2()
    control_flow_v1()
    tf1_control_flow()
    gradients()
    training()
    checkpoints()
    saver_seed_003()
    saver_seed_003_ref()
    saver_seed_003_cond_v2()
    grad_ops()
    conv_grad_ops()
    losses()
    softsign()
    xlogy()
    event_files()
    partitions()
    seed_000()
    edge_cases()
    collectives()
    slice_grad_band()
    tf_op_defs()
    with open(os.path.join(OUT, "MANIFEST"), "w") as f:
        f.write("# name rtol atol ops...  (written by scripts/make_fixtures.py with TensorFlow "
                f"{tf.__version__})\n")
        f.write("\n".join(manifest) + "\n")


if __name__ == "__main__":
    sys.exit(main())
