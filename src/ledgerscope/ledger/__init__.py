"""The boundary ledger: `schema`, `layout` (where each format's files lie), `write` (atomic
partitions), `verify` (manifest, footers, digests), `read` (DuckDB views and row checks),
`interchange` (JSONL).
"""
