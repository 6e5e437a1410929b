"""``deps``: placeholder, being written (issue 4)."""

from __future__ import annotations

from fir.ir.graph import Module

from .base import Pass


class DepsPass(Pass):
    name = "deps"
    summary = "(not yet written)"

    def apply(self, module: Module) -> Module:
        raise NotImplementedError("deps")
