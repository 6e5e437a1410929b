"""FIR: a fusion compiler for tensor programs with a textual IR."""
