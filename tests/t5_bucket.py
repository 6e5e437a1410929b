"""T5's relative-position bucket as a ``.fir`` program, for the value-range tests
(tests/ir/test_ranges.py) and the Triton back end's (tests/backends/test_triton.py): a helper
module at the root of tests/, importable from every test folder (tests/conftest.py)."""

from __future__ import annotations

# T5's bucket (bidirectional, 32 buckets, max_exact 8, max_distance 128) over 64 positions,
# then the gather of a [rows, 2] table by it: distances up to 63 give buckets 0 to 29 (16 + 13
# at distance +63). ROWS and the outputs are filled in per test.
BUCKET = """
func @bucket(%table: f32[{rows}, 2]) -> ({outputs}) {{
  %b = pointwise : i64[64, 64] over (i0 < 64, i1 < 64) {{
    %0 = index i1 - i0 : i64
    %1 = gt %0, 0
    %2 = cast %1 : i64
    %3 = mul %2, 16
    %4 = abs %0
    %5 = lt %4, 8
    %6 = cast %4 : f32
    %7 = div %6, 8.0
    %8 = log %7
    %9 = div %8, 2.772588722239781
    %10 = mul %9, 8.0
    %11 = cast %10 : i64
    %12 = add %11, 8
    %13 = minimum %12, 15
    %14 = where %5, %4, %13
    %15 = add %3, %14
    yield %15
  }}
  %out = pointwise : f32[2, 64, 64] over (i0 < 2, i1 < 64, i2 < 64) {{
    %0 = load %b[64*i1 + i2]
    %1 = indirect %0 < {rows}
    %2 = load %table[2*%1 + i0]
    yield %2
  }}
  return {results}
}}
"""


def bucket_program(rows: int = 32, realized: bool = False) -> str:
    outputs = "i64[64, 64], f32[2, 64, 64]" if realized else "f32[2, 64, 64]"
    results = "%b, %out" if realized else "%out"
    return BUCKET.format(rows=rows, outputs=outputs, results=results)


def symbolic_bucket_program(rows: int = 32) -> str:
    """The bucket over ``s0`` positions (a dynamic sequence), the two position loops merged as
    a dynamic T5's graph has them (``mod(i0, s0) - floordiv(i0, s0)``): distances up to
    ``s0 - 1``, any length, so buckets 0 to 31 (16 + 15 at the largest distances)."""
    text = BUCKET.format(rows=rows, outputs="f32[2, s0, s0]", results="%out")
    text = text.replace(f"f32[{rows}, 2]", f"f32[{rows}, 2], %x: f32[s0]")
    text = text.replace(
        "%b = pointwise : i64[64, 64] over (i0 < 64, i1 < 64)",
        "%b = pointwise : i64[s0*s0] over (i0 < s0*s0)",
    )
    text = text.replace("%0 = index i1 - i0", "%0 = index mod(i0, s0) - floordiv(i0, s0)")
    text = text.replace(
        "f32[2, 64, 64] over (i0 < 2, i1 < 64, i2 < 64)",
        "f32[2, s0, s0] over (i0 < 2, i1 < s0, i2 < s0)",
    )
    return text.replace("%0 = load %b[64*i1 + i2]", "%0 = load %b[s0*i1 + i2]")
