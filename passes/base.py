"""What a pass is: a class with a kebab-case name, typed options and ``apply(module)``."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar

from fir.ir.errors import Location, PipelineError
from fir.ir.graph import Module


class OptionError(PipelineError):
    """A pass rejects the value of one of its options; the driver points at that value."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(message)
        self.option = option


@dataclass(frozen=True)
class Option:
    """A typed pass option. ``type`` is one of bool, int, float, str, list (of str)."""

    type: type
    default: Any
    help: str = ""

    def type_name(self) -> str:
        return {bool: "bool", int: "int", float: "float", str: "string", list: "list"}[self.type]


class Pass:
    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    options: ClassVar[dict[str, Option]] = {}
    # The level of program the pass works on: "any", or "loop" for a pass that does nothing
    # useful before 'lower' (it acts on loop nodes only). The pipeline refuses to run a "loop"
    # pass on a function that has tensor-level ops and no loop node yet.
    input_level: ClassVar[str] = "any"
    # Where the pass is named in the pipeline text, for errors (set by parse_pipeline).
    pipeline_loc: Location | None = None
    # Whether the pass explains its decisions in reports (``fuse``): a caller that sets
    # ``collect_reports`` finds one per function in ``reports`` after the run (fir-opt
    # --fusion-report, the frontend's fusion log), without naming the pass.
    reports_decisions: ClassVar[bool] = False
    # Whether the pass plans memory (``plan-memory``): ``fir-opt --stats`` then prints the peak
    # before and after planning, without naming the pass.
    plans_memory: ClassVar[bool] = False

    def __init__(self, **values: Any) -> None:
        for key, opt in self.options.items():
            setattr(self, _attr_name(key), values.get(key, opt.default))
        unknown = set(values) - set(self.options)
        if unknown:
            raise TypeError(f"unknown option(s) for pass {self.name}: {sorted(unknown)}")
        self.statistics: dict[str, int] = {}
        self.collect_reports = False
        self.reports: list[Any] = []

    def apply(self, module: Module) -> Module:
        raise NotImplementedError

    def option_values(self) -> dict[str, Any]:
        return {k: getattr(self, _attr_name(k)) for k in self.options}


def _attr_name(option: str) -> str:
    return option.replace("-", "_")


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while a pass allocates many small objects it frees by
    reference counting: on large graphs the collections they trigger walk the whole program,
    find nothing to free and cost more than the pass (``fuse`` on 10,000 nodes: 1.7 s with
    them, 1.0 s without; ``inline`` on 10,000 ops: twice its time)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
