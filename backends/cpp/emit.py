"""The instruction walk: one plan instruction -> C++ statements, by table lookup (:mod:`.ops`).

:class:`Emitter` holds what a kernel's code is written with: the output lines, C++ names for
every plan name, value dtypes, and where each value and accumulator lives right now (a local, or
an element of a per-lane array while a loop strategy of :mod:`.loops` says so).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from fir.backends.cpu_tuning import CPP_TUNED
from fir.backends.plan import (
    DIVISION_BY_ZERO,  # an int division by zero's error, every back end's
    op_forms,
)
from fir.backends.plan import instructions as ins
from fir.backends.plan.index_text import IndexSyntax, print_index
from fir.backends.plan.kernel import KernelPlan
from fir.backends.plan.loop_nest import NestWalker
from fir.backends.plan.loop_tree import defines
from fir.backends.plan.lowering import defined
from fir.backends.plan.schedule import can_fail, int_values, schedule
from fir.ir.accumulators import state
from fir.ir.dtypes import DType
from fir.ir.graph import Literal

from . import ops
from .ops import CASTS, CTYPE, SUFFIXES, literal, start_value, store_expr

_RESERVED_WORDS = (
    "auto bool break case catch char class const continue default delete do double else enum "
    "extern false float for goto if inline int long namespace new not or and xor operator "
    "private public return short signed sizeof static struct switch template this throw true "
    "try typedef union unsigned using void volatile while args sizes error_value main l "
    "int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t INT64_MIN INT64_C "
    # the rest of C++17's keywords and alternative tokens, and names every unit sees (a local
    # or a kernel named ``std`` hides the namespace)
    "alignas alignof asm bitand bitor compl and_eq or_eq xor_eq not_eq char16_t char32_t "
    "wchar_t const_cast dynamic_cast reinterpret_cast static_cast constexpr decltype explicit "
    "export friend mutable noexcept nullptr protected register static_assert thread_local "
    "typeid typename virtual concept requires co_await co_return co_yield char8_t consteval "
    "constinit std size_t ptrdiff_t intptr_t uintptr_t NULL errno assert offsetof "
)
RESERVED = set(_RESERVED_WORDS.split())


class Names:
    """C++ identifiers for plan names, unique in a kernel. A plan name never starts with
    ``fir_`` here (it gets ``v_`` in front), so the code's own names (``fir_err``, ``fir_n``)
    never clash; ``l`` (the lane index) and ``x0b`` (the block of loop ``x0``) are taken first."""

    def __init__(self) -> None:
        self.taken = set(RESERVED)
        self.names: dict[tuple[str, str], str] = {}

    def add(self, kind: str, name: str) -> str:
        key = (kind, name)
        if key in self.names:
            return self.names[key]
        text = re.sub(r"\W", "_", name.replace("%", "ix_"))
        if not text or text[0].isdigit() or text.lower().startswith("fir_"):
            text = "v_" + text
        while text in self.taken:
            text += "_"
        self.taken.add(text)
        self.names[key] = text
        return text

    def __call__(self, kind: str, name: str) -> str:
        return self.names[(kind, name)]


# index expressions: C++'s ``/`` and ``%`` where the dividend cannot be negative, else the
# prelude's floor-rounding helpers (:mod:`fir.backends.plan.index_text`)
C_SYNTAX = IndexSyntax("C++", ops.c_int, "/", "%", "fir_idiv", "fir_imod", "fir_imin", "fir_imax")


class Acc:
    """An accumulator: the components of its state (:func:`fir.ir.accumulators.state`), their
    C++ names (the accumulator's name and the kind's suffixes), and where the state lives right
    now."""

    def __init__(self, name: str, kind: str, dtype: DType) -> None:
        self.name, self.kind, self.dtype = name, kind, dtype  # dtype: of the reduced values
        self.comps = state(kind, dtype)
        self.names = [name + x for x in SUFFIXES.get(kind, ("",))]
        self.lanes: str | None = None  # the lane index while the state is per-lane arrays
        self.uniform: str | None = None  # 1 / count while every lane saw as many (Welford)


class Emitter(NestWalker):
    def __init__(self, plan: KernelPlan) -> None:
        self.plan = plan
        self.lines: list[str] = []
        self.depth = 1
        self.names = Names()
        self.dtypes: dict[str, DType] = {}
        self.refs: dict[str, str] = {}  # value -> C++ expression, where not its plain name
        self.accs: dict[str, Acc] = {}
        # f16/bf16 values as the bits a store of that dtype writes, where they are at hand
        # (a load of such a buffer, a cast to the dtype): such a store converts nothing
        self.bits: dict[str, tuple[DType, str]] = {}
        # the float that a value cast to f16/bf16 rounds (what a block of f16 stores converts)
        self.rounds: dict[str, str] = {}
        # while a loop converts f16 in blocks (:meth:`loops.KernelWriter.f16_block`): the local
        # arrays, indexed by the lane ``l``, that loads read from and stores write to
        self.f16_in: dict[str, str] = {}  # load's value -> array
        self.f16_out: dict[ins.Store, str] = {}
        self.in_tiles = False  # the kernel runs in square tiles (KernelWriter.on_run)
        # a loop of those tiles gathers (a transposed load read in place, not turned): the
        # kernel prefers 256-bit vectors (the prelude's FIR_TILED)
        self.tile_gathers = False
        self.turned: dict[str, str] = {}  # a load -> its element of a turned tile (.turn)
        # a turned load -> its tile's element at another inner index (an f16 block's first)
        self.turned_at: dict[str, Callable[[str], str]] = {}
        self.uses_done = False  # a check outside every loop jumps to the end of the kernel
        self.exit_ = "continue;"  # how a failed check leaves: :meth:`instr` sets it
        self._name_everything()
        self.int_values = int_values(plan)  # an integer division by them may fail
        self.fails = any(can_fail(i, self.int_values) for i in plan.instrs)
        # how the loops run (the renderer decides none of it), with this machine's measured
        # choices
        self.schedule = schedule(plan, CPP_TUNED)

    def _name_everything(self) -> None:
        add = self.names.add
        dtypes = defined(self.plan.instrs)
        for lp in self.plan.loops:
            add("var", lp.var.name)
            self.names.taken |= {lp.var.name + "b", lp.var.name + "bb"}  # blocks, f16 blocks
        for s in self.plan.sizes:
            add("size", s)
        for i in self.plan.instrs:
            for d in defines(i):
                self.dtypes[d] = DType.I64 if isinstance(i, ins.CheckIndex) else dtypes[d]
                add("value", d)
            if isinstance(i, ins.AccInit):
                acc = self.accs[i.acc] = Acc(add("value", i.acc), i.kind, i.dtype)
                for n in (*acc.names, acc.name + "_cnt", acc.name + "_inv"):
                    self.names.taken |= {n, n + "_v", n + "_t"}  # lanes, threads
        for a in self.plan.args:
            add("buffer", a.name)
        self.scratch = {sc.name for sc in self.plan.scratch}
        for sc in self.plan.scratch:
            add("buffer", sc.name)

    # -- references

    def block(self, var: str) -> str:
        """The C++ name of the block index of loop ``var`` (``x0b``)."""
        return self.names("var", var) + "b"

    def ref(self, name: str) -> str:
        return self.refs.get(name) or self.names("value", name)

    def operand(self, o: ins.Operand, dtype: DType, exact: bool = False) -> str:
        return literal(o, dtype, exact) if isinstance(o, Literal) else self.ref(o)

    def index(self, e: object, at: dict[str, str] | None = None) -> str:
        """Index ``e`` in C++; ``at`` renames symbols (a loop variable -> its block's start)."""

        def name(sym: str) -> str:
            if at and sym in at:
                return at[sym]
            for kind in ("var", "size", "value"):
                if (kind, sym) in self.names.names:
                    return self.names(kind, sym)
            raise KeyError(f"kernel {self.plan.name}: index symbol {sym} is not defined")

        return print_index(e, name, C_SYNTAX)

    # -- output

    def emit(self, line: str) -> None:
        self.lines.append("  " * self.depth + line)

    def open(self, header: str = "") -> None:
        self.emit(f"{header} {{" if header else "{")
        self.depth += 1

    def close(self, count: int = 1) -> None:
        for _ in range(count):
            self.depth -= 1
            self.emit("}")

    def for_(self, var: str, stop: str, start: str = "0", step: int = 1, name: str = "") -> None:
        v = name or self.names("var", var)
        inc = f"++{v}" if step == 1 else f"{v} += {step}"
        self.open(f"for (int64_t {v} = {start}; {v} < {stop}; {inc})")

    # -- instructions

    def define(self, name: str, expr: str) -> None:
        """``const T name = expr;``, or the element of the per-lane array that holds it."""
        if name in self.refs:
            self.emit(f"{self.refs[name]} = {expr};")
        else:
            self.emit(f"const {CTYPE[self.dtypes[name]]} {self.ref(name)} = {expr};")

    def fail(self, code: str, value: str) -> str:
        if self.exit_.startswith("goto"):
            self.uses_done = True
        return f"{{ fir_fail(&fir_err, &fir_errv, {code}, {value}); {self.exit_} }}"

    def instr(self, i: ins.Instr, exit_: str) -> None:
        """Emit ``i``; ``exit_`` leaves the current iteration when a check fails."""
        self.exit_ = exit_
        self.visit(i)

    def on_constant(self, i: ins.Constant) -> None:
        self.define(i.dst, literal(i.value, i.dtype, exact=True))

    def on_index_value(self, i: ins.IndexValue) -> None:
        value = self.index(i.index)
        if i.dtype is not DType.I64:
            value = CASTS[i.dtype].format(f"int64_t({value})")
        self.define(i.dst, value)

    def on_check_index(self, i: ins.CheckIndex) -> None:
        sym, src = self.ref(i.symbol), f"int64_t({self.ref(i.src)})"
        out = f"{sym} < 0 || {sym} >= {self.index(i.bound)}"
        if i.proven or i.mask is None:
            self.define(i.symbol, src)
        else:  # checked where its loads read; 0 (read by none of them) elsewhere
            mask = self.ref(i.mask)
            self.define(i.symbol, f"({mask} ? {src} : int64_t(0))")
            out = f"{mask} && ({out})"
        if not i.proven:
            self.emit(f"if ({out}) " + self.fail(str(i.code), sym))

    def on_acc_init(self, i: ins.AccInit) -> None:
        self.declare(self.accs[i.acc])

    def on_load(self, i: ins.Load) -> None:
        element = (
            self.turned.get(i.dst) or f"{self.names('buffer', i.buffer)}[{self.index(i.index)}]"
        )
        if i.buffer in self.scratch:  # a scratch row holds values as computed
            self.define(i.dst, element)
            return
        value = ops.load_expr(i.dtype, element)
        if i.dst in self.f16_in:  # converted with its block
            value = f"{self.f16_in[i.dst]}[l]"
        if i.mask is None and i.dtype.is_narrow_float and i.dst not in self.refs:
            self.bits[i.dst] = (i.dtype, element)
        if i.mask is not None:
            mask = self.ref(i.mask)
            if self.dtypes.get(i.mask, DType.BOOL) is not DType.BOOL:
                mask = f"fir_truth({mask})"
            other = literal(i.other if i.other is not None else 0, i.dtype, exact=True)
            value = f"{mask} ? {value} : {other}"  # the load runs only where the mask holds
        self.define(i.dst, value)

    def on_compute(self, i: ins.Compute) -> None:
        dtype = op_forms.operand_dtype(i.op, i.args, i.dtype, self.dtypes)
        integer = dtype.is_int
        args = []
        for a, (d, exact) in zip(i.args, op_forms.operand_forms(i.op, i.args, dtype)):
            text = self.operand(a, d, exact)
            if i.op in ops.LOGICAL and not d.is_bool:
                text = f"fir_truth({text})"
            args.append(text)
        if i.op == "cast":
            expr = CASTS[i.dtype].format(args[0])
            if i.dtype.is_narrow_float and i.dst not in self.refs:
                single = CTYPE[dtype] == "float"
                self.rounds[i.dst] = args[0] if single else f"float({args[0]})"
                self.bits[i.dst] = (i.dtype, store_expr(i.dtype, f"float({args[0]})"))
        else:
            expr = ops.apply(i.op, args, integer)
        if ins.checks_divisor(i):
            self.emit(f"if ({args[1]} == 0) " + self.fail(str(DIVISION_BY_ZERO), "0"))
        self.define(i.dst, expr)

    def on_store(self, i: ins.Store) -> None:
        element = f"{self.names('buffer', i.buffer)}[{self.index(i.index)}]"
        value = self.operand(i.value, i.dtype, exact=True)
        if i.buffer in self.scratch:  # a scratch row holds values as computed
            return self.emit(f"{element} = {value};")
        if i in self.f16_out:  # the float goes to the block's array, converted with the block
            assert isinstance(i.value, str)
            value = self.rounds.get(i.value) or self.ref(i.value)
            if CTYPE[self.dtypes[i.value]] != "float" and i.value not in self.rounds:
                value = f"float({value})"
            return self.emit(f"{self.f16_out[i]}[l] = {value};")
        if isinstance(i.value, str) and self.dtypes.get(i.value, i.dtype) != i.dtype:
            value = CASTS[i.dtype].format(value)
        bits = self.bits.get(i.value) if isinstance(i.value, str) else None
        stored = bits[1] if bits is not None and bits[0] is i.dtype else store_expr(i.dtype, value)
        self.emit(f"{element} = {stored};")

    # -- accumulators

    def declare(self, acc: Acc, suffix: str = "", size: str = "") -> None:
        """The state of ``acc``: scalars initialised, or (``size``) arrays ``NAME{suffix}[size]``
        left for the caller to initialise."""
        for name, c in zip(acc.names, acc.comps):
            t = CTYPE[c.dtype]
            self.emit(f"{t} {name}{suffix}[{size}];" if size else f"{t} {name} = {start_value(c)};")

    def state(self, acc: Acc) -> list[str]:
        """The C++ names of ``acc``'s state components where it lives now."""
        return acc.names if acc.lanes is None else [f"{n}_v[{acc.lanes}]" for n in acc.names]

    def merge(self, acc: Acc, other: str) -> str:
        """The statement that merges the state ``NAME{other}`` (``_v[l]``) into ``acc``'s
        scalars."""
        return ops.combine(acc.kind, acc.dtype, acc.names, [n + other for n in acc.names])

    def on_accumulate(self, i: ins.Accumulate) -> None:
        acc = self.accs[i.acc]
        value = self.operand(i.value, i.dtype, exact=True)
        position = self.index(i.rindex) if i.rindex is not None else "0"
        names = self.state(acc)
        self.emit(ops.update(acc.kind, acc.dtype, names, value, position, acc.uniform or ""))

    def on_acc_result(self, i: ins.AccResult) -> None:
        acc = self.accs[i.acc]
        results = [(c, value) for c, value in zip(acc.comps, self.state(acc)) if c.result]
        for dst, dtype, (c, value) in zip(i.dsts, i.dtypes, results):
            if c.dtype is not dtype or dtype.is_narrow_float:
                value = CASTS[dtype].format(value)
            self.define(dst, value)
