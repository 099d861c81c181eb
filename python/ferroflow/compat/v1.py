"""``tf.compat.v1`` on ferroflow: TensorFlow 1 graph code (placeholders, ``tf.layers``,
optimizers, ``Saver``, sessions) that runs unchanged but for its import line::

    import ferroflow.compat.v1 as tf

Every function here is thin Python over ``ferroflow.raw_ops`` (the op registry's ops, with
TensorFlow's node names); gradients, savers and meta graph import call the Rust runtime.
Variables are resource variables (``VarHandleOp``), as TensorFlow 2's ``compat.v1`` makes them.
"""
from __future__ import annotations

import os
import types
from typing import Any, List, Optional, Sequence

import numpy as np

from ferroflow import _native, errors, raw_ops  # noqa: F401
from ferroflow.client import RunMetadata, RunOptions, Session  # noqa: F401
from ferroflow.framework import (  # noqa: F401
    DType,
    Graph,
    Operation,
    Tensor,
    as_dtype,
    bool_,
    constant,
    convert_to_tensor,
    float16,
    float32,
    float64,
    get_default_graph,
    int8,
    int16,
    int32,
    int64,
    placeholder,
    reset_default_graph,
    string,
    uint8,
)

bool = bool_  # noqa: A001 (TensorFlow's `tf.bool`)

GLOBAL_VARIABLES = "variables"
TRAINABLE_VARIABLES = "trainable_variables"
GLOBAL_STEP = "global_step"


class GraphKeys:
    GLOBAL_VARIABLES = GLOBAL_VARIABLES
    TRAINABLE_VARIABLES = TRAINABLE_VARIABLES
    GLOBAL_STEP = GLOBAL_STEP


def _g() -> Graph:
    return get_default_graph()


def _group(ops: Sequence[Any], name: str) -> Operation:
    node, _ = _g()._add_op("NoOp", [], {}, name, control_inputs=[o.op if isinstance(o, Tensor) else o for o in ops])
    return Operation(_g(), node)


def group(*inputs: Any, name: Optional[str] = None) -> Operation:
    """An op that runs all of ``inputs`` (``tf.group``)."""
    return _group(list(inputs), name or "group_deps")


def _axes(x: Tensor, axis: Any) -> Tensor:
    if axis is None:
        rank = x.shape.rank
        if rank is not None:
            return constant(np.arange(rank, dtype=np.int32))
        return raw_ops.Range(start=constant(0), limit=raw_ops.Rank(input=x), delta=constant(1))
    return constant(np.asarray(axis, dtype=np.int32))


def reduce_mean(input_tensor: Any, axis: Any = None, keepdims: bool = False, name: Optional[str] = None) -> Tensor:
    x = convert_to_tensor(input_tensor)
    return raw_ops.Mean(input=x, axis=_axes(x, axis), keep_dims=keepdims, name=name or "Mean")


def reduce_sum(input_tensor: Any, axis: Any = None, keepdims: bool = False, name: Optional[str] = None) -> Tensor:
    x = convert_to_tensor(input_tensor)
    return raw_ops.Sum(input=x, axis=_axes(x, axis), keep_dims=keepdims, name=name or "Sum")


def log(x: Any, name: Optional[str] = None) -> Tensor:
    return raw_ops.Log(x=convert_to_tensor(x), name=name or "Log")


def argmax(input: Any, axis: Any = None, name: Optional[str] = None, output_type: Any = int64) -> Tensor:  # noqa: A002
    return raw_ops.ArgMax(
        input=convert_to_tensor(input),
        dimension=constant(np.int32(0 if axis is None else axis)),
        output_type=as_dtype(output_type),
        name=name or "ArgMax",
    )


def equal(x: Any, y: Any, name: Optional[str] = None) -> Tensor:
    x = convert_to_tensor(x)
    return raw_ops.Equal(x=x, y=convert_to_tensor(y, dtype=x.dtype), name=name or "Equal")


def cast(x: Any, dtype: Any, name: Optional[str] = None) -> Tensor:
    return raw_ops.Cast(x=convert_to_tensor(x), DstT=as_dtype(dtype), name=name or "Cast")


def identity(input: Any, name: Optional[str] = None) -> Tensor:  # noqa: A002
    return raw_ops.Identity(input=convert_to_tensor(input), name=name or "Identity")


def shape(input: Any, name: Optional[str] = None, out_type: Any = int32) -> Tensor:  # noqa: A002
    return raw_ops.Shape(input=convert_to_tensor(input), out_type=as_dtype(out_type), name=name or "Shape")


nn = types.SimpleNamespace(
    relu=lambda features, name=None: raw_ops.Relu(features=features, name=name or "Relu"),
    softmax=lambda logits, axis=None, name=None: raw_ops.Softmax(logits=logits, name=name or "Softmax"),
    sigmoid=lambda x, name=None: raw_ops.Sigmoid(x=x, name=name or "Sigmoid"),
    tanh=lambda x, name=None: raw_ops.Tanh(x=x, name=name or "Tanh"),
)


# Initializers: callables (shape, dtype) -> Tensor, named under the variable's `Initializer/`.
class truncated_normal_initializer:  # noqa: N801 (TensorFlow's name)
    def __init__(self, mean: float = 0.0, stddev: float = 1.0, seed: Optional[int] = None, dtype: Any = float32):
        self.mean, self.stddev, self.seed, self.dtype = mean, stddev, seed, as_dtype(dtype)

    def __call__(self, shape: Sequence[int], dtype: Any = None) -> Tensor:
        d = as_dtype(dtype or self.dtype)
        r = raw_ops.TruncatedNormal(
            shape=constant(np.asarray(shape, np.int32)),
            dtype=d,
            seed=self.seed or 0,
            seed2=0,
            name="truncated_normal/TruncatedNormal",
        )
        return raw_ops.AddV2(
            x=raw_ops.Mul(x=r, y=constant(np.asarray(self.stddev, d.name)), name="truncated_normal/mul"),
            y=constant(np.asarray(self.mean, d.name)),
            name="truncated_normal",
        )


class zeros_initializer:  # noqa: N801
    def __init__(self, dtype: Any = float32):
        self.dtype = as_dtype(dtype)

    def __call__(self, shape: Sequence[int], dtype: Any = None) -> Tensor:
        d = as_dtype(dtype or self.dtype)
        return constant(np.zeros(shape, d.as_numpy_dtype), name="zeros")


class glorot_uniform_initializer:  # noqa: N801
    def __init__(self, seed: Optional[int] = None, dtype: Any = float32):
        self.seed, self.dtype = seed, as_dtype(dtype)

    def __call__(self, shape: Sequence[int], dtype: Any = None) -> Tensor:
        d = as_dtype(dtype or self.dtype)
        fan_in, fan_out = (shape[-2], shape[-1]) if len(shape) >= 2 else (shape[0], shape[0])
        receptive = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
        limit = float(np.sqrt(6.0 / ((fan_in + fan_out) * receptive)))
        u = raw_ops.RandomUniform(
            shape=constant(np.asarray(shape, np.int32)), dtype=d, seed=self.seed or 0, seed2=0, name="random_uniform/RandomUniform"
        )
        return raw_ops.AddV2(
            x=raw_ops.Mul(x=u, y=constant(np.asarray(2 * limit, d.name))), y=constant(np.asarray(-limit, d.name)), name="random_uniform"
        )


class Variable:
    """A resource variable: its handle (``VarHandleOp``), its value (``name/Read/ReadVariableOp``)
    and its initializer (``name/Assign``)."""

    def __init__(self, graph: Graph, name: str, handle: Tensor, value: Tensor, initializer: Operation, trainable: bool):
        self.graph, self.name, self.handle, self.value = graph, name, handle, value
        self.initializer, self.trainable = initializer, trainable
        self.dtype = value.dtype

    @property
    def op(self) -> Operation:
        return self.handle.op

    @property
    def shape(self) -> Any:
        return self.value.shape

    def read_value(self) -> Tensor:
        return self.value

    def __repr__(self) -> str:
        return f"<tf.Variable '{self.name}:0' shape={self.shape.dims} dtype={self.dtype.name}>"

    # A variable in an expression is its value.
    def __getattr__(self, item: str) -> Any:
        return getattr(self.value, item)

    def __add__(self, o: Any) -> Tensor:
        return self.value + o

    def __mul__(self, o: Any) -> Tensor:
        return self.value * o

    def __sub__(self, o: Any) -> Tensor:
        return self.value - o


def _value(x: Any) -> Any:
    return x.value if isinstance(x, Variable) else x


def _make_variable(name: str, shape: Sequence[int], dtype: Any, initializer: Any, trainable: bool) -> Variable:
    g = _g()
    d = as_dtype(dtype)
    full = g._scope.prefix() + name
    if any(v.name == full for v in g.get_collection(GLOBAL_VARIABLES)):
        raise ValueError(f"Variable {full} already exists")
    handle = raw_ops.VarHandleOp(shape=list(shape), dtype=d, shared_name=full, container="", name=name)
    with g.name_scope(name + "/Initializer"):
        init = initializer(list(shape), d) if callable(initializer) else constant(np.asarray(initializer, d.as_numpy_dtype))
    assign = raw_ops.AssignVariableOp(resource=handle, value=init, name=f"{name}/Assign")
    value = raw_ops.ReadVariableOp(resource=handle, dtype=d, name=f"{name}/Read/ReadVariableOp")
    v = Variable(g, handle.op.name, handle, value, assign, trainable)
    g.add_to_collection(GLOBAL_VARIABLES, v)
    if trainable:
        g.add_to_collection(TRAINABLE_VARIABLES, v)
    return v


def get_variable(
    name: str, shape: Sequence[int] = (), dtype: Any = float32, initializer: Any = None, trainable: bool = True
) -> Variable:
    return _make_variable(name, shape, dtype, initializer or glorot_uniform_initializer(), trainable)


def global_variables() -> List[Variable]:
    return _g().get_collection(GLOBAL_VARIABLES)


def trainable_variables() -> List[Variable]:
    return _g().get_collection(TRAINABLE_VARIABLES)


def global_variables_initializer() -> Operation:
    return _group([v.initializer for v in global_variables()], "init")


def _unique_layer_name(base: str) -> str:
    taken = _g()._layer_names
    name, i = base, 0
    while name in taken:
        i += 1
        name = f"{base}_{i}"
    taken.add(name)
    return name


def _dense(
    inputs: Any,
    units: int,
    activation: Any = None,
    use_bias: bool = True,
    kernel_initializer: Any = None,
    bias_initializer: Any = None,
    name: Optional[str] = None,
    **_: Any,
) -> Tensor:
    x = convert_to_tensor(_value(inputs))
    n_in = x.shape.as_list()[-1]
    if n_in is None:
        raise ValueError("The last dimension of the inputs to `Dense` should be defined. Found `None`.")
    g = _g()
    with g.name_scope(_unique_layer_name(name or "dense")):
        kernel = _make_variable("kernel", [n_in, units], x.dtype, kernel_initializer or glorot_uniform_initializer(), True)
        y = raw_ops.MatMul(a=x, b=kernel.value, name="MatMul")
        if use_bias:
            bias = _make_variable("bias", [units], x.dtype, bias_initializer or zeros_initializer(), True)
            y = raw_ops.BiasAdd(value=y, bias=bias.value, name="BiasAdd")
        if activation is not None:
            y = activation(y)
    return y


def _dropout(
    inputs: Any, rate: float = 0.5, noise_shape: Any = None, seed: Optional[int] = None, training: Any = False, name: Optional[str] = None
) -> Tensor:
    x = convert_to_tensor(_value(inputs))
    g = _g()
    with g.name_scope(_unique_layer_name(name or "dropout")):
        if isinstance(training, (int, np.bool_)) and not isinstance(training, Tensor):
            if not training:
                return raw_ops.Identity(input=x, name="Identity")
            training = constant(True)
        # TensorFlow 1's cond on `training`: Switch, the dropout on the true side, Merge.
        off, on = raw_ops.Switch(data=x, pred=training, name="cond/Switch")
        noise = raw_ops.RandomUniform(
            shape=raw_ops.Shape(input=on, out_type=int32), dtype=x.dtype, seed=seed or 0, seed2=0,
            name="cond/dropout/random_uniform",
        )
        keep = raw_ops.Cast(x=raw_ops.GreaterEqual(x=noise, y=constant(np.asarray(rate, x.dtype.name))), DstT=x.dtype)
        scaled = raw_ops.Mul(x=on, y=constant(np.asarray(1.0 / (1.0 - rate), x.dtype.name)), name="cond/dropout/Mul")
        dropped = raw_ops.Mul(x=scaled, y=keep, name="cond/dropout/Mul_1")
        kept = raw_ops.Identity(input=off, name="cond/Identity")
        return raw_ops.Merge(inputs=[kept, dropped], name="cond/Merge")[0]


layers = types.SimpleNamespace(dense=_dense, dropout=_dropout)


def gradients(ys: Any, xs: Sequence[Any], grad_ys: Any = None, name: str = "gradients") -> List[Optional[Tensor]]:
    """Symbolic gradients (``tf.gradients``); ``xs`` may be Variables (their handles)."""
    g = _g()
    ys = ys if isinstance(ys, (list, tuple)) else [ys]
    xs_t = [x.handle if isinstance(x, Variable) else x for x in xs]
    names = _native.gradients(
        g._native, [y.name for y in ys], [x.name for x in xs_t], None if grad_ys is None else [t.name for t in grad_ys]
    )
    return [None if n is None else g.get_tensor_by_name(n) for n in names]


def _get_or_create_global_step() -> Variable:
    g = _g()
    found = g.get_collection(GLOBAL_STEP)
    if found:
        return found[0]
    v = _make_variable("global_step", [], int64, zeros_initializer(int64), False)
    g.add_to_collection(GLOBAL_STEP, v)
    return v


class _AdamOptimizer:
    """TensorFlow 1's ``AdamOptimizer``: slots ``VAR/Adam`` and ``VAR/Adam_1``, ``beta1_power`` and
    ``beta2_power`` variables, ``ResourceApplyAdam`` per variable, the powers updated after."""

    def __init__(self, learning_rate: float = 0.001, beta1: float = 0.9, beta2: float = 0.999, epsilon: float = 1e-8, name: str = "Adam"):
        self.lr, self.beta1, self.beta2, self.epsilon, self.name = learning_rate, beta1, beta2, epsilon, name

    def minimize(self, loss: Tensor, global_step: Optional[Variable] = None, var_list: Any = None, name: Optional[str] = None) -> Operation:
        var_list = list(var_list or trainable_variables())
        grads = gradients(loss, var_list)
        return self.apply_gradients(list(zip(grads, var_list)), global_step=global_step, name=name)

    def apply_gradients(self, grads_and_vars: Any, global_step: Optional[Variable] = None, name: Optional[str] = None) -> Operation:
        pairs = [(gr, v) for gr, v in grads_and_vars if gr is not None]
        if not pairs:
            raise ValueError("No gradients provided for any variable")
        g = _g()
        dt = pairs[0][1].dtype
        b1p = _make_variable("beta1_power", [], dt, self.beta1, False)
        b2p = _make_variable("beta2_power", [], dt, self.beta2, False)
        updates = []
        with g.name_scope(name or self.name):
            c = lambda v: constant(np.asarray(v, dt.name))  # noqa: E731
            lr, b1, b2, eps = c(self.lr), c(self.beta1), c(self.beta2), c(self.epsilon)
            for gr, v in pairs:
                m = _slot(v, "Adam")
                s = _slot(v, "Adam_1")
                updates.append(
                    raw_ops.ResourceApplyAdam(
                        var=v.handle, m=m.handle, v=s.handle, beta1_power=b1p.value, beta2_power=b2p.value,
                        lr=lr, beta1=b1, beta2=b2, epsilon=eps, grad=gr, use_locking=False,
                        name=f"update_{v.name.replace('/', '_')}/ResourceApplyAdam",
                    )
                )
            finish = []
            for var, beta in ((b1p, b1), (b2p, b2)):
                node, outs = g._add_op("ReadVariableOp", [var.handle], {"dtype": dt.name}, "ReadVariableOp", control_inputs=updates)
                mul = raw_ops.Mul(x=outs[0], y=beta, name="mul")
                finish.append(raw_ops.AssignVariableOp(resource=var.handle, value=mul, name="AssignVariableOp"))
            deps = updates + finish
            if global_step is not None:
                node, _ = g._add_op(
                    "AssignAddVariableOp", [global_step.handle, constant(np.int64(1))], {"dtype": "int64"}, "global_step_add",
                    control_inputs=deps,
                )
                deps = deps + [Operation(g, node)]
        return _group(deps, name or self.name)


def _slot(v: Variable, suffix: str) -> Variable:
    g = _g()
    outer = g._scope
    g._scope = g._native  # slots are named from the variable's full name, at the top
    try:
        return _make_variable(f"{v.name}/{suffix}", v.shape.as_list(), v.dtype, zeros_initializer(v.dtype), False)
    finally:
        g._scope = outer


class Saver:
    """``tf.compat.v1.train.Saver``: ``save/`` ops over the variables (TensorFlow's node names),
    checkpoints in TensorFlow's bundle format, ``PREFIX.meta``, the ``checkpoint`` file."""

    def __init__(self, var_list: Any = None, max_to_keep: int = 5, keep_checkpoint_every_n_hours: float = 10000.0, _native_saver: Any = None):
        if _native_saver is not None:
            self._native = _native_saver
            return
        g = _g()
        vars_ = sorted(var_list or global_variables(), key=lambda v: v.name)
        if not vars_:
            raise ValueError("No variables to save")
        with g.name_scope("save") as prefix:
            inp = constant(np.asarray(b"model", dtype=object), name="filename/input")
            fname = raw_ops.PlaceholderWithDefault(input=inp, shape=[], name="filename")
            const = raw_ops.PlaceholderWithDefault(input=fname, shape=[], name="Const")
            keys = np.asarray([v.name.encode() for v in vars_], dtype=object)
            blanks = np.asarray([b""] * len(vars_), dtype=object)
            save = raw_ops.SaveV2(
                prefix=const, tensor_names=constant(keys, name="SaveV2/tensor_names"),
                shape_and_slices=constant(blanks, name="SaveV2/shape_and_slices"),
                tensors=[v.value for v in vars_], name="SaveV2",
            )
            _, outs = g._add_op("Identity", [const], {}, "control_dependency", control_inputs=[save])
            save_tensor = outs[0]
            restored = raw_ops.RestoreV2(
                prefix=const, tensor_names=constant(keys, name="RestoreV2/tensor_names"),
                shape_and_slices=constant(blanks, name="RestoreV2/shape_and_slices"),
                dtypes=[v.dtype for v in vars_], name="RestoreV2",
            )
            restored = restored if isinstance(restored, list) else [restored]
            assigns = [
                raw_ops.AssignVariableOp(
                    resource=v.handle, value=raw_ops.Identity(input=r, name="Identity"), validate_shape=False, name="AssignVariableOp"
                )
                for v, r in zip(vars_, restored)
            ]
            restore_all = _group(assigns, "restore_all")
        del prefix
        self._native = _native.Saver(const.name, save_tensor.name, restore_all.name, max_to_keep, keep_checkpoint_every_n_hours)

    def save(self, sess: Session, save_path: str, global_step: Any = None, **_: Any) -> str:
        sess._sync()
        step = None
        if global_step is not None:
            if isinstance(global_step, (int, np.integer, np.ndarray)):
                step = int(global_step)
            else:
                step = int(sess.run(_value(global_step)))
        directory = os.path.dirname(str(save_path))
        if directory:
            os.makedirs(directory, exist_ok=True)
        return self._native.save(sess._native, str(save_path), step)

    def restore(self, sess: Session, save_path: str) -> None:
        if save_path is None:
            raise ValueError("Can't load save_path when it is None.")
        sess._sync()
        self._native.restore(sess._native, str(save_path))


def _import_meta_graph(meta_graph_or_file: str, import_scope: Optional[str] = None, **_: Any) -> Optional[Saver]:
    native = _native.import_meta_graph(_g()._native, str(meta_graph_or_file), import_scope or "")
    return None if native is None else Saver(_native_saver=native)


def _latest_checkpoint(checkpoint_dir: str, latest_filename: Optional[str] = None) -> Optional[str]:
    return _native.latest_checkpoint(str(checkpoint_dir))


train = types.SimpleNamespace(
    AdamOptimizer=_AdamOptimizer,
    Saver=Saver,
    get_or_create_global_step=_get_or_create_global_step,
    latest_checkpoint=_latest_checkpoint,
    import_meta_graph=_import_meta_graph,
)
