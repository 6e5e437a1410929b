"""The one aten → FIR table, :data:`CONVERTERS`, and the decorator that fills it.

Every family module of :mod:`fir.frontend.aten` registers its converters here, one decorator
per converter naming the aten overloads it handles::

    @register("aten.floor_divide.default", "aten.floor_divide.Scalar")
    def _floor_divide(em: Emitter, a: Any, b: Any) -> Value: ...

A converter is called with the node's :class:`~fir.frontend.emitter.Emitter` and its arguments;
the package docstring says what it may do. Importing any module of the package first runs the
package, which loads every family, so the table is always complete.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Converter = Callable[..., Any]
CONVERTERS: dict[str, Converter] = {}


def register(*names: str) -> Callable[[Converter], Converter]:
    def deco(fn: Converter) -> Converter:
        for n in names:
            CONVERTERS[n] = fn
        return fn

    return deco


def mapped_ops() -> list[str]:
    return sorted(CONVERTERS)
