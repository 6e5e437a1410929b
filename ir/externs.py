"""How extern-call arguments that are not FIR attribute values are written.

An extern node calls a library op (``extern "aten.empty.memory_format"(...)``) whose arguments
may include PyTorch objects with no FIR type: devices, layouts, memory formats. They are written
as strings ``"torch:KIND=NAME"`` and turned back into the objects when the call is made.
"""

from __future__ import annotations

from typing import Any

PREFIX = "torch:"


def encode_torch_object(obj: Any) -> str | None:
    """``torch.device('cpu')`` → ``"torch:device=cpu"``; None for objects with no encoding."""
    import torch

    if isinstance(obj, torch.device):
        return f"{PREFIX}device={obj}"
    if isinstance(obj, torch.memory_format):
        return f"{PREFIX}memory_format={str(obj).removeprefix('torch.')}"
    if isinstance(obj, torch.layout):
        return f"{PREFIX}layout={str(obj).removeprefix('torch.')}"
    return None


def decode_torch_object(text: str) -> Any:
    """The inverse of :func:`encode_torch_object`; other strings are returned unchanged."""
    if not text.startswith(PREFIX) or "=" not in text:
        return text
    import torch

    kind, _, name = text[len(PREFIX) :].partition("=")
    if kind == "device":
        return torch.device(name)
    if kind in ("memory_format", "layout"):
        return getattr(torch, name)
    return text
