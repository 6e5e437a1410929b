"""``plan-memory``: placeholder, being written (issue 4)."""

from __future__ import annotations

from fir.ir.graph import Module

from .base import Pass


class PlanMemoryPass(Pass):
    name = "plan-memory"
    summary = "(not yet written)"

    def apply(self, module: Module) -> Module:
        raise NotImplementedError("plan-memory")
