#!/usr/bin/env python3
"""Tiny Keras models per layer kind trained for 5 steps by Keras, for
`cargo test -p ferroflow --test layer_training` (issue 43, training coverage).

For each model, fixtures/training/<name>.pb is the frozen graph of Keras's training loss as
a function of the batch and the trainable weights:

    loss = MeanSquaredError()(y, model.stateless_call(w, non_trainable, x, training=True))

with placeholders `x`, `y`, `w0`, `w1`, ... (the trainable weights in
`model.trainable_variables` order) and the loss as output `loss`. Recurrent layers stay
functional `While` loops (lower_control_flow=False), as Keras exports them.

fixtures/training/<name>.npz holds the initial weights w0.., the five batches x0..x4 /
y0..y4, the learning rate `lr`, Keras's losses `losses` from `model.train_on_batch` with
`SGD(lr)` (no XLA), and TensorFlow's gradients at the initial weights on batch 0 (`g0`,
`g1`, ...).

`control_flow` is a loss written with tf.function control flow instead of Keras layers
(`tf.cond` on the batch, a `tf.while_loop` nested in another, both carrying weights), its
`losses` from 5 steps of SGD with `tf.GradientTape`.

Run:  .venv/bin/python scripts/make_training_fixtures.py [--only NAME...]
"""
import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402
from keras import layers as L  # noqa: E402
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "fixtures", "training")
BATCH, STEPS, LR = 3, 5, 0.05


def seq(shape, *layers):
    return keras.Sequential([L.Input(shape), *layers])


def masked_lstm_model():
    x = keras.Input((5,), dtype="int32")
    h = L.Embedding(10, 3, mask_zero=True)(x)
    return keras.Model(x, L.Dense(2)(L.LSTM(4)(h)))


def mha_model():
    x = keras.Input((4, 6))
    y = L.MultiHeadAttention(num_heads=2, key_dim=3)(x, x)
    return keras.Model(x, y)


def mha_causal_model():
    x = keras.Input((4, 6))
    y = L.MultiHeadAttention(num_heads=2, key_dim=3)(x, x, use_causal_mask=True)
    return keras.Model(x, L.Dense(2)(L.Flatten()(y)))


def models():
    yield "lstm", lambda: seq((4, 3), L.LSTM(5), L.Dense(2))
    yield "lstm_sequences", lambda: seq((4, 3), L.LSTM(4, return_sequences=True), L.LSTM(3), L.Dense(2))
    yield "gru", lambda: seq((4, 3), L.GRU(5), L.Dense(2))
    yield "gru_reset_before", lambda: seq((4, 3), L.GRU(4, reset_after=False, go_backwards=True), L.Dense(2))
    yield "simple_rnn", lambda: seq((4, 3), L.SimpleRNN(4), L.Dense(2))
    yield "bidirectional", lambda: seq((4, 3), L.Bidirectional(L.LSTM(3)), L.Dense(2))
    yield "mha", lambda: mha_model()
    yield "mha_causal", lambda: mha_causal_model()
    yield "layer_norm", lambda: seq((6,), L.Dense(6), L.LayerNormalization(), L.Dense(2))
    yield "group_norm", lambda: seq((5, 5, 2), L.Conv2D(4, 3), L.GroupNormalization(groups=2), L.GlobalAveragePooling2D(), L.Dense(2))
    yield "conv1d", lambda: seq((8, 3), L.Conv1D(4, 3, activation="tanh"), L.Conv1D(2, 2, dilation_rate=2), L.Flatten(), L.Dense(2))
    yield "conv3d", lambda: seq((4, 4, 4, 2), L.Conv3D(3, 2, activation="tanh"), L.Flatten(), L.Dense(2))
    yield "conv2d_transpose", lambda: seq((4, 4, 2), L.Conv2DTranspose(3, 3, strides=2, padding="same", activation="tanh"),
                                  L.Conv2DTranspose(2, 2), L.Flatten(), L.Dense(2))
    yield "conv3d_transpose", lambda: seq((3, 3, 3, 2), L.Conv3DTranspose(2, 2, strides=2, activation="tanh"),
                                  L.Flatten(), L.Dense(2))
    yield "masked_lstm", lambda: masked_lstm_model()


def control_flow_loss():
    """A loss written with tf.function control flow: `tf.cond` on the batch (both branches
    taken across the batches), a `tf.while_loop` nested in another, both carrying weights."""
    w_shapes = [(4, 5), (5,), (5, 2)]

    @tf.function
    def loss_fn(x, y, w0, w1, w2):
        h = tf.matmul(x, w0)
        h = tf.cond(tf.reduce_sum(x) > 0, lambda: tf.tanh(h) * w1, lambda: tf.sigmoid(h) + w1)

        def outer(i, a):
            def inner(j, b):
                return j + 1, b * 0.9 + tf.sin(b) * w1

            _, a = tf.while_loop(lambda j, b: j < 2, inner, [0, a])
            return i + 1, a

        _, h = tf.while_loop(lambda i, a: i < 3, outer, [0, h])
        return tf.identity(tf.reduce_mean(tf.square(tf.matmul(h, w2) - y)), name="loss")

    return loss_fn, w_shapes, (BATCH, 4), (BATCH, 2)


def export_custom(name, make, rng):
    loss_fn, w_shapes, in_shape, out_shape = make()
    specs = [tf.TensorSpec(in_shape, tf.float32, name="x"), tf.TensorSpec(out_shape, tf.float32, name="y")]
    specs += [tf.TensorSpec(s, tf.float32, name=f"w{i}") for i, s in enumerate(w_shapes)]
    w0 = [rng.normal(scale=0.5, size=s).astype(np.float32) for s in w_shapes]
    xs = [rng.normal(size=in_shape).astype(np.float32) for _ in range(STEPS)]
    ys = [rng.normal(size=out_shape).astype(np.float32) for _ in range(STEPS)]
    write_graph(name, loss_fn.get_concrete_function(*specs))
    data = {"lr": np.float32(LR)}
    ws = [tf.Variable(w) for w in w0]
    losses = []
    for k in range(STEPS):
        with tf.GradientTape() as tape:
            loss = loss_fn(tf.constant(xs[k]), tf.constant(ys[k]), *ws)
        grads = tape.gradient(loss, ws)
        if k == 0:
            for i, g in enumerate(grads):
                data[f"g{i}"] = g.numpy()
        for w, g in zip(ws, grads):
            w.assign_sub(LR * g)
        losses.append(float(loss))
    for i, w in enumerate(w0):
        data[f"w{i}"] = w
    for k in range(STEPS):
        data[f"x{k}"], data[f"y{k}"] = xs[k], ys[k]
    data["losses"] = np.array(losses, np.float32)
    np.savez(os.path.join(OUT, name + ".npz"), **data)
    print(f"{name}: {len(w0)} weights, TensorFlow SGD losses {[round(v, 6) for v in losses]}")


def write_graph(name, cf):
    frozen = convert_variables_to_constants_v2(cf, lower_control_flow=False)
    gd = frozen.graph.as_graph_def()
    # The output is `Identity` after the `loss` node; name it `loss` for the test.
    out_name = frozen.outputs[0].name.split(":")[0]
    for n in gd.node:
        if n.name == "loss":
            n.name = "loss_value"
            for m in gd.node:
                m.input[:] = ["loss_value" + i[4:] if i == "loss" or i.startswith("loss:") else i for i in m.input]
    for n in gd.node:
        if n.name == out_name:
            n.name = "loss"
    with open(os.path.join(OUT, name + ".pb"), "wb") as f:
        f.write(gd.SerializeToString())


CUSTOM = {"control_flow": control_flow_loss}


def export(name, model, rng):
    tv = model.trainable_variables
    ntv = [v.value for v in model.non_trainable_variables]
    in_shape = (BATCH,) + tuple(model.inputs[0].shape[1:])
    out_shape = (BATCH,) + tuple(model.outputs[0].shape[1:])
    mse = keras.losses.MeanSquaredError()

    @tf.function
    def loss_fn(x, y, *w):
        out, _ = model.stateless_call(list(w), ntv, x, training=True)
        return tf.identity(mse(y, out), name="loss")

    in_dtype = tf.as_dtype(model.inputs[0].dtype)
    specs = [tf.TensorSpec(in_shape, in_dtype, name="x"), tf.TensorSpec(out_shape, tf.float32, name="y")]
    specs += [tf.TensorSpec(v.shape, tf.float32, name=f"w{i}") for i, v in enumerate(tv)]
    write_graph(name, loss_fn.get_concrete_function(*specs))

    data = {"lr": np.float32(LR)}
    w0 = [v.numpy() for v in tv]
    for i, w in enumerate(w0):
        data[f"w{i}"] = w
    if in_dtype.is_integer:
        # Token ids with padding (0, masked) at the ends of some sequences.
        xs = [rng.integers(1, 10, size=in_shape).astype(np.int32) for _ in range(STEPS)]
        for x in xs:
            x[0, 3:] = 0
            x[1, 4:] = 0
    else:
        xs = [rng.normal(size=in_shape).astype(np.float32) for _ in range(STEPS)]
    ys = [rng.normal(size=out_shape).astype(np.float32) for _ in range(STEPS)]
    for k in range(STEPS):
        data[f"x{k}"], data[f"y{k}"] = xs[k], ys[k]
    with tf.GradientTape() as tape:
        ws = [tf.constant(w) for w in w0]
        tape.watch(ws)
        loss = loss_fn(tf.constant(xs[0]), tf.constant(ys[0]), *ws)
    for i, g in enumerate(tape.gradient(loss, ws)):
        data[f"g{i}"] = np.zeros_like(w0[i]) if g is None else tf.convert_to_tensor(g).numpy()
    model.compile(optimizer=keras.optimizers.SGD(LR), loss="mse", jit_compile=False)
    losses = [float(model.train_on_batch(xs[k], ys[k])) for k in range(STEPS)]
    data["losses"] = np.array(losses, np.float32)
    np.savez(os.path.join(OUT, name + ".npz"), **data)
    print(f"{name}: {len(tv)} weights, loss0 {float(loss):.6f}, keras losses {[round(v, 6) for v in losses]}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", nargs="+")
    args = p.parse_args()
    os.makedirs(OUT, exist_ok=True)
    for k, (name, make) in enumerate(models()):
        if args.only and name not in args.only:
            continue
        keras.utils.set_random_seed(100 + k)
        export(name, make(), np.random.default_rng(200 + k))
    for k, (name, make) in enumerate(CUSTOM.items()):
        if args.only and name not in args.only:
            continue
        tf.random.set_seed(300 + k)
        export_custom(name, make, np.random.default_rng(300 + k))


if __name__ == "__main__":
    main()
