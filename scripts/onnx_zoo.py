#!/usr/bin/env python3
"""ONNX Runtime column for the model-zoo speed comparison.

Converts a zoo model's frozen TensorFlow graph (target/zoo/NAME/frozen.pb,
input `x:0`, output `Identity:0`) to ONNX with tf2onnx, and times or checks it
under onnxruntime's default CPU provider.

Venv (kept apart from .venv; /.venv-ort is git-ignored). Known working set:
    python3 -m venv .venv-ort
    .venv-ort/bin/pip install tensorflow-cpu==2.21.0 tf2onnx==1.17.0 \
        onnx==1.23.2 onnxruntime==1.32.0 numpy==2.4.6 protobuf==7.36.2

Usage (run with .venv-ort/bin/python):
    convert FROZEN_PB OUT_ONNX
        opset 17; exits 1 with one line `does not convert: REASON` on failure.
    time ONNX INPUTS_NPZ RUNS WARMUP THREADS
        THREADS=0: ORT defaults; else intra_op=THREADS, inter_op=1. Feeds the
        npz's "x:0" as is. Last line:
        median_ms=<v> min_ms=<v> max_ms=<v> peak_rss_mb=<v>
    check ONNX NPZ
        runs the npz's "x:0", prints max_abs_diff against its "Identity:0".
"""
import os
import sys

OPSET = 17
INPUT, OUTPUT = "x:0", "Identity:0"


def convert(frozen_pb, out_onnx):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import logging
    import onnx
    import tensorflow as tf
    import tf2onnx

    tf.get_logger().setLevel(logging.ERROR)
    logging.getLogger("tf2onnx").setLevel(logging.ERROR)
    tmp = f"{out_onnx}.tmp.{os.getpid()}"
    try:
        gd = tf.compat.v1.GraphDef()
        with open(frozen_pb, "rb") as f:
            gd.ParseFromString(f.read())
        model, _ = tf2onnx.convert.from_graph_def(
            gd, input_names=[INPUT], output_names=[OUTPUT], opset=OPSET)
        # tf2onnx only logs unsupported TF ops and leaves them in the graph.
        bad = sorted({n.op_type for n in model.graph.node
                      if not onnx.defs.has(n.op_type, n.domain)})
        if bad:
            raise ValueError(f"unsupported TF ops left in graph: {bad}")
        with open(tmp, "wb") as f:
            f.write(model.SerializeToString())
        os.replace(tmp, out_onnx)
    except BaseException as e:  # noqa: BLE001 - report any failure as one line
        if os.path.exists(tmp):
            os.remove(tmp)
        lines = str(e).strip().splitlines() or [""]
        print(f"does not convert: {type(e).__name__}: {lines[0][:300]}")
        sys.exit(1)


def session(onnx_path, threads=0):
    import onnxruntime as ort

    so = ort.SessionOptions()
    if threads:
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
    return ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])


def time_model(onnx_path, npz, runs, warmup, threads):
    import resource
    import time
    import numpy as np

    x = np.load(npz)[INPUT]
    sess = session(onnx_path, threads)
    feed = {sess.get_inputs()[0].name: x}
    for _ in range(warmup):
        sess.run(None, feed)
    ms = []
    for _ in range(runs):
        t = time.perf_counter()
        sess.run(None, feed)
        ms.append((time.perf_counter() - t) * 1e3)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"median_ms={np.median(ms):.3f} min_ms={min(ms):.3f} "
          f"max_ms={max(ms):.3f} peak_rss_mb={rss:.1f}")


def check(onnx_path, npz):
    import numpy as np

    d = np.load(npz)
    sess = session(onnx_path)
    got = sess.run(None, {sess.get_inputs()[0].name: d[INPUT]})[0]
    want = d[OUTPUT]
    diff = float(np.max(np.abs(got.astype(np.float64) - want)))
    print(f"shape={got.shape} max_abs_ref={float(np.max(np.abs(want))):.4g} "
          f"max_abs_diff={diff:.3g}")


def main(a):
    if len(a) == 3 and a[0] == "convert":
        convert(a[1], a[2])
    elif len(a) == 6 and a[0] == "time":
        time_model(a[1], a[2], int(a[3]), int(a[4]), int(a[5]))
    elif len(a) == 3 and a[0] == "check":
        check(a[1], a[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
