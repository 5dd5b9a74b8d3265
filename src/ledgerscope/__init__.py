"""ledgerscope: which RAG answers broke, at which stage, because of which chunk boundary."""

__version__ = "0.1.0"
