"""``x + y.t()`` on the CPU in each element type, end to end through ``torch.compile``: FIR-cpp,
FIR-llvm and Inductor, interleaved rounds, medians. The transposed read is the case that tiles
exist for: 4- and 2-byte elements read it from a turned copy of each tile
(``schedule.turned_loads``); 8-byte ones keep the vectoriser's gathers. Writes
``docs/benchmarks/transpose-dtypes.md`` (one CPU per table: the model is in the head).

    python benchmarks/transpose_dtypes.py [--n 2048] [--rounds 7] [--calls 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DOC = HERE.parent / "docs" / "benchmarks" / "transpose-dtypes.md"
DTYPES = ("float32", "float64", "bfloat16", "float16")


def _add_transposed(x: Any, y: Any) -> Any:
    return x + y.t()


def _timed(fn: Any, args: tuple[Any, ...], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn(*args)
    return (time.perf_counter() - start) / calls * 1e3


def run(n: int, rounds: int, calls: int) -> list[dict[str, Any]]:
    import torch

    rows = []
    for name in DTYPES:
        dtype = getattr(torch, name)
        g = torch.Generator().manual_seed(0)
        x = torch.randn(n, n, generator=g).to(dtype)
        y = torch.randn(n, n, generator=g).to(dtype)
        torch._dynamo.reset()
        fns = {
            "FIR-cpp": torch.compile(
                _add_transposed, backend="fir", dynamic=False, options={"backend": "cpp"}
            ),
            "FIR-llvm": torch.compile(
                _add_transposed, backend="fir", dynamic=False, options={"backend": "llvm"}
            ),
            "Inductor": torch.compile(_add_transposed, dynamic=False),
        }
        want = _add_transposed(x, y)
        for label, fn in fns.items():
            if not torch.equal(fn(x, y), want):
                sys.exit(f"transpose_dtypes: {label} differs from eager in {name}")
        times: dict[str, list[float]] = {k: [] for k in fns}
        for _ in range(rounds):
            for label, fn in fns.items():
                times[label].append(_timed(fn, (x, y), calls))
        med = {k: statistics.median(v) for k, v in times.items()}
        rows.append({"dtype": name, **med})
        print(name, {k: round(v, 3) for k, v in med.items()}, file=sys.stderr, flush=True)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    out = [
        "| dtype | FIR-cpp ms | FIR-llvm ms | Inductor ms | FIR-cpp / Inductor | FIR-llvm / Inductor |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        ind = r["Inductor"]
        out.append(
            f"| {r['dtype']} | {r['FIR-cpp']:.3f} | {r['FIR-llvm']:.3f} | {ind:.3f} | "
            f"{r['FIR-cpp'] / ind:.2f} | {r['FIR-llvm'] / ind:.2f} |"
        )
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--out", type=Path, default=DOC)
    args = ap.parse_args()
    sys.path.insert(0, str(HERE))
    import os

    import torch
    from bench_cpu import cpu_model

    rows = run(args.n, args.rounds, args.calls)
    head = (
        "# x + y.t() on the CPU by element type (FIR against Inductor)\n\n"
        "Written by `benchmarks/transpose_dtypes.py`. "
        f"Measured {time.strftime('%Y-%m-%d')} on {cpu_model()}, {os.cpu_count()} cores, torch "
        f"{torch.__version__}: {args.n} x {args.n}, medians of {args.rounds} interleaved rounds "
        f"of {args.calls} calls.\n\n"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(head + table(rows) + "\n")
    print(table(rows))


if __name__ == "__main__":
    main()
