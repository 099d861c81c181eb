#!/usr/bin/env python3
"""Real Keras models frozen to GraphDefs, for the real-model tests and benchmarks (issue 19).

Keras' own architectures with random weights (`weights=None`, seeded), the classifier's
softmax removed (`classifier_activation=None`: random weights make a softmax flat, so the
logits are compared), BatchNormalization's moving statistics set away from 0/1 so inference
BN is not an identity, frozen with `convert_variables_to_constants_v2`:

  committed (small, read by `cargo test -p ferroflow --test real_models`):
    fixtures/models/mobilenet_v2_035_96.pb    MobileNetV2(alpha=0.35, 10 classes) on 96x96x3
    fixtures/models/mobilenet_v2_035_96.npz   x (2x96x96x3) and TensorFlow's logits

  generated on demand (large, git-ignored; `--large`), for scripts/compare_tf.py:
    target/models/mobilenet_v2.pb, resnet50.pb   224x224x3, 1000 classes
    target/models/<name>.npz                      x (1x224x224x3) and TensorFlow's logits

Each graph's input is `x:0` and its output `logits:0`.

Run:  .venv/bin/python scripts/make_model_fixtures.py [--large]
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def randomize_batch_norm(model, rng):
    for layer in model.layers:
        if isinstance(layer, tf.keras.layers.BatchNormalization):
            c = layer.gamma.shape[0]
            layer.set_weights([
                rng.uniform(0.5, 1.5, c).astype(np.float32),
                rng.uniform(-0.2, 0.2, c).astype(np.float32),
                rng.uniform(-0.2, 0.2, c).astype(np.float32),
                rng.uniform(0.5, 1.5, c).astype(np.float32),
            ])


def freeze(model, shape, out_dir, name, batch, seed):
    rng = np.random.default_rng(seed)
    randomize_batch_norm(model, rng)

    @tf.function(input_signature=[tf.TensorSpec([None, *shape], tf.float32, name="x")])
    def serve(x):
        return model(x, training=False)

    frozen = convert_variables_to_constants_v2(serve.get_concrete_function())
    gd = frozen.graph.as_graph_def()
    # The output Identity TensorFlow adds is named `Identity`; name it `logits` for the tests.
    out = frozen.outputs[0].name.split(":")[0]
    for n in gd.node:
        if n.name == out:
            n.name = "logits"
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, f"{name}.pb"), "wb") as f:
        f.write(gd.SerializeToString(deterministic=True))
    x = rng.uniform(-1, 1, (batch, *shape)).astype(np.float32)
    logits = frozen(tf.constant(x))
    logits = (logits[0] if isinstance(logits, (list, tuple)) else logits).numpy()
    np.savez(os.path.join(out_dir, f"{name}.npz"), x=x, logits=logits)
    ops = sorted({n.op for n in gd.node})
    size = os.path.getsize(os.path.join(out_dir, f"{name}.pb"))
    print(f"{name}: {len(gd.node)} nodes, {size / 1e6:.1f} MB, logits {logits.shape}, ops {ops}")


def main():
    tf.keras.utils.set_random_seed(19)
    apps = tf.keras.applications
    small = apps.MobileNetV2(input_shape=(96, 96, 3), alpha=0.35, weights=None, classes=10, classifier_activation=None)
    freeze(small, (96, 96, 3), os.path.join(ROOT, "fixtures", "models"), "mobilenet_v2_035_96", 2, 1)
    if "--large" in sys.argv[1:]:
        out = os.path.join(ROOT, "target", "models")
        freeze(apps.MobileNetV2(weights=None, classifier_activation=None), (224, 224, 3), out, "mobilenet_v2", 1, 2)
        freeze(apps.ResNet50(weights=None, classifier_activation=None), (224, 224, 3), out, "resnet50", 1, 3)


if __name__ == "__main__":
    main()
