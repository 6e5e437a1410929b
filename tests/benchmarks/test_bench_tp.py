"""benchmarks/bench_tp.py without GPUs: its whole logic (shard the block with PyTorch's
tensor-parallel API, compile it with Inductor and FIR on two ranks, time, profile, report) runs
on two CPU processes with gloo (``--cpu-smoke``), so that a broken benchmark is found here, not
in the scarce two-GPU time. Skipped only where torch.distributed or gloo is missing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch.distributed as dist

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_tp.py"


@pytest.mark.skipif(
    not (dist.is_available() and dist.is_gloo_available()), reason="no gloo backend"
)
def test_cpu_smoke_compiles_both_ranks_and_reports() -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--cpu-smoke",
            "--rounds",
            "1",
            "--steps",
            "2",
            "--profile",
            "--noise",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    rows = {line.split("|")[1].strip(): line for line in out.splitlines() if line.startswith("| ")}
    # one graph, no break, nothing handed back to PyTorch, the unsharded block's result
    for compiler in ("inductor", "fir"):
        cells = [c.strip() for c in rows[compiler].split("|")[1:-1]]
        assert cells[1] == "1 / 0, 1 / 0" and cells[2] == "0", out  # on each rank
        assert float(cells[5]) < 1e-4, out
    assert "Where each wait stands (`fir.explain`):" in out, out
    assert out.count("wait before") == 2, out  # two all-reduces, each with its wait placed
    assert "FIR against Inductor round by round (1 rounds" in out, out
    assert "Inductor against itself, timed twice per round" in out, out
    assert "fir host per step:" in out and "timed step by step:" in out, out
