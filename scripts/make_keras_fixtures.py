#!/usr/bin/env python3
"""Keras model files written by Keras itself (issue 45), with Keras's outputs.

Writes fixtures/keras/:
  <name>.keras      Keras 3 `model.save` (random weights, BatchNormalization statistics moved off
                    0/1 so inference BN is not an identity)
  <name>.npz        the inputs under the model's input names and Keras's outputs
                    (`model(x, training=False)`) under `out:<output layer name>` (single output:
                    `out`); `@weights` variants also under `w:<layer>/<i>`
  index.json        per model: inputs, outputs, parameter counts as `model.summary()` prints
                    them (total, trainable, non-trainable), layer count, class names
Models:
  app_<family>      a reduced build of each tf.keras.applications family (make_zoo's builders)
  <layer model>     make_zoo's layer-kind models that Keras serializes without Python code
  sequential_cnn    a Sequential (InputLayer, Conv2D, BatchNormalization, pooling, Dense)
  transfer          seed 001's recipe: Rescaling, a reduced EfficientNetB0 base called with
                    training=False, pooling, dropout, Dense — base frozen
  shared            one Dense applied twice and a nested model applied twice
  transfer.weights.h5   `save_weights` of `transfer` after new weights: npz `transfer_reweighted`
  custom_layer      a model with a registered custom layer (ferroflow must refuse it by name)
Legacy (tf_keras, Keras 2; run in a subprocess with TF_USE_LEGACY_KERAS=1):
  legacy_cnn.h5     `model.save("x.h5")`: whole model (Functional with a nested Sequential)
  legacy_cnn.weights_only.h5   `save_weights` of the same model after new weights

Run:  .venv/bin/python scripts/make_keras_fixtures.py
"""
import json
import os
import subprocess
import sys
import zlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "fixtures", "keras")
BATCH = 2


def param_counts(model):
    import numpy as np
    trainable = sum(int(np.prod(w.shape)) for w in model.trainable_weights)
    non = sum(int(np.prod(w.shape)) for w in model.non_trainable_weights)
    return {"total": trainable + non, "trainable": trainable, "non_trainable": non}


def classes_of(cfg, out):
    for layer in cfg.get("config", {}).get("layers", []):
        out.add(layer["class_name"])
        if "layers" in layer.get("config", {}):
            classes_of(layer, out)
    return out


def legacy():
    """Keras 2 files (tf_keras)."""
    import numpy as np
    import tf_keras as K
    L = K.layers
    rng = np.random.default_rng(451)
    K.utils.set_random_seed(451)
    inner = K.Sequential([L.Conv2D(6, 3, padding="same", name="inner_conv"),
                          L.BatchNormalization(name="inner_bn"), L.ReLU(name="inner_relu")], name="inner")
    x = K.Input((8, 8, 3), name="x")
    h = L.Conv2D(4, 3, strides=2, padding="same", use_bias=False, name="stem")(x)
    h = L.BatchNormalization(name="stem_bn")(h)
    h = L.Activation("swish", name="stem_act")(h)
    h = inner(h)
    h = L.DepthwiseConv2D(3, padding="same", name="dw")(h)
    h = L.GlobalAveragePooling2D(name="pool")(h)
    y = L.Dense(3, name="head")(h)
    model = K.Model(x, y, name="legacy_cnn")
    randomize(model, rng, L.BatchNormalization)
    xs = rng.uniform(-1, 1, (BATCH, 8, 8, 3)).astype(np.float32)
    model.save(os.path.join(OUT, "legacy_cnn.h5"))
    np.savez(os.path.join(OUT, "legacy_cnn.npz"), x=xs, out=model(xs, training=False).numpy())
    for w in model.weights:
        w.assign(rng.uniform(0.5, 1.5, w.shape).astype(np.float32) * (0.5 if "kernel" in w.name else 1.0))
    model.save_weights(os.path.join(OUT, "legacy_cnn.weights_only.h5"))
    np.savez(os.path.join(OUT, "legacy_cnn_reweighted.npz"), x=xs, out=model(xs, training=False).numpy())
    return {"legacy_cnn": {"inputs": ["x"], "outputs": ["head"], **param_counts(model),
                           "layers": len(model.layers)}}


def output_names(model):
    """The output layers' names from the config (`["y", 0, 0]` or a list of such triples)."""
    outs = model.get_config().get("output_layers")
    if not outs:
        return [model.layers[-1].name]
    return [o[0] for o in outs] if isinstance(outs[0], list) else [outs[0]]


def randomize(model, rng, bn_class):
    import numpy as np
    layers = model._flatten_layers() if hasattr(model, "_flatten_layers") else model.layers
    for layer in layers:
        if isinstance(layer, bn_class):
            for w in layer.weights:
                n = w.name.split("/")[-1].split(":")[0]
                lo, hi = (0.5, 1.5) if n in ("gamma", "moving_variance") else (-0.2, 0.2)
                w.assign(rng.uniform(lo, hi, w.shape).astype(np.float32))


def main():
    if "--legacy" in sys.argv:
        print(json.dumps(legacy()))
        return
    import numpy as np
    import keras
    from keras import layers as L
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.argv = sys.argv[:1]
    import make_zoo as Z

    os.makedirs(OUT, exist_ok=True)
    index = {}

    def write(name, model, gens, seed_rng, reweight=False):
        randomize(model, seed_rng, L.BatchNormalization)
        names = [t.name.split(":")[0] for t in model.inputs]
        data = {n: gens[n](seed_rng, BATCH) for n in names}
        feed = data[names[0]] if len(names) == 1 else [data[n] for n in names]
        outs = model(feed, training=False)
        outs = outs if isinstance(outs, (list, tuple)) else [outs]
        out_names = output_names(model)
        arrays = dict(data)
        if len(outs) == 1:
            arrays["out"] = np.asarray(outs[0])
        else:
            for n, o in zip(out_names, outs):
                arrays[f"out:{n}"] = np.asarray(o)
        path = os.path.join(OUT, f"{name}.keras")
        model.save(path)
        np.savez(os.path.join(OUT, f"{name}.npz"), **arrays)
        cfg = json.loads(json.dumps(keras.saving.serialize_keras_object(model)))
        index[name] = {"inputs": names, "outputs": out_names,
                       **param_counts(model), "layers": len(model.layers),
                       "classes": sorted(classes_of(cfg, set()))}
        print(f"{name}: {os.path.getsize(path) / 1e3:.0f} kB, {len(model.layers)} layers", flush=True)
        if reweight:
            for w in model.weights:
                w.assign(seed_rng.uniform(0.8, 1.2, w.shape).astype(np.float32) * np.asarray(w))
            model.save_weights(os.path.join(OUT, f"{name}.weights.h5"))
            outs = model(feed, training=False)
            np.savez(os.path.join(OUT, f"{name}_reweighted.npz"), **dict(data), out=np.asarray(outs))

    def seeded(name):
        seed = 45000 + zlib.crc32(name.encode()) % 1000
        keras.utils.set_random_seed(seed)
        return np.random.default_rng(seed)

    for family, size, width in Z.SUBSET_APPS:
        name = f"app_{family.lower()}"
        rng = seeded(name)
        model = Z.rename_input(Z.reduced_app(family, size, width))
        write(name, model, {"x": Z.floats(size, size, 3)}, rng)
        keras.backend.clear_session()

    layer_models = {n: b for n, b in Z.LAYER_MODELS.items() if not n.startswith("activation_")}
    for act in Z.ACTIVATIONS:  # by name, as a user writes them (make_zoo's are lambdas)
        if act not in Z.ACTIVATION_ARGS:
            layer_models[f"activation_{act}"] = (lambda a=act: lambda: Z.one((16,), L.Activation(a), lo=-3, hi=3))()
    for name, build in layer_models.items():
        rng = seeded(name)
        try:
            model, gens = build()
            cfg = json.dumps(keras.saving.serialize_keras_object(model))
        except Exception as e:  # not serializable: skipped
            print(f"{name}: skipped ({type(e).__name__})", flush=True)
            continue
        if '"value": [' in cfg or "PositionEmbedding" in cfg:
            print(f"{name}: skipped (Python code in its config)", flush=True)
            continue
        write(name, model, gens, rng)
        keras.backend.clear_session()

    rng = seeded("sequential_cnn")
    model = keras.Sequential([keras.Input((10, 10, 3), name="x"), L.Conv2D(6, 3, activation="relu"),
                              L.BatchNormalization(), L.MaxPooling2D(), L.Conv2D(8, 3, padding="same"),
                              L.AveragePooling2D(2), L.Flatten(), L.Dropout(0.3), L.Dense(5, activation="softmax")],
                             name="sequential_cnn")
    write("sequential_cnn", model, {"x": Z.floats(10, 10, 3)}, rng)
    keras.backend.clear_session()

    from keras.src.applications import efficientnet
    rng = seeded("transfer")
    base = efficientnet.EfficientNet(width_coefficient=0.1, depth_coefficient=0.25, default_size=32,
                                     name="efficientnet_reduced", weights=None, include_top=False,
                                     input_shape=(32, 32, 3))
    base.trainable = False
    x = keras.Input((32, 32, 3), name="x")
    h = base(L.Rescaling(1.0 / 255)(x), training=False)
    h = L.GlobalAveragePooling2D(name="avg_pool")(h)
    h = L.Dropout(0.2, name="top_dropout")(h)
    model = keras.Model(x, L.Dense(5, name="predictions")(h), name="transfer")
    write("transfer", model, {"x": Z.floats(32, 32, 3, lo=0, hi=255)}, rng, reweight=True)
    keras.backend.clear_session()

    rng = seeded("shared")
    a = keras.Input((6,), name="a")
    b = keras.Input((6,), name="b")
    dense = L.Dense(4, activation="tanh", name="shared_dense")
    sub_in = keras.Input((4,))
    sub = keras.Model(sub_in, L.Dense(3, name="sub_dense")(L.BatchNormalization(name="sub_bn")(sub_in)), name="sub")
    ha, hb = sub(dense(a)), sub(dense(b))
    model = keras.Model([a, b], [L.Add(name="sum")([ha, hb]), L.Concatenate(name="cat")([ha, hb])], name="shared")
    write("shared", model, {"a": Z.floats(6), "b": Z.floats(6)}, rng)
    keras.backend.clear_session()

    @keras.saving.register_keras_serializable(package="ff")
    class Scale(L.Layer):
        def call(self, t):
            return t * 2.0
    x = keras.Input((3,), name="x")
    model = keras.Model(x, Scale(name="doubling")(L.Dense(2)(x)))
    model.save(os.path.join(OUT, "custom_layer.keras"))

    env = dict(os.environ, TF_USE_LEGACY_KERAS="1")
    got = subprocess.run([sys.executable, __file__, "--legacy"], env=env, check=True, capture_output=True, text=True)
    index.update(json.loads(got.stdout.strip().splitlines()[-1]))
    with open(os.path.join(OUT, "index.json"), "w") as f:
        json.dump(index, f, indent=1, sort_keys=True)
    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print(f"{len(index)} models, {total / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
