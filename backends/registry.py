"""The back ends, named in one place: what each is, where its programs run, how it plans,
what it renders and how it builds.

Every reader of the list takes it from here: ``compile_function``, ``fir-translate --target``,
``fir-run --backend`` and the ``backend`` option of ``torch.compile(backend="fir")``. Each
back end plans a function once (:meth:`Backend.plan`), renders the plan to the code it
compiles (:meth:`Backend.render`, what ``fir-translate`` prints) and builds that same code
(:meth:`Backend.compile`), so the printed code is the built code (a test checks it for each
back end). Imports of the back ends' modules (llvmlite, Triton, torch) wait for the first use.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fir.ir.errors import FirError

if TYPE_CHECKING:
    from fir.ir.graph import Graph

    from .plan import KernelPlan, ProgramPlan
    from .plan.lowering import Native
    from .runtime import CompiledProgram


@dataclass(frozen=True)
class Backend:
    """One back end. ``device``: the kind of device its programs' tensors are on (``cpu``,
    ``cuda``); ``pipeline``: the pass pipeline that takes an imported graph to what it
    compiles."""

    name: str
    summary: str
    device: str
    pipeline: str

    def scratch_rows(self) -> Callable[[KernelPlan], bool] | None:
        """Which kernels may keep a row in scratch memory (:func:`plan_kernel`'s rule); None:
        the plan's default."""
        return None

    def launch_rows(self) -> int | None:
        """The longest row of a symbolic length that a kernel's persistent variant chosen at
        launch holds (:func:`plan_kernel`'s ``launch_rows``); None: no such variants."""
        return None

    def plan(self, g: Graph) -> ProgramPlan:
        from .plan import plan_program

        return plan_program(g, scratch_rows=self.scratch_rows(), launch_rows=self.launch_rows())

    def render(self, plan: ProgramPlan) -> str:
        """The code this back end compiles for ``plan``."""
        raise NotImplementedError

    def native_ops(self) -> Native:
        """The ops its renderer writes itself; the plan lowers the others to primitive ops
        (:func:`~fir.backends.plan.lowering.lower`) before rendering."""
        raise NotImplementedError

    def lowered(self, plan: KernelPlan) -> KernelPlan:
        """A kernel plan as this back end's renderer receives it: its ops lowered to the ones
        it writes (what ``fir-translate --target plan --lowered NAME`` prints)."""
        from .plan.lowering import lower

        return lower(plan, self.native_ops())

    def build(self, plan: ProgramPlan, device: str, autotune: bool) -> Any:
        """The kernels of ``plan``, compiled and loaded (what the runtime calls)."""
        raise NotImplementedError

    def default_device(self) -> str:
        return self.device

    def compile(
        self, g: Graph, device: str | None = None, autotune: bool = False
    ) -> CompiledProgram:
        from .runtime import CompiledProgram

        plan = self.plan(g)
        where = device or self.default_device()
        kernels = self.build(plan, where, autotune)
        if self.device == "cpu":
            return CompiledProgram(plan, kernels)
        return CompiledProgram(plan, kernels, where)


class _Cpp(Backend):
    def render(self, plan: ProgramPlan) -> str:
        from .cpp.render import render_program

        return render_program(plan)

    def native_ops(self) -> Native:
        from .cpp.ops import NATIVE_OPS

        return NATIVE_OPS

    def build(self, plan: ProgramPlan, device: str, autotune: bool) -> Any:
        from .cpp import build_program

        return build_program(plan)


class _LLVM(Backend):
    def scratch_rows(self) -> Callable[[KernelPlan], bool] | None:
        # the schedule's rule: every column reduction of this back end runs as column blocks,
        # which keep no row
        from .plan.schedule import keeps_scratch_rows

        return keeps_scratch_rows

    def render(self, plan: ProgramPlan) -> str:
        from .llvm.build import module_text

        return module_text(plan)

    def native_ops(self) -> Native:
        from .llvm.render import native

        return native

    def build(self, plan: ProgramPlan, device: str, autotune: bool) -> Any:
        from .llvm import build_program

        return build_program(plan)


class _Triton(Backend):
    def scratch_rows(self) -> Callable[[KernelPlan], bool] | None:
        # the block schedule's rule: a row stays in registers in a persistent reduction only
        from .plan.block_schedule import keeps_rows

        return keeps_rows

    def launch_rows(self) -> int | None:
        from .plan.block_schedule import PERSISTENT_MAX

        return PERSISTENT_MAX

    def render(self, plan: ProgramPlan) -> str:
        from .triton.render import render_program

        return render_program(plan)[0]

    def native_ops(self) -> Native:
        from .triton.ops import NATIVE_OPS

        return NATIVE_OPS

    def build(self, plan: ProgramPlan, device: str, autotune: bool) -> Any:
        from .triton import build_program

        return build_program(plan, device, autotune=autotune)

    def default_device(self) -> str:
        """CUDA, or the CPU where Triton's interpreter runs the kernels on CPU tensors."""
        return "cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda"


BACKENDS: dict[str, Backend] = {
    b.name: b
    for b in (
        _Cpp("cpp", "C++/OpenMP, compiled by the system's C++ compiler (CPU)", "cpu", "fusion"),
        _Triton("triton", "Triton kernels (CUDA; TRITON_INTERPRET=1: the CPU)", "cuda", "cuda"),
        _LLVM("llvm", "LLVM IR, compiled in the process by llvmlite (CPU)", "cpu", "fusion"),
    )
}
NAMES: tuple[str, ...] = tuple(BACKENDS)


def backend_named(name: str) -> Backend:
    """The back end ``name``; an unknown name is a :class:`FirError` listing the known ones."""
    b = BACKENDS.get(name)
    if b is None:
        raise FirError(f"unknown code generator '{name}' (choose from {', '.join(NAMES)})")
    return b


def for_device(kind: str) -> Backend | None:
    """The back end that compiles for tensors on a ``kind`` device (the first listed)."""
    return next((b for b in BACKENDS.values() if b.device == kind), None)
