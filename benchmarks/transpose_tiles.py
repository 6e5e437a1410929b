"""The kernel of x + y.t() alone, in a C++ harness: the vectoriser's gathers in 32 x 32 tiles
against turned tiles of 16 to 128 a side (FIR's own ``fir_turn`` from the C++ prelude), and a
plain copy for scale. Min of 30 calls per variant, interleaved; the numbers behind
``schedule.TURNED_SIDE`` and the candidate sides that ``fir.backends.cpu_tuning`` times once
per machine (its probe is the turned variants alone, at two sizes, a few rounds).

    python benchmarks/transpose_tiles.py [--threads 1 2] [--n 2896]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
from pathlib import Path

from fir.backends.cpp.prelude import PRELUDE

HARNESS = r"""
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#define N NSIZE
__attribute__((target("prefer-vector-width=256")))
static void gather(const float* __restrict x, const float* __restrict y, float* __restrict z) {
  #pragma omp parallel for collapse(2)
  for (int64_t a0 = 0; a0 < N; a0 += 32)
    for (int64_t b0 = 0; b0 < N; b0 += 32)
      for (int64_t a = a0; a < fir_imin(a0 + 32, N); ++a) {
        #pragma omp simd
        for (int64_t b = b0; b < fir_imin(b0 + 32, N); ++b) z[N * a + b] = x[N * a + b] + y[a + N * b];
      }
}
template <int S>
static void turned(const float* __restrict x, const float* __restrict y, float* __restrict z) {
  #pragma omp parallel for collapse(2)
  for (int64_t a0 = 0; a0 < N; a0 += S)
    for (int64_t b0 = 0; b0 < N; b0 += S) {
      alignas(64) float t[S * S];
      fir_turn<S>(t, &y[a0 + N * b0], N, fir_imin(a0 + S, N) - a0, fir_imin(b0 + S, N) - b0);
      for (int64_t a = a0; a < fir_imin(a0 + S, N); ++a) {
        #pragma omp simd
        for (int64_t b = b0; b < fir_imin(b0 + S, N); ++b) z[N * a + b] = x[N * a + b] + t[S * (a - a0) + (b - b0)];
      }
    }
}
static void copy(const float* __restrict x, const float*, float* __restrict z) {
  #pragma omp parallel for
  for (int64_t i = 0; i < (int64_t)N * N; ++i) z[i] = x[i];
}
int main() {
  const size_t n = (size_t)N * N;
  float *x = (float*)aligned_alloc(64, n * 4), *y = (float*)aligned_alloc(64, n * 4);
  float *z = (float*)aligned_alloc(64, n * 4), *w = (float*)aligned_alloc(64, n * 4);
  for (size_t i = 0; i < n; ++i) { x[i] = rand() / 1e6f; y[i] = rand() / 1e6f; }
  typedef void (*F)(const float*, const float*, float*);
  F fs[] = {gather, turned<16>, turned<32>, turned<64>, turned<128>, copy};
  const char* names[] = {"gathers 32", "turned 16", "turned 32", "turned 64", "turned 128", "copy"};
  gather(x, y, w);
  for (int k = 1; k < 5; ++k) {
    fs[k](x, y, z);
    for (size_t i = 0; i < n; ++i) if (z[i] != w[i]) { printf("%s differs\n", names[k]); return 1; }
  }
  double best[6];
  for (int k = 0; k < 6; ++k) best[k] = 1e9;
  for (int rep = 0; rep < 30; ++rep)
    for (int k = 0; k < 6; ++k) {
      double t = omp_get_wtime();
      fs[k](x, y, z);
      t = omp_get_wtime() - t;
      if (t < best[k]) best[k] = t;
    }
  for (int k = 0; k < 6; ++k) printf("| %s | %.2f |\n", names[k], best[k] * 1e3);
  return 0;
}
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--n", type=int, default=2896)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        src, exe = Path(d) / "tiles.cpp", Path(d) / "tiles"
        src.write_text(PRELUDE + HARNESS.replace("NSIZE", str(args.n)))
        cxx = os.environ.get("CXX", "c++")
        flags = ["-O3", "-march=native", "-mprefer-vector-width=512", "-fopenmp", "-std=c++17"]
        subprocess.run([cxx, *flags, str(src), "-o", str(exe)], check=True)
        for t in args.threads:
            env = dict(os.environ, OMP_NUM_THREADS=str(t))
            print(f"\n{t} thread(s), x + y.t() at {args.n}^2 f32, ms (min of 30):\n")
            print("| variant | ms |\n|---|---|")
            print(
                subprocess.run(
                    [str(exe)], env=env, check=True, capture_output=True, text=True
                ).stdout,
                end="",
            )


if __name__ == "__main__":
    main()
