"""Real models under ``torch.compile(backend="fir", dynamic=True)`` on the CPU: small configs of
GPT-2, a Llama-style decoder, BERT and the T5 encoder (random weights, fp32, the same structure
as the GPU test's full-size ones, tests/frontend/test_models_gpu.py). Each compiles once, runs nothing
with PyTorch (``fallback="never"``) and matches eager at three sequence lengths.

These need ``transformers``, which is no dependency of FIR (benchmarks/hf_models.py builds the
models); where it is missing they are skipped. tests/frontend/test_dynamic_ops.py holds each op these
models needed as a small graph, with no model."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

LENGTHS = (16, 24, 40)


@pytest.mark.parametrize("name", ["gpt2", "llama", "bert", "t5"])
def test_small_model_compiles_once_and_matches_eager(name: str) -> None:
    pytest.importorskip("transformers")
    import hf_models
    import torch._dynamo
    from fir.frontend import dynamo as fir_backend

    torch._dynamo.reset()
    model, vocab = hf_models.build(name, small=True)
    run = hf_models.forward(model)
    compiled = torch.compile(run, backend="fir", dynamic=True, options={"fallback": "never"})
    start = len(fir_backend.COMPILED)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for n in LENGTHS:
            ids = torch.randint(0, vocab, (2, n), generator=gen)
            torch.testing.assert_close(compiled(ids), run(ids), rtol=1e-4, atol=1e-4)
    graphs = fir_backend.COMPILED[start:]
    assert len(graphs) == 1, [g.name for g in graphs]
    assert graphs[0].program is not None
    assert not graphs[0].report.fallbacks
