"""Fixtures of the `ferroflow serve` checks: the servers (subprocesses of target/release/ferroflow
on free ports, killed at teardown), the SavedModels they serve, TensorFlow's reference outputs
and gRPC stubs.

  main_server   --model_name=m --model_base_path=BASE (BASE/1 = fixtures/saved_model/keras_cnn),
                --rest_api_max_body_bytes=4 MiB, gRPC on --port
  multi_server  --model_config_file: multi (versions 1 and 2, labels stable=1 canary=2), loop
                (module_loop), mlp (keras_mlp), tf1 (tf1_builder), cnn (keras_cnn)
  cls_server    a classification/regression model (ParseExample over tf.Examples)
  plain_server  classification/regression signatures that do not parse their examples

Modules: test_rest (a: REST parity with TensorFlow, status, metadata), test_grpc (b: the official
client), test_hostile (c: hostile requests, then still up), test_versions (d), test_shutdown (e:
SIGTERM/SIGINT drain), test_batching (f), test_classify (classify/regress/multi-inference).
Ports: the CLI takes 0 as "off", so free ports are found by binding port 0 and releasing it.
Everything is written under pytest's temporary directory (/tmp/pytest-of-$USER).

Run:  .venv/bin/python -m pytest scripts/serve_check -q      (about a minute)
      (FERROFLOW=/path/to/ferroflow to test another binary)
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pytest  # noqa: E402

import harness as h  # noqa: E402

MAX_BODY = 4 << 20


def pytest_report_header(config):
    sup = h.serve_supported()
    state = {None: "MISSING", False: "has NO `serve` subcommand (stale build?)", True: "ok"}[sup]
    return f"ferroflow binary: {h.FERROFLOW} ({state})"


@pytest.fixture(scope="session")
def tfref():
    return h.TFReference()


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    """The SavedModels: fixtures plus the ones TensorFlow builds here (in a temp dir)."""
    d = tmp_path_factory.mktemp("models")
    return {
        "cnn": h.FIXTURES / "keras_cnn",
        "mlp": h.FIXTURES / "keras_mlp",
        "loop": h.FIXTURES / "module_loop",
        "tf1": h.FIXTURES / "tf1_builder",
        "multi1": h.build_multi_model(d / "multi1", 1.0),
        "multi2": h.build_multi_model(d / "multi2", 2.0),
        "cls": h.build_classify_model(d / "cls"),
        "plain": h.build_plain_classify_model(d / "plain"),
    }


def started(workdir, why="", **kw):
    """`harness.start_server(workdir, **kw)`, or the test fails with the server's error (after
    `why`, when given)."""
    try:
        return h.start_server(workdir, **kw)
    except h.ServerError as e:
        message = f"{why}: {str(e).splitlines()[0][:300]}" if why else str(e)
        pytest.fail(message, pytrace=False)


def one_model_server(tmp_path_factory, models, name, why=""):
    """A server of version 1 of `models[name]` under the model name `name`."""
    work = tmp_path_factory.mktemp(name)
    h.copy_version(models[name], work / name, 1)
    return started(work, why, model_name=name, base_path=work / name)


def _stop(server):
    server.stop()
    server.stop(sig=9)


@pytest.fixture(scope="session")
def main_server(tmp_path_factory, models):
    work = tmp_path_factory.mktemp("main")
    base = work / "m"
    h.copy_version(models["cnn"], base, 1)
    server = started(work, model_name="m", base_path=base,
                     extra=[f"--rest_api_max_body_bytes={MAX_BODY}", "--rest_api_timeout_in_ms=20000"])
    server.base = base
    yield server
    _stop(server)


def multi_config(work, models):
    for v in (1, 2):
        h.copy_version(models[f"multi{v}"], work / "multi", v)
    for name in ("loop", "mlp", "tf1", "cnn"):
        h.copy_version(models[name], work / name, 1)
    entries = [
        f'config {{ name: "multi" base_path: "{work / "multi"}" model_platform: "tensorflow"\n'
        "  model_version_policy { specific { versions: 1 versions: 2 } }\n"
        '  version_labels { key: "stable" value: 1 } version_labels { key: "canary" value: 2 } }'
    ]
    for name in ("loop", "mlp", "tf1", "cnn"):
        entries.append(f'config {{ name: "{name}" base_path: "{work / name}" model_platform: "tensorflow" }}')
    return "model_config_list {\n" + "\n".join(entries) + "\n}\n"


@pytest.fixture(scope="session")
def multi_server(tmp_path_factory, models):
    work = tmp_path_factory.mktemp("multi")
    server = started(work, config=multi_config(work, models), wait_models=["multi", "loop", "mlp", "tf1", "cnn"])
    yield server
    _stop(server)


@pytest.fixture(scope="session")
def cls_server(tmp_path_factory, models):
    server = one_model_server(tmp_path_factory, models, "cls",
                              "the classify/regress model (ParseExampleV2 over tf.Examples) is not served")
    yield server
    _stop(server)


@pytest.fixture(scope="session")
def plain_server(tmp_path_factory, models):
    """Classification/regression signatures without ParseExample (harness.build_plain_classify_model)."""
    server = one_model_server(tmp_path_factory, models, "plain")
    yield server
    _stop(server)


# -- gRPC --------------------------------------------------------------------------------------
_channels = {}


def grpc_channel(server, ready_timeout=5):
    """A channel to the server's --port, checked once for readiness (fails the test when
    nothing answers gRPC there: the gRPC API not in this binary)."""
    import grpc

    key = (server.pid, server.grpc_port)
    if key not in _channels:
        ch = grpc.insecure_channel(f"{h.HOST}:{server.grpc_port}", options=[
            ("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)])
        try:
            grpc.channel_ready_future(ch).result(timeout=ready_timeout)
            _channels[key] = ch
        except grpc.FutureTimeoutError:
            _channels[key] = None
    if _channels[key] is None:
        pytest.fail(f"nothing answers gRPC on --port={server.grpc_port} (gRPC not served by this binary yet)",
                    pytrace=False)
    return _channels[key]


def prediction_stub(server):
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    return prediction_service_pb2_grpc.PredictionServiceStub(grpc_channel(server))


def model_stub(server):
    from tensorflow_serving.apis import model_service_pb2_grpc

    return model_service_pb2_grpc.ModelServiceStub(grpc_channel(server))


@pytest.fixture
def pstub(main_server):
    return prediction_stub(main_server)


@pytest.fixture
def mstub(main_server):
    return model_stub(main_server)
