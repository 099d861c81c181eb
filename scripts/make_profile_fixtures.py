#!/usr/bin/env python3
"""Writes the profile fixture (fixtures/profile/) that `cargo test` reads: an XSpace made by
TensorFlow's own profiler, so `ferroflow profile` is checked on TensorFlow's files as well as
its own.

- tf_keras_fit.xplane.pb: `model.fit` of a small dense model from a `tf.data` pipeline
  (`from_tensor_slices → map → batch`, no prefetch) with
  `tf.keras.callbacks.TensorBoard(profile_batch='3,5')`, as input_pipeline's bottleneck hunt profiles (three steps).

Run: .venv/bin/pip install tensorflow-cpu==2.21.0
     .venv/bin/python scripts/make_profile_fixtures.py
"""
import glob
import os
import shutil
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "profile")


def main():
    os.makedirs(OUT, exist_ok=True)
    tf.random.set_seed(1)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(256, 16)).astype(np.float32)
    y = rng.integers(0, 4, size=256).astype(np.int64)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).map(lambda a, b: (tf.math.tanh(a), b)).batch(32)
    model = tf.keras.Sequential([tf.keras.Input((16,)), tf.keras.layers.Dense(32, activation="relu"),
                                 tf.keras.layers.Dense(4)])
    model.compile(optimizer="adam", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    logdir = tempfile.mkdtemp()
    try:
        cb = tf.keras.callbacks.TensorBoard(logdir, profile_batch="3,5")
        model.fit(ds, epochs=1, callbacks=[cb], verbose=0)
        found = glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)
        assert len(found) == 1, found
        shutil.copy(found[0], os.path.join(OUT, "tf_keras_fit.xplane.pb"))
        print("wrote", os.path.join(OUT, "tf_keras_fit.xplane.pb"), os.path.getsize(found[0]), "bytes")
    finally:
        shutil.rmtree(logdir)


if __name__ == "__main__":
    main()
