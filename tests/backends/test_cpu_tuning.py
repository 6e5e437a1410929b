"""The side of turned tiles measured once per machine (:mod:`fir.backends.cpu_tuning`): the probe
runs and checks its kernels, the choice keeps the default unless another side is clearly faster,
the cache holds a number that is read back only as one of the candidates, ``FIR_TURNED_SIDE``
overrides, and the C++ and LLVM kernels run in tiles of the side chosen, exact at each."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("llvmlite")

from fir.backends import cpu_tuning  # noqa: E402
from fir.backends.cache import Cache  # noqa: E402
from fir.backends.compile import compile_function  # noqa: E402
from fir.backends.cpp.render import render_program  # noqa: E402
from fir.backends.plan import plan_program  # noqa: E402
from fir.backends.plan.schedule import TURNED_SIDE, TURNED_SIDES, schedule  # noqa: E402
from fir.ir.parser import parse_module  # noqa: E402
from fir.passes.pipeline import parse_pipeline  # noqa: E402

TRANSPOSE_ADD = (
    "func @t(%x: f32[131, 197], %y: f32[197, 131]) -> (f32[131, 197]) {\n"
    "  %t = transpose %y {dim0 = 0, dim1 = 1} : f32[131, 197]\n"
    "  %z = add %x, %t : f32[131, 197]\n  return %z\n}\n"
)


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """A cache of this test's own, no ``FIR_TURNED_SIDE``, no side remembered in the process."""
    monkeypatch.setenv("FIR_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("FIR_TURNED_SIDE", raising=False)
    cpu_tuning.turned_side.cache_clear()
    yield tmp_path
    cpu_tuning.turned_side.cache_clear()


def test_the_probe_times_every_candidate_side_at_small_sizes(
    fresh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Partial tiles at both sizes (not multiples of any side); the probe checks each variant's
    result itself, so a time comes back only for kernels that computed x + y.t()."""
    monkeypatch.setattr(cpu_tuning, "SIZES", (100, 203))
    monkeypatch.setattr(cpu_tuning, "ROUNDS", 2)
    times = cpu_tuning._measure()
    assert set(times) == set(TURNED_SIDES)
    assert all(0 < t < 1 for t in times.values())


def test_another_side_replaces_the_default_only_when_clearly_faster() -> None:
    assert cpu_tuning.choose({32: 1.0, 64: 1.0, 128: 0.97}) == TURNED_SIDE
    assert cpu_tuning.choose({32: 1.0, 64: 1.0, 128: 0.90}) == 128
    assert cpu_tuning.choose({32: 0.5, 64: 1.0, 128: 0.90}) == 32
    assert cpu_tuning.choose({32: 1.2, 64: 1.0, 128: 1.1}) == TURNED_SIDE


def test_the_choice_is_measured_once_and_cached(
    fresh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []

    def measure() -> dict[int, float]:
        calls.append(1)
        return {32: 2.0, 64: 2.0, 128: 1.0}

    monkeypatch.setattr(cpu_tuning, "_measure", measure)
    assert cpu_tuning.turned_side() == 128
    cpu_tuning.turned_side.cache_clear()  # a new process: the cache answers
    assert cpu_tuning.turned_side() == 128
    assert len(calls) == 1
    assert Cache("tuning").read(cpu_tuning._key()) == b"128\n"


@pytest.mark.parametrize(
    "planted", [b"__import__('os').system('false')\n", b"256\n", b"-64\n", b"", b"64.5\n"]
)
def test_a_cached_side_that_is_no_candidate_is_measured_again(
    fresh: Path, monkeypatch: pytest.MonkeyPatch, planted: bytes
) -> None:
    """Whatever the entry holds (with a valid checksum), it is read as a number and used only if
    it is a candidate side; anything else is measured again and replaced."""
    Cache("tuning").store(cpu_tuning._key(), lambda tmp: tmp.write_bytes(planted))
    monkeypatch.setattr(cpu_tuning, "_measure", lambda: {32: 1.0, 64: 2.0, 128: 2.0})
    assert cpu_tuning.turned_side() == 32
    assert Cache("tuning").read(cpu_tuning._key()) == b"32\n"


def test_the_side_falls_back_to_the_default_where_no_compiler_runs(
    fresh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CXX", "no-such-compiler-fir")
    assert cpu_tuning.turned_side() == TURNED_SIDE


def test_a_side_given_in_the_environment_must_be_a_candidate(
    fresh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FIR_TURNED_SIDE", "32")
    monkeypatch.setattr(cpu_tuning, "_measure", lambda: pytest.fail("measured"))
    assert cpu_tuning.turned_side() == 32
    cpu_tuning.turned_side.cache_clear()
    monkeypatch.setenv("FIR_TURNED_SIDE", "100")
    with pytest.raises(cpu_tuning.BadTuningSetting, match="one of 32, 64, 128"):
        cpu_tuning.turned_side()


@pytest.mark.parametrize("side", TURNED_SIDES)
def test_kernels_run_in_tiles_of_the_side_chosen(
    fresh: Path, monkeypatch: pytest.MonkeyPatch, side: int
) -> None:
    """The C++ source turns tiles of the side chosen (and, reading no gathers, asks for no
    256-bit vectors); C++ and LLVM are exact at sizes with partial tiles."""
    monkeypatch.setenv("FIR_TURNED_SIDE", str(side))
    fused = parse_pipeline("fusion").run(parse_module(TRANSPOSE_ADD, "<test>")).funcs[0]
    plan = plan_program(fused)
    (kernel,) = plan.kernels()
    assert f"tiled {side}" in schedule(kernel, cpu_tuning.CPP_TUNED).text()
    assert f"tiled {side}" in schedule(kernel, cpu_tuning.LLVM_TUNED).text()
    source = render_program(plan)
    assert f"fir_turn<{side}>" in source
    assert 'extern "C" FIR_TILED' not in source
    x, y = torch.randn(131, 197), torch.randn(197, 131)
    for backend in ("cpp", "llvm"):
        (got,) = compile_function(fused, backend)(x, y)
        assert torch.equal(got, x + y.t())


def test_a_tiled_kernel_that_gathers_asks_for_256_bit_vectors() -> None:
    """f64 transposed reads are not turned: the vectoriser gathers them, in 8 lanes."""
    text = TRANSPOSE_ADD.replace("f32", "f64").replace("131, 197", "256, 256")
    text = text.replace("197, 131", "256, 256")
    fused = parse_pipeline("fusion").run(parse_module(text, "<test>")).funcs[0]
    assert 'extern "C" FIR_TILED' in render_program(plan_program(fused))
