"""``fir.explain(fn, *args, **kwargs)``: the "one graph, no breaks, few kernels" check.

Two runs of ``fn``:

1. ``torch._dynamo.explain`` captures it and reports the graphs and the graph breaks (with
   their reasons and where in the user's code they happen);
2. ``torch.compile(fn, backend="fir")`` compiles and runs it, and the import reports of the
   graphs compiled during that call (:data:`fir.frontend.dynamo.COMPILED`) say which aten ops
   became FIR ops and which fell back to PyTorch. A graph FIR could not import at all runs with
   PyTorch; its reason is listed too.

``fn`` runs twice, so a function with side effects (mutating an input, printing) shows them
twice. Both runs reset Dynamo's caches (``torch._dynamo.explain`` always does).
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

KERNELS_UNKNOWN = (
    "kernel count: not known, the pipeline stops before loop level (compile with "
    "options={'pipeline': 'fusion'})"
)


@dataclass
class GraphBreak:
    reason: str  # first line of Dynamo's reason
    location: str  # "file:line in function" of the user code that broke the graph, or ""

    def __str__(self) -> str:
        return f"{self.reason} ({self.location})" if self.location else self.reason


@dataclass
class Explanation:
    """What Dynamo captured and what FIR made of it."""

    graph_count: int
    graph_breaks: list[GraphBreak]
    compiled_graphs: list[str]  # names of the graphs FIR compiled (fir.frontend.dynamo.COMPILED)
    imported: Counter[str] = field(default_factory=Counter)  # aten op → count, mapped to FIR
    fallbacks: Counter[str] = field(default_factory=Counter)  # aten op → count, run by PyTorch
    fallback_reasons: dict[str, str] = field(default_factory=dict)
    graphs_run_by_pytorch: list[str] = field(default_factory=list)  # why FIR refused a graph
    kernel_count: int | None = None  # None when the pipeline stops at tensor level
    fusion_summary: str | None = None
    extern_count: int = 0  # library calls (matmul, attention, ops FIR has no lowering for)
    alias_count: int = 0  # views that are aliases of a buffer's storage: no kernel, no copy
    copies: list[str] = field(default_factory=list)  # "%v: why" for each view still copied
    # collective calls and their waits (``effect = "collective"``), in program order
    collectives: list[str] = field(default_factory=list)
    # for each collective: where its wait stands and what runs between them (the overlap)
    waits: list[str] = field(default_factory=list)

    @property
    def graph_break_count(self) -> int:
        return len(self.graph_breaks)

    def summary(self) -> str:
        lines = [
            f"graphs: {self.graph_count}, graph breaks: {self.graph_break_count}",
        ]
        for k, b in enumerate(self.graph_breaks, 1):
            lines.append(f"  break {k}: {b}")
        lines.append(
            f"FIR compiled {len(self.compiled_graphs)} graph(s); "
            f"imported ops: {sum(self.imported.values())} ({len(self.imported)} kinds), "
            f"fallback ops: {sum(self.fallbacks.values())}"
        )
        for name, count in sorted(self.imported.items()):
            lines.append(f"  {name} x{count}")
        if self.fallbacks:
            lines.append("ops run by PyTorch (extern calls):")
            for name, count in sorted(self.fallbacks.items()):
                lines.append(f"  {name} x{count}: {self.fallback_reasons.get(name, '')}")
        for why in self.graphs_run_by_pytorch:
            lines.append(f"graph run by PyTorch: {why}")
        if self.kernel_count is None:
            lines.append(KERNELS_UNKNOWN)
        else:
            copies = _count(len(self.copies), "copy") if self.copies else "no copies"
            lines.append(
                f"kernels: {self.kernel_count}, extern calls: {self.extern_count}, "
                f"views: {_count(self.alias_count, 'alias')} ({copies})"
            )
            lines.extend(f"  copy {c}" for c in self.copies)
            if self.fusion_summary:
                lines.append(self.fusion_summary)
        if self.collectives:
            lines.append(
                f"collectives: {len(self.collectives)} in program order: "
                + ", ".join(self.collectives)
            )
            lines.extend(f"  {w}" for w in self.waits)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def _graph_break(reason: Any) -> GraphBreak:
    text = str(getattr(reason, "reason", reason))
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), text)
    stack = list(getattr(reason, "user_stack", None) or [])
    location = ""
    if stack:
        frame = stack[-1]
        location = f"{frame.filename}:{frame.lineno} in {frame.name}"
    return GraphBreak(first, location)


def explain_call(
    fn: Callable[..., Any],
    args: tuple[Any, ...] = (),
    kwargs: dict[str, Any] | None = None,
    options: dict[str, Any] | None = None,
) -> Explanation:
    """Explain ``fn(*args, **kwargs)`` compiled with ``backend="fir"`` and ``options``."""
    import torch
    import torch._dynamo

    from . import dynamo as fir_backend

    kwargs = kwargs or {}
    # unless told otherwise, the back end's own pipeline (down to fused kernels): what runs
    options = dict(options or {})
    dynamo = torch._dynamo.explain(fn)(*args, **kwargs)
    breaks = [_graph_break(r) for r in dynamo.break_reasons]

    torch._dynamo.reset()
    first = len(fir_backend.COMPILED)
    first_fallback = len(fir_backend.FALLBACKS)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = torch.compile(fn, backend="fir", options=options)
        compiled(*args, **kwargs)
    # every graph run by PyTorch is recorded with its reason; its warning is not repeated
    fell_back = fir_backend.FALLBACKS[first_fallback:]
    refused = [f.reason if f.kind == "inference" else f"{f.kind}: {f.reason}" for f in fell_back]
    warned = {f"fir: running this graph with PyTorch: {f.reason}" for f in fell_back}
    for w in caught:
        if str(w.message) not in warned and "PyTorch runs this graph" not in str(w.message):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)

    graphs = fir_backend.COMPILED[first:]
    ex = Explanation(
        graph_count=dynamo.graph_count,
        graph_breaks=breaks,
        compiled_graphs=[g.name for g in graphs],
        graphs_run_by_pytorch=refused,
    )
    for g in graphs:
        ex.imported.update(g.report.imported)
        ex.fallbacks.update(g.report.fallbacks)
        for k, v in g.report.reasons.items():
            ex.fallback_reasons.setdefault(k, v)
    ex.kernel_count, ex.fusion_summary = _kernel_figures([g.module for g in graphs])
    if ex.kernel_count is not None:
        _count_views(ex, [g.module for g in graphs])
    ex.collectives = _collectives([g.module for g in graphs])
    ex.waits = [w for g in graphs for f in g.module.funcs for w in wait_placement(f)]
    return ex


def wait_placement(f: Any) -> list[str]:
    """For each collective call of ``f`` (after the pipeline): what runs between it and its
    wait, which is the work that overlaps the communication, and the node the wait stands
    before."""
    from fir.ir.externs import effect_of, is_wait
    from fir.ir.graph import AliasNode, ExternNode

    kernel_of = f.kernel_of()
    out: list[str] = []
    nodes = list(f.nodes)
    for pos, n in enumerate(nodes):
        if effect_of(n) != "collective" or is_wait(n):
            continue
        data = n.results[0]
        wait_pos = next(
            (
                k
                for k in range(pos + 1, len(nodes))
                if is_wait(nodes[k]) and any(a is data for a in nodes[k].args)
            ),
            None,
        )
        what = f"{_short(n.callee)} %{data.name}"
        if wait_pos is None:
            out.append(f"{what}: no wait in this graph (a later graph waits)")
            continue
        units: list[str] = []
        for m in nodes[pos + 1 : wait_pos]:
            if isinstance(m, AliasNode) or is_wait(m):  # a view or a wait: no work runs
                continue
            k = kernel_of.get(id(m))
            label = (
                f"kernel @{k.name}"
                if k is not None
                else (
                    f"{_short(m.callee)} %{m.results[0].name}"
                    if isinstance(m, ExternNode)
                    else f"%{m.results[0].name}"
                )
            )
            if label not in units:
                units.append(label)
        # the work the wait holds back: the first node after it that is not a view or another
        # wait (waits in a row stand before the same work)
        later = [m for m in nodes[wait_pos + 1 :] if not (isinstance(m, AliasNode) or is_wait(m))]
        after = later[0] if later else None
        if after is None:
            where = "at the end of the graph"
        else:
            k = kernel_of.get(id(after))
            name = f"kernel @{k.name}" if k is not None else f"%{after.results[0].name}"
            reads = any(v is data for v in after.operand_values()) or (
                k is not None and any(v is data for m in k.nodes for v in m.operand_values())
            )
            where = f"before {name}" + (", which reads the data" if reads else "")
        overlap = (
            f"overlapped by {len(units)}: {', '.join(units)}"
            if units
            else "nothing overlaps it (everything after the collective needs its data)"
        )
        out.append(f"{what}: wait {where}; {overlap}")
    return out


def _short(callee: str) -> str:
    """``_c10d_functional.all_reduce.default`` -> ``all_reduce``."""
    return callee.split(".")[1] if callee.count(".") == 2 else callee


def _collectives(modules: list[Any]) -> list[str]:
    """``all_reduce``, ``wait_tensor`` …: the collective calls of the compiled graphs."""
    from fir.ir.graph import ExternNode

    return [
        n.callee.split(".")[1] if n.callee.count(".") == 2 else n.callee
        for m in modules
        for f in m.funcs
        for n in f.nodes
        if isinstance(n, ExternNode) and n.attrs.get("effect") == "collective"
    ]


def _count_views(ex: Explanation, modules: list[Any]) -> None:
    from fir.ir.graph import AliasNode, ExternNode, LoopNode

    for m in modules:
        for f in m.funcs:
            for n in f.nodes:
                if isinstance(n, ExternNode):
                    ex.extern_count += 1
                elif isinstance(n, AliasNode):
                    ex.alias_count += 1
                elif isinstance(n, LoopNode) and isinstance(n.attrs.get("copy"), str):
                    ex.copies.append(f"%{n.result.name}: {n.attrs['copy']}")


def _kernel_figures(modules: list[Any]) -> tuple[int | None, str | None]:
    """Kernels the compiled graphs launch (fused groups and loop nodes in none) and a line on
    how they came about; (None, None) when a graph is still at tensor level."""
    from fir.ir.graph import ExternNode, LoopNode, TensorOp
    from fir.ir.kernels import kernel_count

    kernels = loops = externs = groups = 0
    for m in modules:
        for f in m.funcs:
            if any(isinstance(n, TensorOp) for n in f.nodes):
                return None, None
            kernels += kernel_count(f)
            loops += sum(1 for n in f.nodes if isinstance(n, LoopNode))
            externs += sum(1 for n in f.nodes if isinstance(n, ExternNode))
            groups += len(f.kernels)
    return kernels, (
        f"fusion: {_count(loops, 'loop node')} -> {_count(kernels, 'kernel')} "
        f"({_count(groups, 'fused group')}); {_count(externs, 'extern call')}"
    )


def _count(n: int, word: str) -> str:
    from fir.passes.fusion.report import count_noun

    return count_noun(n, word)


def explain(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Explanation:
    """Explain ``fn(*args, **kwargs)``, print the summary, and return it."""
    ex = explain_call(fn, args, kwargs)
    print(ex.summary())
    return ex
