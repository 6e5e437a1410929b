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


@pytest.mark.parametrize("name", ["llama", "bert", "t5"])
def test_small_model_trains_like_eager(name: str) -> None:
    """A training step (forward and backward of ``out.square().mean()``) of the small configs:
    every parameter's gradient matches eager's. T5's relative-position bias (32 buckets) and
    BERT's token types (2) take their gradient as FIR's one-hot reduction; T5's and Llama's
    q/k/v weight gradients read the transpose of a copied attention gradient (an alias of the
    copy, as eager lays it out)."""
    pytest.importorskip("transformers")
    import hf_models
    import torch._dynamo
    from fir.frontend import dynamo as fir_backend

    torch._dynamo.reset()
    torch.manual_seed(0)
    model, vocab = hf_models.build(name, small=True)
    run = hf_models.forward(model)
    ids = torch.randint(0, vocab, (2, 24), generator=torch.Generator().manual_seed(1))
    params = [p for p in model.parameters() if p.requires_grad]

    def grads(fn: object) -> list[torch.Tensor]:
        for p in params:
            p.grad = None
        fn(ids).float().square().mean().backward()  # type: ignore[operator]
        return [p.grad.clone() if p.grad is not None else torch.zeros(0) for p in params]

    want = grads(run)
    start = len(fir_backend.COMPILED)
    got = grads(torch.compile(run, backend="fir", dynamic=False))
    for w, g in zip(want, got):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)
    graphs = fir_backend.COMPILED[start:]
    assert any(g.kind == "backward" and g.program is not None for g in graphs)
    # the tables of more than 64 rows keep ATen's call: every model's tokens, BERT's positions
    from fir.ir.graph import ExternNode

    backward = next(g for g in graphs if g.kind == "backward")
    calls = [n.callee for f in backward.module.funcs for n in f.nodes if isinstance(n, ExternNode)]
    tables = {"llama": 1, "bert": 2, "t5": 1}[name]
    assert calls.count("aten.embedding_dense_backward.default") == tables
