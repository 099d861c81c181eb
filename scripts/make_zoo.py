#!/usr/bin/env python3
"""The model zoo (issue 43): models exported by TensorFlow 2.21, with TensorFlow's outputs.

Each model is written to ZOO/<name>/:
  frozen.pb      the frozen GraphDef (`convert_variables_to_constants_v2`, as
                 scripts/make_model_fixtures.py freezes): inputs `x:0` (or `x0:0`, `x1:0`, ...)
  saved_model/   Keras 3's `model.export` (detection models: `tf.saved_model.save` of a tf.Module)
  io.npz         the inputs keyed by the frozen graph's input tensor names (`x:0`) and
                 TensorFlow's outputs keyed by its output tensor names (`Identity:0`, ...);
                 for applications also `Identity:0@float64`, the graph run by TensorFlow in
                 float64 (the exact answer both float32 runs approximate)
  meta.json      {"inputs": [frozen input names], "outputs": [frozen output names],
                  "signature_inputs": {key: frozen input name},
                  "signature_outputs": {key: frozen output name}, "tolerance": 1e-4,
                  "batched": whether axis 0 of every input is the batch, "kind": ...}

Weights are random (`weights=None`, seeded; `classifier_activation=None` where the
constructor has it: random weights make a softmax flat, so logits are compared) and
BatchNormalization's moving statistics are set away from 0/1 so inference BN is not an
identity; in the applications they are the statistics of 4 other inputs drawn like the checked
one, moved off by a little (`calibrate_batch_norm`), so the deep ones do not amplify rounding
into chaos.

Models: every constructor of `tf.keras.applications` at its default input size (batch 1),
and small models of each layer kind (batch 2): recurrent, attention, convolution variants,
normalization/preprocessing, detection post-processing (tf.functions), every activation of
`tf.keras.activations`.

Options:
  --out DIR        where to write (default target/zoo; git-ignored)
  --only NAME...   only these models (names as listed by --list)
  --list           print the model names and exit
  --seed N         weights and inputs seed (default 43)
  --scale S        keras applications at S times their default input size (rounded to a
                   multiple of 32 and at least the constructor's minimum), named <app>_s<S>
  --width W        keras applications built reduced through keras' internal builders: every
                   convolution/hidden width times W (MobileNet alpha, NASNet penultimate
                   filters, EfficientNet width/depth coefficients, ConvNeXt projection dims,
                   DenseNet/ResNet depths...), named <app>_w<W>
  --subset         the committed subset: a reduced application of each family plus every
                   layer-kind model, frozen .pb + .npz only, into fixtures/zoo/

Run:  .venv/bin/python scripts/make_zoo.py [--only ...] [--subset]
"""
import argparse
import contextlib
import gc
import json
import math
import os
import re
import shutil
import sys
import types
import zlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402
from keras import layers as L  # noqa: E402
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
TOLERANCE = 1e-4
FLOAT64_MAX_MB = 400
CALIBRATION_BATCH = 4


def randomize_batch_norm(model, rng):
    for layer in model._flatten_layers() if hasattr(model, "_flatten_layers") else model.layers:
        if isinstance(layer, L.BatchNormalization):
            c = layer.gamma.shape[0] if layer.gamma is not None else layer.moving_mean.shape[0]
            w = []
            if layer.gamma is not None:
                w.append(rng.uniform(0.5, 1.5, c).astype(np.float32))
            if layer.beta is not None:
                w.append(rng.uniform(-0.2, 0.2, c).astype(np.float32))
            w.append(rng.uniform(-0.2, 0.2, c).astype(np.float32))
            w.append(rng.uniform(0.5, 1.5, c).astype(np.float32))
            layer.set_weights(w)
        elif isinstance(layer, (L.GroupNormalization, L.LayerNormalization)):
            # gamma/beta away from 1/0 too, so a wrong affine part shows.
            ws = layer.get_weights()
            layer.set_weights([rng.uniform(0.5, 1.5, w.shape).astype(np.float32) if i == 0 else
                               rng.uniform(-0.2, 0.2, w.shape).astype(np.float32) for i, w in enumerate(ws)])


# ----------------------------------------------------------------------------------------------
# Keras applications


def app_names():
    apps = tf.keras.applications
    return sorted(n for n in dir(apps) if n[0].isupper() and callable(getattr(apps, n)))


MIN_SIZE = {"InceptionV3": 75, "InceptionResNetV2": 75, "Xception": 71}


def default_size(name):
    if name in ("InceptionV3", "InceptionResNetV2", "Xception"):
        return 299
    if name == "NASNetLarge":
        return 331
    sizes = {"EfficientNetB1": 240, "EfficientNetB2": 260, "EfficientNetB3": 300, "EfficientNetB4": 380,
             "EfficientNetB5": 456, "EfficientNetB6": 528, "EfficientNetB7": 600, "EfficientNetV2B1": 240,
             "EfficientNetV2B2": 260, "EfficientNetV2B3": 300, "EfficientNetV2S": 384, "EfficientNetV2M": 480,
             "EfficientNetV2L": 480}
    return sizes.get(name, 224)


def build_app(name, size=None, classes=1000):
    ctor = getattr(tf.keras.applications, name)
    # An explicit input shape: some constructors (MobileNetV3) default to (None, None, 3).
    size = size or default_size(name)
    kw = dict(weights=None, classes=classes, input_shape=(size, size, 3))
    try:
        return ctor(classifier_activation=None, **kw)
    except TypeError:
        return ctor(**kw)


@contextlib.contextmanager
def scaled_layers(module, width, dense_names=("fc1", "fc2"), only=None, keep=("Logits", "conv_preds", "predictions")):
    """Every Conv2D/SeparableConv2D `filters` (and the named hidden Dense units) times `width`,
    for the applications whose builders take no width: the module's `layers` swapped for a proxy."""
    real = module.layers

    def scale(n):
        return max(1, int(math.ceil(n * width)))

    def conv(cls):
        def make(filters, *a, **k):
            name = k.get("name")
            # Inception-ResNet's `up` convolutions take their width from their input: unscaled.
            up = name is not None and re.fullmatch(r"block(35|17|8)_\d+_conv", name)
            if name not in keep and not up and (only is None or name in only):
                filters = scale(filters)
            return cls(filters, *a, **k)
        return make

    def dense(units, *a, **k):
        if k.get("name") in dense_names:
            units = scale(units)
        return real.Dense(units, *a, **k)

    proxy = types.SimpleNamespace(**{n: getattr(real, n) for n in dir(real) if not n.startswith("__")})
    proxy.Conv2D = conv(real.Conv2D)
    proxy.SeparableConv2D = conv(real.SeparableConv2D)
    proxy.Dense = dense
    module.layers = proxy
    try:
        yield
    finally:
        module.layers = real


def reduced_app(family, size, width, classes=10):
    """A reduced build of each application family through keras' internal builders."""
    import keras.src.applications as A
    from keras.src.applications import (convnext, densenet, efficientnet, efficientnet_v2, inception_resnet_v2,
                                        inception_v3, mobilenet_v3, nasnet, resnet, vgg16, vgg19, xception)
    shape = (size, size, 3)
    common = dict(weights=None, input_shape=shape, classes=classes, classifier_activation=None)

    def ch(n):
        return max(8, int(round(n * width / 8)) * 8) if width < 1 else int(n * width)

    if family.startswith("ConvNeXt"):
        return convnext.ConvNeXt(depths=[1, 1, 2, 1], projection_dims=[ch(96), ch(192), ch(384), ch(768)],
                                 default_size=size, name="convnext_reduced", **common)
    if family.startswith("DenseNet"):
        with scaled_layers(densenet, width):
            return densenet.DenseNet([1, 2, 2, 1], name="densenet_reduced", **common)
    if family.startswith("EfficientNetV2"):
        return efficientnet_v2.EfficientNetV2(width_coefficient=width, depth_coefficient=min(width, 0.25),
                                              default_size=size, name="efficientnetv2-b0", **common)
    if family.startswith("EfficientNet"):
        return efficientnet.EfficientNet(width_coefficient=width, depth_coefficient=min(width, 0.25),
                                         default_size=size, name="efficientnet_reduced", **common)
    if family == "InceptionV3":
        with scaled_layers(inception_v3, width):
            return inception_v3.InceptionV3(**common)
    if family == "InceptionResNetV2":
        with scaled_layers(inception_resnet_v2, width):
            return inception_resnet_v2.InceptionResNetV2(**common)
    if family == "MobileNet":
        return tf.keras.applications.MobileNet(alpha=width, **common)
    if family == "MobileNetV2":
        from keras.src.applications import mobilenet_v2
        with scaled_layers(mobilenet_v2, width, only=("Conv_1",)):  # the fixed 1280-wide last 1x1
            return mobilenet_v2.MobileNetV2(alpha=width, **common)
    if family.startswith("MobileNetV3"):
        real = mobilenet_v3.MobileNetV3

        def reduced_top(stack_fn, last_point_ch, *a, **k):  # the fixed 1024/1280-wide last 1x1
            return real(stack_fn, max(8, int(last_point_ch * width)), *a, **k)
        mobilenet_v3.MobileNetV3 = reduced_top
        try:
            return getattr(mobilenet_v3, family)(alpha=width, **common)
        finally:
            mobilenet_v3.MobileNetV3 = real
    if family.startswith("NASNet"):
        pen = max(96, int(round(1056 * width / 96)) * 96)
        return nasnet.NASNet(penultimate_filters=pen, num_blocks=1, stem_block_filters=max(4, int(32 * width)),
                             skip_reduction=family == "NASNetLarge", default_size=size, name="nasnet_reduced",
                             **common)
    if family.startswith("ResNet"):
        v2 = family.endswith("V2")

        def stack_fn(x):
            st = resnet.stack_residual_blocks_v2 if v2 else resnet.stack_residual_blocks_v1
            x = st(x, 64, 2, stride1=1, name="conv2")
            return st(x, 128, 2, name="conv3")

        with scaled_layers(resnet, width):
            return resnet.ResNet(stack_fn, v2, True, name=family.lower() + "_reduced",
                                 **common)
    if family in ("VGG16", "VGG19"):
        mod = vgg16 if family == "VGG16" else vgg19
        with scaled_layers(mod, width):
            return getattr(mod, family)(**common)
    if family == "Xception":
        with scaled_layers(xception, width):
            return xception.Xception(**common)
    raise ValueError(f"no reduced builder for {family}")


# ----------------------------------------------------------------------------------------------
# Layer-kind models: name -> builder() returning (keras model, {input name: array generator})


def floats(*shape, lo=-1.0, hi=1.0):
    return lambda rng, b: rng.uniform(lo, hi, (b, *shape)).astype(np.float32)


def tokens(length, vocab, pad=True):
    def gen(rng, b):
        t = rng.integers(1, vocab, (b, length)).astype(np.int32)
        if pad:
            for i in range(b):
                t[i, length - 1 - i:] = 0  # trailing padding, a different length per row
        return t
    return gen


def seq(inputs, outputs):
    return keras.Model(inputs, outputs)


def one(shape, body, lo=-1.0, hi=1.0):
    x = keras.Input(shape, name="x")
    return keras.Model(x, body(x)), {"x": floats(*shape, lo=lo, hi=hi)}


def encoder_block(x, heads, dim, ff, approximate=False, causal=False, name=None):
    a = L.MultiHeadAttention(heads, dim // heads)(x, x, use_causal_mask=causal)
    x = L.LayerNormalization(epsilon=1e-6)(L.Add()([x, a]))
    f = L.Dense(ff, activation=lambda t: keras.activations.gelu(t, approximate=approximate))(x)
    f = L.Dense(dim)(f)
    return L.LayerNormalization(epsilon=1e-6)(L.Add()([x, f]))


class PositionEmbedding(L.Layer):
    def __init__(self, length, dim, **kw):
        super().__init__(**kw)
        self.pos = L.Embedding(length, dim)

    def call(self, x):
        n = keras.ops.shape(x)[1]
        return x + self.pos(keras.ops.arange(n))[None]


def token_model(length, vocab, dim, body, mask_zero=False):
    t = keras.Input((length,), dtype="int32", name="x")
    e = L.Embedding(vocab, dim, mask_zero=mask_zero)(t)
    return keras.Model(t, body(e)), {"x": tokens(length, vocab, pad=mask_zero)}


def decoder_model():
    tgt = keras.Input((6, 8), name="x0")
    mem = keras.Input((5, 8), name="x1")
    a = L.MultiHeadAttention(2, 4)(tgt, tgt, use_causal_mask=True)
    x = L.LayerNormalization()(L.Add()([tgt, a]))
    c = L.MultiHeadAttention(2, 4)(x, mem)
    x = L.LayerNormalization()(L.Add()([x, c]))
    f = L.Dense(16, activation=lambda t: keras.activations.gelu(t, approximate=True))(x)
    x = L.LayerNormalization()(L.Add()([x, L.Dense(8)(f)]))
    return keras.Model([tgt, mem], x), {"x0": floats(6, 8), "x1": floats(5, 8)}


def bert_model():
    t = keras.Input((8,), dtype="int32", name="x0")
    s = keras.Input((8,), dtype="int32", name="x1")
    e = L.Embedding(50, 16)(t) + L.Embedding(2, 16)(s)
    x = L.LayerNormalization()(PositionEmbedding(8, 16)(e))
    for _ in range(2):
        x = encoder_block(x, 2, 16, 32)
    pooled = L.Dense(16, activation="tanh")(x[:, 0])
    return keras.Model([t, s], [x, pooled]), {
        "x0": tokens(8, 50, pad=False), "x1": lambda rng, b: rng.integers(0, 2, (b, 8)).astype(np.int32)}


def gpt_model():
    t = keras.Input((8,), dtype="int32", name="x")
    x = PositionEmbedding(8, 16)(L.Embedding(50, 16)(t))
    for _ in range(2):
        h = L.LayerNormalization()(x)
        x = x + L.MultiHeadAttention(2, 8)(h, h, use_causal_mask=True)
        h = L.LayerNormalization()(x)
        x = x + L.Dense(16)(L.Dense(32, activation=lambda v: keras.activations.gelu(v, approximate=True))(h))
    return keras.Model(t, L.Dense(50)(L.LayerNormalization()(x))), {"x": tokens(8, 50, pad=False)}


def normalization_model():
    n = L.Normalization(mean=[0.5, -0.2, 1.0], variance=[2.0, 0.5, 1.5])
    return one((6, 6, 3), n)


LAYER_MODELS = {
    # recurrent
    "lstm": lambda: one((7, 4), L.LSTM(6)),
    "lstm_stacked": lambda: one((7, 4), lambda x: L.LSTM(5)(L.LSTM(6, return_sequences=True)(x))),
    "gru": lambda: one((7, 4), L.GRU(6)),
    "gru_reset_before": lambda: one((7, 4), L.GRU(6, reset_after=False, return_sequences=True)),
    "simple_rnn": lambda: one((7, 4), L.SimpleRNN(6, return_sequences=True)),
    "bidirectional": lambda: one((7, 4), lambda x: L.Bidirectional(L.GRU(3))(
        L.Bidirectional(L.LSTM(4, return_sequences=True))(x))),
    "embedding_mask_lstm": lambda: token_model(7, 20, 6, L.LSTM(5), mask_zero=True),
    # attention
    "mha": lambda: one((6, 8), lambda x: L.MultiHeadAttention(2, 4)(x, x)),
    "mha_causal": lambda: one((6, 8), lambda x: L.MultiHeadAttention(2, 4)(x, x, use_causal_mask=True)),
    "transformer_encoder": lambda: one((6, 8), lambda x: encoder_block(x, 2, 8, 16)),
    "transformer_decoder": decoder_model,
    "position_embedding": lambda: token_model(8, 30, 8, lambda e: L.Dense(4)(PositionEmbedding(8, 8)(e))),
    "bert_tiny": bert_model,
    "gpt_tiny": gpt_model,
    # convolution variants
    "conv1d": lambda: one((12, 3), lambda x: L.Conv1D(4, 3, strides=2, padding="same")(L.Conv1D(5, 3)(x))),
    "conv1d_dilated_causal": lambda: one((12, 3), L.Conv1D(4, 3, dilation_rate=2, padding="causal")),
    "conv3d": lambda: one((6, 6, 6, 2), lambda x: L.Conv3D(3, 2, strides=2)(L.Conv3D(4, 3, padding="same")(x))),
    "conv2d_transpose": lambda: one((5, 5, 3), lambda x: L.Conv2DTranspose(2, 3, padding="valid")(
        L.Conv2DTranspose(4, 3, strides=2, padding="same")(x))),
    "conv3d_transpose": lambda: one((4, 4, 4, 2), L.Conv3DTranspose(3, 3, strides=2, padding="same")),
    "separable_conv1d": lambda: one((12, 3), L.SeparableConv1D(4, 3, depth_multiplier=2, padding="same")),
    "separable_conv2d": lambda: one((8, 8, 3), L.SeparableConv2D(4, 3, depth_multiplier=2, strides=2)),
    "conv2d_dilated": lambda: one((10, 10, 3), L.Conv2D(4, 3, dilation_rate=2, padding="same")),
    "depthwise_dilated": lambda: one((10, 10, 3), L.DepthwiseConv2D(3, dilation_rate=2)),
    "conv2d_groups": lambda: one((8, 8, 4), L.Conv2D(6, 3, groups=2)),
    "upsampling2d_nearest": lambda: one((4, 4, 3), L.UpSampling2D(2, interpolation="nearest")),
    "upsampling2d_bilinear": lambda: one((4, 4, 3), L.UpSampling2D((2, 3), interpolation="bilinear")),
    "cropping_padding_1d": lambda: one((10, 3), lambda x: L.Cropping1D((1, 2))(L.ZeroPadding1D((2, 1))(x))),
    "cropping_padding_2d": lambda: one((6, 6, 3), lambda x: L.Cropping2D(((1, 0), (2, 1)))(
        L.ZeroPadding2D(((1, 2), (0, 1)))(x))),
    "cropping_padding_3d": lambda: one((5, 5, 5, 2), lambda x: L.Cropping3D(1)(L.ZeroPadding3D((1, 2, 0))(x))),
    "pooling_1d": lambda: one((12, 3), lambda x: L.Concatenate()([
        L.MaxPooling1D(2)(x), L.AveragePooling1D(2)(x), L.AveragePooling1D(3, 2, padding="same")(x)[:, :6]])),
    "pooling_3d": lambda: one((6, 6, 6, 2), lambda x: L.Concatenate()([
        L.MaxPooling3D(2)(x), L.AveragePooling3D(2)(x)])),
    "global_pooling": lambda: one((6, 6, 3), lambda x: L.Concatenate()([
        L.GlobalMaxPooling2D()(x), L.GlobalAveragePooling2D()(x), L.GlobalMaxPooling1D()(x[:, 0]),
        L.GlobalMaxPooling3D()(x[..., None])[:, :1]])),
    # normalization and preprocessing
    "group_norm": lambda: one((5, 5, 4), L.GroupNormalization(2)),
    "layer_norm": lambda: one((5, 6), L.LayerNormalization()),
    "unit_norm": lambda: one((5, 6), L.UnitNormalization()),
    "batch_norm_1d": lambda: one((8, 3), L.BatchNormalization()),
    "batch_norm_3d": lambda: one((4, 4, 4, 3), L.BatchNormalization()),
    "rescaling": lambda: one((4, 4, 3), L.Rescaling(1 / 127.5, offset=-1), lo=0, hi=255),
    "normalization": normalization_model,
    "center_crop": lambda: one((9, 8, 3), L.CenterCrop(5, 4)),
    **{f"resizing_{m}": (lambda m=m: lambda: one((7, 9, 3), L.Resizing(5, 12, interpolation=m)))()
       for m in ("bilinear", "nearest", "lanczos3", "lanczos5", "bicubic", "area")},
    "resizing_crop_to_aspect_ratio": lambda: one((7, 9, 3), L.Resizing(6, 4, crop_to_aspect_ratio=True)),
}

ACTIVATIONS = sorted(n for n in dir(tf.keras.activations)
                     if not n.startswith("_") and n not in ("get", "serialize", "deserialize"))
ACTIVATION_ARGS = {"threshold": dict(threshold=0.5, default_value=-1.0)}
for _act in ACTIVATIONS:
    LAYER_MODELS[f"activation_{_act}"] = (lambda a=_act: lambda: one((16,), L.Activation(
        lambda t: getattr(keras.activations, a)(t, **ACTIVATION_ARGS.get(a, {}))), lo=-3, hi=3))()


# ----------------------------------------------------------------------------------------------
# Detection post-processing: tf.functions in a tf.Module; each returns a dict (the SavedModel
# signature's output keys, in the frozen graph in sorted key order).


def boxes_gen(n):
    def gen(rng, _b):
        c = rng.uniform(0, 1, (n, 2))
        s = rng.uniform(0.05, 0.4, (n, 2))
        # a few near-duplicates so suppression happens
        c[n // 2:] = c[: n - n // 2] + rng.normal(0, 0.02, (n - n // 2, 2))
        return np.concatenate([c - s / 2, c + s / 2], 1).astype(np.float32)
    return gen


def detection_models():
    def nms_v5(boxes, scores):
        idx, sc, valid = tf.raw_ops.NonMaxSuppressionV5(
            boxes=boxes, scores=scores, max_output_size=10, iou_threshold=0.5, score_threshold=0.1,
            soft_nms_sigma=0.0, pad_to_max_output_size=True)
        return {"indices": idx, "scores": sc, "valid": valid}

    def nms_soft(boxes, scores):
        idx, sc = tf.image.non_max_suppression_with_scores(boxes, scores, 10, 0.5, 0.1, soft_nms_sigma=0.5)
        return {"indices": idx, "scores": sc}

    def nms_plain(boxes, scores):
        return {"indices": tf.image.non_max_suppression(boxes, scores, 8, 0.4)}

    def combined(boxes, scores):
        b, s, c, v = tf.image.combined_non_max_suppression(boxes, scores, 5, 8, 0.5, 0.1)
        return {"boxes": b, "scores": s, "classes": c, "valid": v}

    def crop_and_resize(image, boxes):
        ind = tf.range(tf.shape(boxes)[0]) % tf.shape(image)[0]
        return {"bilinear": tf.image.crop_and_resize(image, boxes, ind, [5, 4]),
                "nearest": tf.image.crop_and_resize(image, boxes, ind, [3, 3], method="nearest")}

    def top_k(x):
        v, i = tf.math.top_k(x, 4)
        return {"values": v, "indices": i}

    def where(x):
        return {"indices": tf.where(x > 0.3), "selected": tf.where(x > 0, x, -x)}

    def gather_scatter(x, idx):
        g = tf.gather_nd(x, idx)
        s = tf.scatter_nd(idx, g * 2.0, tf.shape(x, out_type=tf.int64))
        return {"gathered": g, "scattered": s, "updated": tf.tensor_scatter_nd_add(x, idx, g)}

    f32 = tf.float32

    def scores20(rng, _b):
        return rng.uniform(0, 1, 20).astype(np.float32)

    return {
        "nms_v5": (nms_v5, {"boxes": ([20, 4], f32, boxes_gen(20)), "scores": ([20], f32, scores20)}),
        "nms_soft": (nms_soft, {"boxes": ([20, 4], f32, boxes_gen(20)), "scores": ([20], f32, scores20)}),
        "nms_plain": (nms_plain, {"boxes": ([20, 4], f32, boxes_gen(20)), "scores": ([20], f32, scores20)}),
        "combined_nms": (combined, {
            "boxes": ([2, 12, 1, 4], f32, lambda rng, b: np.stack([boxes_gen(12)(rng, 1) for _ in range(2)])[:, :, None]),
            "scores": ([2, 12, 3], f32, lambda rng, b: rng.uniform(0, 1, (2, 12, 3)).astype(np.float32))}),
        "crop_and_resize": (crop_and_resize, {
            "image": ([2, 8, 9, 3], f32, lambda rng, b: rng.uniform(-1, 1, (2, 8, 9, 3)).astype(np.float32)),
            "boxes": ([5, 4], f32, lambda rng, b: rng.uniform(-0.1, 1.1, (5, 4)).astype(np.float32))}),
        "top_k": (top_k, {"x": ([3, 10], f32, lambda rng, b: rng.uniform(-1, 1, (3, 10)).astype(np.float32))}),
        "where": (where, {"x": ([4, 5], f32, lambda rng, b: rng.uniform(-1, 1, (4, 5)).astype(np.float32))}),
        "gather_scatter_nd": (gather_scatter, {
            "x": ([4, 5], f32, lambda rng, b: rng.uniform(-1, 1, (4, 5)).astype(np.float32)),
            "idx": ([3, 2], tf.int64, lambda rng, b: np.array([[0, 1], [3, 4], [2, 0]], np.int64))}),
    }


# ----------------------------------------------------------------------------------------------
# Writing


def signature_keys(sm_dir, sig="serving_default"):
    from tensorflow.core.protobuf import saved_model_pb2
    s = saved_model_pb2.SavedModel()
    with open(os.path.join(sm_dir, "saved_model.pb"), "rb") as f:
        s.ParseFromString(f.read())
    for mg in s.meta_graphs:
        if sig in mg.signature_def:
            d = mg.signature_def[sig]
            return sorted(d.inputs), sorted(d.outputs)
    raise ValueError(f"{sm_dir}: no signature {sig}")


def freeze_function(fn):
    frozen = convert_variables_to_constants_v2(fn)
    gd = frozen.graph.as_graph_def()
    ins = [t.name for t in frozen.inputs]
    outs = [t.name for t in frozen.outputs]
    return frozen, gd, ins, outs


def float64_outputs(gd, feeds, outs):
    """The frozen graph run by TensorFlow in float64 (every float32 type and constant made
    float64): the exact answer the float32 outputs approximate, to tell ferroflow's error from
    TensorFlow's own where a deep random-weight model amplifies rounding. None if an op has no
    float64 kernel."""
    from tensorflow.core.framework import types_pb2
    g64 = tf.compat.v1.GraphDef()
    g64.CopyFrom(gd)

    def widen(a):
        if a.HasField("type") and a.type == types_pb2.DT_FLOAT:
            a.type = types_pb2.DT_DOUBLE
        if a.HasField("list"):
            for i, t in enumerate(a.list.type):
                if t == types_pb2.DT_FLOAT:
                    a.list.type[i] = types_pb2.DT_DOUBLE
        if a.HasField("tensor") and a.tensor.dtype == types_pb2.DT_FLOAT:
            a.tensor.CopyFrom(tf.make_tensor_proto(tf.make_ndarray(a.tensor).astype(np.float64)))

    for n in g64.node:
        for k in n.attr:
            widen(n.attr[k])
    graph = tf.Graph()
    try:
        with graph.as_default():
            tf.import_graph_def(g64, name="")
        with tf.compat.v1.Session(graph=graph) as sess:
            fed = {k: v.astype(np.float64) if v.dtype == np.float32 else v for k, v in feeds.items()}
            return dict(zip(outs, sess.run(outs, fed)))
    except Exception as e:  # an op without a float64 kernel: no reference
        print(f"  (no float64 reference: {type(e).__name__}: {str(e).splitlines()[0][:120]})", flush=True)
        return None


def write(out_dir, name, gd, feeds, frozen_ins, frozen_outs, results, sig_in, sig_out, kind, batched,
          saved_model_writer=None, pb_only=False, reference64=None):
    """feeds: {frozen input name: array}; results: TF outputs in frozen output order;
    reference64: {frozen output name: the float64 graph's output}, stored as `<name>@float64`."""
    d = os.path.join(out_dir, name) if not pb_only else out_dir
    os.makedirs(d, exist_ok=True)
    pb = os.path.join(d, "frozen.pb" if not pb_only else f"{name}.pb")
    with open(pb, "wb") as f:
        f.write(gd.SerializeToString(deterministic=True))
    arrays = dict(feeds)
    for n, r in zip(frozen_outs, results):
        arrays[n] = np.asarray(r)
    for n, r in (reference64 or {}).items():
        arrays[f"{n}@float64"] = np.asarray(r)
    np.savez(os.path.join(d, "io.npz" if not pb_only else f"{name}.npz"), **arrays)
    meta = {"kind": kind, "inputs": frozen_ins, "outputs": frozen_outs, "tolerance": TOLERANCE,
            "batched": batched, "nodes": len(gd.node), "ops": sorted({n.op for n in gd.node})}
    if saved_model_writer is not None:
        sm = os.path.join(d, "saved_model")
        shutil.rmtree(sm, ignore_errors=True)
        saved_model_writer(sm)
        keys_in, keys_out = signature_keys(sm)
        meta["signature_inputs"] = {k: sig_in[k] for k in keys_in}
        meta["signature_outputs"] = {k: sig_out[k] for k in keys_out}
    if not pb_only:
        with open(os.path.join(d, "meta.json"), "w") as f:
            json.dump(meta, f, indent=1)
    size = os.path.getsize(pb)
    print(f"{name}: {len(gd.node)} nodes, {size / 1e6:.2f} MB, {len(meta['ops'])} op types", flush=True)
    return meta


def calibrate_batch_norm(model, data, rng):
    """Sets every BatchNormalization's moving statistics to its input's statistics on `data`
    (one call in training mode with momentum 0, as after training on such inputs), then moves
    them off by a little: random weights with random statistics make deep models (the
    EfficientNetV2 family) amplify rounding differences by 1e4, so that TensorFlow disagrees
    with itself (oneDNN on and off) by 1% of the output; calibrated, inference BN neither is an
    identity nor explodes."""
    bns = [layer for layer in (model._flatten_layers() if hasattr(model, "_flatten_layers") else model.layers)
           if isinstance(layer, L.BatchNormalization)]
    if not bns:
        return
    momenta = [b.momentum for b in bns]
    for b in bns:
        b.momentum = 0.0
    model(data if len(data) > 1 else data[0], training=True)
    for b, m in zip(bns, momenta):
        b.momentum = m
        mean, var = b.moving_mean.numpy(), b.moving_variance.numpy()
        # A channel's variance over a few values (batch 1-2 at a 1×1 or 2×2 map) can be near 0:
        # floored at a quarter of the layer's mean, no channel's gain explodes.
        var = np.maximum(var, 0.25 * float(np.mean(var)) + 1e-6)
        std = np.sqrt(var)
        b.moving_mean.assign((mean + 0.1 * std * rng.standard_normal(mean.shape)).astype(np.float32))
        b.moving_variance.assign((var * rng.uniform(0.8, 1.25, var.shape)).astype(np.float32))


def write_keras(out_dir, name, model, gens, rng, batch, kind, pb_only=False):
    randomize_batch_norm(model, rng)
    names = [t.name.split(":")[0] for t in model.inputs]
    data = [gens[n](rng, batch) for n in names]
    if kind == "app":
        # Statistics from other inputs drawn like these (a model's statistics come from its
        # training data, not from the input it is checked on), 4 of them: calibrated on the one
        # input it is run on, deep EfficientNets amplified rounding by 500-900x (outputs to 5e4)
        # against 3-15x with 4 other inputs.
        calibration = [gens[n](rng, CALIBRATION_BATCH) for n in names]
        calibrate_batch_norm(model, [tf.constant(a) for a in calibration], rng)
    # Input layers are named x / x0, x1...: the frozen graph's placeholders take those names.
    specs = [tf.TensorSpec([None, *t.shape[1:]], t.dtype, name=n) for t, n in zip(model.inputs, names)]

    if len(specs) == 1:
        @tf.function(input_signature=specs)
        def serve(x):
            return model(x, training=False)
    else:
        @tf.function(input_signature=specs)
        def serve(*xs):
            return model(list(xs), training=False)

    frozen, gd, frozen_ins, frozen_outs = freeze_function(serve.get_concrete_function())
    big = gd.ByteSize() > FLOAT64_MAX_MB * 1e6
    if big:
        # The frozen function of a graph this large (ConvNeXtXLarge: 1.4 GB of constants)
        # took TensorFlow past 24 GB when called (its graph optimizer copies the constants):
        # TensorFlow's outputs come from the same serving function on the variables instead.
        del frozen
        gc.collect()
        res = serve(*[tf.constant(a) for a in data])
    else:
        res = frozen(*[tf.constant(a) for a in data])
    res = [r.numpy() for r in (res if isinstance(res, (list, tuple)) else [res])]
    feeds = dict(zip(frozen_ins, data))
    sig_in = dict(zip(names, frozen_ins))
    sig_out = {f"output_{i}": n for i, n in enumerate(frozen_outs)}
    writer = None if pb_only else (lambda path: model.export(path, verbose=False))
    # The float64 copy of a graph over FLOAT64_MAX_MB of constants (VGG, the large ConvNeXts)
    # took TensorFlow past 24 GB: those have no reference (none was needed: they are shallow or
    # well conditioned).
    if kind == "app" and big:
        print(f"  (no float64 reference: the graph is over {FLOAT64_MAX_MB} MB)", flush=True)
    reference64 = float64_outputs(gd, feeds, frozen_outs) if kind == "app" and not big else None
    return write(out_dir, name, gd, feeds, frozen_ins, frozen_outs, res, sig_in, sig_out, kind, True, writer,
                 pb_only, reference64)


def write_function(out_dir, name, fn, inputs, rng, pb_only=False):
    specs = [tf.TensorSpec(shape, dt, name=n) for n, (shape, dt, _) in inputs.items()]
    module = tf.Module()
    module.f = tf.function(fn, input_signature=specs)
    conc = module.f.get_concrete_function()
    frozen, gd, frozen_ins, frozen_outs = freeze_function(conc)
    data = [gen(rng, 1) for (_, _, gen) in inputs.values()]
    res = conc(*[tf.constant(a) for a in data])
    keys = sorted(res)
    res = [res[k].numpy() for k in keys]
    feeds = dict(zip(frozen_ins, data))
    sig_in = dict(zip(inputs, frozen_ins))
    sig_out = dict(zip(keys, frozen_outs))
    writer = None if pb_only else (
        lambda path: tf.saved_model.save(module, path, signatures={"serving_default": conc}))
    return write(out_dir, name, gd, feeds, frozen_ins, frozen_outs, res, sig_in, sig_out, "detection", False,
                 writer, pb_only)


def free_gb(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize / 1e9


# The subset's reduced applications: (family, input size, width)
SUBSET_APPS = [("ConvNeXtTiny", 32, 0.05), ("DenseNet121", 32, 0.25), ("EfficientNetB0", 32, 0.1),
               ("EfficientNetV2B0", 32, 0.1), ("InceptionV3", 75, 0.03125),
               ("MobileNet", 32, 0.125), ("MobileNetV2", 32, 0.1), ("MobileNetV3Small", 32, 0.125),
               ("NASNetMobile", 32, 0.05), ("ResNet50", 32, 0.125),
               ("ResNet50V2", 32, 0.125), ("VGG16", 32, 0.03125), ("Xception", 71, 0.03125)]


# Parameter counts (millions, Keras' table), to write and check the small applications first.
APP_PARAMS = {"MobileNetV3Small": 2.5, "MobileNetV3Large": 5.4, "MobileNet": 4.3, "MobileNetV2": 3.5,
              "EfficientNetB0": 5.3, "EfficientNetV2B0": 7.2, "NASNetMobile": 5.3, "EfficientNetB1": 7.9,
              "EfficientNetV2B1": 8.2, "EfficientNetB2": 9.2, "EfficientNetV2B2": 10.2, "EfficientNetB3": 12.3,
              "EfficientNetV2B3": 14.5, "DenseNet121": 8.1, "DenseNet169": 14.3, "EfficientNetB4": 19.5,
              "DenseNet201": 20.2, "EfficientNetV2S": 21.6, "Xception": 22.9, "InceptionV3": 23.9,
              "ResNet50": 25.6, "ResNet50V2": 25.6, "ConvNeXtTiny": 28.6, "EfficientNetB5": 30.6,
              "EfficientNetB6": 43.3, "ResNet101": 44.7, "ResNet101V2": 44.7, "ConvNeXtSmall": 50.2,
              "InceptionResNetV2": 55.9, "ResNet152": 60.4, "ResNet152V2": 60.4, "EfficientNetB7": 66.7,
              "EfficientNetV2M": 54.4, "NASNetLarge": 88.9, "ConvNeXtBase": 88.5, "EfficientNetV2L": 119.0,
              "VGG16": 138.4, "VGG19": 143.7, "ConvNeXtLarge": 197.7, "ConvNeXtXLarge": 350.1}


def all_models(args):
    """name -> (kind, thunk writing the model): the layer models first, then the applications
    from the smallest."""
    out = {}
    for n, b in LAYER_MODELS.items():
        out[n] = ("layer", b)
    for n, b in detection_models().items():
        out[n] = ("detection", b)
    for app in sorted(app_names(), key=lambda a: (APP_PARAMS.get(a, 1e9), a)):
        if args.width is not None:
            size = args.size_for(app)
            out[f"{app}_w{args.width:g}"] = ("app", lambda app=app, size=size: reduced_app(app, size, args.width))
        elif args.scale is not None:
            out[f"{app}_s{args.scale:g}"] = ("app", lambda app=app: build_app(app, args.size_for(app)))
        else:
            out[app] = ("app", lambda app=app: build_app(app))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=os.path.join(ROOT, "target", "zoo"))
    p.add_argument("--only", nargs="+")
    p.add_argument("--list", action="store_true")
    p.add_argument("--seed", type=int, default=43)
    p.add_argument("--scale", type=float)
    p.add_argument("--width", type=float)
    p.add_argument("--subset", action="store_true")
    p.add_argument("--min-free-gb", type=float, default=15.0)
    args = p.parse_args()

    def size_for(app):
        s = default_size(app) * (args.scale or 1.0)
        return max(MIN_SIZE.get(app, 32), int(round(s / 32)) * 32)
    args.size_for = size_for

    if args.subset:
        out_dir = os.path.join(ROOT, "fixtures", "zoo")
        os.makedirs(out_dir, exist_ok=True)
        models = {f"app_{f.lower()}": ("app", (f, s, w)) for f, s, w in SUBSET_APPS}
        for n, b in LAYER_MODELS.items():
            models[n] = ("layer", b)
        for n, b in detection_models().items():
            models[n] = ("detection", b)
    else:
        out_dir = args.out
        models = all_models(args)
    if args.list:
        print("\n".join(models))
        return
    if args.only:
        unknown = [n for n in args.only if n not in models]
        if unknown:
            sys.exit(f"unknown model(s): {unknown}; --list shows the names")
        models = {n: models[n] for n in args.only}
    os.makedirs(out_dir, exist_ok=True)
    index = {}
    for i, (name, (kind, b)) in enumerate(models.items()):
        if not args.subset and free_gb(out_dir) < args.min_free_gb:
            print(f"{name}: SKIPPED, {free_gb(out_dir):.1f} GB free (< {args.min_free_gb})", flush=True)
            continue
        seed = args.seed * 1000 + zlib.crc32(name.encode()) % 1000  # independent of --only
        keras.utils.set_random_seed(seed)
        rng = np.random.default_rng(seed)
        try:
            if kind == "detection":
                fn, inputs = b
                meta = write_function(out_dir, name, fn, inputs, rng, pb_only=args.subset)
            elif kind == "app":
                if args.subset:
                    f, s, w = b
                    model, batch = reduced_app(f, s, w), 2
                    gens = {model.inputs[0].name.split(":")[0]: floats(s, s, 3)}
                else:
                    model, batch = b(), 1
                    gens = {model.inputs[0].name.split(":")[0]: floats(*model.inputs[0].shape[1:])}
                model = rename_input(model)
                gens = {"x": next(iter(gens.values()))}
                meta = write_keras(out_dir, name, model, gens, rng, batch, kind, pb_only=args.subset)
            else:
                model, gens = b()
                meta = write_keras(out_dir, name, model, gens, rng, 2, kind, pb_only=args.subset)
            index[name] = {k: meta[k] for k in ("kind", "inputs", "outputs", "batched", "nodes")}
        except Exception as e:  # one model failing does not stop the zoo
            print(f"{name}: FAILED to build/export: {type(e).__name__}: {str(e)[:300]}", flush=True)
        keras.backend.clear_session()
    if args.subset:
        total = sum(os.path.getsize(os.path.join(out_dir, f)) for f in os.listdir(out_dir))
        print(f"subset: {len(index)} models, {total / 1e6:.2f} MB")


def rename_input(model):
    """Applications name their input `input_layer...`: wrap so the input (and the frozen graph's
    placeholder and the SavedModel's key) is `x`."""
    if model.inputs[0].name.split(":")[0] == "x":
        return model
    x = keras.Input(model.inputs[0].shape[1:], name="x")
    return keras.Model(x, model(x))


if __name__ == "__main__":
    main()
