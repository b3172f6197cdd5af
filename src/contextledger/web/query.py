"""What a session page is asked for: its filters, pages and search, and a page of a listing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Generic, TypeVar

from contextledger.model.records import Reduction
from contextledger.model.text import fmt_time

__all__ = ["Filters", "Paged", "SessionQuery", "paged"]

T = TypeVar("T")


@dataclass(frozen=True)
class Filters:
    """Which reductions a session page lists: by trigger, strategy, agent and time (empty: all)."""

    triggers: tuple[str, ...] = ()
    strategies: tuple[str, ...] = ()
    agents: tuple[str, ...] = ()
    since: float | None = None
    """Epoch seconds (the chart's clock), inclusive."""
    until: float | None = None

    @property
    def active(self) -> bool:
        """Whether any filter is set."""
        return bool(self.triggers or self.strategies or self.agents) or self.since is not None or self.until is not None

    def admits(self, r: Reduction) -> bool:
        """Whether the reduction passes every filter."""
        t = r.created_at.timestamp()
        return (
            (not self.triggers or r.trigger in self.triggers)
            and (not self.strategies or r.strategy in self.strategies)
            and (not self.agents or r.agent_id in self.agents)
            and (self.since is None or t >= self.since)
            and (self.until is None or t <= self.until)
        )

    def params(self) -> list[tuple[str, str]]:
        """The filters as query parameters."""
        out = [("trigger", t) for t in self.triggers] + [("strategy", s) for s in self.strategies]
        out += [("agent_filter", a) for a in self.agents]
        if self.since is not None:
            out.append(("from", f"{self.since:.3f}"))
        if self.until is not None:
            out.append(("to", f"{self.until:.3f}"))
        return out

    def range_text(self) -> str:
        """The time range in words (empty when none)."""
        if self.since is None and self.until is None:
            return ""
        start = fmt_time(datetime.fromtimestamp(self.since, UTC)) if self.since is not None else "the start"
        end = fmt_time(datetime.fromtimestamp(self.until, UTC)) if self.until is not None else "now"
        return f"{start} – {end}"


@dataclass(frozen=True)
class SessionQuery:
    """What a session page was asked for (its query parameters)."""

    agent: str | None = None
    filters: Filters = field(default_factory=Filters)
    rpage: int = 1
    hpage: int = 1
    q: str = ""
    spage: int = 1
    unit: str = "tokens"
    """What the chart's y axis counts: ``tokens`` or ``messages``."""


@dataclass
class Paged(Generic[T]):
    """One page of a listing."""

    rows: list[T]
    page: int
    pages: int
    total: int


def paged(items: Sequence[T], page: int, per_page: int) -> Paged[T]:
    """Page ``page`` (1-based, clamped) of ``items``; ``per_page`` 0 means one page of everything."""
    if per_page <= 0:
        return Paged(rows=list(items), page=1, pages=1, total=len(items))
    pages = max(1, -(-len(items) // per_page))
    current = min(max(page, 1), pages)
    return Paged(
        rows=list(items[(current - 1) * per_page : current * per_page]), page=current, pages=pages, total=len(items)
    )
