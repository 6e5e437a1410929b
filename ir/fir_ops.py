"""FIR's own library operators, registered with PyTorch's dispatcher under the ``fir`` namespace.

A pass sometimes picks a library kernel that ATen does not have. It names it as any other
extern, ``extern "fir.mm_t.default"(%x, %w)``, so the choice is in the IR text, and the callee is
still an operator the dispatcher knows (:mod:`fir.ir.externs` allows nothing else): reading a
``.fir`` file never runs code it chooses.

Each operator's meaning is defined here once, by a portable implementation in ATen ops that
runs on any device (the interpreter's, and the runtime's where no faster kernel is registered).
A back end may register a faster kernel for a device (``CUDA``): it must compute the same
function, and the tests compare the two.

- ``fir::mm_t(Tensor a, Tensor w) -> Tensor``: ``a @ w.T`` for a matrix ``a`` ``[M, K]`` and a
  weight ``w`` ``[N, K]`` as it lies; the result is dense ``[M, N]`` (row stride ``N``).
  ``pad-matmul`` chooses it for a product returned to the user whose rows are not a multiple
  of 16 bytes (GPT-2's LM head, 50,257 columns), where cuBLAS has no fast kernel and the
  padded product would have to be copied into dense rows.
"""

from __future__ import annotations

import threading
from typing import Any

NAMESPACE = "fir"
_lock = threading.Lock()
_library: Any = None  # the torch.library.Library that holds the definitions (kept alive)


def mm_t_reference(a: Any, w: Any) -> Any:
    """``fir::mm_t``'s definition: ``a @ w.T`` in dense rows."""
    import torch

    return torch.mm(a, w.t()).contiguous()


def _mm_t_meta(a: Any, w: Any) -> Any:
    return a.new_empty((a.shape[0], w.shape[0]))


def define() -> Any:
    """Register the ``fir`` operators once per process (what resolving a ``fir.*`` callee
    does first); returns the library, to which a back end adds its device kernels."""
    global _library
    with _lock:
        if _library is None:
            import torch

            lib = torch.library.Library(NAMESPACE, "DEF")
            lib.define("mm_t(Tensor a, Tensor w) -> Tensor")
            lib.impl("mm_t", mm_t_reference, "CompositeExplicitAutograd")
            lib.impl("mm_t", _mm_t_meta, "Meta")
            _library = lib
        return _library
