"""Checking a program: :func:`verify_program`, what every tool runs on a program it reads
(:func:`read_program`), and the ``verify`` pass.

The IR's verifier (:func:`fir.ir.verifier.verify_module`) checks that a program is well formed
(scoping, typing, static bounds, kernels whose members share an iteration space). Whether a
hand-written kernel is *legal*, its nodes able to run as one loop nest with no dependence
crossing it the wrong way, is checked here (:func:`check_kernels`, by the fusion rules of
:mod:`.fusion.rules`); the ``fuse`` pass starts from its input's kernels with the same check
(:func:`adopt_kernels`). :func:`verify_program` runs both checks so that no tool reads a
program without either.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from fir.ir.errors import FirError
from fir.ir.graph import Graph, Kernel, Module
from fir.ir.verifier import verify_module

from .base import Pass

if TYPE_CHECKING:
    from .fusion.fusion_graph import FusionGraph
    from .fusion.rules import FusionRules


def verify_program(module: Module) -> None:
    """Raise a located :class:`~fir.ir.errors.FirError` for the first problem of ``module``:
    the verifier's, then an illegal hand-written kernel."""
    verify_module(module)
    if any(f.kernels for f in module.funcs):
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


# ---------------------------------------------------------------------------------------------
# Hand-written kernels: legality


def check_kernels(module: Module) -> None:
    """Raise a located :class:`FirError` for the first kernel of ``module`` that is not legal
    (the IR's verifier checks only that kernels are well formed)."""
    from .fusion.fusion_graph import FusionGraph
    from .fusion.rules import FusionRules, RuleOptions

    for g in module.funcs:
        if g.kernels:
            fg = FusionGraph(g)
            adopt_kernels(g, fg, FusionRules(fg, RuleOptions()))


def adopt_kernels(
    g: Graph, fg: FusionGraph, rules: FusionRules, kernels: list[Kernel] | None = None
) -> None:
    """Make one fusion node of each kernel of the input, checking that it is legal (the checks
    that are heuristics, such as "no shared data", do not apply to what a user wrote): the
    kernel's iteration space as a whole, then each member against the node of those before
    it, by the fusion rules (``fuse`` calls this to start from the kernels of its input)."""
    from fir.ir.kernels import kernel_space

    for k in g.kernels if kernels is None else kernels:
        # the iteration space of the whole kernel first (a pointwise node may fit only the
        # reduction written after it); then the nodes one by one, in the order they run
        info, bad, why = kernel_space(k)
        if info is None:
            raise FirError(
                f"kernel @{k.name} is not legal: incompatible iteration spaces: {why}",
                (bad.loc if bad is not None else None) or k.loc,
            )
        members = [fg.pos_of[id(n)] for n in k.nodes]
        f = fg.fnodes[fg.find(members[0])]
        for m in members[1:]:
            other = fg.fnodes[fg.find(m)]
            rejection, space = rules.check(f, other, hand_written=True)
            forward: set[int] = set()
            if rejection is None:
                rejection, forward = rules.cycle(f, other)
            if rejection is not None:
                node = fg.nodes[m]
                raise FirError(
                    f"kernel @{k.name} is not legal: %{fg.names[m]} cannot run in one kernel "
                    f"with {fg.label(f)}: {rejection}",
                    node.loc or k.loc,
                )
            fg.make_room(f, other, forward)
            f = fg.merge(f, other, space)
        f.space = info
        f.kernel = k.name
        f.kernel_attrs = dict(k.attrs)
        if f.nofuse and len(f.members) > 1:
            node = next(fg.nodes[m] for m in f.members if fg.nodes[m].attrs.get("nofuse") is True)
            raise FirError(
                f"kernel @{k.name} is not legal: %{node.results[0].name} is marked nofuse = true",
                node.loc or k.loc,
            )


class VerifyPass(Pass):
    name = "verify"
    summary = "check scoping, typing, static bounds and hand-written kernels; change nothing"

    def apply(self, module: Module) -> Module:
        verify_program(module)
        return module
