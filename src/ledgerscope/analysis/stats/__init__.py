"""Statistics over phases: `metrics` (definitions), `resampling`, `passes` and `bootstrap` (paired,
clustered), `compare` (candidate minus baseline), `release/` (the preregistered rule and its decision).
"""

#: the paired bootstrap's settings when nothing else says: ``compare``, ``report`` and the TUI's stats
#: pane all use these (a release rule declares its own); no import here, so any layer can read them
DEFAULT_N_RESAMPLES = 10_000
DEFAULT_SEED = 0
