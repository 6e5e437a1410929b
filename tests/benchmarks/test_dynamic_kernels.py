"""benchmarks/dynamic_kernels.py without a GPU: how it gives each kernel its time when kernels
share a binary (``backends/runtime/triton_kernel_memo.py``) and the profiler names only the
first."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

from dynamic_kernels import _per_kernel  # noqa: E402


def test_a_shared_binary_is_split_among_its_kernels() -> None:
    shared = SimpleNamespace(entry="kernel_k1")
    kernels = SimpleNamespace(
        order=["k1", "k2", "k3", "k4"],
        cubins={"k1": shared, "k2": SimpleNamespace(entry="kernel_k1"), "k4": None},
    )
    times = {"kernel_k1": 10.0, "kernel_k3": 4.0}
    # k3 has no cubin (Triton's launcher runs it under its own name), k4 never ran
    assert _per_kernel(kernels, times) == {"k1": 5.0, "k2": 5.0, "k3": 4.0, "k4": 0.0}
