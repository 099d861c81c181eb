#!/usr/bin/env python3
"""Writes the TensorFlow fixtures for the EfficientNet family's layers and gradients.

Two kinds:
  fixtures/tf/effnet_grad_ops.*   a frozen graph of the gradient kernels themselves
      (DepthwiseConv2dNativeBackpropInput/Filter, FusedBatchNormV3 in training mode,
      FusedBatchNormGradV3 in both modes) on fed inputs, run by tests/tf_fixtures.rs like every
      fixture in MANIFEST (its line is added or replaced there).
  fixtures/effnet/<case>.npz      inputs, weights, TensorFlow's forward outputs and its
      gradients (tf.GradientTape) of `loss = sum(y * r)` (r a fixed random tensor, so the whole
      Jacobian counts) for: depthwise convolutions (stride 1 and 2, SAME and VALID), batch
      normalization in training and inference mode, swish, a squeeze-and-excitation block and
      a whole MBConv block. crates/ferroflow/tests/effnet.rs builds the same graphs with
      ferroflow's ops and layers and compares outputs and gradients.

Run:  .venv/bin/python scripts/make_effnet_fixtures.py
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures  # noqa: E402  (its `save` and MANIFEST handling)

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "fixtures", "effnet")
rng = np.random.default_rng(20260815)

# Keras's BatchNormalization defaults, which the fixtures use throughout.
EPSILON = 1e-3
MOMENTUM = 0.99


def f32(*shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def write(name, **arrays):
    path = os.path.join(OUT, f"{name}.npz")
    np.savez(path, **{k: np.asarray(v) for k, v in arrays.items()})
    print(f"{name}: {', '.join(f'{k}{list(np.shape(v))}' for k, v in arrays.items())}")


def loss_and_grads(fn, values, r):
    """fn's output y for `values` (a dict of tensors), and d sum(y*r) / d each value."""
    vs = {k: tf.constant(v) for k, v in values.items()}
    with tf.GradientTape() as tape:
        for v in vs.values():
            tape.watch(v)
        y = fn(**vs)
        loss = tf.reduce_sum(y * r)
    grads = tape.gradient(loss, vs)
    return y.numpy(), {f"d{k}": g.numpy() for k, g in grads.items()}


def depthwise():
    """DepthwiseConv2dNative (channel multiplier 2) and its gradients: stride 1 and 2, SAME
    and VALID."""
    x, w = f32(2, 7, 6, 3), f32(3, 3, 3, 2)
    for padding in ["SAME", "VALID"]:
        for stride in [1, 2]:
            def fn(x, w):
                return tf.raw_ops.DepthwiseConv2dNative(input=x, filter=w, strides=[1, stride, stride, 1],
                                                        padding=padding)
            shape = fn(tf.constant(x), tf.constant(w)).shape
            r = f32(*shape)
            y, g = loss_and_grads(fn, {"x": x, "w": w}, r)
            write(f"depthwise_{padding.lower()}_s{stride}", x=x, w=w, r=r, y=y, **g)


def batch_norm():
    """FusedBatchNormV3 as Keras 2's fused BatchNormalization runs it: training mode with
    exponential_avg_factor = 1 - momentum (moving mean and variance as outputs 1 and 2),
    and inference mode; each with the gradients of x, scale and offset."""
    x = f32(4, 5, 5, 3, lo=-2.0, hi=3.0)
    scale, offset = f32(3, lo=0.5, hi=1.5), f32(3, lo=-0.5, hi=0.5)
    moving_mean, moving_var = f32(3, lo=-0.2, hi=0.2), f32(3, lo=0.5, hi=1.5)
    r = f32(4, 5, 5, 3)
    for training in [True, False]:
        def fn(x, scale, offset):
            return tf.raw_ops.FusedBatchNormV3(x=x, scale=scale, offset=offset, mean=moving_mean,
                                               variance=moving_var, epsilon=EPSILON,
                                               exponential_avg_factor=1.0 - MOMENTUM if training else 1.0,
                                               is_training=training)[0]
        y, g = loss_and_grads(fn, {"x": x, "scale": scale, "offset": offset}, r)
        outs = tf.raw_ops.FusedBatchNormV3(x=x, scale=scale, offset=offset, mean=moving_mean, variance=moving_var,
                                           epsilon=EPSILON, exponential_avg_factor=1.0 - MOMENTUM if training else 1.0,
                                           is_training=training)
        extra = {}
        if training:
            extra = dict(new_mean=outs[1].numpy(), new_var=outs[2].numpy(), batch_mean=outs[3].numpy(),
                         batch_var=outs[4].numpy())
        write(f"batch_norm_{'train' if training else 'infer'}", x=x, scale=scale, offset=offset,
              moving_mean=moving_mean, moving_var=moving_var, r=r, y=y, **g, **extra)


def swish():
    """tf.nn.silu (Keras's "swish"): x * sigmoid(x), and its gradient."""
    x = f32(3, 5, lo=-6.0, hi=6.0)
    r = f32(3, 5)
    y, g = loss_and_grads(lambda x: tf.nn.silu(x), {"x": x}, r)
    write("swish", x=x, r=r, y=y, **g)


def se(x, w1, b1, w2, b2):
    """Squeeze-and-excitation as Keras's EfficientNet builds it: global average pool (kept
    as 1x1), 1x1 conv + swish, 1x1 conv + sigmoid, times the input."""
    s = tf.reduce_mean(x, axis=[1, 2], keepdims=True)
    s = tf.nn.silu(tf.nn.bias_add(tf.nn.conv2d(s, w1, 1, "SAME"), b1))
    s = tf.sigmoid(tf.nn.bias_add(tf.nn.conv2d(s, w2, 1, "SAME"), b2))
    return x * s


def se_block():
    x = f32(2, 4, 4, 8)
    w1, b1, w2, b2 = f32(1, 1, 8, 2), f32(2, lo=-0.1, hi=0.1), f32(1, 1, 2, 8), f32(8, lo=-0.1, hi=0.1)
    r = f32(2, 4, 4, 8)
    y, g = loss_and_grads(se, {"x": x, "w1": w1, "b1": b1, "w2": w2, "b2": b2}, r)
    write("se_block", x=x, w1=w1, b1=b1, w2=w2, b2=b2, r=r, y=y, **g)


def bn_train(x, gamma, beta, mean, var):
    return tf.raw_ops.FusedBatchNormV3(x=x, scale=gamma, offset=beta, mean=mean, variance=var, epsilon=EPSILON,
                                       exponential_avg_factor=1.0 - MOMENTUM, is_training=True)


def mbconv_block():
    """One MBConv block of EfficientNet-B0 (expand ratio 4, 3x3 depthwise stride 1, SE ratio
    0.25, identity residual) in training mode: 1x1 expand conv (no bias) + BN + swish,
    depthwise 3x3 + BN + swish, SE, 1x1 project conv + BN, + input. Gradients for the input
    and every weight; the moving statistics each BN writes."""
    c_in, c_mid, c_se = 8, 32, 2
    x = f32(2, 6, 6, c_in)
    w = dict(
        expand_kernel=f32(1, 1, c_in, c_mid, lo=-0.5, hi=0.5),
        bn0_gamma=f32(c_mid, lo=0.5, hi=1.5), bn0_beta=f32(c_mid, lo=-0.2, hi=0.2),
        dw_kernel=f32(3, 3, c_mid, 1, lo=-0.5, hi=0.5),
        bn1_gamma=f32(c_mid, lo=0.5, hi=1.5), bn1_beta=f32(c_mid, lo=-0.2, hi=0.2),
        se_reduce_kernel=f32(1, 1, c_mid, c_se, lo=-0.5, hi=0.5), se_reduce_bias=f32(c_se, lo=-0.1, hi=0.1),
        se_expand_kernel=f32(1, 1, c_se, c_mid, lo=-0.5, hi=0.5), se_expand_bias=f32(c_mid, lo=-0.1, hi=0.1),
        project_kernel=f32(1, 1, c_mid, c_in, lo=-0.5, hi=0.5),
        bn2_gamma=f32(c_in, lo=0.5, hi=1.5), bn2_beta=f32(c_in, lo=-0.2, hi=0.2),
    )
    # Keras's initial moving statistics: mean 0, variance 1.
    zeros = {c: np.zeros(c, np.float32) for c in (c_mid, c_in)}
    ones = {c: np.ones(c, np.float32) for c in (c_mid, c_in)}
    moving = {}

    def fn(x, **w):
        h = tf.nn.conv2d(x, w["expand_kernel"], 1, "SAME")
        o = bn_train(h, w["bn0_gamma"], w["bn0_beta"], zeros[c_mid], ones[c_mid])
        moving.update(bn0_mean=o[1], bn0_var=o[2])
        h = tf.nn.silu(o[0])
        h = tf.raw_ops.DepthwiseConv2dNative(input=h, filter=w["dw_kernel"], strides=[1, 1, 1, 1], padding="SAME")
        o = bn_train(h, w["bn1_gamma"], w["bn1_beta"], zeros[c_mid], ones[c_mid])
        moving.update(bn1_mean=o[1], bn1_var=o[2])
        h = tf.nn.silu(o[0])
        h = se(h, w["se_reduce_kernel"], w["se_reduce_bias"], w["se_expand_kernel"], w["se_expand_bias"])
        h = tf.nn.conv2d(h, w["project_kernel"], 1, "SAME")
        o = bn_train(h, w["bn2_gamma"], w["bn2_beta"], zeros[c_in], ones[c_in])
        moving.update(bn2_mean=o[1], bn2_var=o[2])
        return o[0] + x

    r = f32(2, 6, 6, c_in)
    y, g = loss_and_grads(fn, {"x": x, **w}, r)
    write("mbconv_block", x=x, r=r, y=y, **w, **g, **{k: v.numpy() for k, v in moving.items()})


def grad_ops():
    """The gradient kernels on fed inputs, as a frozen TensorFlow graph (a MANIFEST fixture)."""
    r = tf.raw_ops

    @tf.function
    def f(x, w, gs2, gv1, gs1, gv2, bx, bs, bo, bm, bv, bdy):
        sizes_x, sizes_w = tf.shape(x), tf.shape(w)
        outs = []
        for g, stride, padding in [(gs2, 2, "SAME"), (gv1, 1, "VALID"), (gs1, 1, "SAME"), (gv2, 2, "VALID")]:
            a = dict(strides=[1, stride, stride, 1], padding=padding)
            outs.append(r.DepthwiseConv2dNativeBackpropInput(input_sizes=sizes_x, filter=w, out_backprop=g, **a))
            outs.append(r.DepthwiseConv2dNativeBackpropFilter(input=x, filter_sizes=sizes_w, out_backprop=g, **a))
        explicit = dict(strides=[1, 1, 1, 1], padding="EXPLICIT", explicit_paddings=[0, 0, 1, 1, 1, 1, 0, 0])
        outs.append(r.DepthwiseConv2dNativeBackpropInput(input_sizes=sizes_x, filter=w, out_backprop=gs1, **explicit))
        outs.append(r.DepthwiseConv2dNativeBackpropFilter(input=x, filter_sizes=sizes_w, out_backprop=gs1, **explicit))
        train = r.FusedBatchNormV3(x=bx, scale=bs, offset=bo, mean=bm, variance=bv, epsilon=EPSILON,
                                   exponential_avg_factor=1.0 - MOMENTUM, is_training=True)
        plain = r.FusedBatchNormV3(x=bx, scale=bs, offset=bo, mean=tf.zeros([0]), variance=tf.zeros([0]),
                                   epsilon=0.0001, is_training=True)
        outs += [train[0], train[1], train[2], train[3], train[4], plain[0], plain[1], plain[2]]
        grad = r.FusedBatchNormGradV3(y_backprop=bdy, x=bx, scale=bs, reserve_space_1=train[3],
                                      reserve_space_2=train[4], reserve_space_3=train[5], epsilon=EPSILON,
                                      is_training=True)
        frozen = r.FusedBatchNormGradV3(y_backprop=bdy, x=bx, scale=bs, reserve_space_1=bm, reserve_space_2=bv,
                                        reserve_space_3=train[5], epsilon=EPSILON, is_training=False)
        outs += [grad[0], grad[1], grad[2], frozen[0], frozen[1], frozen[2]]
        return outs

    specs = [tf.TensorSpec([2, 7, 6, 3], tf.float32, name="x"), tf.TensorSpec([3, 3, 3, 2], tf.float32, name="w"),
             tf.TensorSpec([2, 4, 3, 6], tf.float32, name="gs2"), tf.TensorSpec([2, 5, 4, 6], tf.float32, name="gv1"),
             tf.TensorSpec([2, 7, 6, 6], tf.float32, name="gs1"), tf.TensorSpec([2, 3, 2, 6], tf.float32, name="gv2"),
             tf.TensorSpec([3, 4, 5, 4], tf.float32, name="bx"), tf.TensorSpec([4], tf.float32, name="bs"),
             tf.TensorSpec([4], tf.float32, name="bo"), tf.TensorSpec([4], tf.float32, name="bm"),
             tf.TensorSpec([4], tf.float32, name="bv"), tf.TensorSpec([3, 4, 5, 4], tf.float32, name="bdy")]
    feeds = [f32(2, 7, 6, 3), f32(3, 3, 3, 2), f32(2, 4, 3, 6), f32(2, 5, 4, 6), f32(2, 7, 6, 6), f32(2, 3, 2, 6),
             f32(3, 4, 5, 4, lo=-2.0, hi=3.0), f32(4, lo=0.5, hi=1.5), f32(4), f32(4, lo=-0.2, hi=0.2),
             f32(4, lo=0.5, hi=1.5), f32(3, 4, 5, 4)]
    make_fixtures.save("effnet_grad_ops", f, specs, feeds, rtol=1e-5, atol=1e-5,
                       note="depthwise backprops (SAME/VALID, stride 1/2, EXPLICIT), batch norm training + its grads")


def main():
    os.makedirs(OUT, exist_ok=True)
    depthwise()
    batch_norm()
    swish()
    se_block()
    mbconv_block()
    grad_ops()
    make_fixtures.update_manifest(make_fixtures.manifest)


if __name__ == "__main__":
    sys.exit(main())
