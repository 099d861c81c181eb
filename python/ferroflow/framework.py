"""Graphs, tensors and operations as TensorFlow 1 has them (``tf.Graph``, ``tf.Tensor``,
``tf.Operation``), over the native graph builder; a default graph per thread."""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from ferroflow import _native


class DType:
    """A tensor element type (``tf.DType``): ``ferroflow.float32`` and friends."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    @property
    def as_numpy_dtype(self) -> Any:
        return object if self.name == "string" else np.dtype(self.name).type

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DType):
            return self.name == other.name
        return isinstance(other, str) and self.name == other

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"tf.{self.name}"


def as_dtype(value: Any) -> DType:
    """The DType for a DType, a name (``"float32"``) or a NumPy dtype or type."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str):
        return DType({"float": "float32", "double": "float64", "half": "float16"}.get(value, value))
    if value in (str, bytes, object):
        return DType("string")
    return DType(np.dtype(value).name)


float16, float32, float64 = DType("float16"), DType("float32"), DType("float64")
int8, int16, int32, int64 = DType("int8"), DType("int16"), DType("int32"), DType("int64")
uint8, uint16, uint32, uint64 = DType("uint8"), DType("uint16"), DType("uint32"), DType("uint64")
bool_, string, resource = DType("bool"), DType("string"), DType("resource")


class TensorShape:
    """A static shape: ``dims`` is ``None`` (unknown rank) or a list of ints and ``None``s."""

    __slots__ = ("dims",)

    def __init__(self, dims: Optional[Sequence[Optional[int]]]) -> None:
        self.dims = None if dims is None else list(dims)

    @property
    def rank(self) -> Optional[int]:
        return None if self.dims is None else len(self.dims)

    def as_list(self) -> List[Optional[int]]:
        if self.dims is None:
            raise ValueError("as_list() is not defined on an unknown TensorShape")
        return list(self.dims)

    def __iter__(self) -> Iterator[Optional[int]]:
        return iter(self.as_list())

    def __len__(self) -> int:
        return len(self.as_list())

    def __getitem__(self, i: int) -> Optional[int]:
        return self.as_list()[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TensorShape):
            return self.dims == other.dims
        return self.dims == (None if other is None else list(other))  # type: ignore[call-overload]

    def __repr__(self) -> str:
        return "TensorShape(None)" if self.dims is None else f"TensorShape({self.dims})"


class Operation:
    """A node of a graph (``tf.Operation``)."""

    __slots__ = ("graph", "name")

    def __init__(self, graph: "Graph", name: str) -> None:
        self.graph, self.name = graph, name

    @property
    def type(self) -> str:
        return self.graph._native.op_type(self.name)

    @property
    def outputs(self) -> List["Tensor"]:
        return [Tensor(self.graph, n, DType(d)) for n, d in self.graph._native.node_outputs(self.name)]

    def __repr__(self) -> str:
        return f"<tf.Operation '{self.name}' type={self.type}>"


class Tensor:
    """One output of a node (``tf.Tensor``): ``name`` is ``node:index``."""

    __slots__ = ("graph", "name", "dtype")

    def __init__(self, graph: "Graph", name: str, dtype: DType) -> None:
        self.graph, self.name, self.dtype = graph, name, dtype

    @property
    def op(self) -> Operation:
        return Operation(self.graph, self.name.rsplit(":", 1)[0])

    @property
    def value_index(self) -> int:
        return int(self.name.rsplit(":", 1)[1])

    @property
    def shape(self) -> TensorShape:
        return TensorShape(self.graph._native.tensor_info(self.name)[1])

    def get_shape(self) -> TensorShape:
        return self.shape

    def __repr__(self) -> str:
        return f"<tf.Tensor '{self.name}' shape={self.shape.dims} dtype={self.dtype.name}>"

    def __hash__(self) -> int:
        return hash((id(self.graph), self.name))

    def __eq__(self, other: object) -> bool:  # identity, as TensorFlow 1 tensors compare
        return isinstance(other, Tensor) and other.graph is self.graph and other.name == self.name

    # Operators build nodes, as TensorFlow's do.
    def _binary(self, op: str, other: Any, reverse: bool = False) -> "Tensor":
        from ferroflow import raw_ops

        other = convert_to_tensor(other, dtype=self.dtype, graph=self.graph)
        x, y = (other, self) if reverse else (self, other)
        return getattr(raw_ops, op)(x=x, y=y)

    def __add__(self, o: Any) -> "Tensor":
        return self._binary("AddV2", o)

    def __radd__(self, o: Any) -> "Tensor":
        return self._binary("AddV2", o, True)

    def __sub__(self, o: Any) -> "Tensor":
        return self._binary("Sub", o)

    def __rsub__(self, o: Any) -> "Tensor":
        return self._binary("Sub", o, True)

    def __mul__(self, o: Any) -> "Tensor":
        return self._binary("Mul", o)

    def __rmul__(self, o: Any) -> "Tensor":
        return self._binary("Mul", o, True)

    def __truediv__(self, o: Any) -> "Tensor":
        return self._binary("RealDiv", o)

    def __rtruediv__(self, o: Any) -> "Tensor":
        return self._binary("RealDiv", o, True)

    def __neg__(self) -> "Tensor":
        from ferroflow import raw_ops

        return raw_ops.Neg(x=self)

    def __matmul__(self, o: Any) -> "Tensor":
        from ferroflow import raw_ops

        return raw_ops.MatMul(a=self, b=convert_to_tensor(o, dtype=self.dtype, graph=self.graph))


class Graph:
    """A dataflow graph (``tf.Graph``). ``as_default()`` makes it the thread's default."""

    def __init__(self, native: Optional[_native.Graph] = None) -> None:
        self._native = native if native is not None else _native.Graph()
        self._scope = self._native
        self._collections: dict = {}
        self._layer_names: set = set()  # tf.layers' default names taken (dense, dense_1, ...)

    def as_default(self) -> "contextlib.AbstractContextManager[Graph]":
        return _default_graph_context(self)

    def as_graph_def(self) -> bytes:
        """The graph as a serialized TensorFlow GraphDef."""
        return self._native.as_graph_def()

    def get_tensor_by_name(self, name: str) -> Tensor:
        if ":" not in name:
            raise ValueError(f"The name '{name}' refers to an Operation, not a Tensor (tensor names end in ':<index>')")
        dtype, _ = self._native.tensor_info(name)
        return Tensor(self, name, DType(dtype))

    def get_operation_by_name(self, name: str) -> Operation:
        self._native.op_type(name)  # NotFoundError when absent
        return Operation(self, name)

    def get_operations(self) -> List[Operation]:
        return [Operation(self, n) for n in self._native.node_names()]

    def add_to_collection(self, name: str, value: Any) -> None:
        self._collections.setdefault(name, []).append(value)

    def get_collection(self, name: str) -> list:
        return list(self._collections.get(name, []))

    @contextlib.contextmanager
    def name_scope(self, name: str) -> Iterator[str]:
        outer = self._scope
        self._scope = outer.name_scope(name)
        try:
            yield self._scope.prefix()
        finally:
            self._scope = outer

    def _add_op(
        self,
        op_type: str,
        inputs: Sequence[Any],
        attrs: dict,
        name: Optional[str] = None,
        control_inputs: Sequence[Any] = (),
    ) -> Tuple[str, List[Tensor]]:
        names = [[t.name for t in i] if isinstance(i, (list, tuple)) else i.name for i in inputs]
        ctrl = [c.name for c in control_inputs]
        node, outs = self._scope.add_op(op_type, names, attrs, name, ctrl)
        return node, [Tensor(self, n, DType(d)) for n, d in outs]

    def __len__(self) -> int:
        return len(self._native)

    def __repr__(self) -> str:
        return f"<ferroflow Graph of {len(self)} nodes>"


_state = threading.local()
_global_default: List[Graph] = [Graph()]


def get_default_graph() -> Graph:
    """The thread's default graph (``tf.compat.v1.get_default_graph``)."""
    stack = getattr(_state, "stack", None)
    return stack[-1] if stack else _global_default[0]


def reset_default_graph() -> None:
    """Replaces the global default graph with an empty one."""
    if getattr(_state, "stack", None):
        raise AssertionError("Do not use reset_default_graph() inside a `with g.as_default()` block")
    _global_default[0] = Graph()


@contextlib.contextmanager
def _default_graph_context(g: Graph) -> Iterator[Graph]:
    stack = getattr(_state, "stack", None)
    if stack is None:
        stack = _state.stack = []
    stack.append(g)
    try:
        yield g
    finally:
        stack.pop()


def constant(value: Any, dtype: Any = None, name: Optional[str] = None, graph: Optional[Graph] = None) -> Tensor:
    """A ``Const`` node holding ``value``."""
    g = graph or get_default_graph()
    arr = np.asarray(value, dtype=None if dtype is None else as_dtype(dtype).as_numpy_dtype)
    if dtype is None and arr.dtype == np.float64 and not isinstance(value, (np.ndarray, np.generic)):
        arr = arr.astype(np.float32)  # Python floats are float32 tensors, as in TensorFlow
    if dtype is None and arr.dtype == np.int64 and not isinstance(value, (np.ndarray, np.generic)):
        arr = arr.astype(np.int32)
    dt = as_dtype(arr.dtype if arr.dtype.kind not in "OSU" else "string")
    _, outs = g._add_op("Const", [], {"value": arr, "dtype": dt.name}, name)
    return outs[0]


def convert_to_tensor(value: Any, dtype: Any = None, graph: Optional[Graph] = None) -> Tensor:
    """``value`` if it is a Tensor, else a constant of it (of ``dtype`` when given)."""
    if isinstance(value, Tensor):
        return value
    if hasattr(value, "read_value"):  # a variable stands for its value
        return value.read_value()
    return constant(value, dtype=dtype, graph=graph)


def placeholder(dtype: Any, shape: Any = None, name: Optional[str] = None) -> Tensor:
    """A ``Placeholder`` node to feed (``tf.compat.v1.placeholder``)."""
    g = get_default_graph()
    _, outs = g._add_op("Placeholder", [], {"dtype": as_dtype(dtype).name, "shape": shape}, name)
    return outs[0]


def load_graph(path: str) -> Graph:
    """A graph read from a ``.pb``, ``.pbtxt`` or ``.meta`` file."""
    return Graph(_native.Graph.load(str(path)))
