#!/usr/bin/env python3
"""Keras attention/transformer models, every Keras activation, and Keras' normalization and
preprocessing layers, frozen to GraphDefs by TensorFlow, for
`cargo test -p ferroflow --test attention` (issue 43).

Each model is built by Keras 3 (`tf.keras`, seeded random weights; BatchNormalization's moving
statistics set away from 0/1), wrapped in a `tf.function` and frozen with
`convert_variables_to_constants_v2`. Each graph's input is `x:0` (float32, or int32 token ids);
its outputs are the Identity nodes TensorFlow adds, renamed to the output's name. For each
model `fixtures/attention/<name>.pb` is the graph and `<name>.npz` holds `x` and TensorFlow's
value of every output, keyed by the output's node name.

  activations    every activation in tf.keras.activations (+ tf.nn.gelu exact/tanh)
  mha            MultiHeadAttention (self-attention), no mask
  mha_causal     MultiHeadAttention with use_causal_mask=True (MatrixBandPart)
  encoder_block  MHA + residual + LayerNormalization + Dense(gelu) + Dense + residual + LN
  decoder_block  the same with a causal mask and tanh-approximate GELU
  embedding      Embedding + learned positional Embedding on int32 token ids
  bert           token + position embeddings, 2 encoder blocks, tanh-pooled first token
  gpt            token + position embeddings, 2 pre-LN causal blocks, logits over the vocab
  norm_1d        Group/Unit/Layer/RMS/BatchNormalization, Rescaling, Normalization on (N,T,C)
  norm_3d        BatchNormalization, GroupNormalization, LayerNormalization on (N,D,H,W,C)
  crop           CenterCrop on (N,H,W,C)

Run:  .venv/bin/python scripts/make_attention_fixtures.py
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2  # noqa: E402

from make_model_fixtures import randomize_batch_norm  # noqa: E402  (scripts/ is on sys.path)

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "fixtures", "attention")
K = tf.keras
L = K.layers
VOCAB, SEQ, WIDTH, HEADS = 24, 6, 16, 2




def freeze(name, model, x, outputs):
    """Freezes `model` (outputs a dict keyed by `outputs`' names) and writes its fixture."""
    spec = tf.TensorSpec([None, *x.shape[1:]], tf.as_dtype(x.dtype), name="x")

    @tf.function(input_signature=[spec])
    def serve(t):
        y = model(t, training=False)
        y = y if isinstance(y, (list, tuple)) else [y]
        return list(y)

    frozen = convert_variables_to_constants_v2(serve.get_concrete_function())
    gd = frozen.graph.as_graph_def()
    renames = {t.name.split(":")[0]: out for t, out in zip(frozen.outputs, outputs)}
    for n in gd.node:
        if n.name in renames:
            n.name = renames[n.name]
    with open(os.path.join(OUT, f"{name}.pb"), "wb") as f:
        f.write(gd.SerializeToString(deterministic=True))
    ys = frozen(tf.constant(x))
    ys = ys if isinstance(ys, (list, tuple)) else [ys]
    arrays = {"x": x}
    arrays.update({out: y.numpy() for out, y in zip(outputs, ys)})
    np.savez(os.path.join(OUT, f"{name}.npz"), **arrays)
    ops = sorted({n.op for n in gd.node})
    print(f"{name}: {len(gd.node)} nodes, {os.path.getsize(os.path.join(OUT, f'{name}.pb'))} bytes, ops {ops}")


def activations(rng):
    acts = K.activations
    fns = {
        "celu": acts.celu, "elu": acts.elu, "exponential": acts.exponential, "gelu": acts.gelu,
        "gelu_tanh": lambda t: acts.gelu(t, approximate=True), "glu": acts.glu,
        "hard_shrink": acts.hard_shrink, "hard_sigmoid": acts.hard_sigmoid, "hard_silu": acts.hard_silu,
        "hard_swish": acts.hard_swish, "hard_tanh": acts.hard_tanh, "leaky_relu": acts.leaky_relu,
        "linear": acts.linear, "log_sigmoid": acts.log_sigmoid, "log_softmax": acts.log_softmax,
        "mish": acts.mish, "relu": acts.relu, "relu6": acts.relu6, "selu": acts.selu,
        "sigmoid": acts.sigmoid, "silu": acts.silu, "soft_shrink": acts.soft_shrink,
        "softmax": acts.softmax, "softplus": acts.softplus, "softsign": acts.softsign,
        "sparse_plus": acts.sparse_plus, "sparse_sigmoid": acts.sparse_sigmoid,
        "sparsemax": acts.sparsemax, "squareplus": acts.squareplus, "swish": acts.swish,
        "tanh": acts.tanh, "tanh_shrink": acts.tanh_shrink,
        "threshold": lambda t: acts.threshold(t, 0.25, -1.5),
        "tf_gelu": lambda t: tf.nn.gelu(t), "tf_gelu_tanh": lambda t: tf.nn.gelu(t, approximate=True),
    }
    listed = {a for a in dir(acts) if not a.startswith("_")} - {"get", "serialize", "deserialize"}
    missing = listed - set(fns)
    assert not missing, f"activations not covered: {sorted(missing)}"
    i = K.Input((8,))
    outs = [L.Lambda(f, output_shape=(4,) if name == "glu" else (8,))(i) for name, f in fns.items()]
    x = rng.uniform(-4, 4, (3, 8)).astype(np.float32)
    x[0, :4] = [0.0, 0.25, -0.5, 1.0]  # thresholds and kinks
    freeze("activations", K.Model(i, outs), x, [f"act_{n}" for n in fns])


def block(x, causal, approximate, pre_ln=False):
    mha = L.MultiHeadAttention(HEADS, WIDTH // HEADS)
    ffn1 = L.Dense(2 * WIDTH, activation=lambda t: K.activations.gelu(t, approximate=approximate))
    ffn2 = L.Dense(WIDTH)
    if pre_ln:
        h = L.LayerNormalization(epsilon=1e-5)(x)
        x = x + mha(h, h, use_causal_mask=causal)
        h = L.LayerNormalization(epsilon=1e-5)(x)
        return x + ffn2(ffn1(h))
    x = L.LayerNormalization()(x + mha(x, x, use_causal_mask=causal))
    return L.LayerNormalization()(x + ffn2(ffn1(x)))


class PositionEmbedding(L.Layer):
    """Learned positional embedding added to the token embedding."""

    def __init__(self, length, width, **kw):
        super().__init__(**kw)
        self.pos = L.Embedding(length, width)

    def call(self, h):
        return h + self.pos(tf.range(tf.shape(h)[1]))


def embed(i):
    return PositionEmbedding(SEQ, WIDTH)(L.Embedding(VOCAB, WIDTH)(i))


def attention_models(rng):
    x = rng.normal(size=(2, SEQ, WIDTH)).astype(np.float32)
    tokens = rng.integers(0, VOCAB, (2, SEQ)).astype(np.int32)
    for name, causal in [("mha", False), ("mha_causal", True)]:
        i = K.Input((SEQ, WIDTH))
        freeze(name, K.Model(i, L.MultiHeadAttention(HEADS, 4)(i, i, use_causal_mask=causal)), x, ["y"])
    i = K.Input((SEQ, WIDTH))
    freeze("encoder_block", K.Model(i, block(i, False, False)), x, ["y"])
    i = K.Input((SEQ, WIDTH))
    freeze("decoder_block", K.Model(i, block(i, True, True)), x, ["y"])
    i = K.Input((SEQ,), dtype="int32")
    freeze("embedding", K.Model(i, embed(i)), tokens, ["y"])
    i = K.Input((SEQ,), dtype="int32")
    h = L.LayerNormalization()(embed(i))
    for _ in range(2):
        h = block(h, False, False)
    pooled = L.Dense(WIDTH, activation="tanh")(h[:, 0])
    freeze("bert", K.Model(i, [h, pooled]), tokens, ["sequence", "pooled"])
    i = K.Input((SEQ,), dtype="int32")
    h = embed(i)
    for _ in range(2):
        h = block(h, True, True, pre_ln=True)
    logits = L.Dense(VOCAB)(L.LayerNormalization(epsilon=1e-5)(h))
    freeze("gpt", K.Model(i, logits), tokens, ["logits"])


def norm_models(rng):
    x = rng.normal(0.5, 2.0, (2, 5, 8)).astype(np.float32)
    i = K.Input((5, 8))
    norm = L.Normalization(axis=-1)
    norm.adapt(rng.normal(1.0, 3.0, (16, 5, 8)).astype(np.float32))
    outs = [
        L.GroupNormalization(groups=4)(i), L.GroupNormalization(groups=1)(i), L.UnitNormalization()(i),
        L.LayerNormalization()(i), L.RMSNormalization()(i),
        L.BatchNormalization()(i), L.Rescaling(1 / 255.0, offset=-0.5)(i), norm(i),
    ]
    model = K.Model(i, outs)
    randomize_batch_norm(model, rng)
    names = ["group4", "group1", "unit", "layer", "rms", "batch", "rescaling", "normalization"]
    freeze("norm_1d", model, x, names)
    x = rng.normal(0.5, 2.0, (2, 3, 4, 4, 6)).astype(np.float32)
    i = K.Input((3, 4, 4, 6))
    model = K.Model(i, [L.BatchNormalization()(i), L.GroupNormalization(groups=3)(i), L.LayerNormalization()(i)])
    randomize_batch_norm(model, rng)
    freeze("norm_3d", model, x, ["batch", "group3", "layer"])
    x = rng.uniform(0, 255, (2, 7, 6, 3)).astype(np.float32)
    i = K.Input((7, 6, 3))
    freeze("crop", K.Model(i, [L.CenterCrop(4, 3)(i), L.CenterCrop(9, 8)(i)]), x, ["crop_4x3", "crop_9x8"])


def main():
    os.makedirs(OUT, exist_ok=True)
    tf.keras.utils.set_random_seed(43)
    rng = np.random.default_rng(43)
    activations(rng)
    attention_models(rng)
    norm_models(rng)


if __name__ == "__main__":
    main()
