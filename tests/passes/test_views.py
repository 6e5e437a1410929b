"""Views cost nothing (issue 17): a view that must be a tensor (an extern call's argument, a graph
output) is an alias of its buffer's storage, not a copy; the passes treat an alias as a no-op
that keeps its root alive; the frontend keeps library calls whole where nothing could fuse with
them; ``fir.explain`` counts aliases and names every copy that is left."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from fir.ir.graph import AliasNode, ExternNode, LoopNode, Module
from fir.ir.interpreter import run_graph
from fir.ir.memory_plan import plan_problems
from fir.ir.parser import parse_module
from fir.ir.printer import print_module
from fir.ir.verifier import verify_module
from fir.passes.pipeline import parse_pipeline

torch.manual_seed(0)


def run(text: str, pipeline: str) -> Module:
    m = parse_pipeline(pipeline).run(parse_module(text))
    verify_module(m)
    assert parse_module(print_module(m)) is not None  # round trip
    assert print_module(parse_module(print_module(m))) == print_module(m)
    return m


def nodes_of(m: Module, kind: type) -> list:
    return [n for n in m.funcs[0].nodes if isinstance(n, kind)]


# ---------------------------------------------------------------------------------------------
# Lowering: aliases where strides say it, copies (with a reason) where they cannot


HEADS = """
func @heads(%x: f32[32, 64], %w: f32[64, 64]) -> (f32[2, 4, 16, 16], f32[32, 64]) {
  %r = reshape %x : f32[2, 16, 4, 16]
  %t = transpose %r {dim0 = 1, dim1 = 2} : f32[2, 4, 16, 16]
  %wt = transpose %w {dim0 = 0, dim1 = 1} : f32[64, 64]
  %m = matmul %x, %wt : f32[32, 64]
  %y = matmul %m, %wt : f32[32, 64]
  return %t, %y
}
"""


def test_views_that_extern_calls_and_outputs_need_are_aliases() -> None:
    m = run(HEADS, "lower")
    aliases = {n.result.name: n for n in nodes_of(m, AliasNode)}
    assert set(aliases) == {"t", "wt"}
    assert str(aliases["t"].result.type) == "f32[2, 4, 16, 16] strided [1024, 16, 64, 1]"
    assert str(aliases["wt"].result.type) == "f32[64, 64] strided [1, 64]"
    assert aliases["wt"].base is m.funcs[0].args[1]
    assert not nodes_of(m, LoopNode)  # no copy at all


def test_a_reshape_no_strides_express_is_a_copy_that_says_why() -> None:
    text = """
func @f(%x: f32[4, 8], %w: f32[32, 2]) -> (f32[1, 2]) {
  %t = transpose %x {dim0 = 0, dim1 = 1} : f32[8, 4]
  %r = reshape %t : f32[1, 32]
  %m = matmul %r, %w : f32[1, 2]
  return %m
}
"""
    m = run(text, "lower")
    (copy,) = nodes_of(m, LoopNode)
    assert copy.result.name == "r"
    assert (
        copy.attrs["copy"]
        == "reshape that no strides express (it merges non-contiguous dimensions)"
    )


@pytest.mark.parametrize("pipeline", ["lower", "decompose,lower,inline", "fusion"])
def test_aliases_compute_what_the_views_did(pipeline: str) -> None:
    before = parse_module(HEADS)
    inputs = [torch.randn(32, 64), torch.randn(64, 64)]
    want = run_graph(before.funcs[0], inputs)
    got = run_graph(run(HEADS, pipeline).funcs[0], inputs)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)


def test_an_output_alias_of_an_input_is_a_view_of_it() -> None:
    m = run(HEADS, "fusion")
    x = torch.randn(32, 64)
    t, _ = run_graph(m.funcs[0], [x, torch.randn(64, 64)])
    assert t.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    assert t.stride() == (1024, 16, 64, 1)


# ---------------------------------------------------------------------------------------------
# Memory planning: an alias keeps its root alive and is never freed, reused or written in place


def test_an_alias_keeps_its_base_alive_until_its_last_reader() -> None:
    # %e is viewed by %t, which only the matmul reads; %s runs between %e and the matmul and
    # must not write in place of (or reuse, or free) %e's storage: the alias holds it
    text = """
func @f(%x: f32[64, 64], %w: f32[64, 64]) -> (f32[64, 64]) {
  %e = exp %x : f32[64, 64]
  %t = transpose %e {dim0 = 0, dim1 = 1} : f32[64, 64]
  %n = neg %e : f32[64, 64]
  %s = sum %n {dims = [1], keepdim = true} : f32[64, 1]
  %m = matmul %w, %t : f32[64, 64]
  %r = add %m, %s : f32[64, 64]
  return %r
}
"""
    m = run(text, "decompose,lower,inline,deps,dce,plan-memory")
    g = m.funcs[0]
    assert plan_problems(g) == []
    names = [n.result.name for n in g.nodes]
    e = g.nodes[names.index("e")]
    alias = next(n for n in g.nodes if isinstance(n, AliasNode))
    matmul = next(n for n in g.nodes if isinstance(n, ExternNode))
    assert alias.base is e.result
    between = g.nodes[names.index("e") + 1 : names.index(matmul.result.name)]
    assert any(isinstance(n, LoopNode) for n in between), "the test needs a loop node between"
    for n in between:
        assert n.attrs.get("inplace") is not e.result and n.attrs.get("reuses") is not e.result
        assert e.result not in (n.attrs.get("frees") or [])
    frees = [v for node in g.nodes for v in node.attrs.get("frees") or []]
    assert alias.result not in frees  # an alias has nothing to free
    assert e.result in (matmul.attrs.get("frees") or [])  # freed after the alias's reader
    inputs = [torch.randn(64, 64), torch.randn(64, 64)]
    torch.testing.assert_close(
        run_graph(g, inputs)[0], run_graph(parse_module(text).funcs[0], inputs)[0]
    )


def test_an_output_alias_keeps_its_base() -> None:
    text = """
func @f(%x: f32[8, 4]) -> (f32[4, 8]) {
  %e = exp %x : f32[8, 4]
  %t = transpose %e {dim0 = 0, dim1 = 1} : f32[4, 8]
  return %t
}
"""
    m = run(text, "fusion")
    g = m.funcs[0]
    assert plan_problems(g) == []
    assert not any(node.attrs.get("frees") for node in g.nodes)


# ---------------------------------------------------------------------------------------------
# Through torch.compile: the models' patterns


def _compiled(fn, *args):  # type: ignore[no-untyped-def]
    from fir.frontend.dynamo import COMPILED

    import fir

    COMPILED.clear()
    ex = fir.explain(fn, *args)
    return ex, [g.module for g in COMPILED]


def test_hand_written_attention_is_one_kernel_and_two_extern_calls() -> None:
    def attention(q, k, v):  # type: ignore[no-untyped-def]
        return torch.softmax((q @ k.transpose(-1, -2)) * 0.125, -1) @ v

    q, k, v = (torch.randn(2, 4, 16, 32) for _ in range(3))
    ex, _ = _compiled(attention, q, k, v)
    assert (ex.kernel_count, ex.extern_count, ex.copies) == (1, 2, [])
    assert ex.alias_count >= 1
    got = torch.compile(attention, backend="fir", options={"pipeline": "fusion"})(q, k, v)
    torch.testing.assert_close(got, attention(q, k, v))


@pytest.mark.parametrize("epilogue", [False, True])
def test_linear_on_3d_input_is_one_extern_call_and_no_weight_sized_buffer(epilogue: bool) -> None:
    def linear(x, w, b):  # type: ignore[no-untyped-def]
        y = F.linear(x, w, b)
        return y.relu() if epilogue else y

    x, w, b = torch.randn(2, 16, 64), torch.randn(128, 64), torch.randn(128)
    ex, modules = _compiled(linear, x, w, b)
    assert ex.extern_count == 1 and ex.kernel_count == (1 if epilogue else 0)
    for m in modules:
        for node in m.funcs[0].nodes:
            if isinstance(node, AliasNode):
                continue  # a view of the weight: no storage
            for r in node.results:
                assert sorted(r.type.shape) != [64, 128], f"{node.describe()} copies the weight"
    got = torch.compile(linear, backend="fir", options={"pipeline": "fusion"})(x, w, b)
    torch.testing.assert_close(got, linear(x, w, b))


def test_explain_counts_aliases_and_lists_copies() -> None:
    def f(x, w):  # type: ignore[no-untyped-def]
        return x.t().reshape(1, -1) @ w, x.t() @ x

    ex, _ = _compiled(f, torch.randn(4, 8), torch.randn(32, 2))
    assert ex.alias_count >= 1
    assert len(ex.copies) == 1 and "no strides express" in ex.copies[0]
    text = ex.summary()
    assert "views: " in text and "1 copy" in text


def test_cat_with_an_empty_cache_needs_no_extern() -> None:
    def f(x):  # type: ignore[no-untyped-def]
        cache = torch.tensor([])
        return torch.cat([cache, x], dim=-2) * 2

    x = torch.randn(2, 4, 8)
    ex, _ = _compiled(f, x)
    assert "aten.cat.default" not in ex.fallbacks and ex.extern_count == 0
    got = torch.compile(f, backend="fir", options={"pipeline": "fusion"})(x)
    torch.testing.assert_close(got, f(x))


def test_outputs_that_are_views_of_inputs_alias_them_as_in_eager() -> None:
    def f(x):  # type: ignore[no-untyped-def]
        return x.t(), x[1:3], x.reshape(-1)

    x = torch.randn(4, 6)
    outs = torch.compile(f, backend="fir", options={"pipeline": "fusion"})(x)
    for o, r in zip(outs, f(x)):
        assert o.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
        assert (o.shape, o.stride(), o.storage_offset()) == (
            r.shape,
            r.stride(),
            r.storage_offset(),
        )
    outs[0][0, 0] = 100.0
    assert x[0, 0] == 100.0


# ---------------------------------------------------------------------------------------------
# PyTorch's own view ops (OpInfo) through the fusion pipeline: values and aliasing as in eager

VIEW_OPS = [
    "reshape", "view", "flatten", "unflatten", "squeeze", "unsqueeze", "permute", "transpose",
    "movedim", "t", "mT", "expand", "broadcast_to", "narrow", "select", "split", "chunk",
    "unbind", "diagonal", "as_strided", "unfold", "view_as", "ravel",
]  # fmt: skip


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def _view_cases() -> list:  # type: ignore[type-arg]
    from torch.testing._internal.common_methods_invocations import op_db

    cases = []
    for op in op_db:
        name = op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
        if name in VIEW_OPS:
            for k, sample in enumerate(op.sample_inputs("cpu", torch.float32)):
                if k >= 4:
                    break
                cases.append(pytest.param(op, sample, id=f"{name}-{k}"))
    return cases


@pytest.mark.parametrize("op,sample", _view_cases())
def test_opinfo_view_ops_alias_their_inputs_as_in_eager(op, sample) -> None:  # type: ignore[no-untyped-def]
    import torch._dynamo

    args, kwargs = (sample.input, *sample.args), dict(sample.kwargs)
    expected = op.op(*args, **kwargs)
    torch._dynamo.reset()
    fn = op.op
    compiled = torch.compile(
        lambda *a, **k: fn(*a, **k), backend="fir", dynamic=False, options={"pipeline": "fusion"}
    )
    actual = compiled(*args, **kwargs)
    torch.testing.assert_close(actual, expected, equal_nan=True)
    outs = list(actual) if isinstance(actual, (tuple, list)) else [actual]
    wants = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    x = sample.input
    for got, want in zip(outs, wants):
        if want.numel() and _storage(want) == _storage(x):  # eager returns a view of the input
            assert _storage(got) == _storage(x), f"{op.name}: a copy where eager returns a view"
            assert (got.stride(), got.storage_offset()) == (want.stride(), want.storage_offset())
