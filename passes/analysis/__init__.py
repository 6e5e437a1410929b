"""Stage 2, the analysis every later pass reads: ``deps`` (reads, writes, users and ordering
edges of each node). ``dce``, ``fuse``, ``reorder`` and ``plan-memory`` import it; it imports
nothing but the IR. Liveness (buffer sizes, last uses, peak memory, what a memory plan means)
is part of the IR: :mod:`fir.ir.memory_plan`."""
