"""The ops that kept real models (GPT-2, Llama, BERT, T5) from running under
``torch.compile(backend="fir", dynamic=True)`` with nothing in PyTorch, each as a small graph:
symbolic ``arange`` and ``slice`` bounds, ``true_divide`` and ``prims.convert_element_type`` (what
Dynamo makes of a float argument), an extern call returning sizes (cuDNN attention's ``max_q``),
a 0-d CPU tensor beside GPU tensors, ``tril`` of symbolic size, and the residual-add + RMS-norm
kernel whose loops ``reorder`` must not merge across the reduction's boundary. Every test runs
with ``fallback="never"`` (a graph or op left to PyTorch raises) and checks eager's result and a
single compile across lengths."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from fir.frontend import dynamo as fir_backend  # noqa: E402
from fir.frontend.fx_import import ImportReport, import_graph_module  # noqa: E402
from fir.ir.graph import ExternNode  # noqa: E402
from fir.ir.interpreter import run_graph  # noqa: E402

NEVER = {"fallback": "never"}


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Any:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def compiles_once(
    fn: Callable[..., Any], calls: list[tuple[Any, ...]], **options: Any
) -> list[fir_backend.CompiledGraph]:
    """Compile ``fn`` with ``dynamic=True`` and ``fallback="never"``, call it on each argument
    tuple, compare with eager, and return the FIR graphs compiled (there must be one)."""
    compiled = torch.compile(fn, backend="fir", dynamic=True, options={**NEVER, **options})
    start = len(fir_backend.COMPILED)
    for args in calls:
        torch.testing.assert_close(compiled(*args), fn(*args), rtol=1e-5, atol=1e-5)
    graphs = fir_backend.COMPILED[start:]
    assert len(graphs) == 1, [g.name for g in graphs]
    assert graphs[0].report.fallbacks == {}
    return graphs


# ---------------------------------------------------------------------------------------------
# frontend: symbolic bounds


def positions(x: Any) -> Any:
    """GPT-2 and Llama's position ids, T5's relative positions: aranges over the length."""
    n = x.shape[1]
    ids = torch.arange(n)
    shifted = torch.arange(x.shape[0], x.shape[0] + 2 * n, 2, dtype=torch.float32)
    return x + ids + shifted + torch.arange(n)[:, None].sub(torch.arange(n)[None, :]).sum(0)


def test_arange_with_symbolic_bounds() -> None:
    (g,) = compiles_once(positions, [(torch.randn(3, n),) for n in (4, 7, 12)])
    assert g.report.imported["aten.arange.default"] >= 1
    assert g.report.imported["aten.arange.start_step"] == 1


def position_table(x: Any, table: Any) -> Any:
    """BERT's ``position_ids[:, :seq_len]`` of a registered buffer, and a window starting at a
    symbolic index."""
    return x + table[:, : x.shape[1]] + x * table[:, x.shape[1] : 2 * x.shape[1]]


def test_slice_with_symbolic_bounds() -> None:
    calls = [(torch.randn(3, n), torch.randn(1, 64)) for n in (4, 7, 12)]
    (g,) = compiles_once(position_table, calls)
    assert g.report.imported["aten.slice.Tensor"] == 2


def scaled(x: Any, s: float) -> Any:
    """GPT-2's gelu constant ``math.sqrt(2 / math.pi)``: Dynamo passes the float as a 0-d f64
    tensor and computes with ``scalar_tensor``, ``true_divide`` and ``convert_element_type``."""
    return x * math.sqrt(2.0 / s)


def test_true_divide_and_convert_element_type_of_a_float_argument() -> None:
    # a float argument reaches the graph as a tensor only where Dynamo does not specialise
    # floats (the default of newer torch; torch 2.11 recompiled for each value)
    import torch._dynamo

    calls = [(torch.randn(3, n), s) for n, s in ((4, 3.0), (7, 5.0), (12, math.pi))]
    with torch._dynamo.config.patch(specialize_float=False):
        (g,) = compiles_once(scaled, calls)
    assert g.report.imported["aten.true_divide.Tensor"] == 1
    assert g.report.imported["prims.convert_element_type.default"] >= 1


def causal(x: Any) -> Any:
    """The causal mask of attention's math path: ``tril`` over a symbolic square."""
    n = x.shape[1]
    return torch.ones(n, n).tril() * x[:, :, None] + torch.ones(n, n).triu(1)


def test_tril_of_symbolic_size() -> None:
    (g,) = compiles_once(causal, [(torch.randn(2, n),) for n in (4, 7, 12)])
    assert g.report.imported["aten.tril.default"] == 1


# ---------------------------------------------------------------------------------------------
# frontend: extern results that are sizes, tensors made on the graph's device


def _cudnn_attention_graph() -> Any:
    """cuDNN attention traced on meta tensors with symbolic sizes: it returns ``max_q`` and
    ``max_k`` as SymInts (the sequence lengths)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(q: Any, k: Any, v: Any) -> Any:
        out = torch.ops.aten._scaled_dot_product_cudnn_attention.default(
            q, k, v, None, False, 0.0, True, False
        )
        return out[0] * 2

    q = torch.empty(2, 4, 16, 8, device="meta")
    return make_fx(f, tracing_mode="symbolic")(q, q, q)


def test_an_extern_returning_sizes_keeps_its_tensors() -> None:
    gm = _cudnn_attention_graph()
    vals = [n.meta.get("val") for n in gm.graph.nodes if n.op == "call_function"]
    assert any(isinstance(v, tuple) and isinstance(v[4], torch.SymInt) for v in vals)
    module, report, _ = import_graph_module(gm)
    (call,) = [n for n in module.funcs[0].nodes if isinstance(n, ExternNode)]
    assert call.callee == "aten._scaled_dot_product_cudnn_attention.default"
    assert call.attrs["results"] == [0, 1, 6, 7]  # tensors only; max_q/max_k are no values
    assert report.fallbacks == {}


def test_a_size_an_extern_returns_reads_as_that_size() -> None:
    # a reader of max_q (an arange over it) gets the symbol it equals: the sequence length
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(q: Any, k: Any, v: Any) -> Any:
        out = torch.ops.aten._scaled_dot_product_cudnn_attention.default(
            q, k, v, None, False, 0.0, True, False
        )
        return out[0] * 2, torch.arange(out[4], device="meta")

    q = torch.empty(2, 4, 16, 8, device="meta")
    gm = make_fx(f, tracing_mode="symbolic")(q, q, q)
    module, report, _ = import_graph_module(gm)
    assert report.fallbacks == {}
    func = module.funcs[0]
    assert func.output_types[1].shape == (func.args[0].type.shape[2],)


def test_creation_on_the_graph_device_and_cpu_scalars_beside_it() -> None:
    # a graph of meta tensors (a GPU graph's stand-in): full on that device imports, and a
    # 0-d CPU tensor input is marked to be moved to the program's device at the call
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(x: Any, s: Any) -> Any:
        return x + torch.full((4,), 2.0, device="meta") * s

    gm = make_fx(f)(torch.empty(4, device="meta"), torch.tensor(3.0))
    _, report, _ = import_graph_module(gm)
    assert report.fallbacks == {}
    assert report.moved_inputs == [1]


@pytest.mark.parametrize("writes", [False, True])
def test_moved_inputs_copy_cpu_scalars_to_the_device_once_per_value(writes: bool) -> None:
    # dynamo passes a model's float attribute (an epsilon) as a new 0-d CPU tensor at every
    # call under dynamic=True: its device copy is kept while the value's bits stay the same,
    # unless the program writes its inputs

    class Program:
        alloc_device = "meta"

        def writes_inputs(self) -> bool:
            return writes

    report = ImportReport()
    report.moved_inputs = [1]
    graph = fir_backend.CompiledGraph(None, report, [], "g", program=Program())  # type: ignore[arg-type]
    x = torch.ones(2)
    first = graph._moved_inputs((x, torch.tensor(3.0)))
    assert first[0] is x and first[1].device.type == "meta"
    again = graph._moved_inputs((x, torch.tensor(3.0)))
    assert (again[1] is first[1]) is not writes
    for other in (torch.tensor(4.0), torch.tensor(3.0, dtype=torch.float64)):
        assert graph._moved_inputs((x, other))[1] is not first[1]
    zero = graph._moved_inputs((x, torch.tensor(0.0)))[1]
    assert graph._moved_inputs((x, torch.tensor(-0.0)))[1] is not zero


# ---------------------------------------------------------------------------------------------
# middle end: a kernel of a reduction and a pointwise node over its whole domain, symbolic


def residual_rms(a: Any, b: Any, c: Any, d: Any, e: Any, w: Any) -> Any:
    """T5's residual stream: a sum of five tensors (realized: it reads more buffers than a
    fused read may), then RMS norm over the hidden size. The sum fuses into the norm's kernel,
    inside its reduction loop; ``reorder`` must not merge its loops into one of size
    ``s0*s1*s2``, which cannot be cut at the reduction's boundary when sizes are symbolic."""
    h = a + b + c + d + e
    var = h.pow(2).mean(-1, keepdim=True)
    y = w * (h * torch.rsqrt(var + 1e-6))
    return y, h * 2, y.sum(-1)


@pytest.mark.parametrize("pipeline", ["fusion", "cuda"])
@pytest.mark.parametrize("backend", ["interp", "cpp"])
def test_residual_rms_norm_kernel_with_symbolic_sizes(pipeline: str, backend: str) -> None:
    calls = [
        tuple(torch.randn(2, n, 32) for _ in range(5)) + (torch.randn(32),) for n in (5, 9, 17)
    ]
    compiles_once(residual_rms, calls, pipeline=pipeline, backend=backend)


def test_merged_loops_over_symbolic_sizes_rewrite_to_the_kernel_variable() -> None:
    # a row-major position over symbolic sizes stays factored, s*(4*i0 + i1) + i2; the Triton
    # plan must still see that it is the kernel's own x0 (else: "an illegal fusion")
    import sympy
    from fir.backends.plan.indexing import Group, _merge_affine
    from fir.ir.symbolic import size_symbol

    s, t = size_symbol("s1"), size_symbol("s2")
    i0, i1, i2, x0 = sympy.symbols("i0 i1 i2 x0", integer=True, nonnegative=True)
    e = s * (4 * i0 + i1) + i2
    group = Group((i0, i1, i2), (t, 4, s))
    assert sympy.expand(_merge_affine(e, group, x0) - x0) == 0


def test_run_graph_of_an_imported_symbolic_slice() -> None:
    # the import itself, run by the reference interpreter at two lengths
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(x: Any, table: Any) -> Any:
        return x + table[:, : x.shape[1]]

    gm = make_fx(f, tracing_mode="symbolic")(torch.randn(3, 5), torch.randn(1, 64))
    module, report, _ = import_graph_module(gm)
    assert report.fallbacks == {}
    for n in (5, 11):
        x, table = torch.randn(3, n), torch.randn(1, 64)
        torch.testing.assert_close(run_graph(module.funcs[0], [x, table])[0], f(x, table))


def _cudnn_attention_of(query_of: Any) -> Any:
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(x: Any, k: Any, v: Any) -> Any:
        out = torch.ops.aten._scaled_dot_product_cudnn_attention.default(
            query_of(x), k, v, None, False, 0.0, True, False
        )
        return out[0] + 1

    x = torch.empty(2, 16, 32, device="meta")
    k = torch.empty(2, 4, 16, 8, device="meta")
    module, _, _ = import_graph_module(make_fx(f)(x, k, k))
    (call,) = [n for n in module.funcs[0].nodes if isinstance(n, ExternNode)]
    return call


def test_cudnn_attention_output_follows_the_query_fir_computes() -> None:
    # cuDNN lays its output out in the query's dimension order. Llama's rotary query is a
    # pointwise op over a transposed projection: eager (and the trace) lays it out [batch,
    # tokens, heads, dim], FIR computes it densely, so the output is declared dense too; the
    # traced layout made the runtime copy every call's output into it
    call = _cudnn_attention_of(lambda x: x.view(2, 16, 4, 8).transpose(1, 2) * 2)
    assert call.args[0].type.layout is None
    assert call.results[0].type.layout is None, call.results[0].type


def test_cudnn_attention_output_of_a_transposed_view_keeps_its_order() -> None:
    # GPT-2's query is a view of the projection: [batch, tokens, heads, dim] in memory, and so
    # is the output
    call = _cudnn_attention_of(lambda x: x.view(2, 16, 4, 8).transpose(1, 2))
    assert tuple(call.results[0].type.strides) == (512, 8, 32, 1)


def test_a_query_saved_for_the_backward_keeps_the_traced_layout_and_so_does_the_output() -> None:
    # in training the query is a forward output (saved for attention's backward), computed in
    # eager's layout: the output follows it, as traced, and needs no copy
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(x: Any, k: Any, v: Any) -> Any:
        q = x.view(2, 16, 4, 8).transpose(1, 2) * 2
        out = torch.ops.aten._scaled_dot_product_cudnn_attention.default(
            q, k, v, None, False, 0.0, True, False
        )
        return out[0] + 1, q

    x = torch.empty(2, 16, 32, device="meta")
    k = torch.empty(2, 4, 16, 8, device="meta")
    module, _, _ = import_graph_module(make_fx(f)(x, k, k))
    (call,) = [n for n in module.funcs[0].nodes if isinstance(n, ExternNode)]
    assert tuple(call.args[0].type.strides) == (512, 8, 32, 1)
    assert tuple(call.results[0].type.strides) == (512, 8, 32, 1)
