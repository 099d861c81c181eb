"""ferroflow from Python: TensorFlow 1-style graphs and sessions run by ferroflow's Rust
runtime, NumPy in and out.

    import ferroflow as ff
    x = ff.placeholder(ff.float32, [None, 3], name="x")
    y = ff.raw_ops.MatMul(a=x, b=ff.constant([[1.0], [2.0], [3.0]]))
    with ff.Session() as sess:
        print(sess.run(y, feed_dict={x: [[1.0, 1.0, 1.0]]}))

``ferroflow.raw_ops`` has every registered op; ``ferroflow.errors`` TensorFlow's exception
classes. Eager execution and ``compat.v1`` are being built on this surface.
"""
from ferroflow import data, errors, keras, raw_ops, saved_model  # noqa: F401
from ferroflow._native import __version__  # noqa: F401
from ferroflow.client import RunMetadata, RunOptions, Session  # noqa: F401
from ferroflow.framework import (  # noqa: F401
    DType,
    Graph,
    Operation,
    Tensor,
    TensorShape,
    as_dtype,
    bool_,
    constant,
    convert_to_tensor,
    float16,
    float32,
    float64,
    get_default_graph,
    int8,
    int16,
    int32,
    int64,
    load_graph,
    placeholder,
    reset_default_graph,
    resource,
    string,
    uint8,
    uint16,
    uint32,
    uint64,
)

bool = bool_  # noqa: A001 (TensorFlow's `tf.bool`)
