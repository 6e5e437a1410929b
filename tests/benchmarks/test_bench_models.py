"""benchmarks/bench_models.py on the CPU (``--cpu-smoke``): tiny GPT-2 through the CPU,
training and dynamic-shape modes, eager, Inductor and FIR, every column measured and the
tables written; and its document keeps other modes' sections and the notes when one mode is
rewritten. Nothing here asserts on time. Needs ``transformers`` (the ``test`` extra)."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import bench_models  # noqa: E402


def test_cpu_smoke_runs_every_mode_and_prints_the_tables(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pytest.importorskip("transformers")
    out = tmp_path / "models.md"
    bench_models.main(["--cpu-smoke", "--models", "gpt2", "--out", str(out)])
    text = capsys.readouterr().out
    assert not out.exists()  # --cpu-smoke writes no document
    # the CPU table (FIR-cpp and FIR-llvm), the training table, the dynamic-shape table
    assert text.count("| model | eager ms | Inductor ms | FIR ms |") == 2
    assert "FIR-llvm / Inductor: gpt2" in text
    assert "| FIR-llvm |" in text and "| Inductor' |" in text
    dyn = [line for line in text.splitlines() if line.startswith("| gpt2 | 1 | 0 |")]
    assert dyn, text  # dynamic=True: one compile, no fallback
    refs = 0
    for line in text.splitlines():  # every column timed, every result close to eager's
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith(("| FIR |", "| Inductor |")):
            assert float(cells[1]) > 0 and float(cells[7]) < 1e-3, line
        if line.startswith(("| FIR |", "| Inductor |", "| eager |", "| FIR-llvm |")):
            # the error against the model in f64: measured, small, not zero for f32 results
            assert 0 < float(cells[8]) < 1e-3, line
            refs += 1
    assert refs >= 7  # inference (eager, Inductor, FIR, FIR-llvm) and training (three)


def test_a_mode_replaces_only_its_own_section(tmp_path: Path) -> None:
    doc = tmp_path / "models.md"
    bench_models.write_section("gpu", "gpu table one", doc)
    bench_models.write_section("train", "train table", doc)
    text = doc.read_text().replace("## Notes\n", "## Notes\n\nwhere the time goes\n")
    doc.write_text(text)
    bench_models.write_section("gpu", "gpu table two", doc)
    text = doc.read_text()
    assert "gpu table two" in text and "gpu table one" not in text
    assert "train table" in text and text.endswith("where the time goes\n")
    assert text.index("<!-- mode:gpu -->") < text.index("<!-- mode:train -->")


def test_host_times_are_sampled_in_the_interleaved_rounds() -> None:
    """Each column's host time is the median of samples taken in every round beside the other
    columns' (a host's noise falls on all alike), not of samples taken after the rounds one
    column at a time."""
    calls: list[str] = []

    def step_of(name: str) -> Any:
        return lambda: calls.append(name)

    bench = bench_models.Bench(device="cpu", rounds=3, calls=2, profile=False)
    cols = [bench_models.Column("A", step_of("A")), bench_models.Column("B", step_of("B"))]
    bench.interleaved(cols)
    per_round = 2 + bench_models.HOST_SAMPLES  # the timed steps, then the host samples
    warm = 2  # one warm-up call of each column
    rounds = [calls[warm + k * per_round : warm + (k + 1) * per_round] for k in range(6)]
    assert rounds == [[c] * per_round for c in "ABABAB"]
    for c in cols:
        assert len(c.host_times) == 3 * bench_models.HOST_SAMPLES
        bench.profiled(c)
        assert c.host == statistics.median(c.host_times)
    assert len(calls) == warm + 6 * per_round  # profiled took no samples of its own
