"""``dce``: dead node elimination, then a topological order of the nodes.

A node is dead when it is pure (extern calls are not, unless marked ``pure = true``; a call that
mutates an argument never is), none of its results is returned and no live node reads one.
Removal is transitive: a node read only by dead nodes is dead too.

The surviving nodes are then put in a topological order of their data dependencies and weak
(mutation) dependencies. The order is stable: of the nodes ready to run, the one earliest in
the input comes first, so a program already in order is left as it is, with one exception for
communication: a collective call runs as soon as its inputs are computed, and its wait as late
as its readers allow (after every node that does not depend on the data), so that the work in
between overlaps the communication. A cycle is an error.

Dependencies recorded by ``deps`` stay valid: weak dependencies on removed nodes are dropped,
and users and ancestors are recomputed for the nodes that record them.
"""

from __future__ import annotations

from typing import Any

from fir.ir.dependencies import WeakDep
from fir.ir.errors import FirError
from fir.ir.graph import Graph, Module, Node, Value
from fir.ir.rewrite import is_pure, prune_kernels

from ..analysis.deps import (
    mutated_values,
    mutation_deps,
    node_links,
    predecessors,
    schedule_rank,
    topological_order,
)
from ..base import Pass


class DCEPass(Pass):
    name = "dce"
    summary = "remove nodes whose results nothing reads; order nodes topologically"

    def apply(self, module: Module) -> Module:
        for g in module.funcs:
            removed, moved = eliminate_dead_nodes(g)
            self.statistics["removed"] = self.statistics.get("removed", 0) + removed
            self.statistics["moved"] = self.statistics.get("moved", 0) + moved
        return module


def eliminate_dead_nodes(g: Graph) -> tuple[int, int]:
    """Remove dead nodes and order the rest; returns (removed, moved) counts."""
    operands = [n.operand_values() for n in g.nodes]
    live = _live_nodes(g, operands)
    removed = len(g.nodes) - len(live)
    if removed:
        gone = {id(r) for n in g.nodes if id(n) not in live for r in n.results}
        operands = [ops for n, ops in zip(g.nodes, operands) if id(n) in live]
        g.nodes = [n for n in g.nodes if id(n) in live]
        for n in g.nodes:
            _forget_removed_values(n, gone)
    if removed:
        prune_kernels(g)
    weak = _weak_deps(g)
    preds = predecessors(g, weak, operands)
    try:
        if g.kernels:
            order = _order_with_kernels(g, preds)
        else:
            names = [n.results[0].name for n in g.nodes]
            order = topological_order(preds, names, [schedule_rank(n) for n in g.nodes])
    except FirError as e:
        raise FirError(f"in @{g.name}: {e.message}", g.loc) from None
    moved = sum(1 for k, pos in enumerate(order) if k != pos)
    if moved:
        new_pos = {old: new for new, old in enumerate(order)}
        preds = [[new_pos[p] for p in preds[old]] for old in order]
        g.nodes = [g.nodes[old] for old in order]
    if any(n.deps is not None for n in g.nodes):
        _relink_recorded_deps(g, weak, preds)
    return removed, moved


def _order_with_kernels(g: Graph, preds: list[list[int]]) -> list[int]:
    """A topological order in which each kernel's members stay together, in their order: the
    kernels and the nodes of no kernel are ordered as units."""
    kernel_of = g.kernel_of()
    units: list[list[int]] = []
    unit_index: dict[Any, int] = {}
    unit_of: list[int] = []
    names: list[str] = []
    for pos, n in enumerate(g.nodes):
        k = kernel_of.get(id(n))
        key: Any = id(k) if k is not None else ("node", pos)
        if key not in unit_index:
            unit_index[key] = len(units)
            units.append([])
            names.append(n.results[0].name if k is None else f"kernel @{k.name}")
        units[unit_index[key]].append(pos)
        unit_of.append(unit_index[key])
    unit_preds: list[list[int]] = [[] for _ in units]
    for pos, ps in enumerate(preds):
        u = unit_of[pos]
        for p in ps:
            if unit_of[p] != u and unit_of[p] not in unit_preds[u]:
                unit_preds[u].append(unit_of[p])
    for k in g.kernels:
        members = units[unit_index[id(k)]]
        order_in = {id(n): j for j, n in enumerate(k.nodes)}
        members.sort(key=lambda pos: order_in[id(g.nodes[pos])])
    ranks = [schedule_rank(g.nodes[u[0]]) if len(u) == 1 else 0 for u in units]
    return [pos for u in topological_order(unit_preds, names, ranks) for pos in units[u]]


def _keeps_itself(n: Node) -> bool:
    return not is_pure(n) or bool(mutated_values(n))


def _live_nodes(g: Graph, operands: list[list[Value]]) -> set[int]:
    """ids of the nodes that are impure or whose results reach a returned value."""
    producer: dict[int, Node] = {id(r): n for n in g.nodes for r in n.results}
    reads = {id(n): ops for n, ops in zip(g.nodes, operands)}
    work = [n for n in g.nodes if _keeps_itself(n)]
    work += [producer[id(v)] for v in g.outputs if id(v) in producer]
    live: set[int] = set()
    while work:
        n = work.pop()
        if id(n) in live:
            continue
        live.add(id(n))
        for v in reads[id(n)]:
            p = producer.get(id(v))
            if p is not None and id(p) not in live:
                work.append(p)
    return live


def _forget_removed_values(n: Node, gone: set[int]) -> None:
    """Annotations (``{frees = [%a]}``) may name values; a removed value's name would no longer
    parse, so it is taken out of them."""

    def strip(v: Any) -> Any:
        if isinstance(v, Value) and id(v) in gone:
            return None
        if isinstance(v, list):
            kept = [strip(x) for x in v]
            return [x for x, orig in zip(kept, v) if not (x is None and orig is not None)]
        return v

    for key in list(n.attrs):
        old = n.attrs[key]
        value = strip(old)
        if (value is None and old is not None) or (value == [] and old != []):
            del n.attrs[key]
        else:
            n.attrs[key] = value


def _weak_deps(g: Graph) -> dict[Node, list[WeakDep]]:
    """The recorded weak dependencies (those on removed nodes dropped) and the ones the
    program's mutations imply now (also for nodes added since ``deps`` ran)."""
    weak: dict[Node, list[WeakDep]] = {}
    if any(n.deps is not None and n.deps.weak for n in g.nodes):
        names = {n.results[0].name for n in g.nodes}
        for n in g.nodes:
            if n.deps is not None and n.deps.weak:
                weak[n] = [w for w in n.deps.weak if w.buffer in names]
    for n, ws in mutation_deps(g).items():
        weak[n] = list(dict.fromkeys(weak.get(n, []) + ws))
    return weak


def _relink_recorded_deps(
    g: Graph, weak: dict[Node, list[WeakDep]], preds: list[list[int]]
) -> None:
    """Bring recorded deps up to date: weak dependencies, and users and ancestors where the
    node records them."""
    ancestors = any(n.deps is not None and n.deps.ancestors is not None for n in g.nodes)
    users, outputs, ancestor_lists = node_links(g, preds, ancestors=ancestors)
    for pos, n in enumerate(g.nodes):
        d = n.deps
        if d is None:
            continue
        d.weak = weak.get(n, [])
        if d.users is not None:
            d.users, d.is_output, d.users_locs = users[pos], outputs[pos], []
        if d.ancestors is not None and ancestor_lists is not None:
            d.ancestors, d.ancestors_locs = ancestor_lists[pos], []
