"""``fir::mm_t`` on a GPU: ``a @ w.T`` written into dense rows of any length, in Triton.

cuBLAS runs its Hopper kernels only where every matrix's leading dimension is a multiple of 16
bytes; GPT-2's LM head writes ``[4096, 50257]`` bf16 rows of 100,514 bytes, for which it falls
back to an sm75 kernel (3.36 ms on an H200). ``pad-matmul`` pads such a product (0.56 ms with
the weight's padding), but a product the user gets back must then be copied into dense rows
(0.22 ms more in FIR's copy kernel, 0.42 ms in ATen's). This kernel writes the dense rows itself
(0.59 ms; docs/benchmarks/gemm-padding.md has the figures): the operands are read by the tensor-memory
accelerator (TMA), which needs only the operands aligned, and each tile of the product is
stored by ordinary masked stores, which take any row length.

It is a persistent kernel: one program per multiprocessor walks the output tiles in groups of
``GROUP_M`` tile rows, so that a group's tiles share the rows of ``a`` in L2. The tile shape
(128 x 256 x 64, 8 warps, 3 stages) is the best of the eight measured for the LM head's shape,
and of a Llama-style head's (``[2048, 2048] x [32001, 2048]``) as well.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M = 128, 256, 64, 8
WARPS, STAGES = 8, 3


@triton.jit
def _mm_t_kernel(
    a_desc,
    w_desc,
    c,
    M,
    N,
    K,
    stride_cm,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    GM: tl.constexpr,
    PROGRAMS: tl.constexpr,
):
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    steps = tl.cdiv(K, BK)
    group = GM * tiles_n
    for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, PROGRAMS, flatten=True):
        first_m = (tile // group) * GM
        rows_in_group = min(tiles_m - first_m, GM)
        pm = first_m + (tile % group) % rows_in_group
        pn = (tile % group) // rows_in_group
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(steps):
            x = a_desc.load([pm * BM, k * BK])
            y = w_desc.load([pn * BN, k * BK])
            acc = tl.dot(x, y.T, acc)
        rm = pm * BM + tl.arange(0, BM)
        rn = pn * BN + tl.arange(0, BN)
        mask = (rm[:, None] < M) & (rn[None, :] < N)
        out = c + rm[:, None] * stride_cm + rn[None, :]
        tl.store(out, acc.to(c.dtype.element_ty), mask=mask)


def mm_t(a: torch.Tensor, w: torch.Tensor, programs: int | None = None) -> torch.Tensor:
    """``a @ w.T`` as dense ``[M, N]`` rows; the operands must satisfy
    :func:`~fir.backends.runtime.fir_ops_cuda.fits`.
    ``programs``: how many persistent programs (default: the device's multiprocessors)."""
    m, k = a.shape
    n = w.shape[0]
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    if m == 0 or n == 0:
        return c
    if programs is None:
        programs = torch.cuda.get_device_properties(a.device).multi_processor_count
    tiles = triton.cdiv(m, BLOCK_M) * triton.cdiv(n, BLOCK_N)
    programs = max(1, min(programs, tiles))
    a_desc = TensorDescriptor.from_tensor(a, [BLOCK_M, BLOCK_K])
    w_desc = TensorDescriptor.from_tensor(w, [BLOCK_N, BLOCK_K])
    launch: Any = _mm_t_kernel[(programs,)]
    launch(
        a_desc,
        w_desc,
        c,
        m,
        n,
        k,
        c.stride(0),
        BM=BLOCK_M,
        BN=BLOCK_N,
        BK=BLOCK_K,
        GM=GROUP_M,
        PROGRAMS=programs,
        num_warps=WARPS,
        num_stages=STAGES,
    )
    return c
