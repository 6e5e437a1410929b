"""The runtime's memory: large buffers come from mappings that are recycled only once no tensor
views them any more."""

from __future__ import annotations

import gc

import pytest
import torch
from fir.backends.runtime import buffers
from fir.backends.runtime.buffers import LARGE_BUFFER, POOL, allocate

ELEMENTS = LARGE_BUFFER // 4  # f32: the smallest buffer that takes the mapped path


@pytest.fixture(autouse=True)
def _empty_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FIR_BUFFER_POOL_MB", raising=False)
    gc.collect()
    POOL.clear()


def test_small_buffers_come_from_torch() -> None:
    before = POOL.mapped
    t = allocate(1000, torch.float32, (10, 100))
    assert t.shape == (10, 100) and t.dtype == torch.float32 and t.is_contiguous()
    assert POOL.mapped == before


def test_a_dropped_buffer_is_reused_and_a_live_one_never_is() -> None:
    if not hasattr(buffers.mmap, "MADV_HUGEPAGE"):
        pytest.skip("no MADV_HUGEPAGE on this platform: large buffers come from torch")
    a = allocate(ELEMENTS, torch.float32)
    assert a.data_ptr() % buffers.HUGE_PAGE == 0
    a.fill_(1.0)
    view = a[5:10]  # a view keeps the memory in use after `a` goes
    del a
    b = allocate(ELEMENTS, torch.float32)
    assert b.data_ptr() != view.data_ptr() - 5 * 4
    b.fill_(2.0)
    assert bool((view == 1.0).all())  # untouched by the new buffer
    address = view.data_ptr() - 5 * 4
    del view
    reused = POOL.reused
    c = allocate(ELEMENTS, torch.float32, (ELEMENTS // 8, 8))
    assert c.data_ptr() == address and POOL.reused == reused + 1
    assert c.shape == (ELEMENTS // 8, 8)
    d = allocate(ELEMENTS, torch.float32)  # nothing free of this size: a fresh mapping
    assert d.data_ptr() not in (c.data_ptr(), b.data_ptr())


def test_the_pool_keeps_no_more_than_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    if not hasattr(buffers.mmap, "MADV_HUGEPAGE"):
        pytest.skip("no MADV_HUGEPAGE on this platform")
    monkeypatch.setenv("FIR_BUFFER_POOL_MB", "0")
    a = allocate(ELEMENTS, torch.float32)
    del a
    assert POOL.bytes == 0 and not any(POOL.free.values())
    monkeypatch.setenv("FIR_BUFFER_POOL_MB", str(LARGE_BUFFER >> 20))
    a, b = allocate(ELEMENTS, torch.float32), allocate(ELEMENTS, torch.float32)
    del a, b
    assert POOL.bytes == LARGE_BUFFER  # one kept, the other unmapped


def test_compiled_programs_recycle_their_outputs() -> None:
    """Each call's output is fresh memory while the caller holds the last one."""
    if not hasattr(buffers.mmap, "MADV_HUGEPAGE"):
        pytest.skip("no MADV_HUGEPAGE on this platform")
    from fir.backends.compile import compile_function
    from fir.ir.parser import parse_module
    from fir.passes.pipeline import parse_pipeline

    n = ELEMENTS
    text = f"""func @f(%x: f32[{n}]) -> (f32[{n}]) {{
  %y = mul %x, %x : f32[{n}]
  return %y
}}"""
    module = parse_pipeline("fusion").run(parse_module(text))
    program = compile_function(module.funcs[0], "cpp")
    x = torch.randn(n)
    first = program(x)[0]
    second = program(x * 2)[0]
    assert first.data_ptr() != second.data_ptr()
    torch.testing.assert_close(first, x * x)
    torch.testing.assert_close(second, (x * 2) * (x * 2))
    address = first.data_ptr()
    del first
    third = program(x * 3)[0]
    assert third.data_ptr() == address
    torch.testing.assert_close(second, (x * 2) * (x * 2))
    torch.testing.assert_close(third, (x * 3) * (x * 3))


def test_views_take_the_fast_maker_when_first_imported_while_torch_compile_traces() -> None:
    """FIR's runtime modules are first imported inside torch.compile's tracing, under fake
    tensors: the probe that picks PyTorch's C++ view maker ran on a fake tensor there, failed,
    and every call of every compiled program paid for ``torch.as_strided`` instead."""
    import subprocess
    import sys

    code = (
        "import torch\n"
        "from torch._subclasses.fake_tensor import FakeTensorMode\n"
        "with FakeTensorMode():\n"
        "    import fir.backends.runtime.layouts as layouts\n"
        "print(getattr(layouts.view, '__name__', ''))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() in ("_reinterpret_tensor", "_as_strided")
    try:
        from torch._C._dynamo.guards import _reinterpret_tensor  # noqa: F401
    except ImportError:  # a PyTorch without it: the public maker is right
        return
    assert out.stdout.strip() == "_reinterpret_tensor"
