"""Utilities every layer may use: errors, atomic writes, safe text, SQL literals and small tables,
intervals, one BLAS thread. Imports nothing else of ledgerscope.
"""
