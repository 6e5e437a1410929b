"""``fir-import``: capture a PyTorch function or module with ``torch.export`` and write its
tensor-level ``.fir``.

    fir-import package.module:function --input f32[8,16] --input i64[8] -o out.fir

The target is ``module:attr`` (``attr`` may be dotted; ``module`` may also be a path to a
``.py`` file). It can be

* a function: traced with the given inputs;
* an ``nn.Module`` subclass: instantiated with no arguments;
* a zero-argument factory returning an ``nn.Module``;
* an ``nn.Module`` instance.

Modules are put in eval mode. ``torch.manual_seed(--seed)`` runs before a module is built, so
its parameters are reproducible. The parameters and buffers that ``torch.export`` lifts become
the *leading* arguments of the FIR function (named ``p_<path>`` / ``b_<path>``), followed by the
user inputs, followed by any large constants. :func:`state_arguments` rebuilds the leading
arguments from a module.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fir.tools.cli import ArgParser, run_main


def build_arg_parser() -> argparse.ArgumentParser:
    p = ArgParser(
        prog="fir-import",
        description="Capture a PyTorch function or nn.Module with torch.export and write its "
        "tensor-level FIR.",
    )
    p.add_argument(
        "target",
        nargs="?",
        help="package.module:function, package.module:ModuleClass, package.module:factory "
        "(a path/to/file.py:name works too)",
    )
    p.add_argument(
        "--input",
        "-i",
        action="append",
        default=[],
        metavar="TYPE",
        help="an example input as a FIR type, e.g. f32[8,16] or i64[8]; repeat in argument order",
    )
    p.add_argument("-o", "--output", default="-", help="output .fir file (default: stdout)")
    p.add_argument(
        "--dynamic",
        action="store_true",
        help="make dim 0 of the first input symbolic (s0), shared by every input of that size",
    )
    p.add_argument("--name", default=None, help="name of the FIR function (default: the target's)")
    p.add_argument("--seed", type=int, default=0, help="seed of the parameters and inputs")
    p.add_argument(
        "--int-high",
        type=int,
        default=None,
        help="integer inputs are drawn from [0, N) (default: the smallest size > 1 of any input)",
    )
    p.add_argument(
        "--report",
        action="store_true",
        help="print every imported op and every fallback (stderr)",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="also run the result with the interpreter and compare it with eager PyTorch",
    )
    p.add_argument(
        "--list-ops",
        action="store_true",
        help="print the aten ops that map to FIR ops (markdown, as in docs/frontend.md) and exit",
    )
    return p


from fir.frontend.targets import (  # noqa: E402  (no torch at import time)
    ImportFailure,
    import_target,
    instantiate,
    make_inputs,
    mapped_ops_markdown,
    parse_input_spec,
    resolve_target,
    state_arguments,
)

__all__ = [
    "ImportFailure",
    "import_target",
    "instantiate",
    "make_inputs",
    "mapped_ops_markdown",
    "parse_input_spec",
    "resolve_target",
    "state_arguments",
]


def main(argv: list[str] | None = None) -> int:
    parser = build_arg_parser()
    args = parser.parse_args(argv)
    if args.list_ops:
        sys.stdout.write(mapped_ops_markdown())
        return 0
    if args.target is None:
        parser.error("the following arguments are required: target")
    try:
        text, module, report, lifted, inputs, _ = import_target(args)
    except ImportFailure as e:
        print(f"fir-import: error: {e}", file=sys.stderr)
        return 1
    try:
        if args.output == "-":
            sys.stdout.write(text)
        else:
            Path(args.output).write_text(text, encoding="utf-8")
    except OSError as e:
        print(f"fir-import: error: cannot write {args.output}: {e.strerror}", file=sys.stderr)
        return 1
    graph = module.funcs[0]
    if args.report:
        print(report.summary(), file=sys.stderr)
        names = ", ".join("%" + a.name for a in graph.args[: len(lifted)]) or "none"
        print(f"lifted parameters/buffers (leading arguments): {names}", file=sys.stderr)
    elif report.fallbacks:
        ops = ", ".join(
            f"{op} ({report.reasons.get(op, 'no FIR mapping')})" for op in sorted(report.fallbacks)
        )
        print(
            f"fir-import: {sum(report.fallbacks.values())} op(s) run by PyTorch: {ops}",
            file=sys.stderr,
        )
    if args.check:
        print("fir-import: check: the interpreter agrees with eager PyTorch", file=sys.stderr)
    return 0


def entry() -> None:
    run_main(main)


if __name__ == "__main__":
    entry()
