"""Time the lowering pipeline ``decompose,lower,inline,deps,dce,plan-memory`` on 10,000-op
programs. Prints a table and writes docs/benchmarks/pipeline.md.

Two programs of N tensor-level ops each:

* ``transformer``: repeated blocks of what transformer layers do (layer_norm, matmul + bias,
  gelu, softmax over attention scores, residual adds, reshapes and transposes of heads);
* ``mixed``: the property-test generator's deterministic mix (elementwise ops, broadcasts,
  reductions, views, cat, creation ops).

    python benchmarks/bench_pipeline.py               # N = 10,000
    python benchmarks/bench_pipeline.py --ops 2000    # smaller
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks" / "pipeline.md"
PASSES = ["decompose", "lower", "inline", "deps", "dce", "plan-memory"]

BLOCK = """\
  %ln{k} = layer_norm %h{j}, %g, %b {{normalized_shape = [256]}} : f32[128, 256]
  %q{k} = matmul %ln{k}, %wq : f32[128, 256]
  %qb{k} = add %q{k}, %bq : f32[128, 256]
  %qh{k} = reshape %qb{k} : f32[128, 4, 64]
  %qt{k} = transpose %qh{k} {{dim0 = 0, dim1 = 1}} : f32[4, 128, 64]
  %kt{k} = permute %qh{k} {{dims = [1, 2, 0]}} : f32[4, 64, 128]
  %s{k} = matmul %qt{k}, %kt{k} : f32[4, 128, 128]
  %ss{k} = mul %s{k}, 0.125 : f32[4, 128, 128]
  %p{k} = softmax %ss{k} {{dim = 2}} : f32[4, 128, 128]
  %o{k} = matmul %p{k}, %qt{k} : f32[4, 128, 64]
  %ot{k} = transpose %o{k} {{dim0 = 0, dim1 = 1}} : f32[128, 4, 64]
  %of{k} = reshape %ot{k} : f32[128, 256]
  %r{k} = add %h{j}, %of{k} : f32[128, 256]
  %m{k} = matmul %r{k}, %w1 : f32[128, 256]
  %mb{k} = add %m{k}, %b1 : f32[128, 256]
  %a{k} = gelu %mb{k} : f32[128, 256]
  %d{k} = mul %a{k}, %r{k} : f32[128, 256]
  %sc{k} = sum %d{k} {{dims = [1], keepdim = true}} : f32[128, 1]
  %n{k} = div %d{k}, %sc{k} : f32[128, 256]
  %h{k} = add %n{k}, %r{k} : f32[128, 256]
"""
BLOCK_OPS = BLOCK.count("\n")


def transformer_program(num_ops: int) -> str:
    blocks = max(1, num_ops // BLOCK_OPS)
    head = (
        "func @transformer(%h0: f32[128, 256], %g: f32[256], %b: f32[256], %wq: f32[256, 256], "
        "%bq: f32[256], %w1: f32[256, 256], %b1: f32[256]) -> (f32[128, 256]) {"
    )
    body = "".join(BLOCK.format(j=k, k=k + 1) for k in range(blocks))
    return f"{head}\n{body}  return %h{blocks}\n}}\n"


def mixed_program(num_ops: int) -> str:
    sys.path.insert(0, str(ROOT / "tests"))
    import strategies  # the property tests' generator: deterministic for a seed
    from fir.ir.printer import print_module

    return print_module(strategies.big_tensor_module(num_ops, seed=0))


def run_once(text: str) -> dict[str, float]:
    from fir.ir.parser import parse_module
    from fir.ir.verifier import verify_module
    from fir.passes.pipeline import parse_pipeline

    times: dict[str, float] = {}
    t0 = time.perf_counter()
    module = parse_module(text)
    times["parse"] = time.perf_counter() - t0
    for name in PASSES:
        p = parse_pipeline(name)
        t = time.perf_counter()
        module = p.run(module, verify_each=False)
        times[name] = time.perf_counter() - t
    times["passes total"] = sum(times[n] for n in PASSES)
    t = time.perf_counter()
    verify_module(module)
    times["verify (once)"] = time.perf_counter() - t
    times["nodes after"] = float(len(module.funcs[0].nodes))
    return times


def fir_opt_wall(text: str) -> float:
    """End to end: ``fir-opt FILE -p lowering --no-verify-each`` in a fresh process (start-up,
    parse, input verification, passes, printing)."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "program.fir"
        path.write_text(text)
        cmd = [sys.executable, "-m", "fir.tools.fir_opt", str(path), "-p", "lowering"]
        t = time.perf_counter()
        subprocess.run(cmd + ["--no-verify-each", "-o", os.devnull], check=True)
        return time.perf_counter() - t


def measure(text: str, repeat: int) -> dict[str, float]:
    runs = [run_once(text) | {"fir-opt end to end": fir_opt_wall(text)} for _ in range(repeat)]
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-doc", action="store_true", help="do not rewrite docs/benchmarks")
    args = ap.parse_args()

    programs = {
        "transformer": transformer_program(args.ops),
        "mixed": mixed_program(args.ops),
    }
    rows = []
    for name, text in programs.items():
        ops = sum(1 for line in text.splitlines() if " = " in line)
        r = measure(text, args.repeat)
        rows.append((name, ops, r))

    keys = ["parse"] + PASSES + ["passes total", "verify (once)", "fir-opt end to end"]
    header = "| program | tensor ops | " + " | ".join(keys) + " | loop-level nodes |"
    sep = "|" + "---|" * (len(keys) + 3)
    lines = [header, sep]
    for name, ops, r in rows:
        cells = " | ".join(f"{r[k]:.2f} s" for k in keys)
        lines.append(f"| {name} | {ops:,} | {cells} | {int(r['nodes after']):,} |")
    table = "\n".join(lines)
    print(table)
    if args.no_doc:
        return
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    DOC.write_text(
        "# Lowering pipeline speed\n\n"
        "Generated by `python benchmarks/bench_pipeline.py` (median of "
        f"{args.repeat} runs) on {machine}.\n\n"
        "Each column is the wall time of one pass of "
        "`decompose,lower,inline,deps,dce,plan-memory`, run in process on the parsed module "
        "without verifying in between; `passes total` is their sum, the figure the issue bounds "
        "by 5 s for 10,000 ops. Parsing the input text and one final verification are shown "
        "separately. `fir-opt end to end` is the wall time of `fir-opt FILE -p lowering "
        "--no-verify-each -o /dev/null` in a fresh process: start-up and imports, parsing, "
        "verifying the input, the passes and printing the planned loop-level program "
        "(about 96,000 lines for `transformer`). With the default `--verify-each` the verifier "
        "also runs after each of the six passes.\n\n" + table + "\n"
    )
    print(f"wrote {DOC.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
