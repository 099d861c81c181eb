#!/usr/bin/env python3
"""Writes traced_functions' fixture (fixtures/function/seed_004.npz): TensorFlow's `tf.function`
results for the article's code, which `cargo test` compares ferroflow's traced functions with.

Keys: cube_int (cube(2), int32), cube_float (cube(tf.constant(2.0)), float32),
concrete_functions (how many concrete functions cube has after both calls), collatz_27,
collatz_97 (int32), sum_total, sum_count (sum_squares_until([0.5, 1.5, 2.0, 3.0, 4.0], 6.0)).

Run: .venv/bin/pip install tensorflow-cpu==2.21.0
     .venv/bin/python scripts/make_function_fixtures.py
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "function")


def cube(x):
    return x ** 3


@tf.function
def collatz(n):
    steps = tf.constant(0)
    while n > 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


@tf.function
def sum_squares_until(x, limit):
    total = tf.constant(0.0)
    i = tf.constant(0)
    for v in x:
        if total > limit:
            break
        total += v * v
        i += 1
    return total, i


def main():
    os.makedirs(OUT, exist_ok=True)
    tf_cube = tf.function(cube)
    ci = tf_cube(tf.constant(2))
    cf = tf_cube(tf.constant(2.0))
    total, count = sum_squares_until(tf.constant([0.5, 1.5, 2.0, 3.0, 4.0]), tf.constant(6.0))
    np.savez(os.path.join(OUT, "seed_004.npz"),
             cube_int=ci.numpy(), cube_float=cf.numpy(),
             concrete_functions=np.int64(len(tf_cube._list_all_concrete_functions_for_serialization())),
             collatz_27=collatz(tf.constant(27)).numpy(), collatz_97=collatz(tf.constant(97)).numpy(),
             sum_total=total.numpy(), sum_count=count.numpy())
    for k, v in np.load(os.path.join(OUT, "seed_004.npz")).items():
        print(k, v.dtype, v)


if __name__ == "__main__":
    main()
