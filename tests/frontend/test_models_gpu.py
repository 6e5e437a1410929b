"""Real models under ``torch.compile(backend="fir", dynamic=True)`` on a GPU: GPT-2 124M, a
Llama-style decoder, BERT-base and the T5-small encoder (random weights, bf16). Each compiles
once, runs at five sequence lengths with no recompilation, runs nothing with PyTorch
(``fallback="never"``: no graph and no aten op falls back) and matches eager.

These need a CUDA GPU and ``transformers`` (the GPU machines have both); elsewhere they are
skipped. benchmarks/hf_models.py builds the models."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

LENGTHS = (64, 96, 128, 200, 256)


@pytest.mark.parametrize("name", ["gpt2", "llama", "bert", "t5"])
def test_dynamic_shapes_compile_once_and_match_eager(name: str) -> None:
    pytest.importorskip("transformers")
    import hf_models
    import torch._dynamo
    from fir.frontend import dynamo as fir_backend

    torch._dynamo.reset()
    model, vocab = hf_models.build(name)
    model = model.to("cuda", torch.bfloat16)
    run = hf_models.forward(model)
    compiled = torch.compile(run, backend="fir", dynamic=True, options={"fallback": "never"})
    before_compiled = len(fir_backend.COMPILED)
    before_fallbacks = len(fir_backend.FALLBACKS)
    gen = torch.Generator(device="cuda").manual_seed(0)
    after_first = None
    with torch.no_grad():
        for n in LENGTHS:
            ids = torch.randint(0, vocab, (2, n), device="cuda", generator=gen)
            want = run(ids).float()
            got = compiled(ids).float()
            torch.cuda.synchronize()
            assert got.shape == want.shape
            # bf16 through a whole model: compare with a tolerance scaled to the output
            err = (got - want).abs().max().item()
            scale = want.abs().max().item()
            assert err <= 0.05 * scale + 0.05, f"{name} at length {n}: max diff {err} ({scale})"
            if after_first is None:
                after_first = len(fir_backend.COMPILED)
    graphs = fir_backend.COMPILED[before_compiled:]
    assert graphs, "no graph reached FIR"
    assert fir_backend.FALLBACKS[before_fallbacks:] == []
    assert all(g.program is not None for g in graphs), "a graph ran in FIR's interpreter"
    # compiled once: the graphs of the first length serve every later one
    assert len(fir_backend.COMPILED) == after_first, [g.name for g in graphs]
