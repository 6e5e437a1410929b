"""Choices of the CPU back ends measured once per machine and cached: the side of a turned tile.

A kernel that reads a transposed input in tiles copies each tile turned, in 8 x 8 register
blocks, and reads the copy in order (``schedule.turned_loads``). Which side of tile is fastest
depends on the CPU more than on anything FIR can see (its caches, its prefetchers, how its
cores share them): ``x + y.t()`` at 2896^2 f32 on two threads ran fastest in tiles of 64 a side
on an AMD EPYC (Zen 4: 14 ms against 25 at 32), of 128 on a 2-core Xeon (3.8 ms against 4.4 at
64), and within 10% at any side on a 16-core Xeon. So the C++ and LLVM back ends ask
:func:`turned_side`, which times the candidate sides (``schedule.TURNED_SIDES``) on this machine
the first time a kernel turns tiles, and keeps the answer in the cache (``tuning/``), keyed by
what the answer depends on: the CPU, the compiler and the threads.

The probe is the turned-tile loop of the C++ back end (the prelude's ``fir_turn``) over
``x + y.t()`` at two sizes, a power of two and not (their tiles map onto the caches
differently), each side timed in interleaved rounds (the minimum of each, summed over the two
sizes). It takes about a second and a half, once. A side replaces the default
(``schedule.TURNED_SIDE``) only where it is at least :data:`MARGIN` faster, so that noise
does not flip the choice between machines of one kind.

What is cached is a number, read back as one and used only if it is one of the candidate sides:
a cache entry never becomes code. ``FIR_TURNED_SIDE`` sets the side (one of the candidates) and
skips the probe; where no C++ compiler runs, the default side is used.
"""

from __future__ import annotations

import ctypes
import os
import threading
from dataclasses import replace
from functools import lru_cache

from fir.backends.cache import Cache, cache_key
from fir.backends.plan.schedule import CPP, LLVM, TURNED_SIDE, TURNED_SIDES, Family
from fir.ir.errors import FirError

SIZES = (2048, 2896)  # the probe's square sizes: a power of two and not
ROUNDS = 8  # interleaved rounds; each side's best of them counts
MARGIN = 0.05  # a side other than the default wins only where at least this much faster
_lock = threading.Lock()


def probe_source(sides: tuple[int, ...] = TURNED_SIDES) -> str:
    """The C++ of the probe: ``fir_probe_turned(n, rounds, best)`` times ``z = x + y.t()`` at
    ``n`` x ``n`` f32 in turned tiles of each of ``sides``, ``rounds`` interleaved rounds, and
    writes each side's best time in seconds to ``best``; it returns 0, -1 where the memory
    could not be had, -2 where a variant's result was wrong."""
    from fir.backends.cpp.prelude import PRELUDE

    variants = ", ".join(f"turned<{s}>" for s in sides)
    return (
        PRELUDE
        + """
#include <omp.h>
#include <stdlib.h>
template <int S>
static void turned(const float* __restrict x, const float* __restrict y, float* __restrict z,
                   int64_t n) {
  #pragma omp parallel for collapse(2)
  for (int64_t a0 = 0; a0 < n; a0 += S)
    for (int64_t b0 = 0; b0 < n; b0 += S) {
      alignas(64) float t[S * S];
      fir_turn<S>(t, &y[a0 + n * b0], n, fir_imin(a0 + S, n) - a0, fir_imin(b0 + S, n) - b0);
      for (int64_t a = a0; a < fir_imin(a0 + S, n); ++a) {
        #pragma omp simd
        for (int64_t b = b0; b < fir_imin(b0 + S, n); ++b)
          z[n * a + b] = x[n * a + b] + t[S * (a - a0) + (b - b0)];
      }
    }
}
typedef void (*fir_variant)(const float*, const float*, float*, int64_t);
extern "C" int fir_probe_turned(int64_t n, int rounds, double* best) {
  const fir_variant variants[] = {VARIANTS};
  const int count = sizeof variants / sizeof variants[0];
  const size_t bytes = ((size_t)n * n * 4 + 63) / 64 * 64;
  float* x = (float*)aligned_alloc(64, bytes);
  float* y = (float*)aligned_alloc(64, bytes);
  float* z = (float*)aligned_alloc(64, bytes);
  if (!x || !y || !z) { free(x); free(y); free(z); return -1; }
  #pragma omp parallel for
  for (int64_t i = 0; i < n * n; ++i) { x[i] = (float)(i % 7); y[i] = (float)(i % 5); z[i] = 0; }
  for (int k = 0; k < count; ++k) best[k] = 1e30;
  for (int r = 0; r < rounds; ++r)
    for (int k = 0; k < count; ++k) {
      const double t = omp_get_wtime();
      variants[k](x, y, z, n);
      const double dt = omp_get_wtime() - t;
      if (dt < best[k]) best[k] = dt;
    }
  int wrong = 0;  // each variant's result, checked once: a broken one is not a candidate
  for (int k = 0; k < count && !wrong; ++k) {
    variants[k](x, y, z, n);
    for (int64_t a = 0; a < n && !wrong; ++a)
      for (int64_t b = 0; b < n; ++b)
        if (z[n * a + b] != x[n * a + b] + y[a + n * b]) { wrong = 1; break; }
  }
  free(x); free(y); free(z);
  return wrong ? -2 : 0;
}
""".replace("VARIANTS", variants)
    )


class ProbeFailed(Exception):
    """The probe could not measure (no memory) or measured a wrong kernel."""


class BadTuningSetting(FirError):
    """A tuning variable of the environment (``FIR_TURNED_SIDE``) names no candidate."""


def choose(times: dict[int, float], default: int = TURNED_SIDE, margin: float = MARGIN) -> int:
    """The side to use given each side's time: the fastest, unless it beats ``default`` by less
    than ``margin``."""
    best = min(times, key=lambda s: times[s])
    if default in times and times[best] > times[default] * (1 - margin):
        return default
    return best


def _measure() -> dict[int, float]:
    """Each candidate side's time (seconds, summed over :data:`SIZES`) on this machine."""
    from fir.backends.cpp.compiler import compile_source, load_library

    lib = load_library(compile_source(probe_source()))
    fn = lib.fir_probe_turned
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_int64, ctypes.c_int, ctypes.POINTER(ctypes.c_double)]
    total = dict.fromkeys(TURNED_SIDES, 0.0)
    for n in SIZES:
        best = (ctypes.c_double * len(TURNED_SIDES))()
        status = fn(n, ROUNDS, best)
        if status != 0:
            raise ProbeFailed(
                f"the turned-tile probe at {n}^2: "
                + ("no memory" if status == -1 else "a variant's result was wrong")
            )
        for side, t in zip(TURNED_SIDES, best, strict=True):
            total[side] += t
    return total


def parse_side(text: str | bytes | None) -> int | None:
    """A side read from the environment or the cache: one of the candidates, else None."""
    if text is None:
        return None
    try:
        side = int(text.strip())
    except ValueError:
        return None
    return side if side in TURNED_SIDES else None


def _key() -> str:
    """What the best side depends on: the CPU, the compiler and its flags, the threads."""
    from fir.backends.cpp.compiler import library_key

    affinity = getattr(os, "sched_getaffinity", None)  # Linux: the cores this process may use
    cores = len(affinity(0)) if affinity is not None else os.cpu_count()
    threads = os.environ.get("OMP_NUM_THREADS", "") + "/" + str(cores)
    return cache_key("turned-side", library_key(probe_source())[2], threads)


@lru_cache(maxsize=1)
def turned_side() -> int:
    """The side of a turned tile of 4-byte elements on this machine: ``FIR_TURNED_SIDE``, else
    the cached measurement, else measured now (and cached); the default side where no C++
    compiler runs or the probe fails."""
    from fir.backends.cpp.compiler import BuildError

    given = os.environ.get("FIR_TURNED_SIDE")
    if given:
        side = parse_side(given)
        if side is None:
            raise BadTuningSetting(
                f"FIR_TURNED_SIDE={given!r}: the side of a turned tile is one of "
                + ", ".join(map(str, TURNED_SIDES))
            )
        return side
    with _lock:
        try:
            key = _key()
            cache = Cache("tuning")
            side = parse_side(cache.read(key))
            if side is None:
                side = choose(_measure())
                cache.store(key, lambda tmp: tmp.write_text(f"{side}\n"))
        except (BuildError, OSError, ProbeFailed):
            return TURNED_SIDE
    return side


def tuned(family: Family) -> Family:
    """``family`` with this machine's measured choices (asked when a kernel needs them)."""
    return replace(family, turned_side=turned_side)


CPP_TUNED = tuned(CPP)
LLVM_TUNED = tuned(LLVM)
