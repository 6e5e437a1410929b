"""``python -m fir.tools.triton_target [FILE.fir ...] [--benchmarks]``: compile every Triton kernel
of the given programs (after the ``fusion`` pipeline) and of the GPU benchmark programs for a
CUDA target (sm_90 by default) on a machine with no GPU; exit 1 if any does not compile. The
test suite runs it (``tests/backends/test_triton.py``) so that CI catches a kernel Triton rejects.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def capture(fn: Any, inputs: list[Any], name: str) -> list[Any]:
    """The FIR modules ``torch.compile`` hands to FIR for ``fn(*inputs)`` (run eagerly)."""
    import torch
    from fir.frontend.fx_import import import_graph_module
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func

    out: list[Any] = []

    def grab(gm: Any, example: Any) -> Any:
        out.append(import_graph_module(gm, list(example), re_name(name))[0])
        return make_boxed_func(gm.forward)

    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(fn, backend=aot_autograd(fw_compiler=grab))(*inputs)
    return out


def _benchmark_modules(scale: float) -> list[tuple[str, Any]]:
    """The GPU benchmark programs (``benchmarks/bench_gpu.py``) as ``torch.compile`` hands
    them to FIR, captured on the CPU, their leading dimension scaled by ``scale`` (the row
    lengths, which choose the kernels' layouts, stay)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import bench_gpu

    out: list[tuple[str, Any]] = []
    for name, (fn, make) in bench_gpu.programs(bench_gpu.GPU.scaled(scale), "cpu").items():
        out += [(name, m) for m in capture(fn, make(), name)]
    return out


def re_name(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name).strip("_")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="compile FIR's Triton kernels for a CUDA target")
    ap.add_argument("files", nargs="*")
    ap.add_argument("--benchmarks", action="store_true", help="also benchmarks/bench_gpu.py")
    ap.add_argument("--scale", type=float, default=1 / 64)
    ap.add_argument("--arch", type=int, default=90)
    args = ap.parse_args(argv)
    from fir.backends.plan import plan_module
    from fir.backends.plan.block_schedule import keeps_rows
    from fir.backends.triton.build import compile_for_target
    from fir.passes.pipeline import parse_pipeline
    from fir.passes.verify import read_program

    modules = [(f, read_program(Path(f).read_text(), f)) for f in args.files]
    if args.benchmarks:
        modules += _benchmark_modules(args.scale)
    failed = 0
    kernels = 0
    for name, module in modules:
        fused = parse_pipeline("cuda").run(module)  # what the Triton back end compiles
        for plan in plan_module(fused, scratch_rows=keeps_rows):
            try:
                done = compile_for_target(plan, args.arch)
            except Exception as e:  # report every program, then fail
                failed += 1
                print(f"FAIL {name} @{plan.name}: {type(e).__name__}: {e}", file=sys.stderr)
                continue
            kernels += len(done)
            for k, (seconds, stages) in done.items():
                print(f"ok   {name} @{plan.name} {k}: {seconds:.2f} s, {stages[-1]}")
    print(f"{kernels} kernel(s) compiled for sm_{args.arch}, {failed} program(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
