"""Triton kernels over symbolic sizes (``dynamic=True``) as fast as static ones.

* **Index width**: int32 where the sizes of a launch allow it, int64 where they do not
  (``block_schedule.index_width``, ``block_schedule.needs_index64``). A kernel over symbolic sizes used to
  compute every index in int64 whatever the sizes. It now takes ``INDEX64`` as a constant and
  each launch picks the variant its sizes need.
* **Tiles**: a transposed copy over a symbolic size is tiled like a static one, with every tile
  on the grid's first axis (``flat_grid``: the other axes hold 65,535 programs at most). It was
  a pointwise kernel: BERT's transposed key at 256 tokens took 22.8 us a layer, 3.1 tiled.

Everything runs here in Triton's interpreter (CI has no GPU) and compiles for sm_90.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
# the Triton tests' device (a GPU, else Triton's interpreter) and their skip where neither runs
from fir.backends.compile import compile_function  # noqa: E402
from fir.backends.plan import plan_module  # noqa: E402
from fir.backends.plan.block_schedule import (  # noqa: E402
    block_schedule,
    index_width,
    keeps_rows,
    needs_index64,
)
from fir.backends.triton.render import render_program  # noqa: E402
from fir.ir.interpreter import run_graph  # noqa: E402
from fir.ir.parser import parse_module  # noqa: E402
from fir.passes.pipeline import parse_pipeline  # noqa: E402
from test_triton import DEVICE, GPU  # noqa: E402
from triton_offline import run_offline  # noqa: E402

# a broadcast over symbolic sizes: the flat index splits by a product of them (64-bit
# divisions when int64), and a reduction whose row length is symbolic
SYMBOLIC = """
func @f(%x: f32[s0, s1, 3], %b: f32[s1, 3]) -> (f32[s0, s1, 3], f32[s0]) {
  %y = add %x, %b : f32[s0, s1, 3]
  %z = mul %y, 2.0 : f32[s0, s1, 3]
  %s = sum %x {dims = [1, 2]} : f32[s0]
  return %z, %s
}
"""

POINTWISE = """
func @p(%x: f32[s0, s1, 3], %b: f32[s1, 3]) -> (f32[s0, s1, 3]) {
  %y = add %x, %b : f32[s0, s1, 3]
  return %y
}
"""

# a transpose over symbolic sizes, with a tail tile in both directions at most sizes
TRANSPOSED = """
func @t(%x: f32[s0, s1, s2], %b: f32[s1]) -> (f32[s0, s2, s1]) {
  %t = transpose %x {dim0 = 1, dim1 = 2} : f32[s0, s2, s1]
  %y = add %t, %b : f32[s0, s2, s1]
  return %y
}
"""

STATIC = """
func @g(%x: f32[4, 5], %b: f32[5]) -> (f32[4, 5]) {
  %y = add %x, %b : f32[4, 5]
  return %y
}
"""

HUGE = """
func @h(%x: f32[65536, 32768]) -> (f32[65536, 32768]) {
  %y = mul %x, 2.0 : f32[65536, 32768]
  return %y
}
"""


def plans(text: str) -> list:
    module = parse_pipeline("cuda").run(parse_module(text, "<test>"))
    return [k for p in plan_module(module, scratch_rows=keeps_rows) for k in p.kernels()]


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIR_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "fir-cache"))


def test_the_width_follows_the_extents() -> None:
    assert {index_width(k) for k in plans(STATIC)} == {"32"}
    assert {index_width(k) for k in plans(HUGE)} == {"64"}
    assert {index_width(k) for k in plans(SYMBOLIC)} == {"sizes"}


def test_only_kernels_of_symbolic_extent_take_the_constant() -> None:
    static = parse_pipeline("cuda").run(parse_module(STATIC, "<t>"))
    source, _ = render_program(plan_module(static, scratch_rows=keeps_rows)[0])
    assert "INDEX64" not in source and "tl.int64" not in source
    symbolic = parse_pipeline("cuda").run(parse_module(SYMBOLIC, "<t>"))
    source, _ = render_program(plan_module(symbolic, scratch_rows=keeps_rows)[0])
    assert source.count("INDEX64: tl.constexpr") == len(plans(SYMBOLIC))
    assert "index64=True" in source  # a launch that does not know the sizes is safe


def test_the_launch_decides_by_its_sizes() -> None:
    (k,) = plans(POINTWISE)
    wide = needs_index64(k)
    position = {s: n for n, s in enumerate(k.sizes)}
    small = [0, 0]
    small[position["s0"]], small[position["s1"]] = 4, 7
    assert not wide(small)
    big = [0, 0]
    # 3 * s0 * s1 elements: 2**31 / 3 rounded up makes it 2**31 or more
    big[position["s0"]], big[position["s1"]] = 1, -(-(2**31) // 3)
    assert wide(big)
    below = [0, 0]
    below[position["s0"]], below[position["s1"]] = 1, (2**31 - 1) // 3
    assert not wide(below)


@pytest.mark.parametrize("index64", [False, True], ids=["int32", "int64"])
@pytest.mark.parametrize("s0, s1", [(1, 1), (3, 17), (2, 64)])
def test_both_variants_compute_the_same(
    index64: bool, s0: int, s1: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = parse_pipeline("cuda").run(parse_module(SYMBOLIC, "<test>"))
    program = compile_function(module.funcs[0], "triton", device=DEVICE)
    kernels = program.kernels
    assert set(kernels.index64_at) == {k.name for k in program.plan.kernels()}
    for name in kernels.index64_at:  # every launch takes the variant under test
        kernels.index64_at[name] = lambda sizes, w=index64: w
    reference = parse_module(SYMBOLIC, "<test>").funcs[0]
    g = torch.Generator().manual_seed(s0 * 100 + s1)
    xs = [torch.randn(s0, s1, 3, generator=g), torch.randn(s1, 3, generator=g)]
    want = run_graph(reference, [x.clone() for x in xs])
    got = program(*[x.to(DEVICE) for x in xs])
    for w, o in zip(want, got):
        torch.testing.assert_close(o.cpu(), w, rtol=1e-5, atol=1e-5)


# run without the interpreter (where ``triton.jit`` makes no compilable function): the two
# variants of each kernel through the driver launch's compile, and a size of 1 as Triton's own
# launcher passes it (a constant) through the int64 variant
SM90_CHECK = """
import sys, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from fir.backends.plan import plan_module
from fir.backends.plan.block_schedule import keeps_rows
from fir.backends.plan.program import shared_storage
from fir.backends.triton.build import compile_kernel, load_module, module_path
from fir.backends.triton.render import jit_name, render_program
from fir.ir.parser import parse_module
from fir.passes.pipeline import parse_pipeline

module = parse_pipeline("cuda").run(parse_module(sys.stdin.read(), "<test>"))
for plan in plan_module(module, scratch_rows=keeps_rows):
  source, configs = render_program(plan)
  generated = load_module(module_path(source))
  for k in plan.kernels():
      cfg, fails = configs[k.name]
      fn = getattr(generated, jit_name(k.name))
      narrow, kinds32 = compile_kernel(k, cfg, fails, fn, 90, index64=False)
      wide, kinds64 = compile_kernel(k, cfg, fails, fn, 90, index64=True)
      assert kinds32.count("i") == len(k.sizes) and "l" not in kinds32, kinds32
      assert kinds64.count("l") == len(k.sizes) and "i" not in kinds64, kinds64
      ptx32, ptx64 = narrow.asm["ptx"], wide.asm["ptx"]
      assert "div.s64" not in ptx32 and "rem.s64" not in ptx32 and "mul.lo.s64" not in ptx32
      assert "s64" in ptx64
      names = list(fn.arg_names)
      pointers = len(k.args) + fails
      signature = {n: "*fp32" for n in names[: len(k.args)]}
      signature |= {n: "*i64" for n in names[len(k.args) : pointers]}
      constants = {n: 1 for n in names[pointers : pointers + len(k.sizes)]}
      constants |= {b: getattr(cfg, b) for b in cfg.blocks()} | {"INDEX64": True}
      signature |= {n: "constexpr" for n in constants}
      triton.compile(ASTSource(fn, signature, constexprs=constants), target=GPUTarget("cuda", 90, 32))
      print("ok", k.name)
"""


def test_both_variants_compile_for_sm_90() -> None:
    """The int32 variant takes its sizes as ``i32`` (no 64-bit index arithmetic in its PTX),
    the int64 one as ``i64``; a size of 1, which Triton's launcher passes as a constant,
    still compiles in the int64 variant (it is converted with ``tl.cast``)."""
    stdout = run_offline(SM90_CHECK, SYMBOLIC + TRANSPOSED)
    assert stdout.count("ok ") == len(plans(SYMBOLIC + TRANSPOSED))


def test_a_launch_below_the_limit_takes_int32() -> None:
    """The launch passes the width its sizes need (Triton's launcher here; the driver launch
    picks the cubin the same way, :meth:`KernelLaunches.cubin`)."""
    module = parse_pipeline("cuda").run(parse_module(SYMBOLIC, "<test>"))
    program = compile_function(module.funcs[0], "triton", device=DEVICE)
    kernels = program.kernels
    kernels.variants_at.clear()  # the kernels' own launchers (persistent variants: below)
    seen: list[bool] = []
    for name, launch in list(kernels.launchers.items()):

        def recording(
            args: Any, sizes: Any, err: Any, index64: bool = True, launch: Any = launch
        ) -> Any:
            seen.append(index64)
            return launch(args, sizes, err, index64=index64)

        kernels.launchers[name] = recording
        kernels.cubins.pop(name, None)  # through Triton's launcher on a GPU too
    program(torch.randn(2, 5, 3, device=DEVICE), torch.randn(5, 3, device=DEVICE))
    assert seen and not any(seen)
    kernels.index64_at = {name: (lambda sizes: True) for name in kernels.index64_at}
    seen.clear()
    program(torch.randn(2, 5, 3, device=DEVICE), torch.randn(5, 3, device=DEVICE))
    assert seen and all(seen)


def test_a_transpose_over_symbolic_sizes_is_tiled_on_one_grid_axis() -> None:
    (k,) = plans(TRANSPOSED)
    cfg = block_schedule(k)
    assert cfg.kind == "tiled" and cfg.flat_grid, cfg.text()
    assert "flat" in cfg.text()
    (static,) = plans(TRANSPOSED.replace("s0", "2").replace("s1", "300").replace("s2", "200"))
    assert not block_schedule(static).flat_grid  # static sizes keep the three-axis grid


@pytest.mark.parametrize("s0, s1, s2", [(1, 1, 1), (2, 130, 70), (3, 64, 64), (1, 5, 200)])
def test_flat_tiles_compute_every_element(s0: int, s1: int, s2: int) -> None:
    """Tail tiles in both directions, one tile, tiles that wrap to the next batch entry."""
    module = parse_pipeline("cuda").run(parse_module(TRANSPOSED, "<test>"))
    program = compile_function(module.funcs[0], "triton", device=DEVICE)
    assert "flat" in program.kernels.source
    reference = parse_module(TRANSPOSED, "<test>").funcs[0]
    g = torch.Generator().manual_seed(s0 + s1 + s2)
    xs = [torch.randn(s0, s1, s2, generator=g), torch.randn(s1, generator=g)]
    (want,) = run_graph(reference, [x.clone() for x in xs])
    (got,) = program(*[x.to(DEVICE) for x in xs])
    torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0)


def test_an_int64_variant_that_does_not_compile_is_tried_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where the driver launch cannot take the int64 variant, Triton's launcher runs it: the
    compile is not tried again at every launch. Faked: no GPU here."""
    from fir.backends.registry import backend_named
    from fir.backends.runtime import triton_launch
    from fir.backends.triton import build

    tried: list[bool] = []

    def compile_kernel(*args: Any, index64: bool = True, **kwargs: Any) -> tuple[None, list[str]]:
        tried.append(index64)
        if index64:
            raise RuntimeError("no int64 variant here")
        return None, []

    class FakeCubin:
        def __init__(self, *args: Any) -> None:
            pass

    monkeypatch.setattr(triton_launch, "device_of", lambda device: (0, (9, 0)))
    monkeypatch.setattr(build, "compile_kernel", compile_kernel)
    monkeypatch.setattr(build, "CubinKernel", FakeCubin)
    graph = parse_pipeline("cuda").run(parse_module(POINTWISE, "<test>")).funcs[0]
    kernels = build.build_program(backend_named("triton").plan(graph), "cuda")
    (name,) = kernels.index64_at
    assert tried == [False] and name in kernels.cubins
    assert kernels.wide_cubin(name) is None
    assert kernels.wide_cubin(name) is None
    assert tried == [False, True] and "no int64 variant" in kernels.not_direct[name]


# a softmax over rows of symbolic length, traced at 96 (as a dynamic BERT's attention)
ROWS = """
func @softmax_rows(%x: f32[s0, s1], %b: f32[s1]) -> (f32[s0, s1]) attributes {size_hints = [["s0", 512], ["s1", 96]]} {
  %y = add %x, %b : f32[s0, s1]
  %s = softmax %y {dim = -1} : f32[s0, s1]
  return %s
}
"""


def test_a_launch_whose_rows_fit_takes_a_persistent_variant() -> None:
    """The looped softmax's launches at 5, 96, 200 and 300 a row take persistent variants
    (RBLOCK the power of two the row rounds up to), one at 9000 the looped kernel itself;
    all compute softmax. On a GPU each variant is compiled for the driver launch."""
    module = parse_pipeline("cuda").run(parse_module(ROWS, "<test>"))
    program = compile_function(module.funcs[0], "triton", device=DEVICE)
    kernels = program.kernels
    (name,) = kernels.variants_at
    assert not kernels.configs[name].persistent
    for n, rblock in ((5, 8), (96, 128), (200, 256), (300, 512), (9000, None)):
        g = torch.Generator().manual_seed(n)
        x, b = torch.randn(7, n, generator=g), torch.randn(n, generator=g)
        (y,) = program(x.to(DEVICE), b.to(DEVICE))
        torch.testing.assert_close(y.cpu(), torch.softmax(x + b, -1), rtol=1e-5, atol=1e-6)
        variant = kernels.variant(name, [7, n])
        if rblock is None:
            assert variant is None
            continue
        assert variant is not None and variant.cfg.persistent and rblock == variant.cfg.RBLOCK
        if GPU:
            assert variant.cubin(False) is not None, kernels.variant_errors
    assert not kernels.variant_errors


VARIANT_SM90 = """
import sys
from fir.backends.plan import plan_module
from fir.backends.plan.block_schedule import block_schedule, keeps_rows, persistent_at_launch
from fir.backends.plan.program import shared_storage
from fir.backends.triton.build import compile_kernel, load_module, module_path
from fir.backends.triton.render import HEADER, jit_name, launcher, render_kernel
from fir.ir.parser import parse_module
from fir.passes.pipeline import parse_pipeline

module = parse_pipeline("cuda").run(parse_module(sys.stdin.read(), "<test>"))
(plan,) = plan_module(module, scratch_rows=keeps_rows)
(k,) = plan.kernels()
rule = persistent_at_launch(k, block_schedule(k))
for n in (96, 200, 8192):
    cfg = rule([512, n] if k.sizes == ["s0", "s1"] else [n, 512])
    source, cfg, fails = render_kernel(k, cfg, 0, shared_storage(plan, k))
    generated = load_module(module_path(HEADER + "\\n" + source + "\\n" + launcher(k, cfg, fails)))
    for index64 in (False, True):
        compiled, _ = compile_kernel(k, cfg, fails, getattr(generated, jit_name(k.name)), 90, index64=index64)
        assert compiled.metadata.name
    print("ok", n, cfg.text())
"""


def test_persistent_variants_compile_for_sm_90() -> None:
    """Each variant (rows of 96, 200 and 8192) lowers for an H100/H200, in both index
    widths, without a GPU."""
    stdout = run_offline(VARIANT_SM90, ROWS)
    assert stdout.count("persistent") == 3, stdout


def test_a_persistent_launch_keeps_what_later_passes_compute_again() -> None:
    """The looped softmax computes each exponential twice (for the sum, then for the output);
    its persistent variant renders the plan made for it (``KernelPlan.at_launch``), which keeps
    the first pass's exponentials in registers, as the static persistent kernel does."""
    module = parse_pipeline("cuda").run(parse_module(ROWS, "<test>"))
    program = compile_function(module.funcs[0], "triton", device=DEVICE)
    kernels = program.kernels
    (name,) = kernels.variants_at
    looped = kernels.render(name)[0]
    variant = kernels.variant(name, [7, 200])
    assert variant is not None and variant.plan.scratch
    persistent = kernels.render(name, variant.cfg, variant.plan)[0]
    assert looped.count("exp(") == 2 and persistent.count("exp(") == 1, persistent
    assert kernels.variants_made[name] == [variant]
    x, b = torch.randn(7, 200), torch.randn(200)
    (y,) = program(x.to(DEVICE), b.to(DEVICE))
    torch.testing.assert_close(y.cpu(), torch.softmax(x + b, -1), rtol=1e-5, atol=1e-6)


ALIGNED_SM90 = """
import sys
from fir.backends.plan.block_schedule import block_schedule, persistent_at_launch
from fir.backends.plan.program import shared_storage
from fir.backends.registry import backend_named
from fir.backends.triton.build import compile_kernel, load_module, module_path
from fir.backends.triton.render import HEADER, jit_name, launcher, render_kernel
from fir.ir.parser import parse_module
from fir.passes.pipeline import parse_pipeline

module = parse_pipeline("cuda").run(parse_module(sys.stdin.read(), "<test>"))
plan = backend_named("triton").plan(module.funcs[0])
(k,) = plan.kernels()
cfg = persistent_at_launch(k, block_schedule(k))([512, 256])
source, cfg, fails = render_kernel(k.at_launch, cfg, 0, shared_storage(plan, k))
generated = load_module(module_path(HEADER + "\\n" + source + "\\n" + launcher(k, cfg, fails)))
fn = getattr(generated, jit_name(k.name))
for aligned in (frozenset(), frozenset({k.sizes.index("s1")})):
    compiled, _ = compile_kernel(k.at_launch, cfg, fails, fn, 90, index64=False, aligned=aligned)
    ptx = compiled.asm["ptx"]
    print(len(aligned), ptx.count("ld.global.v4"), ptx.count("st.global.v4"))
"""


def test_a_variant_compiled_for_aligned_rows_reads_them_in_vectors() -> None:
    """A row of symbolic length starts anywhere: its loads and stores are 4 bytes wide. A
    variant made at a launch whose row length is a multiple of 16 declares that length so
    (``tt.divisibility``), and its PTX for sm_90 loads and stores 16-byte vectors."""
    lines = run_offline(ALIGNED_SM90, ROWS).split()
    plain, aligned = [int(v) for v in lines[:3]], [int(v) for v in lines[3:]]
    assert plain == [0, 0, 0] and aligned[0] == 1 and aligned[1] > 0 and aligned[2] > 0, lines
