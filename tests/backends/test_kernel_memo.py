"""Kernels the same up to their names compile once (``backends/runtime/triton_kernel_memo.py``):
the canonical source, the memo under threads, and real ``triton.compile`` calls for sm_90 (no GPU
needed) counting what a program's warm-up compiles."""

from __future__ import annotations

import threading
import time

import pytest
from fir.backends.runtime.triton_kernel_memo import CompileMemo, canonical_source
from triton_offline import run_offline

KERNEL = """
@triton.jit
def kernel_{name}(p_{a}, p_{b}, XBLOCK: tl.constexpr):
    # pointwise: XBLOCK=1024, num_warps=4
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    x0 = xindex
    v_{a}_0 = tl.load(p_{a} + (x0), mask=xindex < 2048, other=0)
    v_{a}_1 = {op}v_{a}_0
    tl.store(p_{b} + (x0), v_{a}_1, mask=xindex < 2048)
"""


def test_names_do_not_count() -> None:
    one = canonical_source(KERNEL.format(name="k0", a="x", b="y", op="-"))
    two = canonical_source(KERNEL.format(name="k7", a="h_3", b="out", op="-"))
    assert one == two
    assert "p_x" not in one and "kernel_k0" not in one and "#" not in one
    # globals keep their names: the same shape with another operation is another kernel
    assert "tl.load" in one
    assert canonical_source(KERNEL.format(name="k0", a="x", b="y", op="~")) != one


def test_a_different_global_is_a_different_kernel() -> None:
    """A helper called in the same place is not renamed away: fir_exp against fir_log."""
    src = "def k(p, q):\n    v = {f}(tl.load(p))\n    tl.store(q, v)\n"
    assert canonical_source(src.format(f="fir_exp")) != canonical_source(src.format(f="fir_log"))


def test_a_helper_named_after_its_kernel_is_the_same_helper() -> None:
    """A reduction's merge function is named after the kernel (its body comes from the kind and
    dtype): two softmax layers share a binary, a max and a min do not."""
    src = "def {k}(p, q):\n    tl.store(q, tl.reduce(tl.load(p), 0, {k}_{kind}_f32))\n"
    one = canonical_source(src.format(k="kernel_k1", kind="max"))
    assert one == canonical_source(src.format(k="kernel_k13", kind="max"))
    assert one != canonical_source(src.format(k="kernel_k13", kind="min"))


def test_order_of_first_use_is_kept() -> None:
    """Swapping which parameter is loaded and which stored is a different kernel."""
    src = "def k(p, q):\n    tl.store({s}, tl.load({l}))\n"
    assert canonical_source(src.format(s="q", l="p")) != canonical_source(src.format(s="p", l="q"))


def test_memo_compiles_each_key_once_under_threads() -> None:
    memo = CompileMemo()
    calls: list[str] = []
    lock = threading.Lock()

    def compile_fn(key: str) -> object:
        with lock:
            calls.append(key)
        time.sleep(0.05)  # the others arrive while the first compiles
        return object()

    results: dict[int, object] = {}

    def ask(i: int) -> None:
        key = "ab"[i % 2]
        results[i] = memo.get(key, lambda: compile_fn(key))

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(calls) == ["a", "b"]
    assert memo.compiles == 2 and memo.reused == 6
    assert len({id(results[i]) for i in range(0, 8, 2)}) == 1
    assert results[0] is not results[1]


def test_a_failed_compile_fails_every_asker() -> None:
    memo = CompileMemo()

    def boom() -> object:
        raise ValueError("no")

    for _ in range(2):
        with pytest.raises(ValueError):
            memo.get("k", boom)
    assert memo.compiles == 1


# two normalisation layers that are the same up to names, one in f16; three negations of which
# two are f32 and one i32 (the same source, other pointer types); two softmax layers
PROGRAM = """
func @layers(%x: f32[32, 64], %w: f32[64], %v: f32[64], %m: f32[64, 64], %h: f16[32, 64],
             %u: f32[32, 64], %i: i32[32, 64], %q: f32[32, 64])
             -> (f32[32, 64], f16[32, 64], f32[32, 64], i32[32, 64], f32[32, 64]) {
  %sq = mul %x, %x : f32[32, 64]
  %ms = mean %sq {dims = [1], keepdim = true} : f32[32, 1]
  %r = rsqrt %ms : f32[32, 1]
  %n = mul %x, %r : f32[32, 64]
  %y = mul %n, %w : f32[32, 64]
  %z = matmul %y, %m : f32[32, 64]
  %sq2 = mul %z, %z : f32[32, 64]
  %ms2 = mean %sq2 {dims = [1], keepdim = true} : f32[32, 1]
  %r2 = rsqrt %ms2 : f32[32, 1]
  %n2 = mul %z, %r2 : f32[32, 64]
  %y2 = mul %n2, %v : f32[32, 64]
  %sqh = mul %h, %h : f16[32, 64]
  %msh = mean %sqh {dims = [1], keepdim = true} : f16[32, 1]
  %rh = rsqrt %msh : f16[32, 1]
  %nh = mul %h, %rh : f16[32, 64]
  %a = neg %u : f32[32, 64]
  %za = matmul %a, %m : f32[32, 64]
  %b = neg %za : f32[32, 64]
  %c = neg %i : i32[32, 64]
  %sa = softmax %q {dim = -1} : f32[32, 64]
  %zs = matmul %sa, %m : f32[32, 64]
  %sb = softmax %zs {dim = -1} : f32[32, 64]
  return %y2, %nh, %b, %c, %sb
}
"""

SM90_MEMO = """
import sys
from fir.backends.plan import plan_module
from fir.backends.triton.build import compile_kernel, load_module, module_path
from fir.backends.runtime.triton_kernel_memo import CompileMemo
from fir.backends.triton.render import jit_name, render_program
from fir.ir.parser import parse_module
from fir.passes.pipeline import parse_pipeline

# the cuda pipeline without fuse{small-kernels}, which would join these small layers into
# one kernel: each layer stays a kernel of its own, so equal layers can share a binary
PIPELINE = (
    "decompose,pad-matmul,cse,lower,unroll-reductions,inline,split-reductions,deps,dce,"
    "fuse,reorder,plan-memory"
)
module = parse_pipeline(PIPELINE).run(parse_module(sys.stdin.read(), "<test>"))
(plan,) = plan_module(module)
source, configs = render_program(plan)
generated = load_module(module_path(source))
memo = CompileMemo()
binaries = {}
for k in plan.kernels():
    cfg, fails = configs[k.name]
    fn = getattr(generated, jit_name(k.name))
    compiled, kinds = compile_kernel(k, cfg, fails, fn, 90, memo=memo)
    binaries[k.name] = compiled
    print("kernel", k.name, compiled.metadata.name, " ".join(k.members))
print("compiles", memo.compiles, "reused", memo.reused)
"""


def test_a_program_compiles_each_distinct_kernel_once() -> None:
    """Through ``compile_kernel`` as the warm-up calls it: the two f32 layers share a binary,
    the f16 layer does not; the two f32 negations share one, the i32 negation does not."""
    pytest.importorskip("triton")
    stdout = run_offline(SM90_MEMO, PROGRAM)
    lines = stdout.splitlines()
    binary = {}
    for line in lines:
        if line.startswith("kernel "):
            _, name, entry, *members = line.split()
            binary[frozenset(members)] = entry
    by_member = {m: entry for members, entry in binary.items() for m in members}
    assert by_member["y"] == by_member["y2"]  # the f32 layers
    assert by_member["nh"] != by_member["y"]  # f16
    assert by_member["a"] == by_member["b"]  # f32 negations
    assert by_member["c"] != by_member["a"]  # i32
    assert by_member["sa"] == by_member["sb"]  # softmax layers (each with its max's merge)
    assert lines[-1] == f"compiles {len(binary) - 3} reused 3", stdout
