"""Kernel plans: what every back end renders, computed once from a fused, ordered, planned
function (see :mod:`.kernel` for one kernel, :mod:`.program` for a function's steps and
buffers, :mod:`.instructions` for the instruction list renderers walk)."""

from .indexing import KLoop
from .instructions import DIVISION_BY_ZERO, INSTRUCTIONS, Instr, instr_str
from .kernel import Arg, KernelPlan, PlanError, plan_kernel
from .program import (
    AliasStep,
    Buffer,
    ExternStep,
    KernelStep,
    ProgramPlan,
    Storage,
    plan_module,
    plan_program,
)

__all__ = [
    "DIVISION_BY_ZERO",
    "INSTRUCTIONS",
    "AliasStep",
    "Arg",
    "Buffer",
    "ExternStep",
    "Instr",
    "KLoop",
    "KernelPlan",
    "KernelStep",
    "PlanError",
    "ProgramPlan",
    "Storage",
    "instr_str",
    "plan_kernel",
    "plan_module",
    "plan_program",
]
