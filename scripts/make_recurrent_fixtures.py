#!/usr/bin/env python3
"""Keras recurrent layers (LSTM, GRU, SimpleRNN, Bidirectional, stacked, masked, backwards,
returning states) frozen to GraphDefs and exported as SavedModels, for
`cargo test -p ferroflow --test recurrent` (issue 43).

Each model is small (batch 2, 5 steps, 3 features, 4 units) with Keras's seeded initial
weights. It is frozen with `convert_variables_to_constants_v2` twice:

  fixtures/recurrent/<name>_while.pb  functional `While` (lower_control_flow=False), bodies in
                                      the graph's function library
  fixtures/recurrent/<name>.pb        lowered control flow (TF1 Enter/Exit/NextIteration
                                      loops), for the LSTM, GRU and SimpleRNN
  fixtures/recurrent/<name>.npz       x and TensorFlow's outputs y0, y1, ... (the graphs'
                                      outputs are renamed y0, y1, ...)

and, for the LSTM, exported with `model.export(dir)` (the serving signature):

  fixtures/recurrent/<name>_saved/    SavedModel; output_0 in the .npz as y0

The list ops Keras's loops do not use (EmptyTensorList, PushBack, PopBack, Length,
ElementShape) are in one small graph of their own:

  fixtures/recurrent/list_ops.pb, list_ops.npz

Run:  .venv/bin/python scripts/make_recurrent_fixtures.py [--list-ops-only]
"""
import os
import shutil
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "fixtures", "recurrent")
L = tf.keras.layers
STEPS, FEATURES, UNITS = 5, 3, 4
# The models also frozen with lowered control flow (the rest only as functional `While`s, to
# keep the fixtures small: the lowering is the same for every loop).
LOWERED = {"lstm", "gru", "simple_rnn"}


def seq(*layers):
    return tf.keras.Sequential([L.Input((STEPS, FEATURES)), *layers])


def models():
    yield "lstm", seq(L.LSTM(UNITS)), True
    yield "gru", seq(L.GRU(UNITS)), False
    yield "gru_reset_before", seq(L.GRU(UNITS, reset_after=False)), False
    yield "simple_rnn", seq(L.SimpleRNN(UNITS)), False
    yield "bidirectional_lstm", seq(L.Bidirectional(L.LSTM(UNITS))), False
    yield "stacked", seq(L.LSTM(UNITS, return_sequences=True), L.GRU(UNITS, return_sequences=True)), False
    yield "lstm_backwards", seq(L.LSTM(UNITS, go_backwards=True)), False
    yield "gru_backwards_sequences", seq(L.GRU(UNITS, go_backwards=True, return_sequences=True)), False
    inp = tf.keras.Input((STEPS,), dtype="int32")
    emb = L.Embedding(10, FEATURES, mask_zero=True)(inp)
    yield "masked_lstm", tf.keras.Model(inp, L.LSTM(UNITS)(emb)), False
    yield "masked_gru", tf.keras.Model(inp, L.GRU(UNITS, return_sequences=True)(emb)), False
    inp = tf.keras.Input((STEPS, FEATURES))
    yield "lstm_state", tf.keras.Model(inp, L.LSTM(UNITS, return_state=True)(inp)), False


def inputs(model, rng):
    if model.inputs[0].dtype == "int32":
        # Padded sequences (zeros masked), one with a zero inside.
        return np.array([[3, 1, 4, 0, 0], [2, 0, 7, 9, 5]], np.int32)
    return rng.uniform(-1, 1, (2, STEPS, FEATURES)).astype(np.float32)


def freeze(model, x, name, lower):
    spec = model.inputs[0]

    @tf.function(input_signature=[tf.TensorSpec([None, *spec.shape[1:]], spec.dtype, name="x")])
    def serve(x):
        return model(x, training=False)

    frozen = convert_variables_to_constants_v2(serve.get_concrete_function(), lower_control_flow=lower)
    gd = frozen.graph.as_graph_def()
    outs = [t.name.split(":")[0] for t in frozen.outputs]
    for n in gd.node:
        if n.name in outs:
            n.name = f"y{outs.index(n.name)}"
    path = os.path.join(OUT, f"{name}{'' if lower else '_while'}.pb")
    with open(path, "wb") as f:
        f.write(gd.SerializeToString(deterministic=True))
    ys = frozen(tf.constant(x))
    return [y.numpy() for y in (ys if isinstance(ys, (list, tuple)) else [ys])]


def list_ops():
    """A list grown by PushBack from an empty one, popped, measured and stacked."""
    f32 = tf.float32

    @tf.function(input_signature=[tf.TensorSpec([None, FEATURES], f32, name="x")])
    def f(x):
        shape = tf.constant([FEATURES], tf.int32)
        raw = tf.raw_ops
        lst = raw.EmptyTensorList(element_shape=shape, max_num_elements=-1, element_dtype=f32)
        lst = raw.TensorListPushBack(input_handle=lst, tensor=x[0])
        lst = raw.TensorListPushBack(input_handle=lst, tensor=x[1] * 2.0)
        lst = raw.TensorListPushBack(input_handle=lst, tensor=x[0] + x[1])
        lst, last = raw.TensorListPopBack(input_handle=lst, element_shape=shape, element_dtype=f32)
        n = raw.TensorListLength(input_handle=lst)
        es = raw.TensorListElementShape(input_handle=lst, shape_type=tf.int32)
        st = raw.TensorListStack(input_handle=lst, element_shape=shape, element_dtype=f32)
        return st, last, n, es

    frozen = convert_variables_to_constants_v2(f.get_concrete_function())
    gd = frozen.graph.as_graph_def()
    outs = [t.name.split(":")[0] for t in frozen.outputs]
    for n in gd.node:
        if n.name in outs:
            n.name = f"y{outs.index(n.name)}"
    assert {"EmptyTensorList", "TensorListPopBack", "TensorListElementShape"} <= {n.op for n in gd.node}
    with open(os.path.join(OUT, "list_ops.pb"), "wb") as fh:
        fh.write(gd.SerializeToString(deterministic=True))
    x = np.random.default_rng(43).uniform(-1, 1, (2, FEATURES)).astype(np.float32)
    ys = [y.numpy() for y in f(tf.constant(x))]
    np.savez(os.path.join(OUT, "list_ops.npz"), x=x, **{f"y{i}": y for i, y in enumerate(ys)})
    print("list_ops", [y.shape for y in ys])


def main():
    os.makedirs(OUT, exist_ok=True)
    list_ops()
    if "--list-ops-only" in sys.argv:
        return
    rng = np.random.default_rng(43)
    for name, model, saved in models():
        tf.keras.utils.set_random_seed(43)
        x = inputs(model, rng)
        direct = model(x, training=False)
        direct = [np.asarray(d) for d in (direct if isinstance(direct, (list, tuple)) else [direct])]
        for lower in [False, True] if name in LOWERED else [False]:
            for a, b in zip(freeze(model, x, name, lower), direct):
                assert np.allclose(a, b, atol=1e-6), name
        np.savez(os.path.join(OUT, f"{name}.npz"), x=x, **{f"y{i}": y for i, y in enumerate(direct)})
        if saved:
            d = os.path.join(OUT, f"{name}_saved")
            shutil.rmtree(d, ignore_errors=True)
            model.export(d, verbose=False)
        print(name, [y.shape for y in direct])


if __name__ == "__main__":
    main()
