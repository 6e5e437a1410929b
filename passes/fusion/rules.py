"""``can_fuse`` for FIR: may two fusion nodes become one kernel, and if not, why.

Every rejection is a :class:`Rejection` with a stable ``code`` (the JSON report, tests) and a
sentence naming the nodes and the data involved. The checks, in the order they run:

======================  ===============================================================
code                    rejects a pair when
======================  ===============================================================
``same-node``           both are already one kernel
``extern-or-nop``       either is an extern call or a tensor-level op (FIR's "nop" nodes: no
                        loop nest to fuse)
``nofuse``              a member says ``nofuse = true``, or names the other's node
``order``               node2 is an ancestor of node1 (node1 must come first)
``device``              the two run on different devices
``collective``          a collective call (or its wait) lies between them in program order:
                        the work before a collective and after it stay separate kernels
``no-shared-data``      they touch no common buffer (``aggressive`` lets two pointwise nodes of
                        equal groups pass)
``max-size``            the kernel would hold more than ``max-size`` nodes
``horizontal``          no dependency joins them and horizontal fusion is switched off
``deps-mismatch``       node2 reads what node1 writes at another element or through an
                        indirect index ("memory deps did not match")
``intermediate``        node2 reads a buffer computed by a node outside the pair that
                        depends on node1
``iteration-space``     their groups ``(numel, rnumel)`` cannot share one kernel
``no-shared-access``    (horizontal, a reduction among them) every buffer they share is read
                        at other elements by each (a column sum and a row sum of one
                        matrix): one kernel saves no traffic and one of them reads strided
``peak-memory``         (horizontal) the later node's results would be live across the
                        program's peak and raise it
``cycle``               (checked when the pair is tried) a path between them runs through a
                        kernel formed earlier
======================  ===============================================================

The checks marked heuristic (``no-shared-data``, ``no-shared-access``, ``max-size``,
``horizontal``, ``peak-memory``)
do not apply to a kernel written by hand: there only legality counts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fir.ir.dependencies import dep_str
from fir.ir.kernels import SpaceInfo

from .fusion_graph import FusionGraph, FusionNode, fusable_read, join

REASON_TITLES = {
    "same-node": "same node",
    "extern-or-nop": "extern/nop node",
    "nofuse": "forbidden by nofuse",
    "order": "order",
    "device": "device mismatch",
    "collective": "a collective between them",
    "no-shared-data": "no shared data",
    "no-shared-access": "shared buffers read at other elements",
    "max-size": "exceeds max fusion size",
    "horizontal": "horizontal fusion disabled",
    "deps-mismatch": "memory deps did not match",
    "intermediate": "intermediate nodes between the pair",
    "peak-memory": "would increase peak memory",
    "iteration-space": "incompatible iteration spaces",
    "cycle": "would create a cycle",
}

HEURISTIC = frozenset(
    {"no-shared-data", "no-shared-access", "max-size", "horizontal", "peak-memory"}
)
# reasons that can change while the two nodes stay the same (the schedule, other kernels)
DYNAMIC = frozenset({"peak-memory", "cycle", "same-node"})


class Rejection:
    """Why a pair may not fuse. The sentence is built only when someone reads it: most
    rejections of a large graph are counted, never shown."""

    __slots__ = ("code", "_detail")

    def __init__(self, code: str, detail: str | Callable[[], str]) -> None:
        self.code = code
        self._detail = detail

    @property
    def detail(self) -> str:
        if callable(self._detail):
            self._detail = self._detail()
        return self._detail

    @property
    def title(self) -> str:
        return REASON_TITLES[self.code]

    def __str__(self) -> str:
        return f"{self.title}: {self.detail}"


@dataclass
class RuleOptions:
    max_size: int = 64
    horizontal: bool = True
    aggressive: bool = False
    # ``small-kernels``: nodes of one iteration space of at most this many elements may fuse
    # with nothing in common (0: never)
    small_kernels: int = 0


class PeakProfile:
    """Bytes live at each step of the current schedule, for the peak-memory check: a range
    maximum over steps (a segment tree), rebuilt once per round."""

    def __init__(self, fg: FusionGraph) -> None:
        units = fg.topological_units()
        self.step = {f.id: k for k, f in enumerate(units)}
        count = len(units)
        alloc = [0] * count
        free_after = [0] * count
        for k, f in enumerate(units):
            for buf, t in f.write_bytes.items():
                if fg.is_local_after(buf, f.id) or t.hint == 0:
                    continue
                alloc[k] += t.hint
                if buf in fg.outputs:
                    continue
                last = k
                for r in fg.readers.get(buf, ()):
                    last = max(last, self.step[fg.find(r)])
                free_after[last] += t.hint
        live = []
        current = 0
        for k in range(count):
            current += alloc[k]
            live.append(current)
            current -= free_after[k]
        self.live = live
        self.peak = max(live, default=0)
        size = 1
        while size < max(count, 1):
            size *= 2
        self.size = size
        tree = [0] * (2 * size)
        tree[size : size + count] = live
        for i in range(size - 1, 0, -1):
            tree[i] = max(tree[2 * i], tree[2 * i + 1])
        self.tree = tree

    def range_max(self, lo: int, hi: int) -> int:
        """Most bytes live at a step in ``lo .. hi`` (inclusive)."""
        best = 0
        lo += self.size
        hi += self.size + 1
        tree = self.tree
        while lo < hi:
            if lo & 1:
                best = max(best, tree[lo])
                lo += 1
            if hi & 1:
                hi -= 1
                best = max(best, tree[hi])
            lo //= 2
            hi //= 2
        return best

    def merged(self, keep: int, a: int, b: int) -> None:
        """A fused node runs where the earlier of its parts ran."""
        self.step[keep] = min(self.step.get(a, 0), self.step.get(b, 0))


class FusionRules:
    def __init__(self, fg: FusionGraph, options: RuleOptions) -> None:
        self.fg = fg
        self.options = options
        self.profile: PeakProfile | None = None
        self.static: dict[tuple[int, int, int, int], Rejection] = {}
        self.keep_details = False  # set when the rejections go into a report
        self.mismatches = 0  # pairs rejected for "memory deps did not match" (reordering may help)

    def check(
        self, a: FusionNode, b: FusionNode, hand_written: bool = False, shared: bool = False
    ) -> tuple[Rejection | None, SpaceInfo | None]:
        """Whether ``a`` (node1) and ``b`` (node2) may become one kernel; on success, the space
        of that kernel. ``shared``: the caller knows they share a buffer.

        A rejection for a reason that depends only on the two nodes is remembered: in a later
        round, the same two nodes (unchanged) are rejected again without the work."""
        if hand_written:
            return self._check(a, b, True, shared)
        key = (a.id, a.version, b.id, b.version)
        known = self.static.get(key)
        if known is not None:
            if known.code == "deps-mismatch":
                self.mismatches += 1
            return known, None
        rejection, space = self._check(a, b, False, shared)
        if rejection is not None and rejection.code == "deps-mismatch":
            self.mismatches += 1
        if rejection is not None and rejection.code not in DYNAMIC:
            # without a report to write, only the code is kept (one shared object per code:
            # hundreds of thousands of closures would keep the garbage collector busy)
            self.static[key] = rejection if self.keep_details else _bare(rejection.code)
        return rejection, space

    def _check(
        self, a: FusionNode, b: FusionNode, hand_written: bool, shared: bool
    ) -> tuple[Rejection | None, SpaceInfo | None]:
        fg = self.fg
        if a is b:
            return Rejection("same-node", lambda: f"{fg.label(a)} is already one kernel"), None
        for f in (a, b):
            if f.kind != "loop":
                return Rejection("extern-or-nop", lambda f=f: _not_a_loop(fg, f)), None  # type: ignore[misc]  # a default-argument capture (python/mypy#15459)
        if a.nofuse or b.nofuse or a.forbid & b.mask or b.forbid & a.mask:
            return self._nofuse(a, b), None
        if fg.reaches(b, a):
            return (
                Rejection(
                    "order",
                    lambda: (
                        f"{fg.label(b)} must run before {fg.label(a)}, which depends on it "
                        "(the pair is tried the other way round too)"
                    ),
                ),
                None,
            )
        if a.device != b.device:
            return (
                Rejection(
                    "device",
                    lambda: f"{fg.label(a)} runs on {a.device}, {fg.label(b)} on {b.device}",
                ),
                None,
            )
        if fg.region[a.id] != fg.region[b.id]:
            return (
                Rejection(
                    "collective",
                    lambda: f"a collective call runs between {fg.label(a)} and {fg.label(b)}",
                ),
                None,
            )
        vertical = fg.reaches(a, b)
        if not hand_written:
            if (
                not shared
                and not shares_data(a, b)
                and not self._aggressive_pair(a, b)
                and not self.small_pair(a, b)
            ):
                if not self.options.aggressive:
                    hint = " (aggressive=true fuses pointwise nodes of equal groups)"
                elif a.is_reduction or b.is_reduction:
                    hint = " (aggressive fusion joins pointwise nodes only)"
                else:
                    hint = " (and their groups differ)"
                return (
                    Rejection(
                        "no-shared-data",
                        lambda: (
                            f"{fg.label(a)} and {fg.label(b)} read and write no common buffer{hint}"
                        ),
                    ),
                    None,
                )
            size = len(a.members) + len(b.members)
            if size > self.options.max_size:
                limit = self.options.max_size
                return (
                    Rejection(
                        "max-size", lambda: f"the kernel would hold {size} nodes (max-size={limit})"
                    ),
                    None,
                )
            if not vertical and not self.options.horizontal:
                return (
                    Rejection(
                        "horizontal",
                        lambda: (
                            f"no dependency joins {fg.label(a)} and {fg.label(b)} "
                            "(horizontal=false)"
                        ),
                    ),
                    None,
                )
        if vertical:
            why = self._vertical(a, b)
            if why is not None:
                return why, None
        if hand_written:
            return None, None  # the kernel's space is checked as a whole (adopt_kernels)
        space, reason = join(a, b)
        if space is None:
            return Rejection("iteration-space", reason), None
        if (
            not vertical
            and not hand_written
            and (a.is_reduction or b.is_reduction)
            and not self._aggressive_pair(a, b)
            and not self.small_pair(a, b)
            and fg.saved_bytes(a, b)[1] == 0
        ):
            return (
                Rejection(
                    "no-shared-access",
                    lambda: (
                        f"{fg.label(a)} and {fg.label(b)} read their common buffers at other "
                        "elements: one kernel would save no memory traffic"
                    ),
                ),
                None,
            )
        if not vertical:
            why = self._peak_memory(a, b)
            if why is not None:
                return why, None
        return None, space

    def _aggressive_pair(self, a: FusionNode, b: FusionNode) -> bool:
        """``aggressive``: two pointwise nodes of the same group may fuse with nothing shared
        (as in Inductor, reductions still need shared data)."""
        if not self.options.aggressive or a.is_reduction or b.is_reduction:
            return False
        assert a.space is not None and b.space is not None
        return a.space.space.same(b.space.space)

    def small_pair(self, a: FusionNode, b: FusionNode) -> bool:
        """``small-kernels``: two nodes of the same iteration space of at most that many
        elements may fuse with nothing shared. Each would be its own launch-bound kernel (a
        split sum's final of 768 x 8 elements takes about 2 us on an H200, most of it the
        launch and the tail): one launch instead of two, and no slower. BERT's layer norm
        weight and bias gradients end in two such finals per norm, 25 a backward."""
        limit = self.options.small_kernels
        if limit <= 0 or a.space is None or b.space is None:
            return False
        if len(a.members) + len(b.members) > SMALL_KERNEL_MEMBERS:
            return False
        sa, sb = a.space.space, b.space.space
        return is_small(sa, limit) and sa.same(sb)

    def _nofuse(self, a: FusionNode, b: FusionNode) -> Rejection:
        fg = self.fg

        def detail() -> str:
            for f in (a, b):
                if f.nofuse:
                    marked = next(m for m in f.members if fg.nodes[m].attrs.get("nofuse") is True)
                    return f"%{fg.names[marked]} is marked nofuse = true"
            for x, y in ((a, b), (b, a)):
                for m in x.members:
                    for v in _as_list(fg.nodes[m].attrs.get("nofuse")):
                        target = fg.producer.get(getattr(v, "name", ""))
                        if target is not None and (y.mask >> target) & 1:
                            return f"%{fg.names[m]} says nofuse = [%{getattr(v, 'name', '')}]"
            return "a nofuse attribute forbids it"

        return Rejection("nofuse", detail)

    def _vertical(self, a: FusionNode, b: FusionNode) -> Rejection | None:
        """node2 (``b``) depends on node1 (``a``): what it reads of ``a``'s results must be the
        elements being computed, and nothing it reads may come through a node outside the
        pair that itself depends on ``a``."""
        fg = self.fg
        writes_of_a = a.writes
        for buf, reads in b.reads.items():
            writes = writes_of_a.get(buf)
            if writes is None:
                continue
            for read, reader in reads:
                if not any(fusable_read(read, w) for w, _ in writes):
                    write, writer = writes[0]
                    return Rejection(
                        "deps-mismatch",
                        lambda read=read, reader=reader, write=write, writer=writer: (  # type: ignore[misc]  # a default-argument capture (python/mypy#15459)
                            f"%{fg.names[reader]} reads {dep_str(read)}, but "
                            f"%{fg.names[writer]} writes {dep_str(write)}"
                        ),
                    )
        for p in b.ext_preds:
            if self._through(p, a):
                return Rejection("intermediate", lambda: self._intermediate(a, b))
        return None

    def _through(self, p: int, a: FusionNode) -> bool:
        """Whether node ``p``, outside ``a``, depends on a node of ``a``."""
        fg = self.fg
        if fg.find(p) == a.id:
            return False
        if len(a.members) == 1:
            return fg.is_ancestor(a.id, p)
        return bool(fg.anc[p] & a.mask)

    def _intermediate(self, a: FusionNode, b: FusionNode) -> str:
        fg = self.fg
        p = min(p for p in b.ext_preds if self._through(p, a))
        reader = next(m for m in b.members if p in fg.preds[m])
        return (
            f"%{fg.names[reader]} reads %{fg.names[p]}, which is computed outside the pair from "
            f"{fg.label(a)}'s results"
        )

    def _peak_memory(self, a: FusionNode, b: FusionNode) -> Rejection | None:
        """A horizontal kernel runs where the earlier node ran, so the later node's results come
        to life earlier: reject when that raises the program's peak."""
        profile = self.profile
        if profile is None:
            return None
        sa, sb = profile.step.get(a.id), profile.step.get(b.id)
        if sa is None or sb is None or sa == sb:
            return None
        early, late = (a, b) if sa < sb else (b, a)
        lo, hi = min(sa, sb), max(sa, sb)
        fg = self.fg
        extra = sum(
            t.hint for buf, t in late.write_bytes.items() if not fg.is_local_after(buf, late.id)
        )
        if extra == 0:
            return None
        busiest = profile.range_max(lo, hi - 1)
        # a growth below 1/PEAK_SLACK of the peak is within the estimate's own error (a split
        # reduction's partial results: 128 bytes against a 64 KiB peak)
        if busiest + extra <= profile.peak + profile.peak // PEAK_SLACK:
            return None
        peak = profile.peak
        return Rejection(
            "peak-memory",
            lambda: (
                f"{fg.label(late)}'s results ({extra} bytes) would be live from "
                f"{fg.label(early)} on, {hi - lo} step(s) earlier, across a point where {busiest} "
                f"bytes are live: peak {peak} -> {busiest + extra} bytes"
            ),
        )

    def cycle(self, a: FusionNode, b: FusionNode) -> tuple[Rejection | None, set[int]]:
        """Whether fusing would close a cycle through other kernels; else the descendants found
        on the way (for renumbering)."""
        fg = self.fg
        through, forward = fg.path_through(a, b)
        if through is None:
            return None, forward
        via = fg.fnodes[through]
        early, late = (a, b) if fg.tpos[a.id] < fg.tpos[b.id] else (b, a)
        return (
            Rejection(
                "cycle",
                lambda: (
                    f"a path from {fg.label(early)} reaches {fg.label(late)} through "
                    f"{fg.label(via)}, joined by kernels formed earlier"
                ),
            ),
            forward,
        )


# see _peak_memory: growths of the peak below peak / PEAK_SLACK are let through
PEAK_SLACK = 256

_BARE: dict[str, Rejection] = {}


def _bare(code: str) -> Rejection:
    r = _BARE.get(code)
    if r is None:
        r = _BARE[code] = Rejection(code, "(not recorded)")
    return r


# the most nodes a kernel joined by ``small-kernels`` holds: the nearest small nodes join first
# (a layer's norm and bias gradient finals); without a cap every final of a backward, read
# from the partials of all its layers, became one kernel of 200 nodes at its end
SMALL_KERNEL_MEMBERS = 8


def is_small(space: Any, limit: int) -> bool:
    """Whether an iteration space has static sizes and at most ``limit`` elements."""
    n, r = space.numel, space.rnumel
    return isinstance(n, int) and isinstance(r, int) and n * r <= limit


def shares_data(a: FusionNode, b: FusionNode) -> bool:
    """Whether the two read or write a common buffer."""
    if len(a.reads) + len(a.writes) > len(b.reads) + len(b.writes):
        a, b = b, a
    breads, bwrites = b.reads, b.writes
    return any(buf in breads or buf in bwrites for buf in a.reads) or any(
        buf in breads or buf in bwrites for buf in a.writes
    )


def _not_a_loop(fg: FusionGraph, f: FusionNode) -> str:
    what = {
        "extern": "is an extern call (a library kernel of its own)",
        "alias": "is a view (an alias of another buffer's storage: nothing to run)",
        "tensor": "is a tensor-level op, not a loop nest (run 'lower' first)",
    }[f.kind]
    return f"{fg.label(f)} {what}"


def _as_list(v: object) -> list[object]:
    if isinstance(v, list):
        return v
    return [] if v is None or isinstance(v, bool) else [v]
