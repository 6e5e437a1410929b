"""Stage 2, the analyses every later pass reads: ``deps`` (reads, writes, users and ordering
edges of each node) and liveness (buffer sizes, last uses, peak memory). ``dce``, ``fuse``,
``reorder`` and ``plan-memory`` import them; they import nothing but the IR."""
