"""A scalar-family kernel's loops as they run: the plan's loop tree with its schedule applied.

The schedule (:mod:`.schedule`) decides how each top-level nest runs: in which order, which
pair in square tiles (and which loads from a turned copy of each tile), which loop as column
blocks, which whole-tensor reduction split among the threads, which reduction loop in lanes (its
whole blocks of lanes, then the remainder).
:func:`loop_nest` writes those decisions out as a tree of :class:`Run` nodes, one for every
loop that runs (and a few nodes that say what a tile or a column block needs), so that the
C++ and LLVM renderers walk the same loops, each with one handler per node kind, and neither
rebuilds a nest's shape from the schedule itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Any

from fir.ir.symbolic import stride
from fir.ir.types import Dim

from .instructions import HANDLER, AccInit, Accumulate, Expr, InstrWalker, Load
from .kernel import KernelPlan
from .loop_tree import Item, Loop, chain, column_segments, loop_tree, walk
from .schedule import (
    COLUMN_BLOCK,
    Family,
    KernelSchedule,
    Kind,
    NestSchedule,
    int_values,
    reduction_lanes,
)


class Span(Enum):
    """The range a :class:`Run` walks of its loop's dimension ``[0, size)``."""

    WHOLE = "whole"  # all of it (where the runtime splits the loop among calls: a call's part)
    TILES = "tiles"  # all of it by the tile's side: the first element of each tile
    TILE = "tile"  # one tile's elements: [its first, min(first + side, size))
    BLOCKS = "blocks"  # all of it by ``COLUMN_BLOCK``: the first output of each column block
    SPLIT = "split"  # a whole-tensor reduction loop, one range per thread
    LANES = "lanes"  # whole blocks of lanes, [0, size - block + 1) by ``block``: each one's first
    REST = "rest"  # the remainder of a loop in lanes: from where its whole blocks stopped


@dataclass
class Run:
    """A loop as it runs: of the plan's ``loop`` (its variable, size, and whether the runtime
    splits it among calls), the ``span`` it walks; ``block``: the tile's side (the tiles step
    by it, a tile's elements end at it) or the column block (the blocks step by it);
    ``threads``: the loops, from this one inward, that the threads share, collapsed into one
    (0: no parallel loop starts here); ``hoists``: an innermost loop runs what it computes the same in every iteration once
    before it (not the only loop of a kernel: the schedule's rule, :mod:`.schedule`);
    ``lanes``: a reduction's innermost loop runs that many elements at a time, one state of
    each accumulator per lane, merged into the scalar state after its ``body``: a
    :data:`Span.LANES` run of whole blocks, then a :data:`Span.REST` run of the remainder on
    the scalar state (0: one element at a time)."""

    loop: Loop
    span: Span
    body: list[Node]
    block: int = 0
    threads: int = 0
    hoists: bool = True
    lanes: int = 0

    @property
    def var(self) -> str:
        return self.loop.var

    @property
    def size(self) -> Dim:
        return self.loop.size

    @property
    def items(self) -> list[Item] | None:
        """The body where it is straight-line code (the plan's instructions, no run or other
        node: an innermost loop); None otherwise."""
        items = [it for it in self.body if isinstance(it, Item)]
        return items if len(items) == len(self.body) else None

    @property
    def phases(self) -> bool:
        """Whether this is a row nest's innermost pointwise loop: reduction loops inside."""
        return not self.loop.reduction and any(
            isinstance(it, Run) and it.loop.reduction for it in self.body
        )


@dataclass(frozen=True)
class TurnedLoad:
    """A load of a tiled nest read from a turned copy of the tile: ``along``, its stride along
    the tile's inner loop (one element along the outer)."""

    load: Load
    along: Expr


@dataclass(frozen=True)
class Turn:
    """Inside the tiles loops of ``outer`` and ``inner``: copy the tile (``side`` a side,
    smaller at the edges) of each turned load, transposed, so that the tile's loops read it in
    order along ``inner``."""

    outer: Loop
    inner: Loop
    side: int
    loads: tuple[TurnedLoad, ...]


@dataclass
class Columns:
    """The body of a column block of pointwise loop ``loop`` (``COLUMN_BLOCK`` outputs side by
    side): its ``segments``, each run over the block's outputs by a :class:`Lanes` (a
    reduction segment inside its reduction loops), with per-output arrays for the
    accumulators ``accs`` and for the values ``crossing`` from one segment to another."""

    loop: Loop
    accs: list[AccInit]
    crossing: set[str]
    segments: list[Node]


@dataclass
class Lanes:
    """``for l < n``: the outputs of a column block of ``loop`` (``var = block + l``), running
    ``items``; ``per_lane``: for a reduction segment, the values made per output (what else is
    the same for every output runs once before the loop); None: straight-line code. Or, where
    ``lanes``, the ``lanes`` elements of a block of a reduction loop in lanes, each updating
    its lane's state; ``counted``: the accumulators whose update reads how many elements every
    lane has seen (Welford's count), the same in every lane, once per block."""

    loop: Loop
    items: list[Item]
    per_lane: set[str] | None = None
    lanes: int = 0
    counted: tuple[str, ...] = ()


Node = Item | Run | Turn | Columns | Lanes

# the handler a renderer's walk calls for a node that is no instruction
NODE_HANDLER = {
    Run: "on_run",
    Turn: "on_turn",
    Columns: "on_columns",
    Lanes: "on_lanes",
}


class NestWalker(InstrWalker):
    """The walk of a renderer of :func:`loop_nest`'s tree: ``visit`` calls ``on_<kind>`` for
    an instruction (:class:`~.instructions.InstrWalker`) or a node (``NODE_HANDLER``: a run,
    a turned tile, a column block, its lanes)."""

    def visit(self, i: Any) -> Any:
        return getattr(self, NODE_HANDLER.get(type(i)) or HANDLER[type(i)])(i)

    def visit_all(self, nodes: Iterable[Any]) -> None:
        for node in nodes:
            self.visit(node)


def loop_nest(plan: KernelPlan, sched: KernelSchedule) -> list[Node]:
    """``plan``'s loops as ``sched`` runs them: each top-level pointwise nest in :class:`Run`
    nodes, and every reduction loop, a whole-tensor one split among the threads in a
    :data:`Span.SPLIT` run."""
    items = loop_tree(plan.instrs)
    ints = int_values(plan)
    if not (items and isinstance(items[0], Loop) and not items[0].reduction):
        splits = (n.has(Kind.SPLIT) for n in sched.nests)
        return _phases(items, sched.family, ints, splits)
    nests = iter(sched.nests)
    tops: list[Node] = []
    for top in items:
        assert isinstance(top, Loop), "the planner puts everything inside the loops"
        tops.append(_nest(chain(top), next(nests), sched.family, ints))
    return tops


def _phases(
    items: list[Item], family: Family, ints: set[str], splits: Iterator[bool] | None = None
) -> list[Node]:
    """Once-per-output work and reduction loops (a row nest's body, or a kernel's, whose
    reduction loops may be split: ``splits``, one for each): each reduction loop as runs, the
    innermost in the family's lanes where it takes them (:func:`~.schedule.reduction_lanes`)."""
    out: list[Node] = []
    for it in items:
        if not isinstance(it, Loop):
            out.append(it)
            continue
        split = next(splits) if splits is not None else False
        loops = chain(it)
        inner = loops[-1]
        lanes = reduction_lanes(family, inner, ints, split and len(loops) == 1)
        body = _lanes(inner, lanes) if lanes else _phases(inner.body, family, ints)
        node = Run(inner, Span.WHOLE, body, lanes=lanes)
        for lp in reversed(loops[:-1]):
            node = Run(lp, Span.WHOLE, [node])
        node.span = Span.SPLIT if split else Span.WHOLE
        out.append(node)
    return out


def _lanes(inner: Loop, lanes: int) -> list[Node]:
    """The body of reduction loop ``inner`` in ``lanes``: its whole blocks of lanes, then the
    remainder one element at a time."""
    accs = (i for i in inner.body if isinstance(i, Accumulate) and i.kind == "welford")
    counted = tuple(sorted({i.acc for i in accs}))
    blocks = Run(inner, Span.LANES, [Lanes(inner, inner.body, None, lanes, counted)], lanes)
    return [blocks, Run(inner, Span.REST, list(inner.body))]


def _nest(loops: list[Loop], nest: NestSchedule, family: Family, ints: set[str]) -> Run:
    """One top-level pointwise nest in the schedule's order (the body moves with the innermost
    loop: NCHW batch norm over channels stores contiguously innermost); its tile pair (a
    transposed read) in square tiles, the inner one innermost, so that both the strided side
    and the stores stay in cache; or its innermost loop in column blocks."""
    by_var = {lp.var: lp for lp in loops}
    order = [by_var[v] for v in nest.order()]
    runs = [Run(lp, Span.WHOLE, []) for lp in order]
    tile = nest.tile()
    if nest.has(Kind.COLUMNS):
        runs[-1] = Run(order[-1], Span.BLOCKS, [], COLUMN_BLOCK)
        body: list[Node] = [_columns(loops[-1])]
    else:
        body = _phases(loops[-1].body, family, ints)
    if tile is not None:
        a, b, side = by_var[tile[0]], by_var[tile[1]], tile[2]
        runs = [r for r in runs if r.loop not in (a, b)]
        runs += [Run(a, Span.TILES, [], side), Run(b, Span.TILES, [], side)]
        loads = tuple(
            TurnedLoad(i, stride(i.index, next(x for x in i.index.free_symbols if str(x) == b.var)))
            for i in walk(loops[-1].body)
            if isinstance(i, Load) and i.dst in nest.turned
        )
        inner = Run(a, Span.TILE, [Run(b, Span.TILE, body, side)], side)
        body = [Turn(a, b, side, loads), inner] if loads else [inner]
    runs[0].threads = nest.parallel()
    # a kernel of one loop hoists nothing (:func:`~.schedule._pointwise_nest`)
    runs[0].hoists = len(loops) > 1
    for outer, inner_run in zip(runs, runs[1:]):
        outer.body = [inner_run]
    runs[-1].body = body
    return runs[0]


def _columns(inner: Loop) -> Columns:
    """The body of ``inner``'s column blocks: each segment over the block's outputs."""
    segments, made, crossing = column_segments(inner)
    nodes: list[Node] = []
    for seg in segments:
        if not isinstance(seg[0], Loop):
            nodes.append(Lanes(inner, seg))
            continue
        loops = chain(seg[0])
        node: Node = Lanes(inner, loops[-1].body, made)
        for lp in reversed(loops):
            node = Run(lp, Span.WHOLE, [node])
        nodes.append(node)
    accs = [i for i in walk(inner.body) if isinstance(i, AccInit)]
    return Columns(inner, accs, crossing, nodes)
