"""What falls back to PyTorch and what does not: FIR runs with PyTorch only what it reports as
unsupported (an op, a dtype, a feature), never its own internal errors, which raise with a dump
of the graph; ``fallback="never"`` makes every fallback an error; ``fir.explain`` and
``FIR_LOGS`` report each fallback with its reason."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from fir.frontend import dynamo as fir_backend  # noqa: E402
from fir.ir.errors import FirError  # noqa: E402
from fir.ir.graph import Module  # noqa: E402
from fir.passes import registry  # noqa: E402
from fir.passes.base import Pass  # noqa: E402

import fir  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh_dynamo(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    monkeypatch.setenv(fir_backend.DUMP_ENV, str(tmp_path / "dumps"))
    monkeypatch.delenv("FIR_LOGS", raising=False)
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


class BreakIR(Pass):
    """A planted bug: drops the first node, whose result later nodes still read."""

    name = "test-break-ir"

    def apply(self, module: Module) -> Module:
        del module.funcs[0].nodes[0]
        return module


class Crash(Pass):
    """A planted bug that is not a FirError."""

    name = "test-crash"

    def apply(self, module: Module) -> Module:
        raise AssertionError("planted assertion")


@pytest.fixture
def planted(monkeypatch: pytest.MonkeyPatch) -> None:
    for cls in (BreakIR, Crash):
        monkeypatch.setitem(registry._PASSES, cls.name, f"{__name__}:{cls.__name__}")


def _f(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x * 3, -1) + 1


def _dump_path(message: str) -> Path:
    m = re.search(r"the graph's dump is in (\S+)", message)
    assert m, message
    return Path(m.group(1))


@pytest.mark.parametrize(
    ("pipeline", "stage", "what"),
    [
        ("test-break-ir,fusion", "test-break-ir", "after pass 'test-break-ir'"),
        ("decompose,test-crash,fusion", "test-crash", "AssertionError: planted assertion"),
    ],
)
@pytest.mark.usefixtures("planted")
def test_an_internal_error_raises_with_a_dump(
    pipeline: str, stage: str, what: str, tmp_path: Path
) -> None:
    x = torch.randn(4, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback warning: the error is not swallowed
        with pytest.raises(Exception) as info:
            torch.compile(_f, backend="fir", options={"pipeline": pipeline})(x)
    message = str(info.value)
    assert "internal error while compiling" in message and what in message
    assert f"at stage '{stage}'" in message
    dump = _dump_path(message)
    assert dump.is_file() and dump.parent == tmp_path / "dumps"
    text = dump.read_text()
    assert f"failed at stage: {stage}" in text and what in text
    assert "// ---- stage 0: import ----" in text and "softmax" in text
    # the imported program is there to replay with fir-opt
    assert list(dump.parent.glob("*.00.import.fir"))


def test_an_unsupported_op_falls_back_with_its_reason() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x.sin(), 0) * 2

    x = torch.randn(6)
    ex = fir.explain(f, x)
    assert ex.fallbacks["aten.cumsum.default"] == 1
    assert ex.fallback_reasons["aten.cumsum.default"] == "no FIR mapping"
    assert "aten.cumsum.default x1: no FIR mapping" in ex.summary()
    torch._dynamo.reset()
    torch.testing.assert_close(torch.compile(f, backend="fir")(x), f(x))


def test_an_unsupported_dtype_runs_the_graph_with_pytorch_and_explain_says_why() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return (x * 2).abs()

    x = torch.randn(4, dtype=torch.complex64)
    start = len(fir_backend.FALLBACKS)
    ex = fir.frontend.explain.explain_call(f, (x,))
    assert any("dtype torch.complex64 is not supported" in r for r in ex.graphs_run_by_pytorch)
    assert "graph run by PyTorch: " in ex.summary()
    assert any("complex64" in fb.reason for fb in fir_backend.FALLBACKS[start:])


def test_fallback_never_makes_every_fallback_an_error() -> None:
    x = torch.randn(6)
    with pytest.raises(Exception, match=r"fallback='never'.*aten\.cumsum\.default: no FIR mapping"):
        torch.compile(lambda t: torch.cumsum(t, 0), backend="fir", options={"fallback": "never"})(x)
    torch._dynamo.reset()
    z = torch.randn(4, dtype=torch.complex64)
    with pytest.raises(Exception, match=r"fallback='never'.*complex64 is not supported"):
        torch.compile(lambda t: t * 2, backend="fir", options={"fallback": "never"})(z)
    torch._dynamo.reset()
    # what FIR supports compiles as usual
    y = torch.compile(_f, backend="fir", options={"fallback": "never"})(x.reshape(2, 3))
    torch.testing.assert_close(y, _f(x.reshape(2, 3)))


def test_fallback_option_values() -> None:
    assert fir_backend.CompileOptions.from_dict({"fallback": True}).fallback == "unsupported"
    assert fir_backend.CompileOptions.from_dict({"fallback": False}).fallback == "never"
    assert fir_backend.CompileOptions.from_dict(None).fallback == "unsupported"
    with pytest.raises(FirError, match="sometimes"):
        fir_backend.CompileOptions.from_dict({"fallback": "sometimes"})


@pytest.mark.filterwarnings("ignore:fir. running this graph with PyTorch")
def test_fir_logs_prints_each_topic(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(torch.softmax(x * 3, -1), 1)

    x = torch.randn(4, 8)
    torch.compile(f, backend="fir")(x)
    assert "[fir:" not in capsys.readouterr().err  # off by default

    for topic, expect in [
        ("graphs", r"\[fir:graphs\] graph_\d+ \(inference\): \d+ FX calls, \d+ aten ops imported"),
        ("fusion", r"\[fir:fusion\] .*kernel"),
        ("kernels", r"\[fir:kernels\] .*\n(\[fir:kernels\] .*\n)*.*step \d+: kernel"),
        ("fallback", r"\[fir:fallback\] graph_\d+: aten\.cumsum\.default x1 .*no FIR mapping"),
    ]:
        torch._dynamo.reset()
        monkeypatch.setenv("FIR_LOGS", topic)
        torch.compile(f, backend="fir")(x)
        err = capsys.readouterr().err
        assert re.search(expect, err), (topic, err)
        others = {f"[fir:{t}]" for t in ("graphs", "fusion", "kernels", "fallback")}
        assert not any(o in err for o in others - {f"[fir:{topic}]"}), err

    torch._dynamo.reset()
    monkeypatch.setenv("FIR_LOGS", "graphs,fallback")
    torch.compile(lambda t: t.sin() * 2, backend="fir")(torch.randn(4, dtype=torch.complex64))
    err = capsys.readouterr().err
    assert re.search(r"\[fir:fallback\] inference graph run by PyTorch: .*complex64", err), err


def test_a_compile_error_of_the_back_end_raises_with_a_dump(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # a compiler that exists but fails: FIR wrote code it cannot build, not a missing feature
    # (a machine with no compiler at all falls back: tests/frontend/test_frontend.py)
    cxx = tmp_path / "broken-c++"
    cxx.write_text(
        '#!/bin/sh\nif [ "$1" = --version ]; then echo broken 1.0; exit 0; fi\n'
        "echo 'error: planted' >&2\nexit 1\n"
    )
    cxx.chmod(0o755)
    monkeypatch.setenv("CXX", str(cxx))
    monkeypatch.setenv("FIR_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(Exception, match="at stage 'cpp back end'.*C\\+\\+ compilation failed") as e:
        torch.compile(_f, backend="fir")(torch.randn(4, 8))
    dump = _dump_path(str(e.value))
    text = dump.read_text()
    assert "failed at stage: cpp back end" in text and "planted" in text
    # the last stage that ran, plan-memory, is the program the back end got
    assert "stage 10: plan-memory" in text and "kernel @" in text


def test_a_converter_that_crashes_raises_instead_of_falling_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from fir.frontend.aten import CONVERTERS

    def crash(em: Any, x: Any) -> Any:
        raise IndexError("planted converter bug")

    monkeypatch.setitem(CONVERTERS, "aten.sin.default", crash)
    with pytest.raises(Exception, match="at stage 'import': IndexError: planted") as e:
        torch.compile(lambda t: t.sin() + 1, backend="fir")(torch.randn(4))
    text = _dump_path(str(e.value)).read_text()
    # nothing was imported: the dump holds the aten graph instead
    assert "stages that ran: none" in text and "torch.ops.aten.sin.default" in text


_LIB = torch.library.Library("firtest", "DEF")
_LIB.define("with_none(Tensor x) -> (Tensor, Tensor?, int, Tensor)")


def _with_none(x: torch.Tensor) -> tuple[torch.Tensor, None, int, torch.Tensor]:
    return x * 2, None, 7, x + 1


_LIB.impl("with_none", _with_none, "CompositeExplicitAutograd")
_LIB._register_fake("with_none", _with_none)


def test_an_extern_call_that_returns_none_and_numbers_among_its_tensors() -> None:
    """cuDNN attention (the H100's choice for bf16 SDPA) returns None and sizes beside its
    tensors: the call keeps the positions of its tensors (``results = [0, 3]``), and the graph
    compiles instead of falling back."""

    def f(x: torch.Tensor) -> torch.Tensor:
        a, _, n, b = torch.ops.firtest.with_none(x.sin())
        return (a + b) * n

    x = torch.randn(8)
    start = len(fir_backend.FALLBACKS)
    ex = fir.explain(f, x)
    assert not ex.graphs_run_by_pytorch and len(fir_backend.FALLBACKS) == start
    assert ex.fallbacks["firtest.with_none.default"] == 1  # no FIR mapping: an extern call
    torch._dynamo.reset()
    torch.testing.assert_close(torch.compile(f, backend="fir")(x), f(x))
    module = fir_backend.COMPILED[-1].module
    (call,) = [n for n in module.funcs[0].nodes if getattr(n, "callee", "").startswith("firtest")]
    assert call.attrs["results"] == [0, 3] and len(call.results) == 2
