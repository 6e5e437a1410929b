"""x + y.t() on the LLVM back end with its parallel loop cut into as many chunks as a machine of
more threads makes: chunks of equal length against chunks of whole 8-row blocks (the runtime's
``chunk_step`` for a tiled kernel), beside eager and Inductor in the same interleaved rounds.

On 16 threads the runtime cuts a kernel into 64 chunks; 2896 rows then made chunks of 46, and
every turned tile had 6 rows past its last whole 8 x 8 block, copied one element at a time.
``--chunks-per-thread`` sets how many chunks each of this machine's threads gets (32 on two
threads: the 16-thread count). Medians of the rounds' best-of-``--calls`` times, ms.

    python benchmarks/llvm_chunks.py [--n 2896] [--chunks-per-thread 32] [--rounds 9]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch


def _best(fn: Callable[[], Any], calls: int) -> float:
    out = []
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return min(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2896)
    ap.add_argument("--chunks-per-thread", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--calls", type=int, default=10)
    args = ap.parse_args()

    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_cpu import cpu_model
    from fir.backends.runtime import llvm_threads

    llvm_threads.LLVM = dataclasses.replace(
        llvm_threads.LLVM, chunks_per_thread=args.chunks_per_thread
    )
    aligned = llvm_threads.chunk_step

    def equal(outer: int, n: int, align: int = 1) -> int:
        return aligned(outer, n)

    def add_t(x: Any, y: Any) -> Any:
        return x + y.t()

    x, y = torch.randn(args.n, args.n), torch.randn(args.n, args.n)
    want = add_t(x, y)
    fir = torch.compile(add_t, backend="fir", options={"backend": "llvm"})
    ind = torch.compile(add_t)
    columns: dict[str, Callable[[], Any]] = {
        "eager": lambda: add_t(x, y),
        "Inductor": lambda: ind(x, y),
        "FIR-llvm, equal chunks": lambda: fir(x, y),
        "FIR-llvm, whole 8-row blocks": lambda: fir(x, y),
    }
    steps = {"FIR-llvm, equal chunks": equal, "FIR-llvm, whole 8-row blocks": aligned}
    times: dict[str, list[float]] = {k: [] for k in columns}
    for name, fn in columns.items():  # compile and check each once
        llvm_threads.chunk_step = steps.get(name, aligned)
        assert torch.equal(fn(), want), name
    for _ in range(args.rounds):
        for name, fn in columns.items():
            llvm_threads.chunk_step = steps.get(name, aligned)
            times[name].append(_best(fn, args.calls))
    llvm_threads.chunk_step = aligned
    ind_ms = statistics.median(times["Inductor"]) * 1e3
    threads = torch.get_num_threads()
    print(
        f"x + y.t() at {args.n}^2 f32 on {cpu_model()}, "
        f"{threads} threads, {args.chunks_per_thread} chunks a thread "
        f"({threads * args.chunks_per_thread} chunks); medians of {args.rounds} rounds\n"
    )
    print("| column | ms | / Inductor |\n|---|---|---|")
    for name, ts in times.items():
        ms = statistics.median(ts) * 1e3
        print(f"| {name} | {ms:.2f} | {ms / ind_ms:.2f} |")


if __name__ == "__main__":
    main()
