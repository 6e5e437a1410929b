"""Ops ``lower`` leaves to a library: the ATen call that computes each one.

Matmul-like ops and composites that ``decompose`` did not break up become extern nodes calling
the equivalent ATen overload with its positional arguments, so the program still runs in the
interpreter (and a backend can call the same kernel). An op missing from this table becomes
``extern "fir.OP"(operands..., attr = value...)``, which names it plainly but that no runtime
provides.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fir.ir.graph import Literal, TensorOp, Value
from fir.ir.ops import OPS

Call = tuple[str, list[Any], dict[str, Any]]


class _Op:
    """The operands and attributes (with their defaults) of one tensor op."""

    def __init__(self, n: TensorOp) -> None:
        self.n = n
        self.spec = OPS[n.op]

    def __getitem__(self, i: int) -> Any:
        ops = self.n.operands
        if i >= len(ops):
            return None
        o = ops[i]
        return o.value if isinstance(o, Literal) else o

    def attr(self, name: str) -> Any:
        return self.spec.attr(self.n.attrs, name)

    def dims(self) -> list[int]:
        dims = self.attr("dims")
        x = self[0]
        rank = x.type.rank if isinstance(x, Value) else 0
        return list(range(rank)) if dims is None else list(dims)


_REDUCTION_ENUM = {"none": 0, "mean": 1, "sum": 2}


def _matmul(o: _Op) -> Call:
    """``aten.mm``/``aten.bmm`` where the ranks say which (what ``aten.matmul`` would call,
    without its composite's dispatch on the host at every call: the GPU's matmuls are often
    host-bound), ``aten.matmul`` for the broadcasting rest."""
    a, b = o[0], o[1]
    ranks = (a.type.rank, b.type.rank) if isinstance(a, Value) and isinstance(b, Value) else None
    callee = {(2, 2): "aten.mm.default", (3, 3): "aten.bmm.default"}.get(ranks or (0, 0))
    if callee == "aten.bmm.default" and a.type.shape[0] != b.type.shape[0]:
        callee = None  # a batch of 1 broadcast against another: matmul's
    return (callee or "aten.matmul.default", [a, b], {})


EXTERNS: dict[str, Callable[[_Op], Call]] = {
    "matmul": _matmul,
    "addmm": lambda o: (
        "aten.addmm.default",
        [o[0], o[1], o[2]],
        {"beta": o.attr("beta"), "alpha": o.attr("alpha")},
    ),
    "linear": lambda o: ("aten.linear.default", [o[0], o[1], o[2]], {}),
    "softmax": lambda o: ("aten._softmax.default", [o[0], o.attr("dim"), False], {}),
    "log_softmax": lambda o: ("aten._log_softmax.default", [o[0], o.attr("dim"), False], {}),
    "logsumexp": lambda o: ("aten.logsumexp.default", [o[0], o.dims(), o.attr("keepdim")], {}),
    "var": lambda o: (
        "aten.var.correction",
        [o[0], o.dims()],
        {"correction": o.attr("correction"), "keepdim": o.attr("keepdim")},
    ),
    "std": lambda o: (
        "aten.std.correction",
        [o[0], o.dims()],
        {"correction": o.attr("correction"), "keepdim": o.attr("keepdim")},
    ),
    "var_mean": lambda o: (
        "aten.var_mean.correction",
        [o[0], o.dims()],
        {"correction": o.attr("correction"), "keepdim": o.attr("keepdim")},
    ),
    "layer_norm": lambda o: (
        "aten.layer_norm.default",
        [o[0], o.attr("normalized_shape"), o[1], o[2], o.attr("eps")],
        {},
    ),
    "rms_norm": lambda o: (
        "aten.rms_norm.default",
        [o[0], o.attr("normalized_shape"), o[1], o.attr("eps")],
        {},
    ),
    "batch_norm": lambda o: (
        "aten.batch_norm.default",
        [o[0], o[1], o[2], o[3], o[4], False, 0.0, o.attr("eps"), False],
        {},
    ),
    "group_norm": lambda o: (
        "aten.group_norm.default",
        [o[0], o.attr("num_groups"), o[1], o[2], o.attr("eps")],
        {},
    ),
    "gelu": lambda o: ("aten.gelu.default", [o[0]], {"approximate": o.attr("approximate")}),
    "silu": lambda o: ("aten.silu.default", [o[0]], {}),
    "mish": lambda o: ("aten.mish.default", [o[0]], {}),
    "softplus": lambda o: (
        "aten.softplus.default",
        [o[0], o.attr("beta"), o.attr("threshold")],
        {},
    ),
    "hardswish": lambda o: ("aten.hardswish.default", [o[0]], {}),
    "hardsigmoid": lambda o: ("aten.hardsigmoid.default", [o[0]], {}),
    "leaky_relu": lambda o: ("aten.leaky_relu.default", [o[0], o.attr("negative_slope")], {}),
    "elu": lambda o: ("aten.elu.default", [o[0], o.attr("alpha")], {}),
    "hardtanh": lambda o: (
        "aten.hardtanh.default",
        [o[0], o.attr("min_val"), o.attr("max_val")],
        {},
    ),
    "dropout": lambda o: ("aten.dropout.default", [o[0], o.attr("p"), o.attr("train")], {}),
    "cross_entropy": lambda o: (
        "aten.cross_entropy_loss.default",
        [
            o[0],
            o[1],
            o[2],
            _REDUCTION_ENUM[o.attr("reduction")],
            o.attr("ignore_index"),
            o.attr("label_smoothing"),
        ],
        {},
    ),
    "nll_loss": lambda o: (
        "aten.nll_loss.default",
        [o[0], o[1], o[2], _REDUCTION_ENUM[o.attr("reduction")], o.attr("ignore_index")],
        {},
    ),
}


def extern_call(n: TensorOp) -> Call:
    """The callee and arguments of the extern node that computes ``n``."""
    make = EXTERNS.get(n.op)
    if make is not None:
        return make(_Op(n))
    args = [o.value if isinstance(o, Literal) else o for o in n.operands]
    spec = OPS.get(n.op)
    attrs = dict(n.attrs)
    if spec is not None:
        attrs = {k: spec.attr(n.attrs, k) for k in spec.attrs} | attrs
    return f"fir.{n.op}", args, attrs
