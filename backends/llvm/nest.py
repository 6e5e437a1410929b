"""The plan's flat instruction list as a loop tree, and the facts that choose how the llvm
renderer writes a loop nest: which loop the stores walk contiguously (it goes innermost), and
whether a reduction walks memory along its outputs (``x.sum(0)``: then a block of outputs is
accumulated side by side, the reduction loop outside)."""

from __future__ import annotations

from fir.backends.plan.instructions import (
    Store,
)
from fir.backends.plan.loop_tree import Item, step, walk


def stores_contiguous(items: list[Item], var: str) -> bool:
    """Every store under ``items`` steps by one element along ``var`` (and there is one)."""
    stores = [i for i in walk(items) if isinstance(i, Store)]
    return bool(stores) and all(step(s.index, var) == 1 for s in stores)
