#!/usr/bin/env python3
"""ferroflow fit against Keras fit on the same Keras file and batches (issue 45, point 4).

1. Keras writes the seed's model: EfficientNetB0 (include_top=False, random weights, its
   BatchNormalization statistics calibrated on a few images) called with training=False,
   global average pooling and Dense(classes) — seed 001's fine-tuning model — as MODEL.keras.
   Its blocks are built with drop_connect_rate=0 (Keras's EfficientNet builder; no Dropout
   layers, the rest identical): Keras 3 passes fit's training=True down through
   `base(x, training=False)`, so the blocks' dropout would draw random masks on each side.
2. Same data, same start: the first STEPS batches of the class folders in listing order
   (shuffle off), each side from the same .keras file.
   - phase 1 `--freeze-base`: only the head trains;
   - phase 2 `--unfreeze-top N`: the base's top N layers train too (BatchNormalization frozen).
   ferroflow: `ferroflow fit MODEL.keras DIR --no-shuffle --max-steps STEPS --log-every 1`;
   Keras: the same freezing, Adam (1e-3, then the guide's 1e-5 for fine-tuning),
   SparseCategoricalCrossentropy(from_logits=True),
   `train_on_batch` per batch (the loss of each step before its update, as ferroflow logs it).
   Per-step losses must agree within 1e-3 relative.
3. Speed: training steps/s of both in phase 1 and phase 2 — the median step after the first
   steps (warm-up: tracing, XLA, plan building), input wait included, both fed by the seed's
   pipeline over the same JPEGs (decode and resize on AUTOTUNE workers, batch, prefetch):
   Keras `fit` (step time from a batch callback), ferroflow fit (its "steady state" line) —
   and peak RSS of each process.

Run:  .venv/bin/python scripts/keras_fit_compare.py [--size 224] [--batch 32] [--steps 10]
"""
import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


WRAP = """
import json, resource, subprocess, sys
r = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(json.dumps({"rc": r.returncode, "out": r.stdout, "err": r.stderr,
                  "rss_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""


def listing(data_dir):
    """Files and labels as image_dataset_from_directory lists them (sorted classes, files)."""
    classes = sorted(d for d in os.listdir(data_dir) if os.path.isdir(os.path.join(data_dir, d)))
    files, labels = [], []
    for i, c in enumerate(classes):
        for f in sorted(os.listdir(os.path.join(data_dir, c))):
            if f.lower().endswith((".jpg", ".jpeg", ".png", ".bmp", ".gif")):
                files.append(os.path.join(data_dir, c, f))
                labels.append(i)
    return files, labels, classes


def keras_side(args):
    """Run in a subprocess: Keras's per-step losses and step times for one phase."""
    import numpy as np
    import tensorflow as tf
    import keras

    files, labels, _ = listing(args.data)
    n = args.steps * args.batch
    files, labels = files[:n], labels[:n]

    def load(p):
        img = tf.image.decode_jpeg(tf.io.read_file(p), channels=3)
        return tf.image.resize(img, [args.size, args.size])
    xs = np.stack([load(f).numpy() for f in files]).astype(np.float32)
    ys = np.asarray(labels, np.int64)
    model = keras.models.load_model(args.model)
    base = next(l for l in model.layers if isinstance(l, keras.Model))
    if args.phase == "freeze":
        base.trainable = False
    else:
        base.trainable = True
        for layer in base.layers[:-args.unfreeze]:
            layer.trainable = False
        for layer in base.layers:
            if isinstance(layer, keras.layers.BatchNormalization):
                layer.trainable = False
    model.compile(optimizer=keras.optimizers.Adam(args.lr),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    losses = []
    for i in range(args.steps):
        sl = slice(i * args.batch, (i + 1) * args.batch)
        out = model.train_on_batch(xs[sl], ys[sl], return_dict=True)
        losses.append(float(out["loss"]))
    # Speed: fit over the cached batches, per-step times from a callback.
    times = []

    class Timer(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            self.t = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            times.append(time.perf_counter() - self.t)
    # The seed's pipeline over the same files: decode and resize on AUTOTUNE workers, batch,
    # prefetch (what ferroflow's side runs too).
    all_files, all_labels, _ = listing(args.data)
    ds = (tf.data.Dataset.from_tensor_slices((all_files, np.asarray(all_labels, np.int64)))
          .map(lambda p, y: (load(p), y), num_parallel_calls=tf.data.AUTOTUNE)
          .batch(args.batch).repeat().prefetch(tf.data.AUTOTUNE))
    model.fit(ds, epochs=1, steps_per_epoch=args.speed_steps, verbose=0, callbacks=[Timer()])
    warm = times[args.warmup:] or times
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"losses": losses, "step_s": sorted(warm)[len(warm) // 2], "rss_mb": rss}))


def ferroflow_side(args, phase, data_dir, model, steps, speed=False):
    lr = args.lr if phase == "freeze" else args.lr2
    cmd = [args.binary, "fit", model, data_dir, "--no-shuffle", "--batch", str(args.batch), "--log-every", "1",
           "--learning-rate", str(lr), "--quiet", "--max-steps", str(steps)]
    cmd += ["--freeze-base"] if phase == "freeze" else ["--unfreeze-top", str(args.unfreeze)]
    t0 = time.perf_counter()
    # A wrapper process, so the peak RSS is this run's alone.
    r = subprocess.run([sys.executable, "-c", WRAP, *cmd], capture_output=True, text=True)
    got = json.loads(r.stdout.strip().splitlines()[-1])
    if got["rc"] != 0:
        sys.exit(f"ferroflow fit failed: {got['err'][-2000:]}")
    wall = time.perf_counter() - t0
    losses = [float(m.group(1)) for m in re.finditer(r"^\d+ step loss: (\S+)$", got["err"], re.M)]
    sps = float(re.search(r"steady state: ([\d.]+) steps/s", got["out"]).group(1))
    return losses, sps, got["rss_kb"] / 1024, wall


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--binary", default=os.path.join(ROOT, "target", "release", "ferroflow"))
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--speed-steps", type=int, default=12)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--unfreeze", type=int, default=20)
    p.add_argument("--lr", type=float, default=1e-3, help="phase 1's learning rate (Keras's default)")
    p.add_argument("--lr2", type=float, default=1e-5, help="phase 2's (the Keras guide's fine-tuning rate)")
    p.add_argument("--base", default="EfficientNetB0",
                   help="the keras.applications base (EfficientNetB0 without its blocks' dropout, or any other "
                        "constructor taking include_top/weights/input_shape: MobileNetV2, ResNet50V2, DenseNet121...)")
    p.add_argument("--work", default=None)
    p.add_argument("--keras-side", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--phase", default="freeze", help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    p.add_argument("--data", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.keras_side:
        keras_side(args)
        return

    work = args.work or tempfile.mkdtemp(prefix="keras_fit_")
    data = os.path.join(work, "flowers")
    per_class = -(-max(args.steps, args.speed_steps) * args.batch // 5)
    if not os.path.isdir(data):
        subprocess.run([args.binary, "flowers", data, "--per-class", str(per_class)], check=True, capture_output=True)
    model_path = os.path.join(work, f"{args.base.lower()}_{args.size}.keras")
    if not os.path.exists(model_path):
        import numpy as np
        import keras
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        sys.argv = sys.argv[:1]
        import make_zoo as Z
        keras.utils.set_random_seed(451)
        if args.base == "EfficientNetB0":
            from keras.src.applications import efficientnet
            base = efficientnet.EfficientNet(1.0, 1.0, 224, 0.2, drop_connect_rate=0.0, name="efficientnetb0",
                                             include_top=False, weights=None, input_shape=(args.size, args.size, 3))
        else:
            base = getattr(keras.applications, args.base)(include_top=False, weights=None,
                                                           input_shape=(args.size, args.size, 3))
        rng = np.random.default_rng(451)
        Z.calibrate_batch_norm(base, [rng.uniform(0, 255, (4, args.size, args.size, 3)).astype(np.float32)], rng)
        x = keras.Input((args.size, args.size, 3), name="image")
        h = keras.layers.GlobalAveragePooling2D(name="avg_pool")(base(x, training=False))
        model = keras.Model(x, keras.layers.Dense(5, name="predictions")(h), name="seed001")
        model.save(model_path)
        del model, base
    print(f"model {model_path}, data {data} ({per_class} images per class), batch {args.batch}, "
          f"{args.size}x{args.size}, {args.steps} steps per phase", flush=True)
    ok = True
    rows = []
    for phase in ("freeze", "unfreeze"):
        ff_losses, _, ff_rss, _ = ferroflow_side(args, phase, data, model_path, args.steps)
        _, ff_sps, ff_rss2, _ = ferroflow_side(args, phase, data, model_path, args.speed_steps)
        cmd = [sys.executable, __file__, "--keras-side", "--phase", phase, "--model", model_path, "--data", data,
               "--size", str(args.size), "--batch", str(args.batch), "--steps", str(args.steps),
               "--speed-steps", str(args.speed_steps), "--warmup", str(args.warmup),
               "--unfreeze", str(args.unfreeze), "--lr", str(args.lr if phase == "freeze" else args.lr2)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"keras side failed: {r.stderr[-3000:]}")
        k = json.loads(r.stdout.strip().splitlines()[-1])
        label = "--freeze-base" if phase == "freeze" else f"--unfreeze-top {args.unfreeze}"
        print(f"\n{label}: per-step training loss (ferroflow / Keras / relative difference)")
        worst = 0.0
        for i, (a, b) in enumerate(zip(ff_losses, k["losses"])):
            d = abs(a - b) / max(abs(b), 1e-12)
            worst = max(worst, d)
            print(f"  step {i + 1:2d}: {a:.6f} / {b:.6f} / {d:.1e}")
        if len(ff_losses) != len(k["losses"]) or worst > 1e-3:
            ok = False
        keras_sps = 1.0 / k["step_s"]
        ratio = ff_sps / keras_sps
        print(f"  worst relative difference {worst:.1e} ({'ok' if worst <= 1e-3 else 'ABOVE 1e-3'})")
        print(f"  training steps/s: ferroflow {ff_sps:.3f}, Keras fit {keras_sps:.3f} -> {ratio:.2f}x; "
              f"peak RSS ferroflow {max(ff_rss, ff_rss2):.0f} MB, Keras {k['rss_mb']:.0f} MB")
        rows.append((label, ff_sps, keras_sps, ratio, max(ff_rss, ff_rss2), k["rss_mb"], worst))
    print("\n| phase | ferroflow steps/s | Keras fit steps/s | ratio | ferroflow peak RSS MB | Keras peak RSS MB | max loss rel. diff |")
    print("|---|---|---|---|---|---|---|")
    for label, a, b, r, fr, kr, w in rows:
        print(f"| {label} | {a:.3f} | {b:.3f} | {r:.2f}x | {fr:.0f} | {kr:.0f} | {w:.1e} |")
    if not ok:
        sys.exit("losses differ by more than 1e-3 relative")


if __name__ == "__main__":
    main()
