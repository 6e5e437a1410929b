"""``options={"cuda_graphs": True}``: each compiled CUDA program replays a captured CUDA graph.
What a user relies on: results equal eager's, a result the caller still holds is never
overwritten by a later call, parameters are read where they lie (not copied each call), an
input changed in place or passed at another address is seen, and a training step (forward and
backward graphs) replays too. These need a CUDA GPU; elsewhere they are skipped."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.LayerNorm(128), torch.nn.Linear(128, 32)
    ).cuda()


def _compile(fn: Callable[..., Any]) -> Callable[..., Any]:
    import torch._dynamo

    torch._dynamo.reset()
    return torch.compile(fn, backend="fir", options={"cuda_graphs": True, "fallback": "never"})


def _graph_programs(before: int) -> list[Any]:
    from fir.backends.runtime.cuda_graphs import CudaGraphProgram
    from fir.frontend import dynamo as fir_backend

    progs = [g.program for g in fir_backend.COMPILED[before:]]
    assert progs and all(isinstance(p, CudaGraphProgram) for p in progs)
    return progs


def _close(got: torch.Tensor, want: torch.Tensor) -> None:
    torch.testing.assert_close(got, want, rtol=2e-3, atol=2e-3)


def test_results_match_eager_and_parameters_are_read_in_place() -> None:
    from fir.frontend import dynamo as fir_backend

    m = _model()
    f = _compile(m)
    before = len(fir_backend.COMPILED)
    x = torch.randn(16, 64, device="cuda")
    with torch.no_grad():
        for _ in range(4):
            _close(f(x), m(x))
        (prog,) = _graph_programs(before)
        assert prog.replays >= 2
        assert prog.copied == set(), "an input that stayed put was copied each call"
        # a parameter changed in place: the graph reads it where it lies
        m[0].weight.add_(0.5)
        _close(f(x), m(x))
        # an input changed in place
        x.mul_(-2.0)
        _close(f(x), m(x))
        assert prog.held == 0


def test_a_result_the_caller_holds_is_not_overwritten() -> None:
    from fir.frontend import dynamo as fir_backend

    m = _model()
    f = _compile(m)
    before = len(fir_backend.COMPILED)
    xs = [torch.randn(16, 64, device="cuda") for _ in range(6)]
    with torch.no_grad():
        held = [f(x) for x in xs]  # every result kept
        wants = [m(x) for x in xs]
        torch.cuda.synchronize()
        for got, want in zip(held, wants):
            _close(got, want)
        (prog,) = _graph_programs(before)
        assert prog.held >= 3  # those calls ran without the graph, into fresh memory
        # a view of a result keeps it too
        del held
        keep = f(xs[0])[1:3]
        other = f(xs[1])
        _close(keep, m(xs[0])[1:3])
        _close(other, m(xs[1]))
        del keep, other
        # results dropped: the graph replays again, and the input, passed at a new address
        # each call, is copied into the graph's own
        replays = prog.replays
        for x in xs:
            _close(f(x), m(x))
        assert prog.replays > replays
        assert len(prog.copied) == 1


def test_a_training_step_replays_forward_and_backward() -> None:
    from fir.frontend import dynamo as fir_backend

    m = _model()
    ref = _model()
    ref.load_state_dict(m.state_dict())
    f = _compile(m)
    before = len(fir_backend.COMPILED)
    x = torch.randn(16, 64, device="cuda")
    for _ in range(5):
        for model, fn in ((m, f), (ref, ref)):
            model.zero_grad(set_to_none=True)
            fn(x).square().mean().backward()
        for p, q in zip(m.parameters(), ref.parameters()):
            assert p.grad is not None and q.grad is not None
            _close(p.grad, q.grad)
    progs = _graph_programs(before)
    assert len(progs) == 2  # forward and backward
    assert all(p.replays >= 2 for p in progs), [(p.replays, p.held, p.disabled) for p in progs]


def test_gradients_accumulated_over_calls_stay_right() -> None:
    """Without zero_grad, autograd adds each step's gradient into ``.grad``, which may be
    the memory a replay returned: the next replay must not write over it."""
    m = _model()
    ref = _model()
    ref.load_state_dict(m.state_dict())
    f = _compile(m)
    x = torch.randn(16, 64, device="cuda")
    for _ in range(4):
        f(x).square().mean().backward()
        ref(x).square().mean().backward()
    for p, q in zip(m.parameters(), ref.parameters()):
        assert p.grad is not None and q.grad is not None
        _close(p.grad, q.grad)
