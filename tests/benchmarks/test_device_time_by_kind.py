"""benchmarks/device_time_by_kind.py without a GPU: how kernels are put in kinds."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

from device_time_by_kind import aligned, by_kind, kind_of, split_phases  # noqa: E402


def test_kernels_fall_in_their_kinds() -> None:
    assert kind_of("nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_TNT") == "gemm"
    assert kind_of("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x64x8") == "gemm"
    assert kind_of("_mm_t_kernel") == "gemm"
    assert kind_of("cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_") == "attention"
    assert kind_of("kernel_k1") == "generated"
    assert kind_of("triton_per_fused_add_native_layer_norm_view_6") == "generated"
    assert (
        kind_of("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor")
        == "aten"
    )
    assert kind_of("Memcpy DtoD (Device -> Device)") == "other"


def test_kinds_sum_launches_and_time() -> None:
    times = {"kernel_k1": (2.0, 10.0), "triton_poi_x": (1.0, 5.0), "nvjet_a": (3.0, 30.0)}
    assert by_kind(times) == {"gemm": (3.0, 30.0), "generated": (3.0, 15.0)}


def test_the_backward_is_the_step_less_the_forward() -> None:
    # both programs have a kernel_k1: 12 launches in the forward, 1 in the backward
    step = {
        "kernel_k1": (13.0, 140.0),
        "kernel_sum_4_part": (12.0, 40.0),
        "kernel_k2": (24.0, 60.0),
    }
    forward = {"kernel_k1": (12.0, 130.0), "kernel_k2": (24.0, 60.0)}
    assert split_phases(step, forward) == {
        "kernel_k1": (1.0, 10.0),
        "kernel_sum_4_part": (12.0, 40.0),
    }


def test_sequences_align_on_library_kernels_and_pair_the_rest_in_order() -> None:
    """One BERT attention block as the two compilers launch it (measured on an H200): FIR runs
    the value projection before the softmax, Inductor after; the softmax still stands beside
    the softmax, the GEMMs beside theirs (Inductor's with ``bias_`` in the name), and what has
    no counterpart stands beside None."""
    f32 = "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x64x8"
    ind = [
        ("nvjet_tst_bias_TNN", 7.1),
        ("triton_poi_fused_copy_1", 3.3),
        (f32, 28.4),
        ("triton_per_fused__safe_softmax_6", 10.5),
        ("nvjet_tst_bias_TNN", 7.2),
        ("triton_poi_fused_copy_4", 3.3),
        (f32, 23.9),
        ("triton_poi_fused_view_5", 3.2),
    ]
    fir = [
        ("nvjet_tst_TNN", 5.9),
        ("nvjet_tst_TNN", 5.9),
        ("kernel__to_copy_2_cast", 2.8),
        ("kernel_mul", 3.1),
        (f32, 28.6),
        ("kernel_k1", 13.3),
        (f32, 24.0),
        ("kernel_view_13", 3.5),
    ]
    pairs = [(a[0] if a else None, b[0] if b else None) for a, b in aligned(ind, fir)]
    assert pairs == [
        (None, "nvjet_tst_TNN"),
        ("nvjet_tst_bias_TNN", "nvjet_tst_TNN"),
        ("triton_poi_fused_copy_1", "kernel__to_copy_2_cast"),
        (None, "kernel_mul"),
        (f32, f32),
        ("triton_per_fused__safe_softmax_6", "kernel_k1"),
        ("nvjet_tst_bias_TNN", None),
        ("triton_poi_fused_copy_4", None),
        (f32, f32),
        ("triton_poi_fused_view_5", "kernel_view_13"),
    ]
    # every kernel of both steps appears once
    assert sorted(a for a, _ in pairs if a) == sorted(n for n, _ in ind)
    assert sorted(b for _, b in pairs if b) == sorted(n for n, _ in fir)
