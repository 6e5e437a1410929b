"""When padding a matmul's unaligned dimension pays on a GPU: the threshold of ``pad-matmul``.

    python benchmarks/gemm_padding.py          # writes docs/benchmarks/gemm-padding.md

For each shape, bf16, CUDA-event medians (``triton.testing.do_bench``) of:

* **plain**: ``a @ w.t()`` as it comes (an unaligned N or K: cuBLAS's slow kernels);
* **padded, read in place**: the weight padded (a copy), the aligned product; a fused reader
  reads the padded product where it lies (what ``pad-matmul`` gives a loss or a softmax);
* **padded + copy**: the same and a copy of the product into a dense result (ATen's copy; FIR's
  own copy kernel is faster: 0.22 ms for the LM head's product on an H200);
* **fir.mm_t**: FIR's Triton matmul writing the dense rows itself (``fir.ir.fir_ops``), what
  ``pad-matmul`` gives a product that is only returned (its operands must lie with aligned
  rows: "–" for an unaligned K).

An unaligned K pads both operands. The pass pads a product of at least ``min-macs``
multiply-adds; this table is where that number comes from.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.nn.functional as F

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks" / "gemm-padding.md"
# (M, K, N): GPT-2's LM head and its backward's input gradient, BERT/T5-like shapes, small ones
SHAPES = [
    (4096, 768, 50257),
    (4096, 50257, 768),
    (2048, 768, 30523),
    (4096, 4096, 4097),
    (1024, 1024, 1025),
    (512, 768, 8193),
    (256, 256, 1001),
    (64, 768, 50257),
    (8, 768, 50257),
    (2048, 2048, 32001),
]


def padded(n: int) -> int:
    return -(-n // 8) * 8


def measure(m: int, k: int, n: int) -> tuple[float, ...]:
    from fir.backends.runtime.triton_matmul import fits, mm_t
    from triton.testing import do_bench

    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    k2, n2 = padded(k), padded(n)

    def plain() -> torch.Tensor:
        return a @ w.t()

    def pad_in_place() -> torch.Tensor:
        ap = F.pad(a, (0, k2 - k)) if k2 != k else a
        wp = F.pad(w, (0, k2 - k, 0, n2 - n))
        return (ap @ wp.t())[:, :n]

    def pad_copy() -> torch.Tensor:
        return pad_in_place().contiguous()

    # the same product up to bf16 rounding and the library's order of summation
    want = plain().float()
    runs = [plain, pad_in_place, pad_copy] + ([lambda: mm_t(a, w)] if fits(a, w) else [])
    for f in runs[1:]:
        got = f().float()
        assert (got - want).abs().max().item() <= 2e-2 * want.abs().max().item(), (m, k, n)
    return tuple(float(do_bench(f, warmup=25, rep=100, return_mode="median")) for f in runs)


def doc_head(title: str, script: str, unit: str) -> list[str]:
    """A GEMM benchmark doc's first lines: its title and what wrote it, on which GPU."""
    if not torch.cuda.is_available():
        sys.exit(f"{script}: needs a CUDA GPU")
    return [
        f"# {title}",
        "",
        f"Written by `python benchmarks/{script}.py` on {torch.cuda.get_device_name()}, "
        f"torch {torch.__version__}; bf16, {unit} (CUDA-event medians). The module docstring "
        "says what each column runs.",
        "",
    ]


def main() -> None:
    rows = [
        *doc_head("Padding unaligned matmuls on the GPU (`pad-matmul`)", "gemm_padding", "ms"),
        "| M | K | N | M·N·K | plain | padded, in place | padded + copy | speed-up (copy) "
        "| fir.mm_t |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for m, k, n in SHAPES:
        plain, in_place, copy, *dense = measure(m, k, n)
        rows.append(
            f"| {m} | {k} | {n} | {m * n * k:.2g} | {plain:.3f} | {in_place:.3f} | {copy:.3f} "
            f"| {plain / copy:.2f} | {f'{dense[0]:.3f}' if dense else '–'} |"
        )
        print(rows[-1], flush=True)
    DOC.parent.mkdir(parents=True, exist_ok=True)
    text = "\n".join(rows) + "\n"
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else DOC
    out.write_text(text)


if __name__ == "__main__":
    main()
