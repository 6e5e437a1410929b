"""Read-only bandwidth on the GPU: how fast a reduction can read 8192x4096 (and 16384x4096)
f32, against a copy of the same tensor (the bar of bench_gpu.py counts a copy's bytes read and
written). Run on a GPU: ``python benchmarks/gpu_read_bandwidth.py``; the figures are in
docs/benchmarks/gpu.md (notes)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import triton
import triton.language as tl
from triton.testing import do_bench


@triton.jit
def row_sum(x, out, C: tl.constexpr, RB: tl.constexpr):  # type: ignore[no-untyped-def]
    r = tl.program_id(0)
    acc = tl.zeros([RB], tl.float32)
    for c in range(0, C, RB):
        acc += tl.load(x + r * C + c + tl.arange(0, RB))
    tl.store(out + r, tl.sum(acc, 0))


@triton.jit
def chunk_sum(x, out, B: tl.constexpr, ITERS: tl.constexpr):  # type: ignore[no-untyped-def]
    p = tl.program_id(0)
    acc = tl.zeros([B], tl.float32)
    for k in range(ITERS):
        acc += tl.load(x + (p * ITERS + k) * B + tl.arange(0, B))
    tl.store(out + p, tl.sum(acc, 0))


def report(label: str, fn: Callable[[], object], nbytes: int) -> None:
    ms = do_bench(fn, warmup=25, rep=200)
    print(f"{label}: {ms * 1e3:.1f} us, {nbytes / ms / 1e6:.0f} GB/s")


def measure(rows: int, cols: int) -> None:
    x = torch.randn(rows, cols, device="cuda")
    y = torch.empty_like(x)
    nbytes = x.numel() * 4
    report(f"{rows}x{cols} copy (read + write)", lambda: y.copy_(x), 2 * nbytes)
    report(f"{rows}x{cols} torch sum(1) (read)", lambda: x.sum(1), nbytes)
    report(f"{rows}x{cols} torch sum(0) (read)", lambda: x.sum(0), nbytes)
    out = torch.empty(rows, device="cuda")
    for rb, warps in ((1024, 4), (2048, 8), (4096, 8), (4096, 16)):
        report(
            f"{rows}x{cols} Triton row sum RB={rb} warps={warps} (read)",
            lambda rb=rb, warps=warps: row_sum[(rows,)](x, out, cols, rb, num_warps=warps),
            nbytes,
        )
    for block, iters, warps in ((4096, 16, 8), (4096, 8, 8), (2048, 32, 8), (8192, 8, 16)):
        programs = x.numel() // (block * iters)
        part = torch.empty(programs, device="cuda")
        report(
            f"{rows}x{cols} Triton flat chunks of {block}x{iters}, {programs} programs (read)",
            lambda p=programs, b=block, i=iters, w=warps, o=part: chunk_sum[(p,)](
                x, o, b, i, num_warps=w
            ),
            nbytes,
        )


def main() -> None:
    for rows in (8192, 16384):
        measure(rows, 4096)


if __name__ == "__main__":
    main()
