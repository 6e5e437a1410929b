"""``lower``: tensor-level ops → loop-level nodes; views become index expressions.

Every tensor-level op becomes a :class:`~fir.ir.graph.LoopNode` (``pointwise`` or ``reduction``)
that keeps the op's name, or an :class:`~fir.ir.graph.ExternNode` calling a library op (matmul,
composites ``decompose`` left whole). Views make no node: each value has an
:class:`~fir.passes.lowering.view_indexing.Access` (where its elements live in the storage of a realized
buffer), and a view's access is its operand's composed with the view's index map, so readers of
a view load the underlying buffer directly. A view that must exist as a tensor (a graph output,
an argument of an extern call, a buffer a pre-existing loop node loads) is materialised by a
pointwise copy node that takes the view's name.

The per-op rules are in :mod:`fir.passes.lowering.lowerings`, the view algebra in
:mod:`fir.passes.lowering.view_indexing` and the ATen fallbacks in :mod:`fir.passes.lowering.library_calls`.
"""

from __future__ import annotations

from fir.ir.graph import Module

from ..base import Option, Pass
from .graph_lowering import GraphLowering
from .lowerings import LOWERINGS


class LowerPass(Pass):
    name = "lower"
    summary = "tensor-level ops to loop-level nodes; views become index expressions"
    options = {
        "keep-views": Option(
            bool, False, "materialise every view as a pointwise copy node (an ablation)"
        ),
    }

    def apply(self, module: Module) -> Module:
        for key in ("loop-nodes", "views-folded", "externs", "aliases", "copies"):
            self.statistics.setdefault(key, 0)
        for g in module.funcs:
            GraphLowering(g, LOWERINGS, self.keep_views, self.statistics).run()  # type: ignore[attr-defined]
        return module
