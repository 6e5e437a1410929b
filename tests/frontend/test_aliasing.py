"""Aliasing under ``torch.compile(backend="fir")`` against eager: a compiled function mutates its
inputs exactly as eager does, returns a tensor of its own wherever eager does (and a view of an
input wherever eager does), and returns it with eager's strides.

Each pattern is one of the wrong results PyTorch's own Inductor tests found (issue 26): a
bitcast view written through into the caller's input, ``clone``/``copy_`` returning the input
itself, ``cat`` of one tensor read after an in-place write, outputs in row-major order where
eager keeps a permuted or channels-last one, ``as_strided`` over a channels-last result. The
decisions are in the IR (``aliases`` on extern views, ``output_views`` and the declared output
layouts on the function, ``copy`` on the nodes ``lower`` adds); the IR-level tests are in
``tests/lit/plan_memory/extern_view.fir`` and ``tests/lit/lower/fresh_outputs.fir``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from fir.frontend import dynamo as fir_backend  # noqa: E402

BACKENDS = ["cpp", "llvm"]


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Any:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def check_like_eager(
    fn: Callable[..., Any], make: Callable[[], list[torch.Tensor]], backend: str
) -> torch.Tensor:
    """Run ``fn`` eagerly and compiled on equal fresh inputs; compare the results' values and
    strides, the inputs after the call, and which results share an input's storage. Returns
    the compiled result."""
    torch.manual_seed(0)
    eager_in = make()
    compiled_in = [t.clone(memory_format=torch.preserve_format) for t in eager_in]
    for a, b in zip(eager_in, compiled_in):
        assert a.stride() == b.stride()
    expected = fn(*eager_in)
    got = torch.compile(fn, backend="fir", options={"backend": backend})(*compiled_in)
    torch.testing.assert_close(got, expected)
    assert got.stride() == expected.stride(), "strides differ from eager's"
    for a, b in zip(compiled_in, eager_in):
        torch.testing.assert_close(a, b, msg="an input differs from eager's")
    eager_alias = [_storage(expected) == _storage(t) for t in eager_in]
    got_alias = [_storage(got) == _storage(t) for t in compiled_in]
    assert got_alias == eager_alias, "the result shares storage with an input unlike eager's"
    return got


@pytest.mark.parametrize("backend", BACKENDS)
def test_bitcast_view_of_input_plus_one(backend: str) -> None:
    # the extern view.dtype's result is the input's memory: `+ 1` must not be written over it
    def fn(y: torch.Tensor) -> torch.Tensor:
        return y.view(torch.float32) + 1

    def make() -> list[torch.Tensor]:
        return [torch.randn(4, 4).view(torch.int32)]  # the bits of floats

    start = len(fir_backend.COMPILED)
    check_like_eager(fn, make, backend)
    text = fir_backend.COMPILED[start].stages[0][1]
    assert 'extern "aten.view.dtype"' in text and "aliases = [0]" in text


@pytest.mark.parametrize("backend", BACKENDS)
def test_bitcast_view_of_intermediate(backend: str) -> None:
    # the view's base %exp stays alive while the view is read: the output, which reads the
    # view in reverse, must not take over %exp's storage
    def fn(x: torch.Tensor) -> torch.Tensor:
        v = x.exp().view(torch.int32)
        t = (x.view(16, 1) * x.view(1, 16)).sum(1)
        return (v.flip(0) + 1).float() * 1e-9 + t

    check_like_eager(fn, lambda: [torch.randn(16)], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_clone_of_input_is_fresh(backend: str) -> None:
    got = check_like_eager(lambda x: x.clone(), lambda: [torch.randn(4, 8)], backend)
    got.add_(1)  # writing into the result must not write into anything else


@pytest.mark.parametrize("backend", BACKENDS)
def test_sliced_clone_is_fresh(backend: str) -> None:
    check_like_eager(lambda a: a[:, :2].clone(), lambda: [torch.randn(4, 8)], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_like_copy_is_fresh(backend: str) -> None:
    check_like_eager(lambda a: torch.empty_like(a).copy_(a), lambda: [torch.randn(4, 8)], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_cat_of_one_before_in_place_write(backend: str) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        rt = torch.cat([x])
        x.sin_()
        return rt

    check_like_eager(fn, lambda: [torch.randn(16)], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_view_of_input_stays_a_view(backend: str) -> None:
    got = check_like_eager(lambda x: x.t(), lambda: [torch.randn(4, 8)], backend)
    assert got.stride() == (1, 8)


@pytest.mark.parametrize("backend", BACKENDS)
def test_pointwise_on_permuted_input_keeps_its_order(backend: str) -> None:
    check_like_eager(lambda x: x.permute(1, 0).sin(), lambda: [torch.randn(3, 4)], backend)
    check_like_eager(lambda x: x.permute(1, 0).clone(), lambda: [torch.randn(3, 4)], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_pointwise_on_channels_last_input(backend: str) -> None:
    def make() -> list[torch.Tensor]:
        return [torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)]

    got = check_like_eager(lambda x: torch.relu(x) * 2, make, backend)
    assert got.is_contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("backend", BACKENDS)
def test_permute_contiguous_then_view(backend: str) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return (x + 1).permute(0, 2, 3, 1).contiguous()

    got = check_like_eager(fn, lambda: [torch.randn(2, 3, 4, 5)], backend)
    assert got.is_contiguous()
    got.view(-1, 3)  # eager's result allows it


@pytest.mark.parametrize("backend", BACKENDS)
def test_as_strided_of_channels_last_result(backend: str) -> None:
    def make() -> list[torch.Tensor]:
        return [torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)]

    # as_strided reads the storage, which eager lays out channels-last
    check_like_eager(lambda x: torch.as_strided(x + 1, (2, 3, 4, 5), (60, 20, 5, 1)), make, backend)
    check_like_eager(lambda x: torch.as_strided(torch.relu(x), (8,), (3,)), make, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_extern_view_of_a_view_of_a_padded_result(backend: str) -> None:
    # conformance's test_conv_with_as_strided: an as_strided PyTorch runs over a view of a
    # padded buffer; its reader keeps the padded buffer alive (the view node between has no
    # storage of its own), so the memory plan must not report it overwritten
    def fn(x: torch.Tensor) -> torch.Tensor:
        p = torch.nn.functional.pad(x, [2, 2, 2, 2])
        a = torch.as_strided(p, (1, 2, 2, 20, 12), (800, 400, 160, 1, 20))
        b = torch.as_strided(a, (1, 2, 2, 2, 12, 12), (800, 400, 160, 8, 20, 1))
        return b.clone()

    check_like_eager(fn, lambda: [torch.randn(1, 2, 16, 16)], backend)
