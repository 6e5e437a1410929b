"""Training through ``torch.compile(backend="fir")``: the forward and the backward graph that
AOTAutograd produces both run as FIR's compiled code, and ``loss.backward()`` gives eager's
gradients (an MLP, ``nn.TransformerEncoderLayer`` in training mode, a small GPT); dropout in
training keeps its statistics."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from fir.frontend import dynamo as fir_backend  # noqa: E402

nn = torch.nn
F = torch.nn.functional


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Any:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


class TinyGPT(nn.Module):
    """Token and learned position embeddings, one causal self-attention block, an MLP, layer
    norms, an LM head; the forward returns the cross-entropy loss."""

    def __init__(self, vocab: int = 32, dim: int = 32, heads: int = 4, seq: int = 8) -> None:
        super().__init__()
        self.heads = heads
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(seq, dim)
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.out = nn.Linear(4 * dim, dim)
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        b, t = idx.shape
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        q, k, v = self.qkv(self.ln1(x)).split(x.shape[-1], dim=-1)
        shape = (b, t, self.heads, -1)
        q, k, v = (z.reshape(shape).transpose(1, 2) for z in (q, k, v))
        scores = q @ k.transpose(-2, -1) / (q.shape[-1] ** 0.5)
        causal = torch.ones(t, t, dtype=torch.bool, device=idx.device).tril()
        att = scores.masked_fill(~causal, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, -1)
        x = x + self.proj(y)
        x = x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.reshape(b * t, -1), targets.reshape(-1))


def _check_gradients(
    model: nn.Module, loss_of: Callable[[nn.Module], torch.Tensor], **options: Any
) -> list[Any]:
    """Gradients of ``loss_of(model)`` through backend="fir" match eager's; returns the graphs
    FIR compiled."""
    compiled_model = copy.deepcopy(model)
    expected = loss_of(model)
    expected.backward()
    start = len(fir_backend.COMPILED)
    compiled = torch.compile(compiled_model, backend="fir", options=options or None)
    loss = loss_of(compiled)
    loss.backward()
    torch.testing.assert_close(loss, expected, rtol=1e-4, atol=1e-4)
    for (name, p), q in zip(model.named_parameters(), compiled_model.parameters()):
        assert q.grad is not None, name
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-4, msg=name)
    return fir_backend.COMPILED[start:]


def _ran_backward(graphs: list[Any]) -> Any:
    """The backward graph FIR compiled: it has a compiled program and it ran."""
    backward = [g for g in graphs if g.kind == "backward"]
    assert backward, [g.kind for g in graphs]
    g = backward[-1]
    assert g.program is not None and g.calls >= 1
    return g


def test_mlp_gradients_match_eager() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 32),
        nn.SiLU(), nn.Linear(32, 32), nn.Sigmoid(), nn.Linear(32, 32), nn.ReLU(),
        nn.Linear(32, 4),
    )  # fmt: skip
    x = torch.randn(8, 16)
    target = torch.randint(0, 4, (8,))
    graphs = _check_gradients(model, lambda m: F.cross_entropy(m(x), target))
    assert [g.kind for g in graphs] == ["forward", "backward"]
    bw = _ran_backward(graphs)
    # every activation's gradient is FIR code, not an extern call of ATen's kernel
    for op in ("gelu", "tanh", "silu", "sigmoid", "threshold"):
        assert bw.report.imported[f"aten.{op}_backward.default"] == 1, op
    assert not bw.report.fallbacks, bw.report.reasons


def test_transformer_encoder_layer_gradients_match_eager() -> None:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, dropout=0.0, batch_first=True)
    layer.train()
    x = torch.randn(2, 8, 64)
    graphs = _check_gradients(layer, lambda m: m(x).square().mean())
    bw = _ran_backward(graphs)
    assert bw.report.imported["aten.native_layer_norm_backward.default"] == 2
    assert "aten.threshold_backward.default" in bw.report.imported
    # attention's gradient too is FIR code (its forward is still ATen's kernel)
    assert not bw.report.fallbacks, bw.report.reasons


@pytest.mark.parametrize("is_causal", [False, True])
def test_attention_gradients_match_eager(is_causal: bool) -> None:
    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = nn.Linear(16, 48)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            q, k, v = self.qkv(x).reshape(2, 6, 3, 2, 8).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=0.3)
            return y.square().sum()

    torch.manual_seed(0)
    x = torch.randn(2, 6, 16)
    graphs = _check_gradients(Attention(), lambda m: m(x))
    bw = _ran_backward(graphs)
    assert (
        bw.report.imported["aten._scaled_dot_product_flash_attention_for_cpu_backward.default"] == 1
    )


def test_gpt_gradients_match_eager() -> None:
    torch.manual_seed(0)
    model = TinyGPT()
    idx = torch.randint(0, 32, (2, 8))
    targets = torch.randint(0, 32, (2, 8))
    # fallback="never": nothing of the training step runs with PyTorch for lack of a mapping
    # (attention is a library call by design, nll_loss's total weight is computed by FIR)
    graphs = _check_gradients(model, lambda m: m(idx, targets), fallback="never")
    bw = _ran_backward(graphs)
    for op in ("embedding_dense_backward", "native_layer_norm_backward", "gelu_backward"):
        assert bw.report.imported[f"aten.{op}.default"] >= 1, op
    for g in graphs:
        assert g.program is not None and not g.report.fallbacks, (g.kind, g.report.reasons)


def test_saved_activations_keep_fir_layout_and_the_backward_is_compiled_for_it() -> None:
    """The key and value of an attention behind a cache that starts empty (HF's, GPT-2's):
    ``cat`` with the empty cache imports as the head-major view of the projection, and eager
    saves a contiguous copy for the backward. FIR saves the view as it is and tells
    AOTAutograd its strides, which compiles the backward for them: no copy in the forward."""
    from fir.ir.graph import LoopNode

    class CachedAttention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = nn.Linear(16, 48)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            q, k, v = self.qkv(x).reshape(2, 6, 3, 2, 8).permute(2, 0, 3, 1, 4)
            empty = torch.tensor([], dtype=x.dtype)  # a cache's first step
            k, v = torch.cat([empty, k], dim=-2), torch.cat([empty, v], dim=-2)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return y.square().sum()

    torch.manual_seed(0)
    x = torch.randn(2, 6, 16)
    graphs = _check_gradients(CachedAttention(), lambda m: m(x))
    forward = next(g for g in graphs if g.kind == "forward")
    backward = _ran_backward(graphs)
    fwd = forward.module.funcs[0]
    copies = [n.attrs["copy"] for n in fwd.nodes if isinstance(n, LoopNode) and "copy" in n.attrs]
    assert not copies, copies
    saved = [fwd.outputs[k].type for k in fwd.attrs["any_layout"]]
    head_major_views = [t for t in saved if t.layout is not None and t.layout.strides[-2] == 48]
    assert len(head_major_views) >= 3, saved  # q, k and v: views of the projection
    # the backward takes them in those strides (an input's offset is its pointer's)
    received = [a.type.layout.strides for a in backward.module.funcs[0].args if a.type.layout]
    for t in head_major_views:
        assert t.layout is not None and t.layout.strides in received, (t, received)


def test_an_extern_reading_a_restrided_input_declares_the_layout_it_returns() -> None:
    """A backward gets its saved activations in the strides the forward reported, where its
    trace saw eager's. An extern call whose results follow its input's layout (cuDNN's
    attention backward allocates dk and dv like k and v) is declared with what it returns for
    that layout; declared as traced, every call's result would be copied (two ATen copies a
    layer on GPT-2's backward)."""
    from fir.frontend.fx_import import import_graph_module
    from fir.ir.graph import ExternNode
    from torch.fx.experimental.proxy_tensor import make_fx

    gm = make_fx(lambda x: torch.special.erfcx(x) * 2, tracing_mode="fake")(torch.randn(4, 6))
    placeholder = next(n for n in gm.graph.nodes if n.op == "placeholder")
    with placeholder.meta["val"].fake_mode:
        transposed = torch.empty_strided((4, 6), (1, 4))
    module, _, _ = import_graph_module(gm, [transposed])
    graph = module.funcs[0]
    assert graph.args[0].type.strides == (1, 4)
    (call,) = [n for n in graph.nodes if isinstance(n, ExternNode)]
    assert call.results[0].type.strides == (1, 4)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_gradients_with_ignored_targets(reduction: str) -> None:
    class Classifier(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(8, 5)

        def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            loss = F.cross_entropy(self.fc(x), target, reduction=reduction)
            return loss if reduction != "none" else (loss * torch.arange(6.0)).sum()

    torch.manual_seed(0)
    x = torch.randn(6, 8)
    target = torch.tensor([0, 4, -100, 2, 2, -100])  # -100: ignored
    graphs = _check_gradients(Classifier(), lambda m: m(x, target))
    assert _ran_backward(graphs).report.imported["aten.nll_loss_backward.default"] == 1


def test_gelu_backward_exact_matches_eager() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(approximate="none"), nn.Linear(16, 1))
    x = torch.randn(4, 8) * 3
    graphs = _check_gradients(model, lambda m: m(x).sum())
    assert "aten.gelu_backward.default" in _ran_backward(graphs).report.imported


def test_dropout_in_training_keeps_its_statistics() -> None:
    torch.manual_seed(0)
    p = 0.3
    x = torch.ones(200_000, requires_grad=True)
    f = torch.compile(lambda t: F.dropout(t, p, training=True) * 2, backend="fir")
    y = f(x)
    kept = (y != 0).float().mean().item()
    assert abs(kept - (1 - p)) < 0.01
    # kept elements are scaled by 1 / (1 - p), so the mean stays 2
    assert abs(y.mean().item() - 2.0) < 0.03
    torch.testing.assert_close(y[y != 0], torch.full_like(y[y != 0], 2 / (1 - p)))
    y.sum().backward()
    # the gradient flows through the same mask
    torch.testing.assert_close(x.grad, torch.where(y != 0, 2 / (1 - p), 0.0))
    assert x.grad.eq(0).equal(y.eq(0))


aten = torch.ops.aten
_G = torch.randn(4, 6, generator=torch.Generator().manual_seed(1))
_X = torch.randn(4, 6, generator=torch.Generator().manual_seed(2)) * 4
_X[0, :3] = torch.tensor([0.5, 0.0, -30.0])  # the threshold itself, zero, a saturated input
BACKWARD_CALLS: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {
    "threshold": (lambda g, x: aten.threshold_backward(g, x, 0.5), (_G, _X)),
    "gelu": (lambda g, x: aten.gelu_backward(g, x), (_G, _X)),
    "gelu_tanh": (lambda g, x: aten.gelu_backward(g, x, approximate="tanh"), (_G, _X)),
    "silu": (aten.silu_backward, (_G, _X)),
    "tanh": (aten.tanh_backward, (_G, _X.tanh())),
    "sigmoid": (aten.sigmoid_backward, (_G, _X.sigmoid())),
    "select": (lambda g: aten.select_backward(g, [4, 5, 6], 1, -2), (_G,)),
    "slice": (lambda g: aten.slice_backward(g, [4, 10], 1, -8, 8, 1), (_G,)),
    "slice_end": (lambda g: aten.slice_backward(g, [4, 9], 1, 3, 2**62, 1), (_G,)),
    "embedding": (
        lambda g, i: aten.embedding_dense_backward(g, i, 7, 2, True),
        (_G, torch.tensor([1, 2, 1, 6])),
    ),
    # a small table's gradient: a reduction over one-hot rows (index 2 is padding: no sum)
    "embedding_rows": (
        lambda g, i: aten.embedding_dense_backward(g, i, 7, 2, False),
        (_G, torch.tensor([1, 2, 1, 6])),
    ),
    "embedding_rows_2d": (
        lambda g, i: aten.embedding_dense_backward(g, i, 5, -1, False),
        (_G.reshape(2, 2, 6), torch.tensor([[4, 0], [4, 4]])),
    ),
}


@pytest.mark.parametrize("name", sorted(BACKWARD_CALLS))
def test_backward_op_matches_eager(name: str) -> None:
    # the aten op called directly: an inference graph of that op alone
    fn, args = BACKWARD_CALLS[name]
    start = len(fir_backend.COMPILED)
    got = torch.compile(fn, backend="fir", options={"fallback": "never"})(*args)
    torch.testing.assert_close(got, fn(*args), rtol=1e-5, atol=1e-6)
    (graph,) = fir_backend.COMPILED[start:]
    assert graph.program is not None and sum(graph.report.imported.values()) >= 1


HALF_CALLS = ("gelu", "gelu_tanh", "silu", "tanh", "sigmoid", "threshold")


@pytest.mark.parametrize("name", HALF_CALLS)
def test_bf16_activation_gradients_compute_in_f32_and_round_once(name: str) -> None:
    """A bf16 model's activation gradients: ATen computes them in f32 and rounds once; FIR's
    composition does the same (it used to leave them to ATen, unfused, on a bf16 GPT-2)."""
    fn, (g, x) = BACKWARD_CALLS[name]
    args = (g.bfloat16(), x.bfloat16())
    start = len(fir_backend.COMPILED)
    got = torch.compile(fn, backend="fir", options={"fallback": "never"})(*args)
    assert got.dtype == torch.bfloat16
    want = fn(*(a.float() for a in args)).bfloat16()  # f32 arithmetic, one rounding
    torch.testing.assert_close(got, want, rtol=8e-3, atol=1e-5)  # within 2 bf16 ulps
    (graph,) = fir_backend.COMPILED[start:]
    assert graph.report.fallbacks == {}


def test_bf16_layer_norm_with_f32_statistics_is_composed() -> None:
    """On a GPU, ``native_layer_norm`` of bf16 gives f32 mean and rstd, and its backward takes
    them: both are now FIR ops (the statistics over the widened input, the gradients in f32
    rounded once) instead of ATen calls. The graph is traced on the meta device, whose shapes
    and dtypes are CUDA's, and run by FIR's interpreter against float64."""
    from fir.frontend.fx_import import import_graph_module
    from fir.ir.interpreter import run_graph
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(x: Any, w: Any, b: Any, g: Any) -> Any:
        y, mean, rstd = aten.native_layer_norm(x, [16], w, b, 1e-5)
        dx, dw, db = aten.native_layer_norm_backward(
            g, x, [16], mean, rstd, w, b, [True, True, True]
        )
        return y, mean, rstd, dx, dw, db

    meta = [
        torch.empty(s, dtype=torch.bfloat16, device="meta")
        for s in ((4, 16), (16,), (16,), (4, 16))
    ]
    gm = make_fx(f)(*meta)
    module, report, _ = import_graph_module(gm)
    assert report.fallbacks == {}, report.fallbacks
    gen = torch.Generator().manual_seed(0)
    x, w, b, g = (torch.randn(m.shape, generator=gen).bfloat16() for m in meta)
    y, mean, rstd, dx, dw, db = run_graph(module.funcs[0], [x, w, b, g])
    assert (mean.dtype, rstd.dtype, dx.dtype, dw.dtype) == (
        torch.float32,
        torch.float32,
        torch.bfloat16,
        torch.bfloat16,
    )
    xd = x.double().requires_grad_()
    wd, bd = w.double().requires_grad_(), b.double().requires_grad_()
    ref = F.layer_norm(xd, [16], wd, bd, 1e-5)
    ref.backward(g.double())
    torch.testing.assert_close(
        mean.double(), x.double().mean(-1, keepdim=True), rtol=1e-6, atol=1e-6
    )
    torch.testing.assert_close(y.double(), ref.detach(), rtol=1e-2, atol=1e-2)
    for got, want in ((dx, xd.grad), (dw, wd.grad), (db, bd.grad)):
        assert want is not None
        torch.testing.assert_close(got.double(), want, rtol=8e-3, atol=1e-2)


class _TanhGeluMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(16, 64)
        self.down = nn.Linear(64, 16)

    def forward(self, x: Any) -> Any:
        h = self.up(x)
        h = 0.5 * h * (1 + torch.tanh(0.7978845608 * (h + 0.044715 * h**3)))
        return x + self.down(h)


def _backward_inputs(dump: Any) -> int:
    """How many inputs the backward graph that FIR compiled takes (the last graph dumped)."""
    import re

    last = sorted(
        dump.glob("graph_*.00.import.fir"), key=lambda p: int(p.name.split("_")[1].split(".")[0])
    )[-1]
    header = last.read_text().splitlines()[0]
    return len(re.findall(r"%\w+:", header.split("->")[0]))


@pytest.mark.parametrize("recompute", [True, False])
def test_recompute_saves_fewer_activations_and_keeps_the_gradients(
    recompute: bool, tmp_path: Any
) -> None:
    # the min-cut partitioner (Inductor's) recomputes the GELU's pointwise values in the
    # backward from fewer saved tensors; both partitions give eager's gradients
    torch.manual_seed(0)
    model = _TanhGeluMLP()
    ref = copy.deepcopy(model)
    x = torch.randn(4, 8, 16)
    dump = tmp_path / "dump"
    f = torch.compile(model, backend="fir", options={"recompute": recompute, "dump_dir": str(dump)})
    f(x).square().mean().backward()
    ref(x).square().mean().backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-6)
    saved = _backward_inputs(dump)
    torch._dynamo.reset()
    other = tmp_path / "other"
    g = torch.compile(
        copy.deepcopy(ref),
        backend="fir",
        options={"recompute": not recompute, "dump_dir": str(other)},
    )
    g(x).square().mean().backward()
    if recompute:
        assert saved < _backward_inputs(other)
    else:
        assert saved > _backward_inputs(other)


def _externs(graph: Any) -> list[str]:
    from fir.ir.graph import ExternNode

    return [n.callee for f in graph.module.funcs for n in f.nodes if isinstance(n, ExternNode)]


def test_small_table_gradient_is_a_fir_reduction_and_a_large_one_an_extern() -> None:
    """T5's relative-position bias (32 buckets) and BERT's token types (2) take their gradient
    as FIR's reduction over one-hot rows: ATen's CUDA kernel sorts (about 30 launches and 0.2 ms
    of host time a call on an H200). A token table keeps the ATen call."""
    g = torch.randn(6, 10, 3, generator=torch.Generator().manual_seed(3))
    i = torch.randint(0, 32, (6, 10), generator=torch.Generator().manual_seed(4))
    for rows, extern in ((32, False), (64, False), (65, True), (1000, True)):
        fn = lambda g, i, rows=rows: aten.embedding_dense_backward(g, i, rows, -1, False)  # noqa: E731
        start = len(fir_backend.COMPILED)
        got = torch.compile(fn, backend="fir", dynamic=False, options={"fallback": "never"})(g, i)
        torch.testing.assert_close(got, fn(g, i), rtol=1e-5, atol=1e-5)
        (graph,) = fir_backend.COMPILED[start:]
        called = "aten.embedding_dense_backward.default" in _externs(graph)
        assert called == extern, rows


def test_small_table_gradient_of_bf16_sums_in_f32() -> None:
    # ATen's CUDA kernel sums a bf16 gradient in f32 and rounds once; so does FIR's reduction
    # (eager on the CPU sums in bf16, further from the exact sum)
    g = torch.randn(64, 64, 8, generator=torch.Generator().manual_seed(5)).bfloat16()
    i = torch.randint(0, 32, (64, 64), generator=torch.Generator().manual_seed(6))
    fn = lambda g, i: aten.embedding_dense_backward(g, i, 32, -1, False)  # noqa: E731
    got = torch.compile(fn, backend="fir")(g.permute(1, 0, 2), i)
    exact = fn(g.permute(1, 0, 2).double(), i)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.double(), exact.bfloat16().double(), rtol=0, atol=0.25)
    assert (got.double() - exact).abs().max() <= (exact.bfloat16().double() - exact).abs().max() * 2


def test_table_sized_by_an_int_argument_falls_back_not_crashes() -> None:
    # under dynamic shapes the row count is an int input that may be zero or negative: no size
    # FIR can bind, so PyTorch runs the graph (it used to stop the compile with an internal
    # error from the verifier)
    fn = lambda g, i, rows: aten.embedding_dense_backward(g, i, rows, -1, False)  # noqa: E731
    g, i = torch.randn(8, 4), torch.randint(0, 2, (8,))
    c = torch.compile(fn, backend="fir", dynamic=True)
    with pytest.warns(UserWarning, match="int argument that is no size"):
        got = c(g, i, 3)
    torch.testing.assert_close(got, fn(g, i, 3))


@pytest.mark.parametrize("padding_idx", [None, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_large_table_gradient_summed_by_index_add_matches_eager(
    monkeypatch: pytest.MonkeyPatch, padding_idx: int | None, dtype: torch.dtype
) -> None:
    """The GPU composition of a large table's gradient (zeros, index_add_ in f32, padding row
    zeroed and rounded in a FIR kernel), forced here on the CPU, where the aten op is kept."""
    from fir.frontend.aten import backward
    from fir.ir.printer import print_module

    monkeypatch.setattr(backward, "_atomic_adds_fit", lambda *a: True)
    torch.manual_seed(0)
    model = nn.Embedding(backward.ONE_HOT_ROWS + 36, 6, padding_idx=padding_idx).to(dtype)
    idx = torch.tensor([[1, 3, 3, 0], [99, 3, 1, 1], [3, 3, 3, 3]])
    scale = torch.randn(3, 4, 6)

    def loss_of(m: nn.Module) -> torch.Tensor:
        return (m(idx).float() * scale).sum()

    expected_model = copy.deepcopy(model)
    loss_of(expected_model).backward()
    start = len(fir_backend.COMPILED)
    compiled = torch.compile(model, backend="fir")
    loss_of(compiled).backward()
    text = print_module(_ran_backward(fir_backend.COMPILED[start:]).module)
    assert '"aten.index_add_.default"' in text and '"aten.embedding_dense_backward' not in text
    got, want = model.weight.grad, expected_model.weight.grad
    assert got is not None and want is not None and got.dtype == dtype
    # the same sums in f32, rounded once: equal but for the order of the additions
    tol = 1e-2 if dtype == torch.bfloat16 else 1e-5
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)
    if padding_idx is not None:
        assert not got[padding_idx].any()
