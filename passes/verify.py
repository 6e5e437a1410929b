"""``verify``: run the verifier (the driver also does so after every pass)."""

from __future__ import annotations

from fir.ir.graph import Module
from fir.ir.verifier import verify_module

from .base import Pass


class VerifyPass(Pass):
    name = "verify"
    summary = "check scoping, typing and static bounds; change nothing"

    def apply(self, module: Module) -> Module:
        verify_module(module)
        return module
