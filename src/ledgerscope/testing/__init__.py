"""Helpers for tests and benchmarks (synthetic ledgers). Nothing in the shipped data flow imports
this package.
"""
