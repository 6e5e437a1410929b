"""Kernels per model: FIR's ``fusion`` pipeline against Inductor, on transformers' models.

    python benchmarks/bench_kernel_counts.py --device cuda    # on a GPU: the comparison
    python benchmarks/bench_kernel_counts.py --device cpu     # FIR's counts only

Four models from ``transformers`` (random init, small configs: 2 layers, hidden size 64, 4 heads,
batch 2, 16 tokens): GPT-2, Llama, BERT and the T5 encoder. For each, ``fir.explain`` compiles it
with ``backend="fir"`` and reports FIR's kernels (fused groups and loop nodes in none), extern
calls (matmuls, attention, library ops) and views (aliases and the copies left); Inductor's count
is ``torch._inductor.metrics.generated_kernel_count`` after ``torch.compile(model)`` (default
mode) on the same inputs. On CUDA that is its Triton kernels (extern matmuls and attention calls
not counted, as FIR's are not); Inductor on the CPU counts its C++ loops differently, so
``--device cpu`` reports FIR alone. Every compiled model's output is checked against eager.
Writes docs/benchmarks/kernel-counts.md with ``--doc``.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks" / "kernel-counts.md"


def models() -> dict[str, Any]:
    import transformers as T

    common = dict(vocab_size=1000)
    return {
        "GPT-2": lambda: T.GPT2Model(
            T.GPT2Config(n_layer=2, n_embd=64, n_head=4, n_positions=64, **common)
        ),
        "Llama": lambda: T.LlamaModel(
            T.LlamaConfig(
                num_hidden_layers=2,
                hidden_size=64,
                intermediate_size=128,
                num_attention_heads=4,
                num_key_value_heads=4,
                max_position_embeddings=64,
                **common,
            )
        ),
        "BERT": lambda: T.BertModel(
            T.BertConfig(
                num_hidden_layers=2,
                hidden_size=64,
                intermediate_size=128,
                num_attention_heads=4,
                max_position_embeddings=64,
                **common,
            )
        ),
        "T5 encoder": lambda: T.T5EncoderModel(
            T.T5Config(num_layers=2, d_model=64, d_ff=128, num_heads=4, d_kv=16, **common)
        ),
    }


def _first_tensor(out: Any) -> torch.Tensor:
    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "last_hidden_state"):
        return out.last_hidden_state
    return out[0]


def measure(name: str, make: Any, device: str) -> dict[str, Any]:
    import fir

    torch.manual_seed(0)
    model = make().eval().to(device)
    ids = torch.randint(0, 1000, (2, 16), device=device)
    row: dict[str, Any] = {"model": name}
    with torch.no_grad():
        want = _first_tensor(model(ids))
        torch._dynamo.reset()
        ex = fir.explain(model, ids)
        row.update(
            fir_kernels=ex.kernel_count,
            fir_externs=ex.extern_count,
            fir_aliases=ex.alias_count,
            fir_copies=len(ex.copies),
            graphs=ex.graph_count,
            breaks=ex.graph_break_count,
        )
        torch._dynamo.reset()
        got = _first_tensor(
            torch.compile(model, backend="fir", options={"pipeline": "fusion"})(ids)
        )
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        if device == "cuda":
            from torch._inductor import metrics

            torch._dynamo.reset()
            metrics.reset()
            got = _first_tensor(torch.compile(model)(ids))
            torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-3)
            row["inductor_kernels"] = metrics.generated_kernel_count
    return row


def table(rows: list[dict[str, Any]], device: str) -> str:
    head = "| model | graphs / breaks | FIR kernels | FIR extern calls | FIR views (aliases / copies) |"
    sep = "|---|---|---|---|---|"
    if device == "cuda":
        head += " Inductor kernels (CUDA) | FIR ≤ Inductor |"
        sep += "---|---|"
    lines = [head, sep]
    for r in rows:
        cells = [
            r["model"],
            f"{r['graphs']} / {r['breaks']}",
            str(r["fir_kernels"]),
            str(r["fir_externs"]),
            f"{r['fir_aliases']} / {r['fir_copies']}",
        ]
        if device == "cuda":
            ok = r["fir_kernels"] <= r["inductor_kernels"]
            cells += [str(r["inductor_kernels"]), "yes" if ok else "**no**"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--doc", action="store_true", help="write docs/benchmarks/kernel-counts.md")
    args = ap.parse_args()
    rows = [measure(name, make, args.device) for name, make in models().items()]
    text = table(rows, args.device)
    print(text)
    if not args.doc:
        return
    import transformers

    where = torch.cuda.get_device_name() if args.device == "cuda" else f"CPU ({platform.machine()})"
    DOC.write_text(
        "# Kernels per model: FIR against Inductor\n\n"
        f"Generated by `python benchmarks/bench_kernel_counts.py --device {args.device} --doc` on "
        f"{where}, torch {torch.__version__}, transformers {transformers.__version__}, Python "
        f"{platform.python_version()}.\n\n"
        "Each model (random init; 2 layers, hidden size 64, 4 heads; batch 2, 16 tokens) is "
        'compiled with `backend="fir"` (the `fusion` pipeline) and with Inductor\'s default '
        "mode on the same inputs; both outputs are checked against eager. FIR's kernels are its "
        "fused groups and the loop nodes in none; extern calls (matmuls, attention, library "
        "ops) and views (aliases of a buffer's storage, and the views still copied) are counted "
        "apart. Inductor's figure is `torch._inductor.metrics.generated_kernel_count`: its "
        "Triton kernels, extern matmul and attention calls not included.\n\n" + text + "\n"
    )
    print(f"wrote {DOC.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
