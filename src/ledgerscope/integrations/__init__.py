"""Optional hooks that fill :class:`ledgerscope.trace.Recorder` from other frameworks (their own
dependencies, installed with ``ledgerscope[ingest]``)."""
