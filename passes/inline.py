"""``inline``: placeholder, being written (issue 4)."""

from __future__ import annotations

from fir.ir.graph import Module

from .base import Pass


class InlinePass(Pass):
    name = "inline"
    summary = "(not yet written)"

    def apply(self, module: Module) -> Module:
        raise NotImplementedError("inline")
