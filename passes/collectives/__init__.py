"""Tensor-level rewrites of communication: ``chunk-collectives``."""
