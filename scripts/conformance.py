"""PyTorch's own Inductor tests with FIR in Inductor's place: run them, judge them, write the table.

    python scripts/conformance.py                      # every test, FIR, table to stdout
    python scripts/conformance.py --sample 250 --check # CI: the first 250 of the ordered list
    python scripts/conformance.py --inductor R.jsonl --table docs/conformance.md

The suite (PyTorch's ``test/inductor/test_torchinductor.py`` templates and a harness that swaps
the compiler, see its README) lives outside this repository: ``--suite PATH``, else
``$FIR_CONFORMANCE``, else ``../shared/conformance`` beside the checkout. It is copied into a
private work folder first (the harness writes logs beside itself, and the suite's folder may be
read-only). Its ``ordered_tests.txt`` lists every test with every second name first, so the
first N are a sample spread over the whole file.

``--check`` fails (exit 1) on a wrong result (FAIL-WRONG) or an error (FAIL-ERROR) that
``scripts/conformance_known.txt`` does not list as a test Inductor fails too (``both``), and on
a graph run by PyTorch (PASS-FALLBACK) that the file does not list with its accepted reason
(``fallback``); a test that asserts a fact of Inductor's own that the harness does not catch
(an Inductor profiler event's name, a prim only Inductor registers) is listed as ``internal``: so a new wrong result, error or fallback stops CI, and every accepted one is
written down with why.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KNOWN = Path(__file__).resolve().parent / "conformance_known.txt"
STATUSES = ("PASS", "PASS-FALLBACK", "PASS-NOFIR", "FAIL-WRONG", "FAIL-ERROR", "SKIP")


def find_suite(given: str | None) -> Path | None:
    for candidate in (
        given,
        os.environ.get("FIR_CONFORMANCE"),
        str(ROOT.parent / "shared" / "conformance"),
    ):
        if candidate and (Path(candidate) / "harness.py").is_file():
            return Path(candidate)
    return None


def read_known(path: Path = KNOWN) -> dict[str, dict[str, str]]:
    """``{"both": {test: why}, "fallback": {test: why}}`` from lines ``both TEST  why`` and
    ``fallback TEST  why`` (``#`` starts a comment)."""
    known: dict[str, dict[str, str]] = {"both": {}, "fallback": {}, "internal": {}}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        kind, test, *why = line.split(None, 2)
        if kind not in known:
            raise SystemExit(f"{path}: unknown kind '{kind}' (both, fallback or internal)")
        known[kind][test] = why[0] if why else ""
    return known


def run(suite: Path, tests: list[str], backend: str, out: Path, timeout: int) -> None:
    """The harness over ``tests`` (restarted after a crash by the suite's run_suite.py)."""
    work = Path(tempfile.mkdtemp(prefix="fir-conformance-"))
    for f in suite.iterdir():
        if f.is_file():
            shutil.copy2(f, work / f.name)
    listing = work / "tests.txt"
    listing.write_text("\n".join(tests) + "\n")
    out.unlink(missing_ok=True)
    cmd = [
        sys.executable,
        str(work / "run_suite.py"),
        "--backend",
        backend,
        "--tests",
        str(listing),
        "--out",
        str(out),
        "--timeout",
        str(timeout),
    ]
    subprocess.run(cmd, cwd=work, check=True)


def load(path: Path) -> dict[str, dict]:
    rows: dict[str, dict] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            rows[row["test"]] = row
    return rows


def problems(rows: dict[str, dict], known: dict[str, dict[str, str]]) -> list[str]:
    out = []
    for test, row in sorted(rows.items()):
        status = row["status"]
        accepted = test in known["both"] or test in known["internal"]
        if status in ("FAIL-WRONG", "FAIL-ERROR") and not accepted:
            what = "wrong result" if status == "FAIL-WRONG" else "error"
            out.append(f"{test}: {what}: {detail(row)}")
        elif status == "PASS-FALLBACK" and test not in known["fallback"]:
            out.append(f"{test}: a graph ran with PyTorch: {detail(row)}")
    return out


def detail(row: dict) -> str:
    parts = [row.get("exc_type", ""), row.get("msg", "") or row.get("reason", "")]
    parts += row.get("fir_graph_fallbacks") or []
    parts += [f"{op}: {why}" for op, why in (row.get("fir_op_fallbacks") or {}).items()]
    text = "; ".join(p for p in parts if p).replace("\n", " ").replace("|", "\\|")
    return text[:240]


def table(
    fir: dict[str, dict], inductor: dict[str, dict] | None, known: dict[str, dict[str, str]]
) -> str:
    tests = sorted(fir)
    count = collections.Counter(fir[t]["status"] for t in tests)
    lines = ["| status | FIR | Inductor |", "|---|---|---|"]
    icount = (
        collections.Counter(inductor[t]["status"] for t in tests if t in inductor)
        if inductor
        else None
    )
    for s in STATUSES:
        lines.append(
            f"| {s} | {count.get(s, 0)} | {icount.get(s, 0) if icount is not None else '–'} |"
        )
    lines.append(
        f"| total | {len(tests)} | {sum(icount.values()) if icount is not None else '–'} |"
    )
    lines += [
        "",
        "Every test FIR does not plainly pass (SKIPs aside), with Inductor's status on it:",
        "",
    ]
    lines += ["| test | FIR | Inductor | why |", "|---|---|---|---|"]
    for t in tests:
        s = fir[t]["status"]
        if s in ("PASS", "SKIP", "PASS-NOFIR"):
            continue
        why = next((k[t] for k in known.values() if t in k), None) or detail(fir[t])
        ind = inductor[t]["status"] if inductor and t in inductor else "–"
        lines.append(f"| {t} | {s} | {ind} | {why} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", help="the conformance suite's folder")
    group = ap.add_mutually_exclusive_group()
    group.add_argument(
        "--sample", type=int, metavar="N", help="the first N tests of the ordered list"
    )
    group.add_argument("--tests", help="a file of test names")
    ap.add_argument("--results", help="judge these FIR results (JSON lines) instead of running")
    ap.add_argument("--out", default=None, help="where FIR's results go (JSON lines)")
    ap.add_argument(
        "--inductor", help="Inductor's results on the same tests (JSON lines), for the table"
    )
    ap.add_argument("--run-inductor", action="store_true", help="also run the tests with Inductor")
    ap.add_argument("--table", help="write the table (Markdown) to this file")
    ap.add_argument(
        "--check",
        action="store_true",
        help="exit 1 on a result conformance_known.txt does not accept",
    )
    ap.add_argument("--timeout", type=int, default=180, help="seconds a test may take")
    a = ap.parse_args()

    known = read_known()
    if a.results:
        fir = load(Path(a.results))
    else:
        suite = find_suite(a.suite)
        if suite is None:
            print(
                "conformance: no suite found (--suite, $FIR_CONFORMANCE or ../shared/conformance)",
                file=sys.stderr,
            )
            return 1
        names = [
            t.strip() for t in (suite / "ordered_tests.txt").read_text().splitlines() if t.strip()
        ]
        if a.tests:
            names = [t.strip() for t in Path(a.tests).read_text().splitlines() if t.strip()]
        elif a.sample:
            names = names[: a.sample]
        out = Path(a.out or tempfile.mkdtemp(prefix="fir-conformance-out-"))
        out = out if out.suffix == ".jsonl" else out / "results_fir.jsonl"
        start = time.time()
        run(suite, names, "fir", out, a.timeout)
        print(f"conformance: {len(names)} tests with FIR in {time.time() - start:.0f} s ({out})")
        fir = load(out)
        if a.run_inductor:
            ind_out = out.with_name("results_inductor.jsonl")
            run(suite, names, "inductor", ind_out, a.timeout)
            a.inductor = str(ind_out)
    inductor = load(Path(a.inductor)) if a.inductor else None
    text = table(fir, inductor, known)
    if a.table:
        Path(a.table).write_text(text)
    else:
        print(text)
    count = collections.Counter(r["status"] for r in fir.values())
    print("conformance: " + ", ".join(f"{count.get(s, 0)} {s}" for s in STATUSES))
    if a.check:
        bad = problems(fir, known)
        for line in bad:
            print(f"conformance: {line}", file=sys.stderr)
        if bad:
            print(
                f"conformance: {len(bad)} result(s) not accepted (scripts/conformance_known.txt)",
                file=sys.stderr,
            )
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
