"""The graph ``fuse`` works on: one :class:`FusionNode` per kernel-to-be, and the bookkeeping
that keeps every legality question cheap on large graphs.

* Each node of the function starts as its own fusion node (a hand-written kernel starts as one
  fusion node). Fusing two fusion nodes makes one whose members run in original program order.
* *Original ancestors* are bit sets over node positions (Python ints), computed once: "is ``a``
  an ancestor of ``b``" is one AND however deep the graph is.
* The *quotient graph* (fusion nodes, with an edge where a member of one feeds a member of the
  other) is kept with a topological numbering that a fusion repairs locally (Pearce and Kelly's
  dynamic topological order): a search for a path between two fusion nodes only visits nodes
  numbered between them, so the cycle check costs what lies between the pair, not the graph.
* Reads and writes are :class:`~fir.ir.dependencies.MemoryDep` / :class:`~fir.ir.dependencies.StarDep` per
  buffer; a fusion node keeps the reads of buffers its members do not write (Inductor's unmet
  dependencies) and all its writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from fir.ir.dependencies import Dep, MemoryDep
from fir.ir.externs import effect_of
from fir.ir.graph import AliasNode, ExternNode, Graph, LoopNode, Node
from fir.ir.kernels import SpaceInfo, join_spaces, node_space_info
from fir.ir.memory_plan import device_of
from fir.ir.types import Dim

from ..analysis.deps import (
    ancestor_masks,
    canonical_prefix,
    local_deps,
    mutation_deps,
    predecessors,
)

# Symbolic sizes have no value at compile time; scores and the peak-memory estimate compare
# byte counts with every size symbol set to this hint (the printed figures stay exact).
SIZE_HINT = 128


@lru_cache(maxsize=8192)
def _hint_expr(d: Any) -> int:
    try:
        value = d.subs({s: SIZE_HINT for s in d.free_symbols})
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0


def hint(d: Dim) -> int:
    return d if isinstance(d, int) else _hint_expr(d)


@dataclass
class Traffic:
    """Bytes of one access as printed (``exact``, maybe symbolic) and as compared (``hint``)."""

    exact: Dim
    hint: int

    @staticmethod
    def of(d: Dim) -> Traffic:
        return Traffic(d, hint(d))


@dataclass(eq=False)
class FusionNode:
    """A kernel-to-be (Inductor's ``FusedSchedulerNode``, or a single scheduler node)."""

    id: int  # position of the first node it was made from: the union-find representative
    members: list[int]  # node positions, in the order they run (original program order)
    mask: int  # bit set of ``members``
    kind: str  # "loop", "extern", "alias" (a view: nothing to run) or "tensor" (not lowered)
    space: SpaceInfo | None  # loop nodes only
    device: str
    # reads of buffers no member writes: buffer -> [(dependency, reading node position)]
    reads: dict[str, list[tuple[Dep, int]]]
    read_bytes: dict[str, Traffic]  # per buffer, the largest of its reads
    writes: dict[str, list[tuple[Dep, int]]]
    write_bytes: dict[str, Traffic]
    ext_preds: set[int]  # positions of nodes outside it that its members depend on
    pred_mask: int  # the same as a bit set
    anc: int  # original ancestors of its members, minus the members
    min_order: int
    max_order: int
    nofuse: bool = False  # a member says ``nofuse = true``
    forbid: int = 0  # nodes a member's ``nofuse = [...]`` names
    kernel: str | None = None  # the hand-written kernel it grew from
    kernel_attrs: dict[str, Any] = field(default_factory=dict)
    version: int = 0  # changes when the node grows (rejections are remembered per version)

    @property
    def is_reduction(self) -> bool:
        return self.space is not None and self.space.space.reduction

    def used_buffers(self) -> list[str]:
        return list(self.reads) + [b for b in self.writes if b not in self.reads]


class FusionGraph:
    """The state of one ``fuse`` run over one function."""

    def __init__(self, g: Graph) -> None:
        self.g = g
        nodes = g.nodes
        self.nodes = nodes
        self.names = [n.results[0].name for n in nodes]
        self.pos_of = {id(n): k for k, n in enumerate(nodes)}
        prefix = canonical_prefix(g)
        self.prefix = prefix
        self.deps = [local_deps(n, prefix) for n in nodes]
        weak = mutation_deps(g)
        self.preds = predecessors(g, weak)
        self.anc = ancestor_masks(self.preds)
        self.producer: dict[str, int] = {}
        for k, n in enumerate(nodes):
            for r in n.results:
                self.producer[r.name] = k
        self.readers: dict[str, list[int]] = {}  # buffer -> positions of the nodes that read it
        for k, d in enumerate(self.deps):
            for b in dict.fromkeys(dep.buffer for dep in d.reads):
                self.readers.setdefault(b, []).append(k)
        self.outputs = {v.name for v in g.outputs}
        # the number of collective calls before each node: nodes of different regions lie on
        # different sides of a collective and never fuse (the ``collective`` rule)
        self.region: list[int] = []
        collectives = 0
        for n in nodes:
            self.region.append(collectives)
            collectives += effect_of(n) == "collective"
        self.parent = list(range(len(nodes)))
        self.fnodes: dict[int, FusionNode] = {}
        for k, n in enumerate(nodes):
            self.fnodes[k] = self._single(k, n)
        # quotient graph, numbered topologically (program order to begin with)
        self.succ: dict[int, set[int]] = {k: set() for k in range(len(nodes))}
        self.pred: dict[int, set[int]] = {k: set() for k in range(len(nodes))}
        for k, ps in enumerate(self.preds):
            for p in ps:
                self.succ[p].add(k)
                self.pred[k].add(p)
        self.tpos: dict[int, int] = {k: k for k in range(len(nodes))}
        self.versions = 0
        self._anc_bytes: dict[int, bytes] = {}
        self.reordered: set[int] = set()  # nodes whose loop order the pass changed

    # -- nodes

    def _single(self, k: int, n: Node) -> FusionNode:
        d = self.deps[k]
        reads: dict[str, list[tuple[Dep, int]]] = {}
        read_bytes: dict[str, Traffic] = {}
        own = {r.name for r in n.results}
        for dep in d.reads:
            if dep.buffer in own:
                continue
            reads.setdefault(dep.buffer, []).append((dep, k))
            t = Traffic.of(dep.nbytes)
            old = read_bytes.get(dep.buffer)
            if old is None or t.hint > old.hint:
                read_bytes[dep.buffer] = t
        writes: dict[str, list[tuple[Dep, int]]] = {}
        write_bytes: dict[str, Traffic] = {}
        for dep in d.writes:
            writes.setdefault(dep.buffer, []).append((dep, k))
            write_bytes[dep.buffer] = Traffic.of(dep.nbytes)
        if isinstance(n, LoopNode):
            space = node_space_info(n)
            kind = "loop"
        else:
            space = None
            kind = (
                "extern"
                if isinstance(n, ExternNode)
                else "alias"
                if isinstance(n, AliasNode)
                else "tensor"
            )
        nofuse = n.attrs.get("nofuse")
        forbid = 0
        if isinstance(nofuse, list):
            for v in nofuse:
                p = self.producer.get(getattr(v, "name", ""))
                if p is not None:
                    forbid |= 1 << p
        return FusionNode(
            id=k,
            members=[k],
            mask=1 << k,
            kind=kind,
            space=space,
            device=device_of(self.g, n),
            reads=reads,
            read_bytes=read_bytes,
            writes=writes,
            write_bytes=write_bytes,
            ext_preds=set(self.preds[k]),
            pred_mask=sum(1 << p for p in set(self.preds[k])),
            anc=self.anc[k],
            min_order=k,
            max_order=k,
            nofuse=nofuse is True,
            forbid=forbid,
        )

    def is_ancestor(self, k: int, of: int) -> bool:
        """Whether node ``k`` is an original ancestor of node ``of``: one byte read (an AND of
        two Python ints costs time in proportion to the graph's size, and candidate search
        asks this for every pair)."""
        if k >= of:
            return False
        table = self._anc_bytes.get(of)
        if table is None:
            mask = self.anc[of]
            table = self._anc_bytes[of] = mask.to_bytes((mask.bit_length() + 7) // 8, "little")
        byte = k >> 3
        return byte < len(table) and (table[byte] >> (k & 7)) & 1 == 1

    def _next_version(self) -> int:
        self.versions += 1
        return self.versions

    def refresh(self, k: int) -> FusionNode:
        """Recompute node ``k``'s dependencies after its loop order changed (it must be a fusion
        node of its own); the fusion node is replaced by a new version."""
        f = self.fnodes[k]
        assert f.members == [k], "only a fusion node of one node is reordered"
        self.deps[k] = local_deps(self.nodes[k], self.prefix)
        fresh = self._single(k, self.nodes[k])
        fresh.version = self._next_version()
        fresh.kernel, fresh.kernel_attrs = f.kernel, f.kernel_attrs
        self.fnodes[k] = fresh
        return fresh

    def find(self, k: int) -> int:
        root = k
        parent = self.parent
        while parent[root] != root:
            root = parent[root]
        while parent[k] != root:
            parent[k], k = root, parent[k]
        return root

    def node_of(self, k: int) -> FusionNode:
        return self.fnodes[self.find(k)]

    def label(self, f: FusionNode) -> str:
        """``%a`` for one node, ``{%a, %b}`` for a few, ``{%a, %b, … 7 more}`` for many."""
        names = ["%" + self.names[m] for m in f.members]
        if len(names) == 1:
            return names[0]
        if len(names) <= 3:
            return "{" + ", ".join(names) + "}"
        return "{" + ", ".join(names[:2]) + f", … {len(names) - 2} more" + "}"

    def member_names(self, f: FusionNode) -> list[str]:
        return [self.names[m] for m in f.members]

    # -- what a pair shares

    def is_local_after(self, buf: str, *ids: int) -> bool:
        """Whether ``buf`` would never need memory in one kernel of the fusion nodes ``ids``:
        only they read it (or nothing does) and it is not returned."""
        if buf in self.outputs:
            return False
        find = self.find
        return all(find(r) in ids for r in self.readers.get(buf, ()))

    def reaches(self, x: FusionNode, y: FusionNode) -> bool:
        """Whether a node of ``x`` is an original ancestor of a node of ``y``."""
        if len(x.members) == 1 and len(y.members) == 1:
            return self.is_ancestor(x.id, y.id)
        return bool(x.mask & y.anc)

    def saved_bytes(self, a: FusionNode, b: FusionNode) -> tuple[Dim, int, bool]:
        """Memory traffic one kernel of ``a`` and ``b`` saves over two kernels (exact, hint),
        and whether they share any buffer at all."""
        exact: Dim = 0
        total = 0
        shared = False
        small, big = (
            (a, b) if len(a.reads) + len(a.writes) <= len(b.reads) + len(b.writes) else (b, a)
        )
        ids = (a.id, b.id)
        for buf in small.used_buffers():
            if buf not in big.reads and buf not in big.writes:
                continue
            shared = True
            for producer, consumer in ((small, big), (big, small)):
                w = producer.write_bytes.get(buf)
                r = consumer.read_bytes.get(buf)
                if w is not None and r is not None:
                    exact, total = _plus(exact, total, r)  # read from registers, not memory
                    if self.is_local_after(buf, *ids):
                        exact, total = _plus(exact, total, w)  # never written at all
                    break
            else:
                ra, rb = small.read_bytes.get(buf), big.read_bytes.get(buf)
                shares = _same_access(small.reads.get(buf, []), big.reads.get(buf, []))
                if ra is not None and rb is not None and shares:
                    exact, total = _plus(exact, total, ra if ra.hint <= rb.hint else rb)
        return exact, total, shared

    def traffic(self, f: FusionNode) -> tuple[Dim, int]:
        """Bytes a kernel of ``f`` moves: each buffer it reads once, and the writes that are not
        local."""
        exact: Dim = 0
        total = 0
        for t in f.read_bytes.values():
            exact, total = _plus(exact, total, t)
        for buf, t in f.write_bytes.items():
            if not self.is_local_after(buf, f.id):
                exact, total = _plus(exact, total, t)
        return exact, total

    # -- merging

    def merge(self, a: FusionNode, b: FusionNode, space: SpaceInfo | None) -> FusionNode:
        """Make one fusion node of ``a`` and ``b`` (the quotient graph's order must already
        admit it: see :meth:`make_room`)."""
        big, small = (a, b) if len(a.members) >= len(b.members) else (b, a)
        mask = a.mask | b.mask
        reads, read_bytes = big.reads, big.read_bytes
        for buf in small.writes:
            reads.pop(buf, None)
            read_bytes.pop(buf, None)
        for buf, lst in small.reads.items():
            if buf in big.writes:
                continue
            if buf in reads:
                reads[buf] = reads[buf] + lst
                if small.read_bytes[buf].hint > read_bytes[buf].hint:
                    read_bytes[buf] = small.read_bytes[buf]
            else:
                reads[buf] = lst
                read_bytes[buf] = small.read_bytes[buf]
        writes, write_bytes = big.writes, big.write_bytes
        for buf, lst in small.writes.items():
            writes[buf] = writes.get(buf, []) + lst
            write_bytes[buf] = small.write_bytes[buf]
        ext = {p for p in big.ext_preds | small.ext_preds if not (mask >> p) & 1}
        members = sorted(a.members + b.members)
        keep, gone = (a, b) if a.id < b.id else (b, a)
        merged = FusionNode(
            id=keep.id,
            members=members,
            mask=mask,
            kind="loop",
            space=space,
            device=a.device,
            reads=reads,
            read_bytes=read_bytes,
            writes=writes,
            write_bytes=write_bytes,
            ext_preds=ext,
            pred_mask=(a.pred_mask | b.pred_mask) & ~mask,
            anc=(a.anc | b.anc) & ~mask,
            min_order=min(a.min_order, b.min_order),
            max_order=max(a.max_order, b.max_order),
            nofuse=a.nofuse or b.nofuse,
            forbid=a.forbid | b.forbid,
            kernel=a.kernel or b.kernel,
            kernel_attrs=a.kernel_attrs or b.kernel_attrs,
            version=self._next_version(),
        )
        self.parent[gone.id] = keep.id
        del self.fnodes[gone.id]
        self.fnodes[keep.id] = merged
        # quotient graph: the merged node takes both nodes' edges
        succ, pred = self.succ, self.pred
        for s in succ.pop(gone.id):
            pred[s].discard(gone.id)
            if s != keep.id:
                pred[s].add(keep.id)
                succ[keep.id].add(s)
        for p in pred.pop(gone.id):
            succ[p].discard(gone.id)
            if p != keep.id:
                succ[p].add(keep.id)
                pred[keep.id].add(p)
        succ[keep.id].discard(gone.id)
        pred[keep.id].discard(gone.id)
        del self.tpos[gone.id]
        return merged

    # -- paths in the quotient graph

    def path_through(self, a: FusionNode, b: FusionNode) -> tuple[int | None, set[int]]:
        """A fusion node on a path between ``a`` and ``b`` other than a direct edge (fusing them
        would make a cycle), or None and the descendants of the earlier of the two that are
        numbered before the later one."""
        tpos, succ = self.tpos, self.succ
        u, v = (a.id, b.id) if tpos[a.id] < tpos[b.id] else (b.id, a.id)
        limit = tpos[v]
        seen: set[int] = set()
        stack = [s for s in succ[u] if s != v and tpos[s] < limit]
        while stack:
            x = stack.pop()
            if x in seen:
                continue
            seen.add(x)
            for y in succ[x]:
                if y == v:
                    return x, seen
                if tpos[y] < limit and y not in seen:
                    stack.append(y)
        return None, seen

    def make_room(self, a: FusionNode, b: FusionNode, forward: set[int]) -> None:
        """Renumber the quotient graph so that ``a`` and ``b`` are adjacent: the ancestors of the
        later one numbered between them move before, the descendants of the earlier one (found
        by :meth:`path_through`) after, each keeping its order (Pearce and Kelly)."""
        tpos, pred = self.tpos, self.pred
        u, v = (a.id, b.id) if tpos[a.id] < tpos[b.id] else (b.id, a.id)
        low = tpos[u]
        backward: set[int] = set()
        stack = [p for p in pred[v] if p != u and tpos[p] > low]
        while stack:
            x = stack.pop()
            if x in backward:
                continue
            backward.add(x)
            stack.extend(p for p in pred[x] if tpos[p] > low and p not in backward)
        if not forward and not backward:
            return
        sequence = sorted(backward, key=tpos.__getitem__) + [v, u]
        sequence += sorted(forward, key=tpos.__getitem__)
        slots = sorted(tpos[x] for x in sequence)
        for x, slot in zip(sequence, slots):
            tpos[x] = slot

    def topological_units(self) -> list[FusionNode]:
        """The fusion nodes in the quotient graph's topological numbering."""
        return sorted(self.fnodes.values(), key=lambda f: self.tpos[f.id])


def _plus(exact: Dim, total: int, t: Traffic) -> tuple[Dim, int]:
    if isinstance(exact, int) and isinstance(t.exact, int):
        return exact + t.exact, total + t.hint
    from fir.ir.symbolic import to_dim

    return to_dim(exact + t.exact), total + t.hint


def _same_access(xs: list[tuple[Dep, int]], ys: list[tuple[Dep, int]]) -> bool:
    """Whether two nodes read a buffer at the same element at the same point of their loops
    (one kernel then loads it once): a matching pair of memory dependencies. Reads at other
    elements save nothing: Llama's backward fused the weight gradient of an RMS norm (a sum
    over rows, reading a [2048, 2048] gradient down its columns) with the norm's own row sums
    (along its rows) for the 16 MB both read, and ran the rows strided, 50 us against 14.
    A dependency that is not a plain memory access (indirect, whole-buffer) counts as shared."""
    for d, _ in xs:
        for e, _ in ys:
            if not isinstance(d, MemoryDep) or not isinstance(e, MemoryDep):
                return True
            n = min(len(d.sizes), len(e.sizes))
            if d.index == e.index and d.sizes[:n] == e.sizes[:n]:
                return True
    return False


def fusable_read(read: Dep, write: Dep) -> bool:
    """A read can take its value from a write in the same kernel when both are memory
    dependencies at the same index and the read runs over the write's loops (plus, maybe,
    inner ones the value does not depend on: a broadcast after a reduction)."""
    if not isinstance(read, MemoryDep) or not isinstance(write, MemoryDep):
        return False
    n = len(write.ranges)
    same_loops = len(read.ranges) >= n and read.sizes[:n] == write.sizes
    if same_loops:  # loops split alike: merging them would leave the indices as they differ
        return read.index == write.index
    # the same elements in the same order over loops split differently: an embedding's rows
    # written over (tokens, hidden) and read by a norm over (batch, sequence | hidden)
    r_index, r_sizes = merged_access(read.index, read.ranges)
    w_index, w_sizes = merged_access(write.index, write.ranges)
    n = len(w_sizes)
    return r_index == w_index and len(r_sizes) >= n and r_sizes[:n] == w_sizes


@lru_cache(maxsize=65536)
def merged_access(index: Any, ranges: tuple[tuple[Any, Dim], ...]) -> tuple[Any, tuple[Dim, ...]]:
    """``index`` over ``ranges`` with each pair of neighbouring loops merged where the access
    runs through them as through one loop (the outer loop's coefficient is the inner one's
    times the inner size: every point then touches what the merged loop's point does, in the
    same order) and loops of one iteration dropped, the loops renamed to the first variables of
    ``ranges`` by position: equal for two accesses that visit the same elements in the same
    order. Only affine uses merge."""
    import sympy

    if isinstance(index, int) or len(ranges) < 2:
        return index, tuple(s for _, s in ranges)
    # a loop of one iteration is no loop (a kept dimension of a reduction)
    variables = [v for v, s in ranges if s != 1]
    sizes = [s for _, s in ranges if s != 1]
    expr = sympy.expand(index.xreplace({v: 0 for v, s in ranges if s == 1}))
    k = len(variables) - 1
    while k > 0:
        outer, inner = variables[k - 1], variables[k]
        c_in, c_out = expr.diff(inner), expr.diff(outer)
        loop_free = not (c_in.free_symbols | c_out.free_symbols) & set(variables)
        rest = expr - c_in * inner - c_out * outer
        if (
            loop_free
            and not {inner, outer} & sympy.expand(rest).free_symbols
            and sympy.expand(c_out - c_in * sizes[k]) == 0
        ):
            expr = sympy.expand(rest + c_in * inner)  # ``inner`` now counts the merged loop
            sizes[k] = sizes[k - 1] * sizes[k]
            del variables[k - 1], sizes[k - 1]
        k -= 1
    rename = dict(zip(variables, [v for v, _ in ranges]))
    return expr.xreplace(rename), tuple(sizes)


def join(a: FusionNode, b: FusionNode) -> tuple[SpaceInfo | None, str]:
    assert a.space is not None and b.space is not None
    return join_spaces(a.space, b.space)
