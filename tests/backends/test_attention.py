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


class _PositionBiasAttention(torch.nn.Module):
    """T5's pattern: a position bias looked up once (heads innermost, then permuted to
    [1, heads, q, k]) and given as the mask of every layer's attention."""

    def __init__(self, layers: int = 3, buckets: int = 32) -> None:
        super().__init__()
        self.bias = torch.nn.Embedding(buckets, HEADS)
        self.buckets = buckets
        self.layers = layers

    def forward(self, x: Any) -> Any:
        b, t, c = x.shape
        pos = torch.arange(t)
        rel = (pos[None, :] - pos[:, None]).abs().clamp(max=self.buckets - 1)
        mask = self.bias(rel).permute(2, 0, 1).unsqueeze(0)  # [1, heads, t, t], heads innermost
        for k in range(self.layers):
            q = _heads(x * (k + 1))
            x = F.scaled_dot_product_attention(q, _heads(x), _heads(x), attn_mask=mask)
            x = x.transpose(1, 2).reshape(b, t, c)
        return x


def test_a_mask_the_cpu_attention_would_copy_is_laid_out_once() -> None:
    """The CPU flash attention copies a mask whose rows are not in order at every call (ATen's
    ``contiguous``). FIR lays such a mask out once, fused with the lookup that computes it, and
    every layer's call reads it as it is: no copy inside the compiled call, eager's values."""
    torch.manual_seed(0)
    model = _PositionBiasAttention().eval()
    x = torch.randn(2, 24, 64)
    torch._dynamo.reset()
    with torch.no_grad():  # inference: the attention stays the library's call
        ex = fir.explain(model, x)
    masks = [c for c in ex.copies if "attn_mask" in c]
    assert len(masks) == 1 and "copies attn_mask unless its rows are in order" in masks[0]
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="fir")
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)
        with torch.profiler.profile() as prof:
            compiled(x)
    ops = {e.key for e in prof.key_averages()}
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" in ops
    assert "aten::copy_" not in ops and "aten::clone" not in ops, sorted(ops)


def test_a_mask_in_row_order_is_passed_as_it_is() -> None:
    """A mask broadcast over the batch and heads (strides 0) with its rows in order is an
    alias: nothing is copied."""

    def f(q: Any, k: Any, v: Any, m: Any) -> Any:
        return F.scaled_dot_product_attention(
            _heads(q), _heads(k), _heads(v), attn_mask=m[None, None]
        )

    torch.manual_seed(0)
    args = [*(torch.randn(2, 16, 64) for _ in range(3)), torch.randn(16, 16)]
    torch._dynamo.reset()
    ex = fir.explain(f, *args)
    assert not [c for c in ex.copies if "attn_mask" in c]
    torch._dynamo.reset()
    torch.testing.assert_close(
        torch.compile(f, backend="fir")(*args), f(*args), rtol=1e-5, atol=1e-5
    )
