"""``ferroflow.raw_ops.<Op>(**kwargs)`` for every op in ferroflow's registry, with
TensorFlow's argument and attr names (``tf.raw_ops``). The functions are made from the
registry's op definitions on first use, not written by hand: an op added to the registry is
here at once.

Inputs take Tensors or values (made constants); attrs take Python values (dtypes as
``ferroflow`` DTypes or names); ``name`` names the node. A one-output op returns its Tensor,
a no-output op its Operation, others a list of Tensors.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Dict, List

from ferroflow import _native

_DEFS: Dict[str, dict] = {}
_ALIASES = {"axis": "reduction_indices"}


def _defs() -> Dict[str, dict]:
    if not _DEFS:
        _DEFS.update(_native.op_defs())
    return _DEFS


def _wrapper(op: str, d: dict) -> Callable[..., Any]:
    from ferroflow.framework import Operation, Tensor, convert_to_tensor, get_default_graph

    inputs = d["inputs"]
    attr_names = {a[0] for a in d["attrs"]}
    takes = [n for n, _ in inputs] + sorted(attr_names) + ["name"]

    # TensorFlow's Python wrappers rename some op-def arguments (its api_defs): the
    # reductions' `reduction_indices` is `axis` in `tf.raw_ops`. Both are taken.
    input_names = {n for n, _ in inputs}
    aliases = {a: n for a, n in _ALIASES.items() if n in input_names and a not in input_names}

    def call(**kwargs: Any) -> Any:
        name = kwargs.pop("name", None)
        for a, n in aliases.items():
            if a in kwargs:
                kwargs[n] = kwargs.pop(a)
        unknown = [k for k in kwargs if k not in attr_names and k not in {n for n, _ in inputs}]
        if unknown:
            raise TypeError(f"raw_ops.{op}() got unexpected arguments {unknown}; it takes {takes}")
        graph = None
        for n, _ in inputs:
            v = kwargs.get(n)
            for t in v if isinstance(v, (list, tuple)) else [v]:
                if isinstance(t, Tensor):
                    graph = t.graph
                    break
            if graph is not None:
                break
        graph = graph or get_default_graph()
        args: List[Any] = []
        for n, is_list in inputs:
            if n not in kwargs:
                raise TypeError(f"raw_ops.{op}() missing input '{n}'")
            v = kwargs.pop(n)
            if is_list:
                args.append([convert_to_tensor(t, graph=graph) for t in v])
            else:
                args.append(convert_to_tensor(v, graph=graph))
        attrs = {k: (v.name if hasattr(v, "name") and not isinstance(v, (str, bytes)) else v) for k, v in kwargs.items()}
        node, outs = graph._add_op(op, args, attrs, name)
        if not outs:
            return Operation(graph, node)
        return outs[0] if len(outs) == 1 else outs

    call.__name__ = call.__qualname__ = op
    call.__doc__ = (
        f"TensorFlow's `{op}` op.\n\nInputs: {', '.join(n + ('[]' if l else '') for n, l in inputs) or '(none)'}\n"
        f"Attrs: {', '.join(f'{a[0]}: {a[1]}' + (f' = {a[2]!r}' if a[3] else '') for a in d['attrs']) or '(none)'}\n"
        f"Outputs: {', '.join(n + ('[]' if l else '') for n, l in d['outputs']) or '(none)'}"
    )
    return call


@functools.lru_cache(maxsize=None)
def _make(op: str) -> Callable[..., Any]:
    return _wrapper(op, _defs()[op])


def __getattr__(op: str) -> Callable[..., Any]:
    if op.startswith("__") or op not in _defs():
        raise AttributeError(f"module 'ferroflow.raw_ops' has no op '{op}'")
    return _make(op)


def __dir__() -> List[str]:
    return sorted(_defs())
