"""``fir-run``: run a FIR program on random (seeded) inputs with the reference interpreter.

Optionally runs a pass pipeline first and checks that the pipeline kept the results.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from fir.backends.registry import BACKENDS, NAMES
from fir.tools.cli import ArgParser, InputError, read_input, run_main

INT64_MIN, INT64_MAX, UINT64_MAX = -(2**63), 2**63 - 1, 2**64 - 1
# --check's tolerances where none is given: the program before and after a pipeline computes
# the same sums in other orders (a matmul and its bias added apart, a reduction split), so
# float32 results differ by about eps * (sum of the terms' magnitudes), which for a sum of a
# few hundred unit-sized terms is 1e-5 and more, beyond torch's own float32 defaults
# (rtol=1.3e-6, atol=1e-5). Wrong index arithmetic or a lost operation gives differences of
# the size of the values themselves: still far outside these.
CHECK_TOLERANCES = {"float16": (1e-3, 1e-3), "bfloat16": (1.6e-2, 1e-2)}
FLOAT_TOLERANCE = (1e-4, 1e-4)


def _int_in(low: int, high: int, what: str) -> Any:
    """An argparse type: an integer in [low, high], else a usage error naming the range."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid integer {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text} is out of range: {what}")
        return value

    return parse


def _tolerance(text: str) -> float:
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text}: a tolerance is a finite number >= 0")
    return value


def build_arg_parser() -> argparse.ArgumentParser:
    p = ArgParser(prog="fir-run", description="Run a FIR program on random inputs (interpreter).")
    p.add_argument("input", help="input .fir file, or - for stdin")
    p.add_argument("--func", default=None, help="function to run (default: the first)")
    p.add_argument("-p", "--pipeline", default="", help="passes to run before executing")
    p.add_argument(
        "--seed",
        type=_int_in(INT64_MIN, UINT64_MAX, f"a seed is in [{INT64_MIN}, {UINT64_MAX}]"),
        default=0,
        help="seed of the random inputs",
    )
    p.add_argument(
        "--int-high",
        type=_int_in(1, INT64_MAX, f"N is in [1, {INT64_MAX}]"),
        default=None,
        help="integer inputs are drawn from [0, N), N at most one more than the largest value "
        "of the input's type (default: the smallest size > 1 of any argument)",
    )
    p.add_argument("--print-values", action="store_true", help="print every output tensor")
    p.add_argument(
        "--check",
        action="store_true",
        help="also run the program before the pipeline and compare the outputs (within "
        "--rtol and --atol)",
    )
    p.add_argument(
        "--rtol",
        type=_tolerance,
        default=None,
        help=f"--check's relative tolerance (default {FLOAT_TOLERANCE[0]:g}; float16 "
        f"{CHECK_TOLERANCES['float16'][0]:g}, bfloat16 {CHECK_TOLERANCES['bfloat16'][0]:g}; "
        "integers and booleans must be equal)",
    )
    p.add_argument(
        "--atol",
        type=_tolerance,
        default=None,
        help=f"--check's absolute tolerance (default {FLOAT_TOLERANCE[1]:g}; float16 "
        f"{CHECK_TOLERANCES['float16'][1]:g}, bfloat16 {CHECK_TOLERANCES['bfloat16'][1]:g})",
    )
    p.add_argument(
        "--backend",
        choices=["interp", *NAMES],
        default="interp",
        help="run with the reference interpreter (default) or compile with a code generator "
        f"({'; '.join(f'{b.name}: {b.summary}' for b in BACKENDS.values())}; the program "
        "must be at loop level after the pipeline, e.g. -p fusion)",
    )
    p.add_argument(
        "--bench",
        action="store_true",
        help="with a code generator: time the compiled program (median of --repeat calls) and "
        "print each step's time",
    )
    p.add_argument(
        "--repeat",
        type=_int_in(1, 10**9, "--bench times 1 to 1000000000 calls"),
        default=20,
        help="calls timed by --bench",
    )
    p.add_argument(
        "--kernels",
        choices=["tiled", "sequential"],
        default="tiled",
        help="run each kernel as a fused kernel would, tile by tile, checking that its nodes "
        "read only what the same tile computes (default), or its nodes one after the other",
    )
    return p


def random_inputs(graph: Any, seed: int, int_high: int | None) -> list[Any]:
    """One seeded random tensor per argument of ``graph``, laid out as the argument's type says
    (declared strides and offset: a view of a storage of random values, so that elements that
    share memory hold one value). An argument too large to allocate is a
    :class:`~fir.ir.errors.InterpreterMemoryError` naming it and its size in bytes."""
    import math

    import torch
    from fir.ir.errors import InterpreterMemoryError, format_bytes
    from fir.ir.interpreter import allocation_failure
    from fir.ir.symbolic import evaluate

    gen = torch.Generator().manual_seed(seed)
    sizes: dict[Any, int] = {}
    static = [d for a in graph.args for d in a.type.shape if isinstance(d, int) and d > 1]
    default_size = 8
    high = int_high if int_high is not None else (min(static) if static else 2)

    def value(d: Any) -> int:
        if isinstance(d, int):
            return d
        for s in d.free_symbols:  # a symbolic size: give each symbol one concrete value
            sizes.setdefault(s, default_size)
        return int(evaluate(d, sizes))

    out = []
    for a in graph.args:
        shape = [value(d) for d in a.type.shape]
        layout = a.type.layout
        elements = math.prod(shape) if layout is None else max(value(a.type.storage_size()), 0)
        dt = a.type.dtype
        tdt = dt.to_torch()
        nbytes = elements * dt.itemsize
        failure = InterpreterMemoryError(
            f"cannot allocate input %{a.name} ({a.type}): {format_bytes(nbytes)}", None, nbytes
        )
        if nbytes >= 2**63:  # more than torch can address: it would not even try
            raise failure
        made = shape if layout is None else [elements]
        try:
            if dt.is_float:
                t = torch.randn(made, generator=gen, dtype=torch.float32).to(tdt)
            elif dt.is_bool:
                t = torch.rand(made, generator=gen) < 0.5
            else:  # values the input's type holds, so that none wraps around
                top = min(max(high, 1), torch.iinfo(tdt).max + 1)
                t = torch.randint(0, top, made, generator=gen, dtype=torch.int64).to(tdt)
        except (RuntimeError, MemoryError) as e:
            if not allocation_failure(e)[0]:
                raise
            raise failure from None
        if layout is not None:
            strides = [value(s) for s in layout.strides]
            t = t.as_strided(shape, strides, value(layout.offset))
        out.append(t)
    return out


def clone_inputs(graph: Any, inputs: list[Any]) -> list[Any]:
    """Copies of ``inputs`` (for ``--check``), with the same error as :func:`random_inputs`
    when one does not fit."""
    from fir.ir.errors import InterpreterMemoryError, format_bytes
    from fir.ir.interpreter import allocation_failure

    out = []
    for a, t in zip(graph.args, inputs):
        try:
            out.append(t.clone())
        except (RuntimeError, MemoryError) as e:
            if not allocation_failure(e)[0]:
                raise
            nbytes = t.numel() * t.element_size()
            raise InterpreterMemoryError(
                f"cannot allocate a copy of input %{a.name} ({a.type}) for --check: "
                f"{format_bytes(nbytes)}",
                None,
                nbytes,
            ) from None
    return out


def describe(t: Any) -> str:
    import torch
    from fir.ir.interpreter import allocation_failure

    text = f"{str(t.dtype).removeprefix('torch.')}{list(t.shape)}"
    try:
        if t.numel() and (t.dtype.is_floating_point or t.dtype != torch.bool):
            f = t.double()
            text += f"  sum={f.sum().item():.6g} min={f.min().item():.6g} max={f.max().item():.6g}"
        elif t.numel():
            text += f"  true={int(t.sum().item())}"
    except (RuntimeError, MemoryError) as e:
        if not allocation_failure(e)[0]:
            raise
        text += "  (no memory left for its sum, min and max)"
    return text


def main(argv: list[str] | None = None) -> int:
    args = build_arg_parser().parse_args(argv)
    from fir.ir.errors import FirError, InterpreterMemoryError
    from fir.passes.pipeline import parse_pipeline
    from fir.passes.verify import read_program

    name = "<stdin>" if args.input == "-" else args.input
    try:
        text = read_input(args.input)
    except InputError as e:
        print(e.render("fir-run"), file=sys.stderr)
        return 1
    try:
        pipeline = parse_pipeline(args.pipeline)
        module = read_program(text, name)
        if not module.funcs:
            raise FirError(f"{name} defines no function")
        func = args.func or module.funcs[0].name
        try:
            graph = module.func(func)
        except KeyError:
            raise FirError(f"no function @{func} in {name}") from None
        import torch
        from fir.ir.interpreter import run_graph

        inputs = random_inputs(graph, args.seed, args.int_high)
        reference = (
            run_graph(graph, clone_inputs(graph, inputs), args.kernels) if args.check else None
        )
        if len(pipeline):
            module = pipeline.run(module)
            graph = module.func(func)
        bench = ""
        if args.backend == "interp":
            outputs = run_graph(graph, inputs, args.kernels)
        else:
            outputs, inputs, bench = run_compiled(graph, inputs, args)
    except InterpreterMemoryError as e:
        # the machine's limit, not a mistake in the text: one line, no caret under the source
        where = f"{e.loc}" if e.loc is not None else "fir-run"
        print(f"{where}: error: {e.message}", file=sys.stderr)
        return 1
    except FirError as e:
        print(e.render(), file=sys.stderr)
        return 1
    for a, t in zip(graph.args, inputs):
        print(f"input  %{a.name}: {describe(t)}")
    if bench:
        print(bench, end="")
    for k, t in enumerate(outputs):
        print(f"output #{k}: {describe(t)}")
        if args.print_values:
            print(t)
    if reference is not None:
        for k, (r, t) in enumerate(zip(reference, outputs)):
            rtol, atol = check_tolerances(r.dtype, args.rtol, args.atol)
            try:
                torch.testing.assert_close(t, r, rtol=rtol, atol=atol, equal_nan=True)
            except AssertionError as e:
                print(
                    f"fir-run: error: output #{k} changed under the pipeline "
                    f"(rtol={rtol:g}, atol={atol:g}):\n{e}",
                    file=sys.stderr,
                )
                return 1
        print(f"check: {len(outputs)} output(s) agree before and after '{args.pipeline}'")
    return 0


def check_tolerances(dtype: Any, rtol: float | None, atol: float | None) -> tuple[float, float]:
    """``--check``'s tolerances for outputs of ``dtype``: the options where given, else
    :data:`CHECK_TOLERANCES`; integers and booleans compare exactly unless an option says."""
    if dtype.is_floating_point:
        default = CHECK_TOLERANCES.get(str(dtype).removeprefix("torch."), FLOAT_TOLERANCE)
    elif dtype.is_complex:
        default = FLOAT_TOLERANCE
    else:
        default = (0.0, 0.0)
    return (default[0] if rtol is None else rtol, default[1] if atol is None else atol)


def run_compiled(graph: Any, inputs: list[Any], args: argparse.Namespace) -> tuple[Any, Any, str]:
    """Compile ``graph`` for ``args.backend``, run it on ``inputs`` (moved to its device) and
    time it under ``--bench``: the outputs (on the CPU), the inputs it ran on, the timings.
    What the machine refuses (no GPU, a missing package, memory, an extern that raises at run
    time) is a :class:`~fir.ir.errors.FirError` with one line of message."""
    import os
    import time

    import torch
    from fir.ir.errors import FirError, InterpreterMemoryError, format_bytes
    from fir.ir.interpreter import allocation_failure

    backend = args.backend
    gpu_needed = BACKENDS[backend].device == "cuda" and os.environ.get("TRITON_INTERPRET") != "1"
    if gpu_needed and not torch.cuda.is_available():
        raise FirError(
            f"--backend {backend} runs on a CUDA GPU and PyTorch sees none here; set "
            "TRITON_INTERPRET=1 to run the kernels in Triton's interpreter on the CPU"
        )
    from fir.backends.compile import compile_function

    start = time.perf_counter()
    try:
        program = compile_function(graph, backend)
    except ImportError as e:
        raise FirError(f"--backend {backend} needs the Python package '{e.name}'") from None
    compile_s = time.perf_counter() - start
    where = f"@{graph.name} ({backend})"
    bench = ""
    try:
        if program.device != "cpu":
            inputs = [x.to(program.device) for x in inputs]
        outputs = program(*inputs)
        if program.device != "cpu":
            outputs = [t.cpu() for t in outputs]
        if args.bench:
            bench = benchmark(program, inputs, args.repeat, compile_s)
    except FirError:
        raise
    except (RuntimeError, MemoryError, IndexError, ValueError, OverflowError) as e:
        failed, nbytes = allocation_failure(e)
        if failed:
            size = f": {format_bytes(nbytes)} asked for" if nbytes is not None else ""
            raise InterpreterMemoryError(
                f"{where}: the compiled program cannot allocate memory{size}", None, nbytes
            ) from None
        first_line = (str(e).strip().splitlines() or [""])[0]
        raise FirError(f"{where} failed at run time: {type(e).__name__}: {first_line}") from None
    return outputs, inputs, bench


def benchmark(program: Any, inputs: list[Any], repeat: int, compile_s: float) -> str:
    """The median time of a call and of each step over ``repeat`` calls, after one warm-up."""
    import statistics
    import time

    from fir.backends.plan import ExternStep, KernelStep

    program(*inputs)
    calls: list[float] = []
    steps: list[list[float]] = []
    for _ in range(repeat):
        program.step_times = []
        t = time.perf_counter()
        program(*inputs)
        calls.append(time.perf_counter() - t)
        steps.append(program.step_times)
    program.step_times = None
    plan = program.plan
    kernels = sum(isinstance(s, KernelStep) for s in plan.steps)
    externs = sum(isinstance(s, ExternStep) for s in plan.steps)
    lines = [
        f"compiled in {compile_s * 1e3:.1f} ms: {kernels} kernel(s), {externs} extern call(s)",
    ]
    for k, s in enumerate(plan.steps):
        if isinstance(s, KernelStep):
            what = f"kernel {s.plan.name}"
        elif isinstance(s, ExternStep):
            what = f"extern {s.node.callee}"
        else:
            continue
        ms = statistics.median(run[k] for run in steps) * 1e3
        lines.append(f"  {ms:9.3f} ms  {what}")
    lines.append(f"  {statistics.median(calls) * 1e3:9.3f} ms  total (median of {repeat} calls)")
    return "\n".join(lines) + "\n"


def entry() -> None:
    run_main(main)


if __name__ == "__main__":
    entry()
