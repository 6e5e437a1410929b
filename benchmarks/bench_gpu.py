"""FIR against eager PyTorch and Inductor on an NVIDIA GPU, in one process and one run.

    python benchmarks/bench_gpu.py                 # the table, written to docs/benchmarks/gpu.md
    python benchmarks/bench_gpu.py --quick         # fewer repetitions, no cold compiles, no doc
    python benchmarks/bench_gpu.py --only softmax layer_norm --no-cold
    python benchmarks/bench_gpu.py --scale 0.25    # a quarter of the rows of the big shapes
    python benchmarks/bench_gpu.py --cpu-smoke     # the script's logic on the CPU, tiny shapes

The programs are those of ``bench_cpu.py`` (same names, same Python functions) at GPU sizes. Each
runs with eager PyTorch, Inductor (``torch.compile``, default mode) and FIR
(``torch.compile(backend="fir")``). Times are GPU times from ``triton.testing.do_bench`` (CUDA
events, L2 flushed before each call, median): the three columns are timed in turn for a few
rounds, so the machine's noise hits every column alike, and the figure is the median of the round
medians. Every result is checked against eager. Also reported:

* GB/s: the unique bytes the program reads and writes (inputs and outputs once) per second, and
  that as a fraction of what a plain ``copy_`` streams at in the same run;
* kernels: FIR's (fused groups and loop nodes in none) and Inductor's
  (``torch._inductor.metrics.generated_kernel_count``);
* cold compile: the first call of a fresh process with empty caches (FIR's, Inductor's and
  Triton's), minus the same process's second call, for each compiler;
* per-launch host overhead: the host time of a call of the tiny program, not synchronised;
* CUDA graphs: a chain of about ten small kernels with and without FIR's ``cuda_graphs`` option.

Tensors are 8192x4096 f32 (128 MiB, well past the L2 of any GPU this runs on) unless said
otherwise.
"""

from __future__ import annotations

import argparse
import dataclasses
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks" / "gpu.md"
TINY = "tiny (overhead)"
# Not bound by memory: the matmul is compute, and deep_chain's 40 sines per element cost more
# than its one read and write. The tiny program is per-call overhead; both are left out of the
# copy-bandwidth bar.
NOT_BANDWIDTH_BOUND = ("mlp_epilogue", "deep_chain", TINY)
BELOW_COPY_BAR = 0.90
SLOWEST_BAR = 1.10
DEEP_CHAIN_COLD_BAR_S = 5.0
CUDA_GRAPHS_BAR = 3.0


@dataclass(frozen=True)
class Sizes:
    """The shapes of the programs. ``scaled`` multiplies the row count (the leading dimension)
    of the big ones, for quick tries; the copy reference keeps its size, since it is the
    machine's figure and not a program's."""

    rows: int = 8192
    cols: int = 4096
    # transpose_add's x is [square_rows, square], y its transpose's shape: 5792^2 f32 is the
    # bytes of 8192 x 4096 f32, square so that neither side's reads are the easy ones
    square_rows: int = 5792
    square: int = 5792
    nchw: tuple[int, int, int, int] = (64, 64, 64, 64)  # 64 MiB f32
    ce: tuple[int, int] = (16384, 8192)  # rows of logits, vocabulary (512 MiB f32)
    mm: tuple[int, int, int] = (4096, 4096, 4096)  # M, K, N
    attn: tuple[int, int, int] = (16, 32, 512)  # batch, heads, sequence
    tiny: int = 8
    ten: int = 64  # ten_kernels' square side
    # copy_ references: 8192 x 4096 f32 (the programs' size) and 256 MiB
    copies: tuple[tuple[int, int], ...] = ((8192, 4096), (8192, 8192))

    def scaled(self, f: float) -> Sizes:
        if f == 1:
            return self

        def rows(n: int) -> int:
            return max(1, round(n * f))

        return dataclasses.replace(
            self,
            rows=rows(self.rows),
            square_rows=rows(self.square_rows),
            nchw=(rows(self.nchw[0]), *self.nchw[1:]),
            ce=(rows(self.ce[0]), self.ce[1]),
            mm=(rows(self.mm[0]), *self.mm[1:]),
            attn=(rows(self.attn[0]), *self.attn[1:]),
        )


GPU = Sizes()
# --cpu-smoke: every tensor a few KB, so that the whole script runs in seconds on a CPU
SMOKE = Sizes(
    rows=16,
    cols=64,
    square_rows=32,
    square=32,
    nchw=(2, 4, 8, 8),
    ce=(16, 64),
    mm=(16, 32, 32),
    attn=(1, 2, 16),
    ten=16,
    copies=((16, 64), (64, 64)),
)


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


def ten_kernels(x: torch.Tensor) -> torch.Tensor:
    """Ten mean subtractions along alternating dimensions: each mean needs the whole result of
    the step before along the other dimension, so no two steps share a kernel and a compiler
    launches about ten small ones: a program whose time is launches, for CUDA graphs."""
    for i in range(10):
        x = x - x.mean(dim=i % 2, keepdim=True)
    return x


Program = tuple[Callable[..., Any], Callable[[], list[torch.Tensor]]]


def programs(sizes: Sizes = GPU, device: str = "cuda") -> dict[str, Program]:
    """bench_cpu's programs at ``sizes``: name -> (function, maker of its arguments). The makers
    are called one program at a time, so only one program's tensors live at once."""
    g = torch.Generator(device=device).manual_seed(0)
    R, C = sizes.rows, sizes.cols

    def rn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g, device=device)

    n, c, h, w = sizes.nchw
    ce_rows, vocab = sizes.ce
    m, k, mm_n = sizes.mm
    batch, heads, seq = sizes.attn
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
        "transpose_add": (
            lambda x, y: x + y.t(),
            lambda: [rn(sizes.square_rows, sizes.square), rn(sizes.square, sizes.square_rows)],
        ),
        "sum_dim0": (lambda x: x.sum(0), lambda: [rn(R, C)]),
        "bn_relu_residual": (
            _bn_relu_residual,
            lambda: [rn(n, c, h, w), rn(c), rn(c).abs() + 0.5, rn(c), rn(c), rn(n, c, h, w)],
        ),
        "cross_entropy": (
            lambda logits, t: F.cross_entropy(logits, t),
            lambda: [
                rn(ce_rows, vocab),
                torch.randint(0, vocab, (ce_rows,), generator=g, device=device),
            ],
        ),
        "mlp_epilogue": (
            lambda x, w, b: torch.relu(x @ w + b),
            lambda: [rn(m, k), rn(k, mm_n), rn(mm_n)],
        ),
        "attn_softmax": (
            lambda s, mask: torch.softmax(s * 0.125 + mask, -1),
            lambda: [rn(batch, heads, seq, seq), rn(1, 1, seq, seq)],
        ),
        "deep_chain": (_deep_chain, lambda: [rn(R, C)]),
        TINY: (lambda x: x * 2 + 1, lambda: [rn(sizes.tiny)]),
    }


# --------------------------------------------------------------------------------------------
# Timing


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


@dataclass(frozen=True)
class Timing:
    """How one column is timed. On CUDA, ``do_bench``: GPU time between events, which leaves out
    the host (the per-launch overhead section measures that) and flushes L2 before each call so
    that a 128 MiB program never reads its input from cache. On the CPU (--cpu-smoke only), a
    median of perf_counter calls: the logic is tested there, not the numbers."""

    device: str
    rounds: int = 3
    warmup_ms: int = 25
    rep_ms: int = 200
    cpu_calls: int = 3

    def once(self, fn: Callable[[], Any]) -> float:
        """One round: the median time of ``fn``, in seconds."""
        if self.device == "cuda":
            # warmup, rep and return_mode are keywords of do_bench in Triton 3.6 and 3.9 alike
            from triton.testing import do_bench

            ms = do_bench(fn, warmup=self.warmup_ms, rep=self.rep_ms, return_mode="median")
            return float(ms) / 1e3
        fn()
        times = []
        for _ in range(self.cpu_calls):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return statistics.median(times)

    def interleaved(self, fns: dict[str, Callable[[], Any]]) -> dict[str, float]:
        """Every column once per round, in turn; the median of each column's round medians."""
        per: dict[str, list[float]] = {k: [] for k in fns}
        for _ in range(self.rounds):
            for k, f in fns.items():
                per[k].append(self.once(f))
        return {k: statistics.median(v) for k, v in per.items()}


def _host_loop(f: Callable[[], Any], device: str, calls: int) -> float:
    """Host seconds per call of ``calls`` calls queued without waiting, then one wait: with
    kernels far shorter than a launch, this is what the host spends per call."""
    _sync(device)
    t = time.perf_counter()
    for _ in range(calls):
        f()
    _sync(device)
    return (time.perf_counter() - t) / calls


def _wall(f: Callable[[], Any], device: str, calls: int) -> float:
    """Median wall seconds of a call that waits for the device: launches and GPU time both."""
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        f()
        _sync(device)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


# --------------------------------------------------------------------------------------------
# Checks and counts


def _outs(x: Any) -> list[torch.Tensor]:
    return list(x) if isinstance(x, (tuple, list)) else [x]


def _bytes(args: list[torch.Tensor], out: Any) -> int:
    """Unique bytes of the inputs and outputs: a tensor seen twice (an output that is an input)
    is counted once, since it is read or written from memory once."""
    seen: dict[int, int] = {}
    for t in [*args, *_outs(out)]:
        nbytes = t.numel() * t.element_size()
        seen[t.data_ptr()] = max(seen.get(t.data_ptr(), 0), nbytes)
    return sum(seen.values())


def _check(name: str, got: Any, want: Any) -> None:
    for a, b in zip(_outs(got), _outs(want)):
        if b.dtype in (torch.float16, torch.bfloat16):
            tol = 1e-2
        elif name == "deep_chain":
            # 200 ops, 40 of them sines whose GPU implementations round differently from
            # PyTorch's: the difference grows along the chain
            tol = 1e-2
        else:
            tol = 2e-3
        torch.testing.assert_close(a, b, rtol=tol, atol=tol)


def _fir_graphs(start: int) -> tuple[int, bool]:
    """FIR's kernels over the graphs compiled since ``start``, and whether every one of them
    runs FIR's code (a graph without a program runs with PyTorch, a fallback, not FIR)."""
    from fir.frontend.dynamo import COMPILED
    from fir.ir.kernels import kernel_count

    new = COMPILED[start:]
    kernels = sum(kernel_count(g.module.funcs[0]) for g in new)
    return kernels, bool(new) and all(g.program is not None for g in new)


def _compiled_pair(fn: Callable[..., Any], args: list[torch.Tensor]) -> tuple[Any, Any, int, int]:
    """Inductor's and FIR's compilations of ``fn``, called once each (which compiles them):
    (inductor, fir, Inductor's kernel count, index of FIR's first graph in COMPILED)."""
    from fir.frontend.dynamo import COMPILED
    from torch._inductor import metrics

    # a fresh Dynamo and zeroed metrics, so that the count is this program's kernels only
    torch._dynamo.reset()
    metrics.reset()
    inductor = torch.compile(fn)
    inductor(*args)
    inductor_kernels = metrics.generated_kernel_count
    start = len(COMPILED)
    fir = torch.compile(fn, backend="fir")
    fir(*args)
    return inductor, fir, inductor_kernels, start


class Row(TypedDict):
    name: str
    eager: float  # seconds
    inductor: float
    fir: float
    bytes: int
    fir_kernels: int
    inductor_kernels: int
    fir_compiled: bool


def measure(name: str, sizes: Sizes, timing: Timing) -> Row:
    fn, make = programs(sizes, timing.device)[name]
    args = make()
    with torch.no_grad():
        want = fn(*args)
        inductor, fir, inductor_kernels, start = _compiled_pair(fn, args)
        _check(name, inductor(*args), want)
        _check(name, fir(*args), want)
        fir_kernels, fir_compiled = _fir_graphs(start)
        med = timing.interleaved(
            {
                "eager": lambda: fn(*args),
                "inductor": lambda: inductor(*args),
                "fir": lambda: fir(*args),
            }
        )
    row: Row = {
        "name": name,
        "eager": med["eager"],
        "inductor": med["inductor"],
        "fir": med["fir"],
        "bytes": _bytes(args, want),
        "fir_kernels": fir_kernels,
        "inductor_kernels": inductor_kernels,
        "fir_compiled": fir_compiled,
    }
    return row


def copy_gbs(sizes: Sizes, timing: Timing) -> dict[tuple[int, int], float]:
    """What ``out.copy_(x)`` streams at (read + write) for each reference shape: the ceiling a
    memory-bound kernel can reach on this device, measured in the same run as the programs."""
    out: dict[tuple[int, int], float] = {}
    for shape in sizes.copies:
        x = torch.randn(*shape, device=timing.device)
        y = torch.empty_like(x)
        t = timing.interleaved({"copy": lambda x=x, y=y: y.copy_(x)})["copy"]
        out[shape] = 2 * x.numel() * x.element_size() / t / 1e9
        del x, y
    return out


# --------------------------------------------------------------------------------------------
# Per-launch overhead and CUDA graphs


@dataclass
class Overhead:
    eager_us: float
    inductor_us: float
    fir_us: float
    fir_kernels: int
    inductor_kernels: int
    fir_compiled: bool


def launch_overhead(sizes: Sizes, device: str, calls: int, rounds: int) -> Overhead:
    """Host microseconds per call of the tiny program (x * 2 + 1 on 8 elements)."""
    fn, make = programs(sizes, device)[TINY]
    args = make()
    with torch.no_grad():
        inductor, fir, inductor_kernels, start = _compiled_pair(fn, args)
        fir_kernels, fir_compiled = _fir_graphs(start)
        cols: dict[str, Callable[[], Any]] = {
            "eager": lambda: fn(*args),
            "inductor": lambda: inductor(*args),
            "fir": lambda: fir(*args),
        }
        for f in cols.values():  # warm: Dynamo's guards and caches, the allocator
            for _ in range(10):
                f()
        per: dict[str, list[float]] = {k: [] for k in cols}
        for _ in range(rounds):
            for k, f in cols.items():
                per[k].append(_host_loop(f, device, calls))
    us = {k: statistics.median(v) * 1e6 for k, v in per.items()}
    return Overhead(
        us["eager"], us["inductor"], us["fir"], fir_kernels, inductor_kernels, fir_compiled
    )


def _first_cause(e: BaseException) -> str:
    """The innermost exception's first line: Dynamo wraps a backend's error in its own, whose
    first line names the backend but not what went wrong."""
    for _ in range(8):  # a bounded walk: a chain that loops back ends here
        # Dynamo keeps the backend's error as inner_exception (and as the context, not the
        # cause, in the versions seen)
        inner = e.__cause__ or getattr(e, "inner_exception", None) or e.__context__
        if not isinstance(inner, BaseException) or inner is e:
            break
        e = inner
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0] if lines else ''}"


@dataclass
class Graphs:
    fir_us: float  # wall per call, synchronised, without the option
    inductor_us: float  # Inductor's default mode, for reference
    graphs_us: float | None  # with options={"cuda_graphs": True}; None where not supported
    fir_kernels: int
    inductor_kernels: int
    error: str | None = None

    @property
    def ratio(self) -> float | None:
        return None if self.graphs_us is None else self.fir_us / self.graphs_us


def cuda_graphs(sizes: Sizes, device: str, calls: int, rounds: int) -> Graphs:
    """ten_kernels with FIR, with and without its ``cuda_graphs`` option: the wall time of a
    synchronised call, where ten launches dominate ten tiny kernels."""
    g = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(sizes.ten, sizes.ten, generator=g, device=device)
    with torch.no_grad():
        want = ten_kernels(x)
        inductor, fir, inductor_kernels, start = _compiled_pair(ten_kernels, [x])
        _check("ten_kernels", fir(x), want)
        fir_kernels, _ = _fir_graphs(start)
        cols: dict[str, Callable[[], Any]] = {
            "fir": lambda: fir(x),
            "inductor": lambda: inductor(x),
        }
        error = None
        try:
            graphs = torch.compile(ten_kernels, backend="fir", options={"cuda_graphs": True})
            # clone at once: a replayed graph may write its next result into the same memory
            _check("ten_kernels", [t.clone() for t in _outs(graphs(x))], want)
            cols["graphs"] = lambda: graphs(x)
        except Exception as e:  # the option may not exist yet: the section says n/a, with why
            error = _first_cause(e)
        for f in cols.values():
            for _ in range(10):
                f()
        per: dict[str, list[float]] = {k: [] for k in cols}
        for _ in range(rounds):
            for k, f in cols.items():
                per[k].append(_wall(f, device, calls))
    us = {k: statistics.median(v) * 1e6 for k, v in per.items()}
    return Graphs(us["fir"], us["inductor"], us.get("graphs"), fir_kernels, inductor_kernels, error)


# --------------------------------------------------------------------------------------------
# Cold compile

COLD = """
import sys
sys.path.insert(0, {bench!r})
import bench_gpu
bench_gpu.cold_child({name!r}, {backend!r}, {scale!r})
"""


def cold_child(name: str, backend: str, scale: float) -> None:
    """In a fresh process (see :func:`cold_compile`): print the first compiled call's time less
    the second's, both waited for."""
    fn, make = programs(GPU.scaled(scale), "cuda")[name]
    args = make()

    def timed(f: Callable[..., Any]) -> float:
        torch.cuda.synchronize()
        t = time.perf_counter()
        f(*args)
        torch.cuda.synchronize()
        return time.perf_counter() - t

    with torch.no_grad():
        # the CUDA context, cuBLAS's handle and the allocator's first blocks are the process's
        # start, not either compiler's: an eager call pays them first
        timed(fn)
        f = torch.compile(fn) if backend == "inductor" else torch.compile(fn, backend=backend)
        first = timed(f)
        second = timed(f)
    print(json.dumps(first - second))


def cold_compile(name: str, backend: str, scale: float) -> float:
    """First call of a fresh process with empty caches, less the second call's time (what the
    compiled code takes once compiled); NaN where the process failed (its stderr is shown)."""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(
            os.environ,
            FIR_CACHE_DIR=f"{tmp}/fir",
            TORCHINDUCTOR_CACHE_DIR=f"{tmp}/inductor",
            TRITON_CACHE_DIR=f"{tmp}/triton",
        )
        code = COLD.format(bench=str(ROOT / "benchmarks"), name=name, backend=backend, scale=scale)
        try:
            out = subprocess.run(
                [sys.executable, "-c", code],
                env=env,
                capture_output=True,
                text=True,
                check=True,
                timeout=600,
            )
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
            tail = (e.stderr or "")[-2000:] if isinstance(e.stderr, str) else ""
            print(f"{name}: cold compile with {backend} failed:\n{tail}", file=sys.stderr)
            return math.nan
        return float(json.loads(out.stdout.strip().splitlines()[-1]))


# --------------------------------------------------------------------------------------------
# Report

# Why a program streams below 90% of the copy bandwidth, where one does: printed under the
# verdict for every bandwidth-bound program below the bar (one without an entry says so).
BELOW_COPY_BECAUSE: dict[str, str] = {
    "sum_dim0": (
        "a reduction reads its 134 MB and writes almost nothing, where the copy reference "
        "reads and writes as much in a kernel twice as long: on the H100 the fastest read of "
        "those bytes measured (a contiguous row sum in Triton, "
        "benchmarks/gpu_read_bandwidth.py) takes 56.0 us, 84% of copy, and 2,760 GB/s (94%) "
        "only at twice the size. FIR's column sum (128 programs of 32 outputs, blocks of 64 "
        "rows) takes 58 us, within 4% of that read; splitting its rows into 2-32 chunks "
        "(split-reductions' partials, a second kernel) measured 60 us or more. What would "
        "close the rest: nothing in this kernel; the bar's reference is a copy"
    ),
    "cross_entropy": (
        "the logits are read once (rows of 8,192 are persistent); the loss over the 16,384 "
        "rows (a gathered logit each) is split into 64 chunks (split-reductions) where one "
        "program took 28 us"
    ),
}

# Why a program is slower than Inductor, where one is: printed under the verdict for every
# program whose ratio is above 1 in the run (one without an entry says so).
_SAME = (
    "within the run-to-run spread: the kernel streams at the same fraction of copy bandwidth "
    "as Inductor's (94-99%)"
)
SLOWER_BECAUSE: dict[str, str] = {
    **{
        n: _SAME
        for n in (
            "pointwise_chain",
            "bias_gelu",
            "softmax",
            "layer_norm",
            "rms_norm",
            "residual_rms_norm",
            "transpose_add",
            "bn_relu_residual",
            "attn_softmax",
            "mlp_epilogue",
        )
    },
    "sum_dim0": "see below 90% of copy",
    "cross_entropy": "see below 90% of copy",
    "deep_chain": (
        "compute-bound (40 sin a element): with 1,024 elements and 4 warps a block it took "
        "1.72 ms; a kernel with 8 or more costly ops a element now gets one element a thread "
        "(256 x 8 warps: 1.28 ms)"
    ),
    "tiny (overhead)": (
        "host time per call: the GPU waits for the host. FIR's runtime, in Python, checks the "
        "inputs, allocates the output and packs the launch arguments for cuLaunchKernel "
        "(ctypes); Inductor's generated wrapper calls its C++ launcher. CUDA graphs remove it "
        "(the ten_kernels line)"
    ),
}


def _ratio(r: Row) -> float:
    return r["fir"] / r["inductor"]


def _big(rows: list[Row]) -> list[Row]:
    return [r for r in rows if r["name"] != TINY]


def geomean(rows: list[Row]) -> float:
    """Geometric mean of FIR / Inductor over the large programs (all but the tiny one)."""
    big = _big(rows)
    if not big:
        return math.nan
    return math.exp(statistics.mean(math.log(_ratio(r)) for r in big))


def _gbs(r: Row, col: str) -> float:
    return r["bytes"] / 1e9 / r[col]  # type: ignore[literal-required]


def _seconds(s: float) -> str:
    return "failed" if math.isnan(s) else f"{s:.2f} s"


def table(rows: list[Row], cold: dict[str, tuple[float, float]], copy: float) -> str:
    head = (
        "| program | eager | Inductor | FIR | FIR / Inductor | GB/s eager / Inductor / FIR | "
        "% of copy Inductor / FIR | kernels FIR / Inductor | cold compile FIR / Inductor |"
    )
    lines = [head, "|" + "---|" * 9]
    for r in rows:
        name = r["name"]
        cold_text = f"{_seconds(cold[name][0])} / {_seconds(cold[name][1])}" if name in cold else ""
        flag = "" if r["fir_compiled"] else " (not compiled)"
        gbs = " / ".join(f"{_gbs(r, c):.0f}" for c in ("eager", "inductor", "fir"))
        frac = (
            f"{_gbs(r, 'inductor') / copy:.0%} / {_gbs(r, 'fir') / copy:.0%}"
            if name not in NOT_BANDWIDTH_BOUND
            else "-"
        )
        lines.append(
            f"| {name}{flag} | {r['eager'] * 1e3:.3f} ms | {r['inductor'] * 1e3:.3f} ms | "
            f"{r['fir'] * 1e3:.3f} ms | {_ratio(r):.2f} | {gbs} | {frac} | "
            f"{r['fir_kernels']} / {r['inductor_kernels']} | {cold_text} |"
        )
    lines.append("")
    lines.append(
        f"Geometric mean of FIR / Inductor over the {len(_big(rows))} large programs: "
        f"{geomean(rows):.2f}."
    )
    return "\n".join(lines)


def _bar(ok: bool) -> str:
    return "met" if ok else "NOT met"


def verdict(
    rows: list[Row],
    cold: dict[str, tuple[float, float]] | None = None,
    copy: float | None = None,
    overhead: Overhead | None = None,
    graphs: Graphs | None = None,
) -> str:
    """The run against the GPU bars, with the reasons recorded for every miss."""
    cold = cold or {}
    out: list[str] = []
    if copy is not None:
        out += [f"A plain copy (`out.copy_(x)`, f32, read + write) streams at {copy:.0f} GB/s.", ""]
    big = _big(rows)
    if big:
        geo = geomean(rows)
        out.append(f"- geometric mean of FIR / Inductor at most 1.00: {geo:.2f} ({_bar(geo <= 1)})")
        worst = max(big, key=_ratio)
        above = [r["name"] for r in big if _ratio(r) > SLOWEST_BAR]
        out.append(
            f"- none above {SLOWEST_BAR:.2f} times Inductor (tiny left out: see the per-launch "
            f"overhead): slowest {worst['name']} at {_ratio(worst):.2f} ({_bar(not above)})"
            + (f"; above: {', '.join(above)}" if above else "")
        )
    more = [r["name"] for r in rows if r["fir_kernels"] > r["inductor_kernels"]]
    fewer = [r["name"] for r in rows if r["fir_kernels"] < r["inductor_kernels"]]
    fir_total = sum(r["fir_kernels"] for r in rows)
    inductor_total = sum(r["inductor_kernels"] for r in rows)
    out.append(
        f"- kernels at most Inductor's on every program ({_bar(not more)}): FIR {fir_total}, "
        f"Inductor {inductor_total} in all"
        + (f"; fewer on {', '.join(fewer)}" if fewer else "")
        + (f"; more on {', '.join(more)}" if more else "")
    )
    fallback = [r["name"] for r in rows if not r["fir_compiled"]]
    if fallback:
        out.append(f"- FIR did not compile (PyTorch ran the graph): {', '.join(fallback)}")
    below: list[str] = []
    if copy is not None:
        bound = [r for r in rows if r["name"] not in NOT_BANDWIDTH_BOUND]
        if bound:
            out.append(f"- fraction of copy bandwidth (bar: {BELOW_COPY_BAR:.0%}):")
        for r in bound:
            frac = _gbs(r, "fir") / copy
            out.append(
                f"  - {r['name']}: FIR {_gbs(r, 'fir'):.0f} GB/s, {frac:.0%} of copy "
                f"(Inductor {_gbs(r, 'inductor') / copy:.0%})"
            )
            if frac < BELOW_COPY_BAR:
                below.append(r["name"])
        if bound:
            out.append(
                f"- below {BELOW_COPY_BAR:.0%} of copy: {', '.join(below)}"
                if below
                else f"- every bandwidth-bound program at {BELOW_COPY_BAR:.0%} of copy or more"
            )
    if cold:
        slower = [n for n, (f, i) in cold.items() if not f < i]  # NaN (a failure) is not below
        out.append(
            f"- cold compile below Inductor's on every program ({_bar(not slower)}): FIR "
            f"{_seconds(sum(f for f, _ in cold.values()))}, Inductor "
            f"{_seconds(sum(i for _, i in cold.values()))} in all"
            + (f"; not below on {', '.join(slower)}" if slower else "")
        )
        if "deep_chain" in cold:
            dc = cold["deep_chain"][0]
            out.append(
                f"- deep_chain cold compile below {DEEP_CHAIN_COLD_BAR_S:.0f} s: "
                f"{_seconds(dc)} ({_bar(dc < DEEP_CHAIN_COLD_BAR_S)})"
            )
    if overhead is not None:
        out.append(
            f"- per-launch host overhead (tiny; kernels FIR / Inductor: {overhead.fir_kernels} / "
            f"{overhead.inductor_kernels}"
            + ("" if overhead.fir_compiled else ", FIR not compiled")
            + f"): FIR {overhead.fir_us:.1f} us, Inductor {overhead.inductor_us:.1f} us, "
            f"eager {overhead.eager_us:.1f} us per call"
        )
    if graphs is not None:
        ratio = graphs.ratio
        text = (
            f"{ratio:.2f}x ({_bar(ratio >= CUDA_GRAPHS_BAR)}): {graphs.fir_us:.1f} -> "
            f"{graphs.graphs_us:.1f} us a call"
            if ratio is not None and graphs.graphs_us is not None
            else f"n/a ({graphs.error or 'not measured'})"
        )
        out.append(
            f"- CUDA graphs at least {CUDA_GRAPHS_BAR:.0f}x faster on ten_kernels "
            f"(kernels FIR / Inductor: {graphs.fir_kernels} / {graphs.inductor_kernels}; "
            f"Inductor {graphs.inductor_us:.1f} us a call): {text}"
        )
    if below:
        out += ["", f"Bandwidth-bound programs below {BELOW_COPY_BAR:.0%} of copy, and why:", ""]
        for name in below:
            why = BELOW_COPY_BECAUSE.get(name, "no reason recorded: investigate")
            out.append(f"- **{name}**: {why}.")
    slower_rows = [r for r in rows if r["fir"] > r["inductor"]]
    if slower_rows:
        out += ["", "Programs slower than Inductor in this run, and why:", ""]
        for r in slower_rows:
            why = SLOWER_BECAUSE.get(r["name"], "no reason recorded: investigate")
            out.append(f"- **{r['name']}** ({_ratio(r):.2f}): {why}.")
    return "\n".join(out)


def _versions(device: str) -> str:
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:  # a CPU machine for --cpu-smoke need not have it
        triton_version = "not installed"
    if device == "cuda":
        where = f"{torch.cuda.get_device_name()}, CUDA {torch.version.cuda}"
    else:
        where = f"CPU ({platform.machine()}, {os.cpu_count()} cores; --cpu-smoke)"
    return (
        f"{where}, torch {torch.__version__}, Triton {triton_version}, "
        f"Python {platform.python_version()}"
    )


def document(text: str, timing: Timing, copies: dict[tuple[int, int], float]) -> str:
    copy_text = ", ".join(f"{a} x {b}: {gbs:.0f} GB/s" for (a, b), gbs in copies.items())
    return (
        "# GPU: FIR against eager PyTorch and Inductor\n\n"
        f"Generated by `python benchmarks/bench_gpu.py` on {_versions(timing.device)}. "
        f"Each program: {timing.rounds} rounds of `triton.testing.do_bench` (warm-up "
        f"{timing.warmup_ms} ms, {timing.rep_ms} ms, median; L2 flushed before each call) for "
        "eager, Inductor and FIR in turn, the median of the round medians; every result checked "
        "against eager. f32 matmuls with TF32 "
        f"{'on' if torch.backends.cuda.matmul.allow_tf32 else 'off'}. Copy references "
        f"(`out.copy_(x)`, f32): {copy_text}.\n\n" + text + "\n"
    )


def cold_only(path: Path, names: list[str], scale: float) -> None:
    """Measure the cold compiles of ``names`` into ``path``, written after every program (a run
    cut short keeps what it measured) and merged with the programs an earlier run on the same
    device and versions wrote there, so that the suite can be measured in parts."""
    device = _versions("cuda")
    measured: dict[str, list[float]] = {}
    if path.exists():
        earlier = json.loads(path.read_text())
        if earlier["device"] == device:
            measured = earlier["cold"]
        else:
            print(f"bench_gpu: replacing {path}, measured on {earlier['device']}", file=sys.stderr)
    for name in names:
        measured[name] = [cold_compile(name, "fir", scale), cold_compile(name, "inductor", scale)]
        print(f"{name}: cold compile fir / inductor {measured[name]}", file=sys.stderr)
        path.write_text(json.dumps({"device": device, "cold": measured}, indent=1) + "\n")


# The document's hand-written part (where the time goes, history): everything from this heading
# on is kept when the script rewrites the generated part above it.
NOTES_HEADING = "## Notes"


def write_document(doc: str) -> None:
    notes = ""
    if DOC.exists():
        old = DOC.read_text()
        at = old.find("\n" + NOTES_HEADING + "\n")
        if at >= 0:
            notes = old[at:]
    DOC.write_text(doc.rstrip("\n") + "\n" + notes if notes else doc)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions, no cold, no doc")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="these programs (or prefixes)")
    ap.add_argument("--no-cold", action="store_true", help="skip the cold compiles")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the big shapes' rows")
    ap.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 3)")
    ap.add_argument("--cpu-smoke", action="store_true", help="the logic on the CPU, tiny shapes")
    ap.add_argument(
        "--cold-only",
        metavar="JSON",
        help="only the cold compiles (FIR, Inductor), written to JSON with the device",
    )
    ap.add_argument(
        "--cold-from",
        metavar="JSON",
        help="the cold compiles of an earlier --cold-only run on this machine, not measured again",
    )
    args = ap.parse_args()

    smoke = args.cpu_smoke
    if not smoke and not torch.cuda.is_available():
        print(
            "bench_gpu: no CUDA device here (torch.cuda.is_available() is False); run it on a "
            "GPU machine, or with --cpu-smoke to test the script's logic on the CPU",
            file=sys.stderr,
        )
        sys.exit(1)
    device = "cpu" if smoke else "cuda"
    sizes = SMOKE if smoke else GPU.scaled(args.scale)
    if args.quick or smoke:
        timing = Timing(device, rounds=args.rounds or 2, warmup_ms=10, rep_ms=50)
    else:
        timing = Timing(device, rounds=args.rounds or 3)
    launch_calls, graph_calls = (20, 10) if smoke else (200, 50) if args.quick else (1000, 200)

    table_names = list(programs(sizes, device))
    names = table_names
    if args.only:
        names = []
        for want in args.only:
            hits = [n for n in table_names if n == want] or [
                n for n in table_names if n.startswith(want)
            ]
            if not hits:
                ap.error(f"no program '{want}' (programs: {', '.join(table_names)})")
            names += [n for n in hits if n not in names]

    if args.cold_only:
        cold_only(Path(args.cold_only), names, args.scale)
        return
    copies = copy_gbs(sizes, timing)
    copy = max(copies.values())
    print(f"copy: {copy:.1f} GB/s", file=sys.stderr)
    rows: list[Row] = []
    for name in names:
        rows.append(measure(name, sizes, timing))
        if device == "cuda":
            # the program's tensors went with measure's frame: give their blocks back, so
            # the next program's (up to 1 GiB) start from an empty pool
            torch.cuda.empty_cache()
        r = rows[-1]
        print(
            f"{name}: eager {r['eager'] * 1e3:.3f} ms, inductor {r['inductor'] * 1e3:.3f} ms, "
            f"fir {r['fir'] * 1e3:.3f} ms, kernels {r['fir_kernels']} / {r['inductor_kernels']}",
            file=sys.stderr,
        )
    overhead = launch_overhead(sizes, device, launch_calls, timing.rounds)
    graphs = cuda_graphs(sizes, device, graph_calls, timing.rounds)
    cold: dict[str, tuple[float, float]] = {}
    if args.cold_from:
        earlier = json.loads(Path(args.cold_from).read_text())
        if earlier["device"] != _versions("cuda"):
            print(f"bench_gpu: {args.cold_from} is from {earlier['device']}", file=sys.stderr)
            sys.exit(1)
        cold = {n: tuple(v) for n, v in earlier["cold"].items() if n in names}  # type: ignore[misc]
    elif not (args.quick or args.no_cold or smoke):
        for name in names:
            cold[name] = (
                cold_compile(name, "fir", args.scale),
                cold_compile(name, "inductor", args.scale),
            )
            print(
                f"{name}: cold compile fir {_seconds(cold[name][0])}, "
                f"inductor {_seconds(cold[name][1])}",
                file=sys.stderr,
            )
    text = table(rows, cold, copy) + "\n\n" + verdict(rows, cold, copy, overhead, graphs)
    print(text)
    doc = document(text, timing, copies)
    if smoke:
        # the document is rendered (its code runs) but a CPU run's numbers never replace it
        print(f"cpu smoke: {DOC.relative_to(ROOT)} not written ({len(doc)} chars rendered)")
        return
    if args.quick or args.only or args.scale != 1:
        return
    write_document(doc)
    print(f"wrote {DOC.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
