"""Tensor types: element type, shape (static or symbolic sizes) and an optional strided layout.

A size is a Python ``int`` or a sympy expression over size symbols (``s0``). Sympy is only
imported when a symbolic size is actually present.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

from .dtypes import DType

if TYPE_CHECKING:
    import sympy

Dim = Union[int, "sympy.Expr"]


def dim_str(d: Dim) -> str:
    if isinstance(d, int):
        return str(d)
    from .symbolic import print_expr

    return print_expr(d)


def dims_mul(dims: Any) -> Dim:
    out: Dim = 1
    for d in dims:
        out = out * d
    return _norm(out)


def _norm(d: Any) -> Dim:
    if isinstance(d, int):
        return d
    from .symbolic import to_dim

    return to_dim(d)


def contiguous_strides(shape: tuple[Dim, ...]) -> tuple[Dim, ...]:
    strides: list[Dim] = []
    acc: Dim = 1
    for d in reversed(shape):
        strides.append(acc)
        acc = _norm(acc * d)
    return tuple(reversed(strides))


@dataclass(frozen=True)
class Layout:
    """Where element ``(k0, k1, ...)`` lives: ``offset + sum(k_j * strides[j])`` in storage."""

    strides: tuple[Dim, ...]
    offset: Dim = 0


@dataclass(frozen=True)
class TensorType:
    dtype: DType
    shape: tuple[Dim, ...]
    layout: Layout | None = None  # None: contiguous row-major, offset 0

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> Dim:
        # types are immutable and shared by many values: compute once (outside the dataclass
        # fields, so equality and hashing are unchanged)
        n = self.__dict__.get("_numel")
        if n is None:
            n = self.__dict__["_numel"] = dims_mul(self.shape)
        return n

    @property
    def strides(self) -> tuple[Dim, ...]:
        return self.layout.strides if self.layout else contiguous_strides(self.shape)

    @property
    def offset(self) -> Dim:
        return self.layout.offset if self.layout else 0

    @property
    def is_static(self) -> bool:
        dims = list(self.shape)
        if self.layout:
            dims += list(self.layout.strides) + [self.layout.offset]
        return all(isinstance(d, int) for d in dims)

    def storage_size(self) -> Dim:
        """Elements of storage the layout can touch (0 for an empty tensor)."""
        size = self.__dict__.get("_storage_size")
        if size is None:
            size = self.__dict__["_storage_size"] = self._storage_size()
        return size

    def _storage_size(self) -> Dim:
        if any(isinstance(d, int) and d == 0 for d in self.shape):
            return 0
        if self.layout is None and all(type(d) is int for d in self.shape):
            return math.prod(self.shape)  # the common case, without sympy
        size: Any = self.offset + 1
        for d, s in zip(self.shape, self.strides):
            size = size + (d - 1) * s
        return _norm(size)

    def with_shape(self, shape: tuple[Dim, ...]) -> TensorType:
        return TensorType(self.dtype, tuple(shape))

    def with_dtype(self, dtype: DType) -> TensorType:
        return TensorType(dtype, self.shape, self.layout)

    def contiguous(self) -> TensorType:
        return TensorType(self.dtype, self.shape)

    def normalized(self) -> TensorType:
        """Drop a layout that is just the contiguous one."""
        if (
            self.layout
            and self.layout.offset == 0
            and self.layout.strides == contiguous_strides(self.shape)
        ):
            return TensorType(self.dtype, self.shape)
        return self

    def __str__(self) -> str:
        text = f"{self.dtype.value}[{', '.join(dim_str(d) for d in self.shape)}]"
        if self.layout is not None:
            text += f" strided [{', '.join(dim_str(s) for s in self.layout.strides)}]"
            if not (isinstance(self.layout.offset, int) and self.layout.offset == 0):
                text += f" offset {dim_str(self.layout.offset)}"
        return text


def broadcast_shapes(*shapes: tuple[Dim, ...]) -> tuple[Dim, ...] | None:
    """Numpy/PyTorch broadcasting; None when the shapes do not broadcast."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[Dim] = []
    for k in range(rank):
        dim: Dim = 1
        for s in shapes:
            j = k - (rank - len(s))
            if j < 0:
                continue
            d = s[j]
            if isinstance(d, int) and d == 1:
                continue
            if isinstance(dim, int) and dim == 1:
                dim = d
            elif dim != d:
                return None
        out.append(dim)
    return tuple(out)
