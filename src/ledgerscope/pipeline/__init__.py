"""The sweep's stages (one module per stage) and their orchestration: `cascade` runs one arm at one
phase, `sweep` every phase, `rerun` one record.
"""
