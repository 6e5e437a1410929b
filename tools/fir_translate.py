"""``fir-translate``: print what a back end would compile for a FIR program.

    fir-translate prog.fir -p fusion --target plan   # the kernel plans (all back ends share them)
                                                     # and each kernel's loop schedule (C++, LLVM)
    fir-translate prog.fir -p fusion --target cpp    # the C++/OpenMP translation unit
    fir-translate prog.fir -p fusion --target triton # the Triton module (CUDA)
    fir-translate prog.fir -p fusion --target llvm [--opt]  # LLVM IR, before or after O3
    fir-translate prog.fir -p fusion --target call   # the host code that runs the steps
    fir-translate prog.fir -p fusion --lowered cpp   # the plans as the C++ renderer gets them

The program must be at loop level when the pipeline is done (``-p fusion`` takes a tensor-level
program there). Errors are located, exit status 1.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fir.backends.registry import NAMES
from fir.tools.cli import ArgParser, InputError, read_input, run_main

TARGETS = ("plan", *NAMES, "call")


def build_arg_parser() -> argparse.ArgumentParser:
    p = ArgParser(
        prog="fir-translate",
        description="Print the kernel plans or the generated code of a FIR program.",
    )
    p.add_argument("input", nargs="?", default="-", help="input .fir file, or - for stdin")
    p.add_argument("-p", "--pipeline", default="", help="passes to run first, e.g. 'fusion'")
    p.add_argument("--target", choices=TARGETS, default="plan", help="what to print")
    p.add_argument("-o", "--output", default="-", help="output file (default: stdout)")
    p.add_argument("--opt", action="store_true", help="--target llvm: the IR after O3")
    p.add_argument(
        "--lowered",
        choices=NAMES,
        metavar="BACKEND",
        help="--target plan: the plans as BACKEND's renderer receives them (planned as it "
        "plans, ops it does not write lowered to primitive ones)",
    )
    return p


def translate(module: object, target: str, opt: bool = False, lowered: str | None = None) -> str:
    """What ``target`` prints for ``module``: the plans, the host call, or the code a back
    end compiles (planned as that back end plans: the same text it builds)."""
    from fir.backends.plan import plan_module
    from fir.backends.registry import backend_named

    if target == "call":
        return _calls(plan_module(module))  # type: ignore[arg-type]
    if target == "plan" and lowered:
        b = backend_named(lowered)
        return "\n".join(b.plan(g).text(b.lowered) for g in module.funcs)  # type: ignore[attr-defined]
    if target == "plan":
        return "\n".join(_plan_text(g) for g in module.funcs)  # type: ignore[attr-defined]
    backend = backend_named(target)
    texts = []
    for g in module.funcs:  # type: ignore[attr-defined]
        plan = backend.plan(g)
        text = backend.render(plan)
        if opt and target == "llvm":
            from fir.backends.llvm.build import optimise

            text = str(optimise(text, plan.name)[0])
        texts.append(text)
    return "\n".join(texts)


def _plan_text(g: object) -> str:
    """A function's plan, then each kernel's schedule: one line per kernel and back end, each
    scheduled from the plan that back end renders (the LLVM back end keeps no scratch row in a
    column reduction; Triton keeps them only in a persistent reduction): the scalar loop-nest
    family's (C++, LLVM, with this machine's measured choices, as they render), then the
    block family's (Triton)."""
    from fir.backends.cpu_tuning import CPP_TUNED, LLVM_TUNED
    from fir.backends.plan import plan_program
    from fir.backends.plan.block_schedule import schedule_lines
    from fir.backends.plan.schedule import schedule
    from fir.backends.registry import backend_named

    plan = plan_program(g)  # type: ignore[arg-type]
    llvm = {k.name: k for k in backend_named("llvm").plan(g).kernels()}  # type: ignore[arg-type]
    lines = []
    for k in plan.kernels():
        lines.append(schedule(k, CPP_TUNED).text())
        lines.append(schedule(llvm[k.name], LLVM_TUNED).text())
    lines += schedule_lines(g)  # the block family's (Triton's), from the plan it renders
    return plan.text() + ("\n" + "\n".join(lines) + "\n" if lines else "")


def _calls(plans: list[object]) -> str:
    """Each program's generated call (the runtime's fast path), with its constants; kernels
    are not compiled for this, so the call is shown, not run."""
    from fir.backends.runtime import CompiledProgram
    from fir.backends.runtime.call_source import describe_constants
    from fir.ir.errors import FirError

    class _NotCompiled:
        """Kernels that are named, never run: the call is printed, not made."""

        def call(self, name: str, pointers: list[object], sizes: list[int]) -> tuple[int, int]:
            raise FirError(f"kernel {name}: fir-translate prints the call and compiles no kernel")

    out = []
    for plan in plans:
        program = CompiledProgram(plan, _NotCompiled())  # type: ignore[arg-type]
        name = plan.name  # type: ignore[attr-defined]
        fast = program.fast
        if fast is None:
            out.append(
                f"# @{name}: sizes are symbolic or an input has a layout of its own; the "
                "runtime's general path runs it (no generated call)\n"
            )
            continue
        out.append(f"# @{name}\n{fast.source}\n{describe_constants(fast.constants, fast.labels)}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = build_arg_parser().parse_args(argv)
    from fir.ir.errors import FirError
    from fir.passes.pipeline import parse_pipeline
    from fir.passes.verify import read_program

    if args.lowered and args.target != "plan":
        print("fir-translate: error: --lowered goes with --target plan", file=sys.stderr)
        return 1
    name = "<stdin>" if args.input == "-" else args.input
    try:
        text = read_input(args.input)
    except InputError as e:
        print(e.render("fir-translate"), file=sys.stderr)
        return 1
    try:
        pipeline = parse_pipeline(args.pipeline)
        module = read_program(text, name)
        module = pipeline.run(module)
        out = translate(module, args.target, args.opt, args.lowered)
    except FirError as e:
        print(e.render(), file=sys.stderr)
        return 1
    try:
        if args.output == "-":
            sys.stdout.write(out)
        else:
            Path(args.output).write_text(out, encoding="utf-8")
    except OSError as e:
        print(f"fir-translate: error: cannot write {args.output}: {e.strerror}", file=sys.stderr)
        return 1
    return 0


def entry() -> None:
    run_main(main)


if __name__ == "__main__":
    entry()
