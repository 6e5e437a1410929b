"""``deps``: record what every node reads and writes, its users and (optionally) its ancestors.

For each node (see :mod:`fir.ir.dependencies` for the data model):

* a loop node reads a :class:`MemoryDep` per distinct load (buffer and index, the index renamed
  to the canonical variables ``c0, c1, …`` over the node's whole iteration space) and a
  :class:`StarDep` for a load through an ``indirect`` index; it writes a MemoryDep per result
  over its pointwise loops (the storage position of element ``linear(p)``);
* an extern call reads a StarDep per tensor argument and writes a StarDep per result and per
  argument it mutates (``{mutates = [0]}``);
* a tensor-level op (a pipeline stopped before ``lower``) reads and writes StarDeps;
* around a mutation, :class:`WeakDep` orders the mutating call after the nodes that read the
  buffer before it, and the later readers after the mutating call;
* an extern call with an ``effect`` attribute (a collective, an assertion) gets a
  :class:`WeakDep` on the previous such call, so effectful calls keep their program order; a
  collective's wait is not on that chain (it follows its collective through the buffer it
  writes, and its readers follow it), so that ``dce`` can place it as late as its readers
  allow (:func:`schedule_rank`).

Users and ancestors follow from those: a node's users read one of its results (or hold a weak
dependency on it); its ancestors are the nodes it depends on transitively.

:func:`compute_deps` is the library entry point for later passes (``fuse``, ``plan-memory``); it
returns the dependencies without attaching them.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Mapping
from functools import lru_cache
from itertools import compress
from typing import Any

from fir.ir.dependencies import Dep, MemoryDep, NodeDeps, StarDep, WeakDep
from fir.ir.dtypes import DType
from fir.ir.errors import FirError
from fir.ir.externs import effect_of, is_wait, mutated_arguments
from fir.ir.graph import (
    AliasNode,
    ExternNode,
    Graph,
    LoopNode,
    Module,
    Node,
    TensorOp,
    Value,
    alias_root,
)
from fir.ir.types import Dim, Layout, TensorType

from ..base import Option, Pass


class DepsPass(Pass):
    name = "deps"
    summary = "record reads, writes, weak ordering, users and ancestors of every node"
    options = {
        "users": Option(bool, True, "record each node's users (and whether it is returned)"),
        "ancestors": Option(
            bool, False, "record each node's transitive ancestors (text grows with the square)"
        ),
    }

    def apply(self, module: Module) -> Module:
        stats = {"nodes": 0, "memory-deps": 0, "star-deps": 0, "weak-deps": 0}
        for g in module.funcs:
            deps = compute_deps(g, users=self.users, ancestors=self.ancestors)  # type: ignore[attr-defined]
            for n in g.nodes:
                d = deps[n]
                n.deps = d
                stats["nodes"] += 1
                for dep in d.reads + d.writes:
                    stats["memory-deps" if isinstance(dep, MemoryDep) else "star-deps"] += 1
                stats["weak-deps"] += len(d.weak)
        for key, value in stats.items():
            self.statistics[key] = self.statistics.get(key, 0) + value
        return module


# ---------------------------------------------------------------------------------------------
# Library entry points


def compute_deps(g: Graph, *, users: bool = True, ancestors: bool = False) -> dict[Node, NodeDeps]:
    """The dependencies of every node of ``g``, not attached. ``users``/``ancestors`` False leave
    those fields None (ancestors cost time and memory quadratic in the graph's depth)."""
    prefix = canonical_prefix(g)
    deps = {n: local_deps(n, prefix) for n in g.nodes}
    weak = mutation_deps(g)
    for n, ws in weak.items():
        deps[n].weak = ws
    preds = predecessors(g, weak)
    user_lists, outputs, ancestor_lists = node_links(g, preds, ancestors=ancestors)
    for pos, n in enumerate(g.nodes):
        d = deps[n]
        if users:
            d.users, d.is_output = user_lists[pos], outputs[pos]
        if ancestor_lists is not None:
            d.ancestors = ancestor_lists[pos]
    return deps


def local_deps(n: Node, prefix: str = "c") -> NodeDeps:
    """Reads and writes of ``n`` alone (no weak dependencies, users or ancestors)."""
    if isinstance(n, LoopNode):
        return _loop_deps(n, prefix)
    if isinstance(n, AliasNode):
        # a view moves no bytes: it orders its readers after its base's writer, nothing more
        assert n.base is not None
        return NodeDeps(reads=[StarDep(n.base.name, 0)], writes=[StarDep(n.result.name, 0)])
    reads = [StarDep(v.name, storage_bytes(v.type)) for v in _unique_values(n.operand_values())]
    writes = [StarDep(r.name, storage_bytes(r.type)) for r in n.results]
    if isinstance(n, ExternNode):
        known = {r.name for r in n.results}
        for v in mutated_values(n):
            if v.name not in known:
                known.add(v.name)
                writes.append(StarDep(v.name, storage_bytes(v.type)))
    elif not isinstance(n, TensorOp):  # pragma: no cover - every node kind is listed
        raise TypeError(f"no dependencies for {type(n).__name__}")
    return NodeDeps(reads=list(reads), writes=list(writes))


def refresh_recorded_deps(n: Node, prefix: str = "c") -> None:
    """After a change to how ``n`` runs (its loop order), bring the reads and writes of its
    ``deps`` clause, if it has one, up to date; users, ancestors and weak dependencies stay."""
    if n.deps is None:
        return
    fresh = local_deps(n, prefix)
    n.deps.reads, n.deps.writes = fresh.reads, fresh.writes


def mutated_values(n: Node) -> list[Value]:
    """The arguments an extern call writes in place (its ``mutates`` positions)."""
    if not isinstance(n, ExternNode):
        return []
    return _unique_values(mutated_arguments(n))


def schedule_rank(n: Node) -> int:
    """Where a topological order puts a node among those ready to run: -1 a collective (its
    communication starts as soon as its inputs are there), 1 a collective's wait (as late as
    its readers allow, so that the work that does not need the data overlaps the
    communication), 0 the rest (program order)."""
    if effect_of(n) != "collective":
        return 0
    return 1 if "mutates" in n.attrs else -1


def mutation_deps(g: Graph) -> dict[Node, list[WeakDep]]:
    """Weak dependencies around in-place writes, in program order: a mutating node runs after
    the nodes that read the buffer since its last mutation (and after that mutation, which
    reads it too), and every later reader runs after the mutating node. An effectful extern
    call runs after the previous one (``weak %p for %p``): collectives, waits and assertions
    keep their order. Only nodes that get one are in the result."""
    mutations = {n: [alias_root(v).name for v in mutated_values(n)] for n in g.nodes}
    effectful = sum(1 for n in g.nodes if effect_of(n) is not None)
    if not any(mutations.values()) and effectful < 2:
        return {}
    out: dict[Node, list[WeakDep]] = {}
    readers: dict[str, list[str]] = {}  # buffer -> nodes that read it since its last mutation
    last_mutator: dict[str, str] = {}
    last_effect: str | None = None
    for n in g.nodes:
        name = n.results[0].name
        weak: list[WeakDep] = []
        if effect_of(n) is not None and not is_wait(n):
            if last_effect is not None:
                weak.append(WeakDep(last_effect, last_effect))
            last_effect = name
        # a view's readers read its root's storage: a write into the root concerns them too
        read = [alias_root(v).name for v in _unique_values(n.operand_values())]
        for b in read:
            m = last_mutator.get(b)
            if m is not None and m != name:
                weak.append(WeakDep(m, b))
        for b in mutations[n]:
            weak.extend(WeakDep(r, b) for r in readers.get(b, []) if r != name)
        if weak:
            out[n] = list(dict.fromkeys(weak))
        for b in read:
            readers.setdefault(b, []).append(name)
        for b in mutations[n]:
            last_mutator[b] = name
            readers[b] = []
    return out


def predecessors(
    g: Graph, weak: Mapping[Node, list[WeakDep]], operands: list[list[Value]] | None = None
) -> list[list[int]]:
    """For each node position, the positions of the nodes it depends on: the producers of the
    values it reads (``operands``: each node's ``operand_values()`` when the caller has them),
    then the nodes its weak dependencies name."""
    producer: dict[int, int] = {}
    by_name: dict[str, int] = {}
    for pos, n in enumerate(g.nodes):
        for r in n.results:
            producer[id(r)] = pos
        by_name[n.results[0].name] = pos
    out: list[list[int]] = []
    for pos, n in enumerate(g.nodes):
        ps: dict[int, None] = {}
        for v in n.operand_values() if operands is None else operands[pos]:
            p = producer.get(id(v))
            if p is not None and p != pos:
                ps[p] = None
        for w in weak.get(n, ()):
            p = by_name.get(w.buffer)
            if p is not None and p != pos:
                ps[p] = None
        out.append(list(ps))
    return out


def node_links(
    g: Graph, preds: list[list[int]], *, ancestors: bool = False
) -> tuple[list[list[str]], list[bool], list[list[str]] | None]:
    """Users (in program order), whether a result is returned, and (when asked) ancestors of
    every node, by position."""
    nodes = g.nodes
    names = [n.results[0].name for n in nodes]
    user_lists: list[list[str]] = [[] for _ in nodes]
    for pos, ps in enumerate(preds):
        for p in ps:
            user_lists[p].append(names[pos])
    returned = {id(v) for v in g.outputs}
    outputs = [any(id(r) in returned for r in n.results) for n in nodes]
    if not ancestors:
        return user_lists, outputs, None
    masks = ancestor_masks(preds)
    return user_lists, outputs, [names_in_mask(m, names) for m in masks]


def ancestor_masks(preds: list[list[int]]) -> list[int]:
    """Ancestors of every node as a bit set over node positions (a Python int): cheap to build
    and to test even where the lists of names would be quadratic."""
    masks = [0] * len(preds)
    for pos in topological_order(preds):
        m = 0
        for p in preds[pos]:
            m |= masks[p] | (1 << p)
        masks[pos] = m
    return masks


_BIT_BYTES = bytes.maketrans(b"01", b"\x00\x01")


def names_in_mask(mask: int, names: list[str]) -> list[str]:
    """``names[k]`` for every bit ``k`` set in ``mask``, in order (C-speed selection: ancestor
    lists can hold millions of names in total)."""
    if not mask:
        return []
    selectors = bin(mask)[:1:-1].encode().translate(_BIT_BYTES)  # least significant bit first
    return list(compress(names, selectors))


def topological_order(
    preds: list[list[int]], names: list[str] | None = None, ranks: list[int] | None = None
) -> list[int]:
    """Positions in a dependency-respecting order that keeps program order wherever the
    dependencies allow (the smallest ready position first). ``ranks`` (one per position, see
    :func:`schedule_rank`) come before positions: of the ready nodes, a lower rank runs first.
    A cycle is a :class:`FirError`."""
    count = len(preds)
    ranked = ranks is not None and any(ranks)
    if not ranked and all(p < pos for pos, ps in enumerate(preds) for p in ps):
        return list(range(count))
    key = (lambda pos: (ranks[pos], pos)) if ranked else (lambda pos: (0, pos))  # type: ignore[index]
    waiting = [len(set(ps)) for ps in preds]
    succs: list[list[int]] = [[] for _ in preds]
    for pos, ps in enumerate(preds):
        for p in set(ps):
            succs[p].append(pos)
    ready = [key(pos) for pos in range(count) if waiting[pos] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        _, pos = heapq.heappop(ready)
        order.append(pos)
        for s in succs[pos]:
            waiting[s] -= 1
            if waiting[s] == 0:
                heapq.heappush(ready, key(s))
    if len(order) < count:
        raise FirError(_cycle_message(preds, {p for p in range(count) if waiting[p]}, names))
    return order


def _cycle_message(preds: list[list[int]], stuck: set[int], names: list[str] | None) -> str:
    # walk predecessors inside the stuck set until a position repeats: that is a cycle
    pos = min(stuck)
    path: list[int] = []
    seen: dict[int, int] = {}
    while pos not in seen:
        seen[pos] = len(path)
        path.append(pos)
        pos = next(p for p in preds[pos] if p in stuck)
    cycle = path[seen[pos] :][::-1]  # in running order: each node must run before the next
    cycle.append(cycle[0])

    def label(k: int) -> str:
        return f"%{names[k]}" if names is not None else f"node #{k}"

    return (
        "dependency cycle: "
        + " -> ".join(label(k) for k in cycle)
        + " (each node must run before the next)"
    )


# ---------------------------------------------------------------------------------------------
# Loop nodes


def canonical_prefix(g: Graph) -> str:
    """``c`` for the canonical variables ``c0, c1, …``, longer when a size symbol of ``g`` would
    be mistaken for one of them."""
    names: set[str] = set()
    for a in g.args:
        t = a.type
        for d in list(t.shape) + list(t.strides) + [t.offset]:
            if not isinstance(d, int):
                names |= {s.name for s in d.free_symbols}
    prefix = "c"
    while any(re.fullmatch(re.escape(prefix) + r"[0-9]+", s) for s in names):
        prefix += "c"
    return prefix


@lru_cache(maxsize=256)
def canonical_vars(prefix: str, count: int) -> tuple[Any, ...]:
    from fir.ir.symbolic import index_var

    return tuple(index_var(f"{prefix}{k}") for k in range(count))


def _loop_deps(n: LoopNode, prefix: str) -> NodeDeps:
    """Reads and writes over canonical variables numbered in the order the loops run: the
    node's ``over`` order, or its schedule (``order (…)``: permuted loops, merged loops
    expanded, squeezed size-1 loops gone), so that two nodes whose accesses agree once one is
    reordered have equal dependencies."""
    assert n.body is not None
    sizes_of = dict(n.ranges + n.reduction_ranges)
    pw_vars, red_vars = n.scheduled_vars()
    order = pw_vars + red_vars
    loop_vars = tuple(order)
    sizes = tuple(sizes_of[v] for v in order)
    cvars = canonical_vars(prefix, len(order))
    ranges = tuple(zip(cvars, sizes))
    squeezed: dict[Any, Any] = {}
    if n.schedule is not None:
        import sympy

        kept = set(order)
        squeezed = {v: sympy.Integer(0) for v in sizes_of if v not in kept}
    reads: dict[Any, Dep] = {}
    for op in n.body.ops:
        if op.opcode != "load":
            continue
        buf = op.buffer
        assert buf is not None and op.index is not None
        t = buf.type
        index = op.index
        if squeezed and not isinstance(index, int):
            index = index.xreplace(squeezed)
        access = _read_access(index, loop_vars, cvars, sizes, t.dtype, t.shape, t.layout)
        if access is None:  # through an indirect index: any element of the buffer
            key: Any = (buf.name, None)
            if key not in reads:
                reads[key] = StarDep(buf.name, storage_bytes(t))
            continue
        index, nbytes = access
        key = (buf.name, index)
        if key not in reads:
            reads[key] = MemoryDep(buf.name, index, ranges, nbytes)
    pointwise = len(pw_vars)
    out_ranges = ranges[:pointwise]
    # the element a point writes is its row-major position over the node's own ranges,
    # whatever order the loops run in
    canonical = dict(zip(loop_vars, cvars))
    logical_sizes = tuple(s for _, s in n.ranges)
    logical_cvars = tuple(canonical.get(v, squeezed.get(v)) for v, _ in n.ranges)
    writes: list[Dep] = []
    for r in n.results:
        t = r.type
        index, nbytes = _write_access(logical_sizes, logical_cvars, t.dtype, t.shape, t.layout)
        writes.append(MemoryDep(r.name, index, out_ranges, nbytes))
    return NodeDeps(reads=list(reads.values()), writes=writes)


# The two caches below are keyed by plain parts (shapes are tuples of ints, the dtype an enum
# member) rather than by TensorType, whose dataclass hash is several times slower.


@lru_cache(maxsize=65536)
def _read_access(
    index: Any,
    loop_vars: tuple[Any, ...],
    cvars: tuple[Any, ...],
    sizes: tuple[Dim, ...],
    dtype: DType,
    shape: tuple[Dim, ...],
    layout: Layout | None,
) -> tuple[Any, Dim] | None:
    """(index renamed to ``cvars``, bytes it touches) of a load; None when it goes through an
    indirect index. The same index over the same loops recurs across nodes."""
    if isinstance(index, int):
        return index, _access_bytes(
            (), dtype.itemsize, storage_bytes(TensorType(dtype, shape, layout))
        )
    from fir.ir.symbolic import is_indirect

    free: set[Any] = set()  # filled by the renaming walk (``free_symbols`` walks again)
    renamed = rename_symbols(index, dict(zip(loop_vars, cvars)), free)
    if any(is_indirect(s) for s in free):
        return None
    used = [k for k, v in enumerate(loop_vars) if v in free]
    storage = storage_bytes(TensorType(dtype, shape, layout))
    return renamed, _access_bytes(tuple(sizes[k] for k in used), dtype.itemsize, storage)


def rename_symbols(e: Any, mapping: dict[Any, Any], seen: set[Any] | None = None) -> Any:
    """``e`` with symbols replaced through ``mapping``, a one-to-one renaming between symbols of
    the same assumptions (loop variables to canonical variables).

    Such a renaming cannot create anything to simplify, so the expression is rebuilt without
    evaluating it again, which ``xreplace`` does at every level (the cost of the deps pass on
    large reshape and view indices was almost all ``xreplace``). Only the canonical order of
    sums and products depends on the names: it is restored with sympy's own sort, the number
    first as sympy keeps it. ``seen``, when given, receives the symbols of ``e``."""
    import sympy
    from sympy.core.add import _addsort
    from sympy.core.mul import _mulsort

    symbol, add, mul = sympy.Symbol, sympy.Add, sympy.Mul

    def go(x: Any) -> Any:
        if isinstance(x, symbol):
            if seen is not None:
                seen.add(x)
            return mapping.get(x, x)
        if x.is_Atom:
            return x
        args = [go(a) for a in x.args]
        if all(a is b for a, b in zip(args, x.args)):
            return x
        if isinstance(x, (add, mul)):
            numbers = [a for a in args if a.is_Number]
            rest = [a for a in args if not a.is_Number]
            (_addsort if isinstance(x, add) else _mulsort)(rest)
            return type(x)._from_args(numbers + rest)
        return x.func(*args, evaluate=False)

    return go(e)


@lru_cache(maxsize=4096)
def _write_access(
    sizes: tuple[Dim, ...],
    cvars: tuple[Any, ...],
    dtype: DType,
    shape: tuple[Dim, ...],
    layout: Layout | None,
) -> tuple[Any, Dim]:
    """(storage position, bytes) of the writes of a result: element ``linear(p)``, row-major
    over the loops, stored through the result's layout."""
    t = TensorType(dtype, shape, layout).normalized()  # a contiguous layout is no layout
    linear: Any = 0
    inner: Any = 1
    for v, s in zip(reversed(cvars), reversed(sizes)):
        linear = linear + v * inner
        inner = inner * s
    if t.layout is None:
        index = linear
    elif tuple(sizes) == tuple(t.shape):
        index = t.offset
        for v, stride in zip(cvars, t.strides):
            index = index + v * stride
    else:  # the loops do not have the result's shape: unravel the linear position
        from fir.ir.symbolic import FloorDiv, Modulo, simplify_index

        index = t.offset
        inner = 1
        for d, stride in zip(reversed(t.shape), reversed(t.strides)):
            index = index + Modulo(FloorDiv(linear, inner), d) * stride
            inner = inner * d
        index = simplify_index(
            index, {v: s for v, s in zip(cvars, sizes) if not getattr(v, "is_Number", False)}
        )
    if not isinstance(index, int):
        from fir.ir.symbolic import to_dim

        index = to_dim(index)
    free = set() if isinstance(index, int) else index.free_symbols
    used = tuple(sizes[k] for k, v in enumerate(cvars) if v in free)
    return index, _access_bytes(used, dtype.itemsize, storage_bytes(t))


@lru_cache(maxsize=4096)
def storage_bytes(t: TensorType) -> Dim:
    """Bytes of storage a tensor's layout can touch."""
    return _norm(t.storage_size() * t.dtype.itemsize)


@lru_cache(maxsize=16384)
def _access_bytes(used_sizes: tuple[Dim, ...], itemsize: int, storage: Dim) -> Dim:
    total: Any = itemsize
    for s in used_sizes:
        total = total * s
    total = _norm(total)
    if isinstance(total, int) and isinstance(storage, int):
        return min(total, storage)
    import sympy

    diff = sympy.expand(total - storage)
    if diff == 0 or diff.is_nonnegative:
        return storage
    if diff.is_nonpositive:
        return total
    return _norm(sympy.Min(total, storage))


def _norm(d: Any) -> Dim:
    if isinstance(d, int):
        return d
    import sympy
    from fir.ir.symbolic import to_dim

    return to_dim(sympy.expand(d))


def _unique_values(values: list[Value]) -> list[Value]:
    seen: dict[int, Value] = {}
    for v in values:
        seen.setdefault(id(v), v)
    return list(seen.values())
