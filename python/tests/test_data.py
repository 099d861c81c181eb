"""ferroflow.data pipelines from Python: slices, Python and built-in maps, batching, shuffling,
caching, image folders."""
import os
import threading

import numpy as np
import pytest

import ferroflow as ff

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def test_slices_map_batch_repeat():
    x = np.arange(10, dtype=np.float32)
    y = np.arange(10, dtype=np.int64) % 3
    ds = ff.data.Dataset.from_tensor_slices((x, y)).map(lambda a, b: (a * 2, b)).batch(4).repeat(2)
    got = list(ds)
    assert len(got) == 6 and got[0][0].tolist() == [0, 2, 4, 6] and got[2][0].tolist() == [16, 18]
    assert got[0][1].dtype == np.int64
    single = list(ff.data.Dataset.from_tensor_slices(x).map(lambda a: a + 1).take(3))
    assert [float(v) for v in single] == [1.0, 2.0, 3.0]


def test_shuffle_is_a_permutation_and_seeded():
    x = np.arange(100, dtype=np.int32)
    a = [int(v) for v in ff.data.Dataset.from_tensor_slices(x).shuffle(100, seed=7)]
    b = [int(v) for v in ff.data.Dataset.from_tensor_slices(x).shuffle(100, seed=7)]
    assert sorted(a) == list(range(100)) and a == b and a != list(range(100))


def test_parallel_python_map_and_prefetch_cache():
    calls = []
    lock = threading.Lock()

    def f(v):
        with lock:
            calls.append(int(v))
        return v * v

    ds = ff.data.Dataset.from_tensor_slices(np.arange(50, dtype=np.int64)).map(f, num_parallel_calls=ff.data.AUTOTUNE)
    ds = ds.cache().prefetch(2)
    first = [int(v) for v in ds]
    second = [int(v) for v in ds]
    assert first == [i * i for i in range(50)] == second
    assert len(calls) == 50  # the second pass came from the cache


def test_a_raising_map_function_is_an_error_not_a_crash():
    def bad(v):
        raise RuntimeError("boom")

    with pytest.raises(ff.errors.OpError, match="boom"):
        list(ff.data.Dataset.from_tensor_slices(np.arange(3)).map(bad))


def test_image_folders(tmp_path):
    src = os.path.join(ROOT, "fixtures")
    candidates = sorted(os.path.join(d, f) for d, _, fs in os.walk(src) for f in fs if f.endswith(".jpg"))
    jpegs = []
    for p in candidates:  # the fixtures hold damaged JPEGs too: keep six that decode
        try:
            list(ff.data.Dataset.from_tensor_slices(np.array([p.encode()], dtype=object)).map(ff.data.load_image()))
            jpegs.append(p)
        except ff.errors.OpError:
            pass
        if len(jpegs) == 6:
            break
    if len(jpegs) < 2:
        pytest.skip("no JPEG fixtures")
    for i, p in enumerate(jpegs):
        d = tmp_path / ("cats" if i % 2 else "dogs")
        d.mkdir(exist_ok=True)
        (d / f"{i}.jpg").write_bytes(open(p, "rb").read())
    ds = ff.keras.utils.image_dataset_from_directory(str(tmp_path), image_size=(32, 24), batch_size=4, seed=1)
    assert ds.class_names == ["cats", "dogs"]
    batches = list(ds)
    assert sum(b[0].shape[0] for b in batches) == len(jpegs)
    assert batches[0][0].shape[1:] == (32, 24, 3) and batches[0][0].dtype == np.float32
    files = ff.data.Dataset.list_files(str(tmp_path / "*" / "*.jpg"), shuffle=False)
    imgs = list(files.map(ff.data.load_image((16, 16)), num_parallel_calls=2).batch(8))
    assert imgs[0].shape == (len(jpegs), 16, 16, 3)
    with pytest.raises(ff.errors.OpError):
        list(ff.data.Dataset.from_tensor_slices(np.array([b"/no/such.jpg"], dtype=object)).map(ff.data.load_image()))
