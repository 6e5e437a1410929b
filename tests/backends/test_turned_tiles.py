"""Tiled kernels that read a transposed operand from a turned copy of each tile (the schedule's
``turning``, :func:`fir.backends.plan.schedule.turned_loads`): C++ and LLVM give the
interpreter's values exactly, at sizes with partial tiles and partial 8 x 8 blocks, with the
transposed read at an offset, symbolic sizes, several turned loads, 4-byte integers and 2-byte
elements; what is not turned (8-byte elements, a read with no unit step along the tile) is left
alone."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("llvmlite")

from fir.backends.compile import compile_function  # noqa: E402
from fir.backends.plan import plan_program  # noqa: E402
from fir.backends.plan.schedule import CPP, LLVM, TURNED_SIDE, schedule  # noqa: E402
from fir.ir.interpreter import run_graph  # noqa: E402
from fir.ir.parser import parse_module  # noqa: E402
from fir.passes.pipeline import parse_pipeline  # noqa: E402

BACKENDS = ("cpp", "llvm")


def _fused(text: str):  # type: ignore[no-untyped-def]
    return parse_pipeline("fusion").run(parse_module(text, "<test>")).funcs[0]


def _turned(text: str) -> list[tuple[str, ...]]:
    """The turned loads of each tiled nest of the program's kernels, for C++ and LLVM (which
    must agree: the rule is the schedule's, not a renderer's)."""
    out = []
    for plan in plan_program(_fused(text)).kernels():
        cpp, llvm = (schedule(plan, f) for f in (CPP, LLVM))
        assert [n.turned for n in cpp.nests] == [n.turned for n in llvm.nests]
        out += [n.turned for n in cpp.nests if n.tile() is not None]
    return out


def _check(text: str, inputs: list, backend: str) -> None:
    program = compile_function(_fused(text), backend)
    want = run_graph(parse_module(text, "<test>").funcs[0], [x.clone() for x in inputs])
    got = program(*[x.clone() for x in inputs])
    for w, o in zip(want, got):
        assert o.dtype == w.dtype and o.shape == w.shape
        assert torch.equal(o, w)


def _transpose_add(m: int | str, n: int | str, dtype: str = "f32") -> str:
    return (
        f"func @t(%x: {dtype}[{m}, {n}], %y: {dtype}[{n}, {m}]) -> ({dtype}[{m}, {n}]) {{\n"
        f"  %t = transpose %y {{dim0 = 0, dim1 = 1}} : {dtype}[{m}, {n}]\n"
        f"  %z = add %x, %t : {dtype}[{m}, {n}]\n  return %z\n}}\n"
    )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(128, 128), (131, 197), (203, 70), (64, 261)])
def test_a_transposed_add_in_turned_tiles(backend: str, shape: tuple[int, int]) -> None:
    m, n = shape
    text = _transpose_add(m, n)
    assert _turned(text) == [("n0_1",)]
    _check(text, [torch.randn(m, n), torch.randn(n, m)], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_four_byte_integers_are_turned(backend: str) -> None:
    text = _transpose_add(150, 133, "i32")
    assert _turned(text) == [("n0_1",)]
    xs = [torch.randint(-1000, 1000, s, dtype=torch.int32) for s in ((150, 133), (133, 150))]
    _check(text, xs, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_transposed_read_at_an_offset_and_in_a_batch(backend: str) -> None:
    # the tile's first element is not the buffer's: a slice from row 5, and a batch loop
    # outside the tile pair
    text = (
        "func @t(%x: f32[3, 140, 150], %y: f32[3, 160, 140]) -> (f32[3, 140, 150]) {\n"
        "  %s = slice %y {dim = 1, start = 5, end = 155, step = 1} : f32[3, 150, 140]\n"
        "  %t = transpose %s {dim0 = 1, dim1 = 2} : f32[3, 140, 150]\n"
        "  %z = mul %x, %t : f32[3, 140, 150]\n  return %z\n}\n"
    )
    assert _turned(text) == [("n0_1",)]
    _check(text, [torch.randn(3, 140, 150), torch.randn(3, 160, 140)], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_transposed_reads_are_both_turned(backend: str) -> None:
    text = (
        "func @t(%x: f32[100, 120], %y: f32[120, 100], %w: f32[120, 100]) -> (f32[100, 120]) {\n"
        "  %a = transpose %y {dim0 = 0, dim1 = 1} : f32[100, 120]\n"
        "  %b = transpose %w {dim0 = 0, dim1 = 1} : f32[100, 120]\n"
        "  %c = sub %a, %b : f32[100, 120]\n"
        "  %z = add %x, %c : f32[100, 120]\n  return %z\n}\n"
    )
    (turned,) = _turned(text)
    assert len(turned) == 2
    xs = [torch.randn(100, 120), torch.randn(120, 100), torch.randn(120, 100)]
    _check(text, xs, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_symbolic_sizes_in_turned_tiles(backend: str) -> None:
    text = _transpose_add("m", "n")  # size symbols
    assert _turned(text) == [("n0_1",)]
    program = compile_function(_fused(text), backend)
    for m, n in ((70, 90), (TURNED_SIDE * 2 + 3, 5), (1, 200), (129, 129)):
        x, y = torch.randn(m, n), torch.randn(n, m)
        (got,) = program(x, y)
        assert torch.equal(got, x + y.t())


def test_eight_byte_elements_are_not_turned() -> None:
    assert _turned(_transpose_add(256, 256, "f64")) == [()]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["f16", "bf16", "i16"])
def test_two_byte_elements_turn_in_tiles_of_the_same_row_bytes(backend: str, dtype: str) -> None:
    """f16, bf16 and i16 transposed reads are turned too (x86 has no 16-bit gather), in
    tiles of 128 a side (256-byte rows, as f32's 64): exact at sizes with partial tiles and
    partial 8 x 8 blocks; NaN and infinities pass through the turn as bits."""
    m, n = 131, 517
    text = _transpose_add(m, n, dtype)
    assert _turned(text) == [("n0_1",)]
    (plan,) = plan_program(_fused(text)).kernels()
    assert f"tiled {TURNED_SIDE * 2}" in schedule(plan, CPP).text()
    g = torch.Generator().manual_seed(11)
    x, y = torch.randn(m, n, generator=g) * 300, torch.randn(n, m, generator=g) * 300
    if dtype != "i16":
        y[5, 7], y[130, 3], y[516, 130] = float("nan"), float("inf"), -1e6
    t = {"f16": torch.float16, "bf16": torch.bfloat16, "i16": torch.int16}[dtype]
    x, y = x.to(t), y.to(t)
    (got,) = compile_function(_fused(text), backend)(x, y)
    (want,) = run_graph(parse_module(text, "<test>").funcs[0], [x, y])
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
