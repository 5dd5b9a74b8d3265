"""One BLAS thread for a block of small matrix products.

The cascade's per-question products and the bootstrap's replicates are small and run several
at a time: a BLAS thread pool per call would spin up and contend for the cores instead.
"""

from __future__ import annotations

import contextlib
from typing import Any


def single_threaded_blas() -> contextlib.AbstractContextManager[Any]:
    """A context manager limiting BLAS to one thread inside it (a no-op without threadpoolctl)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")
