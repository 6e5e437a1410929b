"""The rules of ``decompose``: one function per composite op, written with primitive ops.

A rule gets a :class:`~fir.passes.lowering.decompose_builder.Builder` for one op, emits primitive tensor ops
through it and returns the values that replace the op's results (in the builder's compute
dtype; the pass casts them back and gives them the original names). It returns None when the
op's form is not one it rewrites (``pow`` by a tensor), or raises :class:`Keep` with a reason
when it leaves a composite op alone (``dropout`` in training). docs/passes/decompose.md lists
every rule's formula.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fir.ir.dtypes import DType
from fir.ir.graph import Literal, Operand, TensorOp, Value
from fir.ir.ops import OPS
from fir.ir.types import TensorType

from .decompose_builder import Builder


class Keep(Exception):
    """The rule leaves this op as it is; ``reason`` goes into the pass statistics."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


RuleFn = Callable[[Builder], "list[Operand] | None"]


@dataclass(frozen=True)
class Rule:
    name: str
    fn: RuleFn
    upcast: bool  # computes in f32 for f16/bf16 operands (PyTorch's "opmath" dtype)


RULES: dict[str, Rule] = {}


def rule(name: str, upcast: bool = True) -> Callable[[RuleFn], RuleFn]:
    def deco(fn: RuleFn) -> RuleFn:
        RULES[name] = Rule(name, fn, upcast)
        return fn

    return deco


# Machine epsilon of the dtype rms_norm computes in (PyTorch's default eps: that of the opmath
# type, so f32's for f16/bf16 inputs).
EPSILON = {DType.F32: 2.0**-23, DType.F64: 2.0**-52, DType.F16: 2.0**-10, DType.BF16: 2.0**-7}


def lit(v: float) -> Literal:
    return Literal(float(v))


def _norm_dims(dims: list[int] | None, rank: int) -> list[int]:
    if dims is None:
        return list(range(rank))
    return [d % rank if rank else 0 for d in dims] if rank else []


def _reduce_attrs(dims: list[int] | None, keepdim: bool) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    if dims is not None:
        attrs["dims"] = dims
    if keepdim:
        attrs["keepdim"] = True
    return attrs


def _dims_attr(b: Builder, rank: int) -> list[int] | None:
    """The op's ``dims`` attribute made non-negative (None when absent: every dimension)."""
    dims = b.attr("dims")
    return None if dims is None else _norm_dims(dims, rank)


def element_count(b: Builder, shape: tuple, dims: list[int], name: str = "count") -> Operand:
    """How many elements ``dims`` of ``shape`` hold, in the compute dtype: a literal when the
    sizes are static, else a 0-d tensor (a sum of ones over the symbolic sizes, times the
    static part) so that symbolic sizes need no new op."""
    static = 1
    symbolic = []
    for d in dims:
        if isinstance(shape[d], int):
            static *= shape[d]
        else:
            symbolic.append(shape[d])
    if not symbolic:
        return lit(static)
    ones = b.emit("full", [lit(1.0)], "ones", decl=TensorType(b.compute, tuple(symbolic)))
    if static == 1:
        return b.emit("sum", [ones], name)
    count = b.emit("sum", [ones], f"{name}_symbolic")
    return b.emit("mul", [count, lit(static)], name)


# ---------------------------------------------------------------------------------------------
# softmax family


def _class_dim(b: Builder, x: Value) -> list[int]:
    rank = x.type.rank
    return [b.attr("dim") % rank] if rank else []


def _shifted_exp(b: Builder, x: Value, dims: list[int]) -> tuple[Value, Value, Value]:
    """``x - max(x)``, its exp and the sum of the exps, reduced over ``dims`` with keepdim."""
    m = b.emit("max", [x], "max", _reduce_attrs(dims, True))
    d = b.emit("sub", [x, m], "sub")
    e = b.emit("exp", [d], "exp")
    s = b.emit("sum", [e], "sum", _reduce_attrs(dims, True))
    return d, e, s


@rule("softmax")
def softmax(b: Builder) -> list[Operand]:
    x = b.tensor(0)
    _, e, s = _shifted_exp(b, x, _class_dim(b, x))
    return [b.emit("div", [e, s], "div")]


def _log_softmax(b: Builder, x: Value, dims: list[int]) -> Value:
    d, _, s = _shifted_exp(b, x, dims)
    lse = b.emit("log", [s], "log")
    return b.emit("sub", [d, lse], "logsoftmax")


@rule("log_softmax")
def log_softmax(b: Builder) -> list[Operand]:
    x = b.tensor(0)
    return [_log_softmax(b, x, _class_dim(b, x))]


@rule("logsumexp")
def logsumexp(b: Builder) -> list[Operand]:
    x = b.tensor(0)
    dims = _dims_attr(b, x.type.rank)
    reduced = _norm_dims(dims, x.type.rank)
    keepdim = bool(b.attr("keepdim"))
    m = b.emit("max", [x], "max", _reduce_attrs(dims, True))
    # An infinite max (a row of -inf, or a +inf) shifts by 0 instead: -inf - -inf is nan.
    inf = b.emit("isinf", [m], "isinf")
    shift = b.emit("where", [inf, lit(0.0), m], "shift")
    d = b.emit("sub", [x, shift], "sub")
    e = b.emit("exp", [d], "exp")
    s = b.emit("sum", [e], "sum", _reduce_attrs(dims, keepdim))
    lg = b.emit("log", [s], "log")
    if not keepdim and reduced:
        shift = b.emit("squeeze", [shift], "shift_squeezed", {"dims": reduced})
    return [b.emit("add", [lg, shift], "add")]


# ---------------------------------------------------------------------------------------------
# reductions: mean, var, std, var_mean


@rule("mean")
def mean(b: Builder) -> list[Operand]:
    x = b.tensor(0)
    dims = _dims_attr(b, x.type.rank)
    s = b.emit("sum", [x], "sum", _reduce_attrs(dims, bool(b.attr("keepdim"))))
    count = element_count(b, x.type.shape, _norm_dims(dims, x.type.rank))
    return [b.emit("div", [s, count], "div")]


def static_count(shape: tuple, dims: list[int]) -> int | None:
    """How many elements ``dims`` of ``shape`` hold, or None when a size is symbolic."""
    n = 1
    for d in dims:
        if not isinstance(shape[d], int):
            return None
        n *= shape[d]
    return n


def _variance(b: Builder) -> tuple[Value, Value]:
    """``var = m2 / max(n - correction, 0)`` from one welford pass; returns (var, mean)."""
    x = b.tensor(0)
    rank = x.type.rank
    dims = _dims_attr(b, rank)
    correction = b.attr("correction")
    mu, m2, n = b.emit_multi(
        "welford", [x], ["mean", "m2", "n"], _reduce_attrs(dims, bool(b.attr("keepdim")))
    )
    count = static_count(x.type.shape, _norm_dims(dims, rank))
    divisor: Operand
    if count is not None:
        divisor = lit(max(count - correction, 0))
    else:
        divisor = n
        if correction:
            divisor = b.emit("sub", [divisor, lit(correction)], "dof")
            divisor = b.emit("maximum", [divisor, lit(0.0)], "dof_clamped")
    return b.emit("div", [m2, divisor], "var"), mu


@rule("var")
def var(b: Builder) -> list[Operand]:
    return [_variance(b)[0]]


@rule("std")
def std(b: Builder) -> list[Operand]:
    return [b.emit("sqrt", [_variance(b)[0]], "sqrt")]


@rule("var_mean")
def var_mean(b: Builder) -> list[Operand]:
    v, mu = _variance(b)
    # the mean of no elements is NaN, as in PyTorch (welford's mean of nothing is 0)
    x = b.tensor(0)
    count = static_count(x.type.shape, _norm_dims(_dims_attr(b, x.type.rank), x.type.rank))
    if count == 0:
        mu = b.emit("full", [lit(math.nan)], "mean_empty", decl=mu.type)
    elif count is None:
        n = mu.owner.results[2]  # type: ignore[union-attr]
        empty = b.emit("eq", [n, lit(0.0)], "empty")
        mu = b.emit("where", [empty, lit(math.nan), mu], "mean_or_nan")
    return [v, mu]


# ---------------------------------------------------------------------------------------------
# normalization


def _normalize(b: Builder, x: Value, dims: list[int], eps: float) -> Value:
    """``(x - mean) * rsqrt(var + eps)`` with the biased variance over ``dims``, one welford pass."""
    mu, m2, n = b.emit_multi("welford", [x], ["mean", "m2", "n"], _reduce_attrs(dims, True))
    count = static_count(x.type.shape, dims)
    v = b.emit("div", [m2, n if count is None else lit(count)], "var")
    ve = b.emit("add", [v, lit(eps)], "var_eps")
    rstd = b.emit("rsqrt", [ve], "rstd")
    xc = b.emit("sub", [x, mu], "centered")
    return b.emit("mul", [xc, rstd], "normalized")


def _affine(b: Builder, y: Value, weight: Value | None, bias: Value | None) -> Value:
    if weight is not None:
        y = b.emit("mul", [y, weight], "scaled")
    if bias is not None:
        y = b.emit("add", [y, bias], "shifted")
    return y


@rule("layer_norm")
def layer_norm(b: Builder) -> list[Operand]:
    x = b.tensor(0)
    rank, k = x.type.rank, len(b.attr("normalized_shape"))
    y = _normalize(b, x, list(range(rank - k, rank)), b.attr("eps"))
    return [_affine(b, y, b.input(1), b.input(2))]


@rule("rms_norm")
def rms_norm(b: Builder) -> list[Operand]:
    x = b.tensor(0)
    rank, k = x.type.rank, len(b.attr("normalized_shape"))
    dims = list(range(rank - k, rank))
    eps = b.attr("eps")
    if eps is None:
        eps = EPSILON[b.compute]
    sq = b.emit("mul", [x, x], "square")
    ss = b.emit("sum", [sq], "sum", _reduce_attrs(dims, True))
    ms = b.emit("div", [ss, element_count(b, x.type.shape, dims)], "mean")
    r = b.emit("rsqrt", [b.emit("add", [ms, lit(eps)], "mean_eps")], "rrms")
    y = b.emit("mul", [x, r], "normalized")
    return [_affine(b, y, b.input(1), None)]


def _per_channel(b: Builder, p: Value, rank: int, name: str) -> Value:
    """A [C] parameter viewed as [C, 1, ...] so that it broadcasts along dimension 1."""
    if rank <= 2:
        return p
    shape = (p.type.shape[0],) + (1,) * (rank - 2)
    return b.emit("reshape", [p], f"{name}_view", decl=TensorType(p.type.dtype, shape))


@rule("batch_norm")
def batch_norm(b: Builder) -> list[Operand]:
    x = b.tensor(0)
    rank = x.type.rank
    weight, bias = b.input(1), b.input(2)
    running_mean, running_var = b.tensor(3), b.tensor(4)
    # the per-channel factor rsqrt(var + eps) * weight is computed on [C] before broadcasting
    scale = b.emit("rsqrt", [b.emit("add", [running_var, lit(b.attr("eps"))], "var_eps")], "rstd")
    if weight is not None:
        scale = b.emit("mul", [scale, weight], "scale")
    xc = b.emit("sub", [x, _per_channel(b, running_mean, rank, "mean")], "centered")
    y = b.emit("mul", [xc, _per_channel(b, scale, rank, "scale")], "normalized")
    if bias is not None:
        y = b.emit("add", [y, _per_channel(b, bias, rank, "bias")], "shifted")
    return [y]


@rule("group_norm")
def group_norm(b: Builder) -> list[Operand]:
    x = b.tensor(0)
    shape, rank = x.type.shape, x.type.rank
    groups, channels = b.attr("num_groups"), shape[1]
    if not isinstance(channels, int):
        raise Keep("symbolic channel count")
    # [N, C, *rest] -> [N, G, C/G, *rest]: normalize each group over all but the first two dims
    grouped = (shape[0], groups, channels // groups) + tuple(shape[2:])
    xg = b.emit("reshape", [x], "grouped", decl=TensorType(x.type.dtype, grouped))
    yg = _normalize(b, xg, list(range(2, rank + 1)), b.attr("eps"))
    y = b.emit("reshape", [yg], "ungrouped", decl=TensorType(x.type.dtype, shape))
    weight, bias = b.input(1), b.input(2)
    w = None if weight is None else _per_channel(b, weight, rank, "weight")
    c = None if bias is None else _per_channel(b, bias, rank, "bias")
    return [_affine(b, y, w, c)]


# ---------------------------------------------------------------------------------------------
# activations

SQRT1_2 = 0.7071067811865476  # 1/sqrt(2)
SQRT_2_OVER_PI = 0.7978845608028654  # sqrt(2/pi)


@rule("gelu")
def gelu(b: Builder) -> list[Operand]:
    x = b.tensor(0)
    if b.attr("approximate") == "tanh":
        # 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
        x3 = b.emit("mul", [b.emit("mul", [x, x], "square"), x], "cube")
        inner = b.emit("add", [x, b.emit("mul", [x3, lit(0.044715)], "cube_scaled")], "inner")
        t = b.emit("tanh", [b.emit("mul", [inner, lit(SQRT_2_OVER_PI)], "tanh_arg")], "tanh")
        gate = b.emit("add", [t, lit(1.0)], "gate")
    else:
        # 0.5 * x * (1 + erf(x / sqrt(2)))
        e = b.emit("erf", [b.emit("mul", [x, lit(SQRT1_2)], "erf_arg")], "erf")
        gate = b.emit("add", [e, lit(1.0)], "gate")
    half = b.emit("mul", [x, lit(0.5)], "half")
    return [b.emit("mul", [half, gate], "mul")]


@rule("silu")
def silu(b: Builder) -> list[Operand]:
    x = b.tensor(0)
    return [b.emit("mul", [x, b.emit("sigmoid", [x], "sigmoid")], "mul")]


def _softplus(b: Builder, x: Value, beta: float, threshold: float) -> Value:
    """``x`` where ``beta * x > threshold`` (exp would overflow), else log1p(exp(beta x)) / beta."""
    bx = x if beta == 1.0 else b.emit("mul", [x, lit(beta)], "beta_x")
    sp = b.emit("log1p", [b.emit("exp", [bx], "exp")], "log1p")
    if beta != 1.0:
        sp = b.emit("div", [sp, lit(beta)], "softplus")
    linear = b.emit("gt", [bx, lit(threshold)], "linear")
    return b.emit("where", [linear, x, sp], "where")


@rule("softplus")
def softplus(b: Builder) -> list[Operand]:
    return [_softplus(b, b.tensor(0), b.attr("beta"), b.attr("threshold"))]


@rule("mish")
def mish(b: Builder) -> list[Operand]:
    x = b.tensor(0)
    t = b.emit("tanh", [_softplus(b, x, 1.0, 20.0)], "tanh")
    return [b.emit("mul", [x, t], "mul")]


def _relu6_of_x_plus_3(b: Builder, x: Value) -> Value:
    """``min(max(x + 3, 0), 6)``"""
    shifted = b.emit("add", [x, lit(3.0)], "add")
    low = b.emit("maximum", [shifted, lit(0.0)], "max")
    return b.emit("minimum", [low, lit(6.0)], "min")


@rule("hardswish")
def hardswish(b: Builder) -> list[Operand]:
    x = b.tensor(0)
    y = b.emit("mul", [x, _relu6_of_x_plus_3(b, x)], "mul")
    return [b.emit("div", [y, lit(6.0)], "div")]


@rule("hardsigmoid")
def hardsigmoid(b: Builder) -> list[Operand]:
    return [b.emit("div", [_relu6_of_x_plus_3(b, b.tensor(0)), lit(6.0)], "div")]


@rule("leaky_relu", upcast=False)
def leaky_relu(b: Builder) -> list[Operand]:
    x = b.tensor(0)
    pos = b.emit("gt", [x, lit(0.0)], "positive")
    neg = b.emit("mul", [x, lit(b.attr("negative_slope"))], "scaled")
    return [b.emit("where", [pos, x, neg], "where")]


@rule("elu")
def elu(b: Builder) -> list[Operand]:
    x = b.tensor(0)
    pos = b.emit("gt", [x, lit(0.0)], "positive")
    neg = b.emit("mul", [b.emit("expm1", [x], "expm1"), lit(b.attr("alpha"))], "scaled")
    return [b.emit("where", [pos, x, neg], "where")]


def _clamp(b: Builder, x: Value, lo: Operand | None, hi: Operand | None) -> Value:
    y = x
    if lo is not None:
        y = b.emit("maximum", [y, lo], "max")
    if hi is not None:
        y = b.emit("minimum", [y, hi], "min")
    return y


def _int_bound(v: float | None, dtype: DType, upper: bool) -> Literal | None:
    """A float bound of an integer clamp as the integer bound it acts as, within the dtype."""
    import math

    if v is None or math.isnan(v):
        return None
    lo, hi = _INT_RANGE[dtype]
    if math.isinf(v):
        return Literal(hi if v > 0 else lo)
    return Literal(min(max(math.floor(v) if upper else math.ceil(v), lo), hi))


_INT_RANGE = {
    DType.I8: (-(2**7), 2**7 - 1),
    DType.I16: (-(2**15), 2**15 - 1),
    DType.I32: (-(2**31), 2**31 - 1),
    DType.I64: (-(2**63), 2**63 - 1),
    DType.U8: (0, 255),
}


@rule("clamp", upcast=False)
def clamp(b: Builder) -> list[Operand]:
    x = b.tensor(0)
    lo, hi = b.attr("min"), b.attr("max")
    if x.type.dtype.is_float:
        return [_clamp(b, x, None if lo is None else lit(lo), None if hi is None else lit(hi))]
    dt = x.type.dtype
    return [_clamp(b, x, _int_bound(lo, dt, False), _int_bound(hi, dt, True))]


@rule("hardtanh", upcast=False)
def hardtanh(b: Builder) -> list[Operand]:
    return [_clamp(b, b.tensor(0), lit(b.attr("min_val")), lit(b.attr("max_val")))]


@rule("dropout", upcast=False)
def dropout(b: Builder) -> list[Operand]:
    if b.attr("train"):
        raise Keep("train")
    return [b.tensor(0)]


# ---------------------------------------------------------------------------------------------
# losses


@dataclass
class _Nll:
    """Per-sample negative log-likelihood and what the reductions need."""

    loss: Value  # -w[t] * lp[t], 0 where the target is ignored
    valid: Value  # target != ignore_index
    weight: Value | None  # w[t], 0 where ignored (None without class weights)
    denom: Value | None = None  # the mean's divisor, made once


def _nll(b: Builder, lp: Value, target: Value, weight: Value | None) -> _Nll:
    cdim = lp.type.rank - 1
    valid = b.emit("ne", [target, Literal(b.attr("ignore_index"))], "valid")
    # ignored targets read class 0, a valid index; their loss is zeroed below
    safe = b.emit("where", [valid, target, Literal(0)], "target")
    idx = b.emit("unsqueeze", [safe], "index", {"dim": cdim})
    picked = b.emit("gather", [lp, idx], "gathered", {"dim": cdim})
    picked = b.emit("squeeze", [picked], "logprob", {"dims": [cdim]})
    nll = b.emit("neg", [picked], "neg")
    if weight is None:
        return _Nll(b.emit("where", [valid, nll, lit(0.0)], "nll"), valid, None)
    flat = idx if cdim == 0 else safe  # index_select wants a 1-D index
    w = b.emit("index_select", [weight, flat], "class_weight", {"dim": 0})
    if cdim == 0:
        w = b.emit("reshape", [w], "class_weight", decl=TensorType(w.type.dtype, ()))
    w = b.emit("where", [valid, w, lit(0.0)], "sample_weight")
    return _Nll(b.emit("mul", [nll, w], "nll"), valid, w)


def _reduce_loss(b: Builder, parts: _Nll, loss: Value, name: str) -> Value:
    """Reduce a per-sample loss as ``reduction`` says; mean divides by the summed weights
    of the non-ignored samples (their count without class weights)."""
    reduction = b.attr("reduction")
    if reduction == "none":
        return loss
    total = b.emit("sum", [loss], f"{name}_sum")
    if reduction == "sum":
        return total
    if parts.denom is None:
        w = parts.weight or b.cast(parts.valid, b.compute, "valid_count")
        parts.denom = b.emit("sum", [w], "denom")
    return b.emit("div", [total, parts.denom], f"{name}_mean")


@rule("nll_loss")
def nll_loss(b: Builder) -> list[Operand]:
    parts = _nll(b, b.tensor(0), b.tensor(1), b.input(2))
    return [_reduce_loss(b, parts, parts.loss, "nll")]


@rule("cross_entropy")
def cross_entropy(b: Builder) -> list[Operand]:
    x, target, weight = b.tensor(0), b.tensor(1), b.input(2)
    cdim = x.type.rank - 1
    lp = _log_softmax(b, x, [cdim])
    parts = _nll(b, lp, target, weight)
    nll = _reduce_loss(b, parts, parts.loss, "nll")
    eps = b.attr("label_smoothing")
    if eps == 0.0:
        return [nll]
    # (1 - eps) * nll + eps / C * smooth, smooth = -sum_c w[c] * lp[c] (0 where ignored),
    # reduced like the nll
    weighted = lp if weight is None else b.emit("mul", [lp, weight], "weighted")
    s = b.emit("neg", [b.emit("sum", [weighted], "class_sum", {"dims": [cdim]})], "smooth")
    s = b.emit("where", [parts.valid, s, lit(0.0)], "smooth_masked")
    smooth = _reduce_loss(b, parts, s, "smooth")
    classes = element_count(b, x.type.shape, [cdim], "classes")
    if isinstance(classes, Literal):
        smooth = b.emit("mul", [smooth, lit(eps / classes.value)], "smooth_scaled")
    else:
        smooth = b.emit(
            "div", [b.emit("mul", [smooth, lit(eps)], "smooth_scaled"), classes], "smooth_scaled"
        )
    kept = b.emit("mul", [nll, lit(1.0 - eps)], "nll_scaled")
    return [b.emit("add", [kept, smooth], "add")]


# ---------------------------------------------------------------------------------------------
# indexing, matmul family, masked_fill, pow


@rule("embedding", upcast=False)
def embedding(b: Builder) -> list[Operand]:
    # padding_idx only changes gradients; the forward value is a row lookup
    weight, idx = b.tensor(0), b.tensor(1)
    if idx.type.rank != 1:
        flat = TensorType(idx.type.dtype, (idx.type.numel,))
        idx = b.emit("reshape", [idx], "flat_index", decl=flat)
    rows = b.emit("index_select", [weight, idx], "rows", {"dim": 0})
    out = b.node.results[0].type.shape
    if rows.type.shape == out:
        return [rows]
    return [b.emit("reshape", [rows], "reshape", decl=TensorType(rows.type.dtype, out))]


def _scalar(v: float, dtype: DType) -> Literal | None:
    """``v`` as a literal that may meet ``dtype``; None when an integer dtype cannot take it."""
    if dtype.is_float:
        return lit(v)
    return Literal(int(v)) if float(v).is_integer() else None


# ops whose operands an elementwise producer cannot be fused into (they become library calls)
_LIBRARY_OPS = frozenset({"matmul", "addmm", "linear"})


def _bias_add_would_fuse(b: Builder) -> bool:
    """Whether the bias add of a matmul could join a loop nest: some reader of the result,
    through views, becomes one. Otherwise the add would be a kernel of its own that reads and
    writes the whole result once more, where the library call adds the bias on its way out
    (Inductor keeps addmm whole for the same reason). Measured on an H200 for GPT-2's and
    BERT's layers (``benchmarks/gemm_bias.py``): the bias in cuBLAS's epilogue costs 1.01-1.15x
    the plain product, an add kernel of its own 1.31-1.87x the product with the epilogue; an
    add fused into a reader costs that reader one row of the bias."""
    stack = [b.node.results[0]]
    seen: set[int] = set()
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        for u in b.readers(v):
            if not isinstance(u, TensorOp):
                continue  # an extern call takes the sum as it is
            spec = OPS.get(u.op)
            if spec is not None and spec.category == "view":
                stack.extend(u.results)
            elif u.op not in _LIBRARY_OPS:
                return True
    return False


@rule("addmm", upcast=False)
def addmm(b: Builder) -> list[Operand]:
    if not _bias_add_would_fuse(b):
        raise Keep("no reader to fuse the bias add into: one library call")
    bias, a, m = b.tensor(0), b.tensor(1), b.tensor(2)
    alpha, beta = b.attr("alpha"), b.attr("beta")
    dtype = a.type.dtype
    alpha_lit, beta_lit = _scalar(alpha, dtype), _scalar(beta, dtype)
    if alpha_lit is None or beta_lit is None or dtype.is_bool:
        raise Keep("non-integral alpha or beta on integers")
    prod = b.emit("matmul", [a, m], "matmul")
    if alpha != 1:
        prod = b.emit("mul", [prod, alpha_lit], "alpha")
    if beta == 0:  # like PyTorch, beta = 0 ignores the bias (nan and inf included)
        return [prod]
    if beta != 1:
        bias = b.emit("mul", [bias, beta_lit], "beta")
    return [b.emit("add", [bias, prod], "add")]


@rule("linear", upcast=False)
def linear(b: Builder) -> list[Operand]:
    if b.input(2) is not None and not _bias_add_would_fuse(b):
        raise Keep("no reader to fuse the bias add into: one library call")
    x, w, bias = b.tensor(0), b.tensor(1), b.input(2)
    wt = b.emit("transpose", [w], "weight_t", {"dim0": 0, "dim1": 1})
    y = b.emit("matmul", [x, wt], "matmul")
    if bias is not None:
        y = b.emit("add", [y, bias], "add")
    return [y]


@rule("masked_fill", upcast=False)
def masked_fill(b: Builder) -> list[Operand]:
    x, mask, value = b.tensor(0), b.tensor(1), b.node.operands[2]
    return [b.emit("where", [mask, value, x], "where")]


# pow by a literal exponent; the rest stays pow
_POW_UNARY = {0.5: "sqrt", -0.5: "rsqrt", -1.0: "reciprocal"}


@rule("pow", upcast=False)
def pow_(b: Builder) -> list[Operand] | None:
    x, e = b.node.operands
    if not isinstance(x, Value) or not isinstance(e, Literal) or e.kind not in ("int", "float"):
        return None
    k = float(e.value)  # type: ignore[arg-type]
    if x.type.shape != b.node.results[0].type.shape:
        return None
    if k == 1.0:
        return [x]
    if k in _POW_UNARY:
        return [b.emit(_POW_UNARY[k], [x], _POW_UNARY[k])]
    if k in (2.0, 3.0):
        sq = b.emit("mul", [x, x], "square")
        return [sq if k == 2.0 else b.emit("mul", [sq, x], "cube")]
    return None
