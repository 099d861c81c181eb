#!/usr/bin/env python3
"""Runs TensorFlow's Grappler on every fixture graph and records what it produces.

For each fixture in fixtures/tf/MANIFEST (and what_runs' seed_000.pbtxt), with the fixture's inputs as feeds and
its outputs as fetches, this script builds a MetaGraphDef (`tf.compat.v1.train.export_meta_graph`)
and optimizes it with Grappler's default passes (`tf_optimizer.OptimizeGraph`, as a TF1
Session does), then writes:

  fixtures/tf/grappler/COUNTS     lines `name nodes_before nodes_after_grappler`
  fixtures/tf/grappler/NAME.pb    Grappler's optimized GraphDef (fused ops and all), which
                                  `cargo test` imports and runs against TensorFlow's outputs

Run:  .venv/bin/python scripts/grappler_reference.py
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import config_pb2, rewriter_config_pb2
from tensorflow.python.grappler import tf_optimizer

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
FIX = os.path.join(ROOT, "fixtures", "tf")
OUT = os.path.join(FIX, "grappler")


def grappler_item(gd, feeds, fetches):
    """The MetaGraphDef and ConfigProto Grappler gets for `gd` with these feeds and fetches,
    as a TF1 Session would set them up: nodes placed on the CPU, default passes, two
    iterations, small graphs optimized too."""
    gd = type(gd).FromString(gd.SerializeToString())
    # Placed on the CPU, as a Session places them (the remapper only fuses placed nodes).
    for n in gd.node:
        n.device = n.device or "/job:localhost/replica:0/task:0/device:CPU:0"
    g = tf.Graph()
    with g.as_default():
        tf.graph_util.import_graph_def(gd, name="")
        mg = tf.compat.v1.train.export_meta_graph(graph=g)
    # Fetches and feeds are what Grappler must preserve (GrapplerItem.fetch / feed).
    for name in fetches:
        mg.collection_def["train_op"].node_list.value.append(name)
    sig = mg.signature_def["serving_default"]
    for f, infos in [(f, sig.inputs) for f in feeds] + [(f, sig.outputs) for f in fetches]:
        t = g.get_tensor_by_name(f)
        infos[f].name = f
        infos[f].dtype = t.dtype.as_datatype_enum
        infos[f].tensor_shape.CopyFrom(t.shape.as_proto())
    config = config_pb2.ConfigProto()
    rw = config.graph_options.rewrite_options
    rw.min_graph_nodes = -1  # optimize small graphs too (the fixtures are small)
    rw.meta_optimizer_iterations = rewriter_config_pb2.RewriterConfig.TWO
    return mg, config


def grappler(gd, feeds, fetches):
    """Grappler's default pipeline on `gd` for these feeds and fetches; returns its GraphDef."""
    mg, config = grappler_item(gd, feeds, fetches)
    return tf_optimizer.OptimizeGraph(config, mg)


def main():
    os.makedirs(OUT, exist_ok=True)
    lines = ["# name nodes_before nodes_after_grappler  (TensorFlow %s, default passes, 2 iterations)" % tf.__version__]
    names = []
    for line in open(os.path.join(FIX, "MANIFEST")):
        line = line.split("#")[0].strip()
        if line:
            names.append(line.split()[0])
    for name in names + ["seed_000"]:
        path = os.path.join(FIX, name + (".pbtxt" if name == "seed_000" else ".pb"))
        gd = tf.compat.v1.GraphDef()
        if name == "seed_000":
            from google.protobuf import text_format
            text_format.Parse(open(path).read(), gd)
            feeds = []
        else:
            gd.ParseFromString(open(path, "rb").read())
            feeds = list(np.load(os.path.join(FIX, name + ".inputs.npz")).keys())
        fetches = list(np.load(os.path.join(FIX, name + ".expected.npz")).keys())
        opt = grappler(gd, feeds, fetches)
        with open(os.path.join(OUT, name + ".pb"), "wb") as f:
            f.write(opt.SerializeToString(deterministic=True))
        ops = sorted({n.op for n in opt.node} - {n.op for n in gd.node})
        lines.append(f"{name} {len(gd.node)} {len(opt.node)}")
        print(f"{name}: {len(gd.node)} -> {len(opt.node)} nodes (Grappler); new ops {ops}")
    with open(os.path.join(OUT, "COUNTS"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
