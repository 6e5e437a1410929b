"""An embedding's gradient on the GPU, three ways, at the shapes of the real models' training
steps: ATen's ``embedding_dense_backward`` (it sorts the indices), zeros + ``index_add_`` in
f32 (atomic adds; FIR's choice for a large table), and FIR's reduction over one-hot rows
(its choice for a table of at most ``ONE_HOT_ROWS`` rows). Per call: host time (enqueue, no
sync inside the loop), device time and launches from the profiler, and host time behind
~100 ms of queued GPU work (about 100 ms where a call waits for the GPU). Writes
``docs/benchmarks/embedding-grad.md``.

    python benchmarks/embedding_grad.py
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).resolve().parent
DOC = HERE.parent / "docs" / "benchmarks" / "embedding-grad.md"
# (name, gradient shape as the backward graph gives it, permutation to that layout, rows)
CASES = [
    ("T5 relative-position bias", (8, 512, 512), (1, 2, 0), (512, 512), 32),
    ("T5 tokens", (8, 512, 512), (0, 1, 2), (8, 512), 32128),
    ("GPT-2 tokens", (8, 512, 768), (0, 1, 2), (8, 512), 50257),
    ("BERT token types", (8, 256, 768), (0, 1, 2), (8, 256), 2),
]


def _index_add(g: torch.Tensor, idx: torch.Tensor, rows: int) -> torch.Tensor:
    out = torch.zeros(rows, g.shape[-1], device=g.device, dtype=torch.float32)
    out.index_add_(0, idx.reshape(-1), g.reshape(-1, g.shape[-1]).float())
    return out.to(g.dtype)


def _costs(fn: Callable[[], Any], calls: int = 50) -> tuple[float, float, int, float]:
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    host = (time.perf_counter() - start) / calls * 1e6
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    device = sum(e.device_time_total for e in kernels)
    big = torch.randn(8192, 8192, device="cuda")
    for _ in range(8):
        big @ big  # ~100 ms of queued work on an H100/H200
    start = time.perf_counter()
    fn()
    behind = (time.perf_counter() - start) * 1e3
    torch.cuda.synchronize()
    return host, device, len(kernels), behind


def main() -> None:
    sys.path.insert(0, str(HERE))  # this folder's own modules (also under PYTHONSAFEPATH)
    from gemm_padding import doc_head

    aten = torch.ops.aten
    rows = [
        *doc_head("An embedding's gradient on the GPU", "embedding_grad", "us"),
        "| table | rows | way | host us | device us | launches | host ms behind queued work "
        "| max error / largest sum |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, shape, perm, ishape, n in CASES:
        g = torch.randn(*shape, device="cuda", dtype=torch.bfloat16).permute(*perm)
        idx = torch.randint(0, n, ishape, device="cuda")
        ways: dict[str, Callable[[], Any]] = {
            "ATen": lambda g=g, idx=idx, n=n: aten.embedding_dense_backward(g, idx, n, -1, False),
            "zeros + index_add_": lambda g=g, idx=idx, n=n: _index_add(g, idx, n),
        }
        from fir.frontend.aten.backward import ONE_HOT_ROWS

        if n <= ONE_HOT_ROWS:
            fir = torch.compile(
                lambda g, i, n=n: aten.embedding_dense_backward(g, i, n, -1, False),
                backend="fir",
                dynamic=False,
            )
            ways["FIR one-hot reduction"] = lambda g=g, idx=idx, fir=fir: fir(g, idx)
        exact = aten.embedding_dense_backward(g.float(), idx, n, -1, False)
        for way, fn in ways.items():
            # against the sums in f32: FIR's ways sum in f32 and round to bf16 once (half a
            # unit in the last place, 2**-8 of the value; one unit allowed for the order of the
            # f32 sums). ATen's kernel, not FIR's, is only reported.
            err = (fn().float() - exact).abs().max().item() / exact.abs().max().item()
            if way != "ATen" and err > 2**-7:
                sys.exit(f"embedding_grad: {way} on {name} is off by {err:.3g} of the largest")
            host, device, launches, behind = _costs(fn)
            rows.append(
                f"| {name} | {n} | {way} | {host:.1f} | {device:.1f} | {launches} "
                f"| {behind:.2f} | {err:.2g} |"
            )
            print(rows[-1], file=sys.stderr, flush=True)
    DOC.write_text("\n".join(rows) + "\n")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
