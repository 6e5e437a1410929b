"""What a node reads and writes, and which nodes it depends on (Inductor's dependency model).

Buffers are named by value name (``"x"`` for ``%x``), not by :class:`~fir.ir.graph.Value`, so a
node's dependencies can name users defined later in the function and survive a print/parse
round trip unchanged.

* :class:`MemoryDep`: an access at an index expression over the node's whole iteration space,
  renamed to canonical variables ``c0, c1, …`` (pointwise loops first, then reduction loops), so
  that two nodes' accesses compare equal exactly when they touch the same elements in the same
  order.
* :class:`StarDep`: the whole buffer (reads by extern calls, reads through an indirect index,
  writes of extern results).
* :class:`WeakDep`: ordering only. ``WeakDep("a", "x")`` on a node says "run after node ``%a``,
  because one of the two mutates ``%x`` and the other reads it".

:class:`NodeDeps` gathers them with the node's users and ancestors. The ``deps`` pass computes
them (``fir.passes.analysis.deps.compute_deps``); the text form is the ``deps { … }`` clause after a node
(docs/language.md, "Dependencies").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import Location
from .types import Dim, dim_str

if TYPE_CHECKING:
    import sympy


# Treated as immutable values (hashable, compared by content). Not frozen: a frozen dataclass
# costs several microseconds per construction, and the deps pass builds one per load.


@dataclass(unsafe_hash=True, slots=True)
class MemoryDep:
    """``buffer[index]`` for every point of ``ranges`` ((variable, size) pairs, in loop order).

    ``nbytes`` is the number of distinct bytes the access can touch: the item size times the
    sizes of the variables the index uses, capped at the buffer's storage (a broadcast read of a
    vector in a matrix loop counts the vector once)."""

    buffer: str
    index: sympy.Expr | int
    ranges: tuple[tuple[sympy.Symbol, Dim], ...]
    nbytes: Dim
    loc: Location | None = field(default=None, compare=False, repr=False)

    @property
    def variables(self) -> tuple[sympy.Symbol, ...]:
        return tuple(v for v, _ in self.ranges)

    @property
    def sizes(self) -> tuple[Dim, ...]:
        return tuple(s for _, s in self.ranges)


@dataclass(unsafe_hash=True, slots=True)
class StarDep:
    """The whole of ``buffer`` (``nbytes``: its storage in bytes)."""

    buffer: str
    nbytes: Dim
    loc: Location | None = field(default=None, compare=False, repr=False)


@dataclass(unsafe_hash=True, slots=True)
class WeakDep:
    """Run after node ``buffer`` (named by its first result) because of a mutation of
    ``mutated``: this node mutates a buffer that node reads, or reads a buffer that node
    mutated."""

    buffer: str
    mutated: str
    loc: Location | None = field(default=None, compare=False, repr=False)


Dep = MemoryDep | StarDep


@dataclass
class NodeDeps:
    """Everything the ``deps`` pass knows about one node.

    ``users`` names the nodes (by first result) that read one of this node's results or hold a
    weak dependency on it, in program order; ``is_output`` says a result is returned by the
    function. ``ancestors`` names every node this one depends on, transitively, in program order
    (function arguments are not nodes). ``None`` means not recorded (pass options)."""

    reads: list[Dep] = field(default_factory=list)
    writes: list[Dep] = field(default_factory=list)
    weak: list[WeakDep] = field(default_factory=list)
    users: list[str] | None = None
    is_output: bool = False
    ancestors: list[str] | None = None
    # where each name of ``users`` / ``ancestors`` was written (parsed text only)
    users_locs: list[Location] = field(default_factory=list, compare=False, repr=False)
    ancestors_locs: list[Location] = field(default_factory=list, compare=False, repr=False)
    loc: Location | None = field(default=None, compare=False, repr=False)

    def buffers_read(self) -> list[str]:
        return _unique(d.buffer for d in self.reads)

    def buffers_written(self) -> list[str]:
        return _unique(d.buffer for d in self.writes)


def _unique(names: Any) -> list[str]:
    return list(dict.fromkeys(names))


# ---------------------------------------------------------------------------------------------
# Text form (the parser builds these objects; see ir/parser.py)

_ranges_text: dict[tuple[Any, ...], str] = {}


def ranges_str(ranges: tuple[tuple[sympy.Symbol, Dim], ...]) -> str:
    text = _ranges_text.get(ranges)
    if text is None:
        text = ", ".join(f"{v.name} < {dim_str(s)}" for v, s in ranges)
        if len(_ranges_text) < 4096:
            _ranges_text[ranges] = text
    return text


def dep_str(d: Dep) -> str:
    """``%x[16*c0 + c1] over (c0 < 8, c1 < 16) bytes 512`` or ``%t[*] bytes 400``."""
    if isinstance(d, StarDep):
        return f"%{d.buffer}[*] bytes {dim_str(d.nbytes)}"
    from .symbolic import print_expr

    return (
        f"%{d.buffer}[{print_expr(d.index)}] over ({ranges_str(d.ranges)}) "
        f"bytes {dim_str(d.nbytes)}"
    )


def deps_lines(d: NodeDeps) -> list[str]:
    """The lines inside ``deps { … }``, in canonical order: reads, writes, weak, users,
    ancestors."""
    out = ["read " + dep_str(r) for r in d.reads]
    out += ["write " + dep_str(w) for w in d.writes]
    out += [f"weak %{w.buffer} for %{w.mutated}" for w in d.weak]
    if d.users is not None:
        names = ["%" + u for u in d.users] + (["return"] if d.is_output else [])
        out.append("users " + (", ".join(names) if names else "none"))
    if d.ancestors is not None:
        names = ["%" + a for a in d.ancestors]
        out.append("ancestors " + (", ".join(names) if names else "none"))
    return out
