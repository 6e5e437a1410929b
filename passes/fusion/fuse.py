"""``fuse``: group loop nodes into kernels, Inductor's ``fuse_nodes`` done in the open.

Each function goes through up to ``rounds`` rounds (default 10), and stops when a round fuses
nothing. A round:

1. **Finds candidate pairs.** Fusion nodes are listed in program order (of their first node);
   each buffer gets the list of fusion nodes that read or write it, and every node is paired with
   the next 64 of each of its buffers' lists (so the work grows linearly with the graph). With
   ``aggressive``, nodes are also grouped by iteration space (pairs of pointwise nodes there may
   fuse with no buffer in common). Every pair is checked
   (:mod:`fir.passes.fusion.rules`); a pair rejected only because node2 must run first is also
   tried the other way round.
2. **Scores them**: fusion type (1 when both are reductions or both are not, and something is
   saved), bytes of memory traffic one kernel saves over two (reads served from registers,
   writes of buffers that become kernel-local, shared reads done once; from the nodes'
   MemoryDeps), and proximity in program order.
3. **Tries them greedily** in score order: each pair is looked up again (an earlier fusion of the
   round may have grown either side), checked again, and checked for a cycle through kernels
   formed earlier; then fused.

With ``reorder`` (the default), when the rounds end and the last one met pairs whose memory deps
did not match, one more round tries those pairs with the loops of their pointwise node run in
another order (Inductor's loop ordering after fusion), keeps the order that makes a pair legal,
and fuses it; plain rounds go on if it fused anything.

Kernels written by hand in the input are checked for legality first (a located error names the
reason) and then take part like any other fusion node; ``nofuse`` attributes are honoured. The
result is a ``kernel @kN over (…) local (…) { … }`` block per fusion group of two or more
nodes, the nodes put in a topological order where each kernel's nodes stand together.

Options: ``explain`` (the report of every round on stderr), ``disable``, ``vertical-only``,
``horizontal``, ``max-size``, ``aggressive``, ``rounds``, ``reorder``. See docs/passes/fuse.md.
"""

from __future__ import annotations

import itertools
import sys
from typing import Any, TextIO

from fir.ir.graph import (
    AliasNode,
    ExternNode,
    Graph,
    Kernel,
    Loop,
    LoopNode,
    LoopSchedule,
    Module,
)
from fir.ir.memory_plan import PLAN_KEYS

from ..analysis.deps import refresh_recorded_deps, topological_order
from ..base import Option, OptionError, Pass, paused_gc
from ..verify import adopt_kernels
from .fusion_graph import FusionGraph, FusionNode
from .report import Candidate, FunctionReport, Round, Summary
from .rules import FusionRules, PeakProfile, Rejection, RuleOptions, is_small

WINDOW = 64  # pairs are looked for among this many neighbours in each buffer's list


class FusePass(Pass):
    name = "fuse"
    input_level = "loop"
    summary = "group loop nodes into kernels (Inductor's fuse_nodes), explaining every decision"
    reports_decisions = True
    options = {
        "explain": Option(
            bool,
            False,
            "print every candidate pair of every round with its "
            "score and decision, and a summary (stderr)",
        ),
        "disable": Option(bool, False, "fuse nothing (hand-written kernels are still checked)"),
        "vertical-only": Option(
            bool, False, "fuse only a node with a node it depends on (same as horizontal=false)"
        ),
        "horizontal": Option(
            bool, True, "fuse nodes that share inputs but depend on each other in no way"
        ),
        "max-size": Option(int, 256, "most nodes in one kernel"),
        "aggressive": Option(
            bool,
            False,
            "also fuse pointwise nodes that share no buffer when their iteration spaces are equal",
        ),
        "small-kernels": Option(
            int,
            0,
            "also fuse nodes of one iteration space of at most this many elements that share "
            "no buffer (launch-bound kernels: one launch for two); 0: never",
        ),
        "rounds": Option(int, 10, "most rounds of fusion"),
        "reorder": Option(
            bool,
            True,
            "end with a round that reorders a node's loops when that "
            "makes its memory deps match a neighbour's, and fuses the pair",
        ),
    }

    def __init__(self, **values: Any) -> None:
        super().__init__(**values)
        for key in ("max-size", "rounds"):
            if values.get(key, 1) < 1:
                raise OptionError(key, f"option '{key}' of pass 'fuse' must be at least 1")
        self.reports: list[FunctionReport] = []
        self.stream: TextIO | None = None  # where ``explain`` writes (stderr when None)

    def apply(self, module: Module) -> Module:
        keep = self.collect_reports or self.explain  # type: ignore[attr-defined]
        for g in module.funcs:
            report = fuse_function(
                g,
                disable=self.disable,  # type: ignore[attr-defined]
                horizontal=self.horizontal and not self.vertical_only,  # type: ignore[attr-defined]
                max_size=self.max_size,  # type: ignore[attr-defined]
                aggressive=self.aggressive and not self.vertical_only,  # type: ignore[attr-defined]
                max_rounds=self.rounds,  # type: ignore[attr-defined]
                small_kernels=self.small_kernels if not self.vertical_only else 0,  # type: ignore[attr-defined]
                reorder=self.reorder,  # type: ignore[attr-defined]
                collect=keep,
                options=self.option_values(),
            )
            s = report.summary
            assert s is not None
            stats = self.statistics
            for key, value in (
                ("kernels-before", s.kernels_before),
                ("kernels-after", s.kernels_after),
                ("fusions", s.kernels_before - s.kernels_after),
            ):
                stats[key] = stats.get(key, 0) + value
            if isinstance(s.saved, int):
                stats["bytes-saved"] = stats.get("bytes-saved", 0) + s.saved
            if keep:
                self.reports.append(report)
            if self.explain:  # type: ignore[attr-defined]
                (self.stream or sys.stderr).write(report.text())
        return module


def fuse_function(g: Graph, **options: Any) -> FunctionReport:
    """Fuse the loop nodes of ``g`` in place; return the report (rounds only when ``collect``).
    The garbage collector is paused meanwhile (:func:`~fir.passes.base.paused_gc`)."""
    with paused_gc():
        return _fuse_function(g, **options)


def _fuse_function(
    g: Graph,
    *,
    disable: bool = False,
    horizontal: bool = True,
    max_size: int = 256,
    aggressive: bool = False,
    max_rounds: int = 10,
    reorder: bool = True,
    collect: bool = False,
    options: dict[str, Any] | None = None,
    small_kernels: int = 0,
) -> FunctionReport:
    report = FunctionReport(g.name, dict(options or {}))
    fg = FusionGraph(g)
    small = small_kernels if horizontal else 0
    rules = FusionRules(fg, RuleOptions(max_size, horizontal, aggressive, small))
    rules.keep_details = collect
    adopt_kernels(g, fg, rules)
    loops = [f for f in fg.fnodes.values() if f.kind == "loop"]
    kernels_before = len(loops)
    traffic_before = _total_traffic(fg, loops)
    rounds = 0
    if not disable:
        rounds = _run_rounds(fg, rules, report, collect, max_rounds, reorder)
    write_back(g, fg)
    loops = [f for f in fg.fnodes.values() if f.kind == "loop"]
    report.summary = Summary(
        nodes=len(g.nodes),
        loop_nodes=sum(1 for n in g.nodes if isinstance(n, LoopNode)),
        externs=sum(1 for n in g.nodes if isinstance(n, ExternNode)),
        kernels_before=kernels_before,
        kernels_after=len(loops),
        traffic_before=traffic_before,
        traffic_after=_total_traffic(fg, loops),
        rounds=rounds,
        aliases=sum(1 for n in g.nodes if isinstance(n, AliasNode)),
        copies=view_copies(g),
    )
    if collect:
        from fir.ir.kernels import describe_over, kernel_space, over_of

        for k in g.kernels:
            info, _, _ = kernel_space(k)
            report.kernels.append(
                {
                    "name": k.name,
                    "nodes": [n.results[0].name for n in k.nodes],
                    "over": describe_over(over_of(info)) if info is not None else None,
                    "local": [v.name for v in k.local],
                }
            )
    return report


def _run_rounds(
    fg: FusionGraph,
    rules: FusionRules,
    report: FunctionReport,
    collect: bool,
    max_rounds: int,
    reorder: bool,
) -> int:
    """Plain rounds until one fuses nothing (at most ``max_rounds``); then, with ``reorder``, a
    round that reorders loops to make more pairs legal, and when that fuses something, plain
    rounds again with what is left of the budget. Returns the number of rounds run."""
    done = 0

    def one(reordering: bool) -> int:
        nonlocal done
        done += 1
        rnd = Round(done, len(fg.fnodes), reordering=reordering)
        fused = run_round(fg, rules, rnd, collect, reorder=reordering)
        if collect:
            report.rounds.append(rnd)
        return fused

    def plain(budget: int) -> None:
        for _ in range(budget):
            rules.mismatches = 0
            if one(False) == 0 or len(fg.fnodes) == 1:
                return

    plain(max_rounds)
    # only worth a round when the last one met pairs whose memory deps did not match
    if reorder and len(fg.fnodes) > 1 and rules.mismatches and one(True) > 0 and len(fg.fnodes) > 1:
        plain(max_rounds - done + 1)
    return done


def view_copies(g: Graph) -> list[tuple[str, str]]:
    """The views that ``lower`` had to copy (no alias could express them), with the reason."""
    return [
        (n.result.name, str(n.attrs["copy"]))
        for n in g.nodes
        if isinstance(n, LoopNode) and isinstance(n.attrs.get("copy"), str)
    ]


def _total_traffic(fg: FusionGraph, nodes: list[FusionNode]) -> Any:
    exact: Any = 0
    for f in nodes:
        e, _ = fg.traffic(f)
        exact = exact + e
    if not isinstance(exact, int):
        from fir.ir.symbolic import to_dim

        exact = to_dim(exact)
    return exact


# ---------------------------------------------------------------------------------------------
# One round


class _Entry:
    __slots__ = ("key", "a", "b", "candidate", "ok", "shared", "retry")

    def __init__(
        self,
        key: tuple[int, ...],
        a: int,
        b: int,
        candidate: Candidate | None,
        ok: bool,
        shared: bool,
        retry: bool = False,
    ) -> None:
        self.key = key
        self.a = a
        self.b = b
        self.candidate = candidate
        self.ok = ok
        self.shared = shared  # found through a buffer both use (a fusion never undoes that)
        self.retry = retry  # rejected, but to be tried again (reordering loops)


def run_round(
    fg: FusionGraph, rules: FusionRules, rnd: Round, collect: bool, reorder: bool = False
) -> int:
    """Find, score and try the candidate pairs of one round; returns how many fusions it made.
    ``reorder``: a pair whose memory deps do not match is tried again with the loops of one of
    its nodes (a pointwise node of its own) in another order."""
    rules.profile = PeakProfile(fg)
    entries = find_candidates(fg, rules, collect, retry=("deps-mismatch",) if reorder else ())
    entries.sort(key=lambda e: e.key)
    fused = 0
    for e in entries:
        c = e.candidate
        if not e.ok and not e.retry:
            if c is not None:
                rnd.candidates.append(c)
            continue
        a, b = fg.node_of(e.a), fg.node_of(e.b)
        if c is not None and (
            a.id != e.a
            or b.id != e.b
            or len(a.members) != len(c.node1)
            or len(b.members) != len(c.node2)
        ):
            c.found_as = f"(as {fg.label(a)} + {fg.label(b)})"
        rejection: Rejection | None
        if a is b:
            rejection = Rejection("same-node", "already in one kernel through earlier fusions")
            space = None
        else:
            rejection, space = rules.check(a, b, shared=e.shared)
        forward: set[int] = set()
        if rejection is None:
            rejection, forward = rules.cycle(a, b)
        if rejection is not None and reorder and rejection.code == "deps-mismatch":
            found = try_reordering(fg, rules, a, b)
            if found is not None:
                a, b, space, forward, what = found
                rejection = None
                if c is not None:
                    c.reordered = what
            else:
                first = rejection
                tried = any(_reorderable(f) for f in (a, b))
                note = (
                    "no loop order of the pointwise node(s) makes them match"
                    if tried
                    else "neither can be reordered (a reduction, or a kernel already)"
                )
                rejection = Rejection(
                    "deps-mismatch",
                    lambda first=first, note=note: f"{first.detail}; {note}",  # type: ignore[misc]  # a default-argument capture (python/mypy#15459)
                )
        if rejection is not None:
            if c is not None:
                _reject(c, rejection)
                rnd.candidates.append(c)
            continue
        if c is not None:
            c.decision, c.code, c.reason = "fused", None, None
        fg.make_room(a, b, forward)
        merged = fg.merge(a, b, space)
        assert rules.profile is not None
        rules.profile.merged(merged.id, a.id, b.id)
        fused += 1
        if c is not None:
            c.decision = "fused"
            rnd.candidates.append(c)
    return fused


def try_reordering(
    fg: FusionGraph, rules: FusionRules, a: FusionNode, b: FusionNode
) -> tuple[FusionNode, FusionNode, Any, set[int], str] | None:
    """Another loop order for the pointwise node of the pair (a fusion node of one node; the
    consumer first) that makes the pair legal: (a, b, space, forward, what was done), with the
    node's new order kept, or None with nothing changed. Up to 6 loops are permuted."""
    for x in (b, a):
        if not _reorderable(x):
            continue
        n = fg.nodes[x.id]
        assert isinstance(n, LoopNode)
        old = n.schedule
        current, _ = n.scheduled_vars()
        loops = [
            v
            for v in current
            if not (isinstance(dict(n.ranges)[v], int) and dict(n.ranges)[v] == 1)
        ]
        if not 2 <= len(loops) <= 6:
            continue
        sizes = dict(n.ranges)
        for perm in itertools.permutations(loops):
            if list(perm) == loops:
                continue
            n.schedule = LoopSchedule([Loop((v,), sizes[v]) for v in perm], [])
            fresh = fg.refresh(x.id)
            a2, b2 = (fresh, b) if x is a else (a, fresh)
            rejection, space = rules.check(a2, b2, shared=True)
            forward: set[int] = set()
            if rejection is None:
                rejection, forward = rules.cycle(a2, b2)
            if rejection is None:
                from fir.ir.printer import schedule_str

                fg.reordered.add(x.id)
                return a2, b2, space, forward, f"%{n.results[0].name}: order ({schedule_str(n)})"
        n.schedule = old
        restored = fg.refresh(x.id)
        if x is a:
            a = restored
        else:
            b = restored
    return None


def _reorderable(f: FusionNode) -> bool:
    """The reordering round permutes the loops of a pointwise node of its own only."""
    return f.kind == "loop" and not f.is_reduction and len(f.members) == 1


def find_candidates(
    fg: FusionGraph, rules: FusionRules, collect: bool, retry: tuple[str, ...] = ()
) -> list[_Entry]:
    order = sorted(fg.fnodes.values(), key=lambda f: f.min_order)
    groups: dict[Any, list[FusionNode]] = {}
    for f in order:
        for buf in f.used_buffers():
            groups.setdefault(buf, []).append(f)
    small = rules.options.small_kernels
    if rules.options.aggressive or small:
        for f in order:
            if f.space is None:
                continue
            s = f.space.space
            if rules.options.aggressive or is_small(s, small):
                groups.setdefault(("space", s.numel, s.rnumel, s.reduction), []).append(f)
    seen: set[tuple[int, int]] = set()
    entries: list[_Entry] = []
    for key, members in groups.items():
        shared = not isinstance(key, tuple)  # a buffer's group, not an iteration space's
        for i, a in enumerate(members):
            if not collect and a.kind != "loop":
                continue
            single = len(a.members) == 1
            for b in members[i + 1 : i + 1 + WINDOW]:
                if not collect:
                    # Certain rejections, skipped when no report lists them: an extern or nop
                    # node, or a descendant of ``a`` that reads nothing of it (so it reaches
                    # ``a`` through another node: "intermediate nodes"). A large graph's pairs
                    # are mostly these: nodes far apart that read the same weight.
                    if b.kind != "loop":
                        continue
                    if single and len(b.members) == 1:
                        if a.id not in b.ext_preds and fg.is_ancestor(a.id, b.id):
                            continue
                    elif fg.reaches(a, b) and not b.pred_mask & a.mask:
                        continue
                _consider(fg, rules, a, b, seen, entries, collect, shared, retry)
    return entries


def _consider(
    fg: FusionGraph,
    rules: FusionRules,
    a: FusionNode,
    b: FusionNode,
    seen: set[tuple[int, int]],
    entries: list[_Entry],
    collect: bool,
    shared: bool = False,
    retry: tuple[str, ...] = (),
) -> None:
    key = (a.id, b.id)
    if key in seen or a is b:
        return
    seen.add(key)
    rejection, _ = rules.check(a, b, shared=shared)
    again = rejection is not None and rejection.code in retry
    if rejection is not None and not collect and rejection.code != "order" and not again:
        return
    saved, saved_hint, _ = fg.saved_bytes(a, b)
    type_score = 1 if a.is_reduction == b.is_reduction and saved_hint > 0 else 0
    distance = max(abs(a.min_order - b.max_order), abs(b.min_order - a.max_order))
    sort_key = (-type_score, -saved_hint, distance, a.min_order, b.min_order)
    candidate = None
    if collect:
        vertical = bool(a.mask & b.anc) or bool(b.mask & a.anc)
        candidate = Candidate(
            node1=fg.member_names(a),
            node2=fg.member_names(b),
            label1=fg.label(a),
            label2=fg.label(b),
            kind="vertical" if vertical else "horizontal",
            kinds=f"{_kind(a)}+{_kind(b)}",
            type_score=type_score,
            saved=saved,
            saved_hint=saved_hint,
            distance=distance,
        )
        if rejection is not None:
            _reject(candidate, rejection)
    entries.append(_Entry(sort_key, a.id, b.id, candidate, rejection is None, shared, again))
    if rejection is not None and rejection.code == "order":
        _consider(fg, rules, b, a, seen, entries, collect, shared, retry)


def _kind(f: FusionNode) -> str:
    if f.kind != "loop":
        return f.kind
    if len(f.members) > 1:
        return "kernel"
    return "reduction" if f.is_reduction else "pointwise"


def _reject(c: Candidate, r: Rejection) -> None:
    c.decision = "rejected"
    c.code = r.code
    c.reason = str(r)


# ---------------------------------------------------------------------------------------------
# The result


def write_back(g: Graph, fg: FusionGraph) -> None:
    """Put the nodes in a topological order where each fusion group's nodes stand together, in
    program order where dependencies allow; make a kernel of every group of two or more nodes
    (and of every hand-written one)."""
    units = sorted(fg.fnodes.values(), key=lambda f: f.min_order)
    index = {f.id: k for k, f in enumerate(units)}
    preds = [sorted(index[p] for p in fg.pred[f.id]) for f in units]
    order = topological_order(preds)
    taken = {f.kernel for f in units if f.kernel is not None}
    counter = 0
    nodes = []
    kernels = []
    old = {k.name: k for k in g.kernels}
    for u in order:
        f = units[u]
        members = [fg.nodes[m] for m in f.members]
        nodes.extend(members)
        if len(members) < 2 and f.kernel is None:
            continue
        name = f.kernel
        if name is None:
            while f"k{counter}" in taken:
                counter += 1
            name = f"k{counter}"
            taken.add(name)
        local = [r for n in members for r in n.results if fg.is_local_after(r.name, f.id)]
        before = old.get(name)
        kernels.append(
            Kernel(name, members, local, dict(f.kernel_attrs), loc=before.loc if before else None)
        )
    g.nodes = nodes
    g.kernels = kernels
    # a node whose loops were reordered has new reads and writes (its canonical variables follow
    # the new order): a deps clause from before would be stale
    for k in fg.reordered:
        refresh_recorded_deps(fg.nodes[k], fg.prefix)
    # a memory plan made for another schedule no longer holds
    for n in nodes:
        for key in PLAN_KEYS:
            n.attrs.pop(key, None)
