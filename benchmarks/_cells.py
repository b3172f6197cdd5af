"""How the report writes a contender's name and a figure in a cell: shared by ``_report`` and its parts."""

from __future__ import annotations

from collections.abc import Callable

from _contenders import DEFERRED
from _run import Run

__all__ = ["contender_label", "figure", "per_clock", "times"]


def contender_label(run: Run, key: str) -> str:
    """The contender ``key``'s label in ``run`` (the key itself when the run has no such contender)."""
    base, deferred, _ = key.partition(DEFERRED)
    label = next((s.label for s in run.specs if s.key == base), base)
    return f"{label}, count deferred to the next commit" if deferred else label


def figure(value: float | None, digits: int = 2, suffix: str = "") -> str:
    """``value`` with ``digits`` decimals and ``suffix``, or ``n/a``."""
    return "n/a" if value is None else f"{value:.{digits}f}{suffix}"


def times(value: float | None) -> str:
    """A ratio (``2.20x``), or ``n/a``."""
    return figure(value, 2, "x")


def per_clock(
    verdict: Callable[[bool | None], str], wall: float | None, cpu: float | None, ok: Callable[[float], bool]
) -> str:
    """One verdict per clock: ``wall met, CPU **missed**``."""
    return f"wall {verdict(None if wall is None else ok(wall))}, CPU {verdict(None if cpu is None else ok(cpu))}"
