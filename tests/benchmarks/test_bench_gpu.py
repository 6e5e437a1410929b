"""benchmarks/bench_gpu.py without a GPU: its program table matches bench_cpu's, and its report
formats. Nothing is compiled or timed here (the script's whole logic runs with --cpu-smoke)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import torch

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import bench_cpu  # noqa: E402
import bench_gpu  # noqa: E402


def test_same_programs_as_bench_cpu() -> None:
    # the makers are lazy: building the tables allocates no tensor
    gpu = list(bench_gpu.programs(bench_gpu.SMOKE, "cpu"))
    assert gpu == list(bench_cpu.programs())


def test_smoke_makers_are_small() -> None:
    for name, (_, make) in bench_gpu.programs(bench_gpu.SMOKE, "cpu").items():
        assert sum(t.numel() * t.element_size() for t in make()) < 64 * 1024, name


def test_scale_multiplies_rows_only() -> None:
    half = bench_gpu.GPU.scaled(0.5)
    assert (half.rows, half.cols) == (4096, 4096)
    assert half.nchw == (32, 64, 64, 64) and half.attn == (8, 32, 512)
    assert half.copies == bench_gpu.GPU.copies


def _row(name: str, fir: float, inductor: float, fk: int, ik: int) -> bench_gpu.Row:
    return {
        "name": name,
        "eager": 2e-3,
        "inductor": inductor,
        "fir": fir,
        "bytes": 256 * 2**20,
        "fir_kernels": fk,
        "inductor_kernels": ik,
        "fir_compiled": name != "deep_chain",
    }


def test_verdict_formats() -> None:
    rows = [
        _row("softmax", 8e-5, 1.2e-4, 1, 2),
        _row("transpose_add", 2e-4, 1.5e-4, 2, 1),
        _row("deep_chain", 1e-3, 1e-3, 1, 1),
        _row(bench_gpu.TINY, 1e-5, 8e-6, 1, 1),
    ]
    cold = {"softmax": (0.3, 2.0), "transpose_add": (math.nan, 2.0), "deep_chain": (6.0, 3.0)}
    overhead = bench_gpu.Overhead(5.0, 20.0, 15.0, 1, 1, True)
    graphs = bench_gpu.Graphs(50.0, 60.0, 10.0, 10, 11)
    text = bench_gpu.verdict(rows, cold, 3000.0, overhead, graphs)
    assert "below 90% of copy: transpose_add" in text  # 1.3 TB/s of 3; softmax 3.4
    assert "no reason recorded: investigate" in text
    assert "more on transpose_add" in text and "not below on transpose_add, deep_chain" in text
    assert (
        "5.00x (met)" in text and "FIR did not compile (PyTorch ran the graph): deep_chain" in text
    )
    table = bench_gpu.table(rows, cold, 3000.0)
    assert "| deep_chain (not compiled) |" in table and "failed / 2.00 s" in table
    # without the optional sections, and with the CUDA-graph option unsupported
    na = bench_gpu.Graphs(50.0, 60.0, None, 10, 11, "FirError: unknown option")
    assert "n/a (FirError: unknown option)" in bench_gpu.verdict(rows, graphs=na)
    assert bench_gpu.verdict([]) is not None


def test_bytes_counts_each_tensor_once() -> None:
    x = torch.zeros(4, 8)
    assert bench_gpu._bytes([x], x) == 4 * 8 * 4
    assert bench_gpu._bytes([x], (x + 1, x)) == 2 * 4 * 8 * 4


def test_cold_only_merges_parts_of_one_device(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    fake = iter([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    monkeypatch.setattr(bench_gpu, "cold_compile", lambda name, backend, scale: next(fake))
    monkeypatch.setattr(bench_gpu, "_versions", lambda device: "GPU A")
    out = tmp_path / "cold.json"
    bench_gpu.cold_only(out, ["softmax"], 1.0)
    bench_gpu.cold_only(out, ["sum_dim0"], 1.0)
    assert json.loads(out.read_text())["cold"] == {"softmax": [1.0, 2.0], "sum_dim0": [3.0, 4.0]}
    # another device's measurements are replaced, never mixed in
    monkeypatch.setattr(bench_gpu, "_versions", lambda device: "GPU B")
    bench_gpu.cold_only(out, ["tiny"], 1.0)
    assert json.loads(out.read_text()) == {"device": "GPU B", "cold": {"tiny": [5.0, 6.0]}}


def test_document_rewrite_keeps_the_notes(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    doc = tmp_path / "gpu.md"
    monkeypatch.setattr(bench_gpu, "DOC", doc)
    bench_gpu.write_document("# GPU\n\nold table\n")
    assert doc.read_text() == "# GPU\n\nold table\n"
    doc.write_text(doc.read_text() + "\n## Notes\n\nwhy sum_dim0 is slow\n")
    bench_gpu.write_document("# GPU\n\nnew table\n")
    assert doc.read_text() == "# GPU\n\nnew table\n\n## Notes\n\nwhy sum_dim0 is slow\n"
