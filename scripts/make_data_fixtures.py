#!/usr/bin/env python3
"""Writes the input-pipeline fixtures (fixtures/data/) that `cargo test` checks ferroflow against.

- flowers_tiny/: three class folders of small photo-like JPEGs (and one PNG) of varied sizes.
- keras_batches.npz: Keras 3 `image_dataset_from_directory(flowers_tiny, image_size=(40, 48),
  batch_size=4, shuffle=False)` batches as images0, labels0, images1, ... (float32 / int32).
- resize_224.npz: `decode_jpeg` (uint8) and `tf.image.resize(.., (224, 224))` of one JPEG.
- read_decode_resize.pb: a frozen graph placeholder(string) -> ReadFile -> DecodeJpeg ->
  resize(224) (the file name is fed at run time).
- examples.tfrecord + examples_parsed.npz: tf.train.Examples written by TensorFlow's
  TFRecordWriter, and `tf.io.parse_example` of them (fixed, defaulted and var-len features).
- shuffle_first.npy: how often each element comes first and second in
  `range(10).shuffle(3, seed=s).take(2)` over 3,000 seeds (TF's buffer semantics).
- iterator.pb: a TF1 graph whose input comes from an iterator: `Iterator.from_structure(
  (float32 [?, 2], int32 [?]), shared_name="train")` (IteratorV2) -> get_next (IteratorGetNext)
  -> reduce_sum(x) as `total` (ferroflow attaches a Dataset under "train").

Run: .venv/bin/pip install tensorflow-cpu==2.21.0 pillow
     .venv/bin/python scripts/make_data_fixtures.py [--only NAME]   (NAME: a function below)
"""
import io
import os
import shutil
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from PIL import Image  # noqa: E402
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_images import photo  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "data")


def flowers(root):
    shutil.rmtree(root, ignore_errors=True)
    sizes = [(45, 60), (61, 37), (50, 50), (33, 71), (64, 48)]
    seed = 0
    for ci, cls in enumerate(["daisy", "roses", "tulips"]):
        os.makedirs(os.path.join(root, cls))
        for i in range(3 + ci % 2):
            h, w = sizes[(ci + i) % len(sizes)]
            seed += 1
            img = photo(h, w, seed)
            img[..., ci] = np.clip(img[..., ci].astype(int) + 40, 0, 255)  # a class colour cast
            name = os.path.join(root, cls, f"{cls}_{i:02d}.jpg")
            Image.fromarray(img).save(name, "JPEG", quality=85, subsampling=[0, 1, 2][i % 3])
    # One PNG among the JPEGs (decode_image handles both).
    Image.fromarray(photo(40, 52, 99)).save(os.path.join(root, "roses", "roses_png.png"))


def keras_batches(root):
    ds = tf.keras.utils.image_dataset_from_directory(root, image_size=(40, 48), batch_size=4, shuffle=False)
    arrays = {"class_names": np.array(ds.class_names, dtype="S")}
    for i, (x, y) in enumerate(ds):
        arrays[f"images{i}"] = x.numpy().astype(np.float32)
        arrays[f"labels{i}"] = y.numpy().astype(np.int32)
    np.savez(os.path.join(OUT, "keras_batches.npz"), **arrays)
    print(f"keras_batches: {len(arrays) // 2} batches, classes {ds.class_names}")


def resize_fixtures(root):
    path = os.path.join(root, "daisy", "daisy_00.jpg")
    raw = tf.io.read_file(path)
    img = tf.io.decode_jpeg(raw, channels=3)
    resized = tf.image.resize(img, (224, 224))
    np.savez(os.path.join(OUT, "resize_224.npz"), decoded=img.numpy(), resized=resized.numpy())

    @tf.function
    def pipeline(p):
        x = tf.io.decode_jpeg(tf.io.read_file(p), channels=3)
        return tf.identity(tf.image.resize(x, (224, 224)), name="out")

    concrete = pipeline.get_concrete_function(tf.TensorSpec([], tf.string, name="path"))
    gd = convert_variables_to_constants_v2(concrete).graph.as_graph_def()
    with open(os.path.join(OUT, "read_decode_resize.pb"), "wb") as f:
        f.write(gd.SerializeToString(deterministic=True))
    print("read_decode_resize:", sorted({n.op for n in gd.node}))


def image_ops_graph(root):
    """A frozen graph with every image op: ReadFile, ExtractJpegShape, DecodeImage, EncodePng,
    DecodePng, EncodeJpeg, WriteFile, DecodeJpeg, ReverseV2 (flip) and AdjustContrastv2."""

    @tf.function
    def ops(path, out_path):
        raw = tf.io.read_file(path)
        shape = tf.identity(tf.io.extract_jpeg_shape(raw), name="shape")
        img = tf.io.decode_image(raw, channels=3, expand_animations=False)
        decoded = tf.identity(img, name="decoded")
        back = tf.identity(tf.io.decode_png(tf.io.encode_png(img), channels=3), name="png_round_trip")
        jpg = tf.io.encode_jpeg(img, quality=90)
        with tf.control_dependencies([tf.io.write_file(out_path, jpg)]):
            encoded = tf.identity(jpg, name="encoded")
        rejpg = tf.identity(tf.io.decode_jpeg(jpg), name="jpeg_round_trip")
        f = tf.image.convert_image_dtype(img, tf.float32)
        flipped = tf.identity(tf.image.flip_left_right(f), name="flipped")
        contrast = tf.identity(tf.image.adjust_contrast(f, 1.7), name="contrast")
        return shape, decoded, back, encoded, rejpg, flipped, contrast

    specs = [tf.TensorSpec([], tf.string, name="path"), tf.TensorSpec([], tf.string, name="out_path")]
    gd = convert_variables_to_constants_v2(ops.get_concrete_function(*specs)).graph.as_graph_def()
    with open(os.path.join(OUT, "image_ops.pb"), "wb") as f:
        f.write(gd.SerializeToString(deterministic=True))
    path = os.path.join(root, "tulips", "tulips_01.jpg")
    out = ops(tf.constant(path), tf.constant(os.path.join(OUT, "tmp_written.jpg")))
    os.remove(os.path.join(OUT, "tmp_written.jpg"))
    names = ["shape", "decoded", "png_round_trip", "encoded", "jpeg_round_trip", "flipped", "contrast"]
    arrays = {n: o.numpy() for n, o in zip(names, out)}
    arrays["encoded"] = np.frombuffer(arrays["encoded"], dtype=np.uint8)
    np.savez(os.path.join(OUT, "image_ops.npz"), **arrays)
    print("image_ops:", sorted({n.op for n in gd.node}))


def tfrecords():
    path = os.path.join(OUT, "examples.tfrecord")
    rng = np.random.default_rng(7)
    serialized = []
    with tf.io.TFRecordWriter(path) as w:
        for i in range(5):
            feat = {
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=rng.normal(size=3).astype(np.float32))),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 2])),
                "tags": tf.train.Feature(int64_list=tf.train.Int64List(value=list(range(i)))),
            }
            if i != 2:
                feat["name"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[f"item{i}".encode()]))
            ex = tf.train.Example(features=tf.train.Features(feature=feat)).SerializeToString()
            serialized.append(ex)
            w.write(ex)
    spec = {
        "x": tf.io.FixedLenFeature([3], tf.float32),
        "label": tf.io.FixedLenFeature([], tf.int64),
        "name": tf.io.FixedLenFeature([], tf.string, default_value="none"),
        "tags": tf.io.VarLenFeature(tf.int64),
    }
    records = [r.numpy() for r in tf.data.TFRecordDataset(path)]
    p = tf.io.parse_example(tf.constant(records), spec)
    np.savez(
        os.path.join(OUT, "examples_parsed.npz"),
        x=p["x"].numpy(),
        label=p["label"].numpy(),
        name=p["name"].numpy().astype("S"),
        tags_indices=p["tags"].indices.numpy(),
        tags_values=p["tags"].values.numpy(),
        tags_dense_shape=p["tags"].dense_shape.numpy(),
        # Raw bytes (numpy's S dtype would drop trailing NUL bytes).
        records_concat=np.frombuffer(b"".join(records), dtype=np.uint8),
        records_len=np.array([len(r) for r in records], dtype=np.int64),
    )


def shuffle_stats():
    counts = np.zeros((2, 10), dtype=np.int64)
    for s in range(3000):
        a, b = [int(v) for v in tf.data.Dataset.range(10).shuffle(3, seed=s).take(2)]
        counts[0, a] += 1
        counts[1, b] += 1
    np.save(os.path.join(OUT, "shuffle_first.npy"), counts)
    print("shuffle first/second element counts:\n", counts)


def iterator_graph():
    g = tf.Graph()
    with g.as_default():
        it = tf.compat.v1.data.Iterator.from_structure(
            (tf.float32, tf.int32), (tf.TensorShape([None, 2]), tf.TensorShape([None])), shared_name="train")
        x, _ = it.get_next(name="next")
        tf.reduce_sum(x, name="total")
    gd = g.as_graph_def()
    with open(os.path.join(OUT, "iterator.pb"), "wb") as f:
        f.write(gd.SerializeToString(deterministic=True))
    print("iterator:", [(n.name, n.op) for n in gd.node])


def main():
    os.makedirs(OUT, exist_ok=True)
    if len(sys.argv) == 3 and sys.argv[1] == "--only":
        globals()[sys.argv[2]]()
        return
    root = os.path.join(OUT, "flowers_tiny")
    flowers(root)
    keras_batches(root)
    resize_fixtures(root)
    image_ops_graph(root)
    tfrecords()
    shuffle_stats()
    iterator_graph()


if __name__ == "__main__":
    main()
