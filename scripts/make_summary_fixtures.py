#!/usr/bin/env python3
"""Writes the summary fixtures (fixtures/summary/) that `cargo test` checks ferroflow against.

- histogram.npz: `values` (float32: normal draws, zeros, negatives, a tiny 1e-13, large 1e5
  and 3e25 values) and `proto`, the bytes of the HistogramProto that TensorFlow's
  `HistogramSummary` op (`tf.compat.v1.summary.histogram`) makes of them; `empty_proto` for no
  values.

Run: .venv/bin/pip install tensorflow-cpu==2.21.0
     .venv/bin/python scripts/make_summary_fixtures.py
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "summary")


def histogram_proto(values):
    g = tf.Graph()
    with g.as_default():
        s = tf.compat.v1.summary.histogram("h", tf.constant(values, dtype=tf.float32))
        with tf.compat.v1.Session() as sess:
            summary = tf.compat.v1.Summary.FromString(sess.run(s))
    return summary.value[0].histo.SerializeToString()


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(3)
    values = np.concatenate([
        rng.normal(0.0, 1.0, 1000),
        rng.normal(5.0, 0.1, 50),
        [0.0, 0.0, -0.0, 1e-13, -1e-13, 1e5, -3e25, 3e25, 1e-12, 1.0, -1.0],
    ]).astype(np.float32)
    np.savez(os.path.join(OUT, "histogram.npz"), values=values,
             proto=np.frombuffer(histogram_proto(values), dtype=np.uint8),
             empty_proto=np.frombuffer(histogram_proto(np.zeros([0], np.float32)), dtype=np.uint8))
    print("wrote", OUT)


if __name__ == "__main__":
    main()
