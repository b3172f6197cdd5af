"""What a store notes on the current span: kept apart from the spans, which read the stores' types.

The stores import this module, so it imports nothing of theirs (the import graph stays a tree).
"""

from __future__ import annotations

from contextledger.telemetry import names
from contextledger.telemetry.state import active

__all__ = ["reply_lost"]


def reply_lost(applied: bool) -> None:
    """Note on the current commit span how a lost reply was resolved (the store read the changeset id back)."""
    if active() is None:
        return
    from opentelemetry.trace import get_current_span

    span = get_current_span()
    span.set_attribute(names.COMMIT_REPLY_LOST, "applied" if applied else "not_applied")
    span.add_event("reply_lost", {"applied": applied})
