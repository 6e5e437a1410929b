"""What ``fuse`` decided and why: the report behind ``fuse{explain}``, ``fir-opt
--fusion-report=FILE.json`` and ``--fusion-dot=FILE.dot``.

A :class:`FunctionReport` lists, for every round, every candidate pair in the order the pairs
were tried (score order), with the score's parts and the decision: fused, or the rejection and
its reason. Its summary gives the kernel count before and after and the memory traffic saved.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from fir.ir.graph import AliasNode, ExternNode, Graph, LoopNode, Module
from fir.ir.types import Dim, dim_str


@dataclass
class Candidate:
    """One candidate pair of one round."""

    node1: list[str]  # member names (without %) when the pair was found
    node2: list[str]
    label1: str
    label2: str
    kind: str  # "vertical" or "horizontal"
    kinds: str  # "pointwise+reduction" …
    type_score: int  # 1: same kind of node (both reductions or both not) and some bytes saved
    saved: Dim  # memory traffic one kernel saves over two, in bytes
    saved_hint: int
    distance: int  # how far apart in program order
    decision: str = "pending"  # "fused" or "rejected"
    code: str | None = None  # rejection code
    reason: str | None = None  # rejection reason (title: detail)
    found_as: str = ""  # "(as {…} + %b)" when earlier fusions of the round changed the pair
    reordered: str = ""  # "%t: order (i1 < 16, i0 < 16)": the loop order that made the fusion legal

    def sort_key(self) -> tuple[int, int, int]:
        return (-self.type_score, -self.saved_hint, self.distance)

    def to_json(self) -> dict[str, Any]:
        return {
            "node1": self.node1,
            "node2": self.node2,
            "kind": self.kind,
            "nodes": self.kinds,
            "score": {
                "type": self.type_score,
                "saved_bytes": _json_dim(self.saved),
                "distance": self.distance,
            },
            "decision": self.decision,
            "reason_code": self.code,
            "reason_kind": _reason_kind(self.code),
            "reason": self.reason,
            "tried_as": self.found_as or None,
            "reordered": self.reordered or None,
        }


@dataclass
class Round:
    number: int
    nodes: int  # fusion nodes at the start of the round
    candidates: list[Candidate] = field(default_factory=list)
    reordering: bool = False  # the round that reorders loops to unlock fusions

    @property
    def fused(self) -> int:
        return sum(1 for c in self.candidates if c.decision == "fused")


@dataclass
class Summary:
    nodes: int  # nodes of the function
    loop_nodes: int
    externs: int
    kernels_before: int
    kernels_after: int
    traffic_before: Dim
    traffic_after: Dim
    rounds: int
    aliases: int = 0  # views that are aliases of a buffer's storage: nothing to run
    copies: list[tuple[str, str]] = field(default_factory=list)  # (view copied, why)

    @property
    def saved(self) -> Dim:
        if isinstance(self.traffic_before, int) and isinstance(self.traffic_after, int):
            return self.traffic_before - self.traffic_after
        from fir.ir.symbolic import to_dim

        return to_dim(self.traffic_before - self.traffic_after)

    def line(self, func: str) -> str:
        externs = f" + {_count(self.externs, 'extern call')}" if self.externs else ""
        views = ""
        if self.aliases or self.copies:
            copies = _count(len(self.copies), "copy") if self.copies else "no copies"
            views = f" + {_count(self.aliases, 'alias')} ({copies})"
        text = (
            f"fuse @{func}: {_count(self.loop_nodes, 'loop node')} -> "
            f"{_count(self.kernels_after, 'kernel')}{externs}{views} "
            f"(kernels before: {self.kernels_before}, rounds: {self.rounds}); memory traffic "
            f"{dim_str(self.traffic_before)} -> {dim_str(self.traffic_after)} bytes "
            f"(saved {dim_str(self.saved)})"
        )
        for name, why in self.copies:
            text += f"\n  copy %{name}: {why}"
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "loop_nodes": self.loop_nodes,
            "extern_calls": self.externs,
            "kernels_before": self.kernels_before,
            "kernels_after": self.kernels_after,
            "memory_traffic_before": _json_dim(self.traffic_before),
            "memory_traffic_after": _json_dim(self.traffic_after),
            "memory_traffic_saved": _json_dim(self.saved),
            "rounds": self.rounds,
            "aliases": self.aliases,
            "copies": [{"value": name, "reason": why} for name, why in self.copies],
        }


@dataclass
class FunctionReport:
    func: str
    options: dict[str, Any]
    rounds: list[Round] = field(default_factory=list)
    summary: Summary | None = None
    kernels: list[dict[str, Any]] = field(default_factory=list)  # name, nodes, over, local

    def text(self) -> str:
        lines: list[str] = []
        for r in self.rounds:
            what = " (reordering loops)" if r.reordering else ""
            lines.append(
                f"fuse @{self.func}: round {r.number}{what}: {_count(r.nodes, 'node')}, "
                f"{_count(len(r.candidates), 'candidate pair')}, {r.fused} fused"
            )
            width = max((len(_pair(c)) for c in r.candidates), default=0)
            for k, c in enumerate(r.candidates, 1):
                score = f"type={c.type_score} saved={dim_str(c.saved)} distance={c.distance}"
                decision = "fused" if c.decision == "fused" else f"rejected: {c.reason}"
                if c.reordered:
                    decision += f" after reordering {c.reordered}"
                as_ = f" {c.found_as}" if c.found_as else ""
                lines.append(
                    f"  #{k:<3} {_pair(c):<{width}}  {c.kind:<10} {c.kinds:<21} [{score}]"
                    f"{as_} -> {decision}"
                )
        if self.summary is not None:
            lines.append(self.summary.line(self.func))
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, Any]:
        return {
            "function": self.func,
            "options": self.options,
            "rounds": [
                {
                    "round": r.number,
                    "reordering": r.reordering,
                    "nodes": r.nodes,
                    "candidates": [c.to_json() for c in r.candidates],
                }
                for r in self.rounds
            ],
            "summary": self.summary.to_json() if self.summary else None,
            "kernels": self.kernels,
        }


def _reason_kind(code: str | None) -> str | None:
    """``heuristic`` for a rejection a user may overrule (by hand, or with an option), else
    ``legality`` (or ``already fused``)."""
    if code is None:
        return None
    from .rules import HEURISTIC

    if code == "same-node":
        return "already fused"
    return "heuristic" if code in HEURISTIC else "legality"


def count_noun(n: int, word: str) -> str:
    """``1 kernel``, ``2 kernels``, ``3 aliases``, ``2 copies``."""
    if n == 1:
        return f"{n} {word}"
    if word.endswith(("s", "x")):
        return f"{n} {word}es"
    if word.endswith("y") and word[-2:-1] not in "aeiou":
        return f"{n} {word[:-1]}ies"
    return f"{n} {word}s"


_count = count_noun


def _pair(c: Candidate) -> str:
    return f"{c.label1} + {c.label2}"


def _json_dim(d: Dim) -> int | str:
    return d if isinstance(d, int) else dim_str(d)


def reports_json(reports: list[FunctionReport]) -> str:
    return json.dumps({"functions": [r.to_json() for r in reports]}, indent=2) + "\n"


# ---------------------------------------------------------------------------------------------
# Graphviz


def module_dot(m: Module) -> str:
    """The nodes of every function as a Graphviz graph: a cluster per kernel, local buffers
    dashed, extern calls as ellipses, arrows from producer to reader."""
    lines = [
        "digraph fir {",
        "  rankdir=TB;",
        '  node [shape=box, fontname="monospace", fontsize=10];',
        "  compound=true;",
    ]
    for f in m.funcs:
        lines += _graph_dot(f)
    lines.append("}")
    return "\n".join(lines) + "\n"


def _quote(s: str) -> str:
    """A DOT string: backslashes and quotes escaped, a newline as DOT's ``\\n``."""
    escaped = s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return '"' + escaped + '"'


def _graph_dot(g: Graph) -> list[str]:
    from fir.ir.kernels import describe_over, kernel_space, over_of

    prefix = g.name + "/"
    out = [
        f"  subgraph {_quote('cluster_func_' + g.name)} {{",
        f"    label={_quote('@' + g.name)};",
    ]
    for a in g.args:
        out.append(
            f"    {_quote(prefix + a.name)} [shape=oval, label={_quote(f'%{a.name}: {a.type}')}];"
        )
    kernel_of = g.kernel_of()
    local = {id(v) for k in g.kernels for v in k.local}

    def node_line(n: Any, indent: str) -> str:
        name = n.results[0].name
        if isinstance(n, LoopNode):
            what = "pointwise" if n.reduction is None else f"reduction {n.reduction}"
        elif isinstance(n, ExternNode):
            what = f"extern {n.callee}"
        elif isinstance(n, AliasNode):
            what = "view"  # a view of its base's storage (a graph output, an extern argument)
        else:
            what = getattr(n, "op", type(n).__name__)
        types = ", ".join(str(r.type) for r in n.results)
        label = f"%{name} = {what}\n{types}"
        style = ', style="dashed"' if any(id(r) in local for r in n.results) else ""
        shape = ", shape=ellipse" if isinstance(n, ExternNode) else ""
        return f"{indent}{_quote(prefix + name)} [label={_quote(label)}{shape}{style}];"

    done: set[int] = set()
    for n in g.nodes:
        k = kernel_of.get(id(n))
        if k is None:
            out.append(node_line(n, "    "))
            continue
        if id(k) in done:
            continue
        done.add(id(k))
        info, _, _ = kernel_space(k)
        over = f" over {describe_over(over_of(info))}" if info is not None else ""
        out.append(f"    subgraph {_quote('cluster_' + g.name + '_' + k.name)} {{")
        out.append(f"      label={_quote(f'kernel @{k.name}{over}')};")
        out.append('      style="rounded"; color="blue";')
        for m in k.nodes:
            out.append(node_line(m, "      "))
        out.append("    }")
    producer = {id(r): n for n in g.nodes for r in n.results}
    for n in g.nodes:
        sources: dict[str, None] = {}  # one arrow per producer (a node may read two results)
        for v in n.operand_values():
            src = producer.get(id(v))
            sources[src.results[0].name if src is not None else v.name] = None
        for src_name in sources:
            out.append(f"    {_quote(prefix + src_name)} -> {_quote(prefix + n.results[0].name)};")
    ret = prefix + "return"
    out.append(f'    {_quote(ret)} [shape=plaintext, label="return"];')
    for v in g.outputs:
        src = producer.get(id(v))
        src_name = src.results[0].name if src is not None else v.name
        out.append(f"    {_quote(prefix + src_name)} -> {_quote(ret)};")
    out.append("  }")
    return out
