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


def kept_results(node: Any, out: Any) -> list[Any]:
    """The results of an extern call that ``node`` names, in its results' order: all of them,
    or, where the call also returns values that are not tensors (``None``, sizes: cuDNN
    attention's), the positions its ``results`` attribute lists."""
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    positions = node.attrs.get("results")
    return outs if positions is None else [outs[k] for k in positions]


# Functional ops that have a variant writing into their first argument: where that argument's
# memory is released right after the call, the plan calls the variant instead and the result
# is that memory (Inductor's re-inplacing, for the collectives). The functional all-reduce
# clones its input first: a copy of the whole tensor per call.
IN_PLACE_VARIANTS: dict[str, str] = {
    "_c10d_functional.all_reduce.default": "_c10d_functional.all_reduce_.default",
}


def mutated_arguments(node: Any) -> list[Any]:
    """The tensors an extern call writes in place: the arguments at its ``mutates`` positions,
    each a value or a list of values (a ``Tensor(a!)[]`` argument: every tensor in it)."""
    from .graph import Value

    positions = node.attrs.get("mutates")
    if not isinstance(positions, list):
        return []
    out: list[Any] = []
    for k in positions:
        if not isinstance(k, int) or not 0 <= k < len(node.args):
            continue
        a = node.args[k]
        for v in a if isinstance(a, list) else [a]:
            if isinstance(v, Value) and v not in out:
                out.append(v)
    return out
