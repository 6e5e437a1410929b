"""The bookkeeping of :class:`fir.backends.runtime.cuda_graphs.CudaGraphProgram` on any machine: which
inputs are read in place and which are copied, that a held result is never overwritten, that
moved inputs cause a new capture. CUDA's graph API is replaced by a stand-in whose replay runs
the program on the captured inputs and writes the captured outputs in place (what a real replay
does to their memory); tests/backends/test_cuda_graphs.py runs the real thing on a GPU."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from fir.backends.compile import compile_function
from fir.backends.runtime.cuda_graphs import CudaGraphProgram
from fir.ir.parser import parse_module
from fir.passes.pipeline import parse_pipeline

TEXT = """
func @f(%w: f32[4, 8], %x: f32[4, 8]) -> (f32[4, 8]) {
  %y = mul %w, %x : f32[4, 8]
  %z = add %y, 1.0 : f32[4, 8]
  return %z
}
"""


class _Stream:
    def wait_stream(self, other: Any) -> None:
        pass


@pytest.fixture
def wrapped(monkeypatch: pytest.MonkeyPatch) -> Iterator[CudaGraphProgram]:
    module = parse_pipeline("fusion").run(parse_module(TEXT, "<test>"))
    wrapper = CudaGraphProgram(compile_function(module.funcs[0], "cpp"))

    class Graph:
        def replay(self) -> None:
            fresh = wrapper.program(*wrapper.static_inputs)
            for mine, new in zip(wrapper.static_outputs, fresh):
                mine.copy_(new)

    @contextlib.contextmanager
    def capture(graph: Any) -> Iterator[None]:
        yield

    monkeypatch.setattr(torch.cuda, "CUDAGraph", Graph)
    monkeypatch.setattr(torch.cuda, "graph", capture)
    monkeypatch.setattr(torch.cuda, "Stream", _Stream)
    monkeypatch.setattr(torch.cuda, "stream", lambda s: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *a: _Stream())
    yield wrapper


def _want(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return w * x + 1.0


def test_fixed_inputs_are_read_in_place_and_results_are_not_copies(wrapped: Any) -> None:
    w, x = torch.randn(4, 8), torch.randn(4, 8)
    for _ in range(3):
        torch.testing.assert_close(wrapped(w, x)[0], _want(w, x))
    assert wrapped.replays == 2 and wrapped.copied == set()
    # a parameter updated in place, an input changed in place: the replay reads them
    w.add_(1.0)
    x.mul_(-1.0)
    out = wrapped(w, x)[0]
    torch.testing.assert_close(out, _want(w, x))
    assert (
        out.untyped_storage().data_ptr() == wrapped.static_outputs[0].untyped_storage().data_ptr()
    )


def test_a_held_result_is_never_overwritten(wrapped: Any) -> None:
    w = torch.randn(4, 8)
    xs = [torch.randn(4, 8) for _ in range(5)]
    held = [wrapped(w, x)[0] for x in xs]  # the caller keeps every result
    for got, x in zip(held, xs):
        torch.testing.assert_close(got, _want(w, x))
    assert wrapped.replays == 1 and wrapped.held == 3
    assert wrapped.copied == {1}  # a new address each call: copied; the weight stayed put
    view = held[1][1:3]  # the replayed result, kept alive by a view only
    del held
    other = wrapped(w, xs[2])[0]
    torch.testing.assert_close(view, _want(w, xs[1])[1:3])
    torch.testing.assert_close(other, _want(w, xs[2]))
    del view, other
    replays = wrapped.replays
    torch.testing.assert_close(wrapped(w, xs[3])[0], _want(w, xs[3]))
    assert wrapped.replays == replays + 1


def test_a_fixed_input_that_moves_is_copied_after_a_new_capture(wrapped: Any) -> None:
    w, x = torch.randn(4, 8), torch.randn(4, 8)
    wrapped(w, x)
    wrapped(w, x)
    assert wrapped.captures == 1 and wrapped.copied == set()
    w2 = torch.randn(4, 8)  # the weight replaced by another tensor
    torch.testing.assert_close(wrapped(w2, x)[0], _want(w2, x))
    assert wrapped.captures == 2 and wrapped.copied == {0}
    w3 = torch.randn(4, 8)
    torch.testing.assert_close(wrapped(w3, x)[0], _want(w3, x))
    assert wrapped.captures == 2  # copied now: no new capture
