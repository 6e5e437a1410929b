"""The loop schedule of the scalar loop-nest family (the C++ and LLVM back ends), decided once.

A kernel plan says *what* each loop computes; its schedule says *how* the loops run: in which
order (a pointwise nest's loops may be interchanged), which loops the threads share, which loop
is vectorised, which pair runs in square tiles, whether a reduction runs as column blocks, in
lanes, or split among the threads. Both renderers read a :class:`KernelSchedule` and decide
none of this themselves; ``fir-translate --target plan`` prints it (:meth:`KernelSchedule.text`),
so lit tests pin it.

The two renderers differ in what they can render, not in the rules: :class:`Family` holds what
each declares (how the threads take the parallel loops, the lanes of a row reduction, whether it
can split a whole-tensor reduction). Where their rules used to differ, the C++ back end's is the
one kept (see :func:`vectorises`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

import sympy
from fir.ir.dtypes import DType
from fir.ir.graph import Literal
from fir.ir.ops import COSTLY_OPS
from fir.ir.symbolic import stride
from fir.ir.types import Dim, dim_str, dims_mul

from . import instructions as ins
from .kernel import KernelPlan
from .loop_tree import (
    Item,
    Loop,
    chain,
    column_segments,
    defines,
    has_loops,
    hoist,
    loop_tree,
    positive,
    step,
    uses,
    walk,
    walks_columns,
)

GRAIN = 32768  # element-iterations below which a kernel runs on one thread
COLUMN_BLOCK = 64  # outputs accumulated side by side in a column reduction
COLUMN_MIN = 8  # a pointwise loop shorter than this is no column worth blocking
# a tile's side in bytes: each row of a 32 x 32 f32 tile is two cache lines, so the strided
# side reads 128 B per page it visits (C++ transpose_add 2896^2 on 2 cores: 16 x 16 3.8 ms,
# 32 x 32 3.0 ms, 64 x 64 3.6 ms)
TILE_BYTES = 128
TILE_MIN = 32  # elements a side, at least
MAX_THREADS = 64  # per-thread states of a split whole-tensor reduction
# costly ops (exp, sin, division ...) an element from which a kernel is compute-bound: a long
# chain of math is latency-bound (the LLVM family interleaves its iterations; the block
# family gives each thread one element, :mod:`.block_schedule`)
HEAVY_OPS = 8


class Kind(Enum):
    """How one loop runs."""

    SERIAL = "serial"
    VECTOR = "vector"  # the innermost pointwise loop, vectorised
    TILED = "tiled"  # one of a pair run in square tiles of ``block`` elements a side
    COLUMNS = "column-reduction"  # blocks of ``block`` outputs, the reduction loops inside
    ROWS = "row-reduction"  # a reduction loop along memory, ``block`` lanes (0: none)
    SPLIT = "split-reduction"  # a whole-tensor reduction cut into one range per thread


@dataclass(frozen=True)
class Family:
    """What a renderer of the scalar family declares it renders.

    ``collapse``: the threads share every parallel loop, collapsed into one (OpenMP's
    ``collapse``); otherwise only the plan's outermost loop, whose range the runtime splits.
    ``lanes``: states per lane block of a row reduction, for the accumulator kinds
    ``lane_kinds`` (None: every kind; the others are left to the target's vectoriser).
    ``split``: a whole-tensor reduction may be split among the threads.
    ``crossing_checks``: a column reduction may carry a checked index from one pass to
    the next in a block array. ``vectors``: the renderer vectorises the loops the schedule
    says (C++'s ``omp simd``); otherwise the target's vectoriser decides alone.
    ``interleave``: vector iterations the target's vectoriser is asked to interleave in the
    loops of a compute-heavy kernel (``HEAVY_OPS``; 1: no hint). ``f16_block``: a vectorised
    loop that converts f16 runs in blocks of this many elements, each converted by one
    instruction (:func:`f16_blocks`; 0: the conversions stay in the loop).
    ``chunks_per_thread``: the runtime cuts the parallel loop's range into this many chunks a
    thread, which the threads take in turn (:func:`chunks`; 0: the target's own split, as
    OpenMP's static schedule). ``turns_tiles``: a tiled nest reads its transposed loads of
    4- and 2-byte elements from a turned copy of the tile (:func:`turned_loads`).
    ``reassociates``: the accumulator kinds left to the target's vectoriser whose float
    update it may reassociate (one partial result per vector lane: the order of the
    additions changes, the result within rounding), unless ``FIR_LLVM_REASSOC=0``.
    ``turned_side``: the side of a turned tile of 4-byte elements (:func:`turned_side`),
    asked only of a kernel that turns tiles; a back end gives the side it measured on this
    machine (``fir.backends.cpu_tuning``), the families here give :data:`TURNED_SIDE`."""

    name: str
    collapse: bool
    lanes: int
    lane_kinds: frozenset[str] | None
    split: bool
    crossing_checks: bool
    vectors: bool
    interleave: int = 1
    f16_block: int = 0
    chunks_per_thread: int = 0
    turns_tiles: bool = False
    reassociates: frozenset[str] = frozenset()
    turned_side: Callable[[], int] = lambda: TURNED_SIDE


# 16 lanes: one AVX-512 register of f32 accumulators, every kind (GCC vectorises the lanes).
# f16 in blocks of 16 (one F16C instruction converts 16 values, ``FIR_F16_BLOCK`` of the C++
# prelude): GCC vectorises no loop with the conversion instruction inside, and the integer
# conversion it does vectorise costs ~12 instructions per element, which made f16 kernels
# compute-bound; bf16 stays in the loop (its conversion is a shift, or a few integer
# operations; blocks measured no faster)
CPP = Family(
    "cpp",
    collapse=True,
    lanes=16,
    lane_kinds=None,
    split=True,
    crossing_checks=True,
    vectors=True,
    f16_block=16,
    turns_tiles=True,
)
# 32 lanes, for the kinds LLVM cannot vectorise as reductions (sums, products, max and min
# are its own); each lane's state goes through a stack array from block to block, so more
# lanes hide that latency (layer_norm on one thread: 16 lanes 1.3x the C++ kernel's time, 32
# lanes 1.1x, 64 no better).
# Interleave 2: a long chain of math (deep_chain's 40 dependent sines) is latency-bound, and
# independent vector iterations side by side hide the latency (deep_chain, 2 cores: 442 ms with
# 1, 209 with 2, 133 with 4, 162 with 8). Each doubles the optimiser's and code generator's
# work on the body (deep_chain's build: 0.21, 0.27, 0.42 s), and the cold compile of
# deep_chain must stay under a second: 2. FIR_LLVM_INTERLEAVE overrides it.
# 4 chunks a thread: the threads (the calling one included) take the next chunk when done, so a
# core that another process holds for a while slows the call by a chunk, not by half of it.
LLVM = Family(
    "llvm",
    collapse=False,
    lanes=32,
    lane_kinds=frozenset({"welford", "argmax", "argmin"}),
    split=False,
    crossing_checks=False,
    vectors=False,
    interleave=int(os.environ.get("FIR_LLVM_INTERLEAVE", "2")),
    chunks_per_thread=4,
    turns_tiles=True,
    reassociates=frozenset({"sum", "prod"}),
)


@dataclass(frozen=True)
class ScheduledLoop:
    """One loop as it runs: ``parallel``, the threads share it; ``block``, the tile's side
    or the column block (a row reduction's lanes are its family's); ``f16``: a vectorised
    loop that converts f16 in blocks of this many elements (:meth:`KernelSchedule.f16_blocked`)."""

    var: str
    kind: Kind
    parallel: bool = False
    block: int = 0
    f16: int = 0

    def text(self) -> str:
        out = self.var + (" parallel" if self.parallel else "")
        if self.kind is not Kind.SERIAL or not self.parallel:
            out += " " + self.kind.value
        out += f" {self.block}" if self.block else ""
        return out + (f" f16-blocks {self.f16}" if self.f16 else "")


@dataclass(frozen=True)
class NestSchedule:
    """A top-level loop nest of the kernel: its loops in the order they run, outermost first
    (for a nest with reduction phases, the pointwise loops and then one entry for the
    reduction loops)."""

    loops: tuple[ScheduledLoop, ...]
    # the loads of a tiled nest read from a turned (transposed) copy of the tile, copied in
    # 8 x 8 register blocks once a tile (:func:`turned_loads`)
    turned: tuple[str, ...] = ()

    def has(self, kind: Kind) -> bool:
        return any(lp.kind is kind for lp in self.loops)

    def order(self) -> list[str]:
        """The pointwise loops' variables in the order they run."""
        return [lp.var for lp in self.loops if lp.kind not in (Kind.ROWS, Kind.SPLIT)]

    def parallel(self) -> int:
        """How many loops the threads share (collapsed into one)."""
        return sum(lp.parallel for lp in self.loops)

    def tile(self) -> tuple[str, str, int] | None:
        """The tiled pair (outer, inner) and the tile's side."""
        pair = [lp for lp in self.loops if lp.kind is Kind.TILED]
        return (pair[0].var, pair[1].var, pair[0].block) if pair else None


@dataclass(frozen=True)
class KernelSchedule:
    """Every decision about how a kernel's loops run, for one renderer family."""

    kernel: str
    family: Family
    work: Dim  # element-iterations of the kernel
    nests: tuple[NestSchedule, ...]  # one per top-level loop of the plan, in order
    # vector iterations the target's vectoriser is asked to interleave in every loop of the
    # kernel (1: no hint): the family's, in a compute-heavy kernel
    interleave: int = 1
    # the accumulator kinds whose float update may be reassociated (the family's, where
    # FIR_LLVM_REASSOC=0 does not keep every sum in order)
    reassociates: frozenset[str] = frozenset()

    def one_thread(self) -> bool:
        """Below the grain the kernel runs on one thread."""
        return isinstance(self.work, int) and self.work < GRAIN

    def threads_text(self) -> str:
        if self.one_thread():
            return f"threads 1 (work {self.work} < {GRAIN})"
        # a family that splits the parallel loop's range itself: into chunks (none to split
        # where no loop is parallel)
        each = self.family.chunks_per_thread
        split = each and any(n.parallel() for n in self.nests)
        chunked = f", {each} chunks a thread" if split else ""
        if isinstance(self.work, int):
            return "threads all" + chunked
        return f"threads if {dim_str(self.work)} >= {GRAIN}" + chunked

    def lanes_for(self, kinds: Iterable[str], size: Dim | None) -> int:
        """The lanes of a row-reduction loop over ``size`` elements (None: a range not known
        here, a thread's part of a split loop) updating accumulators of ``kinds``; 0: the
        loop runs one element at a time (a known row shorter than the lanes never fills a
        block)."""
        return lanes_for(self.family, kinds, size)

    def f16_blocked(
        self, items: list[Item], var: str, size: Dim, turned: tuple[str, ...] = ()
    ) -> tuple[list[ins.Load], list[ins.Store]] | None:
        """:func:`f16_blocked` for this kernel's family."""
        return f16_blocked(self.family, items, var, size, turned)

    def text(self) -> str:
        """One line per kernel: ``schedule KERNEL [FAMILY]: THREADS[; interleave N]
        [; reassociating KINDS]; NEST; NEST…``, each nest its loops as they run, outermost
        first."""
        parts = [self.threads_text()]
        if self.interleave > 1:
            parts.append(f"interleave {self.interleave}")
        if self.reassociates:  # the target may reorder these float sums (one per vector lane)
            parts.append(f"reassociating {', '.join(sorted(self.reassociates))}")
        parts += [
            ", ".join(self._loop_text(lp) for lp in n.loops)
            + (f", turning {', '.join(n.turned)}" if n.turned else "")
            for n in self.nests
        ]
        return f"schedule {self.kernel} [{self.family.name}]: " + "; ".join(parts)

    def _loop_text(self, lp: ScheduledLoop) -> str:
        if lp.kind not in (Kind.ROWS, Kind.SPLIT):
            return lp.text()
        lanes = f" lanes {self.family.lanes}"
        if self.family.lane_kinds is not None:
            lanes += " for " + "/".join(sorted(self.family.lane_kinds))
        f16 = f" f16-blocks {lp.f16}" if lp.f16 else ""
        return replace(lp, f16=0).text() + lanes + f16


# -- the rules


def int_values(plan: KernelPlan) -> set[str]:
    """The plan's values of integer dtypes (an integer division by them may fail)."""
    out: set[str] = set()
    for i in plan.instrs:
        if isinstance(i, (ins.Load, ins.Compute, ins.Constant, ins.IndexValue)):
            pairs = [(i.dst, i.dtype)]
        elif isinstance(i, ins.CheckIndex):
            pairs = [(i.symbol, DType.I64)]
        elif isinstance(i, ins.AccResult):
            pairs = list(zip(i.dsts, i.dtypes))
        else:
            continue
        out |= {n for n, d in pairs if not d.is_float and not d.is_bool}
    return out


def can_fail(i: ins.Instr, int_operands: set[str]) -> bool:
    """An index check, or an integer division whose divisor may be zero: such a loop leaves
    an iteration early, so it is never vectorised nor split among threads."""
    if isinstance(i, ins.CheckIndex):
        return True
    if isinstance(i, ins.Compute) and i.op in ins.DIVIDES:
        a, b = i.args[0], i.args[1]
        integer = (isinstance(a, str) and a in int_operands) or (
            isinstance(b, str) and b in int_operands
        )
        return integer and not (isinstance(b, Literal) and b.value not in (0, None, False))
    return False


def contiguous(items: list[Item], var: str) -> bool:
    """Whether loop ``var`` over ``items`` walks memory in order: every store steps by one
    element, and no more loads are strided than step by one (a transposed read is a gather,
    which pays while the stores stream).

    The C++ back end's rule, now both renderers', for vectorising a loop and for choosing
    the innermost one (with :func:`narrower`, which the LLVM back end's stores-only rule
    covered in part)."""
    unit = strided = 0
    for i in walk(items):
        if isinstance(i, ins.Store) and step(i.index, var) != 1:
            return False
        if isinstance(i, ins.Load):
            s = step(i.index, var)
            if s == 1:
                unit += 1
            elif s != 0:
                strided += 1
    return strided <= unit


def vectorises(items: list[Item], var: str, int_operands: set[str]) -> bool:
    """Whether loop ``var`` over ``items`` (invariants hoisted) is vectorised: it cannot
    leave an iteration early and it walks memory in order (:func:`contiguous`)."""
    fails = any(can_fail(i, int_operands) for i in walk(items))
    return not fails and contiguous(items, var)


def independent(items: list[Item], var: str, aliased: frozenset[str] | None) -> bool:
    """Whether the iterations of the innermost loop ``var`` over ``items`` touch memory
    independently of each other, so that LLVM may vectorise it without checking at run time
    that its buffers do not overlap (what the C++ back end's ``omp simd`` asserts; the LLVM
    renderer names such a loop's accesses in ``llvm.loop.parallel_accesses``). A check
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
        if isinstance(i, ins.CheckIndex):
            return False
        if isinstance(i, ins.Compute) and i.op in ins.DIVIDES and not i.dtype.is_float:
            return False
    stores = [i for i in instrs if isinstance(i, ins.Store)]
    if any(step(s.index, var) != 1 for s in stores):
        return False
    loads = [i for i in instrs if isinstance(i, ins.Load)]

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


def innermost_rest(lp: Loop) -> list[Item]:
    """What the innermost loop ``lp`` runs once its invariants are hoisted (only from a loop
    that runs at least once: a check must not fire for an empty loop)."""
    return hoist(lp.body, lp.var, set())[1] if positive(lp.size) else lp.body


def contiguous_last(loops: list[Loop]) -> list[Loop]:
    """The pointwise loops with one whose memory is walked in order innermost, if the plan's
    innermost is not (any order is legal for a pointwise kernel); the body moves with it."""
    body, inner = loops[-1].body, loops[-1].var
    if contiguous(body, inner):
        return loops
    for lp in reversed(loops[:-1]):
        if contiguous(body, lp.var) or narrower(body, lp.var, inner):
            others = [Loop(x.var, x.size, False, parallel=x.parallel) for x in loops if x is not lp]
            return others + [Loop(lp.var, lp.size, False, body, lp.parallel)]
    return loops


def narrower(items: list[Item], var: str, inner: str) -> bool:
    """Whether loop ``var`` stores in order and leaves its strided loads a smaller stride
    than the plan's innermost loop ``inner`` leaves its strided accesses (both known).

    Where a nest is too small to tile, one order leaves the stores strided, the other the
    loads, and the access with the wider stride touches a new line, and from a page up a new
    page and (a power of two) the same L1 set, every iteration. :func:`contiguous` alone,
    the C++ back end's rule, kept a transposed add's 16 KiB store stride innermost, where the
    LLVM back end's stores-only rule interchanged (one thread, f32, old rule -> stores-only:
    [48, 4096] C++ 0.82 -> 0.32 ms, LLVM 0.91 -> 0.26; [40, 1024] 0.25 -> 0.05, 0.19 ->
    0.06); the stores-only rule lost where the loads' stride is the wider ([4096, 48]: 0.34
    -> 0.42 ms, 0.34 -> 0.49). Comparing strides keeps the better order in all four."""
    stores = [i for i in walk(items) if isinstance(i, ins.Store)]
    if not stores or any(step(s.index, var) != 1 for s in stores):
        return False
    mine, theirs = _widest(items, var), _widest(items, inner)
    return mine is not None and theirs is not None and mine < theirs


def _widest(items: list[Item], var: str) -> int | None:
    """The widest stride (in elements) of the accesses under ``items`` that loop ``var``
    does not walk in order (0: none); None where one is not a known number."""
    widest = 0
    for i in walk(items):
        if isinstance(i, (ins.Load, ins.Store)):
            s = step(i.index, var)
            if not isinstance(s, int) and not (isinstance(s, sympy.Integer)):
                return None
            if abs(int(s)) > 1:
                widest = max(widest, abs(int(s)))
    return widest


def f16_blocks(
    items: list[Item], var: str, turned: tuple[str, ...] = ()
) -> tuple[list[ins.Load], list[ins.Store]]:
    """The f16 loads and stores of the vectorised loop ``var`` over ``items`` that convert a
    block at a time (a family's ``f16_block``): those that step by one element, and the
    ``turned`` loads (read in order from a turned copy of their tile). Not a masked
    load (it must not read where its mask is false), nor one whose value only goes to f16
    stores (they copy its bits, no conversion); not a store of a value made before the loop
    (its conversion is hoisted with it) or of a loaded f16 value (a copy of bits)."""
    instrs = walk(items)
    made = {d for i in instrs for d in defines(i)}
    unmasked = {
        i.dst for i in instrs if isinstance(i, ins.Load) and i.dtype is DType.F16 and i.mask is None
    }

    def copy(i: ins.Instr) -> bool:
        return isinstance(i, ins.Store) and i.dtype is DType.F16 and i.value in unmasked

    read = {u for i in instrs if not copy(i) for u in uses(i)}
    loads = [
        i
        for i in instrs
        if isinstance(i, ins.Load)
        and i.dst in unmasked
        and i.dst in read
        and (step(i.index, var) == 1 or i.dst in turned)
    ]
    stores = [
        i
        for i in instrs
        if isinstance(i, ins.Store)
        and i.dtype is DType.F16
        and isinstance(i.value, str)
        and i.value in made
        and not copy(i)
        and step(i.index, var) == 1
    ]
    return loads, stores


def chunks(family: Family, threads: int, outer: int, work: int) -> int:
    """How many chunks the runtime cuts a kernel's parallel loop of ``outer`` iterations into,
    for ``threads`` threads and ``work`` element-iterations (a family that splits the range
    itself, ``chunks_per_thread``): that many a thread, at most one an iteration, and none
    with less work than the grain (1: the kernel runs in one call)."""
    return min(threads * family.chunks_per_thread, outer, max(1, work // GRAIN))


def lanes_for(family: Family, kinds: Iterable[str], size: Dim | None) -> int:
    """:meth:`KernelSchedule.lanes_for` for a renderer of ``family``."""
    want = family.lane_kinds
    if want is not None and not any(k in want for k in kinds):
        return 0
    if isinstance(size, int) and size < family.lanes:
        return 0
    return family.lanes


def reduction_lanes(family: Family, inner: Loop, ints: set[str], split: bool = False) -> int:
    """The lanes of a reduction's innermost loop ``inner`` (0: it runs one element at a time):
    the family's (:func:`lanes_for`) for the accumulators the loop updates, where it has no
    loop inside and, for a family that vectorises its loops itself, where the loop over the
    lanes vectorises (its invariants hoisted). ``split``: ``inner`` is a thread's part of a
    split reduction (its range is not known here)."""
    kinds = [i.kind for i in inner.body if isinstance(i, ins.Accumulate)]
    if not kinds or has_loops(inner.body):
        return 0
    if family.vectors and not vectorises(innermost_rest(inner), inner.var, ints):
        return 0
    return lanes_for(family, kinds, None if split else inner.size)


def reduction_f16(
    family: Family, top: Loop, kinds: list[str], ints: set[str], split: bool = False
) -> int:
    """The f16 block of reduction loop ``top`` (its nest) updating accumulators of ``kinds``
    (none: a pass that only reads and stores), where its innermost loop converts f16 a block
    at a time (0: it does not): a row in lanes converts its f16 loads a block of lanes at a
    time; a pass with no accumulator is a vectorised loop in f16 blocks (:func:`f16_blocked`).
    ``split``: a thread's part of a split reduction (its range is not known here)."""
    if not family.f16_block:
        return 0
    loops = chain(top)
    lp = loops[-1]
    rest = innermost_rest(lp)
    if not vectorises(rest, lp.var, ints):
        return 0
    if kinds:
        size = None if split and len(loops) == 1 else lp.size
        if not lanes_for(family, kinds, size) or not f16_blocks(rest, lp.var)[0]:
            return 0
        return family.f16_block
    return family.f16_block if f16_blocked(family, rest, lp.var, lp.size) is not None else 0


def phases_f16(family: Family, items: list[Item], ints: set[str]) -> int:
    """The f16 block of the reduction passes ``items`` (the body of a row nest's pointwise
    loops), where one of them converts f16 a block at a time (:func:`reduction_f16`)."""
    kinds: list[str] = []
    for it in items:
        if isinstance(it, ins.AccInit):
            kinds.append(it.kind)
        elif isinstance(it, Loop):
            if reduction_f16(family, it, kinds, ints):
                return family.f16_block
            kinds = []
        else:
            kinds = []
    return 0


def f16_blocked(
    family: Family, items: list[Item], var: str, size: Dim, turned: tuple[str, ...] = ()
) -> tuple[list[ins.Load], list[ins.Store]] | None:
    """The f16 loads and stores that the vectorised loop ``var`` over ``items`` (its
    invariants hoisted) of a dimension of ``size`` converts a block at a time, in blocks of
    ``family``'s ``f16_block`` (:func:`f16_blocks`); None: the loop runs unblocked (the family
    converts in the loop, the loop converts no f16, or it is shorter than a block)."""
    block = family.f16_block
    if not block:
        return None
    loads, stores = f16_blocks(items, var, turned)
    if not loads and not stores:
        return None
    if isinstance(size, int) and size < block:
        return None
    return loads, stores


def costly_ops(plan: KernelPlan) -> int:
    """The plan's costly ops (exp, sin, division ...): from ``HEAVY_OPS`` a kernel is
    compute-bound."""
    return sum(isinstance(i, ins.Compute) and i.op in COSTLY_OPS for i in plan.instrs)


def tile_side(plan: KernelPlan) -> int:
    """A tile's side: ``TILE_BYTES`` of the narrowest argument, at least ``TILE_MIN``."""
    return max(TILE_MIN, TILE_BYTES // min((x.dtype.itemsize for x in plan.args), default=4))


def tile_pair(plan: KernelPlan, loops: list[Loop]) -> tuple[Loop, Loop] | None:
    """The plan's ``tile`` pair (a transposed read), outer and inner, where the innermost
    loop is one of them and both are at least two tiles long."""
    tile, b = plan.tile, loops[-1]
    if tile is None or b.var not in tile:
        return None
    other = tile[0] if b.var == tile[1] else tile[1]
    a = next((lp for lp in loops[:-1] if lp.var == other), None)
    side = tile_side(plan)
    if a is None or any(isinstance(lp.size, int) and lp.size < 2 * side for lp in (a, b)):
        return None
    return a, b


# the element sizes of a turned load: the turn moves 8 x 8 blocks of 32- or 16-bit lanes
# through registers. x86 has no 16-bit gather: an f16/bf16 x + y.t() at 2048^2 read one element
# at a time took 4.5-6.7x Inductor's time on a 2-core Zen 4. f64 keeps the vectoriser's gathers
# (0.53 of Inductor there)
TURN_ITEMSIZES = (2, 4)
# the side of a tile with turned loads (benchmarks/transpose_tiles.py): x + y.t(), 2896^2 f32, ms
# on 1 / 2 threads (min of 30):
# AMD EPYC Zen 4: gathers 17 / 26, turned 16 x 16 12 / 16, 32 x 32 17 / 25, 64 x 64 10 / 14,
# 128 x 128 14 / -; 16-core Xeon: gathers 7.0 / 4.0, turned 16: 6.8 / 3.3, 32: 6.8 / 3.2,
# 64: 7.2 / 3.2, 128: 7.9 / 3.6; 2-core Xeon (family 6 model 167): gathers 11.5 / 4.2, turned
# 32: 11.0 / 3.8, 64: 11.4 / 4.4, 128: 9.8 / 3.8. No side is the best on all three: the C++
# and LLVM back ends measure the sides once per machine (fir.backends.cpu_tuning); this one is
# the side where no measurement is made (no C++ compiler, the plain families here)
TURNED_SIDE = 64
TURNED_SIDES = (32, 64, 128)  # the sides measured
# 2-byte elements turn in tiles of the same bytes a row, at most TURNED_MAX a side: x + y.t()
# at 2048^2 on a 2-core Zen 4 (medians of 7 x 20 calls, FIR / Inductor): bf16 1.29 -> 0.60,
# f16 1.47 -> 0.81 from 64 a side to 128 (4.5 and 6.7 with the gathers before 2-byte turns)
TURNED_MAX = 128


def turned_side(items: list[Item], turned: tuple[str, ...], side: int = TURNED_SIDE) -> int:
    """The side of a tile whose ``turned`` loads (of ``items``) are read from turned copies:
    ``side`` 4-byte elements, as many bytes a row for narrower ones (at most
    :data:`TURNED_MAX`)."""
    sizes = [i.dtype.itemsize for i in walk(items) if isinstance(i, ins.Load) and i.dst in turned]
    return max(side, min(side * 4 // min(sizes), TURNED_MAX))


def gathers(items: list[Item], var: str, turned: tuple[str, ...] = ()) -> bool:
    """Whether the vectorised loop ``var`` over ``items`` reads a load that is not in order
    along it (a vector gather), the ``turned`` loads (read from turned tiles) aside."""
    for i in walk(items):
        if not isinstance(i, ins.Load) or i.dst in turned:
            continue
        along = next((x for x in getattr(i.index, "free_symbols", ()) if str(x) == var), None)
        if along is not None and stride(i.index, along) not in (0, 1):
            return True
    return False


def turned_loads(family: Family, rest: list[Item], outer: Loop, inner: Loop) -> tuple[str, ...]:
    """The loads of a tiled nest's innermost loop ``inner`` (over ``rest``, its invariants
    hoisted) that read along the tile's ``outer`` loop, which the renderer reads from a
    turned copy of each tile: the 8-lane gathers of such a load cost the tiled kernel 1.8x
    Inductor's time on an AMD EPYC (Zen 4, transpose_add 2896^2 f32, 2 cores), where
    Inductor transposes in registers too. A load qualifies when it is unmasked, of 4- or
    2-byte elements, and its index is affine in the two loops, one element a step along ``outer``
    and a stride along ``inner``, and uses no value of the loop (an indirect index)."""
    if not family.turns_tiles:
        return ()
    defined = {d for i in walk(rest) for d in defines(i)}
    out = []
    for i in walk(rest):
        if (
            not isinstance(i, ins.Load)
            or i.mask is not None
            or i.dtype.itemsize not in TURN_ITEMSIZES
        ):
            continue
        symbols = {str(x): x for x in getattr(i.index, "free_symbols", ())}
        a, b = symbols.get(outer.var), symbols.get(inner.var)
        if symbols.keys() & defined or a is None or b is None or stride(i.index, a) != 1:
            continue
        along = stride(i.index, b)
        if along is None or along in (0, 1):
            continue
        out.append(i.dst)
    return tuple(out)


def column_reduction(plan: KernelPlan, loops: list[Loop], family: Family) -> bool:
    """Whether a nest with reduction phases runs as column blocks: its reductions read memory
    in order along the innermost pointwise loop (``x.sum(0)``), which is long enough, and no
    scratch row is kept (a row is per output, a block has many)."""
    inner = loops[-1]
    reductions = [it for it in inner.body if isinstance(it, Loop)]
    if plan.scratch or (isinstance(inner.size, int) and inner.size < COLUMN_MIN):
        return False
    if not walks_columns(inner.var, reductions):
        return False
    if family.crossing_checks:
        return True
    crossing = column_segments(inner)[2]
    return not any(isinstance(i, ins.CheckIndex) and i.symbol in crossing for i in walk(inner.body))


def keeps_scratch_rows(plan: KernelPlan) -> bool:
    """Whether the planner may keep scratch rows for a kernel (asked with its plan without
    them), for a renderer that runs every column reduction as column blocks, which keep no
    row."""
    for top in loop_tree(plan.instrs):
        if isinstance(top, Loop) and top.parallel and not top.reduction:
            inner = chain(top)[-1]
            reductions = [it for it in inner.body if isinstance(it, Loop)]
            if reductions and walks_columns(inner.var, reductions):
                return False
    return True


# -- one kernel


def _work(plan: KernelPlan) -> Dim:
    return dims_mul((plan.numel, plan.rnumel)) if plan.reduction else plan.numel


def _shared(family: Family, loop: Loop, collapsed: bool) -> bool:
    """Whether the threads share ``loop``: for a family that collapses, as the caller says;
    otherwise the plan's outermost loop only, wherever it runs (the runtime splits its
    range)."""
    return collapsed if family.collapse else loop.parallel


def _rows_nest(plan: KernelPlan, loops: list[Loop], family: Family, ints: set[str]) -> NestSchedule:
    """A nest with reduction phases: every pointwise loop parallel, the reduction loops in
    lanes; or column blocks (:func:`column_reduction`)."""
    inner = loops[-1]
    columns = column_reduction(plan, loops, family)
    out = [ScheduledLoop(lp.var, Kind.SERIAL, _shared(family, lp, True)) for lp in loops]
    if columns:
        out[-1] = ScheduledLoop(inner.var, Kind.COLUMNS, out[-1].parallel, COLUMN_BLOCK)
        return NestSchedule(tuple(out))
    var = next(it.var for it in inner.body if isinstance(it, Loop))
    f16 = phases_f16(family, inner.body, ints)
    return NestSchedule((*out, ScheduledLoop(var, Kind.ROWS, f16=f16)))


def _pointwise_nest(
    plan: KernelPlan, loops: list[Loop], family: Family, ints: set[str]
) -> NestSchedule:
    """A nest with no reduction: a loop walking memory in order innermost, vectorised (in f16
    blocks where it converts f16); the plan's tile pair in square tiles; the outer loops
    parallel."""
    loops = contiguous_last(loops)
    pair = tile_pair(plan, loops)
    inner = loops[-1]
    vector = family.vectors and vectorises(innermost_rest(inner), inner.var, ints)
    # what the innermost loop runs as the renderer writes it: its invariants hoisted, except
    # in a kernel of one loop
    rest = innermost_rest(inner) if len(loops) > 1 else inner.body
    blocked = family.vectors and vectorises(rest, inner.var, ints)
    turned = turned_loads(family, innermost_rest(inner), *pair) if pair is not None else ()
    f16_rule = f16_blocked(family, rest, inner.var, inner.size, turned)
    f16 = family.f16_block if blocked and f16_rule else 0
    if pair is not None:
        side = tile_side(plan)
        if turned:
            side = max(side, turned_side(innermost_rest(inner), turned, family.turned_side()))
        others = [lp for lp in loops if all(lp is not x for x in pair)]
        out = [ScheduledLoop(lp.var, Kind.SERIAL, _shared(family, lp, True)) for lp in others]
        out += [
            ScheduledLoop(
                x.var, Kind.TILED, _shared(family, x, True), side, f16 if x is inner else 0
            )
            for x in pair
        ]
        return NestSchedule(tuple(out), turned)
    kind = Kind.VECTOR if vector else Kind.SERIAL
    out = [ScheduledLoop(lp.var, Kind.SERIAL, _shared(family, lp, True)) for lp in loops[:-1]]
    out.append(ScheduledLoop(inner.var, kind, _shared(family, inner, len(loops) == 1), 0, f16))
    return NestSchedule(tuple(out))


def _whole_reductions(
    plan: KernelPlan, items: list[Item], family: Family, ints: set[str]
) -> list[NestSchedule]:
    """The top-level reduction loops of a kernel with no pointwise loop: each split among the
    threads when it updates accumulators, cannot fail, and the kernel has enough work."""
    out: list[NestSchedule] = []
    pending: list[str] = []  # the kinds of the accumulators initialised right before a loop
    work = _work(plan)
    enough = not (isinstance(work, int) and work < GRAIN)
    for it in items:
        if isinstance(it, Loop):
            fails = any(can_fail(i, ints) for i in walk(it.body))
            split = family.split and bool(pending) and not fails and enough
            kind = Kind.SPLIT if split else Kind.ROWS
            f16 = reduction_f16(family, it, pending, ints, split)
            out.append(NestSchedule((ScheduledLoop(it.var, kind, split, f16=f16),)))
        # the accumulators a loop updates are those initialised right before it
        pending = [*pending, it.kind] if isinstance(it, ins.AccInit) else []
    return out


def schedule(plan: KernelPlan, family: Family) -> KernelSchedule:
    """The schedule of ``plan``'s loops for a renderer of ``family``."""
    items = loop_tree(plan.instrs)
    ints = int_values(plan)
    nests: list[NestSchedule] = []
    if items and isinstance(items[0], Loop) and not items[0].reduction:
        for top in items:
            assert isinstance(top, Loop), "the planner puts everything inside the loops"
            loops = chain(top)
            if has_loops(loops[-1].body):
                nests.append(_rows_nest(plan, loops, family, ints))
            else:
                nests.append(_pointwise_nest(plan, loops, family, ints))
    else:
        nests = _whole_reductions(plan, items, family, ints)
    heavy = costly_ops(plan) >= HEAVY_OPS
    interleave = family.interleave if heavy else 1
    in_order = os.environ.get("FIR_LLVM_REASSOC", "1") == "0"
    # of the family's kinds, those this kernel accumulates floats in
    floats = {i.kind for i in plan.instrs if isinstance(i, ins.AccInit) and i.dtype.is_float}
    reassociates = frozenset() if in_order else family.reassociates & floats
    return KernelSchedule(plan.name, family, _work(plan), tuple(nests), interleave, reassociates)
