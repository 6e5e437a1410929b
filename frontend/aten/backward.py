"""The aten ops of backward graphs (what AOTAutograd's backward graph calls), written with FIR
tensor ops so that they fuse like the forward: activation gradients (``threshold_backward``,
``gelu_backward`` in both approximations, ``silu_backward``, ``tanh_backward``,
``sigmoid_backward``), ``native_layer_norm_backward``, ``nll_loss_backward``, the gradients
of views that place a slice back into zeros (``select_backward``, ``slice_backward``), and
attention's (``_scaled_dot_product_flash_attention_for_cpu_backward``: the probabilities again
from the forward's logsumexp, then matmuls).
``embedding_dense_backward`` is a scatter-add, which FIR has no op for: a small table's (at
most :data:`ONE_HOT_ROWS` rows) is a reduction over one-hot rows, a larger one's an extern call
on purpose (a mapping, not a fallback). The softmax gradients
(``_softmax_backward_data``, ``_log_softmax_backward_data``) and ``native_dropout_backward`` live
with their forward ops in :mod:`.nn`.

Each composition follows the formula of ATen's kernel in f32 or f64. f16 and bf16 operands are
widened to f32 and the result is rounded once, as ATen's kernels compute them (their "opmath"
type): a bf16 GPT-2's layer-norm and tanh gradients, and Llama's SiLU gradient, fuse with the
kernels around them instead of running as ATen calls.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from fir.ir.dtypes import DType
from fir.ir.externs import encode_torch_object
from fir.ir.graph import ExternNode, Literal, Value
from fir.ir.types import TensorType

from ..emitter import Emitter, Fallback, meta_value, tensor_type
from .common import _arange_i64, _auto, _float_only, _reshape_to, _static_shape, _tensor
from .registry import register


def _wide(dtype: DType) -> DType:
    """The dtype a composition computes ``dtype`` in: f32 for f16 and bf16."""
    return dtype.compute_dtype


def _operands(em: Emitter, *xs: Any) -> list[Value]:
    """Tensor operands in the dtype the composition computes the (floating) result's dtype in:
    f16/bf16 ones widened to f32 (statistics already in f32 stay so); other dtypes fall back."""
    dtype = _float_only(em, half_ok=True)
    wide = _wide(dtype)
    out = [_tensor(x) for x in xs]
    if any(x.type.dtype not in (dtype, wide) for x in out):
        raise Fallback("mixed dtypes")
    return [_widened(em, x, wide) for x in out]


def _widened(em: Emitter, x: Value, wide: DType) -> Value:
    v = em.cast(x, wide) if x.type.dtype != wide else x
    assert isinstance(v, Value)
    return v


def _result(em: Emitter, opname: str, operands: list[Any], out: TensorType, **kw: Any) -> Value:
    """The composition's last op, rounded once to ``out``'s dtype where it computed wider."""
    if out.dtype == _wide(out.dtype):
        return em.op(opname, operands, out, **kw)
    return _narrowed(em, _auto(em, opname, operands, hint=kw.get("hint") or ""), out.dtype)


def _narrowed(em: Emitter, v: Value, dtype: DType) -> Value:
    r = em.cast(v, dtype) if v.type.dtype != dtype else v
    assert isinstance(r, Value)
    return r


@register("aten.threshold_backward.default")
def _threshold_backward(em: Emitter, grad: Any, x: Any, threshold: Any) -> Value:
    g, x = _operands(em, grad, x)
    # ATen: x <= threshold ? 0 : grad
    le = _auto(em, "le", [x, Literal(float(threshold))])
    return _result(em, "where", [le, Literal(0.0), g], em.out_type())


@register("aten.tanh_backward.default")
def _tanh_backward(em: Emitter, grad: Any, y: Any) -> Value:
    g, y = _operands(em, grad, y)
    # grad * (1 - y * y)
    one_minus = _auto(em, "sub", [Literal(1.0), _auto(em, "mul", [y, y])])
    return _result(em, "mul", [g, one_minus], em.out_type())


@register("aten.sigmoid_backward.default")
def _sigmoid_backward(em: Emitter, grad: Any, y: Any) -> Value:
    g, y = _operands(em, grad, y)
    # grad * (1 - y) * y
    return _result(
        em, "mul", [_auto(em, "mul", [g, _auto(em, "sub", [Literal(1.0), y])]), y], em.out_type()
    )


@register("aten.silu_backward.default")
def _silu_backward(em: Emitter, grad: Any, x: Any) -> Value:
    g, x = _operands(em, grad, x)
    # s = sigmoid(x); grad * s * (1 + x * (1 - s))
    s = _auto(em, "sigmoid", [x])
    inner = _auto(
        em, "add", [Literal(1.0), _auto(em, "mul", [x, _auto(em, "sub", [Literal(1.0), s])])]
    )
    return _result(em, "mul", [_auto(em, "mul", [g, s]), inner], em.out_type())


@register("aten.gelu_backward.default")
def _gelu_backward(em: Emitter, grad: Any, x: Any, approximate: str = "none") -> Value:
    g, x = _operands(em, grad, x)
    if approximate == "tanh":
        # u = sqrt(2/pi) * (x + 0.044715 x^3), t = tanh(u):
        # d/dx [0.5 x (1 + t)] = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
        k, c = math.sqrt(2.0 / math.pi), 0.044715
        x2 = _auto(em, "mul", [x, x])
        x3 = _auto(em, "mul", [x2, x])
        u = _auto(
            em, "mul", [_auto(em, "add", [x, _auto(em, "mul", [x3, Literal(c)])]), Literal(k)]
        )
        t = _auto(em, "tanh", [u])
        left = _auto(em, "mul", [x, Literal(0.5)])
        left_d = _auto(em, "mul", [_auto(em, "add", [t, Literal(1.0)]), Literal(0.5)])
        one_minus_t2 = _auto(em, "sub", [Literal(1.0), _auto(em, "mul", [t, t])])
        du = _auto(
            em,
            "mul",
            [_auto(em, "add", [Literal(1.0), _auto(em, "mul", [x2, Literal(3 * c)])]), Literal(k)],
        )
        right_d = _auto(em, "mul", [_auto(em, "mul", [left, one_minus_t2]), du])
        return _result(em, "mul", [g, _auto(em, "add", [left_d, right_d])], em.out_type())
    if approximate != "none":
        raise Fallback(f"approximate={approximate!r}")
    # cdf = 0.5 (1 + erf(x / sqrt 2)), pdf = exp(-x^2 / 2) / sqrt(2 pi): grad * (cdf + x pdf)
    erf = _auto(em, "erf", [_auto(em, "mul", [x, Literal(1.0 / math.sqrt(2.0))])])
    cdf = _auto(em, "mul", [_auto(em, "add", [erf, Literal(1.0)]), Literal(0.5)])
    e = _auto(em, "exp", [_auto(em, "mul", [_auto(em, "mul", [x, x]), Literal(-0.5)])])
    pdf = _auto(em, "mul", [e, Literal(1.0 / math.sqrt(2.0 * math.pi))])
    return _result(
        em, "mul", [g, _auto(em, "add", [cdf, _auto(em, "mul", [x, pdf])])], em.out_type()
    )


@register("aten.native_layer_norm_backward.default")
def _layer_norm_backward(
    em: Emitter,
    grad: Any,
    x: Any,
    normalized_shape: Any,
    mean: Any,
    rstd: Any,
    weight: Any,
    bias: Any,
    output_mask: Any,
) -> list[Value | None]:
    g, x, mean, rstd = _operands(em, grad, x, mean, rstd)
    rank, k = x.type.rank, len(normalized_shape)
    inner = list(range(rank - k, rank))  # the normalized dims
    outer = list(range(rank - k))
    n = math.prod(_static_shape(x)[rank - k :])
    vals = meta_value(em.node)
    # x_hat = (x - mean) * rstd
    xhat = _auto(em, "mul", [_auto(em, "sub", [x, mean]), rstd], hint="xhat")
    wide = g.type.dtype
    gw = g
    if weight is not None:
        w = _tensor(weight, "weight")
        if w.type.dtype not in (wide, em.out_type(0).dtype):
            raise Fallback("mixed dtypes")
        gw = _auto(em, "mul", [g, _widened(em, w, wide)], hint="gw")
    results: list[Value | None] = [None, None, None]
    if output_mask[0]:
        # rstd / N * (N * gw - sum(gw) - x_hat * sum(gw * x_hat)), sums over the normalized dims
        red = {"dims": inner, "keepdim": True}
        s1 = _auto(em, "sum", [gw], red)
        s2 = _auto(em, "sum", [_auto(em, "mul", [gw, xhat])], red)
        t = _auto(em, "sub", [_auto(em, "mul", [gw, Literal(float(n))]), s1])
        t = _auto(em, "sub", [t, _auto(em, "mul", [xhat, s2])])
        scale = _auto(em, "mul", [rstd, Literal(1.0 / n)])
        results[0] = _result(em, "mul", [scale, t], tensor_type(vals[0]), hint="dx")
    for j, term in ((1, "dw"), (2, "db")):
        if not output_mask[j] or not isinstance(vals[j], type(vals[0])):
            continue
        what = _auto(em, "mul", [g, xhat]) if j == 1 else g
        want = tensor_type(vals[j])
        s = what
        if outer:
            s = _auto(em, "sum", [what], {"dims": outer, "keepdim": False}, hint=term)
        results[j] = _reshape_to(em, _narrowed(em, s, want.dtype), want.shape, hint=term)
    return results


@register("aten.nll_loss_backward.default")
def _nll_loss_backward(
    em: Emitter,
    grad: Any,
    x: Any,
    target: Any,
    weight: Any,
    reduction: int,
    ignore_index: int,
    total_weight: Any,
) -> Value:
    dtype = _float_only(em)
    g, x, target = _tensor(grad), _tensor(x), _tensor(target, "target")
    if weight is not None:
        raise Fallback("class weights")
    if x.type.rank != 2 or g.type.dtype != dtype:
        raise Fallback("input is not [N, C]")
    n, c = _static_shape(x)
    # grad_input[i, t_i] = -grad (/ total_weight for a mean) where t_i != ignore_index, else 0
    classes = _reshape_to(em, _arange_i64(em, 0, c), (1, c), hint="cls")
    tcol = _reshape_to(em, em.cast(target, classes.type.dtype), (n, 1), hint="tcol")
    hit = _auto(
        em,
        "logical_and",
        [
            _auto(em, "eq", [classes, tcol]),
            _auto(em, "ne", [tcol, Literal(int(ignore_index))]),
        ],
    )
    value = _auto(em, "neg", [g])
    if reduction == 1:  # mean
        value = _auto(em, "div", [value, _tensor(total_weight, "total_weight")])
    elif reduction == 0:  # none: one gradient per row
        value = _reshape_to(em, value, (n, 1), hint="grow")
    return em.op("where", [hit, value, Literal(0.0)], em.out_type())


def _place(em: Emitter, grad: Value, dim: int, low: int, high: int) -> Value:
    """``grad`` padded with zeros along ``dim``: the gradient of a view that took a slice."""
    pad = [0, 0] * (grad.type.rank - 1 - dim) + [low, high]
    return em.op("pad", [grad], em.out_type(), {"pad": pad, "value": 0.0})


@register("aten.select_backward.default")
def _select_backward(em: Emitter, grad: Any, sizes: Any, dim: int, index: Any) -> Value:
    g = _tensor(grad)
    out = em.out_type()
    if not isinstance(index, int) or not all(isinstance(s, int) for s in sizes):
        raise Fallback("symbolic index or size")
    d = dim % out.rank
    size = sizes[d]
    i = index % size
    shape = list(out.shape)
    shape[d] = 1
    g = em.op("unsqueeze", [g], TensorType(g.type.dtype, tuple(shape)), {"dim": d}, hint="u")
    return _place(em, g, d, i, size - i - 1)


@register("aten.slice_backward.default")
def _slice_backward(
    em: Emitter, grad: Any, sizes: Any, dim: int, start: Any, end: Any, step: Any
) -> Value:
    g = _tensor(grad)
    out = em.out_type()
    if step != 1 or not all(isinstance(v, int) for v in (*sizes, start, end)):
        raise Fallback("a step other than 1, or symbolic bounds")
    d = dim % out.rank
    size = sizes[d]
    lo = min(max(start + size if start < 0 else start, 0), size)
    taken = g.type.shape[d]
    return _place(em, g, d, lo, size - lo - taken)


# The largest vocabulary whose embedding gradient is a FIR reduction over one-hot rows (each
# weight row sums the gradient rows whose index names it). T5's relative-position buckets (32)
# and BERT's token types (2) are below it; a token or position table (1,024-50,257 rows) is
# not: the reduction's work grows with rows x positions
ONE_HOT_ROWS = 64
LARGE_TABLES_BY_ATOMICS = True


@register("aten.embedding_dense_backward.default")
def _embedding_dense_backward(
    em: Emitter,
    grad: Any,
    indices: Any,
    num_weights: int,
    padding_idx: int,
    scale_grad_by_freq: bool,
) -> Value:
    g, idx = _tensor(grad), _tensor(indices, "indices")
    if not isinstance(num_weights, int):
        raise Fallback("symbolic vocabulary size")
    if num_weights <= ONE_HOT_ROWS and not scale_grad_by_freq:
        return _one_hot_rows(em, g, idx, num_weights, int(padding_idx))
    if LARGE_TABLES_BY_ATOMICS and _atomic_adds_fit(em, g, idx, scale_grad_by_freq):
        return _by_index_add(em, g, idx, num_weights, int(padding_idx))
    # A scatter-add (rows of grad summed into the rows its indices name): FIR has no scatter op,
    # so a large table's gradient is an extern call, on purpose. ATen's CUDA kernel sorts the
    # indices (about 30 launches) and reads a count back to the host, so the host waits for the
    # GPU at each call. On a GPU, zeros and an atomic ``index_add_`` in f32 (Inductor's choice)
    # made training steps slower in interleaved runs on an H200 (T5 9.99 against 9.20 ms, GPT-2
    # 15.45 against 14.78), when T5's relative-position bias (262,144 rows into 32) also took
    # that path: small tables are the reduction above now
    node = ExternNode(
        results=[],
        callee="aten.embedding_dense_backward.default",
        args=[g, idx, num_weights, int(padding_idx), bool(scale_grad_by_freq)],
        kwargs={},
    )
    node.results = [Value(em.name(), em.out_type(), node, 0)]
    em.nodes.append(node)
    return node.results[0]


def _one_hot_rows(em: Emitter, g: Value, idx: Value, rows: int, padding_idx: int) -> Value:
    """The gradient of a small table: ``out[v, :] = sum over p of (idx[p] == v) * g[p, :]``, a
    reduction over the positions in the opmath dtype (f32 for f16/bf16, as ATen accumulates),
    rounded once. Positions whose index is ``padding_idx`` add nothing (ATen skips them)."""
    out = em.out_type()
    if not idx.type.dtype.is_int or g.type.dtype != out.dtype or not g.type.dtype.is_float:
        raise Fallback("not a float gradient with integer indices")
    shape, ishape = _static_shape(g), _static_shape(idx)
    if shape[: len(ishape)] != ishape or tuple(out.shape) != (rows, *shape[len(ishape) :]):
        raise Fallback("gradient and indices do not match")
    positions, width = math.prod(ishape), math.prod(shape[len(ishape) :])
    g2 = _reshape_to(em, _operands(em, g)[0], (1, positions, width), hint="grows")
    i2 = _reshape_to(em, idx, (1, positions, 1), hint="irows")
    table = _reshape_to(em, _arange_i64(em, 0, rows, hint="row"), (rows, 1, 1), hint="rowc")
    hit = _auto(em, "eq", [em.cast(i2, DType.I64), table], hint="hit")
    if padding_idx >= 0:
        hit = _auto(em, "logical_and", [hit, _auto(em, "ne", [i2, Literal(padding_idx)])])
    terms = _auto(em, "where", [hit, g2, Literal(0.0)], hint="term")
    s = _auto(em, "sum", [terms], {"dims": [1], "keepdim": False}, hint="rowsum")
    return em.op("reshape", [em.cast(s, out.dtype)], out)


def _atomic_adds_fit(em: Emitter, g: Value, idx: Value, scale_grad_by_freq: bool) -> bool:
    """Whether a large table's gradient can be summed by atomic adds: on a GPU, with static
    sizes and no scaling by frequency, and only where the user has not asked for deterministic
    algorithms: the order of atomic adds, and so the rounding of a sum, varies from run to run
    (Inductor makes the same choice)."""
    if em.out_meta().device.type != "cuda" or scale_grad_by_freq:
        return False
    if torch.are_deterministic_algorithms_enabled():
        return False
    sized = all(isinstance(d, int) for d in (*g.type.shape, *idx.type.shape))
    return sized and g.type.rank == idx.type.rank + 1


def _by_index_add(em: Emitter, g: Value, idx: Value, num_weights: int, padding_idx: int) -> Value:
    """zeros([num_weights, dim]) then ``index_add_`` of grad's rows, in f32 for f16/bf16 (the
    sums ATen's kernel keeps in f32), then the padding row zeroed and the dtype rounded once in
    one FIR kernel: 3-4 launches and about 60 us of host time a call where ATen's kernel takes
    about 30 and 200 us (on an H200)."""
    shape = _static_shape(g)
    dim, rows = shape[-1], math.prod(shape[:-1])
    acc = g.type.dtype.compute_dtype
    sums_type = TensorType(acc, (num_weights, dim))
    zeros = ExternNode(
        results=[],
        callee="aten.zeros.default",
        args=[[num_weights, dim]],
        kwargs={"dtype": acc, "device": encode_torch_object(em.out_meta().device)},
    )
    sums = Value(em.name("sums"), sums_type, zeros, 0)
    zeros.results = [sums]
    em.nodes.append(zeros)
    source = _reshape_to(em, em.cast(g, acc), (rows, dim), hint="rows")
    flat = _reshape_to(em, idx, (rows,), hint="ids")
    add = ExternNode(
        results=[],
        callee="aten.index_add_.default",
        args=[sums, 0, flat, source],
        attrs={"mutates": [0]},
    )
    add.results = [Value(em.name("added"), sums_type, add, 0)]
    em.nodes.append(add)
    out: Value = sums
    if 0 <= padding_idx < num_weights:  # that row's gradient is zero (it is not trained)
        row = _reshape_to(em, _arange_i64(em, 0, num_weights, hint="wrow"), (num_weights, 1))
        pad = _auto(em, "eq", [row, Literal(padding_idx)])
        out = em.op("where", [pad, Literal(0.0), sums], sums_type, hint="unpadded")
    return em.cast(out, em.out_dtype())


def _swap_last(em: Emitter, x: Value, hint: str) -> Value:
    shape = list(x.type.shape)
    shape[-2], shape[-1] = shape[-1], shape[-2]
    r = x.type.rank
    attrs = {"dim0": r - 2, "dim1": r - 1}
    return em.op("transpose", [x], TensorType(x.type.dtype, tuple(shape)), attrs, hint=hint)


@register("aten._scaled_dot_product_flash_attention_for_cpu_backward.default")
def _attention_backward(
    em: Emitter,
    grad: Any,
    q: Any,
    k: Any,
    v: Any,
    out: Any,
    lse: Any,
    dropout_p: float,
    is_causal: bool,
    attn_mask: Any = None,
    scale: Any = None,
) -> list[Value]:
    g, q, k, v, o, lse = _operands(em, grad, q, k, v, out, lse)
    if dropout_p:
        raise Fallback("dropout inside attention")
    if attn_mask is not None:
        raise Fallback("attention mask")
    if q.type.rank != 4 or not isinstance(q.type.shape[-1], int):
        raise Fallback("query is not [batch, heads, tokens, dim] with a static dim")
    sc = float(scale) if scale is not None else 1.0 / math.sqrt(q.type.shape[-1])
    # the forward's probabilities, again from its logsumexp: p = exp(q k^T * scale - lse)
    s = _auto(em, "mul", [_auto(em, "matmul", [q, _swap_last(em, k, "kt")]), Literal(sc)])
    if is_causal:
        n_q, n_k = s.type.shape[-2], s.type.shape[-1]
        if not isinstance(n_q, int) or not isinstance(n_k, int):
            raise Fallback("symbolic sequence length")
        rows = _reshape_to(em, _arange_i64(em, 0, n_q), (n_q, 1), hint="row")
        cols = _reshape_to(em, _arange_i64(em, 0, n_k), (1, n_k), hint="col")
        keep = _auto(em, "le", [cols, rows])  # top-left aligned, as ATen's is_causal
        s = _auto(em, "where", [keep, s, Literal(float("-inf"))])
    lse4 = _reshape_to(em, lse, (*lse.type.shape, 1), hint="lse")
    p = _auto(em, "exp", [_auto(em, "sub", [s, lse4])], hint="p")
    types = [tensor_type(t) for t in meta_value(em.node)]
    dv = em.op("matmul", [_swap_last(em, p, "pt"), g], types[2], hint="dv")
    dp = _auto(em, "matmul", [g, _swap_last(em, v, "vt")], hint="dp")
    # softmax's gradient: p * (dp - sum(grad * out)), the row sum being sum(p * dp)
    d = _auto(em, "sum", [_auto(em, "mul", [g, o])], {"dims": [3], "keepdim": True}, hint="d")
    ds = _auto(em, "mul", [p, _auto(em, "sub", [dp, d])], hint="ds")
    dq = em.op("mul", [_auto(em, "matmul", [ds, k]), Literal(sc)], types[0], hint="dq")
    dst = _swap_last(em, ds, "dst")
    dk = em.op("mul", [_auto(em, "matmul", [dst, q]), Literal(sc)], types[1], hint="dk")
    return [dq, dk, dv]
