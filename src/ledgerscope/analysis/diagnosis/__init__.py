"""The ten-step diagnosis: `tree` (the definition), `evidence` (what shows each step), `feed` (ledger
rows to its inputs), `sql` (the same in DuckDB for whole ledgers), `record_view` and `query` (the
--where language).
"""
