"""``ferroflow.saved_model.load``: a TensorFlow SavedModel whose ``signatures`` are callables
taking arrays by input key and returning a dict of NumPy arrays, as TensorFlow's are."""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

import numpy as np

from ferroflow import _native


class ConcreteFunction:
    """One signature (``loaded.signatures["serving_default"]``)."""

    def __init__(self, model: _native.SavedModel, name: str, spec: dict) -> None:
        self._model, self.name, self._spec = model, name, spec

    @property
    def structured_input_signature(self) -> Dict[str, Any]:
        return dict(self._spec["inputs"])

    @property
    def structured_outputs(self) -> Dict[str, Any]:
        return dict(self._spec["outputs"])

    def __call__(self, **inputs: Any) -> Dict[str, np.ndarray]:
        want = self._spec["inputs"]
        unknown = sorted(set(inputs) - set(want))
        if unknown:
            raise TypeError(f"signature '{self.name}' takes inputs {sorted(want)}, got unknown {unknown}")
        feeds = []
        for key, value in inputs.items():
            dtype = want[key][0]
            np_dtype = object if dtype == "string" else np.dtype(dtype)
            if not isinstance(value, np.ndarray) or (np_dtype is not object and value.dtype != np_dtype):
                value = np.asarray(value, dtype=np_dtype)
            feeds.append((key, value))
        return self._model.call(self.name, feeds)

    def __repr__(self) -> str:
        return f"<ConcreteFunction {self.name} inputs={sorted(self._spec['inputs'])} outputs={sorted(self._spec['outputs'])}>"


class LoadedModel:
    """What :func:`load` returns: ``signatures`` by name."""

    def __init__(self, native: _native.SavedModel) -> None:
        self._native = native
        self.signatures = {n: ConcreteFunction(native, n, s) for n, s in native.signature_defs().items()}


def load(export_dir: str, tags: Optional[Sequence[str]] = None) -> LoadedModel:
    """Loads the SavedModel in ``export_dir`` (the ``serve`` meta graph unless ``tags``)."""
    return LoadedModel(_native.SavedModel(str(export_dir), list(tags or [])))
