"""Statistics over phases: `metrics` (definitions), `resampling` and `bootstrap` (paired, clustered),
`compare` (candidate minus baseline), `release` (the preregistered rule).
"""
