"""The llvmlite back end (first slice): every kernel it builds gives the interpreter's results.

The programs are the C++ back end's tests' (``tests/backends/test_cpp_render.py``), and programs for the
layouts this back end chooses (column blocks, tiles, lanes, interchanged loops) above the grain,
so their loops are split over the threads; the object code cache is tested at the end. Ops the back end does not cover yet (``UNSUPPORTED``) raise a clear
``LLVMRenderError``, which the frontend turns into running the graph with PyTorch.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import pytest
from concurrency import on_threads

torch = pytest.importorskip("torch")
pytest.importorskip("llvmlite")

from fir.backends.compile import compile_function  # noqa: E402
from fir.backends.llvm import UNSUPPORTED, LLVMRenderError  # noqa: E402
from fir.ir.dtypes import DType  # noqa: E402
from fir.ir.errors import KernelIndexError, KernelZeroDivisionError  # noqa: E402
from fir.ir.interpreter import run_graph  # noqa: E402
from fir.ir.parser import parse_module  # noqa: E402
from fir.passes.pipeline import parse_pipeline  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import test_cpp_render as cpp  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def compile_text(text: str) -> list:
    module = parse_pipeline("fusion").run(parse_module(text, "<test>"))
    return [compile_function(g, "llvm") for g in module.funcs]


def check(text: str, inputs: list | None = None, rtol: float = 1e-5, atol: float = 1e-5) -> list:
    programs = compile_text(text)
    reference = parse_module(text, "<test>")
    for p, ref_g in zip(programs, reference.funcs):
        xs = inputs if inputs is not None else cpp.random_inputs(ref_g)
        want = run_graph(ref_g, [x.clone() for x in xs])
        got = p(*[x.clone() for x in xs])
        for w, o, name in zip(want, got, p.plan.outputs):
            assert o.dtype == w.dtype and o.shape == w.shape, name
            torch.testing.assert_close(
                o, w, rtol=rtol, atol=atol, equal_nan=True, msg=lambda m, n=name: f"%{n}: {m}"
            )
    return programs


@pytest.mark.parametrize(
    "path", sorted(str(p) for p in (ROOT / "examples").glob("*.fir")), ids=lambda p: Path(p).name
)
def test_example(path: str) -> None:
    check(Path(path).read_text(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", sorted(cpp.PROGRAMS))
def test_program(name: str) -> None:
    text = cpp.PROGRAMS[name]
    tol = 1e-2 if "16" in name else 1e-4
    check(text, cpp._inputs_for(name, text), rtol=tol, atol=tol)


def _without_unsupported(text: str) -> str:
    """The op program with the ops this slice lacks taken out (of the body and the return)."""
    lines = text.splitlines()
    drop = {ln.split("=")[0].strip() for ln in lines if any(f"= {op} " in ln for op in UNSUPPORTED)}
    kept = [ln for ln in lines if ln.split("=")[0].strip() not in drop]
    head = kept[0]
    names, types = [], []
    ret = next(ln for ln in kept if ln.strip().startswith("return "))
    for name in ret.strip()[len("return ") :].split(", "):
        if name not in drop:
            names.append(name)
    body = [ln for ln in kept[1:] if ln.strip().startswith("%")]
    for ln in body:
        if ln.split("=")[0].strip() in names:
            types.append(ln.split(" : ")[1])
    head = head[: head.index("-> (")] + f"-> ({', '.join(types)}) {{"
    return "\n".join([head, *body, f"  return {', '.join(names)}", "}"]) + "\n"


@pytest.mark.parametrize("dtype", list(DType), ids=str)
def test_every_elementwise_op(dtype: DType) -> None:
    text, inputs = cpp._op_program(dtype)
    tol = {DType.F16: 1e-3, DType.BF16: 8e-3, DType.F32: 2e-6, DType.F64: 1e-12}.get(dtype, 0)
    check(_without_unsupported(text), inputs, rtol=tol, atol=tol)


def test_an_op_the_back_end_lacks_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # every op has an implementation today (UNSUPPORTED is empty): plant one missing
    from fir.backends.llvm import render

    assert UNSUPPORTED == ()
    monkeypatch.setattr(render, "UNSUPPORTED", ("exp",))
    text = "func @f(%x: f32[8]) -> (f32[8]) {\n  %y = exp %x : f32[8]\n  return %y\n}\n"
    with pytest.raises(LLVMRenderError, match="no 'exp'"):
        compile_text(text)


def test_every_instruction_is_handled() -> None:
    # the loop tree consumes loop/end (loop_tree): the one walk handles every other kind
    from fir.backends.llvm.render import _Kernel
    from fir.backends.plan.instructions import missing_handlers

    assert missing_handlers(_Kernel, loops=False) == []


@pytest.mark.parametrize("source", list(DType), ids=str)
def test_every_cast(source: DType) -> None:
    n = 64
    lines = [f"  %y{k} = cast %a : {t.value}[{n}]" for k, t in enumerate(DType)]
    results = ", ".join(f"{t.value}[{n}]" for t in DType)
    names = ", ".join(f"%y{k}" for k in range(len(DType)))
    text = f"func @casts(%a: {source.value}[{n}]) -> ({results}) {{\n" + "\n".join(lines)
    text += f"\n  return {names}\n}}\n"
    a = cpp._special(source, n, 4)
    if source.is_float:
        a = torch.where(a.isfinite() & (a.abs() < 100), a, torch.zeros_like(a))
    check(text, [a], rtol=0, atol=0)


@pytest.mark.parametrize("shape", [(3, 7), (4, 33), (40, 1000)], ids=str)
@pytest.mark.parametrize("nans", [False, True], ids=["finite", "nan"])
def test_reductions(shape: tuple[int, int], nans: bool) -> None:
    for template in (cpp.REDUCE_ALL, cpp.REDUCE_ROWS):
        text = template.replace("R", str(shape[0])).replace("C", str(shape[1]))
        x = torch.randn(shape, generator=torch.Generator().manual_seed(7)) * 0.1 + 1
        if nans:
            x = cpp._with_nans(x, 8)
        check(text, [x], rtol=1e-4, atol=1e-4)


def test_argmax_ties_and_infinities_take_the_first() -> None:
    text, inputs = cpp.argmax_ties_case()
    check(text, inputs, rtol=0, atol=0)


def test_symbolic_sizes_compile_once() -> None:
    (p,) = compile_text(cpp.SYMBOLIC)
    reference = parse_module(cpp.SYMBOLIC, "<test>").funcs[0]
    for rows, cols in [(1, 1), (3, 17), (5, 100)]:
        g = torch.Generator().manual_seed(rows * cols)
        xs = [torch.randn(rows, cols, generator=g), torch.randn(cols, generator=g)]
        for w, o in zip(run_graph(reference, xs), p(*xs)):
            torch.testing.assert_close(o, w, rtol=1e-4, atol=1e-4)


def test_calls_from_several_threads_at_once_keep_their_own_arguments() -> None:
    """A kernel's call reuses a set of argument arrays; a call made while another thread holds
    the set makes one of its own, so concurrent calls never read each other's pointers or
    sizes (a symbolic program, so the sizes differ between the threads too)."""
    (p,) = compile_text(cpp.SYMBOLIC)
    reference = parse_module(cpp.SYMBOLIC, "<test>").funcs[0]
    failures: list[str] = []

    def work(seed: int) -> None:
        for k in range(25):
            rows, cols = 1 + (seed + k) % 7, 1 + (3 * seed + k) % 29
            g = torch.Generator().manual_seed(seed * 100 + k)
            xs = [torch.randn(rows, cols, generator=g), torch.randn(cols, generator=g)]
            for w, o in zip(run_graph(reference, xs), p(*xs)):
                if not torch.allclose(o, w, rtol=1e-4, atol=1e-4):
                    failures.append(f"{rows}x{cols}")

    on_threads(work)
    assert not failures, failures


def test_out_of_range_gather_index_and_division_by_zero_raise() -> None:
    (p,) = compile_text(cpp.PROGRAMS["embedding"])
    w = torch.randn(50, 48)
    ids = torch.randint(0, 50, (7, 3))
    ids[4, 1] = 50
    with pytest.raises(KernelIndexError, match=r"out of bounds \[0, 50\)"):
        p(w, ids)
    text = "func @f(%a: i32[64], %b: i32[64]) -> (i32[64]) {\n"
    text += "  %q = floordiv %a, %b : i32[64]\n  return %q\n}\n"
    (q,) = compile_text(text)
    b = torch.ones(64, dtype=torch.int32)
    b[9] = 0
    with pytest.raises(KernelZeroDivisionError):
        q(torch.arange(64, dtype=torch.int32), b)


def test_a_pointwise_loop_is_vectorised() -> None:
    text = "func @f(%x: f32[4096], %y: f32[4096]) -> (f32[4096]) {\n"
    text += "  %a = mul %x, 2.0 : f32[4096]\n  %b = add %a, %y : f32[4096]\n  return %b\n}\n"
    (p,) = check(text)
    optimised = str(p.kernels.module)
    assert "<8 x float>" in optimised or "<16 x float>" in optimised


def test_random_programs_match_eager() -> None:
    import strategies as S
    from tensor_programs import random_program

    for seed in range(12):
        p = random_program(S.RandomChooser(4000 + seed), num_ops=10)
        module = parse_pipeline("fusion").run(parse_module(p.text, "<random>"))
        try:
            program = compile_function(module.funcs[0], "llvm")
        except LLVMRenderError as e:  # an op of UNSUPPORTED: said, not wrong
            assert any(f"'{op}'" in e.message for op in UNSUPPORTED), e.message
            continue
        got = program(*[x.clone() for x in p.inputs])
        for o, w in zip(got, p.expected):
            torch.testing.assert_close(o, w, rtol=1e-4, atol=1e-4, equal_nan=True, msg=p.text)


def test_a_200_op_chain() -> None:
    lines = ["func @chain(%x: f32[64, 128]) -> (f32[64, 128]) {", "  %v0 = sin %x : f32[64, 128]"]
    for k in range(1, 200):
        op = ("mul %v{0}, 1.01", "add %v{0}, 0.1", "relu %v{0}", "sub %v{0}, 0.05")[k % 4]
        lines.append(f"  %v{k} = {op.format(k - 1)} : f32[64, 128]")
    lines += ["  return %v199", "}"]
    check("\n".join(lines) + "\n", rtol=1e-4, atol=1e-4)


def test_a_kernel_split_over_threads_matches() -> None:
    # above the grain: the parallel loop's range is split into a chunk per thread
    text = """
func @f(%x: f32[300, 260], %w: f32[260]) -> (f32[300, 260], f32[300], i64[300]) {
  %y = mul %x, %w : f32[300, 260]
  %s = sum %y {dims = [1]} : f32[300]
  %a = argmax %y {dim = 1} : i64[300]
  return %y, %s, %a
}"""
    (p,) = check(text, rtol=1e-4, atol=1e-4)
    assert p.kernels.threads >= 1


def _optimised(text: str) -> str:
    (p,) = check(text, rtol=1e-4, atol=1e-4)
    return str(p.kernels.module)


def test_row_reductions_are_vectorised() -> None:
    # reassociated float sums, NaN-propagating llvm.maximum: one partial result per lane
    for op in ("sum", "max"):
        text = f"func @f(%x: f32[64, 512]) -> (f32[64]) {{\n  %s = {op} %x {{dims = [1]}} "
        text += ": f32[64]\n  return %s\n}\n"
        optimised = _optimised(text)
        assert "<8 x float>" in optimised or "<16 x float>" in optimised, op


def test_sums_keep_their_order_without_reassociation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIR_LLVM_REASSOC", "0")
    text = "func @f(%x: f32[64, 512]) -> (f32[64]) {\n  %s = sum %x {dims = [1]} : f32[64]\n"
    optimised = _optimised(text + "  return %s\n}\n")
    assert "reassoc" not in optimised and "x float>" not in optimised


WIDE_REDUCTIONS = """
func @f(%x: f32[300, 259]) -> (f32[300, 259], f32[300], i64[300], f32[300], f32[300]) {
  %y = softmax %x {dim = 1} : f32[300, 259]
  %s = sum %x {dims = [1]} : f32[300]
  %a = argmax %x {dim = 1} : i64[300]
  %m, %m2, %n = welford %x {dims = [1]} : f32[300], f32[300], f32[300]
  return %y, %s, %a, %m, %m2
}"""


def test_lane_reductions_over_threads_match() -> None:
    # welford and argmax in lanes (259 = 8 blocks of 32 and a remainder of 3), rows split
    # over the threads
    x = torch.randn(300, 259, generator=torch.Generator().manual_seed(3)) * 0.1 + 1
    x[7, [5, 100, 250]] = 9.0  # ties in different lanes and the remainder
    x[8, 258] = 9.0
    x[9, [17, 40]] = math.nan
    (p,) = check(WIDE_REDUCTIONS, [x], rtol=1e-4, atol=1e-4)
    assert "<8 x float>" in str(p.kernels.module) or "<16 x float>" in str(p.kernels.module)


COLUMNS = """
func @f(%x: f32[300, 261]) -> (f32[261], f32[300, 261], i64[261], f32[261]) {
  %s = sum %x {dims = [0]} : f32[261]
  %y = softmax %x {dim = 0} : f32[300, 261]
  %a = argmax %x {dim = 0} : i64[261]
  %m, %m2, %n = welford %x {dims = [0]} : f32[261], f32[261], f32[261]
  return %s, %y, %a, %m2
}"""


def test_column_reductions_in_blocks_match() -> None:
    # blocks of outputs with their accumulators side by side (261 columns: a partial block in
    # each thread's range), values crossing from one pass to the next in block arrays
    x = torch.randn(300, 261, generator=torch.Generator().manual_seed(5))
    x[[3, 200], 70] = 5.0
    x[11, 130] = math.nan
    check(COLUMNS, [x], rtol=1e-4, atol=1e-4)
    text = "func @f(%x: f32[256, 512]) -> (f32[512]) {\n  %s = sum %x {dims = [0]} : f32[512]\n"
    optimised = _optimised(text + "  return %s\n}\n")
    assert "<8 x float>" in optimised or "<16 x float>" in optimised


@pytest.mark.parametrize("shape", [(200, 300), (300, 200), (65, 1000)], ids=str)
def test_tiled_transposes_match(shape: tuple[int, int]) -> None:
    r, c = shape
    text = f"func @f(%x: f32[{r}, {c}], %y: f32[{c}, {r}]) -> (f32[{r}, {c}]) {{\n"
    text += f"  %t = transpose %y {{dim0 = 0, dim1 = 1}} : f32[{r}, {c}]\n"
    text += f"  %z = add %x, %t : f32[{r}, {c}]\n  return %z\n}}\n"
    check(text, rtol=0, atol=0)


def test_a_strided_innermost_loop_is_interchanged() -> None:
    # NCHW batch norm: the plan's innermost loop is the channel (a stride of H*W); the loop
    # over H*W runs innermost instead, and vectorises
    text = """
func @f(%x: f32[4, 16, 32, 32], %w: f32[16], %b: f32[16], %m: f32[16], %v: f32[16])
    -> (f32[4, 16, 32, 32]) {
  %y = batch_norm %x, %w, %b, %m, %v {eps = 1e-05} : f32[4, 16, 32, 32]
  return %y
}"""
    (p,) = check(text, rtol=1e-5, atol=1e-5)
    assert "x float>" in str(p.kernels.module)


# ---------------------------------------------------------------------------------------------
# the object code cache


def _build(cache_dir: Path):  # type: ignore[no-untyped-def]
    from fir.backends.cache import Cache
    from fir.backends.llvm import build_program
    from fir.backends.plan import plan_module

    text = cpp.PROGRAMS["softmax"]
    plan = plan_module(parse_pipeline("fusion").run(parse_module(text, "<test>")))[0]
    return build_program(plan, Cache("llvm", cache_dir))


def _runs(kernels) -> None:  # type: ignore[no-untyped-def]
    (name,) = kernels.names()
    x = torch.randn(33, 70)
    y = torch.empty_like(x)
    assert kernels.call(name, [x.data_ptr(), y.data_ptr()], []) == (0, 0)
    torch.testing.assert_close(y, torch.softmax(x, -1))


def test_a_second_build_loads_the_cached_object(tmp_path: Path) -> None:
    from fir.backends.llvm.build import STATS

    before = dict(STATS)
    _runs(_build(tmp_path))
    assert STATS["codegen"] == before["codegen"] + 1
    (entry,) = (tmp_path / "llvm").glob("*.o")
    _runs(_build(tmp_path))  # no optimisation, no code generation
    assert STATS["codegen"] == before["codegen"] + 1
    assert STATS["cache_hits"] == before["cache_hits"] + 1
    assert list((tmp_path / "llvm").glob("*.o")) == [entry]


def test_a_corrupted_object_is_rebuilt(tmp_path: Path) -> None:
    from fir.backends.llvm.build import STATS

    _build(tmp_path)
    (entry,) = (tmp_path / "llvm").glob("*.o")
    good = entry.read_bytes()
    entry.write_bytes(good[: len(good) // 3] + b"\0" * 64)  # the checksum no longer agrees
    before = STATS["codegen"]
    _runs(_build(tmp_path))
    assert STATS["codegen"] == before + 1 and entry.read_bytes() == good


def test_a_read_only_cache_still_builds(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.warns(RuntimeWarning, match="not writable"):
        kernels = _build(blocker / "cache")
    _runs(kernels)


def test_kernels_run_on_the_openmp_team_and_report_the_first_failing_chunk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # with libgomp in the process and two threads, each kernel has an OpenMP driver; an
    # out-of-range index in two chunks is reported as the one earlier in the loop
    from fir.backends.runtime.llvm_threads import gomp_library

    if gomp_library() is None:
        pytest.skip("no libgomp in this process: the kernels run on the thread pool instead")
    monkeypatch.setenv("FIR_LLVM_THREADS", "2")
    text = """
func @f(%w: f32[50, 64], %ids: i64[4000]) -> (f32[4000, 64]) {
  %e = embedding %w, %ids : f32[4000, 64]
  return %e
}"""
    (p,) = compile_text(text)
    (name,) = p.kernels.names()
    assert p.kernels.fns[name].omp is not None
    w = torch.randn(50, 64)
    ids = torch.randint(0, 50, (4000,))
    torch.testing.assert_close(p(w, ids)[0], w[ids])
    ids[3500], ids[1200] = 77, 60
    with pytest.raises(KernelIndexError, match="the index is 60"):
        p(w, ids)


def test_a_compute_heavy_loop_asks_for_interleaved_iterations() -> None:
    # 8 or more costly ops an element: the innermost loop carries llvm.loop.interleave.count,
    # so independent vector iterations hide the latency of a long chain of math
    from fir.backends.plan.schedule import LLVM

    INTERLEAVE = LLVM.interleave

    heavy = ["func @f(%x: f32[4096]) -> (f32[4096]) {", "  %v0 = sin %x : f32[4096]"]
    heavy += [f"  %v{k} = sin %v{k - 1} : f32[4096]" for k in range(1, 10)]
    heavy += ["  return %v9", "}"]
    (p,) = check("\n".join(heavy) + "\n", rtol=1e-5, atol=1e-5)
    assert f'!"llvm.loop.interleave.count", i32 {INTERLEAVE}' in p.kernels.ir
    light = "func @f(%x: f32[4096]) -> (f32[4096]) {\n  %y = sin %x : f32[4096]\n  return %y\n}\n"
    (q,) = compile_text(light)
    assert "interleave" not in q.kernels.ir


def test_a_module_llvm_rejects_names_the_function_and_keeps_the_ir(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a renderer bug planted: a function whose instruction uses a value defined after it
    from fir.backends.llvm import build
    from fir.backends.llvm.build import LLVMBuildError
    from llvmlite import ir

    def broken(plans: object, symbol: object, triple: str, **options: object) -> ir.Module:
        m = ir.Module(name="fir")
        m.triple = triple
        i64 = ir.IntType(64)
        fn = ir.Function(m, ir.FunctionType(i64, [i64]), "fir_broken_kernel")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        later = b.add(fn.args[0], ir.Constant(i64, 1), name="later")
        use = b.add(later, ir.Constant(i64, 2), name="use")
        b.ret(use)
        # move the definition after its use: the verifier's dominance check fails
        block = fn.basic_blocks[0]
        block.instructions[0], block.instructions[1] = block.instructions[1], block.instructions[0]
        return m

    monkeypatch.setattr(build, "render_module", broken)
    text = "func @f(%x: f32[8]) -> (f32[8]) {\n  %y = exp %x : f32[8]\n  return %y\n}\n"
    with pytest.raises(LLVMBuildError, match="function @fir_broken_kernel") as e:
        compile_text(text)
    path = re.search(r"the IR is in (\S+\.ll)", e.value.message)
    assert path is not None and "fir_broken_kernel" in Path(path.group(1)).read_text()


def test_an_in_place_result_vectorises_without_overlap_checks() -> None:
    # the gelu after a matmul writes over the matmul's result (plan-memory's in-place): its
    # loop reads and writes one pointer, which LLVM's run-time overlap check takes for a
    # conflict, so the loop ran scalar (BERT: 14 ms against the C++ kernel's 0.5). The loop
    # is marked parallel instead (llvm.loop.parallel_accesses), as the C++ one is omp simd.
    text = (
        "func @f(%w: f32[96, 64], %b: f32[96], %x: f32[80, 64]) -> (f32[80, 96]) {\n"
        "  %t = permute %w {dims = [1, 0]} : f32[64, 96]\n"
        "  %m = addmm %b, %x, %t : f32[80, 96]\n"
        "  %g = gelu %m : f32[80, 96]\n"
        "  return %g\n"
        "}\n"
    )
    (p,) = check(text, rtol=1e-5, atol=1e-5)
    from fir.backends.plan.program import shared_storage

    (k,) = p.plan.kernels()
    assert len(shared_storage(p.plan, k)) == 2, "the test needs an in-place result"
    assert "llvm.loop.parallel_accesses" in p.kernels.ir
    optimised = str(p.kernels.module)
    assert "x double>" in optimised or "x float>" in optimised
    assert "diff.check" not in optimised and "memcheck" not in optimised


def _independent(loads: list[tuple[str, str]], store: tuple[str, str], aliased: set[str]) -> bool:
    import sympy
    from fir.backends.plan.instructions import Compute, Load, Store
    from fir.backends.plan.schedule import independent

    items: list = []
    for k, (buf, index) in enumerate(loads):
        items.append(Load(f"v{k}", buf, sympy.sympify(index), DType.F32))
    items.append(Compute("s", "add", tuple(f"v{k}" for k in range(len(loads))), DType.F32))
    items.append(Store(store[0], sympy.sympify(store[1]), "s", DType.F32))
    return independent(items, "x1", frozenset(aliased))


def test_only_loops_that_read_what_they_write_in_place_are_parallel() -> None:
    a = {"m", "g"}  # the two arguments that share storage
    assert _independent([("m", "64*x0 + x1"), ("b", "x1")], ("g", "64*x0 + x1"), a)
    # reads an element another iteration writes: a real dependency
    assert not _independent([("m", "64*x0 + x1 + 1")], ("g", "64*x0 + x1"), a)
    assert not _independent([("m", "64*x0")], ("g", "64*x0 + x1"), a)
    assert not _independent([("g", "x1 + 1")], ("g", "x1"), set())
    # arguments that share no storage may be read anywhere
    assert _independent([("m", "64*x1 + x0")], ("g", "64*x0 + x1"), set())
    # stores that do not step by one element (a strided or repeated element) are left alone
    assert not _independent([("m", "x1")], ("g", "2*x1"), set())
    assert not _independent([("m", "x1")], ("g", "x0"), set())


def test_kernel_teams_follow_the_openmp_runtime_not_the_machine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An llvm kernel's team is the OpenMP runtime's ``omp_get_max_threads()`` (which
    ``torch.set_num_threads`` sets, as for the C++ back end's regions), ``FIR_LLVM_THREADS``
    overriding it: a team of its own size made libgomp shrink and regrow its pool around
    PyTorch's BLAS (T5 on 16 cores 2x slower than the C++ back end)."""
    from fir.backends.runtime.llvm_threads import max_threads, threads

    if max_threads() is None:
        pytest.skip("no libgomp in this process")
    monkeypatch.delenv("FIR_LLVM_THREADS", raising=False)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert threads() == 1
        torch.set_num_threads(max(2, before))
        assert threads() == max(2, before)
    finally:
        torch.set_num_threads(before)
    monkeypatch.setenv("FIR_LLVM_THREADS", "3")
    assert threads() == 3


def test_chunks_of_the_parallel_loop_start_on_whole_blocks_of_eight() -> None:
    """A tiled kernel's chunks: where the loop has at least a block of 8 per chunk, every chunk
    but the last is a multiple of 8 long (its tiles start at its chunk's start, and turned tiles
    copy 8 x 8 blocks: 2896 rows over 64 chunks were 46 a chunk, 6 of them element by element
    in every tile); a short loop keeps its chunks, and so does a kernel that is not tiled."""
    from fir.backends.runtime.llvm_threads import CHUNK_ALIGN, chunk_step

    assert CHUNK_ALIGN == 8
    assert chunk_step(2896, 64, 8) == 48 and -(-2896 // 48) == 61
    assert chunk_step(2896, 64) == 46  # not tiled: equal chunks
    assert chunk_step(2896, 8, 8) == 368
    assert chunk_step(16, 8, 8) == 2  # two blocks for eight chunks: not aligned
    for outer in range(1, 300):
        for n in (2, 3, 8, 64):
            step = chunk_step(outer, n, 8)
            assert step * n >= outer  # the chunks cover the loop
            assert -(-outer // step) <= n  # and are no more than asked
            if outer >= 8 * n:
                assert step % 8 == 0


def test_a_turned_tile_kernel_in_many_chunks_is_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    """64 chunks on this machine's threads (the 16-thread geometry): aligned chunks cut tiles
    at multiples of 8 rows, partial ones at the loop's end; the transposed add is exact."""
    import dataclasses

    from fir.backends.runtime import llvm_threads

    monkeypatch.setattr(
        llvm_threads, "LLVM", dataclasses.replace(llvm_threads.LLVM, chunks_per_thread=32)
    )
    monkeypatch.setenv("FIR_LLVM_THREADS", "2")
    from test_turned_tiles import _transpose_add

    (p,) = compile_text(_transpose_add(203, 517))
    (name,) = p.kernels.names()
    assert p.kernels.fns[name].align == 8
    x, y = torch.randn(203, 517), torch.randn(517, 203)
    (got,) = p(x, y)
    assert torch.equal(got, x + y.t())
