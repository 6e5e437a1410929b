"""``reorder``: the order each loop node's loops run in, picked from the strides of its accesses
(Inductor's ``pick_loop_order``), with size-1 loops squeezed, contiguous loops merged, and 2-D
tiling hints where accesses disagree on the contiguous loop. See :mod:`fir.passes.fusion.loop_order`
for the rules and docs/passes/reorder.md.

Every loop node gets an ``order (…)`` clause (its schedule); a node whose accesses disagree gets
``tile = ["i0", "i1"]`` and ``tile_reason = "…"`` attributes. In a kernel, the nodes must keep
agreeing on which element each iteration computes (a node reads what another writes at the
element being computed): the new orders are applied only when the kernel stays legal, else its
nodes keep the order they run in now and are only squeezed and merged.
"""

from __future__ import annotations

from typing import Any

from fir.ir.dependencies import NodeDeps
from fir.ir.graph import Graph, Kernel, LoopNode, Module, Node

from ..analysis.deps import canonical_prefix, local_deps
from ..base import Option, Pass, paused_gc
from .loop_order import Plan, plan_loops


class ReorderPass(Pass):
    name = "reorder"
    input_level = "loop"
    summary = (
        "order each loop node's loops by access strides; squeeze, merge; record 2-D tiling hints"
    )
    options = {
        "merge": Option(
            bool, True, "merge neighbouring loops that are contiguous for every access"
        ),
        "tile": Option(
            bool, True, "record a 2-D tiling hint where accesses disagree on the contiguous loop"
        ),
    }

    def apply(self, module: Module) -> Module:
        for g in module.funcs:
            with paused_gc():
                counts = reorder_graph(g, merge=self.merge, tile=self.tile)  # type: ignore[attr-defined]
            for key, value in counts.items():
                self.statistics[key] = self.statistics.get(key, 0) + value
        return module


def reorder_graph(g: Graph, merge: bool = True, tile: bool = True) -> dict[str, int]:
    counts = {"reordered": 0, "merged": 0, "squeezed": 0, "tiled": 0, "kept-for-kernels": 0}
    prefix = canonical_prefix(g)
    kernel_of = g.kernel_of()
    done: set[int] = set()
    # (node, schedule) -> its reads and writes: the kernel check and the refresh of the recorded
    # deps ask for the same ones (nothing changes a body while reorder runs)
    memo: dict[tuple[int, int], tuple[Any, NodeDeps]] = {}
    for n in g.nodes:
        if not isinstance(n, LoopNode):
            continue
        k = kernel_of.get(id(n))
        if k is not None:
            if id(k) not in done:
                done.add(id(k))
                _reorder_kernel(g, k, merge, tile, counts, prefix, memo)
            continue
        _apply(n, plan_loops(n, merge=merge), tile, counts)
    for n in g.nodes:
        if n.deps is not None:
            fresh = _local_deps(n, prefix, memo)
            n.deps.reads, n.deps.writes = fresh.reads, fresh.writes
    return counts


def _local_deps(
    n: Node, prefix: str, memo: dict[tuple[int, int], tuple[Any, NodeDeps]] | None
) -> NodeDeps:
    if memo is None:
        return local_deps(n, prefix)
    schedule = getattr(n, "schedule", None)
    key = (id(n), id(schedule))
    hit = memo.get(key)
    if hit is not None and hit[0] is schedule:  # the memo holds the schedule: no id reuse
        return hit[1]
    d = local_deps(n, prefix)
    memo[key] = (schedule, d)
    return d


def kernel_problem(
    g: Graph,
    k: Kernel,
    prefix: str | None = None,
    memo: dict[tuple[int, int], tuple[Any, NodeDeps]] | None = None,
) -> str | None:
    """What a schedule change can break in a kernel: its nodes' iteration spaces, and every
    read of what an earlier node of the kernel writes being of the element computed at the same
    point (the MemoryDeps, over each node's loops in the order they run, must match). None when
    the kernel is fine."""
    from fir.ir.kernels import kernel_space

    from .fusion_graph import fusable_read

    info, _, why = kernel_space(k)
    if info is None:
        return f"incompatible iteration spaces: {why}"
    if prefix is None:
        prefix = canonical_prefix(g)
    writes: dict[str, list] = {}
    for n in k.nodes:
        d = _local_deps(n, prefix, memo)
        for read in d.reads:
            produced = writes.get(read.buffer)
            if produced is not None and not any(fusable_read(read, w) for w in produced):
                return f"%{n.results[0].name} reads %{read.buffer} at another element"
        for w in d.writes:
            writes.setdefault(w.buffer, []).append(w)
    return None


def _reorder_kernel(
    g: Graph,
    k: Kernel,
    merge: bool,
    tile: bool,
    counts: dict[str, int],
    prefix: str,
    memo: dict[tuple[int, int], tuple[Any, NodeDeps]],
) -> None:
    members = [n for n in k.nodes if isinstance(n, LoopNode)]
    old = {id(n): n.schedule for n in members}
    # the first of these the kernel stays legal under: new orders; the order its nodes run in
    # now, squeezed and merged; that order only squeezed (a merged loop of symbolic size cannot
    # be cut at a reduction's outer/inner boundary, as one of known size can); the schedules
    # the nodes have now
    tries = [(False, merge), (True, merge)] + ([(True, False)] if merge else [])
    plans: dict[int, Plan] | None = None
    for attempt, (keep_order, merge_loops) in enumerate(tries):
        for n in members:
            n.schedule = old[id(n)]
        candidate = {
            id(n): plan_loops(n, keep_order=keep_order, merge=merge_loops) for n in members
        }
        for n in members:
            n.schedule = candidate[id(n)].schedule
        if kernel_problem(g, k, prefix, memo) is None:
            plans = candidate
            break
        if attempt == 0:
            counts["kept-for-kernels"] += 1
    for n in members:
        n.schedule = old[id(n)]
        if plans is not None:
            _apply(n, plans[id(n)], tile, counts)


def _apply(n: LoopNode, plan: Plan, tile: bool, counts: dict[str, int]) -> None:
    before, _ = n.scheduled_vars()
    n.schedule = plan.schedule
    after, _ = n.scheduled_vars()
    kept = [v for v in before if v in set(after)]
    if kept != after:
        counts["reordered"] += 1
    counts["merged"] += sum(
        len(loop.vars) - 1 for loop in plan.schedule.loops + plan.schedule.reduction
    )
    counts["squeezed"] += (
        len(n.ranges)
        + len(n.reduction_ranges)
        - sum(len(loop.vars) for loop in plan.schedule.loops + plan.schedule.reduction)
    )
    n.attrs.pop("tile", None)
    n.attrs.pop("tile_reason", None)
    if tile and plan.tile is not None:
        n.attrs["tile"] = list(plan.tile)
        n.attrs["tile_reason"] = plan.tile_reason
        counts["tiled"] += 1
