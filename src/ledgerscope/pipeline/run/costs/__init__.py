"""What a sweep will cost, before it runs: price tables, the estimate (with its timing
calibration) and the guard that stops a sweep at its caps. What it did cost is recorded by
:mod:`ledgerscope.pipeline.run.resources` and :mod:`ledgerscope.pipeline.run.runs`."""
