"""FIR's C++ back end against eager PyTorch and Inductor on the CPU, in one process and one run.

    python benchmarks/bench_cpu.py                # the table, written to docs/benchmarks/cpu.md
    python benchmarks/bench_cpu.py --quick        # fewer repetitions, no cold compiles, no doc

Each program runs with eager PyTorch, Inductor (``torch.compile``, default mode) and FIR
(``torch.compile(backend="fir")``: the ``fusion`` pipeline and the C++ back end). Calls are
interleaved (eager, Inductor, FIR, eager, …) so that the machine's noise hits every column alike;
the figure is the median. Every result is checked against eager. Also reported:

* GB/s: the unique bytes the program reads and writes (inputs and outputs once) per second;
* kernels: FIR's (fused groups and loop nodes in none) and Inductor's
  (``torch._inductor.metrics.generated_kernel_count``);
* cold compile: the first call of a fresh process with empty caches (FIR's and Inductor's),
  minus the same process's second call (the compiled code's own time), for each compiler.

Tensors are 4096x2048 f32 (32 MB, memory-bound on this machine) unless said otherwise, and one
tiny program shows the per-call overhead.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks" / "cpu.md"
R, C = 4096, 2048


def _deep_chain(x: torch.Tensor) -> torch.Tensor:
    """200 ops: 40 times sin(x) * 1.01 + 0.1 (3 ops), then relu(x) - 0.05 (2 ops)."""
    for _ in range(40):
        x = torch.sin(x) * 1.01 + 0.1
        x = torch.relu(x) - 0.05
    return x


def _bn_relu_residual(x, mean, var, w, b, res):  # type: ignore[no-untyped-def]
    return torch.relu(F.batch_norm(x, mean, var, w, b, training=False) + res)


def _rms_norm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def programs() -> dict[str, tuple[Callable[..., Any], Callable[[], list[torch.Tensor]]]]:
    g = torch.Generator().manual_seed(0)

    def rn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g)

    return {
        "pointwise_chain": (
            lambda x: (((x + 1) * 2).relu() * 0.5).to(torch.float16),
            lambda: [rn(R, C)],
        ),
        "bias_gelu": (lambda x, b: F.gelu(x + b, approximate="tanh"), lambda: [rn(R, C), rn(C)]),
        "softmax": (lambda x: torch.softmax(x, -1), lambda: [rn(R, C)]),
        "layer_norm": (
            lambda x, w, b: F.layer_norm(x, (C,), w, b),
            lambda: [rn(R, C), rn(C), rn(C)],
        ),
        "rms_norm": (_rms_norm, lambda: [rn(R, C), rn(C)]),
        "residual_rms_norm": (
            lambda x, r, w: (lambda h: (h, _rms_norm(h, w)))(x + r),
            lambda: [rn(R, C), rn(R, C), rn(C)],
        ),
        "transpose_add": (lambda x, y: x + y.t(), lambda: [rn(2896, 2896), rn(2896, 2896)]),
        "sum_dim0": (lambda x: x.sum(0), lambda: [rn(R, C)]),
        "bn_relu_residual": (
            _bn_relu_residual,
            lambda: [
                rn(32, 64, 64, 64),
                rn(64),
                rn(64).abs() + 0.5,
                rn(64),
                rn(64),
                rn(32, 64, 64, 64),
            ],
        ),
        "cross_entropy": (
            lambda logits, t: F.cross_entropy(logits, t),
            lambda: [rn(1024, 8192), torch.randint(0, 8192, (1024,), generator=g)],
        ),
        "mlp_epilogue": (
            lambda x, w, b: torch.relu(x @ w + b),
            lambda: [rn(1024, 1024), rn(1024, 2048), rn(2048)],
        ),
        "attn_softmax": (
            lambda s, mask: torch.softmax(s * 0.125 + mask, -1),
            lambda: [rn(8, 16, 256, 256), rn(1, 1, 256, 256)],
        ),
        "deep_chain": (_deep_chain, lambda: [rn(R, C)]),
        "tiny (overhead)": (lambda x: x * 2 + 1, lambda: [rn(8)]),
    }


def _bytes(args: list[torch.Tensor], out: Any) -> int:
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    return sum(t.numel() * t.element_size() for t in list(args) + outs)


def _time(fn: Callable[[], Any]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def _check(got: Any, want: Any) -> None:
    gots = list(got) if isinstance(got, (tuple, list)) else [got]
    wants = list(want) if isinstance(want, (tuple, list)) else [want]
    for a, b in zip(gots, wants):
        tol = 1e-2 if b.dtype in (torch.float16, torch.bfloat16) else 2e-3
        torch.testing.assert_close(a, b, rtol=tol, atol=tol)


def measure(name: str, repeat: int) -> dict[str, Any]:
    from fir.frontend.dynamo import COMPILED
    from torch._inductor import metrics

    fn, make = programs()[name]
    args = make()
    with torch.no_grad():
        want = fn(*args)
        torch._dynamo.reset()
        metrics.reset()
        inductor = torch.compile(fn)
        _check(inductor(*args), want)
        inductor_kernels = metrics.generated_kernel_count
        start = len(COMPILED)
        fir = torch.compile(fn, backend="fir")
        _check(fir(*args), want)
        from fir.ir.kernels import kernel_count

        fir_kernels = sum(kernel_count(g.module.funcs[0]) for g in COMPILED[start:])
        fir_compiled = all(g.program is not None for g in COMPILED[start:])
        start = len(COMPILED)
        llvm = torch.compile(fn, backend="fir", options={"backend": "llvm"})
        _check(llvm(*args), want)
        llvm_compiled = all(g.program is not None for g in COMPILED[start:])
        times: dict[str, list[float]] = {"eager": [], "inductor": [], "fir": [], "llvm": []}
        for _ in range(2):  # warm-up
            fn(*args), inductor(*args), fir(*args), llvm(*args)
        for _ in range(repeat):
            times["eager"].append(_time(lambda: fn(*args)))
            times["inductor"].append(_time(lambda: inductor(*args)))
            times["fir"].append(_time(lambda: fir(*args)))
            times["llvm"].append(_time(lambda: llvm(*args)))
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "name": name,
        "eager": med["eager"],
        "inductor": med["inductor"],
        "fir": med["fir"],
        "llvm": med["llvm"],
        "llvm_compiled": llvm_compiled,
        "bytes": _bytes(args, want),
        "fir_kernels": fir_kernels,
        "inductor_kernels": inductor_kernels,
        "fir_compiled": fir_compiled,
    }


COLD = """
import json, os, sys, time, torch
sys.path.insert(0, {bench!r})
import bench_cpu
fn, make = bench_cpu.programs()[{name!r}]
args = make()
with torch.no_grad():
    t = time.perf_counter(); fn(*args); eager = time.perf_counter() - t
    if {backend!r} == "inductor":
        f = torch.compile(fn)
    elif {backend!r} == "fir-llvm":
        f = torch.compile(fn, backend="fir", options={{"backend": "llvm"}})
    else:
        f = torch.compile(fn, backend={backend!r})
    t = time.perf_counter(); f(*args); first = time.perf_counter() - t
    t = time.perf_counter(); f(*args); second = time.perf_counter() - t
print(json.dumps(first - second))
"""


def cold_compile(name: str, backend: str) -> float:
    """First call of a fresh process with empty caches, less the second call's time (what the
    compiled code takes once compiled)."""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, FIR_CACHE_DIR=f"{tmp}/fir", TORCHINDUCTOR_CACHE_DIR=f"{tmp}/ind")
        code = COLD.format(bench=str(ROOT / "benchmarks"), name=name, backend=backend)
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        return float(json.loads(out.stdout.strip().splitlines()[-1]))


def table(rows: list[dict[str, Any]], cold: dict[str, tuple[float, ...]]) -> str:
    head = (
        "| program | eager | Inductor | FIR | FIR / Inductor | FIR GB/s | Inductor GB/s | kernels "
        "FIR / Inductor | cold compile FIR / Inductor |"
    )
    lines = [head, "|" + "---|" * 9]
    for r in rows:
        gb = r["bytes"] / 1e9
        cold_text = (
            f"{cold[r['name']][0]:.2f} s / {cold[r['name']][1]:.2f} s" if r["name"] in cold else ""
        )
        flag = "" if r["fir_compiled"] else " (not compiled)"
        lines.append(
            f"| {r['name']}{flag} | {r['eager'] * 1e3:.3f} ms | {r['inductor'] * 1e3:.3f} ms | "
            f"{r['fir'] * 1e3:.3f} ms | {r['fir'] / r['inductor']:.2f} | {gb / r['fir']:.1f} | "
            f"{gb / r['inductor']:.1f} | {r['fir_kernels']} / {r['inductor_kernels']} | "
            f"{cold_text} |"
        )
    big = [r for r in rows if not r["name"].startswith("tiny")]
    geo = math.exp(statistics.mean(math.log(r["fir"] / r["inductor"]) for r in big))
    lines.append("")
    lines.append(f"Geometric mean of FIR / Inductor over the {len(big)} large programs: {geo:.2f}.")
    return "\n".join(lines)


def llvm_table(rows: list[dict[str, Any]], cold: dict[str, tuple[float, ...]]) -> str:
    """FIR-llvm (issue 13) against Inductor, from the same run."""
    lines = [
        "## FIR-llvm (the llvmlite back end)",
        "",
        'The same run, FIR with `options={"backend": "llvm"}`: kernels built as LLVM IR and '
        "compiled in the process (O3, the host CPU), split over the cores by the OpenMP team; f32 "
        "math functions are FIR's own vectorisable code (`backends/llvm/vecmath.py`, errors in "
        "`docs/llvm-math.md`).",
        "",
        "| program | Inductor | FIR-llvm | FIR-llvm / Inductor | FIR-llvm / FIR-cpp | cold compile "
        "FIR-llvm / Inductor |",
        "|" + "---|" * 6,
    ]
    for r in rows:
        c = cold.get(r["name"])
        cold_text = f"{c[2]:.2f} s / {c[1]:.2f} s" if c is not None and len(c) > 2 else ""
        flag = "" if r.get("llvm_compiled", True) else " (not compiled)"
        lines.append(
            f"| {r['name']}{flag} | {r['inductor'] * 1e3:.3f} ms | {r['llvm'] * 1e3:.3f} ms | "
            f"{r['llvm'] / r['inductor']:.2f} | {r['llvm'] / r['fir']:.2f} | {cold_text} |"
        )
    big = [r for r in rows if not r["name"].startswith("tiny")]
    geo = math.exp(statistics.mean(math.log(r["llvm"] / r["inductor"]) for r in big))
    lines += ["", f"Geometric mean of FIR-llvm / Inductor over the large programs: {geo:.2f}."]
    return "\n".join(lines)


ANALYSIS = """## Where the time goes

Measured on this machine (2 cores, AVX-512) with `fir-run --bench`, a kernel timed alone, and
the generated code (`fir-translate --target cpp`):

- **Allocation is half of a memory-bound call at 32 MB.** A fresh 32 MiB buffer from glibc is a
  fresh mapping whose first writer takes 8,192 page faults: allocating and filling it costs
  6.4 ms through `torch.empty`, 1.2 ms when the memory is already mapped. Inductor pays this on
  every output of 32 MB or more (softmax: 8.3 ms a call for a kernel that needs 2-3 ms). FIR's
  runtime takes such buffers from a pool of mappings that callers dropped (`backends/buffers.py`),
  so softmax's call is within 0.2 ms of its kernel.
- **Row reductions are compute-bound before they are memory-bound.** A softmax row of 2,048 f32
  (8 KiB) stays in L1 across its three passes, so the passes cost compute, not bandwidth: the
  kernel ran at 2.8 ms with two `exp` per element, 2.4 ms with one (the plan keeps the first
  pass's `exp` in a scratch row). The division by the sum remains per element: multiplying by a
  reciprocal would be faster but not the interpreter's rounding.
- **Transposed reads** (`transpose_add`): the kernel runs in square tiles and reads `y` from a
  turned copy of each tile: `fir_turn` (C++) or the LLVM renderer's `turn` copies the tile
  transposed to a stack array, 8 x 8 blocks of 32-bit elements through register shuffles, and
  the vectorised inner loop reads that array in order. With gathers instead (the vectoriser's,
  along the inner loop), the best tiles were 32 x 32 on a 2-core Xeon (16 x 16: 3.8 ms, 32 x
  32: 3.0-3.1 ms, 64 x 64: 3.6 ms), and on an AMD EPYC Zen 4 the program ran at 1.77x
  Inductor's time. The kernel alone (`benchmarks/transpose_tiles.py`, min of 30, 1 / 2 threads): Zen 4,
  gathers in 32 x 32 tiles 17 / 26 ms, turned 16 x 16 12 / 16, 32 x 32 17 / 25, 64 x 64
  10 / 14 (a machine shared with other work); 16-core Xeon, gathers 7.0 / 4.0, turned 64 x 64
  7.2 / 3.2; a 2-core Xeon (family 6 model 167), on 2 threads: gathers 4.02, turned 16 x 16
  4.02, 32 x 32 3.94, 64 x 64 4.58, 128 x 128 3.64 (1 thread: 64 x 64 10.88, 128 x 128 9.48).
  The side that is best on the Zen 4 is the worst on that Xeon: no one side has been best on
  all three CPUs, so the side is measured once per machine (`backends/cpu_tuning.py`: 32, 64 or
  128, cached; 64 unless another is 5% faster; `FIR_TURNED_SIDE` sets it). The measurement
  runs once per machine, at the first compile of a kernel that turns tiles: `transpose_add`'s
  cold compile, with empty caches, includes it (1.19 s against 0.34 s before, on this Xeon). 2-byte elements
  turn in tiles of the same bytes a row, at most 128 a side (`benchmarks/transpose_dtypes.py`);
  8-byte elements keep the gathers, of 256-bit vectors (8-lane gathers measured faster than
  16-lane ones); turned tiles keep 512-bit vectors.
- **f16 output**: converting in the loop cost ~12 integer instructions per element; converting
  16 values per F16C instruction after a vectorised block took `pointwise_chain` from 1.56 ms to
  0.88 ms of kernel time.
- **Per-call overhead**: a static program's call is resolved once (no size symbols to bind, the
  storages and kernel arguments known): about 4 us of runtime per call for one kernel.
"""

POINTWISE = ("pointwise_chain", "bias_gelu", "transpose_add", "bn_relu_residual")
ROW_REDUCTIONS = ("softmax", "layer_norm", "rms_norm", "residual_rms_norm", "attn_softmax")

# Why a program is slower than Inductor, where one is: printed under the table for every program
# whose ratio is above 1 in the run (a program slower without an entry says so).
SLOWER_BECAUSE = {
    "tiny (overhead)": (
        "per-call overhead, not kernel time: the kernel takes well under a microsecond; both "
        "pay Dynamo's guards and AOTAutograd's wrapper (about 11 us), then FIR's runtime checks "
        "the input, allocates and calls the kernel through ctypes (4.4 us measured alone)"
    ),
    "transpose_add": (
        "FIR reads the transposed input from a turned copy of each tile (of the side measured "
        "on this machine, named above the tables), as Inductor transposes its 16 x 16 tiles "
        "in registers; the side of the tiles that is fastest differs between CPUs (see "
        "Transposed reads below)"
    ),
    "cross_entropy": (
        "FIR runs two kernels (the row logsumexp and gather, then the mean of 1,024 losses) "
        "where Inductor's five are as fast in total; the rows are 8,192 long, so both are "
        "bound by one read of the logits"
    ),
    "mlp_epilogue": (
        "the time is the matmul (an extern call through PyTorch in both); the fused bias+relu "
        "epilogue is a small part"
    ),
}


def plain_copy_gbs(repeat: int) -> float:
    """What a plain copy of 4096 x 2048 f32 streams at (eager ``clone``), the machine's
    reference for memory-bound kernels."""
    x = torch.randn(R, C)
    out = torch.empty_like(x)
    times = [_time(lambda: out.copy_(x)) for _ in range(repeat + 3)][3:]
    return 2 * x.numel() * 4 / statistics.median(times) / 1e9


def verdict(rows: list[dict[str, Any]], cold: dict[str, tuple[float, ...]], copy: float) -> str:
    """The run against issue 11's bars, and the programs slower than Inductor with why."""
    gbs = {r["name"]: r["bytes"] / 1e9 / r["fir"] for r in rows}
    big = [r for r in rows if not r["name"].startswith("tiny")]
    geo = math.exp(statistics.mean(math.log(r["fir"] / r["inductor"]) for r in big))
    worst = max(rows, key=lambda r: r["fir"] / r["inductor"])
    out = [f"A plain copy of 4096 x 2048 f32 (eager `copy_`) streams at {copy:.1f} GB/s here.", ""]
    out.append(f"- geometric mean of FIR / Inductor: {geo:.2f}")
    out.append(
        f"- slowest against Inductor: {worst['name']} at {worst['fir'] / worst['inductor']:.2f}"
    )
    point = [gbs[n] for n in POINTWISE if n in gbs]
    rowr = {n: gbs[n] for n in ROW_REDUCTIONS if n in gbs}
    if point and rowr:
        slowest = min(rowr, key=lambda n: rowr[n])
        out.append(
            f"- row reductions stream at {min(rowr.values()):.1f}-{max(rowr.values()):.1f} GB/s "
            f"(slowest: {slowest}); the pointwise programs at {min(point):.1f}-{max(point):.1f} "
            f"GB/s (median {statistics.median(point):.1f})"
        )
    more = [r["name"] for r in rows if r["fir_kernels"] > r["inductor_kernels"]]
    out.append(
        "- kernel count at most Inductor's on every program"
        if not more
        else f"- more kernels than Inductor: {', '.join(more)}"
    )
    if cold:
        slower = [n for n, (f, i, *_) in cold.items() if f >= i]
        out.append(
            "- cold compile faster than Inductor's on every program"
            if not slower
            else f"- cold compile not faster than Inductor's: {', '.join(slower)}"
        )
        if "deep_chain" in cold:
            out.append(f"- deep_chain cold compile: {cold['deep_chain'][0]:.2f} s")
    slower_rows = [r for r in rows if r["fir"] > r["inductor"]]
    if slower_rows:
        out += ["", "Programs slower than Inductor in this run, and why:", ""]
        for r in slower_rows:
            why = SLOWER_BECAUSE.get(r["name"], "no reason recorded: investigate")
            out.append(f"- **{r['name']}** ({r['fir'] / r['inductor']:.2f}): {why}.")
    return "\n".join(out)


def cpu_model() -> str:
    """The CPU's model name and family/model numbers, as /proc/cpuinfo gives them (an AMD
    EPYC of family 25, model 17 is a Zen 4): the tables hold on one CPU each."""
    try:
        with open("/proc/cpuinfo") as f:
            fields = dict(ln.split(":", 1) for ln in f if ":" in ln)  # the last CPU's
    except OSError:
        return platform.processor() or "unknown CPU"
    get = {k.strip(): v.strip() for k, v in fields.items()}.get
    return f"{get('model name', '?')}, family {get('cpu family', '?')} model {get('model', '?')}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--only", nargs="*", default=None)
    # Inductor's cold compile takes 45-50 s a program on the GPU machine's 16-core host
    ap.add_argument("--no-cold", action="store_true", help="skip the cold compiles; no doc")
    ap.add_argument("--out", type=Path, default=DOC, help="the doc to write (another CPU's)")
    args = ap.parse_args()
    names = args.only or list(programs())
    repeat = 5 if args.quick else args.repeat
    rows = []
    for name in names:
        rows.append(measure(name, repeat))
        r = rows[-1]
        print(
            f"{name}: eager {r['eager'] * 1e3:.2f} ms, inductor {r['inductor'] * 1e3:.2f} ms, "
            f"fir {r['fir'] * 1e3:.2f} ms, fir-llvm {r['llvm'] * 1e3:.2f} ms",
            file=sys.stderr,
        )
    cold: dict[str, tuple[float, ...]] = {}
    if not (args.quick or args.no_cold):
        for name in names:
            cold[name] = (
                cold_compile(name, "fir"),
                cold_compile(name, "inductor"),
                cold_compile(name, "fir-llvm"),
            )
            print(
                f"{name}: cold compile fir {cold[name][0]:.2f} s, inductor {cold[name][1]:.2f} s, "
                f"fir-llvm {cold[name][2]:.2f} s",
                file=sys.stderr,
            )
    copy = plain_copy_gbs(repeat)
    text = table(rows, cold) + "\n\n" + verdict(rows, cold, copy) + "\n\n" + llvm_table(rows, cold)
    print(text)
    if args.quick or args.only or args.no_cold:
        return
    from fir.backends.cpu_tuning import turned_side

    machine = (
        f"{platform.machine()} ({cpu_model()}), {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, turned tiles of "
        f"{turned_side()} a side (measured on this machine)"
    )
    args.out.write_text(
        "# CPU: FIR's C++ back end against eager PyTorch and Inductor\n\n"
        f"Generated by `python benchmarks/bench_cpu.py` on {machine}: median of {repeat} "
        "interleaved calls per program, every result checked against eager.\n\n"
        + text
        + "\n\n"
        + ANALYSIS
    )
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
