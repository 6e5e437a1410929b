"""Whether the iterations of an innermost loop touch memory independently, so that the llvm
renderer may tell LLVM's vectoriser so (``llvm.loop.parallel_accesses``). How the loops run
(order, tiles, column blocks, lanes) is the schedule's (:mod:`fir.backends.plan.schedule`)."""

from __future__ import annotations

from typing import Any

import sympy
from fir.backends.plan.instructions import CheckIndex, Compute, Load, Store
from fir.backends.plan.loop_tree import Item, step, walk
from fir.ir.ops import FAILS_ON_ZERO_DIVISOR


def independent(items: list[Item], var: str, aliased: frozenset[str] | None) -> bool:
    """Whether the iterations of the innermost loop ``var`` over ``items`` touch memory
    independently of each other, so that LLVM may vectorise it without checking at run time
    that its buffers do not overlap (what the C++ back end's ``omp simd`` asserts). A check
    that fails for the one case FIR makes on purpose, an in-place result (the same pointer
    read and written), left those loops scalar: BERT's gelu after its matmul, 14 ms instead
    of 0.5. It holds where:

    * nothing leaves the loop early (an index check, an integer division by a zero);
    * every store steps by one element along ``var`` (distinct elements per iteration);
    * a load of a buffer that may share storage with a stored one (the same buffer, or both in
      ``aliased``, the kernel's arguments that share storage; None: any two may) reads the
      stored element itself, so no iteration reads what another writes.
    """
    instrs = walk(items)
    for i in instrs:
        if isinstance(i, CheckIndex):
            return False
        if isinstance(i, Compute) and i.op in FAILS_ON_ZERO_DIVISOR and not i.dtype.is_float:
            return False
    stores = [i for i in instrs if isinstance(i, Store)]
    if any(step(s.index, var) != 1 for s in stores):
        return False
    loads = [i for i in instrs if isinstance(i, Load)]

    def overlap(a: str, b: str) -> bool:
        return a == b or aliased is None or (a in aliased and b in aliased)

    for k, s in enumerate(stores):
        for ld in loads:
            if overlap(ld.buffer, s.buffer) and not _same(ld.index, s.index):
                return False
        # two stores into one memory write the same element, or a later iteration's store
        # could land before an earlier one's (the order of writes to one element is the
        # program's)
        for t in stores[k + 1 :]:
            if overlap(s.buffer, t.buffer) and not _same(s.index, t.index):
                return False
    return True


def _same(a: Any, b: Any) -> bool:
    return sympy.expand(sympy.sympify(a) - sympy.sympify(b)) == 0
