"""Analyses of a ledger: the diagnosis (tree, evidence, SQL form, record view, --where query),
survival, reversals, statistics.
"""
