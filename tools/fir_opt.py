"""``fir-opt``: parse a .fir file, run a pass pipeline, print the result (like mlir-opt).

Kept thin: parsing, passes and printing are library calls. Torch and sympy are never imported
here; a pass that needs them imports them itself.
"""

from __future__ import annotations

import time

_IMPORTED = time.perf_counter()  # before anything heavy: the start of fir-opt's own time

import argparse  # noqa: E402
import gc  # noqa: E402
import sys  # noqa: E402
from typing import Any  # noqa: E402

from fir.tools.cli import ArgParser, InputError, read_input, run_main, seconds_since_process_start  # noqa: E402

SPLIT_MARKER = "// -----"


def build_arg_parser() -> argparse.ArgumentParser:
    p = ArgParser(
        prog="fir-opt",
        description="Run a pass pipeline over a FIR program and print the result.",
    )
    p.add_argument("input", nargs="?", default="-", help="input .fir file, or - for stdin")
    p.add_argument("-p", "--pipeline", default="", help="passes, e.g. 'canonicalize,cse'")
    p.add_argument("-o", "--output", default="-", help="output file (default: stdout)")
    p.add_argument(
        "--split-input-file",
        action="store_true",
        help="treat '// -----' lines as separators of independent inputs",
    )
    p.add_argument(
        "--print-ir-after-all", action="store_true", help="print the IR after every pass (stderr)"
    )
    p.add_argument(
        "--print-ir-after",
        action="append",
        default=[],
        metavar="PASS",
        help="print the IR after the named pass (stderr); may be repeated",
    )
    p.add_argument(
        "--verify-each",
        dest="verify_each",
        action="store_true",
        default=True,
        help="verify after every pass (default)",
    )
    p.add_argument(
        "--no-verify-each", dest="verify_each", action="store_false", help="verify only the input"
    )
    p.add_argument("--timing", action="store_true", help="report the time of each stage (stderr)")
    p.add_argument(
        "--stats",
        action="store_true",
        help="report node counts, peak memory and pass statistics of each function (stderr)",
    )
    p.add_argument(
        "--fusion-report",
        metavar="FILE.json",
        help="write every candidate pair of every round of each 'fuse' pass, with scores and "
        "decisions, and its summary, as JSON",
    )
    p.add_argument(
        "--fusion-dot",
        metavar="FILE.dot",
        help="write the result's nodes and kernels (fusion groups) as a Graphviz graph",
    )
    p.add_argument("--list-passes", action="store_true", help="list passes, options and pipelines")
    return p


def list_passes() -> str:
    from fir.passes import registry

    lines = ["Passes:"]
    for name in registry.pass_names():
        cls = registry.get_pass_class(name)
        lines.append(f"  {name:<16} {cls.summary}")
        for key, opt in cls.options.items():
            lines.append(f"      {key}={opt.type_name()} (default {opt.default!r})  {opt.help}")
    lines.append("Pipelines:")
    for name, text in registry.pipeline_names().items():
        lines.append(f"  {name:<16} {text}")
    return "\n".join(lines) + "\n"


def split_chunks(text: str) -> list[tuple[str, int]]:
    """Split at marker lines; each chunk keeps the number of lines before it."""
    chunks: list[tuple[str, int]] = []
    current: list[str] = []
    start = 0
    for k, line in enumerate(text.split("\n")):
        if line.strip() == SPLIT_MARKER:
            chunks.append(("\n".join(current), start))
            current = []
            start = k + 1
        else:
            current.append(line)
    chunks.append(("\n".join(current), start))
    return chunks


def main(argv: list[str] | None = None) -> int:
    # the interpreter's start-up and the imports before main(), for --timing
    entered = time.perf_counter()
    started = seconds_since_process_start()
    timings: list[tuple[str, float]] = [
        ("startup", (started - (time.perf_counter() - entered)) if started is not None else 0.0)
    ]
    mark = time.perf_counter()

    def lap(stage: str) -> None:
        nonlocal mark
        now = time.perf_counter()
        timings.append((stage, now - mark))
        mark = now

    args = build_arg_parser().parse_args(argv)
    if args.list_passes:
        sys.stdout.write(list_passes())
        return 0

    from fir.ir.errors import FirError
    from fir.ir.printer import print_module
    from fir.passes.pipeline import parse_pipeline
    from fir.passes.verify import read_program

    try:
        pipeline = parse_pipeline(args.pipeline)
        from fir.passes import registry

        for name in args.print_ir_after:
            if not registry.is_pass(name):
                raise FirError(f"--print-ir-after names unknown pass '{name}'")
        reporting = [p for p in pipeline.passes if p.reports_decisions]
        if args.fusion_report and not reporting:
            raise FirError("--fusion-report needs a 'fuse' pass in the pipeline")
        for p in reporting:
            p.collect_reports = bool(args.fusion_report)
    except FirError as e:
        print(e.render(), file=sys.stderr)
        return 1
    lap("startup")  # imports of the IR and the pipeline: part of starting, like the interpreter's

    name = "<stdin>" if args.input == "-" else args.input
    try:
        text = read_input(args.input)
    except InputError as e:
        print(e.render("fir-opt"), file=sys.stderr)
        return 1

    lap("read input")

    wanted = set(args.print_ir_after)
    chunks = split_chunks(text) if args.split_input_file else [(text, 0)]
    outputs: list[str] = []
    final_modules: list[Any] = []
    failed = False
    for chunk, line_offset in chunks:
        for p in pipeline.passes:
            p.statistics = {}  # per chunk: each input is its own program
        try:
            module = read_program(chunk, name, line_offset, lap)

            def after(p: Any, m: Any) -> None:
                if args.print_ir_after_all or p.name in wanted:
                    sys.stderr.write(f"// -----// IR after {p.name} //----- //\n")
                    sys.stderr.write(print_module(m))

            first = len(timings)
            module = pipeline.run(
                module, verify_each=args.verify_each, after_pass=after, timings=timings
            )
            # the pipeline timed its passes and verifications; the rest is printing the IR
            # after passes (--print-ir-after…) and the pipeline's own bookkeeping
            mark += sum(secs for _, secs in timings[first:])
            lap("pipeline (between passes)")
            if args.stats:  # before printing: a plan that fails its check fails the chunk
                from fir.ir.memory_plan import stats_report

                planned = any(p.plans_memory for p in pipeline.passes)
                sys.stderr.write(stats_report(module, pipeline.passes, planned))
                lap("stats")
            outputs.append(print_module(module))
            lap("print")
            final_modules.append(module)
        except FirError as e:
            print(e.render(), file=sys.stderr)
            failed = True
            lap("errors")

    result = f"{SPLIT_MARKER}\n".join(outputs)
    try:
        if args.output == "-":
            sys.stdout.write(result)
            sys.stdout.flush()
        else:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(result)
    except OSError as e:
        print(f"fir-opt: error: cannot write {args.output}: {e.strerror}", file=sys.stderr)
        return 1
    lap("write")

    if args.fusion_report or args.fusion_dot:
        if not write_fusion_files(args, pipeline, final_modules):
            return 1
        lap("fusion report files")
    if args.timing:
        sys.stderr.write(format_timing(timings))
    return 1 if failed else 0


def write_fusion_files(args: argparse.Namespace, pipeline: Any, modules: list[Any]) -> bool:
    """``--fusion-report`` (the reports of every ``fuse`` pass) and ``--fusion-dot`` (the
    resulting kernels); False when a file cannot be written."""
    jobs: list[tuple[str, Any]] = []
    if args.fusion_report:
        from fir.passes.fusion.report import reports_json

        reports = [r for p in pipeline.passes for r in p.reports]
        jobs.append((args.fusion_report, lambda: reports_json(reports)))
    if args.fusion_dot:
        from fir.ir.graph import Module
        from fir.passes.fusion.report import module_dot

        merged = Module([f for m in modules for f in m.funcs])
        jobs.append((args.fusion_dot, lambda: module_dot(merged)))
    for path, make in jobs:
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(make())
        except OSError as e:
            print(f"fir-opt: error: cannot write {path}: {e.strerror}", file=sys.stderr)
            return False
    return True


def format_timing(timings: list[tuple[str, float]]) -> str:
    """One line per stage (repeated stages summed), the verification after each pass indented
    under it, and the total, which is the process's wall time up to the report."""
    from fir.passes.pipeline import VERIFY_SUFFIX

    totals: dict[str, float] = {}
    for stage, secs in timings:
        totals[stage] = totals.get(stage, 0.0) + secs
    total = sum(totals.values()) or 1e-12
    lines = [
        "===-------------------------------------===",
        "  FIR execution timing report",
        "===-------------------------------------===",
        f"  {'wall (ms)':>10}  {'share':>6}  stage",
    ]
    for stage, secs in totals.items():
        if stage.endswith(VERIFY_SUFFIX):
            stage = "  verify"
        lines.append(f"  {secs * 1e3:10.2f}  {100 * secs / total:5.1f}%  {stage}")
    lines.append(f"  {total * 1e3:10.2f}  100.0%  total")
    return "\n".join(lines) + "\n"


def entry() -> None:
    # The command is one short run over one program: parsing allocates millions of objects and
    # frees none, passes free what they drop by reference counting, and the process exits
    # without tearing its heap down (cli.run_main). Cyclic collections would only rescan the
    # program, at a fifth of the run's time on 10,000 ops, so the command makes none.
    gc.disable()
    run_main(main)


if __name__ == "__main__":
    entry()
