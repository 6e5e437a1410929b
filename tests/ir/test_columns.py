"""The column rule (:func:`fir.ir.symbolic.walks_columns`), shared by the ``split-reductions``
pass and the Triton block schedule: which reductions walk memory along their outputs."""

from __future__ import annotations

from fir.ir.symbolic import FloorDiv, Modulo, index_var, run_stride, walks_columns

i0, r0 = index_var("i0"), index_var("r0")


def test_a_plain_column_sum_and_a_row_sum() -> None:
    assert walks_columns([768 * r0 + i0], [i0], [r0])
    assert not walks_columns([768 * i0 + r0], [i0], [r0])


def test_a_per_row_load_does_not_make_a_column_reduction_a_row_reduction() -> None:
    indices = [768 * r0 + i0, r0]
    assert walks_columns(indices, [i0], [r0])


def test_outputs_split_into_runs_of_a_head_still_walk_memory_along_them() -> None:
    # attention's query gradient read head-major for a bias gradient: runs of 64 features
    head_major = (
        196608 * FloorDiv(r0, 256) + 16384 * FloorDiv(i0, 64) + 64 * Modulo(r0, 256)
    ) + Modulo(i0, 64)
    assert run_stride(head_major, i0) == 1
    assert walks_columns([head_major], [i0], [r0])
    # runs shorter than CONTIGUOUS_RUN do not count (8 elements, then a jump)
    short = 4096 * r0 + 512 * FloorDiv(i0, 8) + Modulo(i0, 8)
    assert run_stride(short, i0) is None
    assert not walks_columns([short], [i0], [r0])
