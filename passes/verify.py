"""Checking a program: :func:`verify_program`, what every tool runs on a program it reads
(:func:`read_program`), and the ``verify`` pass.

The IR's verifier (:func:`fir.ir.verifier.verify_module`) checks that a program is well formed
(scoping, typing, static bounds, kernels whose members share an iteration space). Whether a
hand-written kernel is *legal*, its nodes able to run as one loop nest with no dependence
crossing it the wrong way, is the fusion rules' question, which live with ``fuse``; this module
puts both checks behind one call so that no tool reads a program without either.
"""

from __future__ import annotations

from collections.abc import Callable

from fir.ir.graph import Module
from fir.ir.verifier import verify_module

from .base import Pass


def verify_program(module: Module) -> None:
    """Raise a located :class:`~fir.ir.errors.FirError` for the first problem of ``module``:
    the verifier's, then an illegal hand-written kernel."""
    verify_module(module)
    if any(f.kernels for f in module.funcs):
        from .fusion.fuse import check_kernels

        check_kernels(module)


def read_program(
    text: str, name: str, line_offset: int = 0, lap: Callable[[str], None] | None = None
) -> Module:
    """``text`` parsed and checked (:func:`verify_program`): how fir-opt, fir-run,
    fir-translate and triton-target read a ``.fir`` file. ``lap`` is told "parse" and
    "verify" as each part ends (fir-opt's ``--timing``)."""
    from fir.ir.parser import parse_module

    module = parse_module(text, name, line_offset)
    if lap is not None:
        lap("parse")
    verify_program(module)
    if lap is not None:
        lap("verify")
    return module


class VerifyPass(Pass):
    name = "verify"
    summary = "check scoping, typing, static bounds and hand-written kernels; change nothing"

    def apply(self, module: Module) -> Module:
        verify_program(module)
        return module
