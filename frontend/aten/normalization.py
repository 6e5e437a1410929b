"""Normalization: ``layer_norm``/``native_layer_norm``, ``rms_norm``, ``batch_norm`` (inference),
``group_norm``/``native_group_norm``, kept composite (statistics a graph reads are computed only
then); then training-mode batch norm, composed from the batch statistics.
"""

from __future__ import annotations

from typing import Any

import torch
from fir.ir.graph import Literal, Value
from fir.ir.types import TensorType

from ..emitter import Emitter, Fallback
from .common import (
    _auto,
    _float_only,
    _reshape_to,
    _static_shape,
    _tensor,
    _used_results,
    _zero,
)
from .registry import register


def _opt(x: Any) -> Value | Literal:
    return Literal(None) if x is None else _tensor(x)


def _symbolic(shape: list[Any]) -> bool:
    return any(isinstance(d, torch.SymInt) for d in shape)


def _norm_composed(
    em: Emitter, x: Value, k: int, w: Any, b: Any, eps: float, rms: bool, result: int = 0
) -> tuple[Value, Value | None, Value]:
    """A layer (or RMS) norm over the last ``k`` dimensions composed of FIR ops: for a
    ``normalized_shape`` of symbolic sizes (``dynamic=True``), which the ``layer_norm`` op's
    integer attribute cannot hold. Returns (result, mean or None, rstd)."""
    dims = list(range(x.type.rank - k, x.type.rank))
    stat = TensorType(x.type.dtype, tuple(x.type.shape[:-k]) + (1,) * k)
    full = em.out_type(result)
    if rms:
        sq = em.op("mul", [x, x], full, hint="sq")
        ms = em.op("mean", [sq], stat, {"dims": dims, "keepdim": True}, hint="ms")
        rstd = em.op("rsqrt", [em.op("add", [ms, Literal(eps)], stat)], stat, hint="rstd")
        y, mean = em.op("mul", [x, rstd], full, hint="normed"), None
    else:
        mean = em.op("mean", [x], stat, {"dims": dims, "keepdim": True}, hint="mean")
        var = em.op("var", [x], stat, {"dims": dims, "keepdim": True, "correction": 0}, hint="var")
        rstd = em.op("rsqrt", [em.op("add", [var, Literal(eps)], stat)], stat, hint="rstd")
        centred = em.op("sub", [x, mean], full, hint="centred")
        y = em.op("mul", [centred, rstd], full, hint="normed")
    if w is not None:
        y = em.op("mul", [y, _tensor(w)], full, hint="scaled")
    if b is not None:
        y = em.op("add", [y, _tensor(b)], full, hint="shifted")
    return y, mean, rstd


@register("aten.layer_norm.default")
def _layer_norm(
    em: Emitter,
    x: Any,
    shape: list[int],
    w: Any = None,
    b: Any = None,
    eps: float = 1e-5,
    cudnn: bool = True,
) -> Value:
    if _symbolic(shape):
        return _norm_composed(em, _tensor(x), len(shape), w, b, float(eps), rms=False)[0]
    return em.op(
        "layer_norm",
        [_tensor(x), _opt(w), _opt(b)],
        em.out_type(),
        {"normalized_shape": list(shape), "eps": float(eps)},
    )


@register("aten.native_layer_norm.default")
def _native_layer_norm(
    em: Emitter, x: Any, shape: list[int], w: Any, b: Any, eps: float
) -> list[Value]:
    x = _tensor(x)
    if _symbolic(shape):
        y, mean, rstd = _norm_composed(em, x, len(shape), w, b, float(eps), rms=False)
        assert mean is not None
        return [y, mean, rstd]
    out = em.op(
        "layer_norm",
        [x, _opt(w), _opt(b)],
        em.out_type(0),
        {"normalized_shape": list(shape), "eps": float(eps)},
    )
    used = _used_results(em)
    if not used & {1, 2}:
        return [out, out, out]  # mean and rstd are never read
    dims = list(range(x.type.rank - len(shape), x.type.rank))
    stat = em.out_type(1)
    if stat.dtype != x.type.dtype:
        # CUDA's kernel gives f16/bf16 input f32 statistics: computed over the exactly widened
        # input, as ATen accumulates them
        wide = em.cast(x, stat.dtype)
        assert isinstance(wide, Value)
        x = wide
    # one welford pass for both (cse merges it with the layer_norm's own): the saved mean is
    # the one the output was normalized with, as ATen's kernel saves it, and no separate sum
    # (BERT's training forward had a third row reduction in each layer norm's kernel for it)
    var, mean = em.op(
        "var_mean", [x], [stat, stat], {"dims": dims, "keepdim": True, "correction": 0}, hint="var"
    )
    e = em.op("add", [var, Literal(float(eps))], stat, hint="veps")
    rstd = em.op("rsqrt", [e], em.out_type(2), hint="rstd")
    return [out, mean, rstd]


@register("aten.rms_norm.default")
def _rms_norm(em: Emitter, x: Any, shape: list[int], w: Any = None, eps: Any = None) -> Value:
    return _rms_norm_result(em, x, shape, w, eps, None)


def _rms_norm_result(
    em: Emitter, x: Any, shape: list[int], w: Any, eps: Any, result: int | None
) -> Value:
    """The normalized tensor, the node's result ``result`` (None: its only one)."""
    if _symbolic(shape):
        x = _tensor(x)
        if eps is None:  # torch's default: the dtype's machine epsilon
            eps = torch.finfo(x.type.dtype.to_torch()).eps
        return _norm_composed(em, x, len(shape), w, None, float(eps), True, result or 0)[0]
    return em.op(
        "rms_norm",
        [_tensor(x), _opt(w)],
        em.out_type(result),
        {"normalized_shape": list(shape), "eps": None if eps is None else float(eps)},
    )


@register("aten._fused_rms_norm.default")
def _fused_rms_norm(
    em: Emitter, x: Any, shape: list[int], w: Any = None, eps: Any = None
) -> list[Value]:
    """The fused CUDA kernel's op (what ``rms_norm`` becomes on CUDA since torch 2.8): the
    normalized tensor and the f32 reciprocal RMS the backward reads. As an extern call it
    would keep the residual add before it out of the norm's kernel."""
    out = _rms_norm_result(em, x, shape, w, eps, 0)
    if 1 not in _used_results(em):
        return [out, out]  # rstd is never read
    x = _tensor(x)
    if eps is None:
        eps = torch.finfo(x.type.dtype.to_torch()).eps
    stat = em.out_type(1)  # f32, the normalized dimensions kept as 1
    xf = em.cast(x, stat.dtype)
    full = TensorType(stat.dtype, x.type.shape)
    dims = list(range(x.type.rank - len(shape), x.type.rank))
    ms = em.op("mean", [em.op("mul", [xf, xf], full)], stat, {"dims": dims, "keepdim": True})
    rstd = em.op("rsqrt", [em.op("add", [ms, Literal(float(eps))], stat)], stat, hint="rstd")
    return [out, rstd]


@register("aten._native_batch_norm_legit_no_training.default")
def _batch_norm_nt(
    em: Emitter, x: Any, w: Any, b: Any, rm: Any, rv: Any, momentum: float, eps: float
) -> list[Value]:
    if _used_results(em) & {1, 2}:
        raise Fallback("saved batch statistics are read")
    out = em.op(
        "batch_norm",
        [_tensor(x), _opt(w), _opt(b), _tensor(rm), _tensor(rv)],
        em.out_type(0),
        {"eps": float(eps)},
    )
    return [out, out, out]


@register("aten.batch_norm.default")
def _batch_norm(
    em: Emitter,
    x: Any,
    w: Any,
    b: Any,
    rm: Any,
    rv: Any,
    training: bool,
    momentum: float,
    eps: float,
    cudnn: bool = True,
) -> Value:
    if training:
        raise Fallback("batch_norm in training mode")
    return em.op(
        "batch_norm",
        [_tensor(x), _opt(w), _opt(b), _tensor(rm), _tensor(rv)],
        em.out_type(),
        {"eps": float(eps)},
    )


@register("aten.group_norm.default")
def _group_norm(
    em: Emitter,
    x: Any,
    groups: int,
    w: Any = None,
    b: Any = None,
    eps: float = 1e-5,
    cudnn: bool = True,
) -> Value:
    return em.op(
        "group_norm",
        [_tensor(x), _opt(w), _opt(b)],
        em.out_type(),
        {"num_groups": groups, "eps": float(eps)},
    )


@register("aten.native_group_norm.default")
def _native_group_norm(
    em: Emitter, x: Any, w: Any, b: Any, n: Any, c: Any, hw: Any, groups: int, eps: float
) -> list[Value]:
    x = _tensor(x)
    out = em.op(
        "group_norm",
        [x, _opt(w), _opt(b)],
        em.out_type(0),
        {"num_groups": groups, "eps": float(eps)},
    )
    if not _used_results(em) & {1, 2}:
        return [out, out, out]  # mean and rstd are never read
    stat = em.out_type(1)  # [N, G]
    shape = _static_shape(x)
    per_group = (shape[1] // groups) * (x.type.numel // max(shape[0] * shape[1], 1))
    rows = _reshape_to(em, x, (shape[0], groups, per_group), hint="groups")
    mean = em.op("mean", [rows], stat, {"dims": [2]}, hint="mean")
    var = em.op("var", [rows], stat, {"dims": [2], "correction": 0}, hint="var")
    rstd = em.op(
        "rsqrt", [_auto(em, "add", [var, Literal(float(eps))])], em.out_type(2), hint="rstd"
    )
    return [out, mean, rstd]


# ---------------------------------------------------------------------------------------------
# compositions: no FIR op of their own; each follows ATen's CPU kernel (see fir.frontend.aten)


@register(
    "aten._native_batch_norm_legit_functional.default",
    "aten._native_batch_norm_legit.no_stats",
    "aten._batch_norm_with_update_functional.default",
)
def _batch_norm_train(em: Emitter, x: Any, w: Any, b: Any, *args: Any) -> list[Value]:
    """Training-mode batch norm from the batch statistics, as ATen's CPU kernel computes it:
    invstd = 1 / sqrt(var + eps), out = x * (invstd * w) + (b - mean * invstd * w), and the
    running statistics moved by ``momentum`` (the unbiased variance for running_var)."""
    name = str(em.node.target)
    functional = "functional" in name
    with_update = "with_update" in name  # results: out, mean, invstd, reserve, running stats
    if with_update:
        rm, rv, momentum, eps = args
        training = True
    elif functional:
        rm, rv, training, momentum, eps = args
    else:
        rm = rv = None
        training, momentum, eps = args
    if not training:
        raise Fallback("inference mode")
    dtype = _float_only(em)
    x = _tensor(x)
    shape = _static_shape(x)
    if x.type.rank < 2:
        raise Fallback("batch_norm of a vector")
    c = shape[1]
    dims = [0] + list(range(2, x.type.rank))
    stat = TensorType(dtype, (c,))
    mean = em.op("mean", [x], stat, {"dims": dims}, hint="mean")
    var = em.op("var", [x], stat, {"dims": dims, "correction": 0}, hint="var")
    invstd = _auto(
        em,
        "reciprocal",
        [_auto(em, "sqrt", [_auto(em, "add", [var, Literal(float(eps))])])],
        hint="invstd",
    )
    alpha = (
        invstd
        if w is None
        else _auto(em, "mul", [invstd, em.cast(_tensor(w), dtype)], hint="alpha")
    )
    shift = _auto(em, "mul", [mean, alpha])
    beta = (
        _auto(em, "neg", [shift])
        if b is None
        else _auto(em, "sub", [em.cast(_tensor(b), dtype), shift], hint="beta")
    )
    per_channel = (c,) + (1,) * (x.type.rank - 2)
    alpha_c, beta_c = (
        _reshape_to(em, alpha, per_channel, "alpha_c"),
        _reshape_to(em, beta, per_channel, "beta_c"),
    )
    out = em.op("add", [_auto(em, "mul", [x, alpha_c]), beta_c], em.out_type(0))
    results = [
        out,
        _reshape_to(em, mean, em.out_type(1).shape),
        _reshape_to(em, invstd, em.out_type(2).shape),
    ]
    if with_update:
        reserve = em.out_type(3)
        results.append(
            em.op("full", [_zero(reserve.dtype)], reserve, hint="reserve")
        )  # empty on CPU
    if functional:
        m = float(momentum)
        unbiased = em.op("var", [x], stat, {"dims": dims}, hint="uvar")
        for k, (run, batch) in enumerate(((rm, mean), (rv, unbiased)), start=len(results)):
            run = em.cast(_tensor(run), dtype)
            moved = _auto(
                em,
                "add",
                [_auto(em, "mul", [batch, Literal(m)]), _auto(em, "mul", [run, Literal(1.0 - m)])],
            )
            results.append(_reshape_to(em, moved, em.out_type(k).shape))
    return results
