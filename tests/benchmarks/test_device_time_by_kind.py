"""benchmarks/device_time_by_kind.py without a GPU: how kernels are put in kinds."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

from device_time_by_kind import by_kind, kind_of, split_phases  # noqa: E402


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
