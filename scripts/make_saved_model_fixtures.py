#!/usr/bin/env python3
"""SavedModel fixtures written by TensorFlow for `cargo test` (issue 18).

fixtures/saved_model/keras_mlp/   Keras 3 `model.export()` of a 4-8-3 MLP (ReLU), seed 1
fixtures/saved_model/keras_mlp.npz  x (2x4 float32) and TensorFlow's serving_default output_0
fixtures/saved_model/keras_cnn/   Keras 3 `model.export()` of a small CNN with BatchNormalization
                                  (conv-BN-ReLU-pool, conv-BN-ReLU, global average pool, dense 10)
                                  on 32x32x3 images; BN statistics set away from 0/1
fixtures/saved_model/keras_cnn.npz  x (2x32x32x3) and TensorFlow's output_0
fixtures/saved_model/module_loop/ `tf.saved_model.save` of a tf.Module with two variables whose
                                  tf.function (input_signature x: float32[None, 3], n: int32[])
                                  runs a `while` with an `if` inside (AutoGraph -> While/If)
fixtures/saved_model/module_loop.npz  x, n and TensorFlow's outputs y and steps
fixtures/saved_model/tf1_builder/ a TF1 graph (placeholder -> matmul with a variable -> add
                                  bias -> tanh) saved by SavedModelBuilder with a Saver
fixtures/saved_model/tf1_builder.npz  x and TensorFlow's scores
fixtures/saved_model/classify_regress/1/  an estimator-style TF1 model for TensorFlow Serving's
                                  classify/regress APIs (version directory 1): serialized
                                  tf.train.Examples parsed by tf.io.parse_example (feature "x",
                                  float [2]) into a fixed-weight linear model; signatures
                                  `classification` (inputs -> classes string [?, 2], scores
                                  [?, 2]), `regression` (inputs -> outputs [?, 1]) and a predict
                                  `serving_default` (examples -> classes, scores, outputs)
fixtures/saved_model/classify_regress.npz  3 serialized examples, their x, and TensorFlow's
                                  classes, scores and outputs
fixtures/saved_model/unsupported_ops/ a tf.Module calling BesselI0e and MatrixDeterminant
fixtures/saved_model/*.cli.txt    what `saved_model_cli show --all` prints for each directory

Run:  .venv/bin/python scripts/make_saved_model_fixtures.py
"""
import os
import shutil
import subprocess
import sys

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


def keras_cnn():
    tf.random.set_seed(2)
    rng = np.random.default_rng(2)
    keras = tf.keras
    layers = keras.layers
    m = keras.Sequential(
        [
            keras.Input((32, 32, 3)),
            layers.Conv2D(8, 3, padding="same"),
            layers.BatchNormalization(),
            layers.ReLU(),
            layers.MaxPooling2D(),
            layers.Conv2D(16, 3, padding="same"),
            layers.BatchNormalization(),
            layers.ReLU(),
            layers.GlobalAveragePooling2D(),
            layers.Dense(10),
        ]
    )
    # Inference-mode BatchNormalization with statistics that are not the 0/1 defaults.
    for layer in m.layers:
        if isinstance(layer, layers.BatchNormalization):
            c = layer.gamma.shape[0]
            layer.set_weights(
                [
                    rng.uniform(0.5, 1.5, c).astype(np.float32),
                    rng.uniform(-0.5, 0.5, c).astype(np.float32),
                    rng.uniform(-0.2, 0.2, c).astype(np.float32),
                    rng.uniform(0.5, 2.0, c).astype(np.float32),
                ]
            )
    d = os.path.join(OUT, "keras_cnn")
    shutil.rmtree(d, ignore_errors=True)
    m.export(d)
    x = rng.uniform(0, 1, (2, 32, 32, 3)).astype(np.float32)
    loaded = tf.saved_model.load(d)
    out = loaded.signatures["serving_default"](keras_tensor=tf.constant(x))
    np.savez(os.path.join(OUT, "keras_cnn.npz"), x=x, output_0=out["output_0"].numpy())
    print("wrote", d, {k: v.shape for k, v in out.items()})


class Loop(tf.Module):
    def __init__(self):
        super().__init__()
        self.scale = tf.Variable(2.0, name="scale")
        self.offset = tf.Variable([1.0, -1.0, 0.5], name="offset")

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x"), tf.TensorSpec([], tf.int32, name="n")])
    def __call__(self, x, n):
        i = tf.constant(0)
        y = x
        while i < n:
            if tf.reduce_sum(y) > 10.0:
                y = y / self.scale
            else:
                y = y * self.scale + self.offset
            i += 1
        return {"y": y, "steps": i}


def module_loop():
    m = Loop()
    d = os.path.join(OUT, "module_loop")
    shutil.rmtree(d, ignore_errors=True)
    tf.saved_model.save(m, d, signatures={"serving_default": m.__call__})
    x = np.array([[0.5, 1.0, -2.0], [3.0, 0.25, 1.0]], dtype=np.float32)
    n = np.array(7, dtype=np.int32)
    loaded = tf.saved_model.load(d)
    out = loaded.signatures["serving_default"](x=tf.constant(x), n=tf.constant(n))
    np.savez(os.path.join(OUT, "module_loop.npz"), x=x, n=n, y=out["y"].numpy(), steps=out["steps"].numpy())
    print("wrote", d, {k: v.numpy().tolist() for k, v in out.items()})


def tf1_builder():
    v1 = tf.compat.v1
    d = os.path.join(OUT, "tf1_builder")
    shutil.rmtree(d, ignore_errors=True)
    rng = np.random.default_rng(3)
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [None, 5], name="x")
        w = v1.get_variable("w", initializer=rng.normal(0, 0.5, (5, 2)).astype(np.float32), use_resource=False)
        b = v1.get_variable("b", initializer=np.array([0.1, -0.2], np.float32), use_resource=False)
        scores = tf.tanh(tf.matmul(x, w) + b, name="scores")
        with v1.Session(graph=g) as sess:
            sess.run(v1.global_variables_initializer())
            builder = v1.saved_model.builder.SavedModelBuilder(d)
            sig = v1.saved_model.signature_def_utils.predict_signature_def(inputs={"x": x}, outputs={"scores": scores})
            builder.add_meta_graph_and_variables(
                sess, [v1.saved_model.tag_constants.SERVING], signature_def_map={"serving_default": sig}, saver=v1.train.Saver()
            )
            builder.save()
    xv = rng.normal(0, 1, (3, 5)).astype(np.float32)
    with tf.Graph().as_default(), v1.Session() as sess:
        v1.saved_model.loader.load(sess, ["serve"], d)
        out = sess.run("scores:0", {"x:0": xv})
    np.savez(os.path.join(OUT, "tf1_builder.npz"), x=xv, scores=out)
    print("wrote", d, out.shape)


def classify_regress():
    """A TF1 graph as an estimator exports it for TensorFlow Serving: a string placeholder of
    serialized Examples, ParseExampleV2, then a linear model (variables with fixed values)."""
    v1 = tf.compat.v1
    base = os.path.join(OUT, "classify_regress")
    shutil.rmtree(base, ignore_errors=True)
    d = os.path.join(base, "1")
    g = tf.Graph()
    with g.as_default():
        serialized = v1.placeholder(tf.string, [None], name="input_example_tensor")
        features = tf.io.parse_example(serialized, {"x": tf.io.FixedLenFeature([2], tf.float32)})
        x = features["x"]
        w = v1.get_variable("linear/w", initializer=np.array([[1.0, -1.0], [0.5, 2.0]], np.float32))
        b = v1.get_variable("linear/b", initializer=np.array([0.25, -0.5], np.float32))
        wr = v1.get_variable("regress/w", initializer=np.array([[2.0], [-3.0]], np.float32))
        br = v1.get_variable("regress/b", initializer=np.array([0.5], np.float32))
        logits = tf.matmul(x, w) + b
        scores = tf.nn.softmax(logits, name="scores")
        labels = tf.constant([["negative", "positive"]])
        classes = tf.tile(labels, [tf.shape(serialized)[0], 1], name="classes")
        outputs = tf.add(tf.matmul(x, wr), br, name="outputs")
        u = v1.saved_model.signature_def_utils
        signatures = {
            "classification": u.classification_signature_def(examples=serialized, classes=classes, scores=scores),
            "regression": u.regression_signature_def(examples=serialized, predictions=outputs),
            "serving_default": u.predict_signature_def(
                inputs={"examples": serialized}, outputs={"classes": classes, "scores": scores, "outputs": outputs}
            ),
        }
        with v1.Session(graph=g) as sess:
            sess.run(v1.global_variables_initializer())
            builder = v1.saved_model.builder.SavedModelBuilder(d)
            builder.add_meta_graph_and_variables(
                sess, [v1.saved_model.tag_constants.SERVING], signature_def_map=signatures, saver=v1.train.Saver()
            )
            builder.save()
    xs = np.array([[1.0, 2.0], [-0.5, 0.25], [3.0, -1.0]], np.float32)
    examples = []
    for row in xs:
        f = {"x": tf.train.Feature(float_list=tf.train.FloatList(value=row))}
        s = tf.train.Example(features=tf.train.Features(feature=f)).SerializeToString(deterministic=True)
        assert not s.endswith(b"\0")  # numpy bytes arrays drop trailing NULs
        examples.append(s)
    with tf.Graph().as_default(), v1.Session() as sess:
        meta = v1.saved_model.loader.load(sess, ["serve"], d)
        out = {}
        for name, sig in meta.signature_def.items():
            fetch = {k: v.name for k, v in sig.outputs.items()}
            out[name] = sess.run(fetch, {sig.inputs[next(iter(sig.inputs))].name: examples})
    cls, reg, pred = out["classification"], out["regression"], out["serving_default"]
    assert (pred["scores"] == cls["scores"]).all() and (pred["outputs"] == reg["outputs"]).all()
    width = max(len(e) for e in examples)
    np.savez(
        os.path.join(OUT, "classify_regress.npz"),
        serialized=np.array(examples, dtype=f"S{width}"),
        x=xs,
        classes=cls["classes"].astype("S"),
        scores=cls["scores"],
        outputs=reg["outputs"],
    )
    print("wrote", d, {k: v.tolist() for k, v in cls.items()}, reg["outputs"].tolist())


class Unsupported(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([2, 2], tf.float32, name="x")])
    def __call__(self, x):
        return {"y": tf.math.bessel_i0e(x) + tf.linalg.det(x) + tf.math.erf(x)}


def unsupported_ops():
    """A SavedModel with two ops ferroflow has no kernel for (BesselI0e, MatrixDeterminant)."""
    m = Unsupported()
    d = os.path.join(OUT, "unsupported_ops")
    shutil.rmtree(d, ignore_errors=True)
    tf.saved_model.save(m, d, signatures={"serving_default": m.__call__})
    print("wrote", d)


def cli_listings():
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    for name in ("keras_mlp", "keras_cnn", "module_loop", "tf1_builder", "classify_regress"):
        path = os.path.join(OUT, name, "1") if name == "classify_regress" else os.path.join(OUT, name)
        text = subprocess.run([cli, "show", "--all", "--dir", path], capture_output=True, text=True, check=True).stdout
        with open(os.path.join(OUT, name + ".cli.txt"), "w") as f:
            f.write(text)


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    only = sys.argv[1:]
    for f in (keras_mlp, keras_cnn, module_loop, tf1_builder, classify_regress, unsupported_ops, cli_listings):
        if not only or f.__name__ in only:
            f()
