"""Where a linear layer's bias goes on a GPU: into the GEMM (cuBLASLt's bias epilogue, ``addmm``)
or into a kernel after it. The measurement behind the ``addmm`` and ``linear`` rules of
``passes/lowering/decompositions.py``.

    python benchmarks/gemm_bias.py          # writes docs/benchmarks/gemm-bias.md

For each linear layer shape of the four models of ``bench_models.py`` (M rows of the batch's
tokens, K inputs, N outputs), bf16, CUDA-event medians (``triton.testing.do_bench``) of:

* **mm**: the product alone (``F.linear`` without a bias): what the GEMM costs when a fused
  kernel that reads its result anyway adds the bias (a GELU, a residual add, a layer norm);
* **addmm**: the product with the bias in the GEMM's epilogue (``F.linear`` with a bias);
* **mm + add**: the product, then the bias added by a kernel of its own (what decomposing costs
  where no fused reader takes the add).

FIR keeps ``addmm`` whole exactly when no reader of the result could take the add
(``_bias_add_would_fuse``); this table says what each side of that rule costs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.nn.functional as F

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks" / "gemm-bias.md"
# (model, layer, M, K, N) at bench_models.py's GPU shapes
SHAPES = [
    ("gpt2", "qkv (c_attn)", 4096, 768, 2304),
    ("gpt2", "attention out", 4096, 768, 768),
    ("gpt2", "mlp up", 4096, 768, 3072),
    ("gpt2", "mlp down", 4096, 3072, 768),
    ("bert", "q / k / v", 2048, 768, 768),
    ("bert", "mlp up", 2048, 768, 3072),
    ("bert", "mlp down", 2048, 3072, 768),
    ("small", "decode-like", 64, 768, 768),
]


def measure(m: int, k: int, n: int) -> tuple[float, float, float]:
    from triton.testing import do_bench

    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, device="cuda", dtype=torch.bfloat16)

    def mm() -> torch.Tensor:
        return F.linear(a, w)

    def addmm() -> torch.Tensor:
        return F.linear(a, w, b)

    def mm_add() -> torch.Tensor:
        return F.linear(a, w) + b

    want, got = mm_add().float(), addmm().float()
    assert (got - want).abs().max().item() <= 2e-2 * want.abs().max().item(), (m, k, n)
    times = []
    for f in (mm, addmm, mm_add):
        times.append(float(do_bench(f, warmup=25, rep=200, return_mode="median")))
    return times[0], times[1], times[2]


def main() -> None:
    from gemm_padding import doc_head  # this folder: the script's own

    rows = [
        *doc_head("A linear layer's bias on the GPU: in the GEMM or after it", "gemm_bias", "us"),
        "| model | layer | M | K | N | mm | addmm | mm + add | addmm / mm | (mm + add) / addmm |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    in_gemm, own_kernel = [], []
    for model, layer, m, k, n in SHAPES:
        mm, addmm, mm_add = (1000 * t for t in measure(m, k, n))
        in_gemm.append(addmm / mm)
        own_kernel.append(mm_add / addmm)
        rows.append(
            f"| {model} | {layer} | {m} | {k} | {n} | {mm:.1f} | {addmm:.1f} | {mm_add:.1f} "
            f"| {addmm / mm:.2f} | {mm_add / addmm:.2f} |"
        )
        print(rows[-1], flush=True)
    rows += [
        "",
        f"The bias in the GEMM's epilogue costs {min(in_gemm):.2f}-{max(in_gemm):.2f}x the "
        f"product alone; a kernel of its own after the product costs "
        f"{min(own_kernel):.2f}-{max(own_kernel):.2f}x the product with the epilogue. So the "
        "rule FIR follows: where a reader of the product fuses the add (it reads the product "
        "anyway, and the bias is one row), the bias goes there and the GEMM is a plain `mm`; "
        "where none does, `addmm` stays whole. Llama's and T5's linear layers have no bias.",
    ]
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else DOC
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
