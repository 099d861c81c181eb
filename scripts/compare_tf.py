#!/usr/bin/env python3
"""The project's one table of ratios against TensorFlow (issue 19): every workload run side by
side on this machine, TensorFlow and ferroflow processes alternating round by round (so machine
noise hits both), written to docs/PERFORMANCE.md with the date and the CPU.

Each row is a TensorFlow process and a ferroflow process whose last line is
`median_ms=<v> min_ms=<v> max_ms=<v> peak_rss_mb=<v>`. Where a program prints another figure
(images/s, steps/s, MB/s, ns/op, an optimizer report, epoch times), the `adapt` worker runs it,
converts its figure and prints that line, with the program's peak RSS. Rows (N = --runs):
  - Models: MobileNetV2 and ResNet50 (Keras' architectures, random weights, 224x224x3, frozen by
    scripts/make_model_fixtures.py --large into target/models/), batch 1 and 32, default
    threads and 1 thread: TensorFlow runs the frozen GraphDef in a tf.compat.v1 Session
    (Grappler and oneDNN on, as a TensorFlow user gets them); ferroflow runs it with
    `ferroflow benchmark` (its optimizer on). MobileNetV2 alpha 0.35 at 96x96 (the committed
    test model), batch 1 and 32. Zoo models (`zoo NAME`: EfficientNetB0, DenseNet121,
    InceptionV3, NASNetMobile, Xception from scripts/make_zoo.py's target/zoo/, default input
    sizes, random weights), batch 1 and 32, default threads, the same way.
  - The Keras CNN SavedModel (fixtures/saved_model/keras_cnn), batch 1 and 32: TensorFlow
    `tf.saved_model.load(dir).signatures["serving_default"]`, ferroflow
    `examples/saved_model_bench`.
  - Executor chain / wide (scripts/bench_executor.py), ms per run: a fed scalar through 2,000
    `Square`s in a chain, or 2,000 independent `Square`s joined by a `Pack`. TensorFlow: a
    tf.function with Grappler off (the same nodes executed), default thread pools, 7 batches of
    15*N calls; ferroflow: `examples/executor_overhead` (optimizer off), 1 and 2 inter-op
    threads. ns per op = ms * 1e6 / 2000.
  - FULL_TRACE step stats on the chain, added ns per node (step stats on minus off): TensorFlow
    a tf.compat.v1 Session with Grappler off (so it records every node), ferroflow
    `examples/executor_overhead` (1 thread). A second row gives ferroflow's cost inside the
    step alone (`Session::run_plan_traced`, the records not yet made into protos; the distortion
    tracing adds to what it measures) against the same TensorFlow figure, which has no such
    split.
  - mnist_training (scripts/bench_mnist.py), ms per step of batch 100 over 50*N steps (the
    mean of the steps' sess.run times on both sides): TensorFlow `bench_mnist.py --tf-only`,
    ferroflow `examples/mnist_mlp`.
  - MLP inference at batch 1, ms: mnist_training's network without dropout (784-256-256-10, ReLU,
    softmax, random weights), frozen by TensorFlow into target/compare/mlp.pb; TensorFlow's
    Session and `ferroflow benchmark`, default threads.
  - Small CNN (scripts/bench_cnn.py: fixtures/tf/cnn.pb, conv 3x3x32 -> pool -> conv 3x3x64 ->
    pool -> dense 10) at batch 32, 1 and 2 threads, ms per batch: TensorFlow's Session on the
    frozen graph (median of 10*N runs); ferroflow `examples/cnn_inference` (its images/s over
    N/20 seconds, as ms per batch).
  - GEMM: one f32 MatMul of two fed 1024x1024 matrices (target/compare/gemm.pb, written by
    TensorFlow), default threads: TensorFlow's Session and `ferroflow benchmark`.
  - Optimizer (scripts/bench_optimizer.py's 1,200-layer graph, 20,402 nodes, written into
    target/compare/): Grappler's default passes (`tf_optimizer.OptimizeGraph`, two iterations,
    as a Session runs it) against `ferroflow optimize` (its reported optimizer time), max(3, N/4)
    times per process.
  - Checkpoint save and restore (scripts/bench_checkpoint.py: 100M float parameters in 10
    variables, 400 MB), ms: a TF1 Saver's save (then an fsync of every file it wrote and of the
    directory, as ferroflow syncs its files) and restore, against `examples/checkpoint_bench`;
    max(1, N/7) of each per process.
  - Input pipeline (scripts/bench_pipeline.py: 600 JPEGs of 500x375 -> decode -> resize 224 ->
    batch 32, in target/compare/flowers600, made by `ferroflow flowers` if missing), ms per
    epoch, the median over 3 epochs per process: parallel map + prefetch AUTOTUNE, and serial.
    TensorFlow `bench_pipeline.py --worker tf` (tf.data), ferroflow `ferroflow pipeline`.

The ratio is TensorFlow's median / ferroflow's median (> 1: ferroflow faster); the spread is
the range of the per-round ratios. Peak RSS is each side's largest over its rounds. Generated
inputs are cached in target/compare/ (delete it to regenerate them).

The zoo table (--zoo [NAME...]): every Keras application of scripts/make_zoo.py's target/zoo/
(or those named) at batch 1 and at a large batch (32; for inputs above 299 px the batch of about
the pixels of 32 images of 224x224: EfficientNetB7's 600x600 runs 4), default threads (--threads
0; `--threads 0 1` adds one-thread rows), three processes alternating per round: TensorFlow's
Session on the frozen graph, ONNX Runtime (default CPU provider and threads) on the same graph
converted by tf2onnx (scripts/onnx_zoo.py, run with .venv-ort/bin/python; converted once into
target/zoo/NAME/model.onnx; a model tf2onnx cannot convert is listed as such), and
`ferroflow benchmark`. Written to docs/PERFORMANCE.md's "Model zoo" section (rows measured now
replace theirs), with the geometric means of the ratios and ferroflow's minor page faults per
steady-state run.

Run:  .venv/bin/python scripts/make_model_fixtures.py --large      # once
      .venv/bin/python scripts/compare_tf.py [--rounds 3] [--runs 20] [--only NAME...] [--no-write]
      (--only measures the rows whose names contain a NAME and replaces just those rows)
      .venv/bin/python scripts/compare_tf.py --zoo [NAME...] [--batches 1 32] [--threads 0 1] [--runs 5]
"""
import argparse
import collections
import datetime
import glob
import importlib
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import time

SCRIPTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(SCRIPTS, "..")
FF = os.path.join(ROOT, "target", "release", "ferroflow")
EXAMPLES = os.path.join(ROOT, "target", "release", "examples")
MODELS = os.path.join(ROOT, "target", "models")
COMPARE = os.path.join(ROOT, "target", "compare")
EXEC_OPS = 2000
OPT_LAYERS = 1200  # scripts/bench_optimizer.py's default: 20,402 nodes
CKPT_PARAMS, CKPT_VARS = 100_000_000, 10

# A table row: `prepare` is (path, command): the command is run once if the path is missing;
# `examples` are the ferroflow examples it runs (built by main()).
Row = collections.namedtuple("Row", "name tf ff prepare examples", defaults=(None, ()))


# ---- timing and reporting, shared by every worker ----

def peak_rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def time_ms(fn, samples, warmup=0, per=1):
    """`samples` timings of `fn` in ms per call, each the mean over `per` calls, after `warmup` calls."""
    for _ in range(warmup):
        fn()
    ms = []
    for _ in range(samples):
        start = time.perf_counter()
        for _ in range(per):
            fn()
        ms.append((time.perf_counter() - start) * 1e3 / per)
    return ms


def emit(samples, rss_mb=None):
    """The line every worker ends with (`rss_mb`: a child's peak RSS; default this process's)."""
    ms = sorted(samples)
    rss = peak_rss_mb() if rss_mb is None else rss_mb
    print(f"median_ms={ms[len(ms) // 2]:.6g} min_ms={ms[0]:.6g} max_ms={ms[-1]:.6g} peak_rss_mb={rss:.1f}")


def run_child(cmd):
    """Runs `cmd`; returns its stdout."""
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {out.returncode}: {out.stderr.strip()[-500:]}")
    return out.stdout


def sibling(module):
    """Another script of scripts/ imported as a module (leaving no __pycache__ behind)."""
    sys.dont_write_bytecode = True
    sys.path.insert(0, SCRIPTS)
    return importlib.import_module(module)


def tensorflow():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    return tf


# ---- TensorFlow workers ----

def tf_graph_worker(graph, inputs, fetch, runs, warmup, threads):
    """A frozen GraphDef in a TF1 Session, timed per run."""
    import numpy as np

    tf = tensorflow()
    gd = tf.compat.v1.GraphDef()
    with open(graph, "rb") as f:
        gd.ParseFromString(f.read())
    feeds = dict(np.load(inputs))
    threads = int(threads)
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=threads, inter_op_parallelism_threads=threads)
    g = tf.Graph()
    with g.as_default():
        tf.graph_util.import_graph_def(gd, name="")
    with tf.compat.v1.Session(graph=g, config=config) as sess:
        emit(time_ms(lambda: sess.run(fetch, feeds), int(runs), int(warmup)))


def tf_saved_model_worker(d, batch, runs, warmup):
    """A SavedModel's serving_default signature called eagerly at `batch`, timed per call."""
    import numpy as np

    tf = tensorflow()
    sig = tf.saved_model.load(d).signatures["serving_default"]
    feeds = {}
    for key, spec in sig.structured_input_signature[1].items():
        dims = [int(batch) if s is None else s for s in spec.shape.as_list()]
        n = int(np.prod(dims))
        feeds[key] = tf.constant(((np.arange(n) * 7919) % 1000 / 1000.0).astype(np.float32).reshape(dims))

    def call():
        for v in sig(**feeds).values():
            v.numpy()

    emit(time_ms(call, int(runs), int(warmup)))


def tf_executor_worker(graph, n, iters):
    """bench_executor.py's chain or wide graph as a tf.function with Grappler off (the same
    nodes executed as ferroflow's): ms per call, 7 batches of `iters` calls."""
    tf = tensorflow()
    n, iters = int(n), int(iters)
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})

    @tf.function(input_signature=[tf.TensorSpec([], tf.float32)])
    def fn(x):
        if graph == "wide":
            return tf.stack([tf.math.square(x) for _ in range(n)])
        for _ in range(n):
            x = tf.math.square(x)
        return x

    x = tf.constant(1.0)
    emit(time_ms(lambda: fn(x), 7, max(3, iters // 10), iters))


def tf_full_trace_worker(n, iters):
    """bench_executor.py's step-stats cost: the chain in a TF1 Session with Grappler off, run
    with RunOptions FULL_TRACE and with NO_TRACE; prints the difference in ns per node."""
    tf = tensorflow()
    v1 = tf.compat.v1
    n, iters = int(n), max(10, int(iters) // 10)
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [], name="x")
        y = x
        for _ in range(n):
            y = tf.math.square(y)
    config = v1.ConfigProto()
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    ns = {}
    with v1.Session(graph=g, config=config) as sess:
        for level in (v1.RunOptions.NO_TRACE, v1.RunOptions.FULL_TRACE):
            opts, meta = v1.RunOptions(trace_level=level), v1.RunMetadata()
            ms = time_ms(lambda: sess.run(y, {x: 1.0}, options=opts, run_metadata=meta), 7, 3, iters)
            ns[level] = sorted(ms)[3] * 1e6 / n
    emit([ns[v1.RunOptions.FULL_TRACE] - ns[v1.RunOptions.NO_TRACE]])


def tf_optimizer_worker(graph, runs):
    """Grappler's default passes on `graph` (fed x:0, fetched out:0), as bench_optimizer.py runs them."""
    tf = tensorflow()
    from tensorflow.python.grappler import tf_optimizer

    grappler_item = sibling("grappler_reference").grappler_item
    gd = tf.compat.v1.GraphDef()
    with open(graph, "rb") as f:
        gd.ParseFromString(f.read())
    mg, config = grappler_item(gd, ["x:0"], ["out:0"])
    emit(time_ms(lambda: tf_optimizer.OptimizeGraph(config, mg), int(runs)))


def tf_checkpoint_worker(phase, params, nvars, repeat, directory):
    """bench_checkpoint.py's TensorFlow side: a TF1 Saver's save (each file it wrote and the
    directory then fsynced, as ferroflow does) or restore of `params` floats, ms per call."""
    tf = tensorflow()
    v1 = tf.compat.v1
    v1.disable_eager_execution()
    per = int(params) // int(nvars)
    g = tf.Graph()
    with g.as_default():
        v1.set_random_seed(1)
        for i in range(int(nvars)):
            v1.get_variable(f"var_{i}", [per], initializer=v1.random_uniform_initializer(-1.0, 1.0), use_resource=True)
        init = v1.global_variables_initializer()
        saver = v1.train.Saver(max_to_keep=1)
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    ms = {"save": [], "restore": []}
    with v1.Session(graph=g) as sess:
        sess.run(init)
        for i in range(int(repeat)):
            start = time.perf_counter()
            path = saver.save(sess, os.path.join(directory, "model.ckpt"), global_step=i)
            for name in glob.glob(path + ".*") + [os.path.join(directory, "checkpoint"), directory]:
                fd = os.open(name, os.O_RDONLY)
                os.fsync(fd)
                os.close(fd)
            ms["save"].append((time.perf_counter() - start) * 1e3)
            start = time.perf_counter()
            saver.restore(sess, path)
            ms["restore"].append((time.perf_counter() - start) * 1e3)
    shutil.rmtree(directory, ignore_errors=True)
    emit(ms[phase])


def write_graph_worker(kind, path):
    """Writes a generated GraphDef to `path` (and its inputs beside it as .npz): `gemm` (a MatMul
    of fed 1024x1024 a and b), `mlp` (mnist_training's network at inference, frozen, 1 input row) or
    `layered` (bench_optimizer.py's graph)."""
    import numpy as np

    tf = tensorflow()
    v1 = tf.compat.v1
    rng = np.random.default_rng(0)
    feeds = {}
    if kind == "layered":
        g, _ = sibling("bench_optimizer").build(OPT_LAYERS)
    else:
        g = tf.Graph()
        with g.as_default():
            if kind == "gemm":
                a, b = (v1.placeholder(tf.float32, [1024, 1024], name=name) for name in "ab")
                tf.matmul(a, b, name="product")
                feeds = {f"{name}:0": rng.standard_normal((1024, 1024)).astype(np.float32) for name in "ab"}
            elif kind == "mlp":
                h = v1.placeholder(tf.float32, [None, 784], name="inputs")
                for units, act in [(256, tf.nn.relu), (256, tf.nn.relu), (10, tf.nn.softmax)]:
                    w = np.clip(rng.standard_normal((int(h.shape[1]), units)), -2, 2) * 0.1
                    b = rng.standard_normal(units) * 0.01
                    h = act(tf.nn.bias_add(tf.matmul(h, tf.constant(w, tf.float32)), tf.constant(b, tf.float32)))
                tf.identity(h, name="probs")
                feeds["inputs:0"] = rng.uniform(0, 1, (1, 784)).astype(np.float32)
            else:
                raise ValueError(f"unknown graph kind {kind}")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if feeds:
        np.savez(path.replace(".pb", ".npz"), **feeds)
    with open(path, "wb") as f:
        f.write(g.as_graph_def().SerializeToString())


# ---- adapters: a program's own figure as ms ----

def _json(out):
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def _executor(out, graph, threads, trace=None):
    """examples/executor_overhead's record for `graph` at `threads`: ms per run, or with `trace`
    ("full": FULL_TRACE, "recorded": run_plan_traced) the traced minus the plain ns per op."""
    recs = {(r["graph"], r["inter_op_threads"], r.get("trace")): r for r in _json(out)}
    r = recs[(graph, int(threads), None)]
    if trace:
        return [recs[(graph, int(threads), trace)]["ns_per_op"] - r["ns_per_op"]]
    return [r["ns_per_op"] * r["ops"] / 1e6]


def _cnn(out, threads, batch):
    """examples/cnn_inference's images/s at `threads`, as ms per batch."""
    r = next(r for r in _json(out) if r["threads"] == int(threads))
    return [int(batch) * 1e3 / r["images_per_s"]]


def _checkpoint(out, phase):
    """examples/checkpoint_bench's median MB/s of `phase` (save or restore), as ms."""
    mb = float(re.search(r"\bmb=([0-9.]+)", out).group(1))
    return [mb * 1e3 / float(re.search(rf"{phase}_mb_per_s=([0-9.]+)", out).group(1))]


ADAPTERS = {
    "executor": _executor,
    "full_trace": lambda out: _executor(out, "chain", 1, trace="full"),
    "trace_recorded": lambda out: _executor(out, "chain", 1, trace="recorded"),
    "cnn": _cnn,
    "checkpoint": _checkpoint,
    # steps_per_sec= (bench_mnist.py --tf-only, examples/mnist_mlp): ms per training step.
    "steps": lambda out: [1e3 / float(re.search(r"steps_per_sec=([0-9.]+)", out).group(1))],
    # `ferroflow optimize`'s report: the optimizer's own time.
    "optimize": lambda out: [float(re.search(r"total: \d+ -> \d+ nodes in .*, ([0-9.]+) ms", out).group(1))],
    # `epoch K: N images ..., S s, ...` (bench_pipeline.py --worker tf, `ferroflow pipeline`): ms per epoch.
    "epochs": lambda out: [float(s) * 1e3 for s in re.findall(r"^epoch \d+: \d+ images.*?, ([0-9.]+) s,", out, re.M)],
}


def adapt_worker(kind, repeat, *cmd):
    """Runs `cmd` `repeat` times and prints its figures (ADAPTERS[KIND], KIND:ARG:ARG) as ms."""
    name, *params = kind.split(":")
    samples = []
    for _ in range(int(repeat)):
        samples += ADAPTERS[name](run_child(list(cmd)), *params)
    # The largest peak RSS of the runs (this process's only children).
    emit(samples, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)


WORKERS = {
    "tf_graph": tf_graph_worker,
    "tf_saved_model": tf_saved_model_worker,
    "tf_executor": tf_executor_worker,
    "tf_full_trace": tf_full_trace_worker,
    "tf_optimizer": tf_optimizer_worker,
    "tf_checkpoint": tf_checkpoint_worker,
    "write_graph": write_graph_worker,
    "adapt": adapt_worker,
}


# ---- the table ----

ZOO = os.path.join(ROOT, "target", "zoo")
ZOO_ROWS = ["EfficientNetB0", "DenseNet121", "InceptionV3", "NASNetMobile", "Xception"]


def batch_inputs(npz, batch, key="x", out_dir=None):
    """The fixture's input `key` repeated to `batch`, saved keyed by tensor name (beside the
    fixture, or in `out_dir`)."""
    import numpy as np

    name = os.path.basename(npz).replace(".npz", f".b{batch}.npz")
    out = os.path.join(out_dir or os.path.dirname(npz), name)
    if not os.path.exists(out):
        x = np.load(npz)[key]
        reps = -(-batch // x.shape[0])
        os.makedirs(os.path.dirname(out), exist_ok=True)
        np.savez(out, **{key if ":" in key else key + ":0": np.concatenate([x] * reps)[:batch]})
    return out


def workloads(a):
    """The table's rows."""
    rows = []

    def worker(name, *args):
        return [sys.executable, os.path.abspath(__file__), "--worker", name] + [str(v) for v in args]

    def adapt(kind, cmd, repeat=1):
        return worker("adapt", kind, repeat, *cmd)

    def benchmark(graph, inputs, fetch, runs, warmup, threads=0):
        """A frozen graph in TensorFlow's Session and in `ferroflow benchmark`."""
        return (worker("tf_graph", graph, inputs, fetch, runs, warmup, threads),
                [str(v) for v in [FF, "benchmark", graph, "--inputs", inputs, "--fetch", fetch, "--runs", runs,
                                  "--warmup", warmup, "--inter-op-threads", threads, "--intra-op-threads", threads]])

    graphs = [("MobileNetV2 0.35 96x96", os.path.join(ROOT, "fixtures", "models", "mobilenet_v2_035_96"))]
    for name, base in [("MobileNetV2", "mobilenet_v2"), ("ResNet50", "resnet50")]:
        path = os.path.join(MODELS, base)
        if os.path.exists(path + ".pb"):
            graphs.append((name, path))
        else:
            print(f"(no {path}.pb: run scripts/make_model_fixtures.py --large for the {name} rows)")
    for name, base in graphs:
        for batch in (1, 32):
            for threads in (0, 1):
                label = f"{name} batch {batch}, " + ("default threads" if threads == 0 else "1 thread")
                rows.append(Row(label, *benchmark(base + ".pb", batch_inputs(base + ".npz", batch), "logits:0",
                                                  a.runs, 3, threads)))
    # Models of the zoo (scripts/make_zoo.py into target/zoo/) the speed issue names, at their
    # default input sizes: the frozen graph, input `x:0` repeated to the batch, `Identity:0`.
    for name in ZOO_ROWS:
        base = os.path.join(ZOO, name)
        if not os.path.exists(os.path.join(base, "frozen.pb")):
            print(f"(no {base}/frozen.pb: run scripts/make_zoo.py --only {name} for its rows)")
            continue
        for batch in (1, 32):
            inputs = batch_inputs(os.path.join(base, "io.npz"), batch, "x:0", os.path.join(ROOT, "target", "compare", name))
            rows.append(Row(f"zoo {name} batch {batch}, default threads",
                            *benchmark(os.path.join(base, "frozen.pb"), inputs, "Identity:0", a.runs, 3, 0)))
    sm = os.path.join(ROOT, "fixtures", "saved_model", "keras_cnn")
    for batch in (1, 32):
        rows.append(Row(f"Keras CNN SavedModel batch {batch}", worker("tf_saved_model", sm, batch, a.runs * 5, 5),
                        [os.path.join(EXAMPLES, "saved_model_bench"), sm, str(batch), str(a.runs * 5)],
                        examples=("saved_model_bench",)))

    # Executor overhead and step stats (bench_executor.py).
    iters = a.runs * 15
    executor = [os.path.join(EXAMPLES, "executor_overhead"), EXEC_OPS, iters]
    for graph, what in [("chain", "Squares in a chain"), ("wide", "independent Squares + Pack")]:
        for threads in (1, 2):
            rows.append(Row(f"executor {graph}, {EXEC_OPS} {what}, ferroflow {threads} inter-op "
                            f"thread{'s' if threads > 1 else ''} (ms per run)",
                            worker("tf_executor", graph, EXEC_OPS, iters),
                            adapt(f"executor:{graph}:{threads}", executor + [graph]), examples=("executor_overhead",)))
    rows.append(Row(f"FULL_TRACE step stats, chain of {EXEC_OPS} (added ns per node)",
                    worker("tf_full_trace", EXEC_OPS, iters), adapt("full_trace", executor + ["chain"]),
                    examples=("executor_overhead",)))
    rows.append(Row(f"step stats recorded inside the step, chain of {EXEC_OPS}: ferroflow run_plan_traced "
                    "(protos made on request) vs TensorFlow FULL_TRACE (added ns per node)",
                    worker("tf_full_trace", EXEC_OPS, iters), adapt("trace_recorded", executor + ["chain"]),
                    examples=("executor_overhead",)))

    # mnist_training (bench_mnist.py).
    steps = ["--steps", a.runs * 50, "--seed", 1]
    rows.append(Row("mnist_training MNIST MLP training, batch 100 (ms per step)",
                    adapt("steps", [sys.executable, os.path.join(SCRIPTS, "bench_mnist.py"), "--tf-only"] + steps),
                    adapt("steps", [os.path.join(EXAMPLES, "mnist_mlp")] + steps), examples=("mnist_mlp",)))

    # Graphs written by TensorFlow, run by both sessions alike.
    for kind, label, fetch, runs, warmup in [
            ("mlp", "MLP 784-256-256-10 inference, batch 1", "probs:0", a.runs * 10, 10),
            ("gemm", "GEMM 1024x1024x1024 f32 MatMul", "product:0", a.runs, 3)]:
        pb = os.path.join(COMPARE, f"{kind}.pb")
        rows.append(Row(label, *benchmark(pb, pb.replace(".pb", ".npz"), fetch, runs, warmup),
                        prepare=(pb, worker("write_graph", kind, pb))))

    # Small CNN (bench_cnn.py) at batch 32.
    cnn = os.path.join(ROOT, "fixtures", "tf", "cnn")
    for threads in (1, 2):
        rows.append(Row(f"small CNN batch 32, {threads} thread{'s' if threads > 1 else ''} (ms per batch)",
                        worker("tf_graph", cnn + ".pb", batch_inputs(cnn + ".inputs.npz", 32, "x:0", COMPARE),
                               "Identity:0", a.runs * 10, 5, threads),
                        adapt(f"cnn:{threads}:32", [os.path.join(EXAMPLES, "cnn_inference"), 32, a.runs / 20]),
                        examples=("cnn_inference",)))

    # Optimizer (bench_optimizer.py).
    layered = os.path.join(COMPARE, f"layered_{OPT_LAYERS}.pb")
    repeat = max(3, a.runs // 4)
    rows.append(Row(f"optimizer, {OPT_LAYERS}-layer graph of 20,402 nodes (Grappler vs ferroflow, ms)",
                    worker("tf_optimizer", layered, repeat),
                    adapt("optimize", [FF, "optimize", layered, "--feed", "x:0", "--fetch", "out:0"], repeat),
                    prepare=(layered, worker("write_graph", "layered", layered))))

    # Checkpoints (bench_checkpoint.py).
    repeat, ckpt_tf = max(1, a.runs // 7), os.path.join(COMPARE, "ckpt_tf")
    for phase in ("save", "restore"):
        rows.append(Row(f"checkpoint {phase}, {CKPT_PARAMS // 1_000_000}M floats (ms)",
                        worker("tf_checkpoint", phase, CKPT_PARAMS, CKPT_VARS, repeat, ckpt_tf),
                        adapt(f"checkpoint:{phase}", [os.path.join(EXAMPLES, "checkpoint_bench"), "--dir",
                                                      os.path.join(COMPARE, "ckpt_ff"), "--params", CKPT_PARAMS,
                                                      "--vars", CKPT_VARS, "--repeat", repeat]),
                        examples=("checkpoint_bench",)))

    # Input pipeline (bench_pipeline.py).
    flowers = os.path.join(COMPARE, "flowers600")
    make_flowers = (flowers, [FF, "flowers", flowers, "--per-class", "120", "--size", "500x375"])
    for mode, tf_flags, ff_flags in [
            ("parallel map + prefetch AUTOTUNE", [], ["--parallel", "auto", "--prefetch", "auto"]),
            ("serial map", ["--serial"], [])]:
        rows.append(Row(f"input pipeline, {mode} (ms per epoch of 600 JPEGs)",
                        adapt("epochs", [sys.executable, os.path.join(SCRIPTS, "bench_pipeline.py"), flowers,
                                         "--worker", "tf", "--epochs", 3] + tf_flags),
                        adapt("epochs", [FF, "pipeline", flowers, "--no-shuffle", "--epochs", 3] + ff_flags),
                        prepare=make_flowers))
    if a.only:
        rows = [r for r in rows if any(o.lower() in r.name.lower() for o in a.only)]
    return rows


ORT_PY = os.path.join(ROOT, ".venv-ort", "bin", "python")
ZOO_SECTION = "## Model zoo against TensorFlow and ONNX Runtime"


def zoo_models(names):
    """The zoo's Keras applications (directories named with a capital) with a frozen graph."""
    found = sorted(d for d in os.listdir(ZOO) if d[:1].isupper() and os.path.exists(os.path.join(ZOO, d, "frozen.pb")))
    return [d for d in found if not names or d in names]


def zoo_batch(side, batch):
    """`batch`, or for inputs above 299 px the batch of about as many pixels as `batch` images of 224x224."""
    return batch if side <= 299 else max(1, round(batch * 224 * 224 / (side * side)))


def ort_model(name):
    """target/zoo/NAME/model.onnx, converted on first use; (path, None) or (None, why not)."""
    base = os.path.join(ZOO, name)
    path, failed = os.path.join(base, "model.onnx"), os.path.join(base, "model.onnx.failed")
    if not os.path.exists(ORT_PY):
        return None, "no .venv-ort (see scripts/onnx_zoo.py)"
    if not os.path.exists(path) and not os.path.exists(failed):
        out = subprocess.run([ORT_PY, os.path.join(SCRIPTS, "onnx_zoo.py"), "convert", os.path.join(base, "frozen.pb"),
                              path], capture_output=True, text=True)
        if out.returncode != 0:
            lines = (out.stdout.strip() or out.stderr.strip() or f"exit {out.returncode}").splitlines()
            with open(failed, "w") as f:
                f.write(lines[-1] + "\n")
    if os.path.exists(path):
        return path, None
    with open(failed) as f:
        return None, f.read().strip()


def zoo_table(a):
    """Runs the zoo rows; prints each and updates docs/PERFORMANCE.md's zoo section."""
    import statistics

    import numpy as np

    subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "ferroflow-cli"], cwd=ROOT, check=True)
    rows = []
    for name in zoo_models(a.zoo):
        base = os.path.join(ZOO, name)
        side = int(np.load(os.path.join(base, "io.npz"))["x:0"].shape[1])
        onnx, why = ort_model(name)
        for batch in sorted({zoo_batch(side, b) for b in a.batches}):
            inputs = batch_inputs(os.path.join(base, "io.npz"), batch, "x:0", os.path.join(COMPARE, name))
            for threads in a.threads:
                pb = os.path.join(base, "frozen.pb")
                cmds = {
                    "tf": [sys.executable, os.path.abspath(__file__), "--worker", "tf_graph", pb, inputs, "Identity:0",
                           str(a.runs), "3", str(threads)],
                    "ff": [FF, "benchmark", pb, "--inputs", inputs, "--fetch", "Identity:0", "--runs", str(a.runs),
                           "--warmup", "3", "--inter-op-threads", str(threads), "--intra-op-threads", str(threads)],
                }
                if onnx:
                    cmds["ort"] = [ORT_PY, os.path.join(SCRIPTS, "onnx_zoo.py"), "time", onnx, inputs, str(a.runs), "3",
                                   str(threads)]
                ms = {k: [] for k in cmds}
                rss = {k: 0.0 for k in cmds}
                faults = None
                label = f"{name} {side}x{side} batch {batch}, " + ("default threads" if threads == 0 else f"{threads} thread")
                try:
                    for _ in range(a.rounds):
                        for k, cmd in cmds.items():
                            os.sync()
                            out = run_child(cmd)
                            ms[k].append(float(re.search(r"median_ms=([-0-9.e+]+)", out).group(1)))
                            m = re.search(r"peak_rss_mb=([0-9.]+)", out)
                            rss[k] = max(rss[k], float(m.group(1)) if m else 0.0)
                            f = re.search(r"page_faults_per_run=([0-9.]+)", out)
                            if f:
                                faults = float(f.group(1))
                except RuntimeError as e:
                    print(f"{label}: failed: {str(e)[-300:]}", flush=True)
                    rows.append((label, None, None, None, None, None, f"failed: {str(e).splitlines()[-1][-120:]}"))
                    continue
                med = {k: statistics.median(v) for k, v in ms.items()}
                row = (label, med["tf"], med.get("ort"), med["ff"], rss, faults, why)
                rows.append(row)
                print(zoo_line(row), flush=True)
    if not a.no_write:
        write_zoo(a, rows)


def zoo_line(row):
    label, tf, ort, ff, rss, faults, why = row
    if tf is None:
        return f"| {label} | | | | | | | | {why} |"
    ort_ms = fmt(ort) if ort is not None else "—"
    ort_ratio = f"{ort / ff:.2f}" if ort is not None else (why or "—")
    rss_txt = " / ".join(f"{rss[k]:.0f}" if k in rss else "—" for k in ("tf", "ort", "ff"))
    return (f"| {label} | {fmt(tf)} | {ort_ms} | {fmt(ff)} | {tf / ff:.2f} | {ort_ratio} | {rss_txt} | "
            f"{faults if faults is not None else '—'} | |")


def write_zoo(a, rows):
    """Replaces the zoo section's rows measured now (keeping the others) and its summary."""
    import math

    path = os.path.join(ROOT, "docs", "PERFORMANCE.md")
    text = open(path).read() if os.path.exists(path) else "# Performance against TensorFlow\n"
    before, _, after = text.partition(ZOO_SECTION)
    rest = ""
    if after:
        nxt = after.find("\n## ")
        rest = after[nxt:] if nxt >= 0 else ""
        old_rows = [line for line in after[:nxt if nxt >= 0 else None].splitlines() if line.startswith("| ") and
                    not line.startswith("| model") and not line.startswith("|---")]
    else:
        old_rows = []
    table = {line.split(" | ")[0][2:]: line for line in old_rows}
    for r in rows:
        table[r[0]] = zoo_line(r)
    lines = list(table.values())

    def ratios(col):
        vals = []
        for line in lines:
            cells = [c.strip() for c in line.strip("|").split("|")]
            try:
                vals.append(float(cells[col]))
            except (ValueError, IndexError):
                pass
        return vals

    def geo(v):
        return math.exp(sum(map(math.log, v)) / len(v)) if v else float("nan")

    tf_r, ort_r = ratios(4), ratios(5)
    head = [
        ZOO_SECTION,
        "",
        f"Written by `scripts/compare_tf.py --zoo` ({cpu_name()}, {os.cpu_count()} cores; last run "
        f"{datetime.date.today()}, {a.rounds} round(s), --runs {a.runs}): every Keras application of",
        "target/zoo (scripts/make_zoo.py: default input size, random weights, BatchNorm calibrated) as a frozen",
        "graph, TensorFlow (Session, Grappler + oneDNN), ONNX Runtime (tf2onnx opset 17, default CPU provider) and",
        "`ferroflow benchmark` alternating. Ratios are the other system's median ms / ferroflow's (> 1: ferroflow",
        "faster). Large inputs (> 299 px) run the batch of about the pixels of 32 images of 224x224. Faults: minor",
        "page faults per steady-state ferroflow run.",
        "",
        f"Geometric mean over the {len(tf_r)} rows: TensorFlow / ferroflow **{geo(tf_r):.2f}** (lowest "
        f"{min(tf_r, default=float('nan')):.2f}); ONNX Runtime / ferroflow **{geo(ort_r):.2f}** over {len(ort_r)} rows "
        f"(lowest {min(ort_r, default=float('nan')):.2f}).",
        "",
        "| model | TensorFlow ms | ONNX Runtime ms | ferroflow ms | TF / ff | ORT / ff | peak RSS TF / ORT / ff (MB) | faults | note |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    with open(path, "w") as f:
        f.write(before.rstrip("\n") + "\n\n" + "\n".join(head + lines) + "\n" + rest)
    print(f"updated the zoo section of docs/PERFORMANCE.md ({len(rows)} row(s) measured now)")


def measure(cmd):
    # Start with no dirty pages left by the previous process (a checkpoint's 400 MB).
    os.sync()
    out = run_child(cmd)
    m = re.search(r"median_ms=([-0-9.e+]+)", out)
    rss = re.search(r"peak_rss_mb=([0-9.]+)", out)
    return float(m.group(1)), float(rss.group(1)) if rss else None


def cpu_name():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


def fmt(v):
    return f"{v:.2f}" if abs(v) >= 1 else f"{v:.3g}"


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        return WORKERS[sys.argv[2]](*sys.argv[3:])
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--zoo", nargs="*", help="the zoo table instead: these models (all when none named)")
    ap.add_argument("--batches", nargs="+", type=int, default=[1, 32])
    ap.add_argument("--threads", nargs="+", type=int, default=[0])
    a = ap.parse_args()
    if a.zoo is not None:
        return zoo_table(a)
    rows = workloads(a)
    builds = [["-p", "ferroflow-cli"]] + [["-p", "ferroflow", "--example", e]
                                          for e in sorted({e for r in rows for e in r.examples})]
    for cmd in builds:
        subprocess.run(["cargo", "build", "--release", "--quiet"] + cmd, cwd=ROOT, check=True)
    import statistics

    results = []
    for row in rows:
        if row.prepare and not os.path.exists(row.prepare[0]):
            subprocess.run(row.prepare[1], check=True, stdout=subprocess.DEVNULL)
        tf_ms, ff_ms, tf_rss, ff_rss = [], [], [], []
        for _ in range(a.rounds):
            t, tr = measure(row.tf)
            f, fr = measure(row.ff)
            tf_ms.append(t)
            ff_ms.append(f)
            tf_rss.append(tr or 0)
            ff_rss.append(fr or 0)
        t, f = statistics.median(tf_ms), statistics.median(ff_ms)
        ratios = [x / y for x, y in zip(tf_ms, ff_ms)]
        result = (row.name, t, f, t / f, min(ratios), max(ratios), a.rounds, max(tf_rss), max(ff_rss))
        results.append(result)
        print(f"{row.name:<42} TF {fmt(t):>9}  ferroflow {fmt(f):>9}  ratio {t / f:5.2f} "
              f"({min(ratios):.2f}-{max(ratios):.2f})  RSS TF {max(tf_rss):.0f} MB / ff {max(ff_rss):.0f} MB",
              flush=True)
    if a.no_write:
        return
    path = os.path.join(ROOT, "docs", "PERFORMANCE.md")
    # Sections after the table ("## ..."), written by hand, are kept as they are.
    notes = []
    if os.path.exists(path):
        with open(path) as fh:
            old = fh.read().splitlines()
        first = next((i for i, line in enumerate(old) if line.startswith("## ")), None)
        if first is not None:
            notes = [""] + old[first:]
            old_table = old[:first]
        else:
            old_table = old
    if a.only and os.path.exists(path):
        # Rows measured now replace their lines; the others stay as they were measured. New rows
        # go at the table's end, and the file ends with the table, as the full run writes it.
        new = {r[0]: table_row(r) for r in results}
        lines = [new.pop(line.split(" | ")[0][2:], line) if line.startswith("| ") else line for line in old_table]
        at = max(i for i, line in enumerate(lines) if line.startswith("| ")) + 1
        lines[at:] = list(new.values())
        with open(path, "w") as fh:
            fh.write("\n".join(lines + notes) + "\n")
        print(f"updated {len(results)} row(s) of docs/PERFORMANCE.md")
        return
    lines = [
        "# Performance against TensorFlow",
        "",
        f"Written by `scripts/compare_tf.py` on {datetime.date.today()} ({cpu_name()}, {os.cpu_count()} cores),",
        f"TensorFlow {tf_version()} (tensorflow-cpu, oneDNN), {a.rounds} rounds of alternating processes, "
        f"--runs {a.runs} (the model rows' timed runs per process; the other rows scale theirs from it). Ratio =",
        "TensorFlow's median / ferroflow's median (> 1: ferroflow faster); spread = the lowest and highest per-round",
        "ratio. Peak RSS is the largest of each side's processes. Figures are ms unless the row names another unit",
        "(then both sides are in that unit); what each side runs for each row is in the script's docstring.",
        "",
        "| workload | TensorFlow (ms) | ferroflow (ms) | ratio | spread | rounds | peak RSS TF / ferroflow (MB) |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [table_row(r) for r in results]
    with open(path, "w") as fh:
        fh.write("\n".join(lines + notes) + "\n")
    print("wrote docs/PERFORMANCE.md")


def table_row(r):
    name, t, f, ratio, lo, hi, n, tr, fr = r
    return f"| {name} | {fmt(t)} | {fmt(f)} | {ratio:.2f} | {lo:.2f}–{hi:.2f} | {n} | {tr:.0f} / {fr:.0f} |"


def tf_version():
    out = subprocess.run([sys.executable, "-c", "import tensorflow as tf; print(tf.__version__)"], capture_output=True,
                         text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    return out.stdout.strip() or "?"


if __name__ == "__main__":
    sys.exit(main())
