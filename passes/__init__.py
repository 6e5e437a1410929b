"""FIR's passes, in the order the pipeline runs them.

The top of the package is the pass infrastructure: :mod:`.base` (what a pass is, typed options),
:mod:`.registry` (pass and pipeline names, imported lazily), :mod:`.pipeline` (pipeline text →
pass instances, running them with verification) and :mod:`.verify` (the ``verify`` pass). Each
subpackage is one stage and holds its passes with the helpers only they use; passes/README.md
says why the cut is where it is.
"""
