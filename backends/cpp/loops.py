"""How each kind of loop of a kernel is written: threads, vector lanes, interchange, tiles.

Which kind each loop is (the order of a nest, tiles, column blocks, lanes, split reductions,
threads) is the schedule's (:mod:`fir.backends.plan.schedule`, the ``CPP`` family); this module
only writes what it says:

* Pointwise loops: the parallel ones are collapsed into one ``omp parallel for`` (with an
  ``if`` clause, or no pragma at all, so that kernels under ``GRAIN`` element-iterations run on
  one thread); the innermost is an ``omp simd`` loop when it vectorises, with everything
  invariant in it hoisted in front. The loops run in the schedule's order (the body moves with
  the innermost); a tiled pair runs in square tiles, so that a transposed read and the
  contiguous write both stay in cache.
* Row reductions: every pointwise loop is parallel; the reduction loop runs the schedule's
  lanes of elements at a time, each lane with its own accumulator (the array is a vector
  register to GCC), merged in order after the loop; the remainder goes to the scalar
  accumulator. Every reduction kind vectorises this way, NaN-propagating max and argmax
  included (an OpenMP ``reduction`` clause would merge max lanes with a max that drops NaN,
  and has no argmax or Welford); Welford's update divides once per block instead of once per
  element.
* Column reductions (``x.sum(0)``): the pointwise loop runs in blocks of ``COLUMN_BLOCK``
  outputs, the reduction loop outside a vectorised loop over the block; accumulators, and
  values that cross from one phase to the next, live in per-block arrays.
* Scratch rows (values a later pass over a row reads again, kept by the plan): arrays on the
  stack of the thread that runs the row, declared in the pointwise loop.
* Split (whole-tensor) reductions: the reduction loop is cut among the threads, each with its
  own accumulators, merged in thread order (the same threads give the same bits).
* f16 in blocks: a vectorised loop (of any kind above but the column blocks) that loads or
  stores f16 contiguously runs in blocks of the schedule's ``f16_block`` (which accesses, and
  why: :func:`~fir.backends.plan.schedule.f16_blocks`). Each block converts its f16 loads
  into local float arrays with one F16C instruction per array (``fir_load_f16_block``), runs
  the vectorised loop over the arrays, and converts the floats it stores the same way
  (``fir_store_f16_block``); the last block of a loop may be partial.

A failed check leaves the innermost loop's iteration (``continue``): a loop that can fail is
never an ``omp simd`` loop, and nothing returns from inside a parallel region.
"""

from __future__ import annotations

from collections.abc import Sequence

from fir.backends.plan.instructions import AccInit, Instr, Load, Store
from fir.backends.plan.loop_nest import Columns, Lanes, Node, Run, Span, Turn, loop_nest
from fir.backends.plan.loop_tree import Item, Loop, hoist, positive, uses, walk
from fir.backends.plan.schedule import (
    COLUMN_BLOCK,
    GRAIN,
    MAX_THREADS,
    f16_blocks,
    gathers,
    vectorises,
)
from fir.ir.types import Dim

from .emit import Acc, Emitter
from .ops import CTYPE, STORAGE, start_value

# the comment in front of a loop in f16 blocks (of the schedule's f16_block, which the
# prelude's FIR_F16_BLOCK equals)
F16_WHY = (
    "// in blocks of {}: a vectorised loop computes the floats, then one F16C",
    "// instruction converts each block (in the loop: ~12 instructions per element)",
)


class KernelWriter(Emitter):
    # -- helpers

    def parallel(self, loops: int, simd: bool = False) -> None:
        """The pragma in front of ``loops`` perfectly nested loops, collapsed into one parallel
        loop (none parallel below the grain: the schedule's threads; 0: a loop of one thread),
        ``simd``: vectorised."""
        if not loops or self.schedule.one_thread():
            if simd:
                self.emit("#pragma omp simd")
            return
        clause = "omp parallel for simd" if simd else "omp parallel for"
        if loops > 1:
            clause += f" collapse({loops})"
        if not isinstance(self.schedule.work, int):
            clause += f" if({self.index(self.schedule.work)} >= {GRAIN})"
        self.emit("#pragma " + clause)

    def loop(self, lp: Loop, start: str = "0", stop: str = "") -> None:
        """Open ``for`` loop ``lp`` over ``[start, stop)``, by default its whole range."""
        self.for_(lp.var, stop or self.index(lp.size), start=start)

    def serial(self, lp: Loop, items: list[Item], start: str, stop: str) -> None:
        """Loop ``lp`` over ``[start, stop)`` running ``items`` (no loops), not vectorised."""
        self.loop(lp, start, stop)
        self.body(items)
        self.close()

    def simd_ok(self, items: list[Item], var: str) -> bool:
        return vectorises(items, var, self.int_values)

    def body(self, items: Sequence[Item], exit_: str = "continue;") -> None:
        for it in items:
            assert not isinstance(it, Loop)
            self.instr(it, exit_)

    def hoisted(
        self, items: list[Item], var: str, size: Dim, exit_: str, per_lane: set[str] | None = None
    ) -> list[Item]:
        """Emit what loop ``var`` over ``items`` computes the same in every iteration; return
        the rest. Only from a loop that runs at least once: a check must not fire for an
        empty loop."""
        early, rest = hoist(items, var, per_lane or set()) if positive(size) else ([], items)
        self.body(early, exit_)
        return rest

    # -- the kernel body: the nests as the schedule runs them (:func:`loop_nest`)

    def kernel_body(self) -> None:
        tree = loop_nest(self.plan, self.schedule)
        if tree and isinstance(tree[0], Run) and not tree[0].loop.reduction:
            return self.visit_all(tree)
        self.open()
        self.phases(tree, "goto fir_done;")
        self.close()

    def on_run(self, r: Run) -> None:
        """A loop of a nest: the first of those the threads share carries the pragma; the
        innermost runs vectorised when it can be, its invariants first; a row nest's
        innermost pointwise loop runs the reduction phases."""
        start, stop = "0", self.index(r.size)
        if r.span is Span.TILE:
            start = self.block(r.var)
            stop = f"fir_imin({start} + {r.block}, {stop})"
        items = r.items
        if items is not None:
            rest = self.hoisted(items, r.var, r.size, "continue;") if r.hoists else items
            # a tile's f16 blocks are x1bb: x1b is the tile's
            block = start + "b" if r.span is Span.TILE else ""
            return self.vector_loop(r.loop, rest, start, stop, r.threads, block)
        self.parallel(r.threads)
        if r.span in (Span.TILES, Span.BLOCKS):
            self.in_tiles |= r.span is Span.TILES
            self.for_(r.var, stop, step=r.block, name=self.block(r.var))
        else:
            self.loop(r.loop, start, stop)
        if r.phases:
            for sc in self.plan.scratch:  # a row kept between passes, on this thread's stack
                name = self.names("buffer", sc.name)
                self.emit(f"alignas(64) {CTYPE[sc.dtype]} {name}[{sc.elements}];")
            self.phases(r.body, "continue;")
        else:
            self.visit_all(r.body)
        self.close()

    def vector_loop(
        self,
        lp: Loop,
        rest: list[Item],
        start: str = "0",
        stop: str = "",
        parallel: int = 0,
        block: str = "",
    ) -> None:
        """Loop ``lp`` over ``[start, stop)`` (by default its whole range) running ``rest``
        (no loops inside, invariants hoisted), vectorised when it can be, converting f16 in
        blocks when it converts any (then a block starts at ``block``, by default ``{var}b``);
        ``parallel``: split among the threads (a kernel of one loop)."""
        stop = stop or self.index(lp.size)
        simd = self.simd_ok(rest, lp.var)
        turned = tuple(self.turned)
        if self.in_tiles and gathers(rest, lp.var, turned):
            self.tile_gathers = True
        blocked = self.schedule.f16_blocked(rest, lp.var, lp.size, turned) if simd else None
        if blocked is None:
            self.parallel(parallel, simd)
            return self.serial(lp, rest, start, stop)
        # GCC vectorises no loop that converts with the F16C instruction: each block computes
        # its floats in a vectorised loop over local arrays, converted with one instruction
        # each. Full blocks run a loop of constant length (a variable one costs GCC's
        # vectoriser ~15% here); the last block of a loop whose length is not a known
        # multiple of the block is partial, touching its ``fir_n`` elements only.
        n = self.schedule.family.f16_block
        vb = block or self.block(lp.var)
        for line in F16_WHY:
            self.emit(line.format(n))
        self.parallel(parallel)
        self.for_("", stop, start=start, step=n, name=vb)
        if isinstance(lp.size, int) and lp.size % n == 0:
            self.f16_block(lp.var, vb, rest, *blocked, str(n))
        else:
            self.open(f"if ({vb} + {n} <= {stop})")
            self.f16_block(lp.var, vb, rest, *blocked, str(n))
            self.depth -= 1
            self.open("} else")
            self.emit(f"const int64_t fir_n = {stop} - {vb};")
            self.f16_block(lp.var, vb, rest, *blocked, "fir_n")
            self.close()
        self.close()

    def f16_block(
        self, var: str, vb: str, rest: list[Item], loads: list[Load], stores: list[Store], n: str
    ) -> None:
        """One block of loop ``var``, ``n`` iterations from ``vb``: the f16 ``loads``
        converted into local arrays; the vectorised loop, which reads those and writes the
        ``stores``' floats to local arrays; then these converted into the buffers."""
        self.f16_loads(var, vb, loads, n)
        out = []
        for st in stores:
            buffer = self.names("buffer", st.buffer)
            arr = self.names.add("f16_out " + self.index(st.index), buffer + "_out")
            self.emit(f"float {arr}[{self.schedule.family.f16_block}];")
            self.f16_out[st] = arr
            element = f"&{buffer}[{self.index(st.index, {var: vb})}]"
            out.append(f"fir_store_f16_block({element}, {arr}, {n});")
        self.lane_loop(var, vb, n, rest)
        for line in out:
            self.emit(line)
        self.f16_out.clear()

    def f16_loads(self, var: str, vb: str, loads: list[Load], n: str) -> None:
        """The f16 ``loads`` of the block of loop ``var`` that starts at ``vb`` converted into
        local arrays, which the block's vectorised loop reads (lane ``l``) in their place."""
        for ld in loads:
            arr = self.names.add("f16_in", ld.dst + "_in")
            if ld.dst in self.turned:  # the block's first element in the turned tile
                element = "&" + self.turned_at[ld.dst](vb)
            else:
                element = f"&{self.names('buffer', ld.buffer)}[{self.index(ld.index, {var: vb})}]"
            self.emit(f"float {arr}[{self.schedule.family.f16_block}];")
            self.emit(f"fir_load_f16_block({arr}, {element}, {n});")
            self.f16_in[ld.dst] = arr

    def lane_loop(self, var: str, vb: str, n: str, rest: list[Item]) -> None:
        """The vectorised loop over the ``n`` lanes ``l`` of a block of loop ``var`` from
        ``vb``; the block's f16 loads are read from their arrays (:meth:`f16_loads`)."""
        self.emit("#pragma omp simd")
        self.for_("", n, name="l")
        self.emit(f"const int64_t {self.names('var', var)} = {vb} + l;")
        self.body(rest)
        self.close()
        self.f16_in.clear()

    def on_turn(self, t: Turn) -> None:
        """Copy the tile of each turned load, transposed, to a local array (the prelude's
        ``fir_turn``), from which the tile's loops read it in order along the inner loop."""
        a, b, side = t.outer, t.inner, t.side
        ab, bb = self.block(a.var), self.block(b.var)
        rows = f"fir_imin({ab} + {side}, {self.index(a.size)}) - {ab}"
        cols = f"fir_imin({bb} + {side}, {self.index(b.size)}) - {bb}"
        for tl in t.loads:
            ld = tl.load
            tile = self.names.add("turned", ld.dst + "_tile")
            start = (
                f"{self.names('buffer', ld.buffer)}[{self.index(ld.index, {a.var: ab, b.var: bb})}]"
            )
            along = self.index(tl.along)
            self.emit(f"alignas(64) {STORAGE[ld.dtype]} {tile}[{side * side}];")
            self.emit(f"fir_turn<{side}>({tile}, &{start}, {along}, {rows}, {cols});")
            a_at, b_at = self.names("var", a.var), self.names("var", b.var)

            def at(inner: str, tile: str = tile, a_at: str = a_at) -> str:
                return f"{tile}[{side} * ({a_at} - {ab}) + ({inner} - {bb})]"

            self.turned[ld.dst] = at(b_at)
            self.turned_at[ld.dst] = at

    # -- row reductions

    def phases(self, items: Sequence[Node], exit_: str) -> None:
        """Once-per-output work and reduction loops, in order: the body of the pointwise
        loops, or the kernel's (whose reduction loops may be split among the threads)."""
        pending: list[Acc] = []
        for it in items:
            if isinstance(it, AccInit):
                pending.append(self.accs[it.acc])
                continue
            for acc in pending:  # before its loop (or none: squeezed size-1 loops)
                self.declare(acc)
            if isinstance(it, Run) and it.span is Span.SPLIT:
                self.split_reduction(it, pending)
            elif isinstance(it, Run):
                self.reduction_loop(it, pending, exit_)
            else:
                assert isinstance(it, Instr)
                self.instr(it, exit_)
            pending = []

    def reduction_loop(
        self, top: Run, accs: list[Acc], exit_: str, lo: str = "0", hi: str = ""
    ) -> None:
        """Reduction loop ``top`` (with the reduction loops nested in it) updating ``accs``,
        whose scalar state is declared; ``lo``/``hi`` bound the outermost loop."""
        runs = [top]
        while len(runs[-1].body) == 1 and isinstance(runs[-1].body[0], Run):
            runs.append(runs[-1].body[0])
        bounds = [(lo, hi or self.index(top.size))] + [("0", "")] * (len(runs) - 1)
        for r, (start, stop) in zip(runs[:-1], bounds):
            self.loop(r.loop, start, stop)
        inner_exit = "continue;" if len(runs) > 1 else exit_
        start, stop = bounds[-1]
        inner = runs[-1]
        if accs:
            self.lanes(inner, accs, inner_exit, start, stop or self.index(inner.size))
        else:  # a pass that only reads and stores: invariants first, vectorised if it can be
            lp = inner.loop
            self.vector_loop(lp, self.hoisted(lp.body, lp.var, lp.size, inner_exit))
        self.close(len(runs) - 1)

    def lanes(self, r: Run, accs: list[Acc], exit_: str, start: str, stop: str) -> None:
        """The innermost reduction loop, the schedule's lanes of elements at a time, one state
        per lane; the remainder updates the scalar state, which then merges the lanes in
        order."""
        lp, lanes = r.loop, r.lanes
        rest = self.hoisted(lp.body, lp.var, lp.size, exit_)
        if not lanes:
            return self.serial(lp, rest, start, stop)
        vb = self.block(lp.var)
        self.open()
        for acc in accs:
            self.declare(acc, "_v", str(lanes))
            self.emit(f"for (int64_t l = 0; l < {lanes}; ++l) {{ {' '.join(lane_init(acc))} }}")
        uniform = [a for a in accs if a.kind == "welford"]  # the count: its last component
        for acc in uniform:
            t = CTYPE[acc.comps[-1].dtype]
            self.emit(f"{t} {acc.name}_cnt = 0;  // elements in every lane")
        self.emit(f"int64_t {vb} = {start};")
        self.open(f"for (; {vb} + {lanes} <= {stop}; {vb} += {lanes})")
        for acc in uniform:
            t = CTYPE[acc.comps[-1].dtype]
            self.emit(f"{acc.name}_cnt = {acc.name}_cnt + 1;")
            self.emit(f"const {t} {acc.name}_inv = {t}(1) / {acc.name}_cnt;")
            acc.uniform = f"{acc.name}_inv"
        # the f16 loads of a block of lanes convert as one f16 block (lanes == f16_block)
        self.f16_loads(lp.var, vb, f16_blocks(rest, lp.var, tuple(self.turned))[0], str(lanes))
        for acc in accs:
            acc.lanes = "l"
        self.lane_loop(lp.var, vb, str(lanes), rest)
        for acc in accs:
            acc.lanes = acc.uniform = None
        self.close()
        if not (start == "0" and isinstance(lp.size, int) and lp.size % lanes == 0):
            self.serial(lp, rest, vb, stop)
        for acc in uniform:
            count = acc.names[-1]
            self.emit(f"for (int64_t l = 0; l < {lanes}; ++l) {count}_v[l] = {acc.name}_cnt;")
        for acc in accs:
            self.emit(f"for (int64_t l = 0; l < {lanes}; ++l) {self.merge(acc, '_v[l]')}")
        self.close()

    def split_reduction(self, top: Run, accs: list[Acc]) -> None:
        """A reduction of the whole tensor: the outermost reduction loop is cut into one range
        per thread; each thread accumulates into its own state (the same names, shadowing),
        saved per thread and merged in thread order after the region."""
        work = self.schedule.work
        self.open()
        threads = f"fir_imin(omp_get_max_threads(), {MAX_THREADS})"
        if not isinstance(work, int):
            threads = f"{self.index(work)} >= {GRAIN} ? {threads} : 1"
        self.emit(f"const int64_t fir_nt = {threads};")
        self.emit("int64_t fir_nused = 1;")
        for acc in accs:
            self.declare(acc, "_t", str(MAX_THREADS))
        self.emit("#pragma omp parallel num_threads(fir_nt)")
        self.open()
        size = self.index(top.size)
        self.emit("const int64_t fir_t = omp_get_thread_num(), fir_nts = omp_get_num_threads();")
        self.emit(f"const int64_t fir_lo = {size} * fir_t / fir_nts;")
        self.emit(f"const int64_t fir_hi = {size} * (fir_t + 1) / fir_nts;")
        for acc in accs:
            self.declare(acc)
        self.reduction_loop(top, accs, "continue;", "fir_lo", "fir_hi")
        for name in (n for acc in accs for n in acc.names):
            self.emit(f"{name}_t[fir_t] = {name};")
        self.emit("if (fir_t == 0) fir_nused = fir_nts;")
        self.close()
        for acc in accs:
            merged = self.merge(acc, "_t[fir_t]")
            self.emit(f"for (int64_t fir_t = 0; fir_t < fir_nused; ++fir_t) {merged}")
        self.close()

    # -- column reductions

    def on_columns(self, c: Columns) -> None:
        """A column block (the schedule's column reduction): ``fir_n`` outputs from the block's
        first; values made once per output and read in a later segment live in per-block
        arrays, as do the accumulators."""
        xb, size = self.block(c.loop.var), self.index(c.loop.size)
        self.emit(f"const int64_t fir_n = fir_imin({COLUMN_BLOCK}, {size} - {xb});")
        for name in sorted(c.crossing):
            self.emit(f"{CTYPE[self.dtypes[name]]} {self.ref(name)}[{COLUMN_BLOCK}];")
            self.refs[name] = f"{self.ref(name)}[l]"
        accs = [self.accs[i.acc] for i in c.accs]
        for acc in accs:
            self.declare(acc, "_v", str(COLUMN_BLOCK))
            acc.lanes = "l"
        self.visit_all(c.segments)
        for acc in accs:
            acc.lanes = None
        for name in c.crossing:
            del self.refs[name]

    def on_lanes(self, n: Lanes) -> None:
        """``for l < fir_n`` over the outputs of a column block of pointwise loop ``var``."""
        var, items = n.loop.var, n.items
        if n.per_lane is not None:
            items = self.hoisted(items, var, n.loop.size, "continue;", n.per_lane)
        if self.simd_ok(items, var):
            self.emit("#pragma omp simd")
        self.for_("", "fir_n", name="l")
        if any(var in uses(i) for i in walk(items)):
            self.emit(f"const int64_t {self.names('var', var)} = {self.block(var)} + l;")
        for it in items:
            if isinstance(it, AccInit):
                for line in lane_init(self.accs[it.acc]):
                    self.emit(line)
            else:
                assert isinstance(it, Instr), "a column segment's loops are outside its lanes"
                self.instr(it, "continue;")
        self.close()


def lane_init(acc: Acc) -> list[str]:
    """The statements that start ``acc``'s state in lane ``l`` of its per-lane arrays."""
    return [f"{n}_v[l] = {start_value(c)};" for n, c in zip(acc.names, acc.comps)]
