"""SavedModels written by TensorFlow, loaded and called from Python."""
import os

import numpy as np
import pytest

import ferroflow as ff

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "saved_model")


def test_keras_savedmodel_signature_matches_tensorflow():
    want = np.load(os.path.join(FIXTURES, "keras_mlp.npz"))
    loaded = ff.saved_model.load(os.path.join(FIXTURES, "keras_mlp"))
    sig = loaded.signatures["serving_default"]
    assert set(sig.structured_input_signature) == {"x"} or len(sig.structured_input_signature) == 1
    key = next(iter(sig.structured_input_signature))
    out = sig(**{key: want["x"].tolist()})  # lists converted to the input's dtype
    assert set(out) == {"output_0"}
    np.testing.assert_allclose(out["output_0"], want["output_0"], rtol=1e-5, atol=1e-6)


def test_bad_savedmodel_inputs_raise(tmp_path):
    with pytest.raises(ff.errors.OpError):
        ff.saved_model.load(str(tmp_path))
    (tmp_path / "saved_model.pb").write_bytes(b"\x12\xff\xff\xff\xff\x0f not a proto")
    with pytest.raises(ff.errors.OpError):
        ff.saved_model.load(str(tmp_path))
    sig = ff.saved_model.load(os.path.join(FIXTURES, "keras_mlp")).signatures["serving_default"]
    key = next(iter(sig.structured_input_signature))
    with pytest.raises(TypeError):
        sig(nope=np.zeros((1, 4), np.float32))
    with pytest.raises(ff.errors.InvalidArgumentError):
        sig(**{key: np.zeros((1, 5), np.float32)})
