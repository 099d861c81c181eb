"""ferroflow's Python package: graphs from raw ops, sessions, NumPy in and out, errors."""
import signal
import threading
import time

import numpy as np
import pytest

import ferroflow as ff


@pytest.fixture(autouse=True)
def fresh_graph():
    ff.reset_default_graph()
    yield


def mlp():
    x = ff.placeholder(ff.float32, [None, 3], name="x")
    w = ff.constant(np.arange(6, dtype=np.float32).reshape(3, 2), name="w")
    y = ff.raw_ops.Relu(features=ff.raw_ops.MatMul(a=x, b=w) - 4.0, name="y")
    return x, y


def test_run_returns_the_fetch_structure():
    x, y = mlp()
    feed = np.array([[1, 2, 3], [-1, 0, 1]], np.float32)
    want = np.maximum(feed @ np.arange(6, dtype=np.float32).reshape(3, 2) - 4.0, 0)
    with ff.Session() as sess:
        got = sess.run({"a": y, "b": [y, ("y:0", x)]}, feed_dict={x: feed})
        np.testing.assert_array_equal(got["a"], want)
        np.testing.assert_array_equal(got["b"][0], want)
        assert isinstance(got["b"][1], tuple)
        np.testing.assert_array_equal(got["b"][1][1], feed)
        # Names as keys, Python lists converted to the placeholder's dtype.
        np.testing.assert_array_equal(sess.run("y:0", {"x:0": feed.tolist()}), want)
        assert sess.run(y.op, {x: feed}) is None


def test_outputs_are_read_only_views_of_the_tensor():
    x, y = mlp()
    with ff.Session() as sess:
        out = sess.run(y, {x: np.ones((4, 3), np.float32)})
    assert type(out.base).__name__ == "Buffer"
    assert not out.flags.writeable and not out.flags.owndata
    with pytest.raises(ValueError):
        out[0, 0] = 1.0


def test_a_large_fetch_is_not_copied():
    x = ff.placeholder(ff.float32, [None], name="x")
    y = ff.raw_ops.Identity(input=x * 1.0)
    big = np.ones(25_000_000, np.float32)  # 100 MB
    with ff.Session() as sess:
        out = sess.run(y, {x: big})
    assert out.base.nbytes == big.nbytes
    assert out.shape == big.shape and out[12345] == 1.0


def test_feeds_are_read_in_place_and_never_written():
    x = ff.placeholder(ff.float32, [None], name="x")
    same = ff.raw_ops.Identity(input=x)
    plus = ff.raw_ops.AddV2(x=x, y=ff.constant(np.float32(1.0)))
    feed = np.arange(1000, dtype=np.float32)
    with ff.Session() as sess:
        got_same, got_plus = sess.run([same, plus], {x: feed})
        # The fetched Identity is the fed array's own memory: neither side copied it.
        assert np.shares_memory(got_same, feed)
        # A kernel free to update its input in place copies a fed array instead.
        np.testing.assert_array_equal(got_plus, np.arange(1000, dtype=np.float32) + 1)
        np.testing.assert_array_equal(feed, np.arange(1000, dtype=np.float32))
        # Layouts that cannot be read in place are copied: strided, big-endian, Fortran order.
        for odd in (feed[::2], feed.astype(">f4"), np.asfortranarray(feed.reshape(10, 100)).ravel(order="K")):
            got = sess.run(same, {x: odd})
            np.testing.assert_array_equal(got, np.asarray(odd, np.float32))
    # The output keeps the fed memory alive after the feed's own name is gone.
    del feed
    import gc

    gc.collect()
    assert got_same[999] == 999.0


def test_a_variable_assigned_from_a_feed_does_not_follow_the_array():
    v = ff.raw_ops.VarHandleOp(dtype=ff.float32, shape=[3], shared_name="v", name="v")
    x = ff.placeholder(ff.float32, [3], name="x")
    assign = ff.raw_ops.AssignVariableOp(resource=v, value=x)
    read = ff.raw_ops.ReadVariableOp(resource=v, dtype=ff.float32)
    feed = np.array([1, 2, 3], np.float32)
    with ff.Session() as sess:
        sess.run(assign, {x: feed})
        feed[:] = -1
        np.testing.assert_array_equal(sess.run(read), [1, 2, 3])


def test_a_large_feed_is_not_copied():
    import resource

    x = ff.placeholder(ff.float32, [None], name="x")
    total = ff.raw_ops.Sum(input=x, axis=ff.constant(np.int32(0)))
    big = np.ones(50_000_000, np.float32)  # 200 MB
    with ff.Session() as sess:
        sess.run(total, {x: big[:10]})
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        assert sess.run(total, {x: big}) == 50_000_000
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    # A copy of the feed would raise the peak by 200 MB (ru_maxrss is in KiB).
    assert grown < 100_000, grown


def test_errors_are_tensorflows_classes():
    x, y = mlp()
    with ff.Session() as sess:
        with pytest.raises(ff.errors.InvalidArgumentError, match="expected shape"):
            sess.run(y, {x: np.ones((2, 4), np.float32)})
        with pytest.raises(ff.errors.NotFoundError, match="nope"):
            sess.run("nope:0")
        with pytest.raises(ff.errors.InvalidArgumentError):
            sess.run(y)  # the placeholder is not fed
        with pytest.raises(ValueError):
            sess.run(y, {x: "not a number"})
    assert issubclass(ff.errors.NotFoundError, ff.errors.OpError)
    with pytest.raises(ff.errors.UnimplementedError, match="NoSuchOp"):
        ff.get_default_graph()._add_op("NoSuchOp", [], {})
    with pytest.raises(ff.errors.CancelledError):
        sess.run(y, {x: np.ones((1, 3), np.float32)})


def test_damaged_graph_files_raise(tmp_path):
    p = tmp_path / "bad.pb"
    p.write_bytes(b"\x0a\xff\xff\xff\xff\x0f garbage")
    with pytest.raises(ff.errors.OpError):
        ff.load_graph(str(p))
    with pytest.raises(ff.errors.NotFoundError):
        ff.load_graph(str(tmp_path / "missing.pb"))


def test_graph_def_round_trip_and_load(tmp_path):
    x, y = mlp()
    path = tmp_path / "g.pb"
    path.write_bytes(ff.get_default_graph().as_graph_def())
    g = ff.load_graph(str(path))
    assert g.get_tensor_by_name("y:0").dtype == ff.float32
    with ff.Session(graph=g) as sess:
        out = sess.run("y:0", {"x:0": np.ones((1, 3), np.float32)})
    np.testing.assert_array_equal(out, [[2.0, 5.0]])


def test_the_graph_may_grow_after_the_session_is_made():
    x, y = mlp()
    with ff.Session() as sess:
        sess.run(y, {x: np.ones((1, 3), np.float32)})
        z = y + 1.0
        np.testing.assert_array_equal(sess.run(z, {x: np.ones((1, 3), np.float32)}), [[3.0, 6.0]])


def test_run_metadata_is_tensorflows_protobuf():
    x, y = mlp()
    opts = ff.RunOptions(trace_level=ff.RunOptions.FULL_TRACE, output_partition_graphs=True)
    meta = ff.RunMetadata()
    with ff.Session() as sess:
        sess.run(y, {x: np.ones((1, 3), np.float32)}, options=opts, run_metadata=meta)
    data = meta.SerializeToString()
    assert len(data) > 100 and b"MatMul" in data


def test_raw_ops_come_from_the_registry():
    names = dir(ff.raw_ops)
    assert {"Conv2D", "MatMul", "FusedBatchNormV3", "ResourceApplyAdam"} <= set(names)
    assert "strides" in ff.raw_ops.Conv2D.__doc__
    with pytest.raises(AttributeError):
        ff.raw_ops.NotAnOp
    with pytest.raises(TypeError, match="unexpected"):
        ff.raw_ops.Relu(features=1.0, bogus=2)
    s = ff.raw_ops.AddN(inputs=[ff.constant(1.0), ff.constant(2.0), ff.constant(3.0)])
    with ff.Session() as sess:
        assert sess.run(s) == 6.0


def test_one_session_from_many_threads():
    x, y = mlp()
    feed = np.random.default_rng(0).standard_normal((64, 3)).astype(np.float32)
    with ff.Session() as sess:
        want = sess.run(y, {x: feed})
        errors = []

        def work():
            for _ in range(50):
                if not np.array_equal(sess.run(y, {x: feed}), want):
                    errors.append("mismatch")

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors


def test_ctrl_c_cancels_a_running_step():
    # A While loop that runs for seconds; SIGINT a moment after it starts.
    i = ff.constant(0, name="i")
    x = ff.placeholder(ff.int32, [], name="n")
    g = ff.get_default_graph()
    # Many chained MatMuls on a large matrix: long enough to interrupt.
    a = ff.placeholder(ff.float32, [None, None], name="a")
    y = a
    for _ in range(40):
        y = ff.raw_ops.MatMul(a=y, b=a)
    del i, x, g
    big = np.full((1500, 1500), 1e-3, np.float32)
    with ff.Session() as sess:
        timer = threading.Timer(0.2, lambda: signal.raise_signal(signal.SIGINT))
        start = time.monotonic()
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            sess.run(y, {a: big})
        took = time.monotonic() - start
        # The session still works after the cancelled step.
        small = np.eye(2, dtype=np.float32)
        np.testing.assert_array_equal(sess.run(y, {a: small}), small)
    assert took < 5.0


def test_hostile_graph_files_raise_without_crashing(tmp_path):
    # A GraphDef claiming a 1 TB constant, an attr of the wrong kind, a cycle.
    huge = tmp_path / "huge.pbtxt"
    huge.write_text('node { name: "c" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } } '
                    'attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 1000000 } '
                    'dim { size: 1000000 } dim { size: 250 } } } } } }')
    with pytest.raises(ff.errors.OpError):
        g = ff.load_graph(str(huge))
        ff.Session(graph=g).run("c:0")
    bad_attr = tmp_path / "bad.pbtxt"
    bad_attr.write_text('node { name: "p" op: "MaxPool" attr { key: "padding" value { s: "FULL" } } }')
    with pytest.raises(ff.errors.OpError, match="'p'"):
        ff.Session(graph=ff.load_graph(str(bad_attr))).run("p:0")
    r = ff.raw_ops.Reshape(tensor=ff.constant([1.0, 2.0]), shape=ff.constant([3]))
    with pytest.raises(ff.errors.InvalidArgumentError):
        ff.Session().run(r)
    ff.reset_default_graph()
    x = ff.placeholder(ff.float32, [2], name="v")
    with ff.Session() as sess:
        with pytest.raises(ff.errors.OpError):
            sess.run(x, {x: np.zeros(3, np.float32)})  # wrong shape
        with pytest.raises((ValueError, TypeError, ff.errors.OpError)):
            sess.run(x, {x: [object(), object()]})
