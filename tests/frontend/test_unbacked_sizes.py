"""Graphs with data-dependent sizes (PyTorch's unbacked symbols ``u0``) compile with FIR.

``x.item()`` used as a size, ``.tolist()`` split sizes, ``nonzero``, ``masked_select`` and
``repeat_interleave`` results, a custom op whose fake implementation makes a dynamic size: each
graph is cut at the op making the size (:mod:`fir.frontend.segments`) into FIR programs that
take it bound. Every test compiles with ``fallback="never"`` where it can (a graph left to
PyTorch raises), compares with eager for several data values (the size changes between calls
without a recompile) and checks that the graph compiled once into FIR programs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from fir.frontend import dynamo as fir_backend  # noqa: E402

NEVER = {"fallback": "never"}
CAPTURE = {"capture_scalar_outputs": True, "capture_dynamic_output_shape_ops": True}


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Any:
    torch._dynamo.reset()
    with torch._dynamo.config.patch(**CAPTURE):
        yield
    torch._dynamo.reset()


def compiles_once(
    fn: Callable[..., Any],
    calls: list[tuple[Any, ...]],
    backend: str = "cpp",
    fallback: str = "never",
    externs: frozenset[str] = frozenset(),
) -> Any:
    """Compile ``fn`` once, call it on each argument tuple, compare with eager; the graph is
    one cut into FIR programs (no graph ran with PyTorch). Returns it."""
    compiled = torch.compile(fn, backend="fir", options={"fallback": fallback, "backend": backend})
    start, fallbacks = len(fir_backend.COMPILED), len(fir_backend.FALLBACKS)
    for args in calls:
        torch.testing.assert_close(compiled(*args), fn(*args))
    assert len(fir_backend.FALLBACKS) == fallbacks
    graph = fir_backend.SEGMENTED[-1]
    assert graph.calls == len(calls)
    # compiled once: the FIR programs made since are this graph's parts
    assert graph.segments
    assert [id(s.compiled) for s in graph.segments] == [id(g) for g in fir_backend.COMPILED[start:]]
    for s in graph.segments:
        assert set(s.compiled.report.fallbacks) <= externs, s.compiled.report.fallbacks
    return graph


def item_size(x: Any, y: Any) -> Any:
    z = y.item()
    return torch.cat([x, x.new_ones(z, x.shape[1])]) * 2


def tolist_split(sz: Any, x: Any) -> Any:
    a, b = sz.tolist()
    r0, r1 = torch.ops.aten.split_with_sizes.default(x, [a, b])
    return r0.exp(), r1 * 3 + 1


def nonzero_used(x: Any) -> Any:
    idx = torch.nonzero(x > 0)
    return (idx * 2 + 1).float().sum(0), idx.float() / 3


def masked(x: Any) -> Any:
    kept = x.masked_select(x > 0)
    return kept.exp() + kept.sum()


def repeat_then_index(x: Any, repeats: Any) -> Any:
    rank = torch.arange(repeats.numel())
    index = rank.repeat_interleave(repeats, dim=0)
    return torch.index_select(x, index=index, dim=0) + 1


def test_item_as_a_size() -> None:
    x = torch.randn(2, 3)
    graph = compiles_once(item_size, [(x, torch.tensor([k])) for k in (3, 5, 1)])
    # the size is a size parameter of the FIR program after the item() call
    (seg,) = graph.segments
    assert "u0" in [s.name for s in seg.compiled.module.funcs[0].size_params]
    assert any(
        isinstance(step, torch.fx.Node) and "_local_scalar_dense" in str(step.target)
        for step in graph.steps
    )


def test_item_of_zero_is_correct() -> None:
    # FIR's sizes are positive: the part of a call that has a size of 0 runs with PyTorch
    x = torch.randn(2)

    def f(x: Any, y: Any) -> Any:
        return torch.cat([x, x.new_ones(y.item())]) + 1

    compiles_once(f, [(x, torch.tensor([0])), (x, torch.tensor([3])), (x, torch.tensor([0]))])


def test_tolist_split_sizes() -> None:
    calls = [(torch.tensor([3, 4]), torch.randn(7)), (torch.tensor([6, 1]), torch.randn(7))]
    compiles_once(tolist_split, calls)


def test_nonzero_result_feeds_later_ops() -> None:
    calls = [(torch.randn(12),) for _ in range(3)] + [(torch.ones(12),)]
    graph = compiles_once(nonzero_used, calls)
    later = graph.segments[-1].compiled.module.funcs[0]
    assert any("u" in str(d) for a in later.args for d in a.type.shape), later.args


def test_masked_select_result_feeds_later_ops() -> None:
    compiles_once(masked, [(torch.randn(16),) for _ in range(3)])


def test_repeat_interleave_then_index() -> None:
    repeats = torch.tensor([5, 10, 15])
    torch._dynamo.mark_dynamic(repeats, 0)
    calls = [(torch.randn(32, 64), repeats), (torch.randn(32, 64), torch.tensor([1, 2, 3]))]
    compiles_once(repeat_then_index, calls)


def test_a_violated_check_raises_like_eager() -> None:
    def f(x: Any, y: Any) -> Any:
        z = y.item()
        torch._check(z <= 4)
        return x.new_ones(z) + x.sum()

    x = torch.randn(3)
    compiled = torch.compile(f, backend="fir", options=NEVER)
    torch.testing.assert_close(compiled(x, torch.tensor([4])), f(x, torch.tensor([4])))
    with pytest.raises(RuntimeError):
        f(x, torch.tensor([6]))
    with pytest.raises(RuntimeError):
        compiled(x, torch.tensor([6]))


def test_custom_op_with_a_dynamic_size() -> None:
    @torch.library.custom_op("fir_test_unbacked::grow", mutates_args={})
    def grow(x: torch.Tensor) -> torch.Tensor:
        return x.repeat(2, 1)

    @grow.register_fake
    def _(x: torch.Tensor) -> torch.Tensor:
        n = torch.library.get_ctx().new_dynamic_size()
        return x.new_empty(n, x.shape[1])

    def f(x: Any) -> Any:
        return grow(x).relu() * 2

    # the custom op has no FIR mapping (a fallback="never" error); the default mode runs it
    # as an extern call between FIR's programs, as it does for any custom op
    compiles_once(f, [(torch.randn(3, 4),), (torch.randn(3, 4),)], fallback="unsupported")
    torch._dynamo.reset()
    with pytest.raises(Exception, match="fir_test_unbacked.grow"):
        torch.compile(f, backend="fir", options=NEVER)(torch.randn(3, 4))


@pytest.mark.parametrize("backend", ["llvm", "triton"])
def test_other_back_ends(backend: str) -> None:
    x = torch.randn(2, 3)
    compiles_once(item_size, [(x, torch.tensor([k])) for k in (3, 5)], backend=backend)
    torch._dynamo.reset()
    compiles_once(nonzero_used, [(torch.randn(12),) for _ in range(2)], backend=backend)
    torch._dynamo.reset()
    calls = [(torch.tensor([3, 4]), torch.randn(7)), (torch.tensor([6, 1]), torch.randn(7))]
    compiles_once(tolist_split, calls, backend=backend)


def test_parts_are_fir_programs() -> None:
    from fir.frontend.segments import Segment

    graph = compiles_once(masked, [(torch.randn(16),)])
    assert all(isinstance(s, Segment) for s in graph.segments)
    assert all(s.compiled.program is not None for s in graph.segments)
