"""Kernels (fusion groups) as the IR defines them: iteration spaces, kernel-local buffers and the
units a program runs in.

**Iteration space.** As in Inductor's SIMD scheduling, a loop node's *group* is ``(numel,
rnumel)``: the number of output elements it computes and the number of elements each one
reduces (1 for a pointwise node). A kernel runs one iteration space; its members must agree:

* two pointwise nodes: equal ``numel``;
* two reductions: equal ``(numel, rnumel)``;
* a pointwise node and a reduction ``(n; r)``: the pointwise node runs either over the reduction's
  output (``numel == n``: it is computed once per output element, before or after the reduction
  loop) or over its whole domain (``numel == n * r``, and its loops split into an outer part of
  ``n`` and an inner part of ``r`` elements, so that it runs inside the reduction loop).

A kernel containing a reduction has the reduction's space; a pointwise kernel has ``(numel; 1)``,
printed ``over (numel)``.

**Kernel-local buffers.** A result of a member that only members read and the function does not
return never needs to be written to memory.

**Steps.** The program runs node by node, except that a kernel's members run as one unit: a
*step* is a kernel or a node in no kernel.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .graph import Graph, Kernel, LoopNode, Node, Value
from .types import Dim, dim_str, dims_mul


def dims_equal(a: Dim, b: Dim) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    import sympy

    return sympy.expand(sympy.sympify(a) - sympy.sympify(b)) == 0


@dataclass(frozen=True)
class Space:
    """``(numel, rnumel)`` of a node or kernel; ``rnumel`` is 1 for pointwise ones."""

    numel: Dim
    rnumel: Dim
    reduction: bool

    def __str__(self) -> str:
        if self.reduction:
            return f"({dim_str(self.numel)}; {dim_str(self.rnumel)})"
        return f"({dim_str(self.numel)})"

    def same(self, other: Space) -> bool:
        return (
            self.reduction == other.reduction
            and dims_equal(self.numel, other.numel)
            and dims_equal(self.rnumel, other.rnumel)
        )


def node_space(n: LoopNode) -> Space:
    numel = dims_mul(s for _, s in n.ranges)
    if n.is_reduction:
        return Space(numel, dims_mul(s for _, s in n.reduction_ranges), True)
    return Space(numel, 1, False)


@dataclass
class SpaceInfo:
    """A group's space and what joining it with a reduction must check: the loop sizes of its
    pointwise members (each must split into the reduction's outer and inner parts when it runs
    over the whole reduction domain)."""

    space: Space
    pointwise_loops: list[tuple[Dim, ...]] = field(default_factory=list)


def node_space_info(n: LoopNode) -> SpaceInfo:
    space = node_space(n)
    if n.is_reduction:
        return SpaceInfo(space, [])
    if n.schedule is not None:  # the loops as they run: merged, squeezed, permuted
        return SpaceInfo(space, [tuple(loop.size for loop in n.schedule.loops)])
    return SpaceInfo(space, [tuple(s for _, s in n.ranges)])


def join_spaces(a: SpaceInfo, b: SpaceInfo) -> tuple[SpaceInfo | None, str]:
    """The space of a group made of ``a`` and ``b``, or None and why they cannot share one."""
    sa, sb = a.space, b.space
    loops = _merge_loops(a.pointwise_loops, b.pointwise_loops)
    if sa.reduction and sb.reduction:
        if sa.same(sb):
            return SpaceInfo(sa, loops), ""
        return None, f"reductions over {sa} and {sb} differ"
    if not sa.reduction and not sb.reduction:
        if dims_equal(sa.numel, sb.numel):
            return SpaceInfo(sa, loops), ""
        return None, f"pointwise loops over {sa} and {sb} differ in size"
    red, pw = (a, b) if sa.reduction else (b, a)
    r = red.space
    p = pw.space
    if dims_equal(p.numel, r.numel):
        return SpaceInfo(r, loops), ""
    if dims_equal(p.numel, dims_mul((r.numel, r.rnumel))):
        for sizes in pw.pointwise_loops:
            if not loops_split(sizes, r.numel, r.rnumel):
                shown = ", ".join(dim_str(s) for s in sizes)
                return (
                    None,
                    f"pointwise loops ({shown}) do not split into the reduction's {r} "
                    "(outer part, then reduced part)",
                )
        return SpaceInfo(r, loops), ""
    total = dim_str(dims_mul((r.numel, r.rnumel)))
    return (
        None,
        f"pointwise loops over {p} match neither the reduction's output "
        f"({dim_str(r.numel)}) nor its whole domain ({total}) of {r}",
    )


def _merge_loops(a: list[tuple[Dim, ...]], b: list[tuple[Dim, ...]]) -> list[tuple[Dim, ...]]:
    if not b:
        return a
    if not a:
        return b
    out = list(a)
    seen = set(a)
    for x in b:
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out


def loops_split(sizes: tuple[Dim, ...], numel: Dim, rnumel: Dim) -> bool:
    """Whether loops of ``sizes`` (outermost first) split into an outer part of ``numel``
    elements and an inner part of ``rnumel``; one loop may be cut in two when the sizes are
    known numbers."""
    prefix: Dim = 1
    for k, s in enumerate(sizes):
        if dims_equal(prefix, numel):
            return dims_equal(dims_mul(sizes[k:]), rnumel)
        if (
            isinstance(prefix, int)
            and isinstance(numel, int)
            and isinstance(s, int)
            and prefix > 0
            and numel % prefix == 0
        ):
            outer = numel // prefix
            if 1 < outer < s and s % outer == 0:
                return dims_equal(dims_mul((s // outer, *sizes[k + 1 :])), rnumel)
        prefix = dims_mul((prefix, s))
    return dims_equal(prefix, numel) and dims_equal(rnumel, 1)


def kernel_space(k: Kernel) -> tuple[SpaceInfo | None, Node | None, str]:
    """The space of kernel ``k`` from its members, or (None, a member that does not fit, why).
    It does not depend on the members' order: a kernel with a reduction has the reduction's
    space and every other member must fit it; a pointwise kernel's members have one size."""
    infos: list[tuple[Node, SpaceInfo]] = []
    for n in k.nodes:
        if not isinstance(n, LoopNode):
            return None, n, "only loop nodes run in a kernel"
        infos.append((n, node_space_info(n)))
    if not infos:
        return None, None, "a kernel needs at least one node"
    reductions = [(n, i) for n, i in infos if i.space.reduction]
    base = reductions[0][1] if reductions else infos[0][1]
    info = base
    for n, here in infos:
        if here is base:
            continue
        joined, why = join_spaces(info, here)
        if joined is None:
            return None, n, why
        info = joined
    return info, None, ""


def over_of(info: SpaceInfo) -> tuple[Dim, Dim | None]:
    s = info.space
    return (s.numel, s.rnumel if s.reduction else None)


# ---------------------------------------------------------------------------------------------
# Kernel-local buffers


def readers_of(g: Graph) -> dict[int, list[Node]]:
    """``id(value)`` → the nodes that read it (by load, operand or extern argument)."""
    return g.users()


def local_candidates(
    g: Graph, k: Kernel, readers: dict[int, list[Node]] | None = None
) -> list[Value]:
    """Member results that only members read (or nothing reads) and the function does not
    return: the buffers the kernel never needs to write to memory."""
    if readers is None:
        readers = readers_of(g)
    members = {id(n) for n in k.nodes}
    outputs = {id(v) for v in g.outputs}
    out: list[Value] = []
    for n in k.nodes:
        for r in n.results:
            if id(r) in outputs:
                continue
            if all(id(u) in members for u in readers.get(id(r), [])):
                out.append(r)
    return out


# ---------------------------------------------------------------------------------------------
# Steps


@dataclass
class Step:
    """A unit of execution: a kernel's members, or one node in no kernel."""

    nodes: list[Node]
    kernel: Kernel | None
    first: int  # position of the first node in ``Graph.nodes``

    @property
    def last(self) -> int:
        return self.first + len(self.nodes) - 1

    def local_ids(self) -> set[int]:
        return {id(v) for v in self.kernel.local} if self.kernel is not None else set()


def steps(g: Graph) -> list[Step]:
    """The steps of ``g`` in program order (a kernel's members stand together; the verifier
    checks it)."""
    if not g.kernels:
        return [Step([n], None, k) for k, n in enumerate(g.nodes)]
    kernel_of = g.kernel_of()
    out: list[Step] = []
    for pos, n in enumerate(g.nodes):
        k = kernel_of.get(id(n))
        if k is not None and out and out[-1].kernel is k:
            out[-1].nodes.append(n)
        else:
            out.append(Step([n], k, pos))
    return out


def kernel_count(g: Graph) -> int:
    """Kernels the function launches: its fusion groups and every loop node in none."""
    in_kernel = g.kernel_of()
    single = sum(1 for n in g.nodes if isinstance(n, LoopNode) and id(n) not in in_kernel)
    return len(g.kernels) + single


def describe_over(over: tuple[Dim, Dim | None]) -> str:
    numel, rnumel = over
    if rnumel is None:
        return f"({dim_str(numel)})"
    return f"({dim_str(numel)}; {dim_str(rnumel)})"


def same_over(a: tuple[Dim, Dim | None], b: tuple[Dim, Dim | None]) -> bool:
    if (a[1] is None) != (b[1] is None):
        return False
    return dims_equal(a[0], b[0]) and (a[1] is None or dims_equal(a[1], b[1]))


__all__: list[Any] = [
    "Space",
    "SpaceInfo",
    "Step",
    "describe_over",
    "dims_equal",
    "join_spaces",
    "kernel_count",
    "kernel_space",
    "local_candidates",
    "loops_split",
    "node_space",
    "node_space_info",
    "over_of",
    "same_over",
    "steps",
]
