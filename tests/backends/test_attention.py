"""Attention through ``torch.compile(backend="fir")``: ``scaled_dot_product_attention`` stays
a library call with the head reshapes and transposes around it as aliases (no kernels), and a
hand-written attention (``q @ k.transpose(-1, -2) * scale``, a causal mask, softmax, ``@ v``)
fuses into no more kernels than Inductor makes for the same program (its generated C++ kernel
count on this CPU, measured in the test). Results match eager."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import fir  # noqa: E402

HEADS = 4


def _heads(x: Any) -> Any:
    b, t, c = x.shape
    return x.view(b, t, HEADS, c // HEADS).transpose(1, 2)


def hand_written(q: Any, k: Any, v: Any, mask: Any) -> Any:
    b, t, c = q.shape
    q, k, v = _heads(q), _heads(k), _heads(v)
    scores = q @ k.transpose(-1, -2) * (c // HEADS) ** -0.5
    scores = scores.masked_fill(mask, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v
    return out.transpose(1, 2).reshape(b, t, c)


def library(q: Any, k: Any, v: Any, mask: Any) -> Any:
    b, t, c = q.shape
    out = F.scaled_dot_product_attention(_heads(q * 0.5), _heads(k), _heads(v), is_causal=True)
    return out.transpose(1, 2).reshape(b, t, c)


def _inputs() -> list[Any]:
    torch.manual_seed(0)
    xs = [torch.randn(2, 16, 64) for _ in range(3)]
    return [*xs, torch.triu(torch.ones(16, 16, dtype=torch.bool), 1)]


def _inductor_kernels(fn: Any, args: list[Any]) -> int:
    from torch._inductor import metrics

    torch._dynamo.reset()
    metrics.reset()
    torch.testing.assert_close(torch.compile(fn)(*args), fn(*args), rtol=1e-4, atol=1e-4)
    return int(metrics.generated_kernel_count)


@pytest.mark.parametrize("fn", [hand_written, library], ids=lambda f: f.__name__)
def test_attention_kernels_at_most_inductors(fn: Any) -> None:
    args = _inputs()
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="fir")
    torch.testing.assert_close(compiled(*args), fn(*args), rtol=1e-4, atol=1e-4)
    torch._dynamo.reset()
    ex = fir.explain(fn, *args)
    assert ex.graph_count == 1 and ex.graph_break_count == 0
    assert ex.kernel_count is not None
    inductor = _inductor_kernels(fn, args)
    assert ex.kernel_count <= inductor, (ex.kernel_count, inductor)
    if fn is library:
        # the attention is one library call, the head views around it aliases
        assert ex.extern_count == 1 and not ex.copies
