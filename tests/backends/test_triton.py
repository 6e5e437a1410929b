"""The Triton back end: every kernel it renders gives the interpreter's results.

Without a GPU (CI) the kernels run in Triton's interpreter (``TRITON_INTERPRET=1``, set here
before Triton is imported) on CPU tensors, at small shapes; with a GPU the same tests run the
compiled kernels on CUDA tensors. What the interpreter cannot compute is said where it is left
out: its bf16 conversions truncate instead of rounding to nearest and flush subnormals, so bf16
programs are checked on the GPU only. ``test_kernels_compile_for_sm_90`` (``python -m fir.tools.triton_target``) compiles every kernel
of the examples and of the GPU benchmark programs for an H100 (sm_90) in a subprocess without
the interpreter, so a kernel that would not compile fails here too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

GPU = torch.cuda.is_available()
if not GPU and os.environ.get("TRITON_INTERPRET") != "1":  # conftest.py sets it
    pytest.skip("no GPU, and Triton was not imported in interpreter mode", allow_module_level=True)
DEVICE = "cuda" if GPU else "cpu"

from fir.backends.compile import compile_function  # noqa: E402
from fir.backends.plan.block_schedule import PERSISTENT_MAX, block_schedule  # noqa: E402
from fir.ir.dtypes import DType  # noqa: E402
from fir.ir.errors import KernelIndexError, KernelZeroDivisionError  # noqa: E402
from fir.ir.interpreter import run_graph  # noqa: E402
from fir.ir.parser import parse_module  # noqa: E402
from fir.passes.pipeline import parse_pipeline  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import test_cpp_render as cpp  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
# the interpreter computes with numpy, which warns where IEEE arithmetic gives inf or NaN
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
BF16_IN_INTERPRETER = (
    "Triton's interpreter truncates bf16 conversions and flushes subnormals: checked on the GPU"
)


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIR_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "fir-cache"))


def compile_text(text: str, pipeline: str = "cuda") -> list:
    """``text`` through ``pipeline`` (the Triton back end's own by default), compiled."""
    module = parse_pipeline(pipeline).run(parse_module(text, "<test>"))
    return [compile_function(g, "triton", device=DEVICE) for g in module.funcs]


def check(
    text: str,
    inputs: list | None = None,
    rtol: float = 1e-5,
    atol: float = 1e-5,
    sizes: dict[str, int] | None = None,
    pipeline: str = "cuda",
) -> list:
    """Compile every function of ``text`` with Triton, run it, compare with the interpreter;
    return the compiled programs."""
    programs = compile_text(text, pipeline)
    reference = parse_module(text, "<test>")
    for p, ref_g in zip(programs, reference.funcs):
        xs = inputs if inputs is not None else cpp.random_inputs(ref_g, sizes=sizes)
        want = run_graph(ref_g, [x.clone() for x in xs])
        got = p(*[x.clone().to(DEVICE) for x in xs])
        for w, o, name in zip(want, got, p.plan.outputs):
            assert o.dtype == w.dtype, name
            assert o.shape == w.shape, name
            torch.testing.assert_close(
                o.cpu(), w, rtol=rtol, atol=atol, equal_nan=True, msg=lambda m, n=name: f"%{n}: {m}"
            )
    return programs


def configs(program: object) -> list[str]:
    return [c.text() for c in program.kernels.configs.values()]  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------------------------
# programs


EXAMPLES = sorted(str(p) for p in (ROOT / "examples").glob("*.fir"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: Path(p).name)
def test_example(path: str) -> None:
    check(Path(path).read_text(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", sorted(cpp.PROGRAMS))
def test_program(name: str) -> None:
    text = cpp.PROGRAMS[name]
    if "bf16" in text and not GPU:
        pytest.skip(BF16_IN_INTERPRETER)
    tol = 1e-2 if "16" in name else 1e-4
    check(text, cpp._inputs_for(name, text), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", list(DType), ids=str)
def test_every_elementwise_op(dtype: DType) -> None:
    if dtype is DType.BF16 and not GPU:
        pytest.skip(BF16_IN_INTERPRETER)
    text, inputs = cpp._op_program(dtype)
    tol = {DType.F16: 1e-3, DType.BF16: 8e-3, DType.F32: 2e-6, DType.F64: 1e-12}.get(dtype, 0)
    check(text, inputs, rtol=tol, atol=tol)


@pytest.mark.parametrize("source", list(DType), ids=str)
def test_every_cast(source: DType) -> None:
    if source is DType.BF16 and not GPU:
        pytest.skip(BF16_IN_INTERPRETER)
    n = 64
    targets = [t for t in DType if GPU or t is not DType.BF16]
    lines = [f"  %y{k} = cast %a : {t.value}[{n}]" for k, t in enumerate(targets)]
    results = ", ".join(f"{t.value}[{n}]" for t in targets)
    names = ", ".join(f"%y{k}" for k in range(len(targets)))
    text = f"func @casts(%a: {source.value}[{n}]) -> ({results}) {{\n" + "\n".join(lines)
    text += f"\n  return {names}\n}}\n"
    a = cpp._special(source, n, 4)
    if source.is_float:  # out-of-range float -> int conversions are undefined
        a = torch.where(a.isfinite() & (a.abs() < 100), a, torch.zeros_like(a))
    check(text, [a], rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------
# reductions: persistent and looped, NaN, ties


@pytest.mark.parametrize("shape", [(3, 7), (4, 33), (300, 13)], ids=str)
@pytest.mark.parametrize("nans", [False, True], ids=["finite", "nan"])
def test_whole_tensor_reductions(shape: tuple[int, int], nans: bool) -> None:
    text = cpp.REDUCE_ALL.replace("R", str(shape[0])).replace("C", str(shape[1]))
    x = torch.randn(shape, generator=torch.Generator().manual_seed(5))
    if nans:
        x = cpp._with_nans(x, 6)
    check(text, [x], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("nans", [False, True], ids=["finite", "nan"])
def test_split_whole_tensor_reductions(nans: bool) -> None:
    """The ``cuda`` pipeline splits sum, max and min of 16,384 elements into 64 chunks of 256
    (argmax, argmin and welford stay whole): a kernel of 64 programs, then one over the
    partial results."""
    text = cpp.REDUCE_ALL.replace("R", "2048").replace("C", "8")
    x = torch.randn(2048, 8, generator=torch.Generator().manual_seed(3))
    if nans:
        x = cpp._with_nans(x, 4)
    (p,) = check(text, [x], rtol=1e-4, atol=1e-4)
    spaces = [k.text().splitlines()[0] for k in p.plan.kernels()]
    assert any("(64; 256)" in s for s in spaces) and any("(1; 64)" in s for s in spaces), spaces


@pytest.mark.parametrize("shape", [(3, 7), (5, 16), (4, 33), (2, 9000)], ids=str)
@pytest.mark.parametrize("nans", [False, True], ids=["finite", "nan"])
def test_row_reductions(shape: tuple[int, int], nans: bool) -> None:
    """(2, 9000) is above the persistent size: the row is reduced in a loop of blocks (in the
    ``fusion`` pipeline: ``cuda``'s would split its rows, see test_split_reductions)."""
    text = cpp.REDUCE_ROWS.replace("R", str(shape[0])).replace("C", str(shape[1]))
    x = torch.randn(shape, generator=torch.Generator().manual_seed(7)) * 0.1 + 1
    if nans:
        x = cpp._with_nans(x, 8)
    (p,) = check(text, [x], rtol=1e-4, atol=1e-4, pipeline="fusion")
    persistent = shape[1] <= PERSISTENT_MAX
    assert all(("persistent" in c) == persistent for c in configs(p)), configs(p)


def test_argmax_ties_and_infinities_take_the_first() -> None:
    text, inputs = cpp.argmax_ties_case()
    check(text, inputs, rtol=0, atol=0)


def test_column_reductions_with_every_kind() -> None:
    text = """
func @f(%x: f32[45, 150]) -> (f32[150], f32[150], i64[150], f32[150], f32[150]) {
  %s = sum %x {dims = [0]} : f32[150]
  %mx = max %x {dims = [0]} : f32[150]
  %am = argmax %x {dim = 0} : i64[150]
  %m, %m2, %n = welford %x {dims = [0]} : f32[150], f32[150], f32[150]
  %v = var %x {dims = [0]} : f32[150]
  return %s, %mx, %am, %m2, %v
}"""
    x = cpp._with_nans(torch.randn(45, 150, generator=torch.Generator().manual_seed(9)), 10)
    check(text, [x], rtol=1e-4, atol=1e-4)


def test_any_all_and_integer_reductions() -> None:
    text = """
func @f(%x: f32[7, 40], %b: bool[7, 40], %i: i32[7, 40], %j: i8[7, 40])
    -> (bool[7], bool[7], bool[], bool[40], i32[7], i64[7], i8[7], i64[40]) {
  %a = any %x {dims = [1]} : bool[7]
  %l = all %b {dims = [1]} : bool[7]
  %t = any %b : bool[]
  %c = all %x {dims = [0]} : bool[40]
  %s = sum %i {dims = [1]} : i32[7]
  %am = argmin %i {dim = 1} : i64[7]
  %p = prod %j {dims = [1]} : i8[7]
  %ax = argmax %j {dim = 0} : i64[40]
  return %a, %l, %t, %c, %s, %am, %p, %ax
}"""
    g = torch.Generator().manual_seed(11)
    x = torch.randn(7, 40, generator=g)
    x[2] = 0.0
    x[:, 5] = 0.0
    b = torch.rand(7, 40, generator=g) > 0.1
    b[1] = True
    i = torch.randint(-(2**31), 2**31 - 1, (7, 40), generator=g, dtype=torch.int32)
    j = torch.randint(-128, 127, (7, 40), generator=g, dtype=torch.int8)
    check(text, [x, b, i, j], rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------
# layouts: what a kernel's blocks are


def test_softmax_reads_its_row_once_in_registers() -> None:
    text = """
func @softmax(%x: f32[16, 1000]) -> (f32[16, 1000]) {
  %y = softmax %x {dim = 1} : f32[16, 1000]
  return %y
}"""
    (p,) = check(text, rtol=1e-5, atol=1e-6)
    source = p.kernels.source
    assert configs(p) == [c for c in configs(p) if "persistent" in c]
    assert source.count("tl.load(") == 1  # one read of the row; the exps stay in registers
    assert source.count("ld.exp(") == 1


def test_a_persistent_welford_over_a_static_row_counts_without_a_reduction() -> None:
    """A layer norm's statistics over rows of 300 in blocks of 512: the count of each row is
    its length, a literal, not a block reduction of ones (which had cost one more cross-warp
    reduction: 5 barriers against 3 in the sm_90 PTX of BERT's layer norm). The results, the
    count included, are the interpreter's, on rows past the last one too (17 rows)."""
    text = """
func @stats(%x: f32[17, 300]) -> (f32[17], f32[17], f32[17]) {
  %m, %m2, %n = welford %x {dims = [1]} : f32[17], f32[17], f32[17]
  return %m, %m2, %n
}"""
    (p,) = check(text, rtol=1e-5, atol=1e-5, pipeline="lowering")
    source = p.kernels.source
    assert configs(p) == [c for c in configs(p) if "persistent" in c]
    assert "1.0, 0.0" not in source  # no sum of ones
    assert "300.0" in source


def test_blocks_that_tile_a_static_extent_exactly_carry_no_computed_mask() -> None:
    """Rows of 256 in blocks of 256 and 64 rows in blocks of a few: every lane is in range, so
    the masks are constants that Triton folds away (BERT's attention softmax: 141.7 against
    146.8 us a step on an H200). Rows of 200 in blocks of 256 keep the computed ``rmask``, and
    both programs give the interpreter's results."""
    full = """
func @softmax(%x: f32[64, 256]) -> (f32[64, 256]) {
  %y = softmax %x {dim = 1} : f32[64, 256]
  return %y
}"""
    (p,) = check(full, rtol=1e-5, atol=1e-6)
    source = p.kernels.source
    assert "xmask = tl.full([XBLOCK, 1], True, tl.int1)" in source
    assert "rmask = tl.full([1, RBLOCK], True, tl.int1)" in source
    assert "rindex < 256" not in source and "xindex < 64" not in source
    ragged = full.replace("256", "200")
    (p,) = check(ragged, rtol=1e-5, atol=1e-6)
    assert "rmask = rindex < 200" in p.kernels.source


def test_transposed_add_runs_in_tiles() -> None:
    text = """
func @f(%x: f32[200, 136], %y: f32[136, 200]) -> (f32[200, 136]) {
  %t = transpose %y {dim0 = 0, dim1 = 1} : f32[200, 136]
  %z = add %x, %t : f32[200, 136]
  return %z
}"""
    (p,) = check(text)
    assert configs(p)[0].startswith("tiled")


def test_column_sum_takes_many_outputs_per_block() -> None:
    text = "func @f(%x: f32[5000, 96]) -> (f32[96]) {\n  %s = sum %x {dims = [0]} : f32[96]\n"
    text += "  return %s\n}\n"
    module = parse_pipeline("fusion").run(parse_module(text, "<test>"))
    from fir.backends.registry import backend_named

    (k,) = backend_named("triton").plan(module.funcs[0]).kernels()
    cfg = block_schedule(k)
    assert cfg.XBLOCK > 1 and not cfg.persistent


def test_a_column_sum_of_few_rows_takes_a_block_of_all_of_them() -> None:
    # the sum over Llama's 4 repeated key heads in its backward: 32 x 4 blocks of 16 warps
    # took 55 us on an H200; a block holds all the rows and hundreds of outputs
    text = "func @f(%x: f32[4, 3000]) -> (f32[3000]) {\n  %s = sum %x {dims = [0]} : f32[3000]\n"
    text += "  return %s\n}\n"
    (p,) = check(text)
    (cfg,) = p.kernels.configs.values()  # type: ignore[attr-defined]
    assert cfg.columns and cfg.RBLOCK == 4 and cfg.XBLOCK >= 256, cfg.text()


NORM_WEIGHT_GRAD = """func @f(%g: f32[ROWS, COLS], %x: f32[ROWS, COLS], %m: f32[ROWS], %r: f32[ROWS]) -> (f32[COLS]) {
  %dw = reduction sum : f32[COLS] over (i0 < COLS; r0 < ROWS) {
    %0 = load %g[COLS*r0 + i0]
    %1 = load %x[COLS*r0 + i0]
    %2 = load %m[r0]
    %3 = sub %1, %2
    %4 = load %r[r0]
    %5 = mul %3, %4
    %6 = mul %0, %5
    yield %6
  }
  return %dw
}
"""


def _norm_weight_grad(rows: int, cols: int) -> str:
    return NORM_WEIGHT_GRAD.replace("ROWS", str(rows)).replace("COLS", str(cols))


def test_a_norm_weight_gradient_splits_and_keeps_its_values() -> None:
    # a layer norm's weight gradient also loads a mean and an rstd a row: still a column
    # reduction (fir.ir.symbolic.walks_columns), so the cuda pipeline splits it
    (p,) = check(_norm_weight_grad(1024, 64), rtol=1e-4, atol=1e-4)
    configs = p.kernels.configs  # type: ignore[attr-defined]
    assert any(n.endswith("_part") and c.columns for n, c in configs.items()), configs


def test_the_finals_of_independent_split_sums_run_as_one_kernel() -> None:
    # a layer norm's weight and bias gradients and a bias gradient: three split sums of 1,024
    # rows that share no input. Each final (64 outputs of 4 partials) is launch-bound:
    # fuse{small-kernels} joins them, and the values stay the interpreter's
    text = """func @f(%g: f32[1024, 64], %x: f32[1024, 64], %d: f32[1024, 64]) -> (f32[64], f32[64], f32[64]) {
  %gx = mul %g, %x : f32[1024, 64]
  %dw = sum %gx {dims = [0]} : f32[64]
  %db = sum %g {dims = [0]} : f32[64]
  %bias = sum %d {dims = [0]} : f32[64]
  return %dw, %db, %bias
}
"""
    pipeline = parse_pipeline("cuda").passes
    names = ",".join("fuse{small-kernels=65536}" if q.name == "fuse" else q.name for q in pipeline)
    (p,) = check(text, rtol=1e-4, atol=1e-4, pipeline=names)
    kernels = list(p.plan.kernels())  # type: ignore[attr-defined]
    finals = [k for k in kernels if not any(m.endswith(".part") for m in k.members)]
    assert len(finals) == 1 and len(finals[0].members) == 3, [k.members for k in kernels]
    # three sums of 4 rows in one kernel: a block of all the rows and the 64 outputs, in 4
    # warps (one sum alone: 1), so that a thread holds one sum's share of each
    cfg = block_schedule(finals[0])
    assert (cfg.XBLOCK, cfg.RBLOCK, cfg.num_warps, cfg.columns) == (64, 4, 4, True), cfg.text()


def _batched_norm_weight_grad(batch: int, tokens: int, cols: int) -> str:
    """A norm weight gradient whose rows are a batch loop outside the sequence's."""
    rows = batch * tokens
    return (
        _norm_weight_grad(rows, cols)
        .replace(f"r0 < {rows}", f"r0 < {batch}, r1 < {tokens}")
        .replace(f"{cols}*r0 + i0", f"{tokens * cols}*r0 + {cols}*r1 + i0")
        .replace("%m[r0]", f"%m[{tokens}*r0 + r1]")
        .replace("%r[r0]", f"%r[{tokens}*r0 + r1]")
    )


def _split_part(text: str) -> Any:
    """The plan of the partial sums the cuda pipeline splits ``text``'s reduction into."""
    from fir.backends.registry import backend_named

    module = parse_pipeline("cuda").run(parse_module(text, "<test>"))
    (part,) = [
        k
        for k in backend_named("triton").plan(module.funcs[0]).kernels()
        if k.name.endswith("_part")
    ]
    return part


def test_short_columns_in_many_programs_take_short_blocks() -> None:
    from fir.backends.plan.block_schedule import block_schedule

    # GPT-2's size, 4096 rows x 768: 16 chunks of 256 rows, 384 programs of 32 columns
    chosen = block_schedule(_split_part(_norm_weight_grad(4096, 768)))
    assert chosen.columns and (chosen.XBLOCK, chosen.RBLOCK, chosen.num_warps) == (32, 8, 4)
    # T5's, 8 x 512 rows x 512: 8 chunks of 512 rows, 128 programs, which need the long
    # blocks' loads in flight
    chosen = block_schedule(_split_part(_batched_norm_weight_grad(8, 512, 512)))
    assert (chosen.XBLOCK, chosen.RBLOCK, chosen.num_warps) == (32, 64, 16), chosen.text()
    # Llama's, 4 x 512 rows x 2048: 4 chunks of 512 rows make 256 programs, but each steps
    # through 512 rows (88 us a layer in short blocks, about 30 in long ones)
    part = _split_part(_batched_norm_weight_grad(4, 512, 2048))
    assert (part.numel, part.rnumel) == (4 * 2048, 512)
    chosen = block_schedule(part)
    assert (chosen.XBLOCK, chosen.RBLOCK, chosen.num_warps) == (32, 64, 16), chosen.text()


def test_a_reduction_of_one_element() -> None:
    # the OpInfo suite on a GPU: sum of a 0-d or 1-element tensor has no reduction loop left
    for shape in ("1", "", "1, 1"):
        text = f"func @f(%x: f32[{shape}]) -> (f32[]) {{\n  %s = sum %x : f32[]\n"
        text += "  return %s\n}\n"
        check(text)


def test_a_configuration_override_is_what_runs() -> None:
    from fir.backends.plan.block_schedule import BlockSchedule
    from fir.backends.registry import backend_named
    from fir.backends.triton import build_program

    text = "func @f(%x: f32[96, 40]) -> (f32[40]) {\n  %s = sum %x {dims = [0]} : f32[40]\n"
    text += "  return %s\n}\n"
    graph = parse_pipeline("fusion").run(parse_module(text, "<test>")).funcs[0]
    plan = backend_named("triton").plan(graph)
    (k,) = plan.kernels()
    cfg = BlockSchedule("reduction", 16, RBLOCK=32, num_warps=2, columns=True)
    kernels = build_program(plan, DEVICE, configs={k.name: cfg})
    assert kernels.configs[k.name] == cfg
    assert "XBLOCK=16, RBLOCK=32, num_warps=2" in kernels.source


def test_symbolic_sizes_compile_once() -> None:
    (p,) = compile_text(cpp.SYMBOLIC)
    reference = parse_module(cpp.SYMBOLIC, "<test>").funcs[0]
    for rows, cols in [(1, 1), (3, 17), (9, 16), (5, 100)]:
        g = torch.Generator().manual_seed(rows * cols)
        xs = [torch.randn(rows, cols, generator=g), torch.randn(cols, generator=g)]
        want = run_graph(reference, xs)
        got = p(*[x.to(DEVICE) for x in xs])
        for w, o in zip(want, got):
            torch.testing.assert_close(o.cpu(), w, rtol=1e-4, atol=1e-4)


TRANSPOSED_OVER_SYMBOLS = """
func @rope_like(%x: f32[s0, s1, 4, 8], %y: f32[8]) -> (f32[s0, 4, s1, 8]) {
  %t = transpose %x {dim0 = 1, dim1 = 2} : f32[s0, 4, s1, 8]
  %r = mul %t, %y : f32[s0, 4, s1, 8]
  %o = add %r, 1.0 : f32[s0, 4, s1, 8]
  return %o
}
"""


@pytest.mark.parametrize("s0, s1", [(2, 3), (3, 5), (1, 16)])
def test_a_flat_index_splits_by_products_of_symbolic_sizes(s0: int, s1: int) -> None:
    """Llama's rotary embedding under dynamic=True: the store is transposed, so the flat index
    splits by ``8*s1`` and ``32*s1``; printed as ``xindex // 32*s1`` it read and wrote out of
    bounds (a crash in the interpreter, an illegal address on the GPU)."""
    check(TRANSPOSED_OVER_SYMBOLS, sizes={"s0": s0, "s1": s1})


BIASED_SOFTMAX = """
func @biased_softmax(%x: f32[2, 4, 64, 128], %table: f32[8, 4], %pos: i64[64, 128]) -> (f32[2, 4, 64, 128]) {
  %e = embedding %table, %pos : f32[64, 128, 4]
  %b = permute %e {dims = [2, 0, 1]} : f32[4, 64, 128]
  %b1 = unsqueeze %b {dim = 0} : f32[1, 4, 64, 128]
  %s = add %x, %b1 : f32[2, 4, 64, 128]
  %y = softmax %s {dim = -1} : f32[2, 4, 64, 128]
  return %y
}
"""


def test_a_persistent_softmax_gathers_its_bias_once_per_element() -> None:
    """T5's attention softmax adds a bias gathered from a table (relative positions): each pass
    of the persistent reduction checked the gathered index and gathered the row again (0.172 ms
    a layer on an H200 against Inductor's 0.064); the check and the gather now happen once, and
    an index out of range still raises."""
    pos = torch.randint(0, 8, (64, 128))
    inputs = [torch.randn(2, 4, 64, 128), torch.randn(8, 4), pos]
    (p,) = check(BIASED_SOFTMAX, inputs)
    source = p.kernels.source
    assert "persistent" in source
    assert source.count("tl.load(p_table") == 1, source
    assert source.count("_ok = (") == 1, source
    bad = pos.clone()
    bad[3, 5] = 8
    with pytest.raises(KernelIndexError, match=r"out of bounds \[0, 8\)"):
        p(*[x.to(DEVICE) for x in (inputs[0], inputs[1], bad)])
        p.synchronize()


DIVIDE_BY_CONSTANTS = """
func @d(%x: f32[64], %y: f64[64]) -> (f32[64], f32[64], f64[64], f32[64]) {
  %eighth = pointwise : f32[64] over (i0 < 64) {
    %0 = load %x[i0]
    %1 = div %0, 8.0
    yield %1
  }
  %neg = pointwise : f32[64] over (i0 < 64) {
    %0 = load %x[i0]
    %1 = div %0, -0.25
    yield %1
  }
  %wide = pointwise : f64[64] over (i0 < 64) {
    %0 = load %y[i0]
    %1 = div %0, 1024.0
    yield %1
  }
  %odd = pointwise : f32[64] over (i0 < 64) {
    %0 = load %x[i0]
    %1 = div %0, 2.7725887298583984
    yield %1
  }
  return %eighth, %neg, %wide, %odd
}
"""


def test_division_by_a_power_of_two_is_a_multiplication_with_the_same_bits() -> None:
    """T5's relative-position buckets divide by 8: ``tl.div_rn`` costs about ten instructions,
    a multiplication by 0.125 one, and both round the same real number. Subnormal results,
    infinities and NaN keep their bits; an f32 divisor that is no power of two stays a
    division (IEEE's, as the interpreter's)."""
    tiny = [1e-38, -3e-39, 1.4e-45, 3.4e38, float("inf"), float("-inf"), float("nan"), 0.0]
    x = torch.cat([torch.tensor(tiny), torch.randn(56) * 1e3])
    y = x.double() * 1e-300
    (p,) = check(DIVIDE_BY_CONSTANTS, [x, y], rtol=0, atol=0)
    source = p.kernels.source
    assert "* 0.125" in source and "* -4.0" in source, source
    assert "0.0009765625, tl.float64" in source, source
    assert source.count("tl.div_rn(") == 1, source  # the division by 2.77 only


def test_narrow_division_by_a_literal_is_eagers_product_by_the_reciprocal() -> None:
    """On a GPU eager divides an f16 tensor by a Python scalar as a product by the scalar's
    f32 reciprocal (ATen's CUDA ``div_true_kernel``): ``x / 0.3`` is ``x * (1.0f / 0.3f)``,
    rounded once; the Triton back end computes that, bit for bit."""
    text = (
        "func @d(%x: f16[2048]) -> (f16[2048]) {\n  %y = div %x, 0.3 : f16[2048]\n  return %y\n}\n"
    )
    x = (torch.randn(2048, generator=torch.Generator().manual_seed(0)) * 3).half()
    (p,) = compile_text(text)
    (got,) = p(x.to(DEVICE))
    inverse = torch.tensor(1.0) / torch.tensor(0.3)  # in f32
    assert torch.equal(got.cpu(), (x.float() * inverse).half())
    assert "tl.div_rn(" not in p.kernels.source


# ---------------------------------------------------------------------------------------------
# faults


def test_out_of_range_gather_index_raises_and_the_program_stays_usable() -> None:
    (p,) = compile_text(cpp.PROGRAMS["embedding"])
    w = torch.randn(50, 48)
    for bad in (50, -1, 10**12):
        ids = torch.randint(0, 50, (7, 3))
        ids[4, 1] = bad
        with pytest.raises(KernelIndexError, match=r"out of bounds \[0, 50\)") as info:
            p(w.to(DEVICE), ids.to(DEVICE))
            p.synchronize()  # on a GPU the error is read at the next call, or here
        assert f"the index is {bad}" in str(info.value)
    ids = torch.randint(0, 50, (7, 3))
    torch.testing.assert_close(p(w.to(DEVICE), ids.to(DEVICE))[0].cpu(), w[ids])


def test_a_mapped_error_buffer_is_looked_at_without_waiting(monkeypatch: Any) -> None:
    """The deferred check of a mapped error buffer (host memory the kernels write): a call
    whose buffer holds no code neither waits for the device nor reads more; a code makes the
    host wait, read the buffer whole, report and clear it."""
    import ctypes

    from fir.backends.runtime.triton_launch import KernelLaunches

    launches = KernelLaunches("cpu", ["k0", "k1"], {"k0": False, "k1": True})
    waits: list[int] = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda ordinal=None: waits.append(ordinal))
    buffer = torch.zeros(2, dtype=torch.int64)
    launches.device, launches.err, launches.mapped = "cuda:0", buffer, True
    launches.err_code = (ctypes.c_int64 * 1).from_address(buffer.data_ptr())
    assert launches.finish() is None and not waits
    buffer[1] = 7  # the value is written before the code is seen
    buffer[0] = -2  # division by zero (code -1) … of the kernel at position 1 (k1)
    assert launches.finish() == ("k1", -1, 7) and waits == [0]
    assert buffer.tolist() == [0, 0]  # cleared: the program stays usable
    assert launches.finish() is None and waits == [0]


@pytest.mark.skipif(not GPU, reason="the error buffer is host memory mapped into a GPU's")
def test_the_error_buffer_costs_no_copy_a_call() -> None:
    """A program whose kernels can fail (a checked gather) launches its kernels and nothing
    else: no copy of the error buffer after each call (one launch a step more than Inductor's,
    before); a failure is still reported, by the next call or ``synchronize``."""
    from torch.profiler import ProfilerActivity, profile

    (p,) = compile_text(cpp.PROGRAMS["embedding"])
    w = torch.randn(50, 48, device=DEVICE)
    ids = torch.randint(0, 50, (7, 3), device=DEVICE)
    p(w, ids)
    torch.cuda.synchronize()
    assert p.kernels.mapped  # type: ignore[attr-defined]
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            p(w, ids)
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    assert names and not [n for n in names if "Memcpy" in n or "Memset" in n], names
    ids[2, 1] = 99
    with pytest.raises(KernelIndexError, match="the index is 99"):
        p(w, ids)
        p(w, ids[:, :1].clone().repeat(1, 3).clamp(0, 49))  # a good call after the bad one
        p.synchronize()  # type: ignore[attr-defined]
    ids[2, 1] = 3
    torch.testing.assert_close(p(w, ids)[0], w[ids])


@pytest.mark.skipif(not GPU, reason="the error buffer's device-memory fallback is a GPU's")
def test_an_unmapped_error_buffer_is_copied_and_still_reports(monkeypatch: Any) -> None:
    """Where the driver does not map page-locked memory, the buffer is in device memory and
    copied after each call, as before; a bad index still raises."""
    from fir.backends.runtime import triton_launch

    monkeypatch.setattr(triton_launch._Driver, "device_pointer", lambda self, a, o: None)
    (p,) = compile_text(cpp.PROGRAMS["embedding"])
    w = torch.randn(50, 48, device=DEVICE)
    ids = torch.randint(0, 50, (7, 3), device=DEVICE)
    p(w, ids)
    assert not p.kernels.mapped and p.kernels.err.is_cuda  # type: ignore[attr-defined]
    ids[0, 0] = 77
    with pytest.raises(KernelIndexError, match="the index is 77"):
        p(w, ids)
        p.synchronize()  # type: ignore[attr-defined]


def test_integer_division_by_zero_raises() -> None:
    text = """
func @f(%a: i32[64], %b: i32[64]) -> (i32[64]) {
  %q = floordiv %a, %b : i32[64]
  return %q
}"""
    (p,) = compile_text(text)
    a = torch.arange(64, dtype=torch.int32)
    b = torch.ones(64, dtype=torch.int32)
    b[9] = 0
    with pytest.raises(KernelZeroDivisionError, match="integer division by zero"):
        p(a.to(DEVICE), b.to(DEVICE))
        p.synchronize()
    b[9] = 3
    torch.testing.assert_close(p(a.to(DEVICE), b.to(DEVICE))[0].cpu(), a // b)


# ---------------------------------------------------------------------------------------------
# torch.compile and the sm_90 compile check


def test_torch_compile_runs_triton_kernels() -> None:
    from fir.frontend.dynamo import COMPILED

    start = len(COMPILED)
    f = torch.compile(
        lambda x, w: torch.softmax(x * w, -1) + 1, backend="fir", options={"backend": "triton"}
    )
    x, w = torch.randn(8, 32, device=DEVICE), torch.randn(32, device=DEVICE)
    torch.testing.assert_close(f(x, w), torch.softmax(x * w, -1) + 1)
    assert COMPILED[start].program is not None
    assert "@triton.jit" in COMPILED[start].program.kernels.source


def test_kernels_compile_for_sm_90(tmp_path: Path) -> None:
    # the interpreter runs kernels as Python, which forgives what Triton's compiler does not
    # (a value used outside the loop that defines it): the programs of this file compile too
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    files = [str(p) for p in sorted((ROOT / "examples").glob("*.fir"))]
    texts = dict(cpp.PROGRAMS)
    texts["symbolic"] = cpp.SYMBOLIC
    for shape in ((4, 33), (2, 5000), (45, 150)):
        texts[f"rows{shape}"] = cpp.REDUCE_ROWS.replace("R", str(shape[0])).replace(
            "C", str(shape[1])
        )
        texts[f"all{shape}"] = cpp.REDUCE_ALL.replace("R", str(shape[0])).replace(
            "C", str(shape[1])
        )
    for dt in DType:
        texts[f"ops_{dt}"] = cpp._op_program(dt)[0]
    for name, text in texts.items():
        path = tmp_path / f"{name}.fir".replace(" ", "")
        path.write_text(text)
        files.append(str(path))
    done = subprocess.run(
        [sys.executable, "-m", "fir.tools.triton_target", *files, "--benchmarks"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert " 0 program(s) failed" in done.stdout


# ---------------------------------------------------------------------------------------------
# autotune and warm-up

AUTOTUNED = """func @f(%x: f32[4, 48], %b: f32[48]) -> (f32[4, 48]) {
  %y = add %x, %b : f32[4, 48]
  %m = max %y {dims = [1], keepdim = true} : f32[4, 1]
  %e = sub %y, %m : f32[4, 48]
  %z = exp %e : f32[4, 48]
  return %z
}"""


def _autotuned(text: str) -> object:
    from fir.backends.registry import backend_named
    from fir.backends.runtime import CompiledProgram
    from fir.backends.triton import build_program

    graph = parse_pipeline("fusion").run(parse_module(text, "<test>")).funcs[0]
    plan = backend_named("triton").plan(graph)
    return CompiledProgram(plan, build_program(plan, DEVICE, autotune=True), DEVICE)


def test_autotune_picks_a_candidate_and_caches_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from fir.backends.plan.block_schedule import candidates
    from fir.backends.runtime import triton_tune as tune

    tried: list[object] = []
    real_time = tune._time

    def timed(run: object, device: str) -> float:
        tried.append(run)
        real_time(run, device)  # the trial really runs
        return 1.0 / len(tried)  # the last configuration tried "wins"

    monkeypatch.setattr(tune, "_time", timed)
    reference = parse_module(AUTOTUNED, "<test>").funcs[0]
    xs = cpp.random_inputs(reference)
    want = run_graph(reference, [x.clone() for x in xs])
    program = _autotuned(AUTOTUNED)
    got = program(*[x.to(DEVICE) for x in xs])
    torch.testing.assert_close(got[0].cpu(), want[0], rtol=1e-5, atol=1e-5)
    (name,) = program.kernels.configs  # type: ignore[attr-defined]
    k = program.plan.kernels()[0]  # type: ignore[attr-defined]
    options = candidates(k)[: tune.TRIALS]
    assert len(options) > 1 and len(tried) == len(options)
    assert program.kernels.configs[name] == options[-1]  # type: ignore[attr-defined]
    # a second call launches the tuned kernel without trials; so does a new program
    program(*[x.to(DEVICE) for x in xs])
    again = _autotuned(AUTOTUNED)
    got = again(*[x.to(DEVICE) for x in xs])
    assert len(tried) == len(options)
    assert again.kernels.configs[name] == options[-1]  # type: ignore[attr-defined]
    torch.testing.assert_close(got[0].cpu(), want[0], rtol=1e-5, atol=1e-5)


def test_torch_compile_takes_the_autotune_option() -> None:
    from fir.frontend.dynamo import CompileOptions

    assert CompileOptions.from_dict({"autotune": True}).autotune


@pytest.mark.skipif(
    not GPU, reason="kernels are compiled ahead and launched by the driver on a GPU"
)
def test_kernels_compile_before_the_first_call_and_launch_through_the_driver() -> None:
    for path in EXAMPLES:
        for program in compile_text(Path(path).read_text()):
            kernels = program.kernels  # type: ignore[attr-defined]
            assert not kernels.not_direct, kernels.not_direct
            assert set(kernels.cubins) == set(kernels.order)


@pytest.mark.skipif(not GPU, reason="the driver launch runs on a GPU")
def test_a_misaligned_pointer_takes_tritons_launcher() -> None:
    text = "func @f(%x: f32[1000]) -> (f32[1000]) {\n  %y = exp %x : f32[1000]\n"
    text += "  return %y\n}\n"
    (program,) = compile_text(text)
    kernels = program.kernels  # type: ignore[attr-defined]
    (name,) = kernels.order
    x = torch.randn(1001, device=DEVICE)[1:]  # 4 bytes past an aligned block
    y = torch.empty(1001, device=DEVICE)[1:]
    kernels.call(name, [x, y], [])
    torch.testing.assert_close(y, torch.exp(x))
    x2, y2 = torch.randn(1000, device=DEVICE), torch.empty(1000, device=DEVICE)
    kernels.call(name, [x2, y2], [])
    torch.testing.assert_close(y2, torch.exp(x2))


def test_the_generated_call_launches_kernels_itself_where_the_kernels_allow() -> None:
    # the generated call launches a kernel through a C launcher with the buffers' addresses
    # (a fake launcher here, recording), and takes the kernels' own call where an address
    # is not 16-byte aligned (the kernel was compiled for aligned ones)
    from fir.backends.runtime.call_source import DirectLaunch, call_source

    text = "func @f(%x: f32[1000]) -> (f32[1000]) {\n  %y = exp %x : f32[1000]\n"
    text += "  return %y\n}\n"
    (program,) = compile_text(text)
    launched: list[tuple] = []

    class Direct:
        ordinal = 0

        def direct_launch(self, name: str, sizes: tuple) -> DirectLaunch:
            launch = DirectLaunch(lambda *a: launched.append(a), 7, (4, 1, 1), 4, 0, "KK", False, 0)
            return launch

        def device_getter(self) -> int:
            return 0

        def stream_getter(self) -> int:
            return 99

        def error_pointer(self) -> int:
            raise AssertionError("no kernel here can fail")

    fast = program.fast  # type: ignore[attr-defined]
    kernels = program.kernels  # type: ignore[attr-defined]
    source, call = call_source(
        fast,
        DEVICE,
        True,
        kernels.call,
        program._raise,
        None,
        direct=Direct(),  # type: ignore[attr-defined]
    )
    x = torch.randn(1000, device=DEVICE)
    (y,) = call([x])
    assert launched == [(7, 4, 1, 1, 4, 0, "KK", (x.data_ptr(), y.data_ptr()), 99)], source
    launched.clear()
    x = torch.randn(1001, device=DEVICE)[1:]  # 4 bytes past an aligned block
    (y,) = call([x])
    assert not launched  # Triton's launcher ran it
    torch.testing.assert_close(y, torch.exp(x))


@pytest.mark.skipif(not GPU, reason="PyTorch's C launcher runs on a GPU")
def test_a_program_on_a_gpu_launches_through_pytorchs_c_launcher() -> None:
    from fir.backends.runtime.triton_launch import c_launcher

    if c_launcher() is None:
        pytest.skip("this torch has no C launcher of loaded kernels")
    text = "func @f(%x: f32[1000], %i: i64[7]) -> (f32[1000], f32[7]) {\n"
    text += "  %y = exp %x : f32[1000]\n  %g = index_select %y, %i {dim = 0} : f32[7]\n"
    text += "  return %y, %g\n}\n"
    (program,) = compile_text(text)
    assert "C++ launcher" in "".join(program.fast.labels.values())  # type: ignore[attr-defined]
    x, i = torch.randn(1000, device=DEVICE), torch.tensor([0, 5, 999, 3, 2, 1, 0], device=DEVICE)
    y, g = program(x, i)
    torch.testing.assert_close(y, torch.exp(x))
    torch.testing.assert_close(g, torch.exp(x)[i])
    with pytest.raises(KernelIndexError):  # the error buffer reached the kernel
        program(x, torch.tensor([0, 1000, 0, 0, 0, 0, 0], device=DEVICE))
        program.synchronize()  # type: ignore[attr-defined]
    y, g = program(x, i)  # still usable
    torch.testing.assert_close(g, torch.exp(x)[i])
    x = torch.randn(1001, device=DEVICE)[1:]  # a misaligned input: Triton's launcher
    torch.testing.assert_close(program(x, i)[0], torch.exp(x))


def test_a_constant_tensor_lives_on_the_programs_device() -> None:
    # a constant index list is made by an extern ``torch.tensor`` call, on the CPU: the runtime
    # moves it to the program's device (on a GPU the kernel would otherwise read host memory)
    text = """func @f(%x: f32[5, 4]) -> (f32[2, 4]) {
  %c = constant {value = [1, 3]} : i64[2]
  %r = index_select %x, %c {dim = 0} : f32[2, 4]
  return %r
}"""
    check(text)


class _FakeCuda:
    """The CUDA driver entry points :class:`~fir.backends.runtime.triton_launch._Driver` calls, faked:
    device N's primary context is the handle 1000 + N, device 0's is current at first, and a
    kernel (its handle that of its context, here) launches only where its context is current."""

    def __init__(self) -> None:
        import ctypes

        self.ctypes = ctypes
        self.current = 1000
        self.set_to: list[int] = []
        self.launched_in: list[int] = []

    def cuDeviceGet(self, out: object, ordinal: int) -> int:  # noqa: N802
        ct = self.ctypes
        ct.cast(out, ct.POINTER(ct.c_int))[0] = ordinal
        return 0

    def cuDevicePrimaryCtxRetain(self, out: object, device: int) -> int:  # noqa: N802
        ct = self.ctypes
        ct.cast(out, ct.POINTER(ct.c_void_p))[0] = 1000 + device
        return 0

    def cuCtxGetCurrent(self, out: object) -> int:  # noqa: N802
        ct = self.ctypes
        ct.cast(out, ct.POINTER(ct.c_void_p))[0] = self.current
        return 0

    def cuCtxSetCurrent(self, ctx: object) -> int:  # noqa: N802
        self.current = int(ctx.value or 0)  # type: ignore[attr-defined]
        self.set_to.append(self.current)
        return 0

    def launch(self, function: int, *rest: object) -> int:
        if self.current != function:
            return 400  # CUDA_ERROR_INVALID_HANDLE
        self.launched_in.append(self.current)
        return 0


def test_modules_load_into_the_context_of_their_device() -> None:
    """A compile thread whose current context is device 0's (the CUDA runtime makes it on a new
    thread) must load a program for device 1 into device 1's primary context: rank 1 of a
    tensor-parallel job failed its first launch with CUDA_ERROR_INVALID_HANDLE. The driver is
    faked: no GPU here."""
    import threading

    from fir.backends.runtime.triton_launch import _Driver

    d = object.__new__(_Driver)
    d.lib = _FakeCuda()  # type: ignore[assignment]
    d.primary, d.primary_lock = {}, threading.Lock()
    d.make_current(1)
    assert d.lib.set_to == [1001]  # type: ignore[attr-defined]
    d.make_current(1)  # already current: nothing to do
    d.make_current(0)
    assert d.lib.set_to == [1001, 1000]  # type: ignore[attr-defined]


def test_the_device_is_resolved_on_the_compiling_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """The caller's ``torch.cuda.set_device`` holds on its own thread only; the compile pool's
    threads start on device 0. Rank 1 of a tensor-parallel job (device "cuda", current device
    1) compiled its kernels for device 0 and failed its first launch. Faked: no GPU here."""
    import threading

    from fir.backends.registry import backend_named
    from fir.backends.runtime import triton_launch
    from fir.backends.triton import build, build_program

    main = threading.get_ident()
    loaded: list[tuple[str, int]] = []

    def device_of(device: str) -> tuple[int, tuple[int, int]]:
        return (1 if threading.get_ident() == main else 0), (9, 0)

    class FakeCubin:
        def __init__(self, name: str, compiled: object, kinds: list[str], pointers: int,
                     ordinal: int) -> None:  # fmt: skip
            loaded.append((name, ordinal))

    def compile_kernel(*args: object, **kwargs: object) -> tuple[None, list[str]]:
        return None, []

    monkeypatch.setattr(triton_launch, "device_of", device_of)
    monkeypatch.setattr(build, "compile_kernel", compile_kernel)
    monkeypatch.setattr(build, "CubinKernel", FakeCubin)
    text = "func @f(%x: f32[8, 16]) -> (f32[8], f32[16]) {\n"
    text += "  %r = sum %x {dims = [1]} : f32[8]\n  %c = sum %x {dims = [0]} : f32[16]\n"
    text += "  return %r, %c\n}\n"
    graph = parse_pipeline("fusion").run(parse_module(text, "<test>")).funcs[0]
    plan = backend_named("triton").plan(graph)
    kernels = build_program(plan, "cuda")
    assert kernels.ordinal == 1
    assert len(loaded) == 2 and all(ordinal == 1 for _, ordinal in loaded), loaded


def test_a_launch_from_another_devices_thread_runs_in_the_kernels_context() -> None:
    """A kernel loaded into device 1's context, launched from a thread whose current context
    is device 0's: the driver refuses the handle; the launch is retried in device 1's context
    and the thread gets device 0's back. Faked driver: no GPU here."""
    import threading

    from fir.backends.runtime.triton_launch import CubinKernel, _Driver

    d = object.__new__(_Driver)
    fake = _FakeCuda()
    d.lib, d.launch = fake, fake.launch  # type: ignore[assignment]
    d.primary, d.primary_lock = {}, threading.Lock()
    k = object.__new__(CubinKernel)
    k.name, k.ordinal, k.driver, k.function = "add", 1, d, 1001
    k.block, k.shared, k.params, k.lock = 128, 0, None, threading.Lock()
    k.slots = []
    k.fixed_arguments()
    k.launch([], [], (1, 1, 1), 0)
    assert fake.launched_in == [1001]
    assert fake.current == 1000  # the thread's own context again


def test_compile_options_fix_what_triton_versions_default_differently(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Subnormals kept, multiply-adds fused (Triton 3.9 warns that 3.10 stops fusing by
    default): FIR's kernels compute the same on every Triton that has the options."""
    from fir.backends.triton.helpers import _launch_options
    from triton.backends.nvidia.compiler import CUDAOptions

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    fields = CUDAOptions.__dataclass_fields__
    options = _launch_options()
    assert options.get("enable_fp_fusion", True) is True
    assert ("enable_fp_fusion" in options) == ("enable_fp_fusion" in fields)
    assert ("enable_reflect_ftz" in options) == ("enable_reflect_ftz" in fields)


def test_gather_by_a_proven_index_has_no_check() -> None:
    # T5's relative-position bucket, [0, 29] into a 32-row table: bound without a check (no
    # error argument at all), and the same values as the interpreter; 29 rows keep the check
    from t5_bucket import bucket_program

    (program,) = check(bucket_program(realized=True), inputs=[torch.randn(32, 2)])
    source = program.kernels.source  # type: ignore[attr-defined]
    assert "fir_err" not in source
    (short,) = compile_text(bucket_program(rows=29, realized=True))
    assert "fir_err" in short.kernels.source  # type: ignore[attr-defined]
    with pytest.raises(KernelIndexError):
        short(torch.randn(29, 2).to(DEVICE))
        short.synchronize()  # type: ignore[attr-defined]  # a GPU reports at the next call


def test_the_renderer_has_a_handler_for_every_instruction() -> None:
    from fir.backends.plan.instructions import missing_handlers
    from fir.backends.triton.render import _Writer

    assert missing_handlers(_Writer) == []


TRACED_ROWS = """
func @softmax_rows(%x: f32[s0, s1]) -> (f32[s0, s1]) attributes {size_hints = [["s0", 6], ["s1", 24]]} {
  %s = softmax %x {dim = -1} : f32[s0, s1]
  return %s
}
"""


@pytest.mark.parametrize("s0, s1", [(6, 24), (5, 40), (3, 100), (7, 1)])
def test_a_row_of_symbolic_length_loops_in_blocks_sized_at_its_traced_length(
    s0: int, s1: int
) -> None:
    """Several rows a program in blocks of the traced length (32 here), looping where a row
    is longer: rows shorter, equal and longer than the block give the interpreter's values."""
    (p,) = check(TRACED_ROWS, sizes={"s0": s0, "s1": s1}, atol=1e-6)
    assert "XBLOCK=32, RBLOCK=32 looped" in p.kernels.source  # type: ignore[attr-defined]
