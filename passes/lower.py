"""``lower``: placeholder, being written (issue 4)."""

from __future__ import annotations

from fir.ir.graph import Module

from .base import Pass


class LowerPass(Pass):
    name = "lower"
    summary = "(not yet written)"

    def apply(self, module: Module) -> Module:
        raise NotImplementedError("lower")
