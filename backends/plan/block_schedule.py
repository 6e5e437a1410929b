"""The block schedule of the block family (the Triton back end), decided once.

A Triton program computes a *block* of a kernel plan's loop nest. How the loops map to blocks
is decided here, from the plan and its sizes (symbolic sizes count as large, but where a
row was traced at a length: ``KernelPlan.hints``), and the renderer
(``backends/triton/render.py``) writes what a :class:`BlockSchedule` says and decides none of
it:

* the **layout** (:class:`Layout`): ``pointwise`` (the pointwise loops flattened into one
  index, ``XBLOCK`` elements a program), ``tiled`` (a ``YBLOCK x XBLOCK`` tile over the plan's
  ``tile`` pair, the inner loop on the fast axis, the other loops on the grid's third axis) or
  ``reduction`` (``XBLOCK`` outputs by ``RBLOCK`` reduced elements);
* the **order** of the pointwise loops in the flat index, outermost first (a pointwise
  kernel's loops in the order its first store walks memory, :func:`memory_order`);
* a reduction's **strategy**: *persistent* (the whole row in one block, straight-line passes
  over registers), *looped* (each pass a loop over the row in blocks of ``RBLOCK``) and
  *columns* (the outputs on the fast axis, where the loads walk memory along them);
* the block sizes and ``num_warps``.

``fir-translate --target plan`` prints one line per kernel (:meth:`BlockSchedule.line`);
the ``# ...`` comment at the head of each generated kernel is :meth:`BlockSchedule.text`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from fir.ir.symbolic import evaluate
from fir.ir.types import Dim, dims_mul

from .instructions import AccInit, Load, Store
from .kernel import KernelPlan
from .schedule import HEAVY_OPS, costly_ops

PERSISTENT_MAX = 8192  # reduced elements a program keeps in registers (the whole row)
# XBLOCK, RBLOCK, warps of a reduction over the outer dimension: x.sum(0) of 8192 x 4096 f32 on
# an H100 took 58 us with 32 x 64 blocks and 16 warps, 136 us with 64 x 64 and 8
# (benchmarks/tune_triton.py)
COLUMN_BLOCKS = (32, 64, 16)
# the same for columns of at most SHORT_COLUMN rows (a split reduction's chunks) where they make
# at least SHORT_COLUMN_PROGRAMS programs: eight rows a step and 4 warps. In GPT-2's training
# step on an H200 its bias gradients' partial sums (16 chunks of 256 rows, 3072 / 2304 / 768
# columns: 1536 / 1152 / 384 programs) took 5.5 / 4.3 / 2.6 us against 12.7 / 9.5 / 4.2 with
# COLUMN_BLOCKS. With fewer programs, four warps that step eight rows at a time leave too few
# loads in flight to hide the memory's latency: T5's norm weight gradients (128 programs of
# 512 rows) took 65 us against 12, GPT-2's layer norm weight and bias gradients (192
# programs, unsplit before) about 50 against 24. Chunks of 512 rows keep the long blocks even
# with many programs: Llama's RMS norm weight gradient (4 tensors of 2048 x 2048 bf16, 256
# programs of 512 rows) took 88 us a layer in the training step in short blocks against about
# 30 in long ones, and 52 against 24 us on inputs from memory (.dbg sweep, L2 flushed, H200);
# in 256-row chunks the short blocks were faster or level in the models
SHORT_COLUMN = 256
SHORT_COLUMN_PROGRAMS = 256
SHORT_COLUMN_BLOCKS = (32, 8, 4)
# elements of a persistent reduction's block (XBLOCK * RBLOCK) where a row is shorter: rows of
# 256 and 512 (BERT's and T5's attention softmax, 64 * 512 rows of 512 f32: 67 us with 2 rows
# and 4 warps, 77 us with 4 rows and 8, on an H200) and 768 (BERT's layer norm, 8.6 against
# 9.0 us) ran fastest at 1024 elements and 4 warps: 8 elements a thread. Fewer warps (16 or
# 32 elements a thread) were faster on inputs in the L2 cache (CUDA-graph replays of one
# kernel: BERT's layer norm 3.2-3.7 us against 4.0) but slower in the models, whose inputs
# come from memory: BERT's layer norms 4.42 against 4.21 us, Llama's RMS norms 5-6% slower
PERSISTENT_BLOCK = 1024
# a persistent reduction with few rows runs at least this many programs where it has the rows
# (about the multiprocessors of an H100: 132)
MIN_PROGRAMS = 128
POINTWISE_BLOCK = 1024
TILE = 64
GRID_LIMIT = 65535  # the grid's second and third axes
LOOPED_RBLOCK = 2048  # a looped row reduction's RBLOCK (one output a program)


class Layout(str, Enum):
    """How a kernel's loops map to a program's block (a ``str``: the value is what the
    generated kernel's comment and a tuning cache entry hold)."""

    POINTWISE = "pointwise"
    TILED = "tiled"
    REDUCTION = "reduction"


@dataclass(frozen=True)
class BlockSchedule:
    """How a plan's loops map to Triton blocks (see the module docstring).

    ``order``: the pointwise loops of the flat index (``xindex``; tiled: the grid's third axis),
    outermost first; empty: the plan's order. Tuning varies the block sizes and warps only
    (:func:`candidates`), never the layout, order, tile or strategy."""

    kind: str  # a Layout's value: "pointwise", "tiled" or "reduction"
    XBLOCK: int
    YBLOCK: int = 1
    RBLOCK: int = 1
    num_warps: int = 4
    persistent: bool = False
    tile: tuple[str, str] | None = None  # tiled: (loop on axis 0, loop on axis 1)
    # reduction: the outputs on the fast axis (1) and the reduced loop on axis 0, where the
    # loads are contiguous along the outputs (``x.sum(0)``)
    columns: bool = False
    order: tuple[str, ...] = ()
    # tiled: every tile on the grid's first axis (x tiles fastest, then y tiles, then the other
    # loops), where a size is symbolic: the second and third axes hold 65,535 programs at most,
    # which sizes only known at the launch could pass
    flat_grid: bool = False

    def text(self) -> str:
        """The blocks and warps (the generated kernel's comment)."""
        blocks = f"XBLOCK={self.XBLOCK}"
        if self.kind == "tiled":
            blocks = f"YBLOCK={self.YBLOCK}, " + blocks + (" flat" if self.flat_grid else "")
        if self.kind == "reduction":
            blocks += f", RBLOCK={self.RBLOCK}" + (" persistent" if self.persistent else " looped")
            blocks += " columns" if self.columns else ""
        return f"{self.kind}: {blocks}, num_warps={self.num_warps}"

    def strategy(self) -> str:
        """A reduction's strategy: ``persistent``, ``looped`` or ``columns``; "" otherwise."""
        if self.kind != "reduction":
            return ""
        return "columns" if self.columns else ("persistent" if self.persistent else "looped")

    def line(self, kernel: str) -> str:
        """One line: ``schedule KERNEL [triton]: BLOCKS; x order LOOPS[; tile A, B]``."""
        parts = [self.text()]
        if self.order:
            parts.append("x order " + ", ".join(self.order))
        if self.tile is not None:
            parts.append(f"tile {self.tile[0]} (y), {self.tile[1]} (x)")
        return f"schedule {kernel} [triton]: " + "; ".join(parts)

    def blocks(self) -> tuple[str, ...]:
        """The block sizes the kernel takes as ``tl.constexpr``, in its parameters' order."""
        if self.kind == "tiled":
            return ("YBLOCK", "XBLOCK")
        if self.kind == "reduction":
            return ("XBLOCK", "RBLOCK")
        return ("XBLOCK",)


def _pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def _pow2_floor(n: int) -> int:
    return 1 if n <= 1 else 1 << (n.bit_length() - 1)


def _static(d: Dim) -> int | None:
    return d if isinstance(d, int) else None


def _hinted(d: Dim, hints: dict[str, int]) -> int | None:
    """``d`` at the sizes its symbols were traced at; None where one has no hint."""
    free = getattr(d, "free_symbols", None)
    if not free or any(str(x) not in hints for x in free):
        return None
    value = d.xreplace({x: hints[str(x)] for x in free})  # type: ignore[union-attr]
    return int(value) if isinstance(value, int) or getattr(value, "is_Integer", False) else None


def block_schedule(plan: KernelPlan) -> BlockSchedule:
    """Every decision about how ``plan``'s loops map to Triton blocks (the sizes' rules)."""
    xloops = [lp for lp in plan.loops if not lp.reduction]
    order = tuple(lp.var.name for lp in xloops)
    numel = _static(plan.numel)
    if plan.reduction:
        rnumel = _static(plan.rnumel)
        columns = walks_columns(plan)
        if rnumel is not None and rnumel <= PERSISTENT_MAX and not columns:
            return persistent_schedule(rnumel, numel, bool(xloops), order)
        warps = 8
        if columns and rnumel is not None and rnumel * COLUMN_BLOCKS[0] < PERSISTENT_BLOCK:
            # a few rows (Llama's backward sums its 4 repeated key heads; a split sum's
            # chunks): a block of all the rows and 8 contiguous outputs a thread, as a
            # pointwise kernel would. 1,048,576 bf16 outputs of 4 rows on an H200: 32 x 4
            # blocks of 16 warps 55 us, 512 outputs of 8 warps 42, 1024 of 8 warps 16, 1024
            # of 4 warps 7.5 (a copy of the input takes 9.2)
            rblock = _pow2(rnumel)
            xblock = 1024 if rblock <= 8 else 512
            if numel is not None:
                xblock = min(xblock, _pow2(numel))
            warps = max(1, xblock // 256)
            # several such sums in one kernel (split sums' finals joined by fuse{small-kernels})
            # load all their rows before the first total: as many more warps, as many elements
            # a thread as one sum has. Four GPT-2 bias finals of 3,072 x 16 in 2 warps used 255
            # registers and spilled (ptxas, sm_90); one alone 67
            # (a power of two, and no more threads than the block has elements)
            sums = sum(isinstance(i, AccInit) for i in plan.instrs)
            if sums > 1:
                most = max(1, _pow2_floor(xblock * rblock // 32))
                warps = min(16, most, _pow2(warps * sums))
            return _reduction(xblock, rblock, warps, order, columns=True)
        traced = _hinted(plan.rnumel, plan.hints) if rnumel is None else None
        if columns:  # outputs on the fast axis: many of them, few rows at a time
            programs = -(-numel // SHORT_COLUMN_BLOCKS[0]) if numel is not None else 0
            short = rnumel is not None and rnumel <= SHORT_COLUMN
            short = short and programs >= SHORT_COLUMN_PROGRAMS
            xblock, rblock, warps = SHORT_COLUMN_BLOCKS if short else COLUMN_BLOCKS
        elif traced is not None and traced <= PERSISTENT_MAX:
            # a row of symbolic length (a dynamic sequence), short where it was traced: blocks
            # shaped as a persistent reduction's at that length, looping where a row is longer.
            # BERT's attention softmax at 96 tokens (traced at 64) took 86 us a layer in
            # blocks of 2,048 (95% masked lanes), 5 us as a static kernel
            rblock = _pow2(traced)
            xblock, warps = max(1, PERSISTENT_BLOCK // rblock), 4
        else:
            xblock, rblock = 1, LOOPED_RBLOCK
        if numel is not None:
            xblock = min(xblock, _pow2(numel))
        if rnumel is not None:
            rblock = min(rblock, _pow2(rnumel))
        return _reduction(xblock, rblock, warps, order, columns=columns)
    tile = _tile(plan)
    if tile is not None:
        return tile
    order = tuple(lp.var.name for lp in memory_order(plan, xloops))
    # a compute-bound pointwise kernel (HEAVY_OPS costly ops an element): one element a thread
    # (deep_chain, 40 sin: 1.28 ms with 256 x 8 warps, 1.72 ms with 1024 x 4)
    if costly_ops(plan) >= HEAVY_OPS and (numel is None or numel >= 256 * 8):
        return BlockSchedule(Layout.POINTWISE.value, 256, num_warps=8, order=order)
    xblock = POINTWISE_BLOCK if numel is None else min(POINTWISE_BLOCK, _pow2(numel))
    warps = max(1, min(4, xblock // 256))
    return BlockSchedule(Layout.POINTWISE.value, xblock, num_warps=warps, order=order)


def persistent_schedule(
    rnumel: int, numel: int | None, has_rows: bool, order: tuple[str, ...]
) -> BlockSchedule:
    """A persistent reduction's blocks for rows of ``rnumel`` (``numel`` rows, None where
    symbolic; ``has_rows``: the kernel has pointwise loops)."""
    rblock = _pow2(rnumel)
    xblock = max(1, PERSISTENT_BLOCK // rblock) if has_rows else 1
    if numel is not None:
        # few rows (a split reduction's chunks): one program each up to MIN_PROGRAMS,
        # rather than a few programs of many rows on a few multiprocessors
        xblock = min(xblock, _pow2(numel), max(1, _pow2_floor(numel // MIN_PROGRAMS)))
    warps = 16 if rblock * xblock >= 8192 else (8 if rblock * xblock >= 2048 else 4)
    return _reduction(xblock, rblock, warps, order, persistent=True)


def persistent_at_launch(
    plan: KernelPlan, chosen: BlockSchedule
) -> Callable[[Sequence[int]], BlockSchedule | None] | None:
    """For a looped row reduction whose row length is a size symbol (a dynamic sequence):
    the persistent schedule a launch at the given sizes (the values of ``plan.sizes``) takes
    where its rows fit one (at most ``PERSISTENT_MAX``), else None; None where the kernel has
    no such choice. A looped kernel passes over a row several times (BERT's softmax: the
    maximum, the sum, the output), reloading it each time, and its blocks are shaped at the
    traced length: BERT's attention softmax at 256 tokens, traced at 96, took 26.8 us a layer
    looped against 13.4 for the static persistent kernel on an H200. One program then has a
    persistent variant for each power of two its launches' rows round up to, each compiled at
    the first launch that needs it (the back end, :class:`~fir.backends.triton.build.TritonKernels`).
    A plan made for the looped kernel renders as a persistent one: its passes still load what
    they read (a row in registers is then read again from the cache, not recomputed)."""
    if not plan.reduction or chosen.persistent or chosen.columns or plan.rnumel is None:
        return None
    if isinstance(plan.rnumel, int):
        return None
    rows = plan.rnumel
    count = plan.numel
    symbols = {str(x): x for x in rows.free_symbols | getattr(count, "free_symbols", set())}
    names = plan.sizes
    has_rows = any(not lp.reduction for lp in plan.loops)
    known: dict[tuple[int, ...], BlockSchedule | None] = {}

    def at(sizes: Sequence[int]) -> BlockSchedule | None:
        key = tuple(sizes)
        if key in known:
            return known[key]
        values = {symbols[n]: v for n, v in zip(names, key) if n in symbols}
        length = evaluate(rows, values)
        schedule = None
        if 0 < length <= PERSISTENT_MAX:
            numel = count if isinstance(count, int) else evaluate(count, values)
            schedule = persistent_schedule(length, numel, has_rows, chosen.order)
        if len(known) < 256:
            known[key] = schedule
        return schedule

    return at


INT32_LIMIT = 2**31  # an index extent from here on needs int64 arithmetic


def index_extents(plan: KernelPlan) -> list[Dim]:
    """How far a kernel's index arithmetic reaches: each buffer's elements and the iteration
    space (its flat index, before the mask, stays within a block of it)."""
    return [a.elements for a in plan.args] + [dims_mul((plan.numel, plan.rnumel))]


def index_width(plan: KernelPlan) -> str:
    """The integer width of a kernel's indices: ``"32"`` where every extent is below 2**31,
    ``"64"`` where one is not, ``"sizes"`` where that depends on the values of its size symbols:
    the kernel then takes ``INDEX64`` as a constant and is compiled for each width it is
    launched at (the launch decides by the sizes, :func:`needs_index64`). A 64-bit division
    or remainder is many more instructions a lane than a 32-bit one: BERT's symbolic program
    at 8 x 256 tokens on an H200 took 82 against 99 us in its scaling kernels, 126 against 133
    in its GELUs, 2.03 against 2.05 ms in all (``benchmarks/dynamic_kernels.py --int64``; its
    looped softmax, alone, ran faster in int64: 24.7 against 27.1 us)."""
    extents = index_extents(plan)
    if any(isinstance(e, int) and e >= INT32_LIMIT for e in extents):
        return "64"
    return "32" if all(isinstance(e, int) for e in extents) else "sizes"


def needs_index64(plan: KernelPlan) -> Callable[[Sequence[int]], bool]:
    """For a kernel whose index width depends on its sizes: whether the sizes of a launch (the
    values of ``plan.sizes``, in order) make one of its extents 2**31 or more. Remembered by
    the sizes: the general launch path asks at every call."""
    extents = [e for e in index_extents(plan) if not isinstance(e, int)]
    symbols = {str(x): x for e in extents for x in e.free_symbols}
    names = plan.sizes
    known: dict[tuple[int, ...], bool] = {}

    def wide(sizes: Sequence[int]) -> bool:
        key = tuple(sizes)
        answer = known.get(key)
        if answer is None:
            values = {symbols[n]: v for n, v in zip(names, key) if n in symbols}
            answer = any(evaluate(e, values) >= INT32_LIMIT for e in extents)
            if len(known) < 256:
                known[key] = answer
        return answer

    return wide


def _reduction(
    xblock: int,
    rblock: int,
    warps: int,
    order: tuple[str, ...],
    persistent: bool = False,
    columns: bool = False,
) -> BlockSchedule:
    return BlockSchedule(
        Layout.REDUCTION.value,
        xblock,
        RBLOCK=rblock,
        num_warps=warps,
        persistent=persistent,
        columns=columns,
        order=order,
    )


def x_loops(plan: KernelPlan, s: BlockSchedule) -> list[Any]:
    """The pointwise loops of ``s``'s flat index in its order (the plan's where ``s`` names
    none: a schedule written by hand); tiled: the loops on the grid's third axis."""
    xloops = [lp for lp in plan.loops if not lp.reduction]
    if s.tile is not None:
        xloops = [lp for lp in xloops if lp.var.name not in s.tile]
    if not s.order:
        return xloops
    by_name = {lp.var.name: lp for lp in xloops}
    return [by_name[v] for v in s.order if v in by_name]


def candidates(plan: KernelPlan) -> list[BlockSchedule]:
    """A few schedules around the chosen one, for tuning (``benchmarks/tune_triton.py``)
    and the ``autotune`` option: block sizes and warps of the same layout."""
    base = block_schedule(plan)
    out = [base]

    def add(c: BlockSchedule) -> None:
        if c not in out:
            out.append(c)

    if base.kind == "pointwise":
        for xb in (256, 512, 1024, 2048, 4096):
            if xb <= max(base.XBLOCK, 256) * 4:
                for w in (2, 4, 8):
                    add(
                        replace(base, XBLOCK=min(xb, _pow2(_static(plan.numel) or xb)), num_warps=w)
                    )
    elif base.kind == "tiled":
        for yb, xb in ((32, 32), (64, 64), (32, 64), (64, 32), (128, 32), (32, 128), (64, 128)):
            for w in (4, 8):
                add(replace(base, YBLOCK=yb, XBLOCK=xb, num_warps=w))
    elif base.persistent:
        for xb in (1, 2, 4, 8, 16, 32):
            if xb * base.RBLOCK <= 16384 and xb <= _pow2(_static(plan.numel) or xb):
                for w in (4, 8, 16):
                    add(replace(base, XBLOCK=xb, num_warps=w))
    else:
        for xb, rb in (
            (1, 1024),
            (1, 2048),
            (1, 4096),
            (2, 1024),
            (8, 256),
            (16, 128),
            (32, 64),
            (32, 128),
            (64, 32),
            (64, 64),
            (64, 128),
            (128, 32),
        ):
            if xb <= _pow2(_static(plan.numel) or xb):
                for w in (4, 8, 16):
                    add(
                        replace(
                            base,
                            XBLOCK=xb,
                            RBLOCK=min(rb, _pow2(_static(plan.rnumel) or rb)),
                            num_warps=w,
                        )
                    )
    return out


def _tile(plan: KernelPlan) -> BlockSchedule | None:
    """The tiled layout, where the plan has a ``tile`` pair both at least two tiles long and
    the grid's second and third axes hold the rest."""
    if plan.tile is None:
        return None
    order = [lp.var.name for lp in plan.loops]
    a, b = sorted(plan.tile, key=order.index)  # b: the inner loop, on the fast axis
    size = {lp.var.name: lp.size for lp in plan.loops}
    # a symbolic size counts as large (it varies from launch to launch; a short one only masks
    # lanes): BERT's key transposed for attention under dynamic=True ([8, s, 768] stored as
    # [8, 768, s], traced at 96 tokens) took 22.8 us a layer at 256 tokens as a pointwise
    # kernel, 3.1 as the static one in 64 x 64 tiles (H200)
    sa, sb = (_static(size[v]) for v in (a, b))
    if (sa is not None and sa < 2 * TILE) or (sb is not None and sb < 2 * TILE):
        return None
    others = [lp for lp in plan.loops if lp.var.name not in (a, b)]
    rest = _static(dims_mul([lp.size for lp in others]))
    flat = rest is None or not isinstance(size[a], int) or not isinstance(size[b], int)
    too_many = rest is not None and sa is not None and max(rest, -(-sa // TILE)) > GRID_LIMIT
    if not flat and too_many:
        return None
    return BlockSchedule(
        Layout.TILED.value,
        TILE,
        YBLOCK=TILE,
        num_warps=4,
        tile=(a, b),
        order=tuple(lp.var.name for lp in others),
        flat_grid=flat,
    )


def memory_order(plan: KernelPlan, loops: list[Any]) -> list[Any]:
    """A pointwise kernel's loops in the order its first store walks memory (the largest stride
    outermost), so that consecutive lanes of a block store, and mostly load, consecutive
    elements: any order is legal for a pointwise kernel, and the plan's may put a strided loop
    innermost (NCHW batch norm's channel loop)."""
    from fir.ir.symbolic import stride

    store = next((i for i in plan.instrs if isinstance(i, Store)), None)
    if store is None or isinstance(store.index, int):
        return loops
    strides = [stride(store.index, lp.var) for lp in loops]
    if not all(isinstance(st, int) for st in strides):
        return loops
    order = sorted(range(len(loops)), key=lambda k: -strides[k])
    return [loops[k] for k in order]


def walks_columns(plan: KernelPlan) -> bool:
    """Whether the loads walk memory along a pointwise loop (``x.sum(0)``): then a block
    holds many outputs of few rows (the rule is :func:`fir.ir.symbolic.walks_columns`, which
    the ``split-reductions`` pass shares)."""
    from fir.ir.symbolic import walks_columns as along_outputs

    loads = [i.index for i in plan.instrs if isinstance(i, Load)]
    xvars = [lp.var for lp in plan.loops if not lp.reduction]
    rvars = [lp.var for lp in plan.loops if lp.reduction]
    return along_outputs(loads, xvars, rvars)


def keeps_rows(plan: KernelPlan) -> bool:
    """Whether a kernel's scratch rows can stay in registers: its reduction is persistent."""
    return block_schedule(plan).persistent


def schedule_lines(g: Any) -> list[str]:
    """One line per kernel of function ``g``, each scheduled from the plan the Triton back end
    renders (scratch rows only in a persistent reduction)."""
    from .program import plan_program

    lines = []
    for k in plan_program(g, scratch_rows=keeps_rows, launch_rows=PERSISTENT_MAX).kernels():
        chosen = block_schedule(k)
        line = chosen.line(k.name)
        if persistent_at_launch(k, chosen) is not None:
            line += f"; persistent at a launch whose rows fit (<= {PERSISTENT_MAX})"
            kept = len(k.at_launch.scratch) if k.at_launch is not None else 0
            if kept:  # what the looped kernel's later passes compute again
                line += f", {kept} computed row{'s' * (kept > 1)} kept in registers"
        lines.append(line)
    return lines
