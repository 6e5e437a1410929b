"""Views as index maps: how ``lower`` reads a tensor that no node computes.

An :class:`Access` says where element ``idx`` of a logical tensor lives in the storage of a
realized buffer (a function argument, a loop node or an extern result). A realized buffer reads
itself through its layout; a view (reshape, permute, expand, slice, select, squeeze, unsqueeze,
as_strided …) is an access derived from its operand's, so it never becomes a node: its readers
load through the composed map.

An access has one of two forms:

* **strided**: ``offset + sum(stride_k * idx_k)``; every view of a strided access except a reshape
  that merges dimensions whose strides do not line up stays strided (the stride algebra torch uses
  for ``view``), which keeps loads affine;
* **general**: a storage index expression over placeholder symbols ``_p0, _p1, …`` (one per
  dimension of the view), built with ``floordiv``/``mod`` where dimensions are split or merged
  across incompatible strides. A view of a general access substitutes its operand index
  expressions into the operand's map.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

import sympy
from fir.ir.graph import Value
from fir.ir.symbolic import FloorDiv, Modulo, index_var, simplify_index
from fir.ir.types import Dim, TensorType, contiguous_strides

Index = Any  # an index expression: a Python int or a sympy expression


@cache
def placeholder(k: int) -> sympy.Symbol:
    """The stand-in for the index of dimension ``k`` of a view while its map is built."""
    return index_var(f"_p{k}")


def _norm(e: Any) -> Dim:
    if isinstance(e, sympy.Integer):
        return int(e)
    return e


def is_one(d: Dim) -> bool:
    return isinstance(d, int) and d == 1


def is_zero(d: Dim) -> bool:
    return isinstance(d, int) and d == 0


def _same(a: Dim, b: Dim) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return a == b or sympy.expand(sympy.sympify(a) - sympy.sympify(b)) == 0


def _ratio(big: Dim, small: Dim) -> Dim | None:
    """``big / small`` when ``small`` divides ``big`` for every value of the size symbols."""
    if isinstance(big, int) and isinstance(small, int):
        return big // small if small and big % small == 0 else None
    q = sympy.cancel(sympy.sympify(big) / sympy.sympify(small))
    num, den = sympy.fraction(q)
    if den != 1:
        return None
    return _norm(q)


@lru_cache(maxsize=65536)
def _affine_index(strides: tuple[Dim, ...], offset: Dim, idx: tuple[Index, ...]) -> Index:
    # the hot path of every load: one buffer shape read with one set of loop variables
    terms: list[Any] = []
    for s, i in zip(strides, idx):
        if is_zero(s) or (isinstance(i, int) and i == 0):
            continue
        if isinstance(s, int) and isinstance(i, int):
            offset = offset + s * i
        elif is_one(s):
            terms.append(i)
        else:
            terms.append(sympy.Mul(s, i))
    if not terms:
        return _norm(sympy.sympify(offset))
    if not is_zero(offset):
        terms.append(offset)
    return _norm(sympy.Add(*terms))


@dataclass(eq=False)
class Access:
    """Element ``idx`` of a tensor of ``shape`` is at ``index(idx)`` in the storage of ``buffer``."""

    buffer: Value
    shape: tuple[Dim, ...]
    strides: tuple[Dim, ...] | None = None
    offset: Dim = 0
    flat: Any = None  # the general form, over placeholder(0..rank-1)

    def flat_expr(self) -> Any:
        """The storage index as an expression over the placeholders."""
        if self.strides is None:
            return self.flat
        idx = tuple(placeholder(k) for k in range(len(self.shape)))
        return sympy.sympify(_affine_index(self.strides, self.offset, idx))

    def index(self, idx: Sequence[Index], ranges: dict[sympy.Symbol, Dim]) -> Index:
        """The storage index of element ``idx`` (one expression per dimension), simplified with
        the loop ``ranges`` of the body that loads it."""
        key = tuple(idx)
        if self.strides is not None:
            return _affine_index(self.strides, self.offset, key)
        return _norm(simplify_index(_substitute(self.flat, key), ranges))


@lru_cache(maxsize=65536)
def _substitute(flat: Any, idx: tuple[Index, ...]) -> Any:
    # views repeat across a program (every block reshapes the same way): substitute once
    return flat.xreplace({placeholder(k): sympy.sympify(i) for k, i in enumerate(idx)})


def buffer_access(v: Value) -> Access:
    t = v.type
    return Access(v, tuple(t.shape), tuple(t.strides), t.offset)


# ---------------------------------------------------------------------------------------------
# Composition


def _compose(parent: Access, shape: tuple[Dim, ...], g: Sequence[Index]) -> Access:
    """The access of a view whose element ``p`` is element ``g(p)`` of ``parent``; ``g`` holds
    one expression over the view's placeholders per dimension of ``parent``."""
    flat = parent.flat_expr().xreplace({placeholder(k): sympy.sympify(e) for k, e in enumerate(g)})
    ranges = {placeholder(k): d for k, d in enumerate(shape)}
    return Access(parent.buffer, shape, None, 0, sympy.sympify(simplify_index(flat, ranges)))


# An affine view map: for each dimension of the operand, (view dimension or None, scale, shift):
# operand index = scale * view index + shift (or just shift).
AffineMap = Sequence[tuple[int | None, Dim, Dim]]


def _affine_view(parent: Access, shape: tuple[Dim, ...], amap: AffineMap) -> Access:
    if parent.strides is not None:
        strides: list[Any] = [0] * len(shape)
        offset: Any = parent.offset
        for st, (j, scale, shift) in zip(parent.strides, amap):
            if not is_zero(shift):
                offset = offset + st * shift
            if j is not None:
                strides[j] = strides[j] + st * scale
        return Access(parent.buffer, shape, tuple(_norm(s) for s in strides), _norm(offset))
    g = [shift if j is None else scale * placeholder(j) + shift for j, scale, shift in amap]
    return _compose(parent, shape, g)


def permute(parent: Access, dims: Sequence[int]) -> Access:
    rank = len(parent.shape)
    dims = [d % rank for d in dims]
    shape = tuple(parent.shape[d] for d in dims)
    amap: list[tuple[int | None, Dim, Dim]] = [(None, 1, 0)] * rank
    for j, d in enumerate(dims):
        amap[d] = (j, 1, 0)
    return _affine_view(parent, shape, amap)


def transpose(parent: Access, dim0: int, dim1: int) -> Access:
    rank = len(parent.shape)
    perm = list(range(rank))
    a, b = dim0 % rank, dim1 % rank
    perm[a], perm[b] = perm[b], perm[a]
    return permute(parent, perm)


def expand(parent: Access, shape: tuple[Dim, ...]) -> Access:
    lead = len(shape) - len(parent.shape)
    amap = []
    for k, d in enumerate(parent.shape):
        broadcast = is_one(d) and not is_one(shape[lead + k])
        amap.append((None, 1, 0) if broadcast else (lead + k, 1, 0))
    return _affine_view(parent, shape, amap)


def slice_(
    parent: Access, dim: int, start: Dim, end: Dim | None, step: int, shape: tuple[Dim, ...]
) -> Access:
    dim %= len(parent.shape)
    size = parent.shape[dim]
    if isinstance(size, int) and isinstance(start, int) and (end is None or isinstance(end, int)):
        start = slice(start, end, step).indices(size)[0]
    elif isinstance(start, int) and start < 0:
        start = _norm(size + start)
    amap = [(k, 1, 0) for k in range(len(shape))]
    amap[dim] = (dim, step, start)
    return _affine_view(parent, shape, amap)


def select(parent: Access, dim: int, index: Dim, shape: tuple[Dim, ...]) -> Access:
    dim %= len(parent.shape)
    if isinstance(index, int) and index < 0:
        index = _norm(parent.shape[dim] + index)
    amap: list[tuple[int | None, Dim, Dim]] = []
    for k in range(len(parent.shape)):
        if k < dim:
            amap.append((k, 1, 0))
        elif k == dim:
            amap.append((None, 1, index))
        else:
            amap.append((k - 1, 1, 0))
    return _affine_view(parent, shape, amap)


def squeeze(parent: Access, dims: Sequence[int] | None) -> Access:
    rank = len(parent.shape)
    if dims is None:
        drop = {k for k, d in enumerate(parent.shape) if is_one(d)}
    else:
        drop = {d % rank for d in dims if is_one(parent.shape[d % rank])}
    amap: list[tuple[int | None, Dim, Dim]] = []
    j = 0
    for k in range(rank):
        if k in drop:
            amap.append((None, 1, 0))
        else:
            amap.append((j, 1, 0))
            j += 1
    shape = tuple(d for k, d in enumerate(parent.shape) if k not in drop)
    return _affine_view(parent, shape, amap)


def unsqueeze(parent: Access, dim: int) -> Access:
    rank = len(parent.shape)
    dim %= rank + 1
    shape = parent.shape[:dim] + (1,) + parent.shape[dim:]
    amap = [(k if k < dim else k + 1, 1, 0) for k in range(rank)]
    return _affine_view(parent, shape, amap)


def _is_contiguous(shape: Sequence[Dim], strides: Sequence[Dim]) -> bool:
    want = contiguous_strides(tuple(shape))
    return all(is_one(d) or _same(s, w) for d, s, w in zip(shape, strides, want))


def as_strided(
    parent: Access, shape: tuple[Dim, ...], strides: Sequence[int], offset: Dim
) -> Access:
    """``strides`` and ``offset`` index the operand's elements in row-major order (its
    contiguous storage); on an operand laid out contiguously that is its storage itself."""
    if parent.strides is not None and _is_contiguous(parent.shape, parent.strides):
        return Access(
            parent.buffer, shape, tuple(strides), _norm(sympy.sympify(parent.offset) + offset)
        )
    linear: Any = offset
    for k, s in enumerate(strides):
        linear = linear + s * placeholder(k)
    return _compose(parent, shape, _unravel(linear, parent.shape))


def _unravel(linear: Any, shape: Sequence[Dim]) -> list[Any]:
    """Row-major position ``linear`` → one index per dimension of ``shape``."""
    out: list[Any] = []
    inner: Any = 1
    for k in range(len(shape) - 1, -1, -1):
        d = shape[k]
        if is_one(d):
            out.append(0)
            continue
        e = FloorDiv(linear, inner) if not is_one(inner) else linear
        if k > 0:
            e = Modulo(e, d)
        out.append(e)
        inner = inner * d
    return out[::-1]


# ---------------------------------------------------------------------------------------------
# Reshape


def reshape(parent: Access, shape: tuple[Dim, ...]) -> Access:
    if parent.strides is not None:
        strides = view_strides(parent.shape, parent.strides, shape)
        if strides is not None:
            return Access(parent.buffer, shape, strides, parent.offset)
    return _compose(parent, shape, _reshape_map(parent.shape, shape))


def view_strides(
    old: Sequence[Dim], old_strides: Sequence[Dim], new: Sequence[Dim]
) -> tuple[Dim, ...] | None:
    """Strides that make ``new`` a view of a tensor ``old`` laid out with ``old_strides``, or
    None when some merged dimensions do not lie at a constant stride from each other.

    The dimensions of ``old`` (size-1 ones dropped) fall into chunks that are contiguous among
    themselves; each chunk is reshaped on its own into consecutive dimensions of ``new``."""
    chunks: list[tuple[Dim, Dim]] = []  # (element count, innermost stride)
    for d, s in zip(old, old_strides):
        if is_one(d):
            continue
        if chunks and _same(chunks[-1][1], _norm(d * s)):
            chunks[-1] = (_norm(chunks[-1][0] * d), s)
        else:
            chunks.append((d, s))
    out: list[Dim] = [1] * len(new)
    j = len(new) - 1
    for numel, base in reversed(chunks):
        acc: Dim = 1
        while not _same(acc, numel):
            if j < 0:
                return None
            d = new[j]
            out[j] = _norm(acc * base)
            j -= 1
            if is_one(d):
                continue  # any stride will do; this is the one the next dimension would get
            acc = _norm(acc * d)
            if _ratio(numel, acc) is None:
                return None
    while j >= 0:
        if not is_one(new[j]):
            return None
        j -= 1
    return tuple(out)


def _reshape_map(old: Sequence[Dim], new: Sequence[Dim]) -> list[Any]:
    """For each dimension of ``old``, its index as an expression of the indices of ``new``
    (placeholders), when ``new`` is the row-major reshape of ``old``. Dimensions are grouped
    into the smallest runs of equal element count so that each split or merge stays local."""
    groups = _reshape_groups(old, new)
    out: list[Any] = []
    for old_dims, new_dims in groups:
        linear: Any = 0
        inner: Any = 1
        for k in reversed(new_dims):
            if not is_one(new[k]):
                linear = linear + inner * placeholder(k)
                inner = inner * new[k]
        out.extend(_unravel(linear, [old[k] for k in old_dims]))
    return out


def _reshape_groups(old: Sequence[Dim], new: Sequence[Dim]) -> list[tuple[list[int], list[int]]]:
    """Pair runs of ``old`` and ``new`` dimensions with equal element counts, taking one
    dimension from each side and then growing the side with fewer elements."""
    everything = [(list(range(len(old))), list(range(len(new))))]
    groups: list[tuple[list[int], list[int]]] = []
    i = j = 0
    while i < len(old) or j < len(new):
        go: list[int] = []
        gn: list[int] = []
        po: Dim = 1
        pn: Dim = 1
        if i < len(old):
            go.append(i)
            po = old[i]
            i += 1
        if j < len(new):
            gn.append(j)
            pn = new[j]
            j += 1
        while not _same(po, pn):
            take_old = _smaller(po, pn)
            if take_old is None:
                return everything  # sizes that cannot be ordered symbolically
            if take_old and i < len(old):
                po = _norm(po * old[i])
                go.append(i)
                i += 1
            elif not take_old and j < len(new):
                pn = _norm(pn * new[j])
                gn.append(j)
                j += 1
            else:
                return everything
        groups.append((go, gn))
    return groups


def _smaller(a: Dim, b: Dim) -> bool | None:
    """True when ``a < b``, False when ``b < a``, None when that depends on the sizes."""
    if isinstance(a, int) and isinstance(b, int):
        return a < b
    if _ratio(b, a) is not None:
        return True
    if _ratio(a, b) is not None:
        return False
    return None


def same_layout(a: TensorType, b: TensorType) -> bool:
    """Whether ``a`` and ``b`` put every element at the same storage position: equal offsets
    and strides, except the strides of dimensions of size 1 (never used) and any tensor with
    no element."""
    if tuple(a.shape) != tuple(b.shape):
        return False
    if any(is_zero(d) for d in a.shape):
        return True
    if not _same(a.offset, b.offset):
        return False
    return all(is_one(d) or _same(s, t) for d, s, t in zip(a.shape, a.strides, b.strides))


def is_writable(t: TensorType) -> bool:
    """Whether a loop node can write a result of layout ``t``: offset 0 and no two elements at
    one storage position (PyTorch's "non-overlapping": each dimension's stride, in increasing
    order, at least the extent of the dimensions before it; a permutation of a contiguous
    layout, or one with gaps like ``empty_strided``'s). Only known strides are compared."""
    if not is_zero(t.offset):
        return False
    dims = [(s, d) for d, s in zip(t.shape, t.strides) if not is_one(d)]
    if not all(isinstance(s, int) and isinstance(d, int) for s, d in dims):
        return t.layout is None
    extent = 1
    for s, d in sorted(dims, key=lambda sd: sd[0]):
        if s < extent:
            return False
        extent = s * d
    return True
