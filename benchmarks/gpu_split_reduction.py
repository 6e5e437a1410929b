"""Split reductions on the GPU, outside FIR (what the ``split-reductions`` pass was decided on):
the column sum of 8192x4096 f32, whole and in row chunks (partial sums, then a second kernel),
and cross_entropy's loss (a gathered logit per row, 16,384 rows) in one program and in chunks.
Run on a GPU: ``python benchmarks/gpu_split_reduction.py``; the figures are in
docs/passes/split-reductions.md."""

from __future__ import annotations

import itertools

import torch
import triton
import triton.language as tl
from triton.testing import do_bench


@triton.jit
def column_sum(x, out, R: tl.constexpr, C: tl.constexpr, XB: tl.constexpr, RB: tl.constexpr):  # type: ignore[no-untyped-def]
    cols = tl.program_id(0) * XB + tl.arange(0, XB)[None, :]
    rows = tl.arange(0, RB)[:, None]
    acc = tl.zeros([RB, XB], tl.float32)
    for r0 in range(0, R, RB):
        acc += tl.load(x + (r0 + rows) * C + cols)
    tl.store(out + cols, tl.sum(acc, 0, keep_dims=True))


@triton.jit
def column_sum_chunk(  # type: ignore[no-untyped-def]
    x, part, C: tl.constexpr, CHUNK: tl.constexpr, XB: tl.constexpr, RB: tl.constexpr
):
    cols = tl.program_id(0) * XB + tl.arange(0, XB)[None, :]
    s = tl.program_id(1)
    rows = tl.arange(0, RB)[:, None]
    acc = tl.zeros([RB, XB], tl.float32)
    for r0 in range(s * CHUNK, s * CHUNK + CHUNK, RB):
        acc += tl.load(x + (r0 + rows) * C + cols)
    tl.store(part + s * C + cols, tl.sum(acc, 0, keep_dims=True))


@triton.jit
def sum_partials(part, out, S: tl.constexpr, C: tl.constexpr, XB: tl.constexpr):  # type: ignore[no-untyped-def]
    cols = tl.program_id(0) * XB + tl.arange(0, XB)[None, :]
    v = tl.load(part + tl.arange(0, S)[:, None] * C + cols)
    tl.store(out + cols, tl.sum(v, 0, keep_dims=True))


@triton.jit
def loss_chunk(lg, t, mx, sm, part, V: tl.constexpr, CHUNK: tl.constexpr, RB: tl.constexpr):  # type: ignore[no-untyped-def]
    s = tl.program_id(0)
    acc = tl.zeros([RB], tl.float32)
    for r0 in range(s * CHUNK, s * CHUNK + CHUNK, RB):
        r = r0 + tl.arange(0, RB)
        picked = tl.load(lg + r.to(tl.int64) * V + tl.load(t + r))
        acc += tl.log(tl.load(sm + r)) + tl.load(mx + r) - picked
    tl.store(part + s, tl.sum(acc, 0))


@triton.jit
def loss_final(part, out, S: tl.constexpr, N: tl.constexpr):  # type: ignore[no-untyped-def]
    tl.store(out, tl.sum(tl.load(part + tl.arange(0, S)), 0) / N)


def column_sums(rows: int = 8192, cols: int = 4096) -> None:
    x = torch.randn(rows, cols, device="cuda")
    want = x.sum(0)
    out = torch.empty(cols, device="cuda")
    nbytes = (x.numel() + cols) * 4
    results: list[tuple[float, str]] = []

    def timed(label: str, fn: object) -> None:
        fn()  # type: ignore[operator]
        torch.testing.assert_close(out, want, atol=1e-2, rtol=1e-3)
        results.append((do_bench(fn, warmup=25, rep=100), label))  # type: ignore[arg-type]

    for xb, rb, w in itertools.product([32, 64, 128], [32, 64, 128], [4, 8, 16]):
        if xb * rb <= 8192:
            timed(
                f"whole XB={xb} RB={rb} warps={w}",
                lambda xb=xb, rb=rb, w=w: column_sum[(cols // xb,)](
                    x, out, rows, cols, xb, rb, num_warps=w
                ),
            )
    for s, xb, rb, w in itertools.product([2, 4, 8, 16, 32], [32, 64, 128], [32, 64], [4, 8]):
        if xb * rb <= 8192:
            part = torch.empty(s, cols, device="cuda")

            def split(s: int = s, xb: int = xb, rb: int = rb, w: int = w, part=part) -> None:  # type: ignore[no-untyped-def]
                column_sum_chunk[(cols // xb, s)](x, part, cols, rows // s, xb, rb, num_warps=w)
                sum_partials[(cols // 128,)](part, out, s, cols, 128, num_warps=4)

            timed(f"{s} chunks XB={xb} RB={rb} warps={w}", split)
    results.sort()
    print(f"column sum of {rows}x{cols} f32, the 12 fastest of {len(results)}:")
    for ms, label in results[:12]:
        print(f"  {ms * 1e3:7.1f} us {nbytes / ms / 1e6:6.0f} GB/s  {label}")


def loss(rows: int = 16384, vocab: int = 8192) -> None:
    logits = torch.randn(rows, vocab, device="cuda")
    target = torch.randint(0, vocab, (rows,), device="cuda")
    mx = logits.amax(1)
    sm = (logits - mx[:, None]).exp().sum(1)
    want = torch.nn.functional.cross_entropy(logits, target)
    out = torch.empty((), device="cuda")
    print(f"cross_entropy's loss over {rows} rows (one gathered logit each):")
    for s, rb, w in itertools.product([1, 8, 16, 32, 64, 128], [128, 256, 1024, 2048], [4, 8]):
        if rows // s < rb:
            continue
        part = torch.empty(s, device="cuda")

        def run(s: int = s, rb: int = rb, w: int = w, part=part) -> None:  # type: ignore[no-untyped-def]
            loss_chunk[(s,)](logits, target, mx, sm, part, vocab, rows // s, rb, num_warps=w)
            loss_final[(1,)](part, out, s, rows)

        run()
        torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-4)
        print(
            f"  {s} chunk(s), RB={rb}, warps={w}: {do_bench(run, warmup=25, rep=100) * 1e3:.1f} us"
        )


if __name__ == "__main__":
    column_sums()
    loss()
