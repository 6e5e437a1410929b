"""Time every configuration that ``fir.backends.plan.block_schedule.candidates`` proposes for each
kernel of the GPU benchmark programs, one kernel at a time (the others keep their chosen
configuration), with ``triton.testing.do_bench``; print the best against the chosen one. This
is how the block sizes of ``block_schedule`` were picked: run it on the GPU, read, adjust.

    python benchmarks/tune_triton.py [--only NAME ...] [--scale F]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--limit", type=int, default=40, help="configurations per kernel at most")
    args = ap.parse_args()
    import bench_gpu
    import triton.testing
    from fir.backends.plan.block_schedule import candidates
    from fir.backends.registry import backend_named
    from fir.backends.runtime import CompiledProgram
    from fir.backends.triton import build_program
    from fir.passes.pipeline import parse_pipeline
    from fir.tools.triton_target import capture

    sizes = bench_gpu.GPU.scaled(args.scale)
    for name, (fn, make) in bench_gpu.programs(sizes, "cuda").items():
        if args.only and not any(name.startswith(o) for o in args.only):
            continue
        inputs = make()
        for module in capture(fn, inputs, name):
            graph = parse_pipeline("fusion").run(module).funcs[0]
            plan = backend_named("triton").plan(graph)
            want = None
            for k in plan.kernels():
                results: list[tuple[float, Any]] = []
                for cfg in candidates(k)[: args.limit]:
                    try:
                        program = CompiledProgram(
                            plan, build_program(plan, "cuda", configs={k.name: cfg}), "cuda"
                        )
                        out = program(*inputs)
                        if want is None:
                            want = out
                        else:
                            for a, b in zip(out, want):
                                torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-3)
                        ms = triton.testing.do_bench(
                            lambda p=program, xs=inputs: p(*xs), warmup=10, rep=40
                        )
                    except Exception as e:  # a configuration that does not compile or fit
                        print(f"  {name} {k.name} {cfg.text()}: {type(e).__name__}: {str(e)[:120]}")
                        continue
                    results.append((ms, cfg))
                if not results:
                    continue
                chosen = results[0]
                best = min(results, key=lambda r: r[0])
                print(
                    f"{name} {k.name}: chosen {chosen[1].text()} {chosen[0] * 1e3:.1f} us; "
                    f"best {best[1].text()} {best[0] * 1e3:.1f} us ({best[0] / chosen[0]:.2f})"
                )
                for ms, cfg in sorted(results, key=lambda r: r[0])[:4]:
                    print(f"    {ms * 1e3:8.1f} us  {cfg.text()}")


if __name__ == "__main__":
    main()
