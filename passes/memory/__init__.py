"""Stage 4, storage: ``plan-memory`` (frees after last use, buffer reuse, in-place writes), on top
of the liveness analysis in :mod:`fir.ir.memory_plan`."""
