"""Utilities every layer may use: errors, atomic writes, safe text, SQL literals, intervals. Imports
nothing else of ledgerscope.
"""
