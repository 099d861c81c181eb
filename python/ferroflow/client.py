"""``Session`` (``tf.compat.v1.Session``), ``RunOptions`` and ``RunMetadata``."""
from __future__ import annotations

import threading
from typing import Any, Dict, List, Optional

import numpy as np

from ferroflow import _native
from ferroflow.framework import Graph, Operation, Tensor, get_default_graph


class RunOptions:
    """Per-step options (TensorFlow's ``RunOptions``)."""

    NO_TRACE, SOFTWARE_TRACE, HARDWARE_TRACE, FULL_TRACE = 0, 1, 2, 3

    def __init__(self, trace_level: int = 0, timeout_in_ms: int = 0, output_partition_graphs: bool = False) -> None:
        self.trace_level = trace_level
        self.timeout_in_ms = timeout_in_ms
        self.output_partition_graphs = output_partition_graphs


class RunMetadata:
    """What a traced step returns: TensorFlow's ``RunMetadata`` protobuf, as bytes
    (``SerializeToString()``; ``tf.compat.v1.RunMetadata.FromString`` parses them)."""

    def __init__(self) -> None:
        self._bytes = b""

    def SerializeToString(self) -> bytes:  # noqa: N802 (protobuf's name)
        return self._bytes

    def ParseFromString(self, data: bytes) -> None:  # noqa: N802
        self._bytes = bytes(data)


def _flatten(fetches: Any, out: List[Any]) -> Any:
    """The fetch structure with each leaf replaced by its index into ``out``."""
    if isinstance(fetches, (list, tuple)):
        inner = [_flatten(f, out) for f in fetches]
        return ("list" if isinstance(fetches, list) else "tuple", inner)
    if isinstance(fetches, dict):
        return ("dict", {k: _flatten(v, out) for k, v in fetches.items()})
    out.append(fetches)
    return ("leaf", len(out) - 1)


def _rebuild(shape: Any, values: List[Any]) -> Any:
    kind, inner = shape
    if kind == "leaf":
        return values[inner]
    if kind == "list":
        return [_rebuild(s, values) for s in inner]
    if kind == "tuple":
        return tuple(_rebuild(s, values) for s in inner)
    return {k: _rebuild(s, values) for k, s in inner.items()}


class Session:
    """Runs a graph (``tf.compat.v1.Session``). ``run`` takes fetches as names, Tensors,
    Operations or nested lists, tuples and dicts of them, and returns the same structure of
    NumPy arrays (``None`` for an Operation); ``feed_dict`` is keyed by names or Tensors.
    Fetched arrays are read-only views of the step's tensors; a C-contiguous, aligned feed of
    a numeric dtype is read in place (never written; a variable assigned from it keeps a copy),
    so do not write a fed array from another thread while a step runs. Steps run with the GIL released, and one session may be used from many threads."""

    def __init__(self, target: str = "", graph: Optional[Graph] = None, config: Any = None) -> None:
        if target:
            raise ValueError("ferroflow runs in-process: Session(target=...) must be empty")
        self.graph = graph or get_default_graph()
        inter = getattr(config, "inter_op_parallelism_threads", 0) or 0
        intra = getattr(config, "intra_op_parallelism_threads", 0) or 0
        self._native = _native.Session(self.graph._native, inter, intra)
        self._size = len(self.graph)
        self._lock = threading.Lock()
        self._feed_dtypes: Dict[str, Any] = {}

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._native.close()

    @property
    def closed(self) -> bool:
        return self._native.closed

    def _sync(self) -> None:
        if len(self.graph) != self._size:
            with self._lock:
                if len(self.graph) != self._size:
                    self._native.extend(self.graph._native)
                    self._size = len(self.graph)

    def run(
        self,
        fetches: Any,
        feed_dict: Optional[Dict[Any, Any]] = None,
        options: Optional[RunOptions] = None,
        run_metadata: Optional[RunMetadata] = None,
    ) -> Any:
        self._sync()
        leaves: List[Any] = []
        shape = _flatten(fetches, leaves)
        fetch_names: List[str] = []
        targets: List[str] = []
        slots: List[Optional[int]] = []
        for leaf in leaves:
            if hasattr(leaf, "read_value"):  # a variable fetches its value
                leaf = leaf.read_value()
            if isinstance(leaf, Operation):
                targets.append(leaf.name)
                slots.append(None)
            elif isinstance(leaf, Tensor):
                slots.append(len(fetch_names))
                fetch_names.append(leaf.name)
            elif isinstance(leaf, str):
                if ":" in leaf:
                    slots.append(len(fetch_names))
                    fetch_names.append(leaf)
                else:
                    targets.append(leaf.lstrip("^"))
                    slots.append(None)
            else:
                raise TypeError(f"Fetch argument {leaf!r} has invalid type {type(leaf).__name__}")
        feeds = []
        for k, v in (feed_dict or {}).items():
            name = k.name if isinstance(k, Tensor) else str(k)
            if ":" not in name:
                name += ":0"
            want = self._feed_dtypes.get(name)
            if want is None:
                dtype = self.graph._native.tensor_info(name)[0]
                want = self._feed_dtypes[name] = object if dtype == "string" else np.dtype(dtype)
            if not isinstance(v, np.ndarray) or (v.dtype != want and want is not object):
                # As TensorFlow: a feed is converted to the fed tensor's dtype.
                v = np.asarray(v, dtype=want)
            feeds.append((name, v))
        opts = options or RunOptions()
        values, meta = self._native.run(
            feeds,
            fetch_names,
            targets,
            trace_level=opts.trace_level,
            timeout_in_ms=opts.timeout_in_ms,
            output_partition_graphs=opts.output_partition_graphs,
            interruptible=threading.current_thread() is threading.main_thread(),
        )
        if run_metadata is not None and meta is not None:
            run_metadata.ParseFromString(meta)
        out = [None if s is None else values[s] for s in slots]
        return _rebuild(shape, out)
