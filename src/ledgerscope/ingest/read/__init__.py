"""Reading what a pipeline wrote, strictly: trace lines, the chunk store, located problems.

``lines`` (a JSON-lines reader, ``file:line: field: reason``), ``traceformat`` (trace files, line by
line), ``fastread`` (the same in bulk through DuckDB, kept equal by a test), ``chunkstore`` (the
index's chunks), ``hints`` (the commonest wrong document id).
"""
