#!/usr/bin/env python3
"""SavedModel fixtures written by TensorFlow for `cargo test` (issue 18).

fixtures/saved_model/keras_mlp/   Keras 3 `model.export()` of a 4-8-3 MLP (ReLU), seed 1
fixtures/saved_model/keras_mlp.npz  x (2x4 float32) and TensorFlow's serving_default output_0

Run:  .venv/bin/python scripts/make_saved_model_fixtures.py
"""
import os
import shutil

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "fixtures", "saved_model")


def keras_mlp():
    tf.random.set_seed(1)
    keras = tf.keras
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(3)])
    d = os.path.join(OUT, "keras_mlp")
    shutil.rmtree(d, ignore_errors=True)
    m.export(d)
    x = (np.arange(8, dtype=np.float32).reshape(2, 4) - 3.0) / 4.0
    loaded = tf.saved_model.load(d)
    out = loaded.signatures["serving_default"](keras_tensor=tf.constant(x))
    np.savez(os.path.join(OUT, "keras_mlp.npz"), x=x, output_0=out["output_0"].numpy())
    print("wrote", d, {k: v.shape for k, v in out.items()})


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    keras_mlp()
