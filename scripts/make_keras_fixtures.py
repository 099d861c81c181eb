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

Masks Keras propagates implicitly (not written into the config; `--masks` writes only these and
merges them into index.json):
  mask_*            Keras 3: Embedding(mask_zero=True) into MultiHeadAttention (plain and causal),
                    Dense and stacked LSTMs, two transformer blocks and attentions sharing an
                    input (MultiHeadAttention deletes its inputs' masks), merges, a Bidirectional
                    LSTM returning sequences, a nested model; Masking into GRUs and a pooling
  legacy_mask_*     tf_keras: Embedding(mask_zero=True) into LSTM, Bidirectional LSTMs, a
                    MultiHeadAttention block, a nested model; Masking into GRUs

Run:  .venv/bin/python scripts/make_keras_fixtures.py [--masks]
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


MASK_BATCH = 3


def padded_tokens(length, vocab, rng):
    """Token ids with trailing padding zeros: none in the first row, more in each later one."""
    import numpy as np
    t = rng.integers(1, vocab, (MASK_BATCH, length)).astype(np.int32)
    for i in range(1, MASK_BATCH):
        t[i, length - 2 * i:] = 0
    return t


def save_masked(index, name, model, data, legacy_file=False):
    """Saves `model` and Keras's outputs on `data` (inputs by name) as fixture `name`.
    Embeddings are drawn from [-1, 1] (not Keras's ±0.05) so masked values are not tiny."""
    import numpy as np
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    for layer in model.layers:
        if type(layer).__name__ == "Embedding":
            layer.set_weights([rng.uniform(-1, 1, w.shape).astype(np.float32) for w in layer.get_weights()])
    feed = [data[n] for n in data]
    outs = model(feed[0] if len(feed) == 1 else feed, training=False)
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    assert len(outs) == 1, name
    model.save(os.path.join(OUT, f"{name}.h5" if legacy_file else f"{name}.keras"))
    np.savez(os.path.join(OUT, f"{name}.npz"), **data, out=np.asarray(outs[0]))
    cfg = json.loads(model.to_json()) if legacy_file else json.loads(json.dumps(
        __import__("keras").saving.serialize_keras_object(model)))
    index[name] = {"inputs": list(data), "outputs": output_names(model), **param_counts(model),
                   "layers": len(model.layers), "classes": sorted(classes_of(cfg, set()))}
    print(f"{name}: {len(model.layers)} layers", file=sys.stderr, flush=True)


def masks():
    """Keras 3 models whose masks Keras propagates at run time (`_keras_mask`)."""
    import numpy as np
    import keras
    from keras import layers as L
    index = {}

    def seeded(name):
        seed = 46000 + zlib.crc32(name.encode()) % 1000
        keras.utils.set_random_seed(seed)
        return np.random.default_rng(seed)

    def tokens_in(length=8):
        return keras.Input((length,), dtype="int32", name="x")

    # The causal one flattens: with trailing padding only the padded queries (attending to
    # every step, as fully masked rows do) differ from plain causal attention.
    for name, causal in (("mask_mha", False), ("mask_mha_causal", True)):
        rng = seeded(name)
        t = tokens_in()
        x = L.Embedding(20, 8, mask_zero=True, name="embedding")(t)
        a = L.MultiHeadAttention(2, 4, name="attention")(x, x, use_causal_mask=causal)
        h = (L.Flatten(name="flat") if causal else L.GlobalAveragePooling1D(name="pool"))(a)
        save_masked(index, name, keras.Model(t, L.Dense(3, name="head")(h), name=name),
                    {"x": padded_tokens(8, 20, rng)})
        keras.backend.clear_session()

    rng = seeded("mask_dense_lstm")
    t = tokens_in(7)
    x = L.Embedding(20, 6, mask_zero=True, name="embedding")(t)
    x = L.Dense(6, activation="tanh", name="dense")(x)
    x = L.LSTM(5, return_sequences=True, name="lstm_seq")(x)
    save_masked(index, "mask_dense_lstm", keras.Model(t, L.LSTM(4, name="lstm")(x), name="mask_dense_lstm"),
                {"x": padded_tokens(7, 20, rng)})
    keras.backend.clear_session()

    rng = seeded("mask_masking_gru")
    x = keras.Input((7, 3), name="x")
    h = L.Masking(0.0, name="masking")(x)
    h = L.GRU(4, return_sequences=True, name="gru_seq")(h)
    h = L.GRU(3, name="gru")(h)
    xs = rng.uniform(-1, 1, (MASK_BATCH, 7, 3)).astype(np.float32)
    xs[0, 3] = 0.0  # a masked step inside a row
    xs[1, 5:] = 0.0  # trailing padding
    xs[2, 0] = 0.0  # a masked first step
    xs[2, 2, 1] = 0.0  # a zero that is not a whole step
    save_masked(index, "mask_masking_gru", keras.Model(x, h, name="mask_masking_gru"), {"x": xs})
    keras.backend.clear_session()

    rng = seeded("mask_masking_pool")
    x = keras.Input((6, 4), name="x")
    h = L.Masking(0.5, name="masking")(x)
    h = L.Dense(5, name="dense")(L.Dropout(0.3, name="dropout")(h))
    h = L.GlobalAveragePooling1D(name="pool")(L.LayerNormalization(name="norm")(h))
    xs = rng.uniform(-1, 1, (MASK_BATCH, 6, 4)).astype(np.float32)
    xs[0, 1] = 0.5
    xs[1, 3:] = 0.5
    save_masked(index, "mask_masking_pool", keras.Model(x, L.Dense(2, name="head")(h), name="mask_masking_pool"),
                {"x": xs})
    keras.backend.clear_session()

    # Keras 3's MultiHeadAttention deletes its inputs' masks when it runs: the residual Add
    # then sees none on x, so the second block's attention runs unmasked (the pooling's mask
    # is in the config, computed when the model was made).
    rng = seeded("mask_transformer")
    t = tokens_in()
    x = L.Embedding(20, 8, mask_zero=True, name="embedding")(t)
    for i in range(2):
        a = L.MultiHeadAttention(2, 4, name=f"attention{i}")(x, x)
        x = L.LayerNormalization(name=f"norm{i}")(L.Add(name=f"residual{i}")([x, a]))
    h = L.GlobalAveragePooling1D(name="pool")(L.Dense(8, activation="relu", name="ffn")(x))
    save_masked(index, "mask_transformer", keras.Model(t, L.Dense(3, name="head")(h), name="mask_transformer"),
                {"x": padded_tokens(8, 20, rng)})
    keras.backend.clear_session()

    # Two attentions on one masked tensor (through a Dropout, which passes the same tensor
    # on): whichever Keras runs first deletes the mask the other would read.
    rng = seeded("mask_mha_twice")
    t = tokens_in()
    x = L.Embedding(20, 8, mask_zero=True, name="embedding")(t)
    d = L.Dropout(0.2, name="dropout")(x)
    a = L.MultiHeadAttention(2, 4, name="attention_a")(d, d)
    b = L.MultiHeadAttention(2, 4, name="attention_b")(L.Dense(8, name="proj")(x), x)
    c = L.MultiHeadAttention(2, 4, name="attention_c")(x, x)
    h = L.Concatenate(name="cat")([a, b, c])
    h = L.Flatten(name="flat")(h)
    save_masked(index, "mask_mha_twice", keras.Model(t, L.Dense(3, name="head")(h), name="mask_mha_twice"),
                {"x": padded_tokens(8, 20, rng)})
    keras.backend.clear_session()

    # Merges: Multiply, Maximum and Minimum use the masks in their values (Keras 3), masks
    # OR-ed when every input has one; Concatenate's mask; poolings with and without masks.
    rng = seeded("mask_merge")
    t = tokens_in()
    u = keras.Input((8, 6), name="u")
    e = L.Embedding(20, 6, mask_zero=True, name="embedding")(t)
    e2 = L.Embedding(20, 6, mask_zero=True, name="embedding2")(t)
    a = L.Dense(6, name="dense_a")(e)
    b = L.Dense(6, name="dense_b")(e2)
    m = L.Multiply(name="mul")([a, b])  # masked steps 0
    mx = L.Maximum(name="max")([a, u])  # masked steps of a take u's; no mask after
    mn = L.Minimum(name="min")([a, b])
    s = L.Add(name="add")([m, u])  # u has no mask: the sum has none
    c = L.Concatenate(name="cat")([m, mn])
    p = L.GlobalAveragePooling1D(name="pool")(c)
    q = L.GlobalAveragePooling1D(name="pool_sum")(s)
    r = L.GlobalAveragePooling1D(name="pool_max")(mx)
    model = keras.Model([t, u], L.Dense(3, name="head")(L.Concatenate(name="all")([p, q, r])), name="mask_merge")
    toks = padded_tokens(8, 20, rng)
    save_masked(index, "mask_merge", model,
                {"x": toks, "u": rng.uniform(-1, 1, (MASK_BATCH, 8, 6)).astype(np.float32)})
    keras.backend.clear_session()

    # A nested model: its call's `mask` argument masks its input; its LSTM (whose `mask` is
    # None in the config) reads it at run time, and its output's mask reaches the attention.
    rng = seeded("mask_nested")
    i = keras.Input((8, 6), name="inner_in")
    inner = keras.Model(i, L.LSTM(6, return_sequences=True, name="inner_lstm")(L.Dense(6, name="inner_dense")(i)),
                        name="inner")
    t = tokens_in()
    h = inner(L.Embedding(20, 6, mask_zero=True, name="embedding")(t))
    a = L.MultiHeadAttention(2, 3, name="attention")(h, h)
    save_masked(index, "mask_nested", keras.Model(t, L.Dense(2, name="head")(L.Flatten(name="flat")(a)),
                                                  name="mask_nested"), {"x": padded_tokens(8, 20, rng)})
    keras.backend.clear_session()

    rng = seeded("mask_bilstm_seq")
    t = tokens_in(7)
    x = L.Embedding(20, 6, mask_zero=True, name="embedding")(t)
    x = L.Bidirectional(L.LSTM(4, return_sequences=True), name="bidirectional")(x)
    # The sequence itself is the output: Keras zeroes its masked steps.
    save_masked(index, "mask_bilstm_seq", keras.Model(t, L.Dense(2, name="head")(x), name="mask_bilstm_seq"),
                {"x": padded_tokens(7, 20, rng)})
    keras.backend.clear_session()
    return index


def legacy_masks():
    """tf_keras models: Keras 2 writes no masks into the config at all."""
    import numpy as np
    import tf_keras as K
    L = K.layers
    index = {}

    def seeded(name):
        seed = 46000 + zlib.crc32(name.encode()) % 1000
        K.utils.set_random_seed(seed)
        return np.random.default_rng(seed)

    rng = seeded("legacy_mask_lstm")
    t = K.Input((7,), dtype="int32", name="x")
    h = L.LSTM(5, name="lstm")(L.Embedding(20, 6, mask_zero=True, name="embedding")(t))
    save_masked(index, "legacy_mask_lstm", K.Model(t, L.Dense(3, name="head")(h), name="legacy_mask_lstm"),
                {"x": padded_tokens(7, 20, rng)}, legacy_file=True)

    rng = seeded("legacy_mask_bilstm")
    t = K.Input((7,), dtype="int32", name="x")
    h = L.Embedding(20, 6, mask_zero=True, name="embedding")(t)
    h = L.Bidirectional(L.LSTM(4), name="bidirectional")(h)
    save_masked(index, "legacy_mask_bilstm", K.Model(t, h, name="legacy_mask_bilstm"),
                {"x": padded_tokens(7, 20, rng)}, legacy_file=True)

    rng = seeded("legacy_mask_bilstm_seq")
    t = K.Input((7,), dtype="int32", name="x")
    h = L.Embedding(20, 6, mask_zero=True, name="embedding")(t)
    h = L.Bidirectional(L.LSTM(4, return_sequences=True), merge_mode="sum", name="bidirectional")(h)
    # The sequence itself is the output: Keras zeroes its masked steps.
    model = K.Model(t, L.Dense(5, name="dense")(h), name="legacy_mask_bilstm_seq")
    save_masked(index, "legacy_mask_bilstm_seq", model, {"x": padded_tokens(7, 20, rng)}, legacy_file=True)

    # Nested models: the first passes its input's mask out to an LSTM, the second pools with
    # the mask it is called on.
    rng = seeded("legacy_mask_nested")
    i = K.Input((7, 6), name="inner_in")
    inner = K.Model(i, L.Dense(6, activation="tanh", name="inner_dense")(i), name="inner")
    j = K.Input((7, 5), name="pool_in")
    pool = K.Model(j, L.GlobalAveragePooling1D(name="pool")(L.Dense(4, name="pool_dense")(j)), name="pooling")
    t = K.Input((7,), dtype="int32", name="x")
    h = inner(L.Embedding(20, 6, mask_zero=True, name="embedding")(t))
    h = pool(L.LSTM(5, return_sequences=True, name="lstm")(h))
    save_masked(index, "legacy_mask_nested", K.Model(t, L.Dense(2, name="head")(h), name="legacy_mask_nested"),
                {"x": padded_tokens(7, 20, rng)}, legacy_file=True)

    rng = seeded("legacy_mask_masking_gru")
    x = K.Input((7, 3), name="x")
    h = L.Masking(0.0, name="masking")(x)
    h = L.GRU(4, return_sequences=True, name="gru_seq")(h)
    h = L.GRU(3, name="gru")(h)
    xs = rng.uniform(-1, 1, (MASK_BATCH, 7, 3)).astype(np.float32)
    xs[0, 3] = 0.0
    xs[1, 5:] = 0.0
    xs[2, 0] = 0.0
    save_masked(index, "legacy_mask_masking_gru", K.Model(x, h, name="legacy_mask_masking_gru"), {"x": xs},
                legacy_file=True)

    # Keras 2's MultiHeadAttention keeps its inputs' masks: the residual Add AND-s them.
    rng = seeded("legacy_mask_transformer")
    t = K.Input((8,), dtype="int32", name="x")
    x = L.Embedding(20, 8, mask_zero=True, name="embedding")(t)
    a = L.MultiHeadAttention(2, 4, name="attention")(x, x)
    h = L.LayerNormalization(name="norm")(L.Add(name="residual")([x, a]))
    h = L.GlobalAveragePooling1D(name="pool")(L.Dense(8, activation="relu", name="ffn")(h))
    save_masked(index, "legacy_mask_transformer",
                K.Model(t, L.Dense(3, name="head")(h), name="legacy_mask_transformer"),
                {"x": padded_tokens(8, 20, rng)}, legacy_file=True)
    return index


def main():
    if "--legacy" in sys.argv:
        print(json.dumps(legacy()))
        return
    if "--legacy-masks" in sys.argv:
        print(json.dumps(legacy_masks()))
        return
    if "--masks" in sys.argv:
        os.makedirs(OUT, exist_ok=True)
        new = masks()
        env = dict(os.environ, TF_USE_LEGACY_KERAS="1")
        got = subprocess.run([sys.executable, __file__, "--legacy-masks"], env=env, check=True,
                             capture_output=True, text=True)
        new.update(json.loads(got.stdout.strip().splitlines()[-1]))
        path = os.path.join(OUT, "index.json")
        with open(path) as f:
            index = json.load(f)
        index.update(new)
        with open(path, "w") as f:
            json.dump(index, f, indent=1, sort_keys=True)
        print(f"{len(new)} mask models written, {len(index)} in the index")
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
