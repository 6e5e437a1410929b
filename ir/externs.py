"""What an extern call may name, and how its arguments that are not FIR values are written.

An extern node calls a library op (``extern "aten.empty.memory_format"(...)``). A ``.fir`` file
is data that people share (dumps, bug reports): reading or running one must never run code the
file chooses. So an extern callee is one of two things, and nothing else:

- an operator registered with PyTorch's dispatcher: ``NAMESPACE.OP.OVERLOAD``
  (``aten.mm.default``, ``_c10d_functional.all_reduce.default``, a ``torch.library`` custom op)
  or ``NAMESPACE.OP`` (the op's overload packet, which dispatches among its overloads). It is
  looked up under ``torch.ops`` one name at a time, and each step must give the dispatcher's
  own kind of object (a namespace, an overload packet, an overload), so a name can never reach
  a Python module or function that ``torch.ops`` or a namespace happens to hold;
- one of :data:`TORCH_FUNCTIONS`, the few ``torch.*`` functions FIR's passes emit.

:func:`callee_problem` decides by the name alone, without torch (``fir-opt`` never imports it);
the verifier reports what it says. :func:`resolve_callee` (interpreter, compiled runtime)
checks again, then looks the name up.

Arguments that are PyTorch objects with no FIR type (devices, layouts, memory formats) are
written as strings ``"torch:KIND=NAME"`` and turned back into the objects when the call is made;
layouts and memory formats come from the written tables below, never from ``getattr(torch, …)``
of a name the file chose.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from . import fir_ops
from .dtypes import DType
from .errors import ExternResultError, FirError, Location
from .graph import ExternNode, Node, Value, alias_root

PREFIX = "torch:"

# the ``torch.*`` functions an extern may call: exactly those FIR's passes emit (lowering a
# ``constant`` too large to write as a kernel: passes/lowering/lowerings.py)
TORCH_FUNCTIONS: tuple[str, ...] = ("torch.tensor",)

# operators that read or write a file named by an argument: a file must not reach the disk
# through them (``aten.save``, ``aten.from_file`` with ``shared=True`` maps the file writable)
FILE_OPERATORS: frozenset[str] = frozenset({"aten.save", "aten.from_file"})

# attributes of ``torch.ops`` that are not operator namespaces (``load_library`` loads a shared
# library, ``import_module`` imports a module): refused by name, before any lookup
_NOT_NAMESPACES: frozenset[str] = frozenset(
    {"load_library", "import_module", "loaded_libraries", "higher_order", "_dir"}
)

MEMORY_FORMATS: tuple[str, ...] = (
    "contiguous_format",
    "channels_last",
    "channels_last_3d",
    "preserve_format",
)
LAYOUTS: tuple[str, ...] = (
    "strided",
    "sparse_coo",
    "sparse_csr",
    "sparse_csc",
    "sparse_bsr",
    "sparse_bsc",
    "jagged",
    "_mkldnn",
)

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_EXPECTED = (
    "an extern calls an operator, NAMESPACE.OP.OVERLOAD (aten.mm.default), or one of "
    + ", ".join(TORCH_FUNCTIONS)
)


class ExternCallError(FirError):
    """An extern call failed when it ran (the op raised, or returned results that differ from
    the node's declared types). Where the op raised, the original exception is ``__cause__``:
    ``torch.compile`` hands it on as eager would raise it."""


class WrongExternResult(ExternCallError, ExternResultError):
    """An extern call returned a result of another dtype, shape or count than its declared
    types: never cast or reshaped quietly. Where a size was an assumption of the trace
    (``torch._check``), this is that assumption failing, which eager reports as a
    ``RuntimeError``: this is one too."""


def callee_problem(name: str) -> str | None:
    """Why ``name`` may not be an extern callee, or None if it may; by the name alone."""
    if name in TORCH_FUNCTIONS:
        return None
    parts = name.split(".")
    if parts[0] == "torch":
        return f'extern callee "{name}" is not allowed: {_EXPECTED}'
    if len(parts) not in (2, 3) or not all(_NAME.match(p) for p in parts):
        return f'extern callee "{name}" is not an operator name: {_EXPECTED}'
    namespace = parts[0]
    if namespace in _NOT_NAMESPACES or namespace.startswith("__"):
        return f'extern callee "{name}": "{namespace}" is not an operator namespace'
    if ".".join(parts[:2]) in FILE_OPERATORS:
        return f'extern callee "{name}" reads or writes files; an extern may not call it'
    return None


def resolve_callee(name: str, error: type[FirError] = FirError) -> Callable[..., Any]:
    """``aten.mm.default`` -> ``torch.ops.aten.mm.default`` (an ``OpOverload``),
    ``aten.mm`` -> its ``OpOverloadPacket``, ``torch.tensor`` -> ``torch.tensor``; anything
    else raises ``error`` (see the module's docstring)."""
    problem = callee_problem(name)
    if problem is not None:
        raise error(problem)
    import torch
    from torch._ops import OpOverload, OpOverloadPacket, _OpNamespace

    if name in TORCH_FUNCTIONS:
        return {"torch.tensor": torch.tensor}[name]
    namespace, op, *overload = name.split(".")
    if namespace == fir_ops.NAMESPACE:  # FIR's own operators exist once defined
        fir_ops.define()
    unknown = f'unknown extern callee "{name}"'
    # ``torch.ops.X`` makes an empty namespace for any X (no code runs); anything else that
    # ``torch.ops`` holds under that name is not a namespace
    ns = getattr(torch.ops, namespace, None)
    if type(ns) is not _OpNamespace:
        raise error(f'{unknown}: "{namespace}" is not an operator namespace')
    try:  # the dispatcher's registry; a name it does not know is an AttributeError
        packet = getattr(ns, op)
        obj = getattr(packet, overload[0]) if overload else packet
    except (AttributeError, RuntimeError):
        raise error(unknown) from None
    if not isinstance(packet, OpOverloadPacket) or (overload and not isinstance(obj, OpOverload)):
        raise error(f"{unknown}: not an operator registered with PyTorch")
    return obj


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


def torch_object_problem(text: str) -> str | None:
    """Why ``"torch:KIND=NAME"`` names no object, or None (also for strings that are not
    ``torch:`` objects); by the text alone. A device's name is left to torch."""
    if not text.startswith(PREFIX) or "=" not in text:
        return None
    kind, _, name = text[len(PREFIX) :].partition("=")
    table = {"memory_format": MEMORY_FORMATS, "layout": LAYOUTS}.get(kind)
    if table is not None and name not in table:
        return f'unknown torch {kind} "{name}" in "{text}" (one of: {", ".join(table)})'
    return None


def decode_torch_object(text: str, loc: Location | None = None) -> Any:
    """The inverse of :func:`encode_torch_object`; other strings are returned unchanged. An
    unknown layout, memory format or device raises :class:`FirError`."""
    if not text.startswith(PREFIX) or "=" not in text:
        return text
    problem = torch_object_problem(text)
    if problem is not None:
        raise FirError(problem, loc)
    import torch

    kind, _, name = text[len(PREFIX) :].partition("=")
    if kind == "device":
        try:
            return torch.device(name)
        except (RuntimeError, ValueError) as e:
            raise FirError(f'unknown torch device "{name}" in "{text}": {e}', loc) from None
    if kind in ("memory_format", "layout"):
        obj = getattr(torch, name, None)  # a name of the written table
        want = torch.memory_format if kind == "memory_format" else torch.layout
        if not isinstance(obj, want):  # a table name this torch does not have
            raise FirError(f'torch {kind} "{name}" does not exist in this PyTorch', loc)
        return obj
    return text


def call_arguments(
    node: Any, tensor: Callable[[Any], Any], dim: Callable[[Any], int]
) -> tuple[list[Any], dict[str, Any]]:
    """The positional and keyword arguments of extern ``node``'s call, as PyTorch takes them:
    a value becomes its tensor (``tensor(value)``), a size expression its value (``dim``), a
    dtype torch's, a literal its number, an encoded object (a device, a layout) the object.
    The interpreter and the compiled runtime both call this, so an extern sees the same
    arguments in either."""
    import sympy

    from .graph import Literal

    def conv(v: Any) -> Any:
        if isinstance(v, Value):
            return tensor(v)
        if isinstance(v, list):
            return [conv(x) for x in v]
        if isinstance(v, DType):
            return v.to_torch()
        if isinstance(v, Literal):
            return v.value
        if isinstance(v, sympy.Basic):
            return dim(v)
        if isinstance(v, str):
            return decode_torch_object(v, node.loc)
        return v

    return [conv(a) for a in node.args], {key: conv(v) for key, v in node.kwargs.items()}


def kept_results(node: Any, out: Any, named: bool = True) -> list[Any]:
    """The results of an extern call that ``node`` names, in its results' order: all of them,
    or, where the call also returns values that are not tensors (``None``, sizes: cuDNN
    attention's), the positions its ``results`` attribute lists. A call that returned fewer
    values (or, without ``results``, another number) raises :class:`ExternCallError`; its
    message names the node unless ``named`` is False (the interpreter names it itself)."""
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    positions = node.attrs.get("results")
    if positions is None:
        if len(outs) == len(node.results):
            return outs
        text = f"the call returned {len(outs)} value(s), the node declares {len(node.results)}"
    elif not positions or max(positions) < len(outs):
        return [outs[k] for k in positions]
    else:
        text = f"the call returned {len(outs)} value(s), the node keeps positions {positions}"
    raise ExternCallError(f"{node_text(node)}: {text}" if named else text, node.loc)


def node_text(node: Any) -> str:
    """``%a, %b = extern "aten.sort.default"``: how errors name an extern node."""
    return f'{", ".join("%" + r.name for r in node.results)} = extern "{node.callee}"'


def wrong_result(
    node: Any, name: str, t: Any, dtype: Any, shape: Any, named: bool = True
) -> ExternCallError:
    """The error for extern result ``%name`` (tensor ``t``, or something else) that is not of
    its declared torch ``dtype`` and ``shape``."""
    if hasattr(t, "dtype") and hasattr(t, "shape"):
        what = f"{_dtype_name(t.dtype)}{list(t.shape)}"
    else:
        what = f"a {type(t).__name__}"
    want = f"{_dtype_name(dtype)}{list(shape)}"
    text = f"the call returned {what} as %{name}, whose type says {want}"
    if hasattr(t, "shape") and list(t.shape) != list(shape):
        text += " (a size the trace assumed, such as by torch._check, does not hold)"
    return WrongExternResult(f"{node_text(node)}: {text}" if named else text, node.loc)


def _dtype_name(dtype: Any) -> str:
    """``torch.float32`` -> ``f32`` (FIR's name where it has one)."""
    try:
        return str(DType.from_torch(dtype))
    except KeyError:
        return str(dtype).removeprefix("torch.")


def call_failed(node: Any, callee: str, e: BaseException) -> ExternCallError:
    """The error for extern call ``node`` that raised ``e`` when it called ``callee`` (its
    own callee, or the in-place variant the plan chose); raise it ``from e``."""
    names = ", ".join("%" + r.name for r in node.results)
    return ExternCallError(f'{names} = extern "{callee}": {type(e).__name__}: {e}', node.loc)


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


# ---------------------------------------------------------------------------------------------
# What an extern node's attributes mean for storage and ordering (``aliases``, ``effect``,
# ``mutates``): read by the dependency analysis, the memory plan and the runtime alike


def aliased_argument(v: Value) -> Value | None:
    """The argument of an extern call whose storage its result ``v`` lives in (the call's
    ``aliases`` entry for ``v``: a view op run by PyTorch, such as ``aten.view.dtype``); None
    for a result with storage of its own and for every other value."""
    n = v.owner
    if not isinstance(n, ExternNode):
        return None
    positions = n.attrs.get("aliases")
    if not isinstance(positions, list) or v.index >= len(positions):
        return None
    k = positions[v.index]
    if isinstance(k, int) and not isinstance(k, bool) and 0 <= k < len(n.args):
        arg = n.args[k]
        return arg if isinstance(arg, Value) else None
    return None


def storage_bases(v: Value) -> list[Value]:
    """The values whose storage ``v`` lives in, besides ``v``, nearest first: the roots of
    view nodes and the arguments of extern calls whose result is a view (``aliases``)."""
    out: list[Value] = []
    while True:
        root = alias_root(v)
        if root is not v:
            out.append(root)
        base = aliased_argument(root)
        if base is None:
            return out
        out.append(base)
        v = base


def effect_of(n: Node) -> str | None:
    """The effect chain an extern call belongs to (its ``effect`` attribute: ``"collective"``,
    ``"assert"`` …), None for a call without one and for every other node."""
    if not isinstance(n, ExternNode):
        return None
    effect = n.attrs.get("effect")
    return effect if isinstance(effect, str) else None


def is_wait(n: Node) -> bool:
    """A collective's wait: an in-place write (``mutates``) on the collective effect chain."""
    return effect_of(n) == "collective" and "mutates" in n.attrs
