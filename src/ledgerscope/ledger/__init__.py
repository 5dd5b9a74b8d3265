"""The boundary ledger: `schema`, `write` (atomic partitions), `verify` (manifest, footers,
digests), `read` (DuckDB views and row checks), `interchange` (JSONL).
"""
