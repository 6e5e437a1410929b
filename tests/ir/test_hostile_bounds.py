"""No memory outside buffers (issue 26): what the reference interpreter refuses, compiled code
refuses too, once per call and before any kernel runs, with an error that names the node.

Each case here read or wrote outside a buffer, returned a wrong value or crashed before: a load
past its buffer under symbolic sizes, an ``indirect`` bound larger than the table, a returned
view past its storage, a max over no element, a loop of 2^64 + 5 iterations, a result whose
elements share memory, ``fir-run`` inputs that ignored their declared layouts, and concurrent
calls of one C++ program that shared their argument arrays."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from concurrency import on_threads
from fir.backends.compile import compile_function
from fir.backends.plan import PlanError
from fir.ir.errors import FirError, KernelIndexError, VerifyError
from fir.ir.interpreter import run_graph
from fir.ir.parser import parse_module
from fir.ir.verifier import verify_module
from fir.passes.pipeline import parse_pipeline

BACKENDS = ["cpp", "llvm"]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIR_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "fir-cache"))


def graph(text: str, pipeline: str = "") -> object:
    m = parse_module(text, "<test>")
    verify_module(m)
    if pipeline:
        m = parse_pipeline(pipeline).run(m)
    return m.funcs[0]


def fir_run(tmp_path: Path, text: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``fir-run`` on ``text`` in a process of its own (a read far outside a buffer crashed it)."""
    path = tmp_path / "prog.fir"
    path.write_text(text)
    env = dict(os.environ, PYTHONSAFEPATH="1")
    return subprocess.run(
        [sys.executable, "-m", "fir.tools.fir_run", str(path), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
    )


# ---------------------------------------------------------------------------------------------
# Loads outside their buffer under symbolic sizes

FAR_LOAD = """\
func @f(%x: f32[s0, 64]) -> (f32[s0, 64]) {
  %y = pointwise : f32[s0, 64] over (i0 < s0, i1 < 64) {
    %0 = load %x[i1 + 64*s0]
    yield %0
  }
  return %y
}
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_load_past_its_buffer_under_symbolic_sizes_is_a_located_error(backend: str) -> None:
    program = compile_function(graph(FAR_LOAD), backend)
    with pytest.raises(KernelIndexError) as e:
        program(torch.randn(8, 64))
    assert e.value.loc is not None and e.value.loc.line == 3  # the load
    assert "%y = pointwise: %0 = load %x[i1 + 64*s0]" in e.value.message
    assert "reads elements [512, 575]" in e.value.message
    assert "outside its storage of 512 element(s)" in e.value.message
    assert "s0 = 8" in e.value.message
    # the interpreter refuses the same program
    with pytest.raises(IndexError):
        run_graph(graph(FAR_LOAD), [torch.randn(8, 64)])


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_load_far_past_its_buffer_does_not_crash_the_process(
    tmp_path: Path, backend: str
) -> None:
    done = fir_run(tmp_path, FAR_LOAD.replace("64*s0", "1000000000*s0"), "--backend", backend)
    assert done.returncode == 1, done.stderr
    assert "prog.fir:3:10: error: %y = pointwise: %0 = load %x" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_in_range_symbolic_program_still_runs() -> None:
    text = FAR_LOAD.replace("i1 + 64*s0", "64*s0 - 64*i0 + i1 - 64")  # rows reversed
    for backend in BACKENDS:
        x = torch.randn(5, 64)
        (y,) = compile_function(graph(text), backend)(x)
        torch.testing.assert_close(y, x.flip(0))


DIVMOD = """\
func @f(%x: f32[s0]) -> (f32[s0]) {
  %y = pointwise : f32[s0] over (i0 < s0) {
    %0 = load %x[4*floordiv(i0, 4) + mod(i0 + SHIFT, 4)]
    yield %0
  }
  return %y
}
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_floordiv_and_mod_indices_are_bounded_without_false_alarms(backend: str) -> None:
    # interval arithmetic bounds 4*floordiv(i0, 4) + mod(i0, 4) by 4*((s0 - 1) // 4) + 3, past
    # s0 = 5's storage; the exact range over the loop says it is i0 itself: it runs
    x = torch.randn(5)
    (y,) = compile_function(graph(DIVMOD.replace("SHIFT", "0")), backend)(x)
    torch.testing.assert_close(y, x)
    # shifted, element 4 reads element 5 (4 + 1): refused as the interpreter refuses it
    shifted = graph(DIVMOD.replace("SHIFT", "1"))
    with pytest.raises(
        KernelIndexError, match=r"reads elements \[0, 5\], outside its storage of 5"
    ):
        compile_function(shifted, backend)(x)
    with pytest.raises(IndexError, match="reads element 5"):
        run_graph(shifted, [x])
    (y,) = compile_function(shifted, backend)(torch.arange(8.0))  # in range at s0 = 8
    assert y.tolist() == [1.0, 2.0, 3.0, 0.0, 5.0, 6.0, 7.0, 4.0]


# ---------------------------------------------------------------------------------------------
# An indirect index whose declared bound is past the buffer it reads

GATHER = """\
func @f(%ids: i64[s0], %t: f32[s1, 4]) -> (f32[s0, 4]) {
  %y = pointwise : f32[s0, 4] over (i0 < s0, i1 < 4) {
    %0 = load %ids[i0]
    %1 = indirect %0 < BOUND
    %2 = load %t[4*%1 + i1]
    yield %2
  }
  return %y
}
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_indirect_bound_past_the_table_is_refused(backend: str) -> None:
    program = compile_function(graph(GATHER.replace("BOUND", "1000")), backend)
    ids, table = torch.tensor([0, 2, 1]), torch.randn(3, 4)
    with pytest.raises(KernelIndexError) as e:
        program(ids, table)
    assert e.value.loc is not None and e.value.loc.line == 5
    assert "%2 = load %t[4*%1 + i1]" in e.value.message
    assert "through %1 < 1000" in e.value.message
    # the bound the table allows runs, and matches eager
    (y,) = compile_function(graph(GATHER.replace("BOUND", "s1")), backend)(ids, table)
    torch.testing.assert_close(y, table[ids])


# ---------------------------------------------------------------------------------------------
# A returned view past its storage

VIEW = """\
func @f(%x: f32[s0]) -> (f32[s0] strided [1000000]) {
  %y = pointwise : f32[s0] over (i0 < s0) {
    %0 = load %x[i0]
    yield %0
  }
  %v = view %y : f32[s0] strided [1000000]
  return %v
}
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_returned_view_past_its_storage_is_refused(tmp_path: Path, backend: str) -> None:
    done = fir_run(tmp_path, VIEW, "--backend", backend)  # wrote through it: a segfault
    assert done.returncode == 1, done.stderr
    assert "prog.fir:6:8: error: %v = view %y" in done.stderr
    assert "reaches elements [0, 7000000] of %y, whose storage holds 8 element(s)" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_view_of_an_argument_past_its_storage_is_refused(backend: str) -> None:
    text = "func @f(%x: f32[s0]) -> (f32[s0] strided [1000]) {\n"
    text += "  %v = view %x : f32[s0] strided [1000]\n  return %v\n}\n"
    with pytest.raises(KernelIndexError, match=r"%v = view %x: the view"):
        compile_function(graph(text), backend)(torch.randn(8))


# ---------------------------------------------------------------------------------------------
# max, min, argmax and argmin over no element raise, as eager does

EMPTY_MAX = """\
func @f(%x: f32[4, s0]) -> (f32[4], i64[4]) {
  %y = reduction KIND : f32[4] over (i0 < 4; r0 < s0) {
    %0 = load %x[s0*i0 + r0]
    yield %0
  }
  %z = reduction argmax : i64[4] over (i0 < 4; r0 < s0) {
    %0 = load %x[s0*i0 + r0]
    yield %0
  }
  return %y, %z
}
"""


def _device(backend: str) -> str:
    return "cuda" if backend == "triton" and torch.cuda.is_available() else "cpu"


def _runner(backend: str, text: str) -> Callable[..., list[torch.Tensor]]:
    g = graph(text)
    if backend == "interp":
        return lambda *xs: run_graph(g, list(xs))
    return compile_function(g, backend, device=_device(backend) if backend == "triton" else None)


@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("backend", ["interp", *BACKENDS, "triton"])
def test_an_empty_max_raises_like_eager(backend: str, kind: str) -> None:
    run = _runner(backend, EMPTY_MAX.replace("KIND", kind))
    x = torch.randn(4, 0, device=_device(backend))
    with pytest.raises(IndexError) as eager:
        getattr(torch, f"a{kind}")(x, 1)
    with pytest.raises(IndexError) as e:  # and a RuntimeError: eager raises either
        run(x)
    assert isinstance(e.value, RuntimeError) and isinstance(e.value, FirError)
    assert "Expected reduction dim" in str(eager.value)
    assert f"%y = reduction {kind}: {kind}()" in str(e.value)
    assert "Expected reduction dim to have non-zero size" in str(e.value)
    assert e.value.loc is not None and e.value.loc.line == 2
    y, z = run(torch.ones(4, 3, device=x.device))  # one element or more: runs
    assert y.tolist() == [1.0] * 4 and z.tolist() == [0] * 4


def test_a_static_empty_max_is_a_verifier_error() -> None:
    text = "func @f(%x: f32[4, 0]) -> (f32[4], i64[4]) {\n"
    text += "  %y = max %x {dims = [1]} : f32[4]\n  %z = argmax %x {dim = 1} : i64[4]\n"
    text += "  return %y, %z\n}\n"
    with pytest.raises(VerifyError, match="reduces dimension 1 of %x .* no element"):
        verify_module(parse_module(text))


def test_a_zero_size_symbol_is_refused_where_the_interpreter_refuses_it() -> None:
    text = "func @f(%x: f32[s0]) -> (f32[]) {\n  %y = reduction sum : f32[] over (; r0 < s0) {\n"
    text += "    %0 = load %x[r0]\n    yield %0\n  }\n  return %y\n}\n"
    for backend in BACKENDS:
        with pytest.raises(FirError, match="size symbol s0 must be positive, got 0"):
            compile_function(graph(text), backend)(torch.randn(0))


# ---------------------------------------------------------------------------------------------
# Sizes past int64

HUGE_LOOP = """\
func @f(%x: f32[4]) -> (f32[]) {
  %y = reduction sum : f32[] over (; r0 < 18446744073709551621) {
    yield 1.0
  }
  return %y
}
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_loop_of_2_to_the_64_plus_5_iterations_is_refused(backend: str) -> None:
    with pytest.raises(PlanError, match="run 18446744073709551621 times"):
        compile_function(graph(HUGE_LOOP), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_sizes_whose_product_overflows_int64_are_refused(backend: str) -> None:
    text = HUGE_LOOP.replace("f32[4]", "f32[s0]").replace("18446744073709551621", "s0*s0*s0*s0")
    program = compile_function(graph(text), backend)
    (small,) = program(torch.ones(3))
    assert float(small) == 81.0
    with pytest.raises(FirError, match="run 18446744073709551616 times"):  # 2^64: 0 before
        program(torch.ones(2**16))


# ---------------------------------------------------------------------------------------------
# Layouts: a computed result's elements may not share memory; fir-run's inputs keep theirs

OVERLAP = """\
func @f(%x: f32[4, 4]) -> (f32[4, 4] strided [0, 1]) {
  %y = pointwise : f32[4, 4] strided [0, 1] over (i0 < 4, i1 < 4) {
    %0 = load %x[4*i0 + i1]
    yield %0
  }
  return %y
}
"""


def test_an_overlapping_result_layout_is_a_verifier_error() -> None:
    with pytest.raises(VerifyError, match="whose elements overlap") as e:
        verify_module(parse_module(OVERLAP))
    assert e.value.loc is not None and e.value.loc.line == 2
    declared = "func @f(%x: f32[4, 4]) -> (f32[4, 4] strided [0, 1]) {\n"
    declared += "  %y = add %x, 1.0 : f32[4, 4]\n  return %y\n}\n"
    with pytest.raises(VerifyError, match="result #0 of @f is declared"):
        verify_module(parse_module(declared))
    symbolic = OVERLAP.replace("4, 4]", "s0, 4]").replace("i0 < 4", "i0 < s0")
    with pytest.raises(VerifyError, match="whose elements overlap"):
        verify_module(parse_module(symbolic))


def test_views_and_arguments_may_overlap_as_expand_does() -> None:
    text = "func @f(%x: f32[1, 4] strided [0, 1], %w: f32[1, 4]) -> (f32[3, 4]) {\n"
    text += "  %v = view %w : f32[3, 4] strided [0, 1]\n  return %v\n}\n"
    verify_module(parse_module(text))
    x = torch.randn(1, 4)
    (y,) = compile_function(graph(text), "cpp")(x, x)
    assert y.stride() == (0, 1) and torch.equal(y, x.expand(3, 4))


ARG_LAYOUTS = """\
func @f(%x: f32[4, 4] strided [0, 1], %w: f32[4, 4] strided [1, 4] offset 3) -> (f32[4, 4]) {
  %y = add %x, %w : f32[4, 4]
  return %y
}
"""


def test_fir_run_inputs_have_the_declared_strides_and_offset(tmp_path: Path) -> None:
    from fir.tools.fir_run import random_inputs

    g = graph(ARG_LAYOUTS)
    x, w = random_inputs(g, 0, None)
    assert x.stride() == (0, 1) and w.stride() == (1, 4) and w.storage_offset() == 3
    (y,) = run_graph(g, [x, w])
    torch.testing.assert_close(y, x + w)
    # fir-run's output is the sum of the inputs it shows, on every back end
    for backend in ["interp", *BACKENDS]:
        done = fir_run(tmp_path, ARG_LAYOUTS, "-p", "fusion", "--backend", backend)
        assert done.returncode == 0, done.stderr
        sums = [float(ln.split("sum=")[1].split()[0]) for ln in done.stdout.splitlines()]
        assert abs(sums[2] - (sums[0] + sums[1])) < 1e-3, done.stdout


# ---------------------------------------------------------------------------------------------
# Concurrent calls of one compiled program

SOFTMAX = """\
func @f(%x: f32[8, 32]) -> (f32[8, 32]) {
  %y = softmax %x {dim = 1} : f32[8, 32]
  return %y
}
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_concurrent_calls_from_four_threads_are_all_correct(backend: str) -> None:
    program = compile_function(graph(SOFTMAX, "fusion"), backend)
    calls = 1500
    wrong: list[int] = []

    def work(seed: int) -> None:
        gen = torch.Generator().manual_seed(seed)
        xs = [torch.randn(8, 32, generator=gen) for _ in range(8)]
        want = [torch.softmax(x, 1) for x in xs]
        for k in range(calls):
            (y,) = program(xs[k % 8])
            if not torch.allclose(y, want[k % 8], rtol=1e-5, atol=1e-6):
                wrong.append(k)

    on_threads(work, 4)
    assert not wrong, f"{len(wrong)} wrong results of {4 * calls}"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_kernel_called_from_four_threads_at_once_uses_each_calls_pointers(backend: str) -> None:
    # the kernel call alone, as fast as it goes: before, a call could run on the pointers
    # another thread had just written into the shared argument array (about 1 in 10,000)
    text = "func @f(%x: f32[64]) -> (f32[64]) {\n  %y = add %x, 1.0 : f32[64]\n  return %y\n}\n"
    program = compile_function(graph(text, "fusion"), backend)
    (kernel,) = program.plan.kernels()
    wrong: list[int] = []

    def work(seed: int) -> None:
        x, out = torch.full((64,), float(seed)), torch.zeros(64)
        pointers = [x.data_ptr(), out.data_ptr()]
        for k in range(40000):
            out.zero_()
            program.kernels.call(kernel.name, pointers, ())
            if out[0].item() != seed + 1:
                wrong.append(k)

    on_threads(work, 4)
    assert not wrong, f"{len(wrong)} calls of 160,000 ran on another call's pointers"
