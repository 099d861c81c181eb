#!/usr/bin/env python3
"""Writes the detection post-processing fixtures that `crates/ferroflow/tests/detection.rs`
checks ferroflow against: non-max suppression (V3, V4, V5 with soft-NMS, combined),
CropAndResize, TopKV2, Where, GatherNd, ScatterNd, TensorScatter*, and an SSD/RetinaNet-style
post-processing function (decode box deltas against anchors, sigmoid scores, combined NMS,
crop_and_resize of the kept boxes).

Each fixture is a frozen tf.function (convert_variables_to_constants_v2) written as binary
.pb, the inputs fed to it (.inputs.npz, keyed by tensor name) and TensorFlow's outputs
(.expected.npz, keyed by tensor name); MANIFEST lists each with its tolerances and op types.

Run:  TF_CPP_MIN_LOG_LEVEL=3 .venv/bin/python scripts/make_detection_fixtures.py
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import tensorflow as tf
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "detection")
rng = np.random.default_rng(20261205)
manifest = []
r = tf.raw_ops


def save(name, fn, feeds, rtol=1e-5, atol=1e-5, note=""):
    """Freezes `fn` for the feeds' shapes, runs it and writes the fixture files (rtol = atol =
    0: the outputs must be bit-identical)."""
    specs = [tf.TensorSpec(v.shape, tf.as_dtype(v.dtype), name=k) for k, v in feeds.items()]
    concrete = tf.function(fn).get_concrete_function(*specs)
    frozen = convert_variables_to_constants_v2(concrete)
    gd = frozen.graph.as_graph_def()
    with open(os.path.join(OUT, f"{name}.pb"), "wb") as f:
        f.write(gd.SerializeToString(deterministic=True))
    in_names = [t.name for t in frozen.inputs]
    outs = frozen(*[tf.constant(v) for v in feeds.values()])
    if not isinstance(outs, (list, tuple)):
        outs = [outs]
    out_names = [t.name for t in frozen.outputs]
    np.savez(os.path.join(OUT, f"{name}.inputs.npz"), **dict(zip(in_names, feeds.values())))
    np.savez(os.path.join(OUT, f"{name}.expected.npz"), **{n: o.numpy() for n, o in zip(out_names, outs)})
    ops = sorted({n.op for n in gd.node})
    manifest.append(f"{name} {rtol} {atol} {' '.join(ops)}" + (f"  # {note}" if note else ""))
    print(f"{name}: {len(gd.node)} nodes, ops {ops}")


def boxes(n, flip=0.2):
    """n boxes [y1, x1, y2, x2] in [0, 1], a fraction with corners swapped, some near-duplicates."""
    c = rng.uniform(0.1, 0.9, (n, 2))
    hw = rng.uniform(0.05, 0.4, (n, 2))
    b = np.concatenate([c - hw / 2, c + hw / 2], axis=1)
    b[1::7] = b[0::7][: len(b[1::7])] + rng.normal(0, 0.01, b[1::7].shape)
    flipped = rng.uniform(size=n) < flip
    b[flipped] = b[flipped][:, [2, 3, 0, 1]]
    return b.astype(np.float32)


def scores(n, ties=True):
    s = rng.uniform(0, 1, n).astype(np.float32)
    if ties:
        s = np.round(s * 8) / 8  # many equal scores: the tie order is TensorFlow's
    return s.astype(np.float32)


def nms():
    b, s = boxes(40), scores(40)

    def f(boxes, scores):
        return [
            tf.image.non_max_suppression(boxes, scores, 10, iou_threshold=0.5),
            tf.image.non_max_suppression(boxes, scores, 40, iou_threshold=0.3, score_threshold=0.4),
            tf.image.non_max_suppression(boxes, scores, 0),
            r.NonMaxSuppressionV3(boxes=boxes, scores=scores, max_output_size=100, iou_threshold=1.0,
                                  score_threshold=float("-inf")),
            r.NonMaxSuppressionV3(boxes=boxes, scores=scores, max_output_size=7, iou_threshold=0.0,
                                  score_threshold=0.2),
            r.NonMaxSuppression(boxes=boxes, scores=scores, max_output_size=10, iou_threshold=0.5),
            r.NonMaxSuppressionV2(boxes=boxes, scores=scores, max_output_size=12, iou_threshold=0.4),
        ]

    save("nms_v3", f, {"boxes": b, "scores": s}, rtol=0, atol=0)

    def g(boxes, scores):
        return [
            *r.NonMaxSuppressionV4(boxes=boxes, scores=scores, max_output_size=30, iou_threshold=0.5,
                                   score_threshold=0.25, pad_to_max_output_size=True),
            *r.NonMaxSuppressionV4(boxes=boxes, scores=scores, max_output_size=30, iou_threshold=0.5,
                                   score_threshold=0.25, pad_to_max_output_size=False),
            *tf.image.non_max_suppression_with_scores(boxes, scores, 15, iou_threshold=0.5, score_threshold=0.1),
            *tf.image.non_max_suppression_with_scores(boxes, scores, 15, iou_threshold=1.0, score_threshold=0.1,
                                                       soft_nms_sigma=0.5),
            *tf.image.non_max_suppression_with_scores(boxes, scores, 40, iou_threshold=0.6, score_threshold=0.05,
                                                       soft_nms_sigma=0.3),
            *r.NonMaxSuppressionV5(boxes=boxes, scores=scores, max_output_size=20, iou_threshold=0.5,
                                   score_threshold=0.2, soft_nms_sigma=0.2, pad_to_max_output_size=True),
        ]

    save("nms_v4_v5", g, {"boxes": b, "scores": s}, rtol=0, atol=0)

    def padded(boxes, scores):
        # TensorFlow 2 writes non_max_suppression_padded as its tiled algorithm in ordinary ops
        # (a while loop, GatherV2 with batch_dims), not as NonMaxSuppressionV4.
        return [*tf.image.non_max_suppression_padded(boxes[None], scores[None], 12, iou_threshold=0.45,
                                                     score_threshold=0.3, pad_to_max_output_size=True,
                                                     tile_size=16)]

    save("nms_padded", padded, {"boxes": b, "scores": s}, rtol=0, atol=0)


def combined():
    bq = np.stack([boxes(20) for _ in range(2)])  # [batch, n, 1, 4]: one box per anchor, all classes
    bq = bq[:, :, None, :] * 1.3 - 0.15
    sc = rng.uniform(0, 1, (2, 20, 3)).astype(np.float32)
    sc[0, :5, 1] = 0.75
    bp = np.stack([np.stack([boxes(20) for _ in range(3)], axis=1) for _ in range(2)])  # per-class boxes

    def f(bq, sc, bp):
        a = tf.image.combined_non_max_suppression(bq, sc, 6, 10, iou_threshold=0.5, score_threshold=0.2)
        b = tf.image.combined_non_max_suppression(bq, sc, 4, 8, iou_threshold=0.4, score_threshold=0.1,
                                                   pad_per_class=True, clip_boxes=False)
        c = tf.image.combined_non_max_suppression(bp, sc, 5, 30, iou_threshold=0.5, score_threshold=0.3,
                                                   pad_per_class=False, clip_boxes=False)
        d = tf.image.combined_non_max_suppression(bp, sc, 3, 4, iou_threshold=0.6, score_threshold=0.0,
                                                   pad_per_class=True)
        return [*a, *b, *c, *d]

    save("combined_nms", f, {"bq": bq.astype(np.float32), "sc": sc, "bp": bp.astype(np.float32)}, rtol=0, atol=0)


def crop():
    img = rng.uniform(0, 1, (2, 9, 11, 3)).astype(np.float32)
    bx = np.array([[0.1, 0.2, 0.8, 0.9], [0.9, 0.8, 0.1, 0.2], [-0.3, -0.2, 1.4, 1.1], [0.5, 0.5, 0.5, 0.5],
                   [0.0, 0.0, 1.0, 1.0], [0.3, 0.7, 0.35, 0.2]], np.float32)
    ind = np.array([0, 1, 1, 0, 1, 0], np.int32)

    def f(img, bx, ind):
        return [
            tf.image.crop_and_resize(img, bx, ind, [5, 4]),
            tf.image.crop_and_resize(img, bx, ind, [1, 1]),
            tf.image.crop_and_resize(img, bx, ind, [4, 6], method="nearest", extrapolation_value=-1.0),
            tf.image.crop_and_resize(img, bx, ind, [3, 7], extrapolation_value=0.5),
            tf.image.crop_and_resize(tf.cast(img * 255, tf.int32), bx, ind, [3, 3]),
        ]

    save("crop_and_resize", f, {"img": img, "bx": bx, "ind": ind})


def topk_where_gather():
    x = np.round(rng.uniform(-2, 2, (3, 10)) * 2).astype(np.float32) / 2  # ties
    xi = rng.integers(-5, 5, (2, 9)).astype(np.int32)
    xl = rng.integers(-5, 5, (4, 6)).astype(np.int64)
    p = rng.uniform(-1, 1, (3, 4, 5)).astype(np.float32)

    def f(x, xi, xl, p):
        return [
            *tf.math.top_k(x, 4), *tf.math.top_k(x, 10, sorted=False), *tf.math.top_k(x, 0),
            *tf.math.top_k(xi, 5), *tf.math.top_k(xl, 6, sorted=False),
            tf.where(x > 0.5), tf.where(x > 0.0, x, -x * 2.0), tf.where(xl), tf.where(xi > 0, xi, xi * 10),
            tf.gather_nd(p, tf.constant([[2, 1], [0, 3]], tf.int64)),
            tf.gather_nd(p, [[[1, 2, 3]], [[0, 0, 4]]]),
            tf.gather_nd(p, [[1], [2], [0]]),
            tf.gather_nd(p, [[2, 1], [0, 3], [1, 0]], batch_dims=1),
            tf.gather_nd(p, tf.constant([[[1, 4], [0, 0]], [[2, 2], [3, 1]], [[0, 1], [1, 1]]], tf.int64),
                         batch_dims=1),
        ]

    save("topk_where_gather", f, {"x": x, "xi": xi, "xl": xl, "p": p}, rtol=0, atol=0)


def scatter():
    t = rng.uniform(-1, 1, (5, 4)).astype(np.float32)
    ti = rng.integers(-9, 9, (4, 3, 2)).astype(np.int32)
    idx = np.array([[1], [3], [1], [0]], np.int32)
    up = rng.uniform(-1, 1, (4, 4)).astype(np.float32)
    idx2 = np.array([[0, 1], [2, 0], [0, 1], [3, 2]], np.int64)
    up2 = rng.integers(-9, 9, (4, 2)).astype(np.int32)

    def f(t, ti, idx, up, idx2, up2):
        return [
            tf.scatter_nd(idx, up, [6, 4]),
            tf.scatter_nd(idx2, up2, tf.constant([4, 3, 2], tf.int64)),
            tf.tensor_scatter_nd_update(t, [[4], [2]], up[:2]),
            tf.tensor_scatter_nd_add(t, idx, up),
            tf.tensor_scatter_nd_sub(t, idx, up),
            tf.tensor_scatter_nd_max(t, idx, up),
            tf.tensor_scatter_nd_min(t, idx, up),
            tf.tensor_scatter_nd_add(ti, idx2, up2),
            tf.tensor_scatter_nd_max(ti, idx2, up2),
            tf.tensor_scatter_nd_update(t, [[1, 2], [4, 0]], [7.0, 8.0]),
        ]

    save("scatter", f, {"t": t, "ti": ti, "idx": idx, "up": up, "idx2": idx2, "up2": up2}, rtol=0, atol=0)


def decode(deltas, anchors):
    """Faster R-CNN box coding (scales 10, 10, 5, 5) of [.., 4] deltas against [ycenter..] anchors."""
    ya, xa = (anchors[:, 0] + anchors[:, 2]) / 2, (anchors[:, 1] + anchors[:, 3]) / 2
    ha, wa = anchors[:, 2] - anchors[:, 0], anchors[:, 3] - anchors[:, 1]
    ty, tx, th, tw = tf.unstack(deltas, axis=-1)
    h, w = tf.exp(th / 5.0) * ha, tf.exp(tw / 5.0) * wa
    yc, xc = ty / 10.0 * ha + ya, tx / 10.0 * wa + xa
    return tf.stack([yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2], axis=-1)


def ssd_postprocess():
    n, classes = 48, 4
    g = np.linspace(0.1, 0.9, 4)
    anchors = np.array([[y - s, x - s, y + s, x + s] for y in g for x in g for s in (0.08, 0.15, 0.25)],
                       np.float32)
    assert len(anchors) == n
    img = rng.uniform(0, 1, (2, 16, 16, 3)).astype(np.float32)
    deltas = rng.normal(0, 0.5, (2, n, 4)).astype(np.float32)
    logits = rng.normal(-1.5, 1.5, (2, n, classes)).astype(np.float32)
    anchors_c = tf.constant(anchors)

    def f(img, deltas, logits):
        bx = decode(deltas, anchors_c)
        probs = tf.sigmoid(logits)
        nb, ns, ncls, valid = tf.image.combined_non_max_suppression(
            bx[:, :, None, :], probs, max_output_size_per_class=5, max_total_size=8,
            iou_threshold=0.5, score_threshold=0.3)
        flat = tf.reshape(nb, [-1, 4])
        ind = tf.repeat(tf.range(2), 8)
        crops = tf.image.crop_and_resize(img, flat, ind, [4, 4])
        keep = tf.sequence_mask(valid, 8)
        return [nb, ns, ncls, valid, crops, tf.where(keep)]

    save("ssd_postprocess", f, {"img": img, "deltas": deltas, "logits": logits}, rtol=1e-4, atol=1e-5)

    def per_class(deltas, logits):
        """The RetinaNet variant: per image, per class NMS (V5) and a top-k over the survivors."""
        bx = decode(deltas[0], anchors_c)
        probs = tf.sigmoid(logits[0])
        out_s, out_c, out_b = [], [], []
        for c in range(classes):
            sel, sc = tf.image.non_max_suppression_with_scores(bx, probs[:, c], 6, 0.5, 0.2)
            out_s.append(sc)
            out_c.append(tf.fill(tf.shape(sel), c))
            out_b.append(tf.gather(bx, sel))
        s = tf.concat(out_s, 0)
        top, i = tf.math.top_k(s, tf.minimum(10, tf.size(s)))
        return [top, tf.gather(tf.concat(out_c, 0), i), tf.gather(tf.concat(out_b, 0), i)]

    save("retinanet_postprocess", per_class, {"deltas": deltas, "logits": logits}, rtol=1e-4, atol=1e-5)


def crop_grad():
    """CropAndResize's gradients (ROI-align training): against the image (bilinear and nearest)
    and the boxes (bilinear), boxes inside, flipped, reaching outside and of one pixel."""
    img = rng.uniform(0, 1, (2, 7, 8, 3)).astype(np.float32)
    bx = np.array([[0.1, 0.2, 0.8, 0.9], [0.9, 0.8, 0.1, 0.2], [-0.3, -0.2, 1.4, 1.1], [0.5, 0.4, 0.55, 0.5],
                   [0.2, 0.1, 0.6, 0.7]], np.float32)
    ind = np.array([0, 1, 1, 0, 1], np.int32)
    w = rng.uniform(-1, 1, (5, 4, 3, 3)).astype(np.float32)

    def f(img, bx, ind, w):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch([img, bx])
            a = tf.reduce_sum(tf.image.crop_and_resize(img, bx, ind, [4, 3]) * w)
            b = tf.reduce_sum(tf.image.crop_and_resize(img, bx, ind, [1, 1]) * w[:, :1, :1])
            c = tf.reduce_sum(tf.image.crop_and_resize(img, bx, ind, [4, 3], method="nearest") * w)
        return [*tape.gradient(a, [img, bx]), *tape.gradient(b, [img, bx]), tape.gradient(c, img)]

    save("crop_and_resize_grad", f, {"img": img, "bx": bx, "ind": ind, "w": w})


def cumulative():
    """Cumsum and Cumprod (exclusive, reverse), and TensorFlow's gradient of reduce_prod over an
    axis with zeros in it (its graph: exclusive cumulative products from both ends)."""
    x = rng.uniform(-1.5, 1.5, (3, 5, 4)).astype(np.float32)
    x[0, 2, 1] = 0.0
    x[1, 1, 3] = x[1, 3, 3] = 0.0

    def f(x):
        outs = []
        for op in (tf.math.cumsum, tf.math.cumprod):
            for ex in (False, True):
                for rev in (False, True):
                    outs.append(op(x, axis=1, exclusive=ex, reverse=rev))
        with tf.GradientTape() as tape:
            tape.watch(x)
            p = tf.reduce_sum(tf.reduce_prod(x, axis=1) * np.linspace(-1, 1, 12).reshape(3, 4).astype(np.float32))
        outs.append(tape.gradient(p, x))
        return outs

    save("cumulative", f, {"x": x})


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    nms()
    combined()
    crop()
    topk_where_gather()
    scatter()
    ssd_postprocess()
    crop_grad()
    cumulative()
    with open(os.path.join(OUT, "MANIFEST"), "w") as f:
        f.write(f"# name rtol atol ops...  (written by scripts/make_detection_fixtures.py with "
                f"TensorFlow {tf.__version__})\n")
        f.write("\n".join(manifest) + "\n")
