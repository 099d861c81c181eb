"""(d) Versions under load: version 2 copied into the base path while a thread sends requests in a
loop; no request fails, version 2 takes over; removing it falls back to version 1; a broken
version directory ends as END with its error in the status while the served version keeps serving.
The model: harness.build_multi_model, y = 2x + bias with bias = the version's number."""
import json
import shutil
import threading
import time

import pytest

import harness as h
from conftest import started


class Load:
    """Requests in a loop from a thread, recording every answer's bias (y at x = 0)."""

    def __init__(self, server):
        self.server = server
        self.seen = []
        self.failures = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        import http.client

        conn = http.client.HTTPConnection(h.HOST, self.server.rest_port, timeout=30)
        body = json.dumps({"instances": [[0.0, 0.0, 0.0]]})
        while not self.stop.is_set():
            try:
                conn.request("POST", "/v1/models/m:predict", body, {"Content-Type": "application/json"})
                r = conn.getresponse()
                data = r.read()
                if r.status != 200:
                    self.failures.append((r.status, data[:300]))
                else:
                    self.seen.append(json.loads(data)["predictions"][0][0])
            except Exception as e:  # noqa: BLE001
                self.failures.append(repr(e))
                conn.close()
                conn = http.client.HTTPConnection(h.HOST, self.server.rest_port, timeout=30)
        conn.close()

    def latest(self):
        return self.seen[-1] if self.seen else None

    def finish(self):
        self.stop.set()
        self.thread.join(30)


def statuses(server):
    code, body = server.status()
    assert code == 200, body
    return {int(s["version"]): s for s in body["model_version_status"]}


def test_versions_come_and_go_under_load(tmp_path, models):
    base = tmp_path / "m"
    h.copy_version(models["multi1"], base, 1)
    try:
        server = h.start_server(tmp_path, model_name="m", base_path=base,
                                extra=["--max_num_load_retries=0"])  # TF Serving: END at the first failure
    except h.ServerError as e:
        pytest.fail(str(e), pytrace=False)
    load = Load(server)
    try:
        h.wait_for(lambda: load.latest() == 1.0, 20, what="version 1 answering")
        # A new version appears (copied under a temporary name, then renamed into place).
        h.copy_version(models["multi2"], base, 2)
        h.wait_for(lambda: load.latest() == 2.0, 30, what="version 2 served")
        h.wait_for(lambda: statuses(server).get(2, {}).get("state") == "AVAILABLE", 10, what="version 2 AVAILABLE")
        h.wait_for(lambda: statuses(server).get(1, {}).get("state") == "END", 10, what="version 1 unloaded")
        n = len(load.seen)
        time.sleep(1.5)
        assert set(load.seen[n:]) == {2.0}
        code, meta = server.get("/v1/models/m/metadata")
        assert meta["model_spec"]["version"] == "2"

        # It goes away: version 1 is served again.
        shutil.rmtree(base / "2")
        h.wait_for(lambda: load.latest() == 1.0, 30, what="falling back to version 1")
        h.wait_for(lambda: statuses(server).get(1, {}).get("state") == "AVAILABLE", 10, what="version 1 AVAILABLE")
        h.wait_for(lambda: statuses(server).get(2, {}).get("state") == "END", 10, what="version 2 END")
        assert statuses(server)[2]["status"] == {"error_code": "OK", "error_message": ""}

        # A broken version 3: END with its error; version 1 keeps serving.
        broken = tmp_path / "broken"
        (broken / "variables").mkdir(parents=True)
        (broken / "saved_model.pb").write_bytes(b"\x08\xff\xff garbage, not a SavedModel proto \x00\x01")
        import os
        os.rename(broken, base / "3")
        h.wait_for(lambda: statuses(server).get(3, {}).get("state") == "END", 30, what="version 3 END")
        s3 = statuses(server)[3]["status"]
        assert s3["error_code"] != "OK" and s3["error_message"], s3
        assert statuses(server)[1]["state"] == "AVAILABLE"
        n = len(load.seen)
        time.sleep(2.5)  # a few more polls: nothing changes, nothing fails
        assert set(load.seen[n:]) == {1.0}
        assert statuses(server)[1]["state"] == "AVAILABLE"
        code, body = server.get("/v1/models/m/versions/3")
        assert code == 200 and body["model_version_status"][0]["state"] == "END"
        code, body = server.predict({"instances": [[0.0, 0.0, 0.0]]}, suffix="/versions/3")
        assert code == 404, body
    finally:
        load.finish()
        rc = server.stop()
    assert not load.failures, load.failures[:5]
    assert len(load.seen) > 20
    assert rc == 0, server.log_tail()


def test_no_version_yet_then_one_appears(tmp_path, models):
    """TF Serving waits for a first version before it opens its ports; once the directory
    appears, the model becomes AVAILABLE."""
    base = tmp_path / "m"
    base.mkdir()
    (base / "not-a-version").mkdir()

    def appear():
        time.sleep(2)
        h.copy_version(models["multi1"], base, 7)

    t = threading.Thread(target=appear)
    t.start()
    try:
        server = h.start_server(tmp_path, model_name="m", base_path=base, timeout=60)
    except h.ServerError as e:
        pytest.fail(str(e), pytrace=False)
    finally:
        t.join()
    try:
        assert statuses(server) == {7: {"version": "7", "state": "AVAILABLE",
                                        "status": {"error_code": "OK", "error_message": ""}}}
        code, body = server.predict({"instances": [[1.0, 1.0, 1.0]]})
        assert code == 200 and body == {"predictions": [[3.0, 3.0, 3.0]]}, body
    finally:
        server.stop()


def test_startup_with_only_a_broken_version_fails(tmp_path):
    """TF Serving waits for each model's first version before it opens its ports, and a permanent
    load failure aborts the start (here without load retries): the process exits non-zero
    rather than serving a model that can never answer."""
    base = tmp_path / "m" / "1"
    (base / "variables").mkdir(parents=True)
    (base / "saved_model.pb").write_bytes(b"not a SavedModel")
    rc, log = h.start_server(tmp_path, model_name="m", base_path=tmp_path / "m",
                             extra=["--max_num_load_retries=0"], expect_failure=True, timeout=20)
    assert rc != 0, log


def test_a_reread_model_config_file_adds_and_removes_models(tmp_path, models):
    """--model_config_file_poll_wait_seconds: a model added to the file is loaded, one removed
    is unloaded (404), a file that does not parse changes nothing; the server keeps answering."""
    for name in ("mlp", "cnn"):
        h.copy_version(models[name], tmp_path / name, 1)

    def config(*names):
        return "model_config_list {\n" + "\n".join(
            f'config {{ name: "{n}" base_path: "{tmp_path / n}" model_platform: "tensorflow" }}' for n in names
        ) + "\n}\n"

    server = started(tmp_path, config=config("mlp"), wait_models=["mlp"],
                     extra=["--model_config_file_poll_wait_seconds=1"])
    cfg = tmp_path / "models.config"
    try:
        assert server.status("cnn")[0] == 404
        cfg.write_text("model_config_list { config { name: ")
        time.sleep(2.5)
        assert server.status("mlp")[0] == 200, server.log_tail()
        cfg.write_text(config("mlp", "cnn"))
        h.wait_for(lambda: server.status("cnn")[0] == 200, 60, what="cnn loaded from the reread config")
        cfg.write_text(config("cnn"))
        h.wait_for(lambda: server.status("mlp")[0] == 404, 60, what="mlp unloaded")
        assert server.status("cnn")[0] == 200
        assert server.alive()
    finally:
        server.stop()
