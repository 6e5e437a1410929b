"""``decompose``: placeholder, being written (issue 4)."""

from __future__ import annotations

from fir.ir.graph import Module

from .base import Pass


class DecomposePass(Pass):
    name = "decompose"
    summary = "(not yet written)"

    def apply(self, module: Module) -> Module:
        raise NotImplementedError("decompose")
