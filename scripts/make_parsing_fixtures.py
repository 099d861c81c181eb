#!/usr/bin/env python3
"""Writes the `tf.train.Example` parsing fixtures that `crates/ferroflow/tests/parsing.rs`
checks ferroflow against: `tf.io.parse_example` (ParseExampleV2) with FixedLenFeature (float,
int64, string; scalar, vector and matrix shapes; with and without defaults),
FixedLenSequenceFeature (padded variable-length dense), VarLenFeature (sparse) and
RaggedFeature, over a batch and over one scalar example; TF1's ParseExample and
ParseSingleExample; and inputs TensorFlow refuses (a malformed proto, a missing required
feature, a wrong value count, a wrong kind).

Each fixture is a frozen tf.function written as binary .pb (the serialized examples are fed to
its string placeholder), the inputs (.inputs.npz, keyed by tensor name) and TensorFlow's
outputs (.expected.npz, keyed by tensor name; strings as fixed-width bytes); MANIFEST lists
each with its op types. errors.inputs.npz holds bad batches (keyed by case) fed to the `fixed`
graph, and ERRORS lists each case, the feature its message must name, and TensorFlow's message.
Serialized examples are stored as numpy bytes (`|S`), which drops trailing NULs: the script
checks that none ends with one.

Run:  .venv/bin/python scripts/make_parsing_fixtures.py
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "parsing")
manifest = []


def feature(v):
    if isinstance(v, tf.train.Feature):
        return v
    if v is None:
        return tf.train.Feature()  # no list set: reads as missing
    if len(v) and isinstance(v[0], float):
        return tf.train.Feature(float_list=tf.train.FloatList(value=v))
    if len(v) and isinstance(v[0], int):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=v))
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=v))


def empty_ints():
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[]))


def empty_floats():
    return tf.train.Feature(float_list=tf.train.FloatList(value=[]))


def example(**features):
    """A serialized tf.train.Example (map keys sorted). One that would end in a NUL byte (an
    empty list last, a 0 last) gets an unused feature `~end` (sorted last) so that it does not."""
    ex = tf.train.Example(features=tf.train.Features(feature={k: feature(v) for k, v in features.items()}))
    s = ex.SerializeToString(deterministic=True)
    if s.endswith(b"\0"):
        ex.features.feature["~end"].bytes_list.value.append(b".")
        s = ex.SerializeToString(deterministic=True)
    assert not s.endswith(b"\0")
    return s


def as_numpy(t):
    v = t.numpy()
    if v.dtype == object:
        flat = [bytes(x) for x in v.reshape(-1)]
        assert not any(x.endswith(b"\0") for x in flat)
        width = max([len(x) for x in flat] + [1])
        v = np.array(flat, dtype=f"S{width}").reshape(v.shape)
    return v


def flatten(parsed):
    """A parse's outputs in key order; a SparseTensor as indices, values, dense_shape and a
    RaggedTensor as values, row_splits."""
    out = []
    for k in sorted(parsed):
        v = parsed[k]
        if isinstance(v, tf.SparseTensor):
            out += [v.indices, v.values, v.dense_shape]
        elif isinstance(v, tf.RaggedTensor):
            out += [v.values, v.row_splits]
        else:
            out.append(v)
    return out


def save(name, fn, feeds, specs):
    """Freezes `fn` for `specs` (the batch dimension left unknown), runs it on `feeds` and
    writes the fixture files."""
    concrete = tf.function(fn).get_concrete_function(*specs)
    frozen = convert_variables_to_constants_v2(concrete)
    gd = frozen.graph.as_graph_def()
    with open(os.path.join(OUT, f"{name}.pb"), "wb") as f:
        f.write(gd.SerializeToString(deterministic=True))
    in_names = [t.name for t in frozen.inputs]
    outs = frozen(*[tf.constant(v) for v in feeds])
    out_names = [t.name for t in frozen.outputs]
    np.savez(os.path.join(OUT, f"{name}.inputs.npz"), **dict(zip(in_names, feeds)))
    np.savez(os.path.join(OUT, f"{name}.expected.npz"), **{n: as_numpy(o) for n, o in zip(out_names, outs)})
    ops = sorted({n.op for n in gd.node})
    manifest.append(f"{name} 0 0 {' '.join(ops)}")
    print(f"{name}: {len(gd.node)} nodes, {len(outs)} outputs, ops {ops}")
    return gd


def strings(values):
    width = max([len(v) for v in values] + [1])
    return np.array(values, dtype=f"S{width}")


BATCH = tf.TensorSpec([None], tf.string, name="serialized")
SCALAR = tf.TensorSpec([], tf.string, name="serialized")

FIXED = {
    "f_scalar": tf.io.FixedLenFeature([], tf.float32, default_value=-1.5),
    "f_vec": tf.io.FixedLenFeature([3], tf.float32),
    "i_scalar": tf.io.FixedLenFeature([], tf.int64, default_value=7),
    "i_mat": tf.io.FixedLenFeature([2, 2], tf.int64, default_value=[1, 2, 3, 4]),
    "s_scalar": tf.io.FixedLenFeature([], tf.string, default_value="none"),
    "s_vec": tf.io.FixedLenFeature([2], tf.string),
}


def fixed():
    batch = [
        example(f_scalar=[2.5], f_vec=[1.0, 2.0, 3.0], i_scalar=[-4], i_mat=[5, 6, 7, 8], s_scalar=[b"a"],
                s_vec=[b"x", b"y"], unused=[1.0, 2.0]),
        example(f_vec=[0.5, 0.25, -1.0], s_vec=[b"", b"zz"]),
        example(f_scalar=None, f_vec=[4.0, 5.0, 6.0], i_mat=[9, 9, 9, 9], s_vec=[b"p", b"q"], i_scalar=None),
        example(f_vec=[-7.0, 8.0, 1e30], s_scalar=[b"last"], s_vec=[b"r", b"s"], i_scalar=[1 << 40]),
    ]

    def f(serialized):
        return flatten(tf.io.parse_example(serialized, FIXED))

    save("fixed", f, [strings(batch)], [BATCH])
    save("fixed_empty_batch", f, [strings([])], [BATCH])
    errors()


def varlen():
    spec = {
        "vf": tf.io.VarLenFeature(tf.float32),
        "vi": tf.io.VarLenFeature(tf.int64),
        "vs": tf.io.VarLenFeature(tf.string),
    }
    batch = [
        example(vf=[1.0, 2.0], vi=[3], vs=[b"a", b"b", b"c"]),
        example(vi=empty_ints()),
        example(vf=None, vi=[4, 5, 6, 7], vs=[b"d"]),
        example(vf=[9.5], other=[1]),
        example(),
    ]

    def f(serialized):
        return flatten(tf.io.parse_example(serialized, spec))

    save("varlen", f, [strings(batch)], [BATCH])


def sequence():
    spec = {
        "qf": tf.io.FixedLenSequenceFeature([], tf.float32, allow_missing=True),
        "qi": tf.io.FixedLenSequenceFeature([2], tf.int64, allow_missing=True, default_value=9),
        "qs": tf.io.FixedLenSequenceFeature([], tf.string, allow_missing=True, default_value="pad"),
        "fixed": tf.io.FixedLenFeature([], tf.int64, default_value=0),
    }
    batch = [
        example(qf=[1.0, 2.0, 3.0], qi=[1, 2], qs=[b"a"], fixed=[3]),
        example(qi=[3, 4, 5, 6, 7, 8]),
        example(qf=empty_floats(), qs=[b"b", b"c", b"d", b"e"]),
        example(qf=None, qi=None, fixed=[5]),
    ]

    def f(serialized):
        return flatten(tf.io.parse_example(serialized, spec))

    save("sequence", f, [strings(batch)], [BATCH])


def ragged():
    spec = {
        "ri": tf.io.RaggedFeature(tf.int64),
        "rf": tf.io.RaggedFeature(tf.float32, row_splits_dtype=tf.int64),
        "rs": tf.io.RaggedFeature(tf.string),
        "d": tf.io.FixedLenFeature([], tf.float32, default_value=0.5),
    }
    batch = [
        example(ri=[1, 2, 3], rf=[0.5], rs=[b"x"], d=[1.0]),
        example(),
        example(ri=[4], rs=[b"y", b"z"], rf=[1.5, 2.5, 3.5]),
    ]

    def f(serialized):
        return flatten(tf.io.parse_example(serialized, spec))

    save("ragged", f, [strings(batch)], [BATCH])


def scalar():
    spec = {
        "f": tf.io.FixedLenFeature([2], tf.float32),
        "i": tf.io.FixedLenFeature([], tf.int64, default_value=3),
        "v": tf.io.VarLenFeature(tf.string),
        "q": tf.io.FixedLenSequenceFeature([], tf.int64, allow_missing=True, default_value=-1),
        "r": tf.io.RaggedFeature(tf.float32),
    }
    one = example(f=[1.5, -2.0], v=[b"a", b"bc"], q=[4, 5, 6], r=[0.25, 0.75])

    def f(serialized):
        return flatten(tf.io.parse_example(serialized, spec))

    save("scalar", f, [np.array(one, dtype=f"S{len(one)}")], [SCALAR])

    def single(serialized):
        return flatten(tf.io.parse_single_example(serialized, spec))

    save("single", single, [np.array(one, dtype=f"S{len(one)}")], [SCALAR])


def tf1_ops():
    """TF1's ParseExample (keys as one scalar input each) and ParseSingleExample (keys as attrs)."""
    r = tf.raw_ops
    batch = [
        example(a=[1.0, 2.0], s=[b"u", b"v"], n=[7]),
        example(s=[b"w"]),
        example(a=[3.0, 4.0], n=[8, 9]),
    ]

    def v1(serialized):
        out = r.ParseExample(
            serialized=serialized,
            names=tf.constant(["e0", "e1", "e2"]),
            sparse_keys=[tf.constant("s"), tf.constant("n")],
            dense_keys=[tf.constant("a"), tf.constant("b")],
            dense_defaults=[tf.constant([0.0, 0.0]), tf.constant(b"dflt")],
            sparse_types=[tf.string, tf.int64],
            dense_shapes=[[2], []],
        )
        return [*out.sparse_indices, *out.sparse_values, *out.sparse_shapes, *out.dense_values]

    save("parse_example_v1", v1, [strings(batch)], [BATCH])

    def single(serialized):
        out = r.ParseSingleExample(
            serialized=serialized,
            dense_defaults=[tf.constant([0.0, 0.0])],
            num_sparse=1,
            sparse_keys=["s"],
            dense_keys=["a"],
            sparse_types=[tf.string],
            dense_shapes=[[2]],
        )
        return [*out.sparse_indices, *out.sparse_values, *out.sparse_shapes, *out.dense_values]

    save("parse_single_example", single, [np.array(batch[0], dtype=f"S{len(batch[0])}")], [SCALAR])


def errors():
    """Bad batches for the `fixed` graph: what TensorFlow says of each."""
    good = dict(f_vec=[1.0, 2.0, 3.0], s_vec=[b"x", b"y"])
    cases = {
        # (batch, the feature the message must name ("" when none), what the message says)
        "malformed": ([example(**good), b"\x0a\x05abc"], "", "Could not parse example input"),
        "missing_required": ([example(**good), example(s_vec=[b"x", b"y"])], "f_vec", "is required"),
        "wrong_count": ([example(**good), example(f_vec=[1.0, 2.0], s_vec=[b"x", b"y"])], "f_vec", "Number of"),
        "wrong_kind": ([example(**good), example(f_vec=[1, 2, 3], s_vec=[b"x", b"y"])], "f_vec", "Data types"),
        "wrong_default_kind": ([example(i_scalar=[1.0], **good)], "i_scalar", "Data types"),
        "wrong_matrix_count": ([example(i_mat=[1, 2, 3], **good)], "i_mat", "Number of"),
    }
    fn = tf.function(lambda s: flatten(tf.io.parse_example(s, FIXED)))
    lines = ["# case feature expected-words | TensorFlow's message  (scripts/make_parsing_fixtures.py)"]
    arrays = {}
    for name, (batch, key, words) in cases.items():
        for s in batch:
            assert not s.endswith(b"\0")
        arrays[name] = strings(batch)
        try:
            fn(tf.constant(batch))
            raise SystemExit(f"{name}: TensorFlow accepted it")
        except tf.errors.InvalidArgumentError as e:
            msg = e.message.splitlines()[0]
            msg = msg.split("}} ", 1)[-1]
            if "Could not parse" in msg:
                msg = msg.split(", value:")[0]
            assert words in msg and key in msg, (name, msg)
            lines.append(f"{name} {key or '-'} {words.replace(' ', '_')} | {msg}")
    np.savez(os.path.join(OUT, "errors.inputs.npz"), **arrays)
    with open(os.path.join(OUT, "ERRORS"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("errors:", list(cases))


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    for fn in (fixed, varlen, sequence, ragged, scalar, tf1_ops):
        fn()
    with open(os.path.join(OUT, "MANIFEST"), "w") as f:
        f.write(f"# name rtol atol ops...  (written by scripts/make_parsing_fixtures.py with TensorFlow {tf.__version__})\n")
        f.write("\n".join(manifest) + "\n")
