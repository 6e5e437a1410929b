"""Passes that run at any stage and leave the program smaller: ``canonicalize`` (folding and
simplification), ``cse`` (common subexpressions) and ``dce`` (dead nodes, kernel-aware)."""
