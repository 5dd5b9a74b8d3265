"""Inputs: versioned sources, exact coordinate translation, fixtures (gold spans and sufficient sets),
importers, validation.
"""
