"""Stage 1, tensor level → loop level: ``decompose`` (composite ops → primitive ops, with its rule
table and the builder the rules write with) and ``lower`` (each op → a loop nest over index
expressions, with its per-op table, the view algebra, the extern fallbacks and the body builder).
"""
