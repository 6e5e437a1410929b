"""``inline``: decide which loop-level buffers are realized (materialized in memory) and copy the
bodies of the others into the loops that read them, as Inductor's ``realize()`` does.

Decisions are made first, walking the nodes in program order with op and read counts only;
then every realized node that reads an inlined buffer gets its body rebuilt once
(:mod:`fir.passes.fusion.body_inliner`) and the inlined nodes are removed. The rules, their order and
the reason each realized node carries in its ``realized`` attribute are in
docs/passes/inline.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fir.ir.externs import mutated_arguments
from fir.ir.graph import (
    AliasNode,
    BodyValue,
    ExternNode,
    Graph,
    Literal,
    LoopNode,
    Module,
    Node,
    Value,
    alias_root,
)
from fir.ir.ops import COSTLY, COSTLY_OPS
from fir.ir.symbolic import free_symbols, is_indirect
from fir.ir.types import dims_mul

from ..base import Option, Pass, paused_gc

# Why a loop node is realized, in the order the rules are tried; the statistics count each.
CATEGORIES = (
    "inline disabled",
    "reduction",
    "graph output",
    "extern input",
    "viewed",
    "tensor op input",
    "layout",
    "no users",
    "max-acc-reads",
    "max-reads",
    "max-ops",
    "mutation",
    "masked read",
    "max-body-ops",
    "recompute",
)

# Ops that cost (next to) nothing to compute again in every reader: the max-ops rule, which keeps
# expensive bodies from being recomputed, does not count them (an index computation full of
# casts and index expressions, like T5's relative-position buckets, stays inlined, as in Inductor)
_CHEAP_OPS = frozenset({"index", "constant", "cast", "indirect"})

# Ops that have no defined result on some inputs (an integer division by zero); a body with one
# is not evaluated where a masked load says the element is not read.
_DIVIDING_OPS = ("floordiv", "mod")


@dataclass(frozen=True)
class _Mutation:
    """An extern call that writes ``value`` in place, at ``position`` in the program."""

    position: int
    node: Node
    value: Value


def _mutations(g: Graph) -> dict[int, list[_Mutation]]:
    out: dict[int, list[_Mutation]] = {}
    for position, n in enumerate(g.nodes):
        if isinstance(n, ExternNode):
            for v in mutated_arguments(n):
                # a write through a view is a write of its root, which loop nodes load
                out.setdefault(id(v), []).append(_Mutation(position, n, v))
                root = alias_root(v)
                if root is not v:
                    out.setdefault(id(root), []).append(_Mutation(position, n, v))
    return out


@dataclass(eq=False)
class _Info:
    """What the decision rules need to know about one loop node."""

    node: LoopNode
    position: int
    own_ops: int  # body ops other than loads
    own_compute: int  # ... and other than index, constant, cast and indirect (cheap to repeat)
    loads: dict[tuple[int, Any], bool]  # (id(buffer), index) -> read under a mask
    buffers: dict[int, Value]  # the buffers it loads, by id
    can_fault: bool  # its own body has an op with no defined result on some inputs
    own_cost: int  # own_compute weighted: a transcendental op, a division or a power counts COSTLY
    eff_ops: int = 0  # ops once the inlined producers are copied in (before de-duplication)
    eff_compute: int = 0  # the same, counting own_compute
    eff_reads: frozenset[int] = field(default_factory=frozenset)  # buffers read after inlining
    eff_fault: bool = False
    eff_cost: int = 0  # own_cost with the inlined producers' (once per load)
    eff_reduced: bool = False  # reads a reduction's result, itself or through an inlined producer
    # inlined producers in the effective body that it reads broadcast: producer -> elements of
    # this node per element of the producer (the recompute rule's candidates)
    broadcast: dict[_Info, int] = field(default_factory=dict)
    reason: str | None = None  # None: inlined
    category: str = ""


def _scan(node: LoopNode, position: int) -> _Info:
    assert node.body is not None
    loads: dict[tuple[int, Any], bool] = {}
    buffers: dict[int, Value] = {}
    own_ops = 0
    own_compute = 0
    own_cost = 0
    can_fault = False
    has_indirect = False
    for op in node.body.ops:
        if op.opcode == "load":
            assert op.buffer is not None
            key = (id(op.buffer), op.index)
            loads[key] = loads.get(key, False) or op.mask is not None
            buffers.setdefault(id(op.buffer), op.buffer)
            continue
        own_ops += 1
        if op.opcode not in _CHEAP_OPS:
            own_compute += 1
            own_cost += _op_cost(op)
        if op.opcode == "indirect":
            has_indirect = True
        elif op.opcode in _DIVIDING_OPS:
            divisor = op.operands[1] if len(op.operands) > 1 else None
            literal_ok = isinstance(divisor, Literal) and bool(divisor.value)
            if not literal_ok and not _is_float(op.operands[0]):
                can_fault = True
        elif (
            op.opcode == "index"
            and has_indirect
            and any(is_indirect(s) for s in free_symbols(op.index))
        ):
            # an indirect index computed from a masked-off load is not known to be in bounds
            can_fault = True
    return _Info(node, position, own_ops, own_compute, loads, buffers, can_fault, own_cost)


def _op_cost(op: Any) -> int:
    """What computing ``op`` again costs, in simple ops (a division by a literal is a
    multiplication or a shift)."""
    if op.opcode not in COSTLY_OPS:
        return 1
    if op.opcode in ("div", "truediv") and isinstance(op.operands[-1], Literal):
        return 1
    return COSTLY


def _reuse(consumer: LoopNode, producer: LoopNode) -> int:
    """How many times ``consumer`` visits each element of ``producer`` per load of it: the ratio
    of their iteration spaces (symbolic sizes taken at 2, the smallest a dynamic size is)."""
    import sympy

    def elements(n: LoopNode) -> Any:
        return sympy.sympify(dims_mul([s for _, s in n.ranges + n.reduction_ranges]))

    mine = elements(producer)
    if mine == 0:
        return 0
    ratio = elements(consumer) / mine
    if ratio.free_symbols:
        ratio = ratio.subs({sym: 2 for sym in ratio.free_symbols})
    return int(ratio) if ratio.is_number else 0


def _is_float(v: Any) -> bool:
    """Whether a body operand is a float (its dtype may not be filled in before verification:
    then follow it back to a load, a cast or a constant)."""
    while isinstance(v, BodyValue):
        if v.dtype is not None:
            return v.dtype.is_float
        op = v.owner
        if op is None:
            return False
        if op.opcode == "load" and op.buffer is not None:
            return op.buffer.type.dtype.is_float
        if op.dtype is not None:
            return op.dtype.is_float
        v = next((o for o in op.operands if isinstance(o, BodyValue)), None)
    return False


def _buffers(n: int) -> str:
    return f"{n} buffer" if n == 1 else f"{n} buffers"


class InlinePass(Pass):
    name = "inline"
    input_level = "loop"
    summary = "realize buffers (reductions, outputs, shared or large ones); inline the rest"
    options = {
        "max-reads": Option(
            int, 4, "a buffer with several readers is realized if it reads more buffers"
        ),
        "max-ops": Option(int, 30, "a buffer with several readers is realized if it has more ops"),
        "max-body-ops": Option(
            int, 256, "do not inline into a body that would grow past this many ops"
        ),
        "max-acc-reads": Option(
            int, 8, "a buffer is realized once its body (after inlining) reads more buffers"
        ),
        "recompute-reuse": Option(
            int,
            8,
            "a body a reader visits this many times per element (a broadcast read) is a "
            "candidate for realizing by the recompute rule",
        ),
        "recompute-cost": Option(
            int,
            16,
            "realize a reader's broadcast candidates when their costs (a transcendental op, "
            "a division or a power counts 8) add up to this",
        ),
        "disable": Option(bool, False, "realize every loop node"),
    }

    def apply(self, module: Module) -> Module:
        with paused_gc():
            for g in module.funcs:
                self.run_graph(g)
        # a fixed order for --stats: the counts, then the reasons in the order of the rules
        stats = self.statistics
        order = ["inlined", "bodies copied"] + [f"realized ({c})" for c in CATEGORIES]
        self.statistics = {k: stats.get(k, 0) for k in order if k in stats or k in order[:2]}
        return module

    # -- decisions

    def run_graph(self, g: Graph) -> None:
        infos = self.decide(g)
        inlined: dict[int, LoopNode] = {}
        for info in infos:
            if info.reason is None:
                for r in info.node.results:
                    inlined[id(r)] = info.node
        inliner = None
        if inlined:
            from .body_inliner import BodyInliner

            inliner = BodyInliner(inlined)
        for info in infos:
            node = info.node
            node.attrs.pop("realized", None)
            if info.reason is None:
                continue
            node.attrs["realized"] = info.reason
            key = f"realized ({info.category})"
            self.statistics[key] = self.statistics.get(key, 0) + 1
            if inliner is not None and inliner.needs_rebuild(node):
                node.body = inliner.build(node)
        if inlined:
            g.nodes = [
                n for n in g.nodes if not (isinstance(n, LoopNode) and id(n.result) in inlined)
            ]
            _drop_stale_analyses(g)
        stats = self.statistics
        stats["inlined"] = stats.get("inlined", 0) + len({id(n) for n in inlined.values()})
        copies = inliner.copies if inliner is not None else 0
        stats["bodies copied"] = stats.get("bodies copied", 0) + copies

    def decide(self, g: Graph) -> list[_Info]:
        users = g.users()
        outputs = {id(v) for v in g.outputs}
        mutations = _mutations(g)
        by_value: dict[int, _Info] = {}
        infos: list[_Info] = []
        for position, n in enumerate(g.nodes):
            if not isinstance(n, LoopNode):
                continue
            info = _scan(n, position)
            if mutations:
                self.check_mutations(info, by_value, mutations)
            self.consumer_rules(info, by_value)
            readers = users.get(id(n.result), [])
            if len(n.results) > 1:
                readers = [u for r in n.results for u in users.get(id(r), [])]
            self.own_rules(info, readers, outputs)
            for r in n.results:
                by_value[id(r)] = info
            infos.append(info)
        return infos

    def consumer_rules(self, consumer: _Info, by_value: dict[int, _Info]) -> None:
        """Realize the producers that ``consumer`` cannot take in (a masked read of a body that
        may fault; a body that would grow past max-body-ops, largest producers first), then
        count what the consumer becomes with the others inlined: ``eff_ops``, ``eff_reads``."""
        contribution: dict[_Info, int] = {}  # inlinable producer -> ops it adds
        loads_of: dict[_Info, int] = {}  # inlinable producer -> loads of it (copies made)
        for (b, _), masked in consumer.loads.items():
            p = by_value.get(b)
            if p is None or p.reason is not None:
                continue
            if masked and p.eff_fault:
                self.realize(
                    p, f"masked read by %{consumer.node.result.name}, body may fault", "masked read"
                )
                contribution.pop(p, None)
                continue
            contribution[p] = contribution.get(p, 0) + p.eff_ops
            loads_of[p] = loads_of.get(p, 0) + 1
        total = consumer.own_ops + sum(contribution.values())
        limit: int = self.max_body_ops  # type: ignore[attr-defined]
        if total > limit:
            name = consumer.node.result.name
            for p in sorted(contribution, key=lambda p: (-contribution[p], p.position)):
                self.realize(
                    p,
                    f"inlining would grow %{name} to {total} ops > max-body-ops={limit}",
                    "max-body-ops",
                )
                total -= contribution.pop(p)
                if total <= limit:
                    break
        self.recompute_rule(consumer, loads_of)
        reads: set[int] = set()
        fault = consumer.can_fault
        compute = consumer.own_compute
        cost = consumer.own_cost
        for p, copies in loads_of.items():  # the producers still inlined, once per load
            if p.reason is None:
                compute += p.eff_compute * copies
                cost += p.eff_cost * copies
        reduced = False
        for b in consumer.buffers:
            p = by_value.get(b)
            if p is not None and p.reason is None:
                reads |= p.eff_reads
                fault = fault or p.eff_fault
                reduced = reduced or p.eff_reduced
            else:
                reads.add(b)
                reduced = reduced or (p is not None and p.node.is_reduction)
        consumer.eff_ops, consumer.eff_reads, consumer.eff_fault = total, frozenset(reads), fault
        consumer.eff_compute, consumer.eff_cost, consumer.eff_reduced = compute, cost, reduced

    def recompute_rule(self, consumer: _Info, loads_of: dict[_Info, int]) -> None:
        """Realize the inlined producers that ``consumer`` reads broadcast (each element visited
        recompute-reuse times or more) when together they cost recompute-cost or more per
        element: T5's relative-position buckets (a log and casts, 8 heads to an element) and
        Llama's rotary cos and sin (64 reads an element in every layer) otherwise make their
        readers compute-bound. A producer derived from a reduction's result (a norm's rsqrt of
        the variance) is left inlined: it is computed once per row where it fuses."""
        reuse_limit: int = self.recompute_reuse  # type: ignore[attr-defined]
        cost_limit: int = self.recompute_cost  # type: ignore[attr-defined]
        found: dict[_Info, int] = {}

        def candidate(p: _Info, reuse: int) -> None:
            if (
                p.reason is None
                and not p.eff_reduced
                and p.eff_cost >= COSTLY  # a cheap body costs less than its load
                and reuse >= reuse_limit
            ):
                found[p] = max(found.get(p, 0), reuse)

        for p, copies in loads_of.items():
            if p.reason is not None:
                continue
            reuse = _reuse(consumer.node, p.node) * copies
            candidate(p, reuse)
            # what an inlined producer reads broadcast, this node reads so too (Llama's rotary
            # sum reads cos through one product and sin through the other)
            for q, inner in p.broadcast.items():
                candidate(q, inner * max(reuse, 1))
        total = sum(p.eff_cost for p in found)
        if total < cost_limit:
            consumer.broadcast = found
            return
        name = consumer.node.result.name
        for p, reuse in found.items():
            self.realize(
                p,
                f"%{name} reads each element {reuse} times; broadcast bodies cost {total} "
                f">= recompute-cost={cost_limit}",
                "recompute",
            )

    def own_rules(self, info: _Info, readers: list[Node], outputs: set[int]) -> None:
        """The rules that depend on the node itself and on who reads it."""
        n = info.node
        distinct = len({id(u) for u in readers})
        if self.disable:  # type: ignore[attr-defined]
            self.realize(info, "inline disabled", "inline disabled")
        elif n.is_reduction:
            self.realize(info, "reduction", "reduction")
        elif any(id(r) in outputs for r in n.results):
            self.realize(info, "graph output", "graph output")
        elif any(isinstance(u, ExternNode) for u in readers):
            self.realize(info, "extern input", "extern input")
        elif any(isinstance(u, AliasNode) for u in readers):
            view = next(u for u in readers if isinstance(u, AliasNode))
            self.realize(info, f"viewed by %{view.result.name}", "viewed")
        elif any(not isinstance(u, LoopNode) for u in readers):
            self.realize(info, "tensor op input", "tensor op input")
        elif n.result.type.normalized().layout is not None:
            self.realize(info, "layout", "layout")
        elif distinct == 0:
            self.realize(info, "no users", "no users")
        elif len(info.eff_reads) > self.max_acc_reads:  # type: ignore[attr-defined]
            self.realize(
                info,
                f"reads {_buffers(len(info.eff_reads))} > max-acc-reads={self.max_acc_reads}",  # type: ignore[attr-defined]
                "max-acc-reads",
            )
        elif distinct > 1 and len(info.eff_reads) > self.max_reads:  # type: ignore[attr-defined]
            self.realize(
                info,
                f"{distinct} users, reads {_buffers(len(info.eff_reads))} > max-reads={self.max_reads}",  # type: ignore[attr-defined]
                "max-reads",
            )
        elif distinct > 1 and info.eff_compute > self.max_ops:  # type: ignore[attr-defined]
            self.realize(
                info,
                f"{distinct} users, {info.eff_compute} ops > max-ops={self.max_ops}",  # type: ignore[attr-defined]
                "max-ops",
            )

    def check_mutations(
        self, consumer: _Info, by_value: dict[int, _Info], mutations: dict[int, list[_Mutation]]
    ) -> None:
        """Inlined into the consumer, a producer reads its inputs where the consumer runs; if an
        extern call writes one of them in place in between, the producer must run first."""
        for b in consumer.buffers:
            p = by_value.get(b)
            if p is None or p.reason is not None:
                continue
            for read in p.eff_reads:
                hit = next(
                    (
                        m
                        for m in mutations.get(read, [])
                        if p.position < m.position < consumer.position
                    ),
                    None,
                )
                if hit is not None:
                    self.realize(
                        p,
                        f"reads %{hit.value.name}, which %{hit.node.result.name} mutates "
                        f"before %{consumer.node.result.name}",
                        "mutation",
                    )
                    break

    def realize(self, info: _Info, reason: str, category: str) -> None:
        assert category in CATEGORIES, category
        info.reason = reason
        info.category = category


# Annotations of later passes that describe the graph as it was before inlining.
_PLAN_KEYS = ("reuses", "inplace", "frees")


def _drop_stale_analyses(g: Graph) -> None:
    """Inlining removes nodes and changes what the others read, so dependencies (``deps``) and
    memory plans computed earlier no longer hold (and may name removed nodes): drop them. So do
    kernels: a member's new body may read what another member writes at another element."""
    g.kernels = []
    for n in g.nodes:
        if getattr(n, "deps", None) is not None:
            n.deps = None
        for key in _PLAN_KEYS:
            n.attrs.pop(key, None)
