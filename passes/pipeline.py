"""Pipeline text → pass instances: ``decompose,inline{max-reads=4 disable},fuse{explain}``.

Options are ``key=value`` or a bare ``flag`` (true), separated by spaces inside the braces; a
list value is comma-separated (``ops=softmax,gelu``). A name that is a registered pipeline expands to its passes. Errors point into the text.
"""

from __future__ import annotations

import difflib
import gc
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from fir.ir.errors import FirError, Location, PipelineError
from fir.ir.graph import LoopNode, Module, TensorOp

from . import registry
from .base import Option, OptionError, Pass

# the timing entry of the verification that follows a pass: ``("fuse: verify", seconds)``
VERIFY_SUFFIX = ": verify"

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


@dataclass
class PassSpec:
    name: str
    options: dict[str, Any]
    column: int


@dataclass
class Pipeline:
    passes: list[Pass] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.passes)

    def run(
        self,
        module: Module,
        verify_each: bool = True,
        after_pass: Callable[[Pass, Module], None] | None = None,
        timings: list[tuple[str, float]] | None = None,
    ) -> Module:
        from fir.ir.verifier import verify_module

        with _quiet_gc():
            return self._run(module, verify_each, after_pass, timings, verify_module)

    def _run(
        self,
        module: Module,
        verify_each: bool,
        after_pass: Callable[[Pass, Module], None] | None,
        timings: list[tuple[str, float]] | None,
        verify_module: Callable[[Module], None],
    ) -> Module:
        for p in self.passes:
            start = time.perf_counter()
            if p.input_level == "loop":
                _check_loop_level(p, module)
            module = p.apply(module)
            applied = time.perf_counter()
            if timings is not None:
                timings.append((p.name, applied - start))
            if verify_each:
                try:
                    verify_module(module)
                except FirError as e:
                    raise FirError(f"after pass '{p.name}': {e.message}", e.loc) from None
                if timings is not None:
                    timings.append((f"{p.name}{VERIFY_SUFFIX}", time.perf_counter() - applied))
            if after_pass is not None:
                after_pass(p, module)
        return module


def _check_loop_level(p: Pass, module: Module) -> None:
    """A pass that works on loop nodes would leave a function that has tensor-level ops and no
    loop node yet (``lower`` has not run) unchanged and say nothing: refuse it, pointing at the
    pass in the pipeline text (else at the first tensor-level op)."""
    for g in module.funcs:
        first: TensorOp | None = None
        for n in g.nodes:
            if isinstance(n, LoopNode):
                first = None
                break
            if first is None and isinstance(n, TensorOp):
                first = n
        if first is None:
            continue
        names = ", ".join("%" + r.name for r in first.results)
        where = f" at {first.loc}" if p.pipeline_loc is not None and first.loc is not None else ""
        lowering = (registry.pipeline_text("lowering") or "").split(",")
        if p.name in lowering:
            fix = "run 'lower' before it, or the 'lowering' pipeline, which includes it"
        else:
            fix = f"run the 'lowering' pipeline before it, e.g. -p 'lowering,{p.name}'"
        raise PipelineError(
            f"pass '{p.name}' works on loop-level programs, but @{g.name} is at tensor level "
            f"({names} = {first.op}{where}); {fix}",
            p.pipeline_loc or first.loc,
        )


@contextmanager
def _quiet_gc() -> Iterator[None]:
    """No cyclic garbage collection while passes run. A 10,000-node program is millions of
    objects; the collections that the passes' allocations trigger rescan them and find little
    to free (passes drop nodes, which reference counting frees), and cost a fifth of the
    pipeline's time (measured on 10,000-op programs: 1.47 s with them, 1.20 s without, for 1%
    more peak memory; 6.0 s and 4.4 s for 16% more on a heavier one). Whatever cyclic garbage
    the passes leave is collected after the run, by the next collection. The objects alive
    before the run are frozen too, so that the first collection after it does not rescan the
    whole program."""
    enabled = gc.isenabled()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
        gc.unfreeze()


def parse_pipeline(text: str, source: str = "<pipeline>") -> Pipeline:
    specs = _parse_specs(text, source, depth=0)
    passes = [_instantiate(s, text, source) for s in specs]
    return Pipeline(passes)


def _error(msg: str, text: str, source: str, column: int) -> PipelineError:
    return PipelineError(msg, Location(source, 1, column + 1, text))


def _parse_specs(text: str, source: str, depth: int) -> list[PassSpec]:
    specs: list[PassSpec] = []
    i, n = 0, len(text)

    def skip_ws(k: int) -> int:
        while k < n and text[k] in " \t\n":
            k += 1
        return k

    i = skip_ws(i)
    if i >= n:
        return specs
    while True:
        i = skip_ws(i)
        m = _NAME.match(text, i)
        if not m:
            what = f"'{text[i]}'" if i < n else "end of pipeline"
            raise _error(f"expected a pass name, got {what}", text, source, i)
        name, col = m.group(), i
        i = skip_ws(m.end())
        options: dict[str, Any] = {}
        if i < n and text[i] == "{":
            i, options = _parse_options(text, source, i + 1)
            i = skip_ws(i)
        expansion = registry.pipeline_text(name)
        if expansion is not None and not registry.is_pass(name):
            if options:
                raise _error(f"pipeline '{name}' takes no options", text, source, col)
            if depth > 8:
                raise _error(f"pipeline '{name}' expands into itself", text, source, col)
            inner = _parse_specs(expansion, f"<pipeline {name}>", depth + 1)
            specs.extend(PassSpec(s.name, s.options, col) for s in inner)
        else:
            specs.append(PassSpec(name, options, col))
        if i >= n:
            break
        if text[i] != ",":
            raise _error(f"expected ',' between passes, got '{text[i]}'", text, source, i)
        i += 1
    return specs


def _parse_options(text: str, source: str, i: int) -> tuple[int, dict[str, Any]]:
    options: dict[str, Any] = {}
    n = len(text)
    while True:
        while i < n and text[i] in " \t":
            i += 1
        if i >= n:
            raise _error("unterminated option list, expected '}'", text, source, i)
        if text[i] == "}":
            return i + 1, options
        m = _NAME.match(text, i)
        if not m:
            raise _error(f"expected an option name, got '{text[i]}'", text, source, i)
        key, kcol = m.group(), i
        i = m.end()
        if i < n and text[i] == "=":
            i += 1
            start = i
            depth = 0
            while i < n and (depth > 0 or text[i] not in " \t}"):
                if text[i] == "[":
                    depth += 1
                elif text[i] == "]":
                    depth -= 1
                i += 1
            raw: Any = text[start:i]
            vcol = start
            if raw == "":
                raise _error(f"option '{key}' has no value", text, source, start)
        else:
            raw, vcol = True, kcol
        if key in options:
            raise _error(f"option '{key}' given twice", text, source, kcol)
        options[key] = (raw, kcol, vcol)


def _instantiate(spec: PassSpec, text: str, source: str) -> Pass:
    if not registry.is_pass(spec.name):
        names = registry.pass_names() + list(registry.pipeline_names())
        hint = difflib.get_close_matches(spec.name, names, n=1)
        extra = f"; did you mean '{hint[0]}'?" if hint else ""
        raise _error(
            f"unknown pass '{spec.name}'{extra} (passes: {', '.join(registry.pass_names())}; "
            f"pipelines: {', '.join(registry.pipeline_names())})",
            text,
            source,
            spec.column,
        )
    cls = registry.get_pass_class(spec.name)
    values: dict[str, Any] = {}
    for key, (raw, col, value_col) in spec.options.items():
        opt = cls.options.get(key)
        if opt is None:
            known = ", ".join(f"{k} ({o.type_name()})" for k, o in cls.options.items()) or "none"
            raise _error(
                f"pass '{spec.name}' has no option '{key}' (options: {known})", text, source, col
            )
        try:
            values[key] = _convert(opt, raw)
        except ValueError:
            raise _error(
                f"option '{key}' of pass '{spec.name}' takes {_article(opt.type_name())}, got '{raw}'",
                text,
                source,
                value_col,
            ) from None
    try:
        p = cls(**values)
    except OptionError as e:
        # the pass rejected an option value in its constructor: point at that value
        where = spec.options.get(e.option)
        raise _error(e.message, text, source, where[2] if where else spec.column) from None
    p.pipeline_loc = Location(source, 1, spec.column + 1, text)
    return p


def _article(word: str) -> str:
    return ("an " if word[0] in "aeiou" else "a ") + word


def _convert(opt: Option, raw: Any) -> Any:
    if opt.type is bool:
        if raw is True or raw in ("true", "1"):
            return True
        if raw in ("false", "0"):
            return False
        raise ValueError(raw)
    if raw is True:
        raise ValueError(raw)
    if opt.type is int:
        return int(raw)
    if opt.type is float:
        return float(raw)
    if opt.type is list:
        body = raw[1:-1] if raw.startswith("[") and raw.endswith("]") else raw
        return [x.strip() for x in body.split(",") if x.strip()]
    return str(raw)
