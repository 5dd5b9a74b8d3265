"""Traces of a pipeline ledgerscope did not run (``ledgerscope-trace/1`` lines, OpenInference spans)
into standard ledgers: read and check, locate chunks in the sources, derive flags and verdicts, write.
"""
