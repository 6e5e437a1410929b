"""Write docs/ops.md from the op table in fir.ir.ops.

    python docs/gen_ops.py            # rewrites docs/ops.md next to this script
    python docs/gen_ops.py --check    # exit 1 if docs/ops.md is out of date

The table is the source of truth; never edit docs/ops.md by hand.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

from fir.ir.ops import OPS, AttrSpec, OpSpec
from fir.ir.printer import attr_value_str

OUT = Path(__file__).with_name("ops.md")

# Categories in the order they are documented; a category missing here is listed last.
CATEGORIES: dict[str, str] = {
    "unary": "Elementwise, one operand; the result has the operand's shape.",
    "binary": "Elementwise, two operands of one dtype (a literal takes that dtype); shapes broadcast.",
    "compare": "Elementwise comparison of two operands of one dtype; shapes broadcast; result bool.",
    "ternary": "`where %cond, %a, %b`: a bool condition selects between two operands of one dtype; shapes broadcast.",
    "cast": "Dtype conversion; the result dtype is the declared result type's (`: f16[...]` at tensor level, `: f16` in a loop body). "
    "Every back end converts as the interpreter does (`tests/ir/test_casts.py` checks the values below on each):\n\n"
    "- float → float: round to nearest even; beyond the target's range, ±inf; NaN stays NaN.\n"
    "- integer or bool → float: round to nearest.\n"
    "- integer → integer: the low bits of the two's complement value (`300 → i8` is 44, `-1 → u8` is 255); bool → 0 or 1.\n"
    "- anything → bool: nonzero is true (NaN too).\n"
    "- float → signed integer (i8, i16, i32, i64): round toward zero; a value beyond the type's range "
    "saturates at its minimum or maximum (±inf too); NaN gives 0. `1e20 → i32` is 2147483647, "
    "`-inf → i8` is -128, `NaN → i64` is 0.\n"
    "- float → u8: the float → i64 conversion above, then its low 8 bits: `-1.5 → u8` is 255, "
    "`300.7 → u8` is 44, NaN gives 0.\n\n"
    "Why this rule: C++'s and LLVM's plain conversions (`fptosi`) leave a float outside the target's range "
    "undefined, and eager PyTorch's `.to()` is that C++ conversion, so eager has no one answer to copy: "
    "on an x86 CPU it gives INT_MIN for i32 and i64 (`1e20`, `inf` and `NaN` alike) and the low bits "
    "of an int32 conversion for i8 and i16 (`300.7 → i8` is 44), while the GPU's conversion instruction (PTX `cvt`) saturates. "
    "Saturating with NaN → 0 is defined the same everywhere: it is LLVM's `llvm.fptosi.sat`, PTX's "
    "`cvt`, Rust's `as` and WebAssembly's `trunc_sat`, so the LLVM back end is one "
    "intrinsic and the C++ and Triton back ends a few selects. u8 keeps PyTorch's rule because PyTorch "
    "defines it on every device (it converts a float to uint8 through int64, so negative values wrap, "
    "`torch.tensor(-1.5).to(torch.uint8)` is 255). Values in range, the only ones eager defines for "
    "the signed types, give eager's result on every back end.",
    "reduction": "Reduce over `dims` (all dimensions when absent); `keepdim` keeps reduced dimensions as size 1. `argmax`/`argmin` take one optional `dim` instead (absent: over the flattened tensor) and return i64.",
    "view": "Shape, layout and data-movement ops (`cat` and `pad` included); `lower` turns them into index expressions and masked loads, so they never reach loop level.",
    "indexing": "Reads driven by an index tensor (i64 or i32); `lower` turns them into `indirect` loads.",
    "creation": "Tensors made from attributes or literals only; the shape and dtype come from the result type.",
    "composite": "Higher-level ops (activations, softmax, normalization, losses, matmul family) that `decompose` rewrites into the ops above or into extern calls.",
}

# Typing rules written as dedicated functions in fir.ir.ops, keyed by the function's name; an op
# whose rule is not listed here (or is renamed) shows "—".
NAMED_RULES = {
    "_where": "bool cond, any → same",
    "_cast": "any → declared",
    "_clamp": "non-bool → same",
    "_same_float": "float → same",
    "_softmax_like": "float → same",
    "_arg_reduction": "non-bool → i64",
    "_norm_op": "float → same",
    "_batch_norm": "float → same",
    "_group_norm": "float → same",
    "_loss": "float, i64/i32 target → same",
    "_gather": "any, i64/i32 index → same",
    "_index_select": "any, i64/i32 index → same",
    "_embedding": "any, i64/i32 index → same",
    "_matmul": "non-bool → same",
    "_masked_fill": "any, bool mask → same",
    "_addmm": "any → same",
    "_linear": "any → same",
    "_full": "declared",
    "_arange": "declared",
    "_constant": "declared",
}

RULES = {
    "float": "float",
    "numeric": "non-bool",
    "int": "int or bool",
    "any": "any",
}


def operand_count(spec: OpSpec) -> str:
    lo, hi = spec.min_operands, spec.max_operands
    if hi is None:
        return f"≥{lo}"
    if lo == hi:
        return str(lo)
    return f"{lo}–{hi}"


def attr_text(name: str, a: AttrSpec) -> str:
    text = f"`{name}`: {a.kind}"
    if a.required:
        text += ", required"
    else:
        text += f", default `{attr_value_str(a.default)}`"
    if a.choices:
        text += ", one of " + "/".join(f"`{attr_value_str(c)}`" for c in a.choices)
    return text


def dtype_rule(spec: OpSpec) -> str:
    """Operand dtypes → result dtype, where the typing rule is a parameterised closure."""
    infer = spec.infer
    names = getattr(getattr(infer, "__code__", None), "co_freevars", ())
    cells: dict[str, Any] = {}
    for n, c in zip(names, getattr(infer, "__closure__", None) or ()):
        with contextlib.suppress(ValueError):  # an empty cell
            cells[n] = c.cell_contents
    rule, result = cells.get("rule"), cells.get("result")
    if rule in RULES and result in ("same", "bool"):
        return f"{RULES[rule]} → {result}"
    owner = getattr(infer, "__qualname__", "").split(".")[0]
    return NAMED_RULES.get(owner, "")


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render() -> str:
    by_cat: dict[str, list[OpSpec]] = {}
    for spec in OPS.values():
        by_cat.setdefault(spec.category, []).append(spec)
    order = [c for c in CATEGORIES if c in by_cat] + sorted(
        c for c in by_cat if c not in CATEGORIES
    )

    out = [
        "# FIR ops",
        "",
        "<!-- Generated by docs/gen_ops.py from fir.ir.ops.OPS; do not edit by hand. -->",
        "",
        f"Every tensor-level op of the op table ({len(OPS)} ops). The syntax of an op statement is in",
        "[language.md](language.md#tensor-level-ops); typing rules shared by all ops are in",
        "[language.md](language.md#typing-rules).",
        "",
        "Columns: **operands**: how many operands (tensor values or literals) the op takes, `≥n` for",
        "variadic; **attributes**: name, kind, default or *required*, allowed choices;",
        "**dtypes**: operand dtype rule → result dtype (`same`: the operands' dtype; `declared`: the",
        "declared result type's), where the table states it (`—`: see the op's doc; views keep the",
        "operand's dtype); **results**: number of results; **loop body**: whether the op is also a scalar op of",
        "loop bodies (`%2 = add %0, %1`). Besides these, loop bodies have the special ops `load`,",
        "`indirect`, `index`, `constant` and `cast` (see language.md).",
        "",
        "Attribute kinds: `int`, `float`, `bool`, `str` (a quoted string), `ints` (a list of ints),",
        "`optfloat` (a float or `none`), `dim` (an integer expression over size symbols), `optdim`",
        "(`dim` or `none`), `dtype` (a dtype name), `any` (any attribute value).",
        "",
        "Categories: " + ", ".join(f"[{c}](#{c})" for c in order) + ".",
        "",
    ]
    for cat in order:
        specs = by_cat[cat]
        out += [f"## {cat}", "", CATEGORIES.get(cat, "(no description)"), ""]
        out.append("| op | operands | attributes | dtypes | results | loop body | doc |")
        out.append("| --- | --- | --- | --- | --- | --- | --- |")
        for s in specs:
            attrs = "<br>".join(attr_text(n, a) for n, a in s.attrs.items()) or "—"
            out.append(
                "| "
                + " | ".join(
                    cell(x)
                    for x in (
                        f"`{s.name}`",
                        operand_count(s),
                        attrs,
                        dtype_rule(s) or "—",
                        str(s.num_results),
                        "yes" if s.scalar else "no",
                        s.doc or "",
                    )
                )
                + " |"
            )
        out.append("")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT} is out of date; run python {Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT} ({len(OPS)} ops)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
