"""Accuracy and speed of the llvm back end's f32 math functions (backends/llvm/vecmath.py).

Each function runs through the real compiled path (a one-op FIR program JIT-compiled by the
llvm back end) on >= 1M inputs: uniform over a useful range, log-uniform over all magnitudes
of both signs, points next to the hard spots (zeros, poles, range limits) and the special
values. The reference is float64 (numpy / scipy.special; float64 is ~1e-9 ulp of f32 away from
exact, far below what is measured), the error is in ulp of the f32 reference. Throughput is
compared with torch's own f32 op, both on one thread.

    python benchmarks/llvm_math.py                # table to stdout and docs/llvm-math.md
    python benchmarks/llvm_math.py --only exp,tanh --n 200000
    python benchmarks/llvm_math.py --fit           # the fitted coefficients of vecmath.py
"""

from __future__ import annotations

import argparse
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
F32_MAX = float(np.finfo(np.float32).max)


@dataclass(frozen=True)
class Case:
    """One function: its float64 reference, the range its inputs are drawn from, the points
    next to which they cluster, the documented bound (ulp) and notes on its domain."""

    name: str
    ref: Callable[[np.ndarray], np.ndarray]
    lo: float
    hi: float
    hard: tuple[float, ...] = ()
    bound: float = 2.0
    notes: str = ""
    log_range: tuple[float, float] = (-45.0, 38.5)  # log10 magnitudes of the log-uniform part
    speed_range: tuple[float, float] | None = None  # inputs of the timing; (lo, hi) if None


def _scipy() -> object:
    import scipy.special

    return scipy.special


def _np(name: str) -> Callable[[np.ndarray], np.ndarray]:
    return getattr(np, name)


def _sp(name: str) -> Callable[[np.ndarray], np.ndarray]:
    return lambda x: getattr(_scipy(), name)(x)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return _scipy().expit(x)  # type: ignore[attr-defined]


TRIG = "whole f32 range (table-driven x*2/pi mod 4); +-inf: NaN"
DIGAMMA_HARD = (1.4616321, 0.0, -0.5044, -1.5734, -2.6107, 2.0, 10.0)  # roots, 0, switch points
DIGAMMA = "negative integers and -inf: NaN; +-0: -+inf"
EXP = "pure f32; overflow past 88.72, subnormal results below -87.3"
CASES = [
    Case(
        "exp", _np("exp"), -104, 89, (0.0, 88.72, -87.3, -103.3), notes=EXP, speed_range=(-80, 80)
    ),
    Case(
        "exp2",
        _np("exp2"),
        -150,
        128,
        (0.0, 127.99, -126.0, -149.0),
        notes="overflow at 128",
        speed_range=(-120, 120),
    ),
    Case(
        "expm1",
        _np("expm1"),
        -20,
        89,
        (0.0, 88.72, -1e-7, 1e-7, 0.35, -0.35),
        notes="-1 below ~-17",
    ),
    Case(
        "sigmoid",
        _sigmoid,
        -110,
        110,
        (0.0, -88.0, -103.0),
        bound=4,
        notes="pure f32: t/(1+t) or 1/(1+t), t = exp(-|x|)",
        speed_range=(-80, 80),
    ),
    Case(
        "log",
        _np("log"),
        0,
        100,
        (1.0, 0.707, 1.414),
        notes="pure f32; x<0: NaN; 0: -inf; subnormals exact",
    ),
    Case("log2", _np("log2"), 0, 100, (1.0, 0.707, 1.414), notes="x<0: NaN; 0: -inf"),
    Case("log10", _np("log10"), 0, 100, (1.0, 0.707, 1.414), notes="x<0: NaN; 0: -inf"),
    Case("log1p", _np("log1p"), -1, 100, (-1.0, 0.0, -0.29, 0.41), notes="x<-1: NaN; -1: -inf"),
    Case("sin", _np("sin"), -1e4, 1e4, (0.0, math.pi, 1e4 * math.pi), notes=TRIG),
    Case("cos", _np("cos"), -1e4, 1e4, (0.0, math.pi / 2, 3 * math.pi / 2), notes=TRIG),
    Case("tan", _np("tan"), -1e4, 1e4, (0.0, math.pi / 2, math.pi), notes=TRIG),
    Case("atan", _np("arctan"), -20, 20, (0.0, 0.414, 1.0, 2.414), bound=4),
    Case("asin", _np("arcsin"), -1, 1, (0.0, 0.5, 1.0, -1.0), bound=4, notes="|x|>1: NaN"),
    Case("acos", _np("arccos"), -1, 1, (0.0, 0.5, 1.0, -1.0), bound=4, notes="|x|>1: NaN"),
    Case("tanh", _np("tanh"), -12, 12, (0.0, 0.625, 9.0), bound=4, notes="pure f32"),
    Case("sinh", _np("sinh"), -90, 90, (0.0, 89.41, -89.41), bound=4, notes="overflow past 89.4"),
    Case("cosh", _np("cosh"), -90, 90, (0.0, 89.41, -89.41), bound=4, notes="overflow past 89.4"),
    Case("asinh", _np("arcsinh"), -20, 20, (0.0, 1e10), bound=4),
    Case("acosh", _np("arccosh"), 1, 50, (1.0, 1e10), bound=4, notes="x<1: NaN"),
    Case(
        "atanh",
        _np("arctanh"),
        -1,
        1,
        (0.0, 1.0, -1.0, 0.5),
        bound=4,
        notes="|x|>1: NaN; +-1: +-inf",
    ),
    Case("erf", _sp("erf"), -6, 6, (0.0, 0.75, -0.75, 3.9), bound=4),
    Case(
        "erfc", _sp("erfc"), -6, 11, (0.0, 0.75, -0.75, 10.05, 9.0), bound=4, notes="0 past 10.06"
    ),
    Case(
        "erfinv",
        _sp("erfinv"),
        -1,
        1,
        (0.0, 1.0, -1.0, 0.9973, 0.5),
        bound=4,
        notes="|x|>1: NaN; +-1: +-inf",
    ),
    Case("digamma", _sp("psi"), -20, 30, DIGAMMA_HARD, bound=4, notes=DIGAMMA),
]
SPECIALS = np.array(
    [
        0.0,
        -0.0,
        1.0,
        -1.0,
        math.inf,
        -math.inf,
        math.nan,
        1e-45,
        -1e-45,
        1.1754942e-38,
        F32_MAX,
        -F32_MAX,
        0.5,
        -0.5,
        2.0,
        -2.0,
    ],
    dtype=np.float32,
)


def inputs(case: Case, n: int, seed: int = 0) -> np.ndarray:
    """About n f32 inputs: 40% uniform, 40% log-uniform magnitudes (both signs), 20% within a
    few thousand ulp of the hard points, and the special values."""
    rng = np.random.default_rng(seed)
    parts = [rng.uniform(case.lo, case.hi, int(0.4 * n))]
    lo, hi = case.log_range
    mag = 10.0 ** rng.uniform(lo, hi, int(0.4 * n))
    parts.append(mag * rng.choice([-1.0, 1.0], mag.size))
    per = int(0.2 * n) // max(1, len(case.hard))
    for h in case.hard:
        base = np.float32(h)
        k = rng.integers(-3000, 3000, per).astype(np.int64)
        bits = (np.abs(base).view(np.int32).astype(np.int64) + k).clip(0, 0x7F7FFFFF)
        v = bits.astype(np.int32).view(np.float32)
        parts.append(np.where(base < 0, -v, v).astype(np.float64) * rng.choice([-1.0, 1.0], per))
    with np.errstate(over="ignore"):
        x = np.concatenate([p.astype(np.float32) for p in parts] + [SPECIALS])
    return x


def compiled(op: str, n: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """The one-op program ``%y = op %x`` on f32[n], JIT-compiled by the llvm back end."""
    from fir.backends.compile import compile_function
    from fir.ir.parser import parse_module
    from fir.passes.pipeline import parse_pipeline

    text = f"func @f(%x: f32[{n}]) -> (f32[{n}]) {{\n  %y = {op} %x : f32[{n}]\n  return %y\n}}\n"
    module = parse_pipeline("fusion").run(parse_module(text, "<llvm_math>"))
    program = compile_function(module.funcs[0], "llvm")

    def run(x: torch.Tensor) -> torch.Tensor:
        return program(x)[0]

    run.n = n  # type: ignore[attr-defined]
    return run


def ulp_errors(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """|got - ref| in ulp of the f32 grid at ref; 0 where both are the same special (inf, NaN,
    or ref rounds to the same f32 infinity), inf where only one is NaN or infinite."""
    with np.errstate(all="ignore"):
        r32 = ref.astype(np.float32)
        exp = np.frexp(np.where(np.isfinite(r32), r32, 1.0).astype(np.float64))[1]
        ulp = np.ldexp(1.0, np.maximum(exp, -125) - 24)
        err = np.abs(got.astype(np.float64) - ref) / ulp
        same = ((got == r32) & np.isinf(r32)) | (np.isnan(got) & np.isnan(ref))
        err = np.where(same, 0.0, err)
        bad = ~same & (np.isnan(got) | np.isnan(ref) | np.isinf(got) | np.isinf(r32))
        return np.where(bad, np.inf, err)


def reference(case: Case, x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.asarray(case.ref(x.astype(np.float64)), dtype=np.float64)


def torch_op(name: str) -> Callable[[torch.Tensor], torch.Tensor]:
    return getattr(torch.special, name, None) or getattr(torch, name)


def specials_match(op: str, f: Callable[[torch.Tensor], torch.Tensor]) -> bool:
    """The special inputs give torch's NaNs, infinities and signed zeros (finite values are
    judged against the float64 reference instead: torch flushes some subnormals, e.g.
    log1p(1e-45) = 0, and its f32 digamma is off by a few ulp)."""
    x = SPECIALS
    mine = f(torch.from_numpy(np.resize(x, f.n)))[: x.size].numpy()  # type: ignore[attr-defined]
    want = torch_op(op)(torch.from_numpy(x)).numpy()
    ref = reference(next(c for c in CASES if c.name == op), x)
    same_nan = np.isnan(mine) == np.isnan(want)
    inf_ok = ~np.isinf(want) | (mine == want)
    zero = (want == 0) & (ref == 0)
    zero_ok = ~zero | ((mine == 0) & (np.signbit(mine) == np.signbit(want)))
    return bool(np.all(same_nan & inf_ok & zero_ok))


def measure(case: Case, n: int) -> dict[str, object]:
    x = inputs(case, n)
    f = compiled(case.name, x.size)
    got = f(torch.from_numpy(x)).numpy()
    err = ulp_errors(got, reference(case, x))
    k = int(np.argmax(err))
    return {
        "name": case.name,
        "n": x.size,
        "max": float(err[k]),
        "at": float(x[k]),
        "specials": specials_match(case.name, f),
        "speed": speed(case, f, x.size),
    }


def speed(case: Case, f: Callable[[torch.Tensor], torch.Tensor], n: int) -> tuple[float, float]:
    """(ours, torch's) elements per second, one thread each, best of five, on n inputs uniform
    on the case's range (typical values: the accuracy mix has many subnormal results, which
    slow some f32 code down by microcode assists; the exp family is timed on inputs with normal
    results for that reason)."""
    lo, hi = case.speed_range or (case.lo, case.hi)
    x = np.random.default_rng(7).uniform(lo, hi, n).astype(np.float32)
    xt = torch.from_numpy(x)
    op = torch_op(case.name)

    def best(g: Callable[[], object]) -> float:
        g()
        ts = []
        for _ in range(5):
            t = time.perf_counter()
            g()
            ts.append(time.perf_counter() - t)
        return x.size / min(ts)

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return best(lambda: f(xt)), best(lambda: op(xt))
    finally:
        torch.set_num_threads(threads)


def table(rows: list[dict[str, object]]) -> str:
    by = {c.name: c for c in CASES}
    head = "| function | inputs | max ulp | at input | bound | specials = torch "
    head += "| Melem/s (ours / torch) | domain notes |"
    out = [head, "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        c = by[str(r["name"])]
        ours, theirs = r["speed"]  # type: ignore[misc]
        out.append(
            f"| {c.name} | {r['n']:,} | {r['max']:.3f} | {r['at']:.9g} | {c.bound:g} | "
            f"{'yes' if r['specials'] else 'NO'} | {ours / 1e6:.0f} / {theirs / 1e6:.0f} | "
            f"{c.notes.replace('|', '&#124;')} |"
        )
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--only", default="")
    ap.add_argument("--fit", action="store_true")
    ap.add_argument("--no-doc", action="store_true")
    args = ap.parse_args()
    if args.fit:
        fit()
        return
    os.environ["FIR_LLVM_THREADS"] = "1"  # one thread each, like torch below
    only = set(args.only.split(",")) - {""}
    rows = []
    for c in CASES:
        if only and c.name not in only:
            continue
        rows.append(measure(c, args.n))
        r = rows[-1]
        line = f"{c.name:8s} n={r['n']:,} max={r['max']:.3f} ulp at {r['at']!r}"
        print(f"{line} specials={r['specials']} speed={r['speed']}", flush=True)
    print(table(rows))
    if not only and not args.no_doc:
        write_doc(rows)


def write_doc(rows: list[dict[str, object]]) -> None:
    path = ROOT / "docs" / "llvm-math.md"
    text = path.read_text() if path.exists() else ""
    start, end = "<!-- table -->", "<!-- /table -->"
    if start in text:
        head, rest = text.split(start, 1)
        text = head + start + "\n" + table(rows) + "\n" + end + rest.split(end, 1)[1]
        path.write_text(text)
    else:
        print(f"{path} has no {start} marker: table not written")


# -- the fits behind vecmath.py's tables (needs mpmath; prints them for pasting)


def _nodes(lo: float, hi: float, n: int) -> tuple[np.ndarray, list[object]]:
    """n Chebyshev nodes as u in [-1, 1] and as mpmath numbers x in [lo, hi]."""
    import mpmath as mp

    u = np.cos(np.pi * (np.arange(n) + 0.5) / n)
    return u, [mp.mpf(lo) + (mp.mpf(hi) - lo) * (mp.mpf(float(v)) + 1) / 2 for v in u]


def fit_chebyshev(
    f: Callable[[object], object], lo: float, hi: float, deg: int
) -> tuple[np.ndarray, float]:
    """Least-squares Chebyshev series of f on [lo, hi] (600 nodes), and its max relative error
    on a fine grid."""
    u, x = _nodes(lo, hi, 600)
    y = np.array([float(f(v)) for v in x])  # type: ignore[arg-type]
    c = np.linalg.lstsq(np.polynomial.chebyshev.chebvander(u, deg), y, rcond=None)[0]
    ut, xt = _nodes(lo, hi, 3001)
    yt = np.array([float(f(v)) for v in xt])  # type: ignore[arg-type]
    return c, float(np.max(np.abs(np.polynomial.chebyshev.chebval(ut, c) - yt) / np.abs(yt)))


def fit_power(
    f: Callable[[object], object], lo: float, hi: float, deg: int
) -> tuple[np.ndarray, float]:
    """Power-basis polynomial fitted to f on Chebyshev nodes of [lo, hi], weighted for relative
    error, and its max relative error."""
    import mpmath as mp

    u, _ = _nodes(lo, hi, 600)
    x = lo + (hi - lo) * (u + 1) / 2
    y = np.array([float(f(mp.mpf(float(v)))) for v in x])
    c = np.linalg.lstsq(
        np.vander(x, deg + 1, increasing=True) / np.abs(y)[:, None], np.sign(y), rcond=None
    )[0]
    xt = np.linspace(lo, hi, 3001)
    yt = np.array([float(f(mp.mpf(float(v)))) for v in xt])
    return c, float(np.max(np.abs(np.polyval(c[::-1], xt) - yt) / np.abs(yt)))


def fit_weighted(
    f: Callable[[object], object],
    lo: float,
    hi: float,
    deg: int,
    center: float,
    weight: Callable[[object], object],
) -> tuple[np.ndarray, float]:
    """Power-basis polynomial in x - center fitted to f on Chebyshev nodes of [lo, hi], its
    error weighted by ``weight`` (the error it makes in the function the fit serves), and that
    max weighted error."""
    import mpmath as mp

    u, _ = _nodes(lo, hi, 800)
    x = lo + (hi - lo) * (u + 1) / 2
    y = np.array([float(f(mp.mpf(float(v)))) for v in x])
    w = np.array([float(weight(mp.mpf(float(v)))) for v in x])  # type: ignore[arg-type]
    v = np.vander(x - center, deg + 1, increasing=True)
    c = np.linalg.lstsq(v * w[:, None], y * w, rcond=None)[0]
    xt = np.linspace(lo, hi, 4001)
    yt = np.array([float(f(mp.mpf(float(t)))) for t in xt])
    wt = np.array([float(weight(mp.mpf(float(t)))) for t in xt])  # type: ignore[arg-type]
    return c, float(np.max(np.abs(np.polyval(c[::-1], xt - center) - yt) * wt))


def fit() -> None:
    import mpmath as mp

    mp.mp.dps = 40
    x0 = mp.findroot(mp.digamma, 1.46)
    k = 2.5  # erfc's map t = (x - k)/(x + k)

    def erfinv_over_y(w: object) -> object:
        y = mp.sqrt(-mp.expm1(-w))
        return mp.erfinv(y) / y if w != 0 else mp.sqrt(mp.pi) / 2

    fits = {
        "EXPM1_Q": fit_power(
            lambda r: (mp.expm1(r) - r) / r**2 if r else mp.mpf(0.5), -0.3536, 0.3536, 7
        ),
        "ATAN_P": fit_power(
            lambda z: mp.atan(mp.sqrt(z)) / mp.sqrt(z) if z else mp.mpf(1), 0, 0.17177, 8
        ),
        "ERF_P": fit_power(
            lambda z: mp.erf(mp.sqrt(z)) / mp.sqrt(z) if z else 2 / mp.sqrt(mp.pi), 0, 0.5631, 8
        ),
        "ERFCX_T": fit_chebyshev(
            lambda t: (lambda x: mp.erfc(x) * mp.exp(x * x) * x)(k * (1 + t) / (1 - t)),
            (0.75 - k) / (0.75 + k),
            (10.1 - k) / (10.1 + k),
            17,
        ),
        "ERFINV_C": fit_chebyshev(erfinv_over_y, 0, 5, 21),
        "ERFINV_T": fit_chebyshev(lambda s: erfinv_over_y(s * s), math.sqrt(5), 6.1, 26),
        "DIGAMMA_R": fit_chebyshev(
            lambda x: mp.digamma(x) / (x - x0) if abs(x - x0) > 1e-30 else mp.psi(1, x0), 1, 2, 18
        ),
    }
    # the pure-f32 kernels' fits, rounded to f32
    fits["EXPM1_Q_F32"] = fit_power(
        lambda r: (mp.expm1(r) - r) / r**2 if r else mp.mpf(0.5), -0.3501, 0.3501, 5
    )
    fits["TANH_P_F32"] = fit_power(
        lambda z: (mp.tanh(mp.sqrt(z)) / mp.sqrt(z) - 1) / z if z else mp.mpf(-1) / 3, 0, 0.391, 5
    )
    # pure-f32 erf: Q with 2/sqrt(pi) taken out (the kernel adds it as a head and tail), and
    # L(a) = log(erfcx(a)) weighted by erfc/erf, the relative error it makes in erf
    c0 = 2 / mp.sqrt(mp.pi)
    fits["ERF_Q_F32"] = fit_weighted(
        lambda z: (mp.erf(mp.sqrt(z)) / mp.sqrt(z) - c0) / z if z else -c0 / 3,
        0, 0.5625, 5, 0.0, lambda z: 1,
    )  # fmt: skip
    fits["ERF_L_F32"] = fit_weighted(
        lambda a: mp.log(mp.erfc(a)) + a * a,
        0.75, 4.0, 8, 2.375, lambda a: mp.erfc(a) / mp.erf(a),
    )  # fmt: skip
    for name, (c, e) in fits.items():
        if name.endswith("_F32"):
            c = c.astype(np.float32).astype(np.float64)
        print(f"# max relative fit error {e:.1e}")
        print(f"{name} = ({', '.join(repr(float(v)) for v in c)})")
    print(f"DIGAMMA_ROOT = ({float(x0)!r}, {float(x0 - mp.mpf(float(x0)))!r})")
    print(f"ASYM = ({', '.join(repr(float(mp.bernoulli(2 * j) / (2 * j))) for j in range(1, 8))})")


if __name__ == "__main__":
    main()
