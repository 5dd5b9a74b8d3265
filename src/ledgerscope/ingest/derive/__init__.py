"""What ledgerscope computes from checked traces: every row of the ledger, never taken on trust.

``tables`` (the inputs as DuckDB temp tables), ``checks`` (across files), ``resolve`` (each chunk
onto a source interval, or reported), ``coverage`` (support flags in SQL), ``verdicts`` (what
Python decides once per distinct input), ``tokens``, ``rows`` (candidates, units, boundaries,
records), ``oracle`` (only when the user names a generator for it).
"""
