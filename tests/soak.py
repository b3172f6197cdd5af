"""How many examples a property runs: the same count every run, many more in soak mode.

``CONTEXTLEDGER_SOAK=1`` (``CONTEXTLEDGER_SOAK=1 scripts/test``) multiplies every
property's ``max_examples`` by :data:`FACTOR` (``CONTEXTLEDGER_SOAK_FACTOR``, default
10) and selects the ``soak`` Hypothesis profile, so every property explores far more
inputs; the reliability suite also raises its own counts (kills, appends, rounds).
Write ``@settings(max_examples=examples(40))`` rather than a bare number, so the count
scales.
"""

from __future__ import annotations

import os

__all__ = ["FACTOR", "SOAK", "examples"]

SOAK = os.environ.get("CONTEXTLEDGER_SOAK", "").strip().lower() in {"1", "true", "yes"}
"""Whether the suite runs in soak mode."""

FACTOR = max(1, int(os.environ.get("CONTEXTLEDGER_SOAK_FACTOR", "10"))) if SOAK else 1
"""How many times more examples each property runs in soak mode (1 otherwise)."""


def examples(count: int) -> int:
    """``count`` examples, times :data:`FACTOR` in soak mode."""
    return count * FACTOR
