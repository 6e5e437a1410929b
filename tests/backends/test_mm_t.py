"""``fir::mm_t`` (``a @ w.T`` into dense rows): its definition, its Triton kernel (in Triton's
interpreter here, compiled for sm_90 offline; timed on an H200 in docs/benchmarks/gemm-padding.md)
and a program that ``pad-matmul`` sends to it, compiled for the Triton back end."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

GPU = torch.cuda.is_available()
if not GPU and os.environ.get("TRITON_INTERPRET") != "1":  # conftest.py sets it
    pytest.skip("no GPU, and Triton was not imported in interpreter mode", allow_module_level=True)
DEVICE = "cuda" if GPU else "cpu"

from fir.backends.compile import compile_function  # noqa: E402
from fir.backends.runtime import fir_ops_cuda, triton_matmul  # noqa: E402
from fir.ir.externs import resolve_callee  # noqa: E402
from fir.ir.interpreter import run_graph  # noqa: E402
from fir.ir.parser import parse_module  # noqa: E402
from fir.passes.pipeline import parse_pipeline  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from triton_offline import run_offline  # noqa: E402

# Triton's interpreter reads bf16 tensor descriptors wrongly (garbage for every element, where
# f16 agrees); the GPU computes bf16 (checked on an H200): f16 here
DTYPE = torch.float16 if not GPU else torch.bfloat16


def _operands(m: int, n: int, k: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g).to(DTYPE).to(DEVICE)
    w = torch.randn(n, k, generator=g).to(DTYPE).to(DEVICE)
    return a, w


def _reference(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return (a.double() @ w.double().t()).to(a.dtype)


def test_definition_is_a_times_w_transposed_in_dense_rows() -> None:
    mm_t = resolve_callee("fir.mm_t.default")
    a, w = torch.randn(5, 24), torch.randn(7, 24)
    out = mm_t(a, w)
    assert out.stride() == (7, 1)
    torch.testing.assert_close(out, a @ w.t())


@pytest.mark.parametrize(("m", "n", "k"), [(200, 301, 64), (40, 77, 96), (1, 9, 8)])
def test_kernel_matches_the_definition(m: int, n: int, k: int) -> None:
    """Edges in every dimension: rows and columns past the last whole tile (masked stores), an
    inner dimension past the last whole step (TMA fills zeros), a row of one element; two
    programs walk more tiles than there are programs."""
    a, w = _operands(m, n, k)
    assert fir_ops_cuda.fits(a, w)
    out = triton_matmul.mm_t(a, w, programs=2)
    assert out.shape == (m, n) and out.stride() == (n, 1)
    torch.testing.assert_close(out, _reference(a, w), atol=2e-2, rtol=2e-2)


def test_operands_the_kernel_does_not_take_use_the_definition() -> None:
    a, w = _operands(16, 33, 64)
    assert not fir_ops_cuda.fits(a.float(), w.float())  # f32: cuBLAS's, in full f32
    assert not fir_ops_cuda.fits(a.t().contiguous().t(), w)  # columns not contiguous
    assert not fir_ops_cuda.fits(
        a[:, :60].contiguous(), w[:, :60].contiguous()
    )  # rows of 120 bytes
    assert not fir_ops_cuda.fits(a, w.to(torch.float32))
    for x, y in ((a.float(), w.float()), (a[:, :60].contiguous(), w[:, :60].contiguous())):
        out = fir_ops_cuda._mm_t_cuda(x, y)
        assert out.is_contiguous()
        torch.testing.assert_close(out, x @ y.t())


def test_empty_products() -> None:
    a, w = _operands(0, 5, 16)
    assert triton_matmul.mm_t(a, w).shape == (0, 5)


LM_HEAD = """
func @lm(%x: f16[2, 24, 64], %w: f16[1001, 64]) -> (f16[2, 24, 1001]) {
  %wt = transpose %w {dim0 = 0, dim1 = 1} : f16[64, 1001]
  %y = matmul %x, %wt : f16[2, 24, 1001]
  return %y
}
"""


def test_a_returned_lm_head_compiles_to_mm_t() -> None:
    """The Triton back end's pipeline (small ``min-macs``) sends the product to ``fir.mm_t``;
    the compiled program returns eager's dense rows and agrees with the interpreter."""
    module = parse_pipeline("pad-matmul{min-macs=0},cuda").run(parse_module(LM_HEAD, "<test>"))
    g = module.funcs[0]
    assert any(getattr(n, "callee", "") == "fir.mm_t.default" for n in g.nodes)
    g0 = torch.Generator().manual_seed(1)
    x = torch.randn(2, 24, 64, generator=g0).half()
    w = torch.randn(1001, 64, generator=g0).half()
    (want,) = run_graph(parse_module(LM_HEAD, "<test>").funcs[0], [x, w])
    fn = compile_function(g, "triton", device=DEVICE)
    (got,) = fn(x.to(DEVICE), w.to(DEVICE))
    assert got.stride() == (24 * 1001, 1001, 1)
    torch.testing.assert_close(got.cpu(), want, atol=2e-2, rtol=2e-2)


READ_HEAD = """
func @lm(%x: f16[48, 64], %w: f16[1001, 64]) -> (f16[48, 1001]) {
  %wt = transpose %w {dim0 = 0, dim1 = 1} : f16[64, 1001]
  %y = matmul %x, %wt : f16[48, 1001]
  %r = relu %y : f16[48, 1001]
  return %r
}
"""


def test_a_product_of_few_rows_that_a_kernel_reads_takes_mm_t_too() -> None:
    """A decoding step's LM head (few rows) read by a kernel: ``fir.mm_t`` writes the dense
    rows the kernel then reads; the compiled program agrees with the interpreter."""
    module = parse_pipeline("pad-matmul{min-macs=0},cuda").run(parse_module(READ_HEAD, "<test>"))
    g = module.funcs[0]
    assert any(getattr(n, "callee", "") == "fir.mm_t.default" for n in g.nodes)
    g0 = torch.Generator().manual_seed(2)
    x = torch.randn(48, 64, generator=g0).half()
    w = torch.randn(1001, 64, generator=g0).half()
    (want,) = run_graph(parse_module(READ_HEAD, "<test>").funcs[0], [x, w])
    (got,) = compile_function(g, "triton", device=DEVICE)(x.to(DEVICE), w.to(DEVICE))
    torch.testing.assert_close(got.cpu(), want, atol=2e-2, rtol=2e-2)


SM90 = """
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from fir.backends.runtime import triton_matmul as tm
sig = {"a_desc": "tensordesc<bf16[%d,%d]>" % (tm.BLOCK_M, tm.BLOCK_K),
       "w_desc": "tensordesc<bf16[%d,%d]>" % (tm.BLOCK_N, tm.BLOCK_K),
       "c": "*bf16", "M": "i32", "N": "i32", "K": "i32", "stride_cm": "i32"}
const = {"BM": tm.BLOCK_M, "BN": tm.BLOCK_N, "BK": tm.BLOCK_K, "GM": tm.GROUP_M, "PROGRAMS": 132}
sig |= {n: "constexpr" for n in const}
k = triton.compile(ASTSource(tm._mm_t_kernel, sig, constexprs=const), target=GPUTarget("cuda", 90, 32),
                   options={"num_warps": tm.WARPS, "num_stages": tm.STAGES})
ptx = k.asm["ptx"]
print("wgmma" in ptx, "cp.async.bulk.tensor" in ptx)
"""


def test_kernel_compiles_for_sm_90_with_wgmma_and_tma() -> None:
    """Compiled for an H100/H200 without one: the product on the tensor cores' warpgroup
    instructions (wgmma), the operands read by TMA."""
    assert run_offline(SM90, "").split() == ["True", "True"]
