"""Time FIR's middle end as a user runs it: ``fir-opt FILE -p fusion -o OUT`` in a fresh process,
on programs imported with ``fir-import``, at 2,000 and 10,000 aten ops. Prints the tables and
writes docs/benchmarks/pipeline.md.

For each program and size:

* wall time of ``fir-opt -p fusion -o OUT`` (verification after every pass, the default) and of
  the same with ``--no-verify-each``: medians of ``--repeat`` runs, the two interleaved;
* ``--timing``: its total against the wall time of the same run (the report must account for the
  whole run), and its breakdown (start-up, parse, verify, each pass and the verification after
  it, print, write) for the 10,000-op programs;
* parsing the loop-level result back (in process, median of 3).

``--baseline-python PY`` also runs another installation of FIR (``PY -m fir.tools.fir_opt``, e.g.
a virtual environment with an older checkout installed) interleaved with this one, and reports
the ratio, so that a speed-up is measured in one run on one machine.

    python benchmarks/bench_pipeline.py
    python benchmarks/bench_pipeline.py --sizes 2000 --repeat 3 --no-doc
    python benchmarks/bench_pipeline.py --baseline-python /tmp/venv-main/bin/python
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks" / "pipeline.md"
CACHE = Path(os.environ.get("FIR_BENCH_CACHE", Path(tempfile.gettempdir()) / "fir-bench-programs"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from middle_end_programs import PROGRAMS, import_program  # noqa: E402

TIMING_LINE = re.compile(r"^\s+([0-9.]+)\s+[0-9.]+%\s\s(.*)$")


def fir_opt(python: str, path: Path, out: Path, *extra: str) -> tuple[float, str]:
    """Wall time of one fresh ``fir-opt`` process, and its stderr."""
    cmd = [python, "-m", "fir.tools.fir_opt", str(path), "-p", "fusion", "-o", str(out), *extra]
    t = time.perf_counter()
    # from a neutral folder: run from the checkout, ``-m`` would import the checkout's package
    # whatever installation ``python`` has
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=tempfile.gettempdir())
    wall = time.perf_counter() - t
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr}")
    return wall, done.stderr


def parse_timing(report: str) -> list[tuple[str, float]]:
    rows = []
    last_pass = ""
    for line in report.splitlines():
        m = TIMING_LINE.match(line)
        if not m:
            continue
        secs, stage = float(m.group(1)) / 1e3, m.group(2)
        if stage.startswith("  "):
            stage = f"{last_pass}: verify"
        else:
            last_pass = stage
        rows.append((stage, secs))
    return rows


def parse_seconds(path: Path) -> float:
    """Parsing the loop-level text back, in this process (median of 3)."""
    from fir.ir.parser import parse_module

    text = path.read_text()
    runs = []
    for _ in range(3):
        t = time.perf_counter()
        parse_module(text)
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


def measure(path: Path, repeat: int, baseline: str | None) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.fir"
        walls: list[float] = []
        walls_nv: list[float] = []
        walls_base: list[float] = []
        for _ in range(repeat):  # interleaved: the machine's noise hits every column alike
            walls.append(fir_opt(sys.executable, path, out)[0])
            walls_nv.append(fir_opt(sys.executable, path, out, "--no-verify-each")[0])
            if baseline:
                walls_base.append(fir_opt(baseline, path, out)[0])
        timed_wall, report = fir_opt(sys.executable, path, out, "--timing")
        stages = parse_timing(report)
        total = next(s for name, s in stages if name == "total")
        lines = sum(1 for _ in out.open())
        parse = parse_seconds(out)
    result: dict[str, object] = {
        "wall": statistics.median(walls),
        "wall_nv": statistics.median(walls_nv),
        "timing_total": total,
        "timing_wall": timed_wall,
        "stages": [(n, s) for n, s in stages if n != "total"],
        "out_lines": lines,
        "parse": parse,
    }
    if baseline:
        result["wall_base"] = statistics.median(walls_base)
    return result


def summary_table(rows: list[tuple[str, int, int, dict]], baseline: bool) -> str:
    head = (
        "| program | aten ops | loop-level lines | `fir-opt -p fusion -o` | `--no-verify-each` "
        "| `--timing` total / wall | parse the result |"
    )
    sep = "|---|---|---|---|---|---|---|"
    if baseline:
        head += " baseline | speed-up |"
        sep += "---|---|"
    out = [head, sep]
    for name, ops, _, r in rows:
        cells = [
            name,
            f"{ops:,}",
            f"{r['out_lines']:,}",
            f"{r['wall']:.2f} s",
            f"{r['wall_nv']:.2f} s",
            f"{r['timing_total']:.2f} s / {r['timing_wall']:.2f} s "
            f"({100 * (r['timing_total'] / r['timing_wall'] - 1):+.0f}%)",
            f"{r['parse']:.2f} s",
        ]
        if baseline:
            cells += [f"{r['wall_base']:.2f} s", f"{r['wall_base'] / r['wall']:.2f}x"]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def breakdown_table(rows: list[tuple[str, int, int, dict]]) -> str:
    """Stages of the --timing report, one column per program (the largest size of each)."""
    largest: dict[str, tuple[int, dict]] = {}
    for name, ops, _, r in rows:
        if name not in largest or ops > largest[name][0]:
            largest[name] = (ops, r)
    names = list(largest)
    stages: list[str] = []
    for _, r in largest.values():
        for stage, _secs in r["stages"]:
            if stage not in stages:
                stages.append(stage)
    head = "| stage | " + " | ".join(f"{n} ({largest[n][0]:,} ops)" for n in names) + " |"
    out = [head, "|---|" + "---|" * len(names)]
    for stage in stages:
        label = "&nbsp;&nbsp;verify" if stage.endswith(": verify") else stage
        cells = []
        for n in names:
            secs = dict(largest[n][1]["stages"]).get(stage)
            cells.append("" if secs is None else f"{secs * 1e3:.0f} ms")
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    totals = [f"{largest[n][1]['timing_total'] * 1e3:.0f} ms" for n in names]
    out.append("| **total** | " + " | ".join(totals) + " |")
    return "\n".join(out)


READING = """## Reading the numbers

* *startup* is the interpreter (about 30 ms), `site` and the editable install's finder (about
  20 ms), lark (15 ms) and the passes the pipeline names, which bring sympy (about 150 ms, the
  index algebra of `lower` and `inline`): a floor of about 0.2 s that no program size changes.
* Verification after every pass costs the difference between the two wall-time columns (about
  0.3 s at 10,000 ops): each pass's verification re-checks only the nodes whose fingerprint
  changed, so `lower`, which rewrites every node, pays the most, and `dce` the least.
* The rest grows linearly with the program: parsing the tensor-level input (the fast path of
  `ir/fast_parse.py`, lark only for what it does not take), `lower` and `inline` building loop
  bodies, `fuse` scoring candidate pairs, and printing. On `gpt`, `reorder` and `plan-memory`
  weigh more: its kernels have many members and many buffers to place.
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[2000, 10000])
    ap.add_argument("--programs", nargs="+", default=list(PROGRAMS), choices=PROGRAMS)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--baseline-python", default=None)
    ap.add_argument(
        "--baseline-name",
        default="another installation",
        help="what the baseline is, for the docs (e.g. 'the tree before issue 16, f403db2^')",
    )
    ap.add_argument("--no-doc", action="store_true", help="do not rewrite docs/benchmarks")
    args = ap.parse_args()

    rows = []
    for name in args.programs:
        for ops in args.sizes:
            path = import_program(name, ops, CACHE)
            in_lines = sum(1 for line in path.open() if " = " in line)
            r = measure(path, args.repeat, args.baseline_python)
            rows.append((name, in_lines, in_lines, r))
            print(f"{name} {in_lines} ops: {r['wall']:.2f} s", file=sys.stderr)
    summary = summary_table(rows, bool(args.baseline_python))
    breakdown = breakdown_table(rows)
    print(summary)
    print()
    print(breakdown)
    if args.no_doc:
        return
    machine = (
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{platform.platform()}"
    )
    DOC.write_text(
        "# Middle-end speed: `fir-opt -p fusion`\n\n"
        f"Generated by `python benchmarks/bench_pipeline.py` on {machine}, median of "
        f"{args.repeat} runs, each a fresh `fir-opt` process "
        "(what a user waits for: interpreter start-up and imports included).\n\n"
        "The programs (`benchmarks/middle_end_programs.py`) are PyTorch code imported with "
        "`fir-import`: `chain_mean` is pointwise chains broken by a row mean every eight ops "
        "(about 4 loop-level lines per op), `gpt` a stack of GPT-style blocks (about 11 lines "
        "per op: kernels, weight transposes, dependency clauses).\n\n"
        + (
            f"*Baseline*: {args.baseline_name}, run interleaved with this tree.\n\n"
            if args.baseline_python
            else ""
        )
        + summary
        + "\n\n"
        "`--timing` total / wall: the report's total against the wall time of the same run "
        "measured from outside; the report accounts for start-up (from the process's start, "
        "read from `/proc`), reading, parsing, verifying, each pass and the verification after "
        "it, printing and writing. *Parse the result*: `parse_module` of the loop-level output, "
        "in process.\n\n"
        "Where the time goes (the `--timing` report of one run at the largest size):\n\n"
        + breakdown
        + "\n\n"
        + READING
    )
    print(f"wrote {DOC.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
